"""Placement against upstream's scheduler cases 40–43, and on their clusters: node-level filters,
exclusions, bookings and the preview (P3). P1, P2 and P4: test_placement_rules.py; generated
clusters: test_placement_generated.py."""

from __future__ import annotations

import pytest

from tests.fixtures import upstream_demo as demo
from tests.fixtures.engine_builders import GI, build, gpu, host, pool, worker
from tests.placement_support import JSON, P, k8s, small_req, used_gpu
from tftui.engine.fit import MODES, Mode, Request, Weights
from tftui.engine.placement import apply_placement, filter_gpus, place, preview, select_from_store
from tftui.engine.state import ClusterState, Res

# -- scenario 40: node score, default mode -------------------------------------------------------


@pytest.fixture()
def s40() -> ClusterState:
    return build(
        [
            pool(P),  # no template → NodeCompactGPULowLoad
            *k8s("node-a"),
            *used_gpu("gpu-a", "node-a", 1000, 20, 100, 2),
            *k8s("node-b"),
            *used_gpu("gpu-b1", "node-b", 1000, 20, 0, 0),
            *used_gpu("gpu-b2", "node-b", 1000, 20, 0, 0),
        ]
    )


def test_s40_default_mode_node_scores(s40: ClusterState) -> None:
    p = place(s40, P, small_req())
    assert p.mode == "NodeCompactGPULowLoad"
    assert p.node_scores == (("node-a", 10), ("node-b", 0))
    assert (p.node, p.gpus, p.reason) == ("node-a", ("gpu-a",), None)


@pytest.mark.parametrize(
    ("mode", "scores", "chosen"),
    [
        ("CompactFirst", (("node-a", 10), ("node-b", 0)), "node-a"),
        ("LowLoadFirst", (("node-b", 100), ("node-a", 90)), "node-b"),
    ],
)
def test_s40_other_modes(
    s40: ClusterState, mode: Mode, scores: tuple[tuple[str, int], ...], chosen: str
) -> None:
    p = place(s40, P, small_req(), mode=mode)
    assert p.node_scores == scores
    assert p.node == chosen


# -- scenario 41: GPU choice inside the node -----------------------------------------------------


@pytest.fixture()
def s41() -> ClusterState:
    return build(
        [
            pool(P),
            *k8s("node-x"),
            *used_gpu("g1", "node-x", 100, 80, 50, 40),  # 50 % used
            *used_gpu("g2", "node-x", 100, 80, 0, 0),
        ]
    )


@pytest.mark.parametrize(
    ("mode", "chosen"),
    [("CompactFirst", "g1"), ("LowLoadFirst", "g2"), ("NodeCompactGPULowLoad", "g2")],
)
def test_s41_gpu_level_choice(s41: ClusterState, mode: Mode, chosen: str) -> None:
    p = place(s41, P, Request(vram=1 * GI, tflops=10), mode=mode)
    assert (p.node, p.gpus) == ("node-x", (chosen,))


# -- scenario 42: multi-GPU selector (weights 0.5/0.5) -------------------------------------------

S42 = {
    # node: [(capacity TFLOPS, capacity GiB, available TFLOPS, available GiB)]
    "node-1": [(20, 80, 10, 40), (20, 80, 12, 42), (20, 80, 14, 44)],
    "node-2": [(25, 100, 20, 80), (25, 100, 18, 75)],
    "node-3": [(40, 120, 30, 100)],
}
HALF = Weights(0.5, 0.5)


@pytest.fixture()
def s42() -> ClusterState:
    objs: list[JSON] = [pool(P)]
    for n, gpus in S42.items():
        objs += k8s(n)
        for i, (ct, cv, at, av) in enumerate(gpus, 1):
            objs += used_gpu(f"gpu-{n[-1]}-{i}", n, ct, cv, ct - at, cv - av)
    return build(objs)


