"""Workload autoscaler on a cluster: no data and too early (A5), targets and dedicated workers (A4,
A6), webhook annotations, profiles and pool rules (A1, A2), values that do not parse (A3), and
properties of the plans.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.autoscale_support import TFK, TFL, VK, VL, asr, astate_for, cluster, rows
from tests.fixtures.engine_builders import GI, NOW, build, template
from tftui.engine.autoscale import (
    AutoConfig,
    AutoscaleState,
    Resources,
    effective_autoscaling,
    plan_autoscale,
    recommend,
    tf,
    vr,
)
from tftui.engine.plan import AnnotatePod, Event
from tftui.model.quantity import parse_quantity

# -- case 16: no data / too early (A5) ------------------------------------------------------------


def test_s16_no_data() -> None:
    """Upstream: an empty aggregator gives no result. Here: reason `no-data`, provisional, no action."""
    objs = cluster(spec=asr(enable=True))
    ap = plan_autoscale(build(objs), AutoscaleState(), NOW)
    w = ap.result.workloads["default/w"] if ap.result else None
    assert w is not None and w.reason == "no-data" and w.provisional and not w.would_apply
    assert ap.plan.actions == []


def test_s16_too_early_is_provisional_and_never_decreases() -> None:
    """A5 changes upstream (LowConfidence, nothing): the recommendation is shown, flagged provisional,
    and its decrease is not applied."""
    objs = cluster(spec=asr(enable=True))
    ast = astate_for(objs, [(1, 2 * GI)] * 10, start=NOW - timedelta(minutes=10))
    ap = plan_autoscale(build(objs), ast, NOW)
    assert ap.result is not None
    w = ap.result.workloads["default/w"]
    assert w.provisional and w.reason == "provisional" and not w.would_apply
    assert not [a for a in ap.plan.actions if isinstance(a, AnnotatePod)]


@pytest.mark.parametrize(("real", "lowered"), [(0, False), (5, False), (6, True)])
def test_a5_a_decrease_needs_enough_real_samples(real: int, lowered: bool) -> None:
    """Two hours of rows, all but `real` of them NULL: fewer real samples than `min_samples` (6 for
    the default 30m initialDelayPeriod) never lower a request, however long the history looks."""
    objs = cluster(spec=asr(enable=True), tflops=100, tflops_limit=100, vram="40Gi", vram_limit="40Gi")
    series = rows([(1.0, GI)] * 120)
    keep = set(range(0, 120, 120 // real)[:real]) if real else set()
    for i, r in enumerate(series):
        if i not in keep:
            r.update(compute_tflops=None, compute_percentage=None, memory_bytes=None)
    ast = AutoscaleState()
    ast.configure(build(objs))
    ast.add_samples(series)
    assert (ast.workloads["default/w"].samples, ast.workloads["default/w"].vram_samples) == (real, real)
    ap = plan_autoscale(build(objs), ast, NOW)
    assert ap.result is not None
    w = ap.result.workloads["default/w"]
    patches = [a for a in ap.plan.actions if isinstance(a, AnnotatePod)]
    assert bool(patches) == lowered == w.would_apply, w.to_json()
    if real and not lowered:
        assert w.reason == "provisional" and "real samples < 6" in w.detail
    if lowered:
        assert parse_quantity(str(patches[0].annotations[TFK])) < tf(100)


def test_a5_provisional_increase_still_applies() -> None:
    objs = cluster(spec=asr(enable=True), tflops=2, tflops_limit=4)
    ast = astate_for(objs, [(8, 8 * GI)] * 10, start=NOW - timedelta(minutes=10))
    ap = plan_autoscale(build(objs), ast, NOW)
    assert ap.result is not None and ap.result.workloads["default/w"].would_apply
    patches = [a for a in ap.plan.actions if isinstance(a, AnnotatePod)]
    assert patches and patches[0].annotations[TFK] == "9"


# -- cases 28-29: targets, dedicated workers (A4, A6) ---------------------------------------------


def test_s28_target_compute_leaves_vram_untouched() -> None:
    """A4 changes upstream: the status recommendation also keeps the current VRAM."""
    objs = cluster(spec=asr(enable=True, targetResource="compute"))
    ast = astate_for(objs, [(100, 100 * GI)] * 120)
    ap = plan_autoscale(build(objs), ast, NOW)
    patches = [a for a in ap.plan.actions if isinstance(a, AnnotatePod)]
    assert patches and set(patches[0].annotations) == {TFK, TFL}
    rec = ap.status[0].fields["recommendation"]
    assert (rec["requests"]["vram"], rec["limits"]["vram"]) == ("8Gi", "16Gi")
    off = cluster(spec=asr(enable=False, targetResource="compute"))
    ap_off = plan_autoscale(build(off), astate_for(off, [(100, 100 * GI)] * 120), NOW)
    assert ap_off.plan.actions == [] and ap_off.status == []
    assert ap_off.result is not None and ap_off.result.workloads["default/w"].reason == "disabled"


def test_s29_dedicated_worker_untouched_and_scale_up_capped() -> None:
    """Quota/AdjustAllocation is not modelled; A6's cap limits the scale-up to the GPU's free share."""
    objs = cluster(spec=asr(enable=True), workers=1, worker_ann={"tensor-fusion.ai/dedicated-gpu": "true"})
    ast = astate_for(objs, [(100, 10 * GI)] * 120)
    ap = plan_autoscale(build(objs), ast, NOW)
    assert not [a for a in ap.plan.actions if isinstance(a, AnnotatePod)]
    objs = cluster(spec=asr(enable=True), tflops=10, tflops_limit=20, gpu_tflops=50)
    ast = astate_for(objs, [(9999, 10 * GI)] * 120)
    ap = plan_autoscale(build(objs), ast, NOW)
    assert ap.result is not None and ap.result.workloads["default/w"].reason == "capped"
    patch = next(a for a in ap.plan.actions if isinstance(a, AnnotatePod))
    assert patch.annotations[TFK] == "50"  # ratio clamp says 100; the GPU has 40 free + its own 10
    assert patch.annotations[TFL] == "200"  # limits are not capped (upstream)
    ev = next(a for a in ap.plan.actions if isinstance(a, Event))
    assert ev.reason == "ResourceScaledUp" and ev.message.startswith(
        "Resources scaled up: Compute 10->50, VRAM 8Gi->"
    )


def test_s30_patch_failure_rollback_not_in_engine() -> None:
    """Case 30 (allocator rollback after a failed patch) belongs to the runtime that applies plans;
    the engine only plans, so here: the plan never books quota, it only annotates."""
    objs = cluster(spec=asr(enable=True))
    ap = plan_autoscale(build(objs), astate_for(objs, [(40, 4 * GI)] * 120), NOW)
    assert {type(a) for a in ap.plan.actions} <= {AnnotatePod, Event}


# -- case 31: webhook parsing, profiles, pool rules (A1) -------------------------------------------


def test_s31_annotations_and_pool_rule() -> None:
    on = build(cluster(worker_ann={"tensor-fusion.ai/autoscale": "true"}))
    asr_on = effective_autoscaling(on, on.workloads["default/w"])["autoSetResources"]
    assert asr_on["enable"] is True and asr_on["targetResource"] == "all"
    vram = build(
        cluster(
            worker_ann={"tensor-fusion.ai/autoscale": "true", "tensor-fusion.ai/autoscale-target": "vram"}
        )
    )
    assert (
        effective_autoscaling(vram, vram.workloads["default/w"])["autoSetResources"]["targetResource"]
        == "vram"
    )
    cap = build(cluster(worker_ann={"tensor-fusion.ai/autoscale": "True"}))
    assert effective_autoscaling(cap, cap.workloads["default/w"]) == {}
    tpl = template(
        "t",
        spec={
            "verticalScalingRules": [
                {
                    "name": "nomatch",
                    "selector": {"matchLabels": {"team": "x"}},
                    "autoScaling": {"autoSetResources": {"targetComputePercentile": "0.1"}},
                },
                {
                    "name": "r",
                    "selector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml"]}]},
                    "autoScaling": {"autoSetResources": {"targetComputePercentile": "0.8", "enable": False}},
                },
            ]
        },
    )
    objs = cluster(spec=asr(enable=True), pool_template="t", labels={"team": "ml"}, extra=[tpl])
    stt = build(objs)
    got = effective_autoscaling(stt, stt.workloads["default/w"])["autoSetResources"]
    assert got["targetComputePercentile"] == "0.8" and got["enable"] is True


def test_workload_profile_is_the_base() -> None:
    prof = {
        "apiVersion": "tensor-fusion.ai/v1",
        "kind": "WorkloadProfile",
        "metadata": {"name": "prof", "namespace": "default"},
        "spec": {"autoScalingConfig": {"autoSetResources": {"enable": True, "marginFraction": "0.3"}}},
    }
    objs = cluster(worker_ann={"tensor-fusion.ai/workload-profile": "prof"}, extra=[prof])
    stt = build(objs)
    got = AutoConfig.parse(effective_autoscaling(stt, stt.workloads["default/w"])["autoSetResources"])
    assert got.enable and got.margin == 0.3


@pytest.mark.parametrize("usage", [[(1.0, GI)] * 120, [], [(10.0, 8 * GI)] * 120])
def test_a1_invalid_target_warns_and_changes_nothing(usage: list[tuple[float, float]]) -> None:
    """Also with no data or nothing to change: the warning does not depend on the recommendation."""
    objs = cluster(spec=asr(enable=True, targetResource="tflops"))
    ap = plan_autoscale(build(objs), astate_for(objs, usage), NOW)
    assert [(type(a), getattr(a, "type", "")) for a in ap.plan.actions] == [(Event, "Warning")]
    assert ap.status == []
    assert ap.result is not None and ap.result.workloads["default/w"].reason == "invalid-target"


def test_a1_target_is_case_insensitive_and_defaults_to_all() -> None:
    assert AutoConfig.parse({"targetResource": "VRAM"}).target == "vram"
    assert AutoConfig.parse({"enable": True}).target == "all"
    assert AutoConfig.parse({"targetResource": ""}).target == "all"


def test_a2_every_workload_with_data_gets_a_recommendation() -> None:
    objs = cluster()
    res = recommend(build(objs), astate_for(objs, [(1, GI)] * 120), NOW)
    w = res.workloads["default/w"]
    assert w.reason == "disabled" and w.recommendation is not None and not w.would_apply


# -- A3: values that do not parse ------------------------------------------------------------


def test_values_that_do_not_parse_are_said_with_the_recommendation() -> None:
    """Upstream falls back to the defaults silently (A3); tftui does the same but says so, naming
    the field and the default used, in the recommendation's detail (console, `recommend`, `plan`)."""
    from tftui.engine.state import ClusterState
    from tftui.model.dump import validate_items
    from tftui.sources.sim.cluster import generate_objects

    objs = generate_objects(nodes=2)
    wl = next(o for o in objs if o["kind"] == "TensorFusionWorkload")
    key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
    wl["spec"]["autoScalingConfig"] = {
        "autoSetResources": {"enable": True, "historyDataPeriod": "7d", "marginFraction": "ten percent"}
    }
    state = ClusterState.build(validate_items(objs))
    astate = AutoscaleState()
    astate.configure(state)
    result = recommend(state, astate, NOW)
    assert astate.periods[key] == timedelta(hours=2)  # the default decides, as upstream
    detail = result.workloads[key].to_json()["detail"]
    assert "historyDataPeriod '7d' is not a duration (e.g. 72h, 30m): 2h0m0s used" in detail
    assert "marginFraction 'ten percent' is not a number: the default used" in detail
    others = [r for k, r in result.workloads.items() if k != key]
    assert others and not any("is not a" in r.detail for r in others)


