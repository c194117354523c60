"""Workload autoscaler: upstream's recommender cases, A1–A12, properties and the CLI.

Numbered tests are upstream's cases (given → expected), each stated in its test. Where A4/A5 change
upstream's result the test says so in its docstring.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.engine_builders import GI, MI, NOW, build, host, pool, template, worker, workload
from tftui.engine.autoscale import (
    AutoConfig,
    AutoscaleState,
    CronRuleError,
    Estimates,
    Partial,
    Resources,
    WorkloadHistory,
    active_cron_rule,
    cron_recommend,
    effective_autoscaling,
    estimate,
    max_allowed,
    merge,
    percentile_recommend,
    plan_autoscale,
    process,
    recommend,
    tf,
    vr,
)
from tftui.engine.histogram import TFLOPS_OPTIONS, VRAM_OPTIONS, DecayingHistogram, go_seconds
from tftui.engine.plan import AnnotatePod, Event
from tftui.model.quantity import parse_quantity

MIN = timedelta(minutes=1)
START = NOW - timedelta(hours=2)
UTCZ = ZoneInfo("UTC")
TFK, TFL, VK, VL = (
    f"tensor-fusion.ai/{k}" for k in ("tflops-request", "tflops-limit", "vram-request", "vram-limit")
)


def rows(
    series: Iterable[tuple[float, float]],
    *,
    pod: str = "w1",
    wl: str = "w",
    ns: str = "default",
    start: datetime = START,
) -> list[dict[str, Any]]:
    """One row per minute: (TFLOPS, VRAM bytes)."""
    return [
        {
            "namespace": ns,
            "workload": wl,
            "pod_name": pod,
            "worker": f"uid-{pod}",
            "uuid": "g",
            "compute_tflops": t,
            "compute_percentage": 0.0,
            "memory_bytes": m,
            "ts": start + i * MIN,
        }
        for i, (t, m) in enumerate(series)
    ]


def history(*row_sets: list[dict[str, Any]], period: timedelta = timedelta(hours=2)) -> WorkloadHistory:
    ast = AutoscaleState()
    ast.periods["default/w"] = period
    merged = sorted((r for rs in row_sets for r in rs), key=lambda r: r["ts"])
    ast.add_samples(merged)
    return ast.workloads["default/w"]


def R(tq: Any, tl: Any, vq: Any, vl: Any) -> Resources:
    return Resources(*(parse_quantity(str(x)) for x in (tq, tl, vq, vl)))


CFG = AutoConfig.parse({"enable": True})


def est_of(series: Iterable[tuple[float, float]]) -> Estimates:
    return estimate(history(rows(series)), CFG)


# -- histogram -----------------------------------------------------------------------------------


def test_vpa_bucket_layout() -> None:
    assert TFLOPS_OPTIONS.num_buckets == 176 and VRAM_OPTIONS.num_buckets == 176
    assert TFLOPS_OPTIONS.bucket_start(175) == pytest.approx(10211, rel=1e-3)
    assert VRAM_OPTIONS.bucket_start(175) == pytest.approx(1.021e12, rel=1e-3)
    assert TFLOPS_OPTIONS.find_bucket(0.05) == 0


@pytest.mark.parametrize(
    ("usage", "expected"), [(0.2, 0), (1, 1), (4, 4), (10, 11), (12, 13), (20, 24), (50, 58), (100, 117)]
)
def test_tflops_estimate_table(usage: float, expected: int) -> None:
    assert est_of([(usage, GI)] * 10).tf == (expected,) * 3


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (100 * MI, 126805489),
        (GI, 1238659776),
        (2 * GI, 2539377048),
        (4 * GI, 4992073455),
        (6 * GI, 7485380855),
        (30 * GI, 38371505092),
    ],
)
def test_vram_estimate_table(usage: int, expected: int) -> None:
    assert est_of([(1.0, usage)] * 10).vram == (expected,) * 3


def test_percentile_of_empty_is_zero_and_subtract_clamps_whole_bucket() -> None:
    h = DecayingHistogram(TFLOPS_OPTIONS, 3600)
    assert h.is_empty() and h.percentile(0.5) == 0
    t = go_seconds(NOW)
    h.add(5, 1.0, t)
    h.subtract(5, 0.99995, t)  # within epsilon of the bucket → the whole bucket goes
    assert h.is_empty()


def test_batch_add_matches_sample_by_sample_across_reference_shifts() -> None:
    """`add_many` (the load's hot path) equals VPA's one-at-a-time `add`, including ref shifts."""
    rng = random.Random(3)
    samples = [(go_seconds(NOW) + i * 600.0, rng.uniform(0, 500)) for i in range(3000)]  # ~21 days
    a, b = DecayingHistogram(TFLOPS_OPTIONS, 1800), DecayingHistogram(TFLOPS_OPTIONS, 1800)
    for t, v in samples:
        a.add(v, 0.1, t)
    b.add_many(samples, 0.1)
    assert a.ref == b.ref and a.ref > go_seconds(NOW)
    assert (a.min_bucket, a.max_bucket) == (b.min_bucket, b.max_bucket)
    for p in (0.0, 0.5, 0.9, 0.95, 0.99, 1.0):
        assert a.percentile(p) == b.percentile(p)


def test_incremental_loads_equal_one_history_load() -> None:
    """State over time: history once, then per-interval loads, gives the same histograms."""
    series = [(float(i % 37), (1 + i % 5) * GI) for i in range(240)]
    all_rows = rows(series, start=NOW - timedelta(hours=4))
    one, inc = AutoscaleState(), AutoscaleState()
    one.gpu_tflops = inc.gpu_tflops = {"g": 1000.0}  # the idle rows (0 TFLOPS, 0 %) are on a known GPU
    one.add_samples(all_rows)
    for i in range(0, 240, 7):
        inc.add_samples(all_rows[i : i + 7])
    a, b = one.workloads["default/w"], inc.workloads["default/w"]
    assert estimate(a, CFG) == estimate(b, CFG)
    assert a.samples == b.samples == 240
    # a replayed (older) batch is ignored per worker, like upstream's timestamp check
    inc.add_samples(all_rows[:50])
    assert estimate(inc.workloads["default/w"], CFG) == estimate(a, CFG)


# -- upstream's cases: percentile recommender -----------------------------------------------------


def test_s1_constant_load() -> None:
    e = est_of([(10, 4 * GI)] * 120)
    assert e.tf == (11, 11, 11) and e.vram == (4992073455,) * 3
    spec = R(20, 40, "8Gi", "16Gi")
    p = percentile_recommend(e, CFG, "medium", spec, spec, None)
    assert p is not None and not p.has_applied
    assert p.resources == R(11, 40, 4992073455, 4992073455)
    assert p.condition == (
        "Updated",
        "Compute scaled: request 20 -> 11, limit 40 -> 40, VRAM scaled: request 8Gi -> 4992073455, "
        "limit 16Gi -> 4992073455",
    )


@pytest.mark.parametrize(("qos", "req"), [("medium", 5), ("high", 24), ("critical", 24)])
def test_s2_decay_favours_recent_data(qos: str, req: int) -> None:
    e = est_of([(20, GI)] * 60 + [(5, GI)] * 60)
    assert e.tf == (5, 24, 24)
    spec = R(10, 20, "8Gi", "16Gi")
    p = percentile_recommend(e, CFG, qos, spec, spec, None)
    assert p is not None and (p.resources.tf_req, p.resources.tf_lim) == (tf(req), tf(24))


def test_s3_reversed_order() -> None:
    assert est_of([(5, GI)] * 60 + [(20, GI)] * 60).tf == (24, 24, 24)


def test_s4_recent_spikes() -> None:
    assert est_of([(9, GI)] * 100 + [(30, GI)] * 5).tf == (10, 34, 34)


def test_s5_ramp() -> None:
    assert est_of([(float(i), GI) for i in range(1, 101)]).tf == (74, 111, 117)


def test_s6_pooled_workers() -> None:
    sets = [rows([(4, 2 * GI)] * 120, pod=f"a{i}") for i in range(3)] + [rows([(12, 6 * GI)] * 120, pod="b")]
    e = estimate(history(*sets), CFG)
    assert e.tf == (4, 13, 13)
    assert e.vram == (2539377048, 7485380855, 7485380855)
    spec = R(10, 20, "8Gi", "16Gi")
    p = percentile_recommend(e, CFG, "medium", spec, spec, None)
    assert p is not None and (p.resources.tf_req, p.resources.tf_lim) == (tf(4), tf(20))


def test_s7_vram_peak_replacement() -> None:
    e = est_of([(1, 2 * GI), (1, 6 * GI), (1, 3 * GI)])
    assert e.vram == (7485380855,) * 3


def test_s8_max_ratio_clamp() -> None:
    e = est_of([(50, 30 * GI)] * 30)
    assert e.tf[0] == 58 and e.vram[0] == 38371505092
    spec = R(2, 4, "4Gi", "8Gi")
    p = percentile_recommend(e, CFG, "medium", spec, spec, None)
    assert p is not None
    assert p.resources == R(20, 40, "20Gi", 38371505092)
    assert str(p.resources.vram_req) == "20Gi"


def test_s9_floors() -> None:
    e = est_of([(0.2, 100 * MI)] * 30)
    assert e.tf[0] == 0 and e.vram[0] == 126805489
    spec = R(5, 10, "2Gi", "4Gi")
    p = percentile_recommend(e, CFG, "medium", spec, spec, None)
    assert p is not None and p.resources == R(1, 10, "1Gi", "1Gi")


def test_s10_inside_threshold() -> None:
    e = est_of([(10, 4 * GI)] * 60)
    spec = R(12, 20, "5Gi", "8Gi")
    p = percentile_recommend(e, CFG, "medium", spec, spec, None)
    assert p is not None and p.has_applied
    assert p.condition == (
        "InsideUpdateThreshold",
        "Compute change (1) within threshold (1), VRAM change (376635665) within threshold (512Mi), "
        "no update performed",
    )
    assert merge([p], spec) is None  # no recommendation: status and workers unchanged


def test_s11_one_resource_over_threshold_updates_both() -> None:
    e = est_of([(10, 4 * GI)] * 60)
    spec = R(13, 20, "5Gi", "8Gi")
    p = percentile_recommend(e, CFG, "medium", spec, spec, None)
    assert p is not None and p.resources == R(11, 20, 4992073455, 4992073455)


UPSTREAM_EST = Estimates((0, 0, 0), (0, 0, 0), (100, 200, 300), (100 * GI, 200 * GI, 300 * GI))


def test_s12_below_bounds() -> None:
    spec = R(20, 40, "20Gi", "40Gi")
    p = percentile_recommend(UPSTREAM_EST, CFG, "medium", spec, spec, None)
    assert p is not None and p.resources == R(100, 300, "100Gi", "200Gi")
    assert p.condition is not None and "Compute scaled" in p.condition[1] and "VRAM scaled" in p.condition[1]


def test_s13_above_bounds() -> None:
    cur = R(400, 800, "400Gi", "800Gi")
    p = percentile_recommend(UPSTREAM_EST, CFG, "medium", cur, cur, None)
    assert p is not None and p.resources == R(100, 800, "100Gi", "300Gi")


def test_s14_at_bounds() -> None:
    cur = R(100, 300, "100Gi", "300Gi")
    p = percentile_recommend(UPSTREAM_EST, CFG, "medium", cur, cur, None)
    assert p is not None and p.has_applied and p.condition is not None
    assert p.condition[0] == "InsideUpdateThreshold"
    assert p.condition[1].startswith(
        "Compute change (0) within threshold (10), VRAM change (0) within threshold (10Gi), "
    )


def test_s15_config_parsing() -> None:
    c = AutoConfig.parse(
        {"targetComputePercentile": "0.8", "marginFraction": "0.1", "updateThreshold": "0.2"}
    )
    assert (c.tf_target, c.margin, c.threshold) == (0.8, 0.1, 0.2)
    for bad in ("not-a-float", "", " 0.8", "0_8"):
        assert AutoConfig.parse({"targetComputePercentile": bad}).tf_target == 0.95
    assert AutoConfig.parse({"historyDataPeriod": "7d"}).history == timedelta(hours=2)


def test_a4_interval_and_period_zero_are_config_errors() -> None:
    """A4: upstream panics on interval 0s and divides by zero on historyDataPeriod 0s."""
    assert AutoConfig.parse({"interval": "0s"}).errors
    assert AutoConfig.parse({"interval": "-1m"}).errors
    assert AutoConfig.parse({"historyDataPeriod": "0s"}).errors
    objs = [
        pool(),
        *host("n1"),
        workload("w", spec=asr(enable=True, interval="0s")),
        worker("w1", ["n1-gpu-0"], workload="w"),
    ]
    res = recommend(build(objs), AutoscaleState(), NOW)
    assert res.workloads["default/w"].reason == "invalid-config"


# -- cluster fixtures ----------------------------------------------------------------------------


def asr(**fields: Any) -> dict[str, Any]:
    return {"autoScalingConfig": {"autoSetResources": fields}}


def cluster(
    *,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    workers: int = 1,
    worker_ann: dict[str, str] | None = None,
    tflops: Any = 10,
    vram: Any = "8Gi",
    tflops_limit: Any = 20,
    vram_limit: Any = "16Gi",
    extra: Iterable[dict[str, Any]] = (),
    pool_template: str | None = None,
    labels: dict[str, str] | None = None,
    gpu_tflops: int = 1000,
) -> list[dict[str, Any]]:
    wl = workload(
        "w",
        replicas=workers,
        tflops=tflops,
        vram=vram,
        tflops_limit=tflops_limit,
        vram_limit=vram_limit,
        spec=spec,
    )
    if status:
        wl["status"].update(status)
    ws = [
        worker(
            f"w{i}",
            [f"n1-gpu-{i - 1}"],
            workload="w",
            tflops=tflops,
            vram=vram,
            tflops_limit=tflops_limit,
            vram_limit=vram_limit,
            annotations=worker_ann,
            labels=labels,
        )
        for i in range(1, workers + 1)
    ]
    return [
        pool(template=pool_template),
        *host("n1", gpus=4, tflops=gpu_tflops, vram="1000Gi"),
        wl,
        *ws,
        *extra,
    ]


def astate_for(
    objs: list[dict[str, Any]], series: Sequence[tuple[float, float]], *, start: datetime = START
) -> AutoscaleState:
    ast = AutoscaleState()
    ast.configure(build(objs))
    ast.add_samples(rows(series, start=start))
    return ast


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


# -- cases 17-20: merge and processor -------------------------------------------------------------


def test_s17_merge() -> None:
    r1 = Partial(R(10, 15, "10Gi", "15Gi"), False)
    r2 = Partial(R(5, 20, "15Gi", "20Gi"), False)
    assert merge([r1, r2], R(1, 1, "1Gi", "1Gi")) == R(10, 15, "15Gi", "20Gi")


def test_s18_scale_down_lock() -> None:
    locked = Partial(R(50, 50, "50Gi", "50Gi"), True, locking=True)
    assert merge([locked, Partial(R(10, 10, "10Gi", "10Gi"), False)], R(1, 1, "1Gi", "1Gi")) is None


def test_s19_capacity_cap() -> None:
    cur = R(50, 50, "50Gi", "50Gi")
    rec = R(200, 400, "200Gi", "400Gi")
    out, msg = process(rec, cur, (100, 100 * GI))
    assert out == R(100, 400, "100Gi", "400Gi")
    assert msg == "TFlops request set to max allowed: (100), VRAM request set to max allowed: (100Gi)"
    assert process(rec, cur, (300, 300 * GI)) == (rec, "")


def test_s20_max_allowed_per_worker() -> None:
    one = build(
        [
            pool(),
            *host("n1", gpus=1, tflops=2000, vram="2000Gi"),
            worker("a", ["n1-gpu-0"], workload="w", tflops=10, vram="8Gi"),
        ]
    )
    assert max_allowed(one, one.workloads["default/w"]) == (2000, 2000 * GI)
    two = build(
        [
            pool(),
            *host("n1", gpus=1, tflops=2000, vram="2000Gi"),
            *(worker(n, ["n1-gpu-0"], workload="w", tflops=10, vram="8Gi") for n in ("a", "b")),
        ]
    )
    assert max_allowed(two, two.workloads["default/w"]) == (1000, 1000 * GI)
    none = build([pool(), *host("n1"), workload("w")])
    assert max_allowed(none, none.workloads["default/w"]) is None


def test_s32_zero_fill() -> None:
    """External scaler itself is not ported; the zero-fill step of the merge is."""
    ext = Partial(R(0, 0, "6Gi", "12Gi"), False)
    assert merge([ext], R(10, 20, "8Gi", "16Gi")) == R(10, 20, "6Gi", "12Gi")


# -- cases 21-27: cron ----------------------------------------------------------------------------

RULE = {
    "enable": True,
    "name": "test",
    "start": "0 0 * * *",
    "end": "59 23 * * *",
    "desiredResources": {
        "requests": {"tflops": "10", "vram": "8Gi"},
        "limits": {"tflops": "20", "vram": "16Gi"},
    },
}
DESIRED = R(10, 20, "8Gi", "16Gi")
SPEC = R(5, 10, "4Gi", "8Gi")


def test_s21_cron_first_activation() -> None:
    active = active_cron_rule([RULE], NOW, UTCZ)
    assert active is not None and active.name == "test"
    p = cron_recommend(active, None, SPEC, SPEC, None)
    assert p is not None and p.resources == DESIRED and not p.has_applied and p.locking
    assert p.condition == ("RuleActive", 'Cron scaling rule "test" is active')


def test_s22_cron_steady_state() -> None:
    active = active_cron_rule([RULE], NOW, UTCZ)
    p = cron_recommend(active, RULE, SPEC, DESIRED, None)
    assert p is not None and p.has_applied and p.resources == DESIRED and p.condition is None


def test_s23_cron_end() -> None:
    active = active_cron_rule([{**RULE, "enable": False}], NOW, UTCZ)
    assert active is None
    p = cron_recommend(active, RULE, SPEC, DESIRED, None)
    assert p is not None and p.resources == SPEC and not p.has_applied and p.locking
    assert p.condition == ("RuleInactive", 'Cron scaling rule "test" is inactive')
    assert cron_recommend(None, None, SPEC, SPEC, None) is None


@pytest.mark.parametrize(
    "rules",
    [
        [RULE, {**RULE}],
        [{**RULE, "start": "-30 0 * * *"}],
        [{**RULE, "start": "59 -23 * * *"}],
        [{**RULE, "end": "59 23 * -3 *"}],
        [{**RULE, "end": "0 0 * * *"}],
        [{**RULE, "start": "@daily"}],
    ],
)
def test_s24_cron_errors(rules: list[dict[str, Any]]) -> None:
    with pytest.raises(CronRuleError):
        active_cron_rule(rules, NOW, UTCZ)


def test_s24_disabled_or_empty_is_no_rule() -> None:
    assert active_cron_rule([], NOW, UTCZ) is None
    assert active_cron_rule([{**RULE, "enable": False}], NOW, UTCZ) is None


def test_s25_cron_windows() -> None:
    thu = {**RULE, "start": "0 0 * * Thu", "end": "59 23 * * Thu"}
    for day in range(7):
        t = datetime(2026, 11, 23, 12, 0, tzinfo=UTC) + timedelta(days=day)
        assert (active_cron_rule([thu], t, UTCZ) is not None) == (t.weekday() == 3)
    night = {**RULE, "start": "0 22 * * *", "end": "0 6 * * *"}
    for hour, on in ((23, True), (5, True), (12, False)):
        assert (active_cron_rule([night], NOW.replace(hour=hour), UTCZ) is not None) == on


def test_s26_cron_end_to_end() -> None:
    big = {
        **RULE,
        "desiredResources": {
            "requests": {"tflops": "120", "vram": "120Gi"},
            "limits": {"tflops": "120", "vram": "120Gi"},
        },
    }
    objs = cluster(
        spec={"autoScalingConfig": {"autoSetResources": {"enable": True}, "cronScalingRules": [big]}},
        workers=2,
    )
    ap = plan_autoscale(build(objs), AutoscaleState(), NOW)
    patches = [a for a in ap.plan.actions if isinstance(a, AnnotatePod)]
    assert len(patches) == 2
    assert patches[0].annotations == {TFK: "120", TFL: "120", VK: "120Gi", VL: "120Gi"}
    (st_patch,) = ap.status
    assert st_patch.fields["recommendation"]["requests"]["tflops"] == "120"
    assert st_patch.fields["appliedRecommendedReplicas"] == 2
    assert st_patch.fields["activeCronScalingRule"]["name"] == "test"
    # the rule is blanked: back to the spec
    blank = {**big, "start": "", "end": ""}
    objs2 = cluster(
        spec={"autoScalingConfig": {"autoSetResources": {"enable": True}, "cronScalingRules": [blank]}},
        workers=2,
        status={"recommendation": st_patch.fields["recommendation"], "activeCronScalingRule": big},
        worker_ann={TFK: "120", TFL: "120", VK: "120Gi", VL: "120Gi"},
    )
    ap2 = plan_autoscale(build(objs2), AutoscaleState(), NOW)
    p2 = [a for a in ap2.plan.actions if isinstance(a, AnnotatePod)]
    assert p2[0].annotations == {TFK: "10", TFL: "20", VK: "8Gi", VL: "16Gi"}
    assert ap2.status[0].fields["activeCronScalingRule"] is None


def test_s27_cron_blocks_scale_down() -> None:
    big = {
        **RULE,
        "desiredResources": {
            "requests": {"tflops": "110", "vram": "110Gi"},
            "limits": {"tflops": "110", "vram": "110Gi"},
        },
    }
    objs = cluster(
        spec={"autoScalingConfig": {"autoSetResources": {"enable": True}, "cronScalingRules": [big]}},
        status={
            "recommendation": R(110, 110, "110Gi", "110Gi").to_json(),
            "activeCronScalingRule": big,
        },
        worker_ann={TFK: "110", TFL: "110", VK: "110Gi", VL: "110Gi"},
    )
    ast = astate_for(objs, [(0.5, 500 * MI)] * 120)
    ap = plan_autoscale(build(objs), ast, NOW)
    assert ap.result is not None and ap.result.workloads["default/w"].reason == "scale-down-locked"
    assert not [a for a in ap.plan.actions if isinstance(a, AnnotatePod)]


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


# -- A4: long-running VRAM history ---------------------------------------------------------------


def test_a4_vram_history_never_empties_on_long_running_workload() -> None:
    """Upstream's VRAM histogram went empty at hours 102-114 of a 6-day random walk (A4)."""
    rng = random.Random(5)
    mem = 4.0
    series = []
    for _ in range(6 * 24 * 60):
        mem = min(7.0, max(1.0, mem + rng.uniform(-0.05, 0.05)))
        series.append((1.0, mem * GI))
    ast = AutoscaleState()
    begin = NOW - timedelta(days=6)
    all_rows = rows(series, start=begin)
    for h in range(0, 6 * 24, 6):
        ast.add_samples(all_rows[h * 60 : (h + 6) * 60])
        hist = ast.workloads["default/w"]
        assert not hist.vram.is_empty(), f"VRAM histogram empty at hour {h + 6}"
        assert estimate(hist, CFG).vram[1] >= GI


def test_a4_state_keyed_by_pod_name_and_pruned() -> None:
    objs = cluster()
    ast = astate_for(objs, [(1, GI)] * 5)
    assert set(ast.workloads["default/w"].samplers) == {"w1"}
    ast.configure(build(cluster(extra=[worker("w9", ["n1-gpu-1"], workload="w")])))
    assert set(ast.workloads["default/w"].samplers) == {"w1"}
    gone = [o for o in cluster() if o["metadata"].get("name") != "w1"]
    ast.configure(build(gone))
    assert ast.workloads["default/w"].samplers == {}
    assert not ast.workloads["default/w"].is_empty()  # the histograms survive


def test_compute_percentage_rows_use_gpu_capacity() -> None:
    objs = cluster()
    ast = AutoscaleState()
    ast.configure(build(objs))
    r = rows([(0.0, GI)] * 30)
    for x in r:
        x["uuid"], x["compute_percentage"] = "n1-gpu-0", 10.0  # 10% of 1000 TFLOPS
    ast.add_samples(r)
    assert estimate(ast.workloads["default/w"], CFG).tf[1] == _est_tf(100.0)


def _est_tf(usage: float) -> int:
    return est_of([(usage, GI)] * 3).tf[1]


# -- properties ----------------------------------------------------------------------------------

qty_tf = st.integers(min_value=1, max_value=2000)
qty_v = st.integers(min_value=1, max_value=200)


@settings(max_examples=150, deadline=None)
@given(
    lo=st.integers(0, 5000),
    span=st.integers(0, 5000),
    orig_req=qty_tf,
    orig_extra=st.integers(0, 500),
    vlo=st.integers(0, 500),
    vorig=qty_v,
    qos=st.sampled_from(["low", "medium", "high", "critical"]),
)
def test_property_floors_and_ratios(
    lo: int, span: int, orig_req: int, orig_extra: int, vlo: int, vorig: int, qos: str
) -> None:
    est = Estimates(
        (0, 0, 0), (0, 0, 0), (lo, lo + span // 2, lo + span), (vlo * GI, vlo * GI, (vlo + 1) * GI)
    )
    spec = R(orig_req, orig_req + orig_extra, vr(vorig * GI), vr(2 * vorig * GI))
    p = percentile_recommend(est, CFG, qos, spec, spec, None)
    if p is None:
        return
    rec = p.resources
    for val, orig, mn, mx, floor in (
        (rec.tf_req, spec.tf_req, 0.1, 10.0, 1),
        (rec.vram_req, spec.vram_req, 0.2, 5.0, GI),
        (rec.vram_lim, spec.vram_lim, 0.2, 5.0, GI),
    ):
        lo_b, hi_b = int(float(orig) * mn), int(float(orig) * mx)
        if lo_b:
            assert val.amount >= lo_b
        assert val.amount <= hi_b
        assert val.amount >= min(floor, hi_b)
    assert rec.tf_lim.amount >= int(float(spec.tf_lim))  # the compute limit never shrinks


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


def _window_rule(start: str, end: str) -> dict[str, Any]:
    return {**RULE, "start": start, "end": end}


@settings(max_examples=300, deadline=None)
@given(minute=st.integers(0, 60 * 24 * 30))
def test_property_cron_window_across_dst_new_york(minute: int) -> None:
    """Spring forward (2026-03-08) and fall back (2026-11-01): active ⟺ local hour is 1 or 2."""
    ny = ZoneInfo("America/New_York")
    base = datetime(2026, 3, 1, tzinfo=UTC) if minute % 2 else datetime(2026, 10, 20, tzinfo=UTC)
    t = base + timedelta(minutes=minute // 2 * 2)
    rule = _window_rule("CRON_TZ=America/New_York 0 1 * * *", "CRON_TZ=America/New_York 0 3 * * *")
    assert (active_cron_rule([rule], t, UTCZ) is not None) == (t.astimezone(ny).hour in (1, 2))
    rule_tz = _window_rule("0 1 * * *", "0 3 * * *")  # the controller's own zone
    assert (active_cron_rule([rule_tz], t, ny) is not None) == (t.astimezone(ny).hour in (1, 2))


@settings(max_examples=200, deadline=None)
@given(minute=st.integers(0, 60 * 24 * 14))
def test_property_cron_window_shanghai(minute: int) -> None:
    sh = ZoneInfo("Asia/Shanghai")
    t = datetime(2026, 3, 1, tzinfo=UTC) + timedelta(minutes=minute)
    rule = _window_rule("TZ=Asia/Shanghai 0 22 * * *", "TZ=Asia/Shanghai 0 6 * * *")
    h = t.astimezone(sh).hour
    assert (active_cron_rule([rule], t, UTCZ) is not None) == (h >= 22 or h < 6)


def test_cron_fall_back_repeated_start_hour_stays_active() -> None:
    """On 2026-11-01 New York repeats 01:00–02:00 and robfig fires `0 1 * * *` twice.

    Upstream's "next end before next start" is false through the first 01:xx (the repeat start
    comes first); tftui treats the repeat as the same window, so 01:00 EDT → 03:00 EST is active.
    """
    rule = _window_rule("CRON_TZ=America/New_York 0 1 * * *", "CRON_TZ=America/New_York 0 3 * * *")
    at = datetime(2026, 11, 1, 5, 0, tzinfo=UTC)  # 01:00 EDT
    active = [m for m in range(-30, 210, 10) if active_cron_rule([rule], at + timedelta(minutes=m), UTCZ)]
    assert active == list(range(0, 180, 10))  # 05:00–07:59 UTC: both 01:xx and the 02:xx hour


def test_cron_spring_forward_gap_start_is_skipped() -> None:
    """robfig skips a start inside the DST gap (02:30 does not exist on 2026-03-08 in New York).

    Upstream's rule "active iff the next end comes before the next start" then makes the rule active
    from the previous end (03-07 04:00) until 03-08 04:00: faithful, and surprising.
    """
    ny = ZoneInfo("America/New_York")
    rule = _window_rule("30 2 * * *", "0 4 * * *")
    assert active_cron_rule([rule], datetime(2026, 3, 6, 12, 0, tzinfo=ny), ny) is None
    assert active_cron_rule([rule], datetime(2026, 3, 7, 12, 0, tzinfo=ny), ny) is not None
    assert active_cron_rule([rule], datetime(2026, 3, 8, 3, 30, tzinfo=ny), ny) is not None
    assert active_cron_rule([rule], datetime(2026, 3, 8, 12, 0, tzinfo=ny), ny) is None
    assert active_cron_rule([rule], datetime(2026, 3, 9, 3, 0, tzinfo=ny), ny) is not None


# -- CLI -----------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tftui", *args], capture_output=True, text=True, timeout=120)


def test_cli_recommend_demo_json_is_stable_and_explains() -> None:
    a, b = _cli("recommend", "--demo", "--json"), _cli("--demo", "recommend", "--json")
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    doc = json.loads(a.stdout)
    reasons = {w["reason"] for w in doc["workloads"]}
    assert len(doc["workloads"]) > 10
    assert {"disabled", "applied"} <= reasons
    assert all(w["reason"] for w in doc["workloads"])


def test_cli_recommend_one_workload_text_and_errors() -> None:
    doc = json.loads(_cli("recommend", "--demo", "--json").stdout)
    key = doc["workloads"][0]["workload"]
    out = _cli("recommend", "--demo", "--workload", key)
    assert out.returncode == 0, out.stderr
    assert key in out.stdout and ("would apply" in out.stdout or "not applied" in out.stdout)
    bad = _cli("recommend", "--demo", "--workload", "nope/nope")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    bad_now = _cli("recommend", "--demo", "--now", "yesterday")
    assert bad_now.returncode == 2 and bad_now.stderr.startswith("tftui: --now")


def test_cli_recommend_without_metrics_source_is_one_line_exit_2(tmp_path: Path) -> None:
    dump = _cli("dump", "--demo")
    path = tmp_path / "d.json"
    path.write_text(dump.stdout)
    out = subprocess.run(
        [sys.executable, "-m", "tftui", "recommend", "--from", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "TFTUI_METRICS_DSN"},
    )
    assert out.returncode == 2 and out.stderr.startswith("tftui: no metrics source")
    assert len(out.stderr.strip().splitlines()) == 1


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
