"""The shortcuts that make a what-if `+autoscale` run cheap give exactly what the reference paths
give: the simulator's usage fed as per-worker tuples (`UsageMetrics.usage_samples`, one demand per
workload and instant) against its rows, and the memoised percentile recommender and effective
configuration against a fresh computation. The last test runs ten simulated hours both ways (and
the acting simulator's copy-on-write patches against deep copies, `test_sim_acting_cow.py`) and
compares every plan."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest

from tftui.engine import autoscale_checks, autoscale_config, autoscale_recommend
from tftui.engine.autoscale import AutoscaleState, WorkloadHistory
from tftui.engine.autoscale_config import AutoConfig, Resources, _effective, effective_autoscaling
from tftui.engine.autoscale_recommenders import Estimates, percentile_recommend, percentile_recommend_memo
from tftui.engine.histogram import DecayingHistogram
from tftui.engine.plan import AnnotatePod
from tftui.model.quantity import Quantity
from tftui.model.usage import SampleInstant
from tftui.runtime import history
from tftui.runtime.whatif import SimConfig, WhatIfCluster, parse_policy, render_json, simulate
from tftui.runtime.whatif_policy import apply_policy
from tftui.runtime.whatif_usage import DemandColumns, Instant, Usage, UsageMetrics, demand_at
from tftui.sources.sim import acting_store
from tftui.sources.sim.acting_objects import _merge_patch
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects

OBJECTS = generate_objects(5, 40, DEFAULT_NOW)


def _same_hist(a: DecayingHistogram, b: DecayingHistogram) -> None:
    assert (a.ref, a.total, a.min_bucket, a.max_bucket) == (b.ref, b.total, b.min_bucket, b.max_bucket)
    assert a.weights == b.weights  # bit for bit, not approximately


def _same(a: AutoscaleState, b: AutoscaleState) -> None:
    assert list(a.workloads) == list(b.workloads)
    for key, ha in a.workloads.items():
        hb: WorkloadHistory = b.workloads[key]
        assert (ha.samples, ha.vram_samples, ha.tf_first, ha.vram_first) == (
            hb.samples, hb.vram_samples, hb.tf_first, hb.vram_first)  # fmt: skip
        _same_hist(ha.tf, hb.tf)
        _same_hist(ha.vram, hb.vram)
        assert list(ha.samplers) == list(hb.samplers), key
        for pod, sa in ha.samplers.items():
            sb = hb.samplers[pod]
            assert (sa.last_tf, sa.last_vram, sa.window_end, sa.peak) == (
                sb.last_tf, sb.last_vram, sb.window_end, sb.peak)  # fmt: skip


def test_usage_samples_feed_the_histograms_as_the_rows_do() -> None:
    """Loads of 2 h, then 15 min at a time over a changing cluster (evictions, churn, time), through
    `load_usage`'s tuple path and through the rows: the same histograms and samplers, bit for bit."""
    sim = WhatIfCluster(apply_policy(OBJECTS, parse_policy("CompactFirst+autoscale")), DEFAULT_NOW, 3)
    usage = Usage(3)
    metrics = UsageMetrics(sim, usage)
    fast, slow = AutoscaleState(), AutoscaleState()
    start = DEFAULT_NOW - timedelta(hours=2)
    names = sorted(sim.state().workloads)
    for step in range(8):
        now = sim.now()
        state = sim.state()
        fast.configure(state)
        slow.configure(state)
        rows = list(metrics.rows("tf_worker_usage", start, now))
        assert history.load_usage(metrics, fast, start, now) == slow.add_samples(rows) == len(rows)
        assert rows
        _same(fast, slow)
        start = now
        if step % 3 == 1:  # workloads leave: their workers stop reporting
            sim.remove_workloads([tuple(k.split("/", 1)) for k in names[step::9]])  # type: ignore[misc]
        sim.advance(timedelta(minutes=15))


