"""Placement against upstream's scheduler cases 40–43, docs/behaviour.md P1–P4, and generated clusters."""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.fixtures import upstream_demo as demo
from tests.fixtures.engine_builders import (
    GI,
    H100,
    build,
    gpu,
    gpunode,
    host,
    node,
    pool,
    template,
    worker,
)
from tftui.engine.fit import MODES, Mode, Request, Weights, reject_reason
from tftui.engine.placement import (
    RUNNING_WORKLOADS_NOTE,
    apply_placement,
    filter_gpus,
    mode_change_message,
    place,
    pool_mode,
    preview,
    select_from_store,
    template_patch,
)
from tftui.engine.state import ClusterState, Res
from tftui.model.dump import validate_items
from tftui.sources.sim.cluster import generate_objects

P = "pool-a"
JSON = dict[str, Any]


def used_gpu(
    name: str, node_name: str, cap_t: float, cap_gi: float, used_t: float, used_gi: float
) -> list[JSON]:
    """A GPU with capacity cap and, if anything is used, one worker holding `used` of it."""
    objs = [gpu(name, node_name, tflops=cap_t, vram=f"{cap_gi}Gi")]
    if used_t or used_gi:
        objs.append(worker(f"w-{name}", [name], node=node_name, pool=P, tflops=used_t, vram=f"{used_gi}Gi"))
    return objs


def k8s(name: str) -> list[JSON]:
    return [node(name), gpunode(name, P)]


def small_req(count: int = 1) -> Request:
    return Request(vram=1 * GI, tflops=1, count=count)


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


# -- P1: mode resolution -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("objs", "expected"),
    [
        ([pool(P)], "NodeCompactGPULowLoad"),  # no template reference
        ([pool(P, template="gone")], "NodeCompactGPULowLoad"),  # template missing
        ([template("t", "Bogus"), pool(P, template="t")], "NodeCompactGPULowLoad"),  # unknown mode
        ([template("t", None), pool(P, template="t")], "NodeCompactGPULowLoad"),  # empty mode
        ([template("t", "CompactFirst"), pool(P, template="t")], "CompactFirst"),
        ([template("t", "LowLoadFirst"), pool(P, template="t")], "LowLoadFirst"),
    ],
)
def test_mode_resolution(objs: list[JSON], expected: Mode) -> None:
    st_ = build([*objs, *host("n1", P, gpus=1)])
    assert pool_mode(st_, P) == expected
    assert place(st_, P, small_req()).mode == expected


def test_unknown_pool_uses_default_mode() -> None:
    assert pool_mode(build([pool(P)]), "nope") == "NodeCompactGPULowLoad"


# -- P2: ties by name ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_ties_are_broken_by_name(mode: Mode) -> None:
    objs = [pool(P), *host("node-b", P, gpus=3), *host("node-a", P, gpus=3), *host("node-c", P, gpus=3)]
    for order in (objs, list(reversed(objs))):
        p = place(build(order), P, small_req(2), mode=mode)
        assert p.node == "node-a"
        assert p.gpus == ("node-a-gpu-0", "node-a-gpu-1")
        assert [n for n, _ in p.node_scores] == ["node-a", "node-b", "node-c"]


def test_top_five_node_scores_only() -> None:
    objs: list[JSON] = [pool(P)]
    for i in range(7):
        objs += host(f"n{i}", P, gpus=1)
    p = place(build(objs), P, small_req())
    assert p.node_scores == tuple((f"n{i}", 0) for i in range(5))


# -- node score details (P2) ---------------------------------------------------------------------


def test_full_non_matching_gpus_raise_compact_score() -> None:
    # node-1: one GPU full (filtered out by resource, still counted), one idle → mean 50
    st_ = build(
        [
            pool(P),
            *k8s("node-1"),
            *used_gpu("g-full", "node-1", 100, 80, 100, 80),
            *used_gpu("g-idle", "node-1", 100, 80, 0, 0),
            *k8s("node-0"),
            *used_gpu("g-0", "node-0", 100, 80, 0, 0),
        ]
    )
    p = place(st_, P, small_req(), mode="CompactFirst")
    assert p.node_scores == (("node-1", 50), ("node-0", 0))
    assert (p.node, p.gpus, p.rejected) == ("node-1", ("g-idle",), {"resource": 1})


def test_pending_gpu_counts_a_quarter_and_floor() -> None:
    st_ = build([pool(P), *k8s("n"), gpu("g0", "n", index=0), gpu("g1", "n", index=1, phase="Pending")])
    p = place(st_, P, small_req(), mode="LowLoadFirst")
    # g0 matched: 100; g1 Pending, idle: 100 // 4 = 25; (100 + 25) // 2 = 62 (floor of 62.5)
    assert p.node_scores == (("n", 62),)
    assert p.rejected == {"phase": 1}