@pytest.mark.parametrize(
    ("mode", "count", "gpus"),
    [
        ("LowLoadFirst", 2, ("gpu-1-3", "gpu-1-2")),
        ("LowLoadFirst", 3, ("gpu-1-3", "gpu-1-2", "gpu-1-1")),
        ("CompactFirst", 2, ("gpu-1-1", "gpu-1-2")),
        ("CompactFirst", 3, ("gpu-1-1", "gpu-1-2", "gpu-1-3")),
    ],
)
def test_s42_multi_gpu_selector(s42: ClusterState, mode: Mode, count: int, gpus: tuple[str, ...]) -> None:
    p = select_from_store(s42, P, small_req(count), mode=mode, weights=HALF)
    assert (p.node, p.gpus, p.reason) == ("node-1", gpus, None)


def test_s42_selector_sums_node_scores(s42: ClusterState) -> None:
    # LowLoadFirst GPU scores: node-1 50+56+63, node-2 80+74, node-3 79 (62.5 rounds half away to 63)
    p = select_from_store(s42, P, small_req(), mode="LowLoadFirst", weights=HALF)
    assert p.node_scores == (("node-1", 169), ("node-2", 154), ("node-3", 79))
    assert p.gpus == ("gpu-1-3",)
    p = select_from_store(s42, P, small_req(), mode="CompactFirst", weights=HALF)
    assert p.node_scores == (("node-1", 132), ("node-2", 47), ("node-3", 21))


@pytest.mark.parametrize("mode", ["LowLoadFirst", "CompactFirst"])
def test_s42_four_gpus_is_an_error(s42: ClusterState, mode: Mode) -> None:
    p = select_from_store(s42, P, small_req(4), mode=mode, weights=HALF)
    assert (p.node, p.gpus) == (None, ())
    assert p.reason == "no node has at least 4 available GPUs"
    assert p.rejected == {"same-node": 6}


def test_s42_scheduler_averages_instead_of_summing(s42: ClusterState) -> None:
    # the scheduler path (P2) averages, so the two-GPU node-2 (mean 77) beats node-1 (mean 56)
    p = place(s42, P, small_req(2), mode="LowLoadFirst", weights=HALF)
    assert p.node_scores == (("node-2", 77), ("node-1", 56))
    assert (p.node, p.gpus, p.rejected) == ("node-2", ("gpu-2-1", "gpu-2-2"), {"same-node": 1})


def test_selector_fails_on_gpu_without_capacity(s42: ClusterState) -> None:
    objs = [o for o in s42.snapshot.objects]
    objs.append(gpu("gpu-1-9", "node-1", status={}))
    del objs[-1]["status"]["capacity"]
    st_ = build(objs)
    p = select_from_store(st_, P, small_req(), mode="LowLoadFirst", weights=HALF)
    assert p.node is None
    assert p.reason == "gpu gpu-1-9 on node node-1 has no status.capacity"


# -- scenario 43: PreFilter feasibility ----------------------------------------------------------


@pytest.fixture()
def s43() -> ClusterState:
    return build(
        [
            pool(P),
            *k8s("node-a"),
            *used_gpu("gpu-1", "node-a", 1000, 20, 100, 2),
            *k8s("node-b"),
            *used_gpu("gpu-2", "node-b", 1000, 20, 0, 0),
            *used_gpu("gpu-3", "node-b", 2000, 40, 0, 0),
            *k8s("node-c"),
            gpu("gpu-4", "node-c", tflops=1000, vram="20Gi", used_by="nvidia-device-plugin"),
        ]
    )


@pytest.mark.parametrize(
    ("count", "tflops", "vram_gi", "nodes", "rejected"),
    [
        (1, 100, 10, {"node-a": ("gpu-1",), "node-b": ("gpu-2", "gpu-3")}, {"used-by": 1}),
        (1, 2000, 10, {"node-b": ("gpu-3",)}, {"used-by": 1, "resource": 2}),
        (2, 100, 10, {"node-b": ("gpu-2", "gpu-3")}, {"used-by": 1, "same-node": 1}),
    ],
)
def test_s43_feasible_nodes(
    s43: ClusterState,
    count: int,
    tflops: float,
    vram_gi: int,
    nodes: dict[str, tuple[str, ...]],
    rejected: JSON,
) -> None:
    req = Request(vram=vram_gi * GI, tflops=tflops, count=count)
    cands = filter_gpus(s43, P, req)
    assert (cands.by_node, cands.rejected, cands.reason) == (nodes, rejected, None)
    p = place(s43, P, req)
    assert p.node in nodes
    assert {n for n, _ in p.node_scores} == set(nodes)