def test_usage_columns_feed_the_histograms_as_the_tuples_do() -> None:
    """`add_worker_columns` against `add_worker_samples` over the same samples, load after load:
    multi-GPU workers, a GPU of unknown or zero capacity, a worker without GPUs, workers missing at
    some instants, two workers of one pod, loads overlapping earlier ones (rows older than a pod's
    last sample), negative compute, VRAM windows closing and peaks rising mid-window."""
    import random

    import numpy as np

    from tftui.engine.autoscale_columns import WorkerColumns, add_worker_columns
    from tftui.engine.histogram import go_seconds

    rng = random.Random(3)
    caps = {"g0": 100.0, "g1": 312.0, "g2": 0.0, "g3": 65.0}
    pods = [
        ("a", "w1", "p1", ("g0",)),
        ("a", "w1", "p2", ("g1", "g3")),
        ("a", "w2", "p3", ("g9", "g0")),  # g9: capacity unknown
        ("b", "w3", "p4", ("g2",)),  # capacity 0: VRAM only
        ("b", "w3", "p5", ()),  # no GPUs: no row
        ("a", "w1", "p1", ("g3",)),  # the same pod again: one sampler
        ("b", "w4", "p6", ("g1", "g1", "g0")),
    ]
    cols_state, tuples_state = AutoscaleState(), AutoscaleState()
    for st in (cols_state, tuples_state):
        st.gpu_tflops = dict(caps)
    t0 = int(DEFAULT_NOW.timestamp())
    start = t0
    for load in range(40):
        n = rng.choice([1, 2, 3, 6])
        start += rng.choice([-900, 0, 300, 900, 3 * 3600, 30 * 3600])  # back in time too
        times = [datetime.fromtimestamp(start + 300 * i, UTC) for i in range(n)]
        pct = np.array([[rng.choice([0.0, -1.0, rng.uniform(0, 150)]) for _ in pods] for _ in times])
        mem = np.array([[rng.choice([2**30, rng.randrange(1, 2**36)]) for _ in pods] for _ in times])
        present = np.array([[rng.random() < 0.85 for _ in pods] for _ in times])
        instants: list[SampleInstant] = [
            (
                ts,
                [
                    (*pods[j][:3], pods[j][3], float(pct[i, j]), int(mem[i, j]))
                    for j in range(len(pods))
                    if present[i, j]
                ],
            )
            for i, ts in enumerate(times)
        ]
        got = add_worker_columns(cols_state, WorkerColumns(times, pods, pct, mem, present))
        assert got == tuples_state.add_worker_samples(instants), load
        _same(cols_state, tuples_state)
        assert go_seconds(times[-1]) > 0
    assert any(h.samples for h in tuples_state.workloads.values())
    assert any(h.vram.total for h in tuples_state.workloads.values())


def test_usage_columns_are_the_usage_samples() -> None:
    """The columns hold the tuples' very values (compute % and memory, the same floats and ints),
    the same workers at the same instants; recorded usage has no columns (its demands may be
    unknown)."""
    sim = WhatIfCluster(OBJECTS, DEFAULT_NOW, 1)
    metrics = UsageMetrics(sim, Usage(1))
    start, end = DEFAULT_NOW - timedelta(minutes=40), DEFAULT_NOW
    want = metrics.usage_samples(start, end)
    cols = metrics.usage_columns(start, end)
    assert cols is not None and list(cols.times) == [ts for ts, _ in want]
    got = [
        (ts, [(*cols.pods[j][:3], cols.pods[j][3], float(cols.pct[i, j]), int(cols.mem[i, j]))
              for j in range(len(cols.pods)) if cols.present[i, j]])
        for i, ts in enumerate(cols.times)
    ]  # fmt: skip
    assert got == want and sum(len(w) for _, w in want) > 100
    assert UsageMetrics(sim, Usage(1, {"x/y": [1.0] * 24})).usage_columns(start, end) is None


def test_demand_at_an_instant_is_the_workers_demand() -> None:
    """`demand_at` (what the run's figures and the usage samples read) gives `Usage.demand`'s very
    floats for every worker, over instants on and between the drift's knots, across time zones."""
    sim = WhatIfCluster(OBJECTS, DEFAULT_NOW, 1)
    state = sim.state()
    fresh, shared = Usage(1), Usage(1)
    workers = [w for w in state.workers.values() if w.workload]
    # a first demand draws the workload's profile: the next ones take `demand_at`'s shared path
    zones = {shared._params[f"{w.namespace}/{w.workload}"][2] for w in workers if shared.demand(state, w, 0)}
    assert len(zones) > 1
    t0 = int(DEFAULT_NOW.timestamp())
    for t in (t0, t0 + 60, t0 + 450, t0 + 899, t0 + 900, t0 + 7 * 3600 + 17):
        at = Instant(t)
        for w in workers:
            assert demand_at(shared, state, w, at, f"{w.namespace}/{w.workload}") == fresh.demand(state, w, t)