# -- properties ----------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    minutes=st.integers(1, 29),
    usage=st.lists(st.tuples(st.floats(0, 400), st.integers(0, 80 * GI)), min_size=1, max_size=29),
    target=st.sampled_from(["all", "compute", "vram"]),
)
def test_property_no_decrease_before_initial_delay(
    minutes: int, usage: list[tuple[float, int]], target: str
) -> None:
    objs = cluster(
        spec=asr(enable=True, targetResource=target),
        tflops=100,
        tflops_limit=200,
        vram="40Gi",
        vram_limit="60Gi",
    )
    series = (usage * 30)[:minutes]
    ast = astate_for(objs, series, start=NOW - timedelta(minutes=minutes))
    ap = plan_autoscale(build(objs), ast, NOW)
    for a in ap.plan.actions:
        if isinstance(a, AnnotatePod):
            if TFK in a.annotations:
                assert parse_quantity(str(a.annotations[TFK])) >= tf(100)
            if VK in a.annotations:
                assert parse_quantity(str(a.annotations[VK])) >= vr(40 * GI)


@settings(max_examples=40, deadline=None)
@given(
    t_use=st.floats(0, 1000),
    v_use=st.integers(0, 200 * GI),
    target=st.sampled_from(["compute", "vram"]),
)
def test_property_untargeted_resource_never_changes(t_use: float, v_use: int, target: str) -> None:
    objs = cluster(spec=asr(enable=True, targetResource=target))
    ap = plan_autoscale(build(objs), astate_for(objs, [(t_use, v_use)] * 120), NOW)
    forbidden = {VK, VL} if target == "compute" else {TFK, TFL}
    for a in ap.plan.actions:
        if isinstance(a, AnnotatePod):
            assert not forbidden & set(a.annotations)
    for s in ap.status:
        rec = s.fields.get("recommendation")
        if rec:
            r = Resources.parse(rec)
            if target == "compute":
                assert (r.vram_req, r.vram_lim) == (vr(8 * GI), vr(16 * GI))
            else:
                assert (r.tf_req, r.tf_lim) == (tf(10), tf(20))
