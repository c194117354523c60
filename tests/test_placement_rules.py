"""Placement rules of docs/behaviour.md: mode resolution (P1), ties and node scores (P2), what a request
asks for (compute percent, model, vendor, GPU index, shared isolation) and the mode change (P4)."""

from __future__ import annotations

import pytest

from tests.fixtures import upstream_demo as demo
from tests.fixtures.engine_builders import GI, H100, build, gpu, host, pool, template, worker
from tests.placement_support import JSON, P, k8s, small_req, used_gpu
from tftui.engine.fit import MODES, Mode, Request
from tftui.engine.placement import (
    RUNNING_WORKLOADS_NOTE,
    apply_placement,
    mode_change_message,
    place,
    pool_mode,
    template_patch,
)
from tftui.engine.state import ClusterState, Res

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
