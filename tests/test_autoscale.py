"""Workload autoscaler: the usage histograms, upstream's percentile recommender cases, merge and
processor, A4's long-running history and a property of the recommender's floors and ratios.

Numbered tests are upstream's cases (given → expected), each stated in its test. Where A4/A5 change
upstream's result the test says so in its docstring. Cron rules are in tests/test_autoscale_cron.py,
plans on a cluster in tests/test_autoscale_plan.py, the CLI in tests/test_autoscale_cli.py.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.autoscale_support import CFG, R, asr, astate_for, cluster, est_of, history, rows
from tests.fixtures.engine_builders import GI, MI, NOW, build, host, pool, worker, workload
from tftui.engine.autoscale import (
    AutoConfig,
    AutoscaleState,
    Estimates,
    Partial,
    estimate,
    max_allowed,
    merge,
    percentile_recommend,
    process,
    recommend,
    tf,
    vr,
)
from tftui.engine.histogram import TFLOPS_OPTIONS, VRAM_OPTIONS, DecayingHistogram, go_seconds

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
