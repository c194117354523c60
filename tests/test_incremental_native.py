"""The nodes' native-GPU pods (non-worker pods using GPUs outside TensorFusion) in an incremental
state: carried from the previous state and changed by the pods that came or went, equal to a full
build after a change of what they are keyed on (a native pod on a node) and of what they are not
(any other pod), without a scan of every pod."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.test_refresh_reuse import Objects, assert_same_state, full_build
from tftui.engine.state import ClusterState
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.ui.load.data import StateReader


def native_pod(name: str, node: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }


def natives(state: ClusterState) -> dict[str, list[str]]:
    return {n: list(v.native_gpu_pods) for n, v in state.nodes.items() if v.native_gpu_pods}


def test_native_gpu_pods_follow_the_pods_that_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    objs = generate_objects(9, 30, DEFAULT_NOW)
    nodes = [o["metadata"]["name"] for o in objs if o["kind"] == "GPUNode"]
    objs += [native_pod("cuda-a", nodes[0]), native_pod("cuda-b", nodes[1]), native_pod("cuda-c", nodes[0])]
    cluster = Objects(objs)
    reader = StateReader()
    reader.read(cluster)

    calls = {"n": 0, "on": 0}

    def step(change: Any) -> ClusterState:
        change()
        calls["on"] = 1
        _, state = reader.read(cluster)
        calls["on"] = 0
        fresh = full_build(objs)
        assert_same_state(state, fresh)
        assert natives(state) == natives(fresh)
        return state

    def pod(name: str) -> int:
        return next(i for i, o in enumerate(objs) if o["metadata"]["name"] == name)

    def end(name: str) -> None:
        i = pod(name)
        objs[i] = ended = copy.deepcopy(objs[i])
        ended["status"]["phase"] = "Succeeded"

    # the first update after a full build scans once; the later ones carry what it found
    step(lambda: objs.append(native_pod("cuda-d", nodes[2])))
    native_node = ClusterState._native_gpu_node

    def counting(self: ClusterState, p: dict[str, Any]) -> str | None:
        calls["n"] += calls["on"]
        return native_node(self, p)

    monkeypatch.setattr(ClusterState, "_native_gpu_node", counting)
    state = step(lambda: end("cuda-a"))  # what the lists are keyed on: a native pod on a node
    assert natives(state)[nodes[0]] == ["default/cuda-c"]
    state = step(lambda: objs.insert(pod("cuda-c"), native_pod("cuda-e", nodes[0])))  # in pod order
    assert natives(state)[nodes[0]] == ["default/cuda-e", "default/cuda-c"]
    state = step(lambda: objs.pop(pod("cuda-d")))
    assert nodes[2] not in natives(state)
    plain = next(
        i for i, o in enumerate(objs) if o["kind"] == "Pod" and o["metadata"]["name"].startswith("cuda")
    )
    before = natives(state)
    # what they must not be keyed on: another pod (a native one's unrelated field, any worker)
    objs[plain] = noted = copy.deepcopy(objs[plain])
    noted["metadata"]["annotations"] = {"note": "x"}
    state = step(lambda: None)
    assert natives(state) == before
    assert 0 < calls["n"] <= 3 * 4  # per step: the new and the gone pod, once each (no scan of all pods)
    # a node that goes takes its pods' native status with it: the full scan again, still equal
    gone = nodes[1]
    step(lambda: objs.__setitem__(slice(None), [o for o in objs if o["metadata"].get("name") != gone]))
