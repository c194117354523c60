"""ClusterState arithmetic (S1, S2) against the figures of the demo seed (tests/fixtures/upstream_demo)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.fixtures import upstream_demo as demo
from tftui.engine.state import ClusterState
from tftui.model.dump import validate_items

GI, MI = demo.GI, demo.MI


@pytest.fixture()
def state() -> ClusterState:
    return ClusterState.build(validate_items(demo.objects()))


def pct(part: float, whole: float) -> float:
    return round(part / whole * 100, 2)


def test_node_allocation_percent_matches_upstream(state: ClusterState) -> None:
    got = {
        n.name: (pct(n.allocated.tflops, n.capacity.tflops), pct(n.allocated.vram, n.capacity.vram))
        for n in state.nodes.values()
    }
    assert got == {
        "gpu-a100-1": (19.23, 23.75),
        "gpu-a100-2": (16.03, 18.75),
        "gpu-h100-1": (40.44, 87.89),
    }


def test_node_available_and_virtual_match_gpunode_status(state: ClusterState) -> None:
    # the demo seed's GPUNode figures: available, virtual, virtualAvailable
    expected = {
        "gpu-a100-1": (504, 122 * GI, 1872, 1051407994060, 1572, 991278451916),
        "gpu-a100-2": (524, 130 * GI, 1872, 1051407994060, 1652, 1008458321100),
        "gpu-h100-1": (1178, 19758 * MI, 5934, 1930260224408, 5134, 1848655845784),
    }
    for name, (atf, avram, vtf, vvram, vatf, vavram) in expected.items():
        n = state.nodes[name]
        assert n.available.tflops == atf
        assert n.available.vram == avram
        assert n.virtual.tflops == vtf
        assert n.virtual.vram == vvram
        assert n.virtual_available.tflops == vatf
        assert n.virtual_available.vram == vavram


def test_pool_totals_match_upstream(state: ClusterState) -> None:
    pool = state.pools["demo-shared"]
    assert (pool.capacity.tflops, pool.available.tflops) == (3226, 2206)
    assert (pool.capacity.vram, pool.available.vram) == (490798 * MI, 277806 * MI)
    assert pct(pool.allocated.tflops, pool.capacity.tflops) == 31.62
    assert pct(pool.allocated.vram, pool.capacity.vram) == 43.40
    assert pool.virtual.tflops == 9678
    assert pool.virtual.vram == 4033076212528
    assert pool.virtual_available.tflops == 8358
    assert pool.virtual_available.vram == 3848392618800
    assert pool.gpu_count == 6 and pool.worker_count == 6
    assert pool.placement_mode == "NodeCompactGPULowLoad"
    assert pool.provisioning_mode == "AutoSelect"


def test_gpu_available_matches_upstream(state: ClusterState) -> None:
    avail = {g.name[-2:]: (g.available.tflops, g.available.vram) for g in state.gpus.values()}
    assert avail == {
        "01": (232, 52 * GI),
        "02": (272, 70 * GI),
        "03": (252, 60 * GI),
        "04": (272, 70 * GI),
        "05": (589, 9879 * MI),
        "06": (589, 9879 * MI),
    }


def test_links(state: ClusterState) -> None:
    assert state.warnings == []
    assert sorted(state.pools["demo-shared"].nodes) == ["gpu-a100-1", "gpu-a100-2", "gpu-h100-1"]
    qwen = state.workers["ml-serving/qwen2-72b-infer-tf-worker-h8c3d"]
    assert qwen.gpu_count == 2 and qwen.node == "gpu-h100-1"
    assert qwen.allocated.tflops == 800  # request × gpu-count
    wl = state.workloads["ml-serving/llama3-8b-infer"]
    assert len(wl.workers) == 2 and wl.allocated.tflops == 120
    assert [w.name for w in state.workers_of_gpu(demo.G[0])] == [
        "llama3-8b-infer-tf-worker-7xk2p",
        "notebook-alice-tf-worker-p2w6n",
    ]
    assert {g.name for g in state.gpus_of("gpu-h100-1")} == {demo.G[4], demo.G[5]}


def _mutate(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def test_inconsistent_objects_are_kept_and_reported() -> None:
    objs = copy.deepcopy(demo.objects())
    _mutate(objs, "GPU", demo.G[1])["status"]["nodeSelector"] = {"kubernetes.io/hostname": "ghost-node"}
    pod = _mutate(objs, "Pod", "notebook-alice-tf-worker-p2w6n")
    pod["metadata"]["annotations"]["tensor-fusion.ai/gpu-ids"] = "gpu-does-not-exist"
    _mutate(objs, "GPUNode", "gpu-a100-2")["metadata"]["labels"] = {}
    state = ClusterState.build(validate_items(objs))
    text = "\n".join(map(str, state.warnings))
    assert f"GPU {demo.G[1]}: status.nodeSelector: node 'ghost-node' has no GPUNode" in text
    assert (
        "Pod research/notebook-alice-tf-worker-p2w6n: metadata.annotations[tensor-fusion.ai/gpu-ids]: GPU 'gpu-does-not-exist' not found"
        in text
    )
    assert "GPUNode gpu-a100-2: metadata.labels: no tensor-fusion.ai/pool-<pool> label" in text
    assert demo.G[1] in state.gpus and state.gpus[demo.G[1]].node == "ghost-node"
    assert "research/notebook-alice-tf-worker-p2w6n" in state.workers
    assert "gpu-a100-2" in state.nodes and state.nodes["gpu-a100-2"].pool is None


def test_ended_pods_do_not_allocate_and_native_gpu_pods_are_found() -> None:
    objs = copy.deepcopy(demo.objects())
    _mutate(objs, "Pod", "notebook-alice-tf-worker-p2w6n")["status"]["phase"] = "Succeeded"
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "legacy-trainer", "namespace": "ml-batch"},
            "spec": {
                "nodeName": "gpu-a100-2",
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
            "status": {"phase": "Running"},
        }
    )
    state = ClusterState.build(validate_items(objs))
    assert state.gpus[demo.G[0]].allocated.tflops == 60
    assert state.nodes["gpu-a100-2"].native_gpu_pods == ["ml-batch/legacy-trainer"]


def test_compute_percent_request_uses_gpu_capacity() -> None:
    objs = copy.deepcopy(demo.objects())
    ann = _mutate(objs, "Pod", "notebook-alice-tf-worker-p2w6n")["metadata"]["annotations"]
    del ann["tensor-fusion.ai/tflops-request"]
    ann["tensor-fusion.ai/compute-percent-request"] = "25"
    state = ClusterState.build(validate_items(objs))
    assert state.workers["research/notebook-alice-tf-worker-p2w6n"].request.tflops == 78  # 25 % of 312


def test_missing_template_falls_back_to_default_mode_with_warning() -> None:
    objs = [o for o in copy.deepcopy(demo.objects()) if o["kind"] != "SchedulingConfigTemplate"]
    state = ClusterState.build(validate_items(objs))
    assert state.pools["demo-shared"].placement_mode == "NodeCompactGPULowLoad"
    assert any("template 'demo-compact' not found" in str(w) for w in state.warnings)