def test_demand_columns_are_demand_at_for_every_workload() -> None:
    """Every profile (bursty ones on both sides of their peak), time zones, knots, and a set of
    workloads that changes between calls: the columns give `demand_at`'s very floats."""
    sim = WhatIfCluster(generate_objects(7, 120, DEFAULT_NOW), DEFAULT_NOW, 7)
    state = sim.state()
    cols_usage, ref_usage = Usage(7), Usage(7)
    columns = DemandColumns(cols_usage)
    firsts: dict[str, Any] = {}
    for w in state.workers.values():
        if w.workload:
            firsts.setdefault(f"{w.namespace}/{w.workload}", w)
    keys = list(firsts)
    profiles = set()
    t0 = int(DEFAULT_NOW.timestamp())
    for i, t in enumerate(
        (t0, t0 + 300, t0 + 899, t0 + 900, t0 + 5 * 3600 + 7, t0 + 11 * 3600, t0 + 17 * 3600)
    ):
        some = {k: firsts[k] for k in (keys if i % 2 == 0 else keys[i::2])}
        got = columns.at(state, some, Instant(t))
        assert list(got) == list(some)
        for k, w in some.items():
            assert got[k] == demand_at(ref_usage, state, w, Instant(t), k), (k, t)
            profiles.add(ref_usage._params[k][0].profile)
    assert profiles == {"over-request", "idle", "bursty", "right-sized"}
    assert len({p[2] for p in ref_usage._params.values()}) > 1  # several time zones


def test_usage_samples_are_the_rows_values() -> None:
    sim = WhatIfCluster(OBJECTS, DEFAULT_NOW, 1)
    metrics = UsageMetrics(sim, Usage(1))
    start, end = DEFAULT_NOW - timedelta(minutes=40), DEFAULT_NOW
    rows = list(metrics.rows("tf_worker_usage", start, end))
    flat = [
        (ts, ns, wl, pod, g, pct, mem)
        for ts, workers in metrics.usage_samples(start, end)
        for ns, wl, pod, gpus, pct, mem in workers
        for g in gpus
    ]
    want = [
        (
            r["ts"],
            r["namespace"],
            r["workload"],
            r["pod_name"],
            r["uuid"],
            r["compute_percentage"],
            r["memory_bytes"],
        )
        for r in rows
    ]
    assert flat == want
    assert len({r["ts"] for r in rows}) == 8  # every 5 min of the 40


def _q(amount: Fraction | int, fmt: str) -> Quantity:
    return Quantity(Fraction(amount), fmt)  # type: ignore[arg-type]


def test_memoised_percentile_recommendation_equals_a_fresh_one() -> None:
    """Over a grid of estimates, QoS, configs and quantities that are equal but print differently
    (`1Gi` and `1073741824`, `1` and `1000m`): the memo never answers for another print format."""
    gi = 1 << 30
    currents = [
        Resources(_q(20, "DecimalSI"), _q(40, "DecimalSI"), _q(8 * gi, "BinarySI"), _q(16 * gi, "BinarySI")),
        Resources(_q(20, "DecimalSI"), _q(40, "DecimalSI"), _q(8 * gi, "DecimalSI"), _q(16 * gi, "DecimalSI")),
        Resources(_q(Fraction(1), "DecimalSI"), _q(Fraction(3, 2), "DecimalSI"), _q(gi, "BinarySI"), _q(gi, "BinarySI")),
        Resources(),
    ]  # fmt: skip
    configs = [AutoConfig(), AutoConfig(threshold=0.5, margin=0.3), AutoConfig(min_compute=0.9, max_vram=1.1)]
    estimates = [
        Estimates((1.0, 2.0, 3.0), (1e9, 2e9, 3e9), (1, 2, 3), (10**9, 2 * 10**9, 3 * 10**9)),
        Estimates((10.0, 18.0, 30.0), (4e9, 8e9, 9e9), (11, 20, 34), (4 * gi, 8 * gi, 9 * gi)),
        Estimates((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0, 0, 0), (0, 0, 0)),
    ]
    checked = 0
    for _ in range(2):  # the second round answers from the memo
        for est in estimates:
            for cfg in configs:
                for qos in ("low", "medium", "high", "critical"):
                    for cur in currents:
                        for orig in currents:
                            for allowed in (None, (5, 2 * gi), (100, 100 * gi)):
                                for measured in ((True, True), (True, False), (False, True)):
                                    args = (est, cfg, qos, cur, orig, allowed, measured)
                                    got = percentile_recommend_memo(*args)
                                    want = percentile_recommend(*args)
                                    assert _partial_text(got) == _partial_text(want), args
                                    checked += 1
    assert checked > 1000