@pytest.mark.parametrize(
    ("count", "tflops", "vram_gi", "reason", "rejected"),
    [
        (
            1,
            2000,
            80,
            f"no gpus available or valid in pool {P} after filtering",
            {"used-by": 1, "resource": 3},
        ),
        (3, 100, 10, "no node has at least 3 available GPUs", {"used-by": 1, "same-node": 3}),
    ],
)
def test_s43_unschedulable(
    s43: ClusterState, count: int, tflops: float, vram_gi: int, reason: str, rejected: JSON
) -> None:
    p = place(s43, P, Request(vram=vram_gi * GI, tflops=tflops, count=count))
    assert (p.node, p.gpus, p.node_scores, p.reason, p.rejected) == (None, (), (), reason, rejected)


def test_empty_pool_error() -> None:
    st_ = build([pool(P), pool("other"), *host("n1", "other", gpus=1)])
    p = place(st_, P, small_req())
    assert p.reason == f"no gpu devices in pool {P}"
    assert place(st_, "nope", small_req()).reason == "no gpu devices in pool nope"


# -- node-level filters, exclusions, availability override ---------------------------------------


def test_max_worker_per_node() -> None:
    objs = [pool(P), *host("busy", P, gpus=1), *host("calm", P, gpus=1)]
    objs += [worker(f"w{i}", ["busy-gpu-0"], tflops=1, vram="1Gi") for i in range(2)]
    objs += [worker("c0", ["calm-gpu-0"], tflops=1, vram="1Gi")]
    st_ = build(objs)
    req = small_req()
    assert place(st_, P, req, mode="CompactFirst").node == "busy"  # more used
    p = place(st_, P, req, mode="CompactFirst", max_worker_per_node=2)
    assert (p.node, p.rejected) == ("calm", {"max-workers": 1})
    assert place(st_, P, req, mode="CompactFirst", max_worker_per_node=0).node == "busy"  # 0 = no cap
    p = place(st_, P, req, max_worker_per_node=1)
    assert p.reason == f"no node left in pool {P}: nodes with valid GPUs are at maxWorkerPerNode (1)"
    p = place(st_, P, req, max_worker_per_node=2, worker_counts={"calm": 5, "busy": 0}, mode="CompactFirst")
    assert (p.node, p.rejected) == ("busy", {"max-workers": 1})


def test_cordoned_nodes_are_skipped() -> None:
    st_ = build([pool(P), *host("a", P, gpus=1, unschedulable=True), *host("b", P, gpus=1)])
    p = place(st_, P, small_req())
    assert (p.node, p.rejected) == ("b", {"unschedulable": 1})
    st_ = build([pool(P), *host("a", P, gpus=1, unschedulable=True)])
    assert (
        place(st_, P, small_req()).reason
        == f"no node left in pool {P}: nodes with valid GPUs are unschedulable"
    )


def test_exclude_nodes_and_available_override(s40: ClusterState) -> None:
    p = place(s40, P, small_req(), exclude_nodes={"node-a"})
    assert (p.node, p.rejected) == ("node-b", {"excluded": 1})
    # make gpu-b1 look full: node-b's CompactFirst mean becomes (100 + 0) // 2 = 50
    p = place(s40, P, small_req(), mode="CompactFirst", available={"gpu-b1": Res(0, 0)})
    assert p.node_scores == (("node-b", 50), ("node-a", 10))
    assert (p.node, p.gpus, p.rejected) == ("node-b", ("gpu-b2",), {"resource": 1})