def test_other_pool_gpus_on_the_node_count_in_the_node_score() -> None:
    objs = [pool(P), pool("q"), *k8s("n"), gpu("g0", "n"), gpu("g1", "n", index=1)]
    objs.append(worker("w", ["g1"], node="n", pool="q", tflops=312, vram="80Gi"))
    st_ = build(objs)
    p = place(st_, P, small_req(), mode="CompactFirst")
    assert p.node_scores == (("n", 50),)


# -- requests: compute percent, model, vendor, index, shared -------------------------------------


def compute_state() -> ClusterState:
    return build(
        [
            pool(P),
            *k8s("n"),
            *used_gpu("g-busy", "n", 312, 80, 162, 0),  # 150 TFLOPS left
            *used_gpu("g-free", "n", 312, 80, 152, 0),  # 160 TFLOPS left
        ]
    )


def test_compute_percent_is_converted_with_each_gpus_capacity() -> None:
    st_ = compute_state()
    req = Request(vram=1 * GI, compute_percent=50)  # int(50 × 312 / 100) = 156
    p = place(st_, P, req, mode="CompactFirst")
    assert (p.gpus, p.rejected) == (("g-free",), {"resource": 1})
    avail: dict[str, Res] = {}
    apply_placement(avail, st_, p, req)
    assert avail == {"g-free": Res(4.0, 79 * GI)}


def test_compute_percent_truncates() -> None:
    st_ = compute_state()
    req = Request(vram=0, compute_percent=33)  # 33 × 312 / 100 = 102.96 → 102
    p = place(st_, P, req, mode="CompactFirst")
    avail: dict[str, Res] = {}
    apply_placement(avail, st_, p, req)
    assert avail == {"g-busy": Res(150 - 102, 80 * GI)}


def model_state() -> ClusterState:
    return build(
        [
            pool(P),
            *host("a100", P, gpus=2),
            *host("h100", P, gpus=1, model=H100[0], tflops=H100[1], vram=H100[2]),
            *host("mi300", P, gpus=1, model="AMD Instinct MI300X", vendor="AMD", tflops=1307, vram="192Gi"),
        ]
    )


@pytest.mark.parametrize(
    ("model", "vendor", "node_", "rejected"),
    [
        (H100[0], None, "h100", {"model": 3}),  # exact gpuModel
        ("H100", None, "h100", {"model": 3}),  # tftui: family token
        (None, "AMD", "mi300", {"vendor": 3}),
        ("H100", "AMD", None, {"model": 3, "vendor": 1}),
    ],
)
def test_model_and_vendor_filters(
    model: str | None, vendor: str | None, node_: str | None, rejected: JSON
) -> None:
    p = place(model_state(), P, Request(vram=1 * GI, tflops=1, model=model, vendor=vendor))
    assert (p.node, p.rejected) == (node_, rejected)
    if node_ is None:
        assert p.reason == f"no gpus available or valid in pool {P} after filtering"


def test_gpu_indices_filter() -> None:
    p = place(build([pool(P), *host("n", P, gpus=4)]), P, Request(vram=0, tflops=1, indices=(2,)))
    assert (p.gpus, p.rejected) == (("n-gpu-2",), {"index": 3})


def test_shared_isolation_needs_an_idle_gpu_and_takes_it_whole() -> None:
    st_ = build(
        [pool(P), *k8s("n"), *used_gpu("g0", "n", 100, 80, 1, 0), *used_gpu("g1", "n", 100, 80, 0, 0)]
    )
    req = Request(vram=1 * GI, tflops=1, isolation="shared")
    p = place(st_, P, req)
    assert (p.gpus, p.rejected) == (("g1",), {"shared-busy": 1})
    avail: dict[str, Res] = {}
    apply_placement(avail, st_, p, req)
    assert avail == {"g1": Res(0.0, 0.0)}


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


# -- P4: mode change -----------------------------------------------------------------------------


def test_template_patch() -> None:
    st_ = build(demo.objects())
    assert template_patch(st_, demo.POOL, "CompactFirst") == (
        "demo-compact",
        {"spec": {"placement": {"mode": "CompactFirst"}}},
    )
    msg = mode_change_message(st_, demo.POOL, "LowLoadFirst")
    assert msg == (
        f"pool {demo.POOL}: placement mode NodeCompactGPULowLoad → LowLoadFirst in SchedulingConfigTemplate "
        f"demo-compact; {RUNNING_WORKLOADS_NOTE}"
    )
    assert "running workloads stay where they are" in msg


def test_mode_change_names_other_pools_sharing_the_template() -> None:
    st_ = build(
        [
            template("t", "CompactFirst"),
            pool(P, template="t"),
            pool("b", template="t"),
            pool("c", template="t"),
        ]
    )
    assert "it also applies to pools b, c;" in mode_change_message(st_, P, "LowLoadFirst")
    assert "it also applies to pools a" not in mode_change_message(st_, "b", "LowLoadFirst")
    assert "it also applies to pools c, pool-a;" in mode_change_message(st_, "b", "LowLoadFirst")