def _partial_text(p: Any) -> str:
    if p is None:
        return "None"
    r = p.resources
    return repr((str(r.tf_req), str(r.tf_lim), str(r.vram_req), str(r.vram_lim), p.has_applied, p.locking,
                 p.condition, p.capped))  # fmt: skip


def test_memoised_effective_config_equals_a_fresh_merge_across_states() -> None:
    """Every state of an autoscaling run (pods annotated, statuses patched, workloads gone and new):
    the configuration and the checks' problems reused for unchanged inputs (or carried from the
    state before) are the ones a fresh merge and a fresh check give."""
    seen = 0

    def check(cluster: WhatIfCluster, _rt: Any) -> None:
        nonlocal seen
        state = cluster.state()
        for wv in state.workloads.values():
            assert autoscale_checks._checked(state, wv) == autoscale_checks._workload(state, wv), wv.key
            assert effective_autoscaling(state, wv) == _effective(state, wv), wv.key
            pool = state.pools.get(wv.pool) if wv.pool else None
            tpl = (
                autoscale_checks._template(pool.template, state.templates.get(pool.template))
                if pool and pool.template
                else []
            )
            assert autoscale_checks.problems(state, wv.key) == autoscale_checks._workload(state, wv) + tpl
            seen += 1

    cfg = SimConfig(duration=timedelta(hours=3), churn=2.0, seed=4)
    simulate(OBJECTS, parse_policy("CompactFirst+defrag+autoscale"), DEFAULT_NOW, cfg, inspect=check)
    assert seen > 0