def test_apply_then_place_again_uses_the_booking(s41: ClusterState) -> None:
    req = Request(vram=40 * GI, tflops=50)
    avail: dict[str, Res] = {}
    first = place(s41, P, req, mode="LowLoadFirst")
    assert first.gpus == ("g2",)
    apply_placement(avail, s41, first, req)
    assert avail == {"g2": Res(50.0, 40 * GI)}
    second = place(s41, P, req, mode="LowLoadFirst", available=avail)
    assert second.gpus == ("g1",)  # both at 50 %, g1 first by name
    apply_placement(avail, s41, second, req)
    third = place(s41, P, req, available=avail)
    assert (third.gpus, third.rejected) == (("g2",), {"resource": 1})  # g1 is full now
    apply_placement(avail, s41, third, req)
    assert avail == {"g1": Res(0.0, 0.0), "g2": Res(0.0, 0.0)}
    fourth = place(s41, P, req, available=avail)
    assert (fourth.reason, fourth.rejected) == (
        f"no gpus available or valid in pool {P} after filtering",
        {"resource": 2},
    )


# -- P3: preview ---------------------------------------------------------------------------------


def test_preview_on_upstream_demo() -> None:
    st_ = build(demo.objects())
    pv = preview(st_, demo.POOL, Request(vram=10 * GI, tflops=100))
    out = pv.to_json()
    assert out["mode"] == "NodeCompactGPULowLoad"
    assert out["pool_before"] == {"tflops": 31.62, "vram": 43.4}  # 1020/3226 TFLOPS, 208/479.3 GiB
    g = demo.G
    # the H100's GPUs have 9.65 GiB left: both rejected; a100-1 mean (32+13)//2 = 22, a100-2 (23+13)//2 = 18
    expected = {
        "CompactFirst": (
            "gpu-a100-1",
            [g[0]],
            [("gpu-a100-1", 22), ("gpu-a100-2", 18)],
            (19.23, 23.75),
            (35.26, 30.0),
        ),
        "LowLoadFirst": (
            "gpu-a100-2",
            [g[3]],
            [("gpu-a100-2", 82), ("gpu-a100-1", 77)],
            (16.03, 18.75),
            (32.05, 25.0),
        ),
        "NodeCompactGPULowLoad": (
            "gpu-a100-1",
            [g[1]],
            [("gpu-a100-1", 22), ("gpu-a100-2", 18)],
            (19.23, 23.75),
            (35.26, 30.0),
        ),
    }
    assert list(out["modes"]) == list(MODES)
    for mode, (node_, gpus, scores, before, after) in expected.items():
        m = out["modes"][mode]
        assert m["node"] == node_
        assert m["gpus"] == gpus
        assert m["node_scores"] == [{"node": n, "score": s} for n, s in scores]
        assert m["rejected"] == {"resource": 2}
        assert m["reason"] is None
        assert m["pool_after"] == {"tflops": 34.72, "vram": 45.48}  # +100 TFLOPS, +10 GiB
        assert (m["node_before"]["tflops"], m["node_before"]["vram"]) == before
        assert (m["node_after"]["tflops"], m["node_after"]["vram"]) == after
    assert pv.for_mode("LowLoadFirst").placement.node == "gpu-a100-2"
    assert out["request"] == {
        "tflops": 100.0,
        "compute_percent": None,
        "vram": float(10 * GI),
        "count": 1,
        "model": None,
        "vendor": None,
        "isolation": "soft",
        "indices": [],
        "partition": None,
        "namespace": None,
    }
    assert (
        pv.dumps()
        == preview(build(reversed(demo.objects())), demo.POOL, Request(vram=10 * GI, tflops=100)).dumps()
    )


def test_preview_when_nothing_fits() -> None:
    st_ = build(demo.objects())
    pv = preview(st_, demo.POOL, Request(vram=100 * GI, tflops=1))
    for m in pv.modes:
        assert m.placement.reason == f"no gpus available or valid in pool {demo.POOL} after filtering"
        assert (m.node_before, m.node_after) == (None, None)
        assert m.pool_after == pv.pool_before


def test_placement_to_json(s43: ClusterState) -> None:
    p = place(s43, P, Request(vram=10 * GI, tflops=100, count=2))
    assert p.to_json() == {
        "mode": "NodeCompactGPULowLoad",
        "node": "node-b",
        "gpus": ["gpu-2", "gpu-3"],
        "node_scores": [{"node": "node-b", "score": 0}],
        "reason": None,
        "rejected": {"used-by": 1, "same-node": 1},
        "partition": None,
    }