@pytest.mark.parametrize(
    ("objs", "pool_", "mode", "message"),
    [
        ([pool(P)], P, "CompactFirst", f"pool {P}: spec.schedulingConfigTemplate is not set"),
        (
            [pool(P, template="gone")],
            P,
            "CompactFirst",
            f"pool {P}: spec.schedulingConfigTemplate names 'gone'",
        ),
        ([template("t"), pool(P, template="t")], P, "Packed", f"pool {P}: unknown placement mode 'Packed'"),
        ([pool(P)], "nope", "CompactFirst", "pool nope: no such GPUPool"),
    ],
)
def test_template_patch_errors(objs: list[JSON], pool_: str, mode: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")) as err:
        template_patch(build(objs), pool_, mode)
    if "unknown" in message:
        assert "spec.placement.mode" in str(err.value)


# -- properties on generated clusters ------------------------------------------------------------


@functools.cache
def sim_objects(seed: int, nodes: int) -> tuple[JSON, ...]:
    return tuple(generate_objects(seed, nodes))


@functools.cache
def sim_state(seed: int, nodes: int) -> ClusterState:
    return ClusterState.build(validate_items(list(sim_objects(seed, nodes))))


@st.composite
def requests(draw: st.DrawFn) -> Request:
    """Mostly modest requests (so most of them fit somewhere), some large or picky ones."""
    percent = draw(st.integers(0, 3)) == 0
    big = draw(st.integers(0, 4)) == 0
    return Request(
        vram=draw(st.integers(0, 96 if big else 20)) * GI,
        tflops=None if percent else float(draw(st.integers(0, 600 if big else 120))),
        compute_percent=float(draw(st.integers(0, 100 if big else 40))) if percent else None,
        count=draw(st.sampled_from([1, 1, 1, 1, 2, 2, 3, 4, 8])),
        model=draw(st.sampled_from([None] * 6 + ["H100", "A100", "L40S", "NVIDIA H100 80GB HBM3"])),
        vendor=draw(st.sampled_from([None] * 6 + ["NVIDIA", "AMD"])),
        isolation=draw(st.sampled_from(["soft"] * 5 + ["shared"])),
    )


def eligible(state: ClusterState, pool_: str, req: Request, max_workers: int) -> dict[str, list[str]]:
    """Brute force: per usable node of the pool, the GPUs that pass every per-GPU filter."""
    out: dict[str, list[str]] = {}
    for g in state.gpus.values():
        nv = state.nodes.get(g.node or "")
        if g.pool != pool_ or nv is None or nv.unschedulable or len(nv.workers) >= max_workers:
            continue
        if reject_reason(g, g.available, req) is None:
            out.setdefault(nv.name, []).append(g.name)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 3),
    nodes=st.sampled_from([6, 12]),
    pool_index=st.integers(0, 2),
    req=requests(),
    mode=st.sampled_from([None, *MODES]),
    max_workers=st.sampled_from([256, 256, 8]),
)
def test_property_placements_satisfy_the_filters(
    seed: int, nodes: int, pool_index: int, req: Request, mode: Mode | None, max_workers: int
) -> None:
    state = sim_state(seed, nodes)
    pool_ = sorted(state.pools)[pool_index % len(state.pools)]
    p = place(state, pool_, req, mode=mode, max_worker_per_node=max_workers)
    ok = {n: gs for n, gs in eligible(state, pool_, req, max_workers).items() if len(gs) >= req.count}
    assert p.mode == (mode or pool_mode(state, pool_))
    event("placed" if p.node else f"unplaceable: {p.reason.split(' in pool')[0] if p.reason else None}")
    if p.node is None:
        assert p.reason
        assert ok == {}
        assert p.gpus == ()
        return
    assert p.reason is None
    assert p.node in ok
    assert len(p.gpus) == req.count == len(set(p.gpus))
    for name in p.gpus:
        g = state.gpus[name]
        assert g.node == p.node and g.pool == pool_
        assert reject_reason(g, g.available, req) is None
    assert set(n for n, _ in p.node_scores) <= set(ok)
    assert p.node_scores[0][0] == p.node
    keys = [(-s, n) for n, s in p.node_scores]
    assert keys == sorted(keys)
    assert len(p.node_scores) == min(5, len(ok))
    # booking never drives a chosen GPU negative
    avail: dict[str, Res] = {}
    apply_placement(avail, state, p, req)
    assert all(r.tflops >= 0 and r.vram >= 0 for r in avail.values())
    # the selector (P8) also only returns valid, co-located GPUs
    s = select_from_store(state, pool_, req, mode=mode)
    if s.node is not None:
        assert all(state.gpus[n].node == s.node for n in s.gpus) and len(s.gpus) == req.count


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 3), shuffle=st.integers(0, 2**32 - 1), req=requests())
def test_property_object_order_does_not_matter(seed: int, shuffle: int, req: Request) -> None:
    objs = list(sim_objects(seed, 6))
    random.Random(shuffle).shuffle(objs)
    shuffled = ClusterState.build(validate_items(objs))
    state = sim_state(seed, 6)
    for pool_ in sorted(state.pools):
        assert preview(shuffled, pool_, req).dumps() == preview(state, pool_, req).dumps()