def test_a_day_of_autoscale_equals_the_reference_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulated day with churn and autoscale through the shortcuts, then through the reference
    paths (rows, fresh recommendations and merges, deep copies): the same plans and figures."""
    cfg = SimConfig(duration=timedelta(hours=10), churn=1.0, seed=2)
    policy = parse_policy("CompactFirst+defrag+autoscale")
    fast = simulate(OBJECTS, policy, DEFAULT_NOW, cfg)
    with monkeypatch.context() as mp:
        mp.delattr(UsageMetrics, "usage_samples")
        mp.delattr(UsageMetrics, "usage_columns")
        mp.setattr(autoscale_recommend, "percentile_recommend_memo", percentile_recommend)
        mp.setattr(autoscale_config, "_effective_inputs", _never_equal)
        mp.setattr(autoscale_checks, "_inputs", _never_equal)
        mp.setattr(autoscale_checks, "carried", lambda _state, _key: None)

        def deep(self: Any, key: Any, patch: Any) -> None:
            _merge_patch(self._mut(key), patch)

        mp.setattr(acting_store._ActingStore, "_mut_merge", deep)
        slow = simulate(OBJECTS, policy, DEFAULT_NOW, cfg)
    plans = [json.dumps(p.to_json(), sort_keys=True, default=str) for p in fast.plans]
    assert plans == [json.dumps(p.to_json(), sort_keys=True, default=str) for p in slow.plans]
    assert any(isinstance(a, AnnotatePod) for p in fast.plans for a in p.actions)
    assert render_json([fast]) == render_json([slow])
    assert not math.isnan(fast.gpu_hours_used)


_COUNTER = iter(range(1 << 62))


def _never_equal(state: Any, wv: Any) -> tuple[tuple[object, ...], tuple[object, ...]]:
    return (next(_COUNTER),), ()


def test_states_with_over_allocated_gpus_are_derived_incrementally(monkeypatch: pytest.MonkeyPatch) -> None:
    """Autoscale over-allocates GPUs (requests raised for workers sharing one; upstream's rules):
    the states after it carry those warnings, and are still derived from the previous one, equal
    to a full build (the warnings too, in the full build's order)."""
    from tests.test_state_incremental import assert_same_state
    from tftui.engine import incremental
    from tftui.engine.state import ClusterState
    from tftui.model.dump import Snapshot

    original, run = incremental.update_state, incremental._Update.run
    seen = {"checked": 0, "incremental": 0, "warned": 0}

    def counted(self: Any) -> ClusterState:
        st = run(self)
        seen["incremental"] += 1
        seen["warned"] += bool(st.warnings)
        return st

    def checked(prev: ClusterState, source: Any) -> ClusterState:
        objs = source.objects if isinstance(source, Snapshot) else list(source)
        inc = original(prev, source)
        assert_same_state(inc, ClusterState.build(objs))
        seen["checked"] += 1
        return inc

    monkeypatch.setattr(incremental, "update_state", checked)
    monkeypatch.setattr(incremental._Update, "run", counted)
    cfg = SimConfig(duration=timedelta(hours=8), churn=0.5, seed=11)
    simulate(generate_objects(7, 60, DEFAULT_NOW), parse_policy("CompactFirst+autoscale"), DEFAULT_NOW, cfg)
    assert seen["warned"] > 5  # over-allocation happened, and did not force full builds
    assert seen["incremental"] > 0.9 * seen["checked"]


def test_percentiles_in_one_walk_equal_one_walk_each() -> None:
    import random

    from tftui.engine.histogram import TFLOPS_OPTIONS, VRAM_OPTIONS

    rng = random.Random(5)
    for i in range(300):
        opts = TFLOPS_OPTIONS if i % 2 else VRAM_OPTIONS
        h = DecayingHistogram(opts, 3600.0)
        top = opts.bucket_start(opts.num_buckets - 1) * 1.5
        for _ in range(rng.choice([0, 1, 2, 5, 40])):
            h.add(
                rng.choice([0.0, rng.uniform(0, top), top]),
                rng.uniform(0.01, 2.0),
                1e10 + rng.uniform(0, 1e5),
            )
        if i % 7 == 0 and not h.is_empty():
            h.subtract(top, 1.0, 1e10)  # a whole bucket gone: bounds move
        ps = tuple(sorted(rng.choice([0.0, 0.5, 0.9, 0.95, 0.98, 0.99, 1.0]) for _ in range(3)))
        ps = ps if i % 3 else (ps[2], ps[0], ps[1])  # any order
        if i % 11 == 0:  # a NaN is never reached (and the others are found as before)
            ps = (ps[0], math.nan, ps[2])
        assert h.percentiles(ps) == tuple(h.percentile(p) for p in ps)  # type: ignore[arg-type]
        assert h.percentiles(ps) == h._percentiles_walk(ps)  # type: ignore[arg-type]


def test_percentiles_by_bisection_equal_the_walk_on_long_and_odd_histograms() -> None:
    """The bisection over the running sums finds the walk's buckets: many buckets, thresholds on a
    running sum exactly, all weight in one bucket, and a NaN weight (the walk is taken then)."""
    import random

    from tftui.engine.histogram import TFLOPS_OPTIONS

    rng = random.Random(9)
    for i in range(200):
        h = DecayingHistogram(TFLOPS_OPTIONS, 43200.0)
        n = rng.choice([1, 3, 50, 400])
        samples = sorted(
            (1e10 + rng.uniform(0, 3e4), rng.choice([0.05, 3.0, rng.uniform(0, 900.0)])) for _ in range(n)
        )
        h.add_many(samples, 1.0)
        ps = (rng.random(), rng.choice([0.5, 0.9, 1.0]), rng.random())
        if i % 5 == 0:  # a threshold equal to a running sum: the first bucket reaching it
            total, acc = h.total, 0.0
            for b in range(h.min_bucket, h.max_bucket):
                acc += h.weights[b]
                if b == (h.min_bucket + h.max_bucket) // 2:
                    break
            ps = (acc / total, ps[1], ps[2])
        assert h.percentiles(ps) == h._percentiles_walk(ps) == tuple(h.percentile(p) for p in ps)
    h = DecayingHistogram(TFLOPS_OPTIONS, 43200.0)
    h.add_many([(1e10, 1.0), (1e10, 5.0), (1e10, 50.0)], 1.0)
    h.set_span(h.min_bucket + 1, [math.nan])
    h.total = math.nan
    assert h.percentiles((0.1, 0.5, 0.9)) == h._percentiles_walk((0.1, 0.5, 0.9))
