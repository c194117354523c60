"""`engine.incremental.update_state` gives exactly the full build's state:
checked on every state a what-if run with churn, defrag evictions and node releases builds."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tftui.engine import incremental
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.model.dump import Snapshot
from tftui.runtime.whatif import SimConfig, parse_policy, simulate
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects


def assert_same_state(inc: ClusterState, full: ClusterState) -> None:
    """Equal views, the same dict and list order, and views over the very same objects."""
    assert inc.warnings == full.warnings
    for name in ("workers", "gpus", "nodes", "workloads", "pools", "templates", "claims", "profiles"):
        a, b = getattr(inc, name), getattr(full, name)
        assert list(a) == list(b), name
        for key in b:
            assert a[key] == b[key], f"{name}[{key}]"
    for name in ("nodes", "gpus", "workers", "pools"):
        a, b = getattr(inc, name), getattr(full, name)
        assert all(a[k].obj is b[k].obj for k in b), name
    assert all(inc.nodes[n].node_obj is full.nodes[n].node_obj for n in full.nodes)
    assert all(inc.workloads[k].obj is full.workloads[k].obj for k in full.workloads)
    assert inc.clusters == full.clusters and inc.pdbs == full.pdbs
    assert {k: list(v) for k, v in inc.gpus_by_pool_label.items()} == full.gpus_by_pool_label
    assert inc.compaction_sums == full.compaction_sums
    assert inc.snapshot.objects == full.snapshot.objects
    assert inc == full
    for (key, value), pods in inc.labelled_pods().items():  # carried over from the previous state
        assert [id(p) for p in pods] == [id(p) for p in full.pods_labelled(key, value)]


@pytest.mark.parametrize("policy", ["CompactFirst+defrag", "LowLoadFirst+defrag=60"])
def test_incremental_state_equals_the_full_build_at_every_step(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = incremental.update_state
    runs = {"checked": 0, "incremental": 0}
    run = incremental._Update.run

    def counted(self: Any) -> ClusterState:
        st = run(self)
        runs["incremental"] += 1
        return st

    def checked(prev: ClusterState, source: Any) -> ClusterState:
        objs = source.objects if isinstance(source, Snapshot) else list(source)
        prev.pods_labelled(keys.DEFRAG_EVICTED, keys.TRUE)  # an answer to carry over
        inc = original(prev, source)
        assert_same_state(inc, ClusterState.build(objs))
        runs["checked"] += 1
        return inc

    monkeypatch.setattr(incremental, "update_state", checked)
    monkeypatch.setattr(incremental._Update, "run", counted)
    objects = generate_objects(7, 60, DEFAULT_NOW)
    cfg = SimConfig(duration=timedelta(days=1), churn=0.5, seed=11)
    res = simulate(objects, parse_policy(policy), DEFAULT_NOW, cfg)
    # the run changed what the incremental path must follow, and it did follow it
    assert res.arrivals > 20 and res.departures > 20
    assert res.evictions > 5 and res.releases > 0
    assert runs["checked"] > 100
    assert runs["incremental"] > 0.9 * runs["checked"]  # almost never fell back to the full build


def _replaced(objs: list[dict[str, Any]], i: int, change: Any) -> None:
    """Copy-on-write: object `i` becomes a changed copy (the earlier snapshot keeps the original)."""
    new = copy.deepcopy(objs[i])
    change(new)
    objs[i] = new


def _mutations(objs: list[dict[str, Any]], rng: random.Random) -> Iterator[str]:
    """Structural changes the simulator never makes, each applied to `objs` in place (by copy)."""

    def idx(kind: str, pred: Any = lambda o: True) -> int:
        return rng.choice([i for i, o in enumerate(objs) if o["kind"] == kind and pred(o)])

    def worker(o: dict[str, Any]) -> bool:
        return (o["metadata"].get("labels") or {}).get(keys.COMPONENT) == keys.COMPONENT_WORKER

    i = idx("GPU")
    _replaced(objs, i, lambda o: o["status"]["capacity"].update(tflops="1000"))
    yield "GPU capacity"
    i = idx("GPU", lambda o: o["status"].get("phase") == "Running")
    _replaced(objs, i, lambda o: o["status"].update(usedBy="nvidia-device-plugin"))
    yield "GPU taken out of TensorFusion"
    i = idx("Pod", worker)
    _replaced(objs, i, lambda o: o["status"].update(phase="Succeeded"))
    yield "worker ended"
    i = idx("Pod", worker)
    objs.append(objs.pop(i))  # same dict, moved to the end (deleted and re-created)
    yield "pod re-created"
    i = idx("TensorFusionWorkload")
    del objs[i]
    yield "workload object deleted, its workers stay (local-GPU mode)"
    node = objs[idx("GPUNode")]["metadata"]["name"]
    objs.append(
        {
            "kind": "Pod",
            "metadata": {"name": "cuda-job", "namespace": "default"},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
            "status": {"phase": "Running"},
        }
    )
    yield "native GPU pod"
    i = idx("GPU")
    del objs[i]
    yield "GPU gone"
    i = idx("GPUNode")

    def other_pool(o: dict[str, Any]) -> None:
        labels = o["metadata"]["labels"]
        for k in [k for k in labels if k.startswith(keys.POOL_LABEL_PREFIX)]:
            del labels[k]
        labels[keys.MANAGED_BY] = "demo-dev" if labels.get(keys.MANAGED_BY) != "demo-dev" else "demo-training"

    _replaced(objs, i, other_pool)
    yield "GPUNode moved to another pool"
    name = objs[idx("GPUNode")]["metadata"]["name"]
    objs[:] = [
        o
        for o in objs
        if not (o["kind"] in ("GPUNode", "Node") and o["metadata"]["name"] == name)
        and ((o.get("status") or {}).get("nodeSelector") or {}).get(keys.HOSTNAME) != name
        and (o.get("spec") or {}).get("nodeName") != name
    ]
    yield "node gone with its GPUs and pods"
    i = idx("Pod", worker)
    _replaced(objs, i, lambda o: o["metadata"]["annotations"].update({keys.GPU_IDS: "no-such-gpu"}))
    yield "worker names an unknown GPU (a warning: full build)"


def test_incremental_state_equals_the_full_build_after_structural_changes() -> None:
    rng = random.Random(4)
    objs = generate_objects(3, 24, DEFAULT_NOW)
    prev = ClusterState.build(list(objs))
    done = []
    for what in _mutations(objs, rng):
        inc = incremental.update_state(prev, list(objs))
        assert_same_state(inc, ClusterState.build(list(objs)))
        done.append(what)
        prev = inc
    assert len(done) == 10 and prev.warnings  # every change was checked, the last one warns


# Recorded with full state builds and full status passes (no incremental paths: `update_state` and
# the simulator's status pass forced to rebuild everything), then checked equal to the fast run:
# 60 demo nodes (with the isolation pool and shared workloads that hold their GPUs whole), 2 days,
# churn 0.5, seed 11. The fast paths must not change a decision.
PINNED = {
    "configured": {
        "reconciles": 790, "arrivals": 232, "departures": 231, "evictions": 8, "releases": 12,
        "node_hours": 2616.0, "gpu_hours_allocated": 5659.0, "gpu_hours_used": 2477.84,
        "cost_usd": 22174.32, "final_active_nodes": 53, "final_lower_bound": 24,
    },
    "CompactFirst+defrag": {
        "reconciles": 994, "arrivals": 232, "departures": 231, "evictions": 13, "releases": 21,
        "node_hours": 2343.5, "gpu_hours_allocated": 5659.0, "gpu_hours_used": 2477.84,
        "cost_usd": 21847.32, "final_active_nodes": 44, "final_lower_bound": 24,
    },
}  # fmt: skip


@pytest.mark.parametrize("policy", sorted(PINNED))
def test_decisions_are_the_ones_recorded_before_the_fast_paths(policy: str) -> None:
    objects = generate_objects(7, 60, DEFAULT_NOW)
    cfg = SimConfig(duration=timedelta(days=2), churn=0.5, seed=11)
    res = simulate(objects, parse_policy(policy), DEFAULT_NOW, cfg)
    got = {"reconciles": len(res.plans), **res.summary()}
    assert {k: got[k] for k in PINNED[policy]} == PINNED[policy]
