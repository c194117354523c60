"""A first autoscale load longer than one day reads aggregates, not raw rows (A12), on both stores.

With a `historyDataPeriod` of days the first load used to materialise every raw row of the window
(a week at 5,000 nodes: hundreds of millions of rows; at 40 nodes already gigabytes). Now the store
answers the TFLOPS groups and each pod's daily VRAM peaks, and the histograms, samplers and
recommendations equal the row-by-row load's. Rows cover pod restarts under one name (a new UID), a
pod absent for more than a day, a pod that starts late, NULL memory, no `pod_name`, `compute_tflops`
written, and half-lives short enough that the histograms' references move many times.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.pg import GI, full_rows
from tests.stores import MetricsStore
from tests.test_autoscale_history import PERCENTILES
from tftui.engine.autoscale import AutoscaleState, recommend
from tftui.engine.autoscale_long import STALE
from tftui.engine.histogram import DecayingHistogram
from tftui.engine.state import ClusterState
from tftui.model.dump import validate_items
from tftui.runtime.history import RAW_CHUNK, autoscale_window, load_usage
from tftui.sources import histograms
from tftui.sources.greptime import GreptimeMetrics
from tftui.sources.ports import SourceError
from tftui.sources.sim.cluster import generate_objects

COL = "greptime_timestamp"
END = datetime.fromisoformat("2026-11-20T12:00:00+00:00")
STEP = timedelta(minutes=5)


def _objects() -> list[dict[str, Any]]:
    objs = generate_objects(nodes=2)
    for wl, period in zip(_workloads(objs), ("72h", "30m", "2m", "2m"), strict=False):
        asr = wl["spec"].setdefault("autoScalingConfig", {}).setdefault("autoSetResources", {})
        asr["historyDataPeriod"] = period  # half-lives 36 h, 15 min, 1 min, 1 min; the fifth: 1 h
    return objs


def _workloads(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == "TensorFusionWorkload"][:5]


KEYS = [f"{w['metadata']['namespace']}/{w['metadata']['name']}" for w in _workloads(_objects())]
STALE_KEY = KEYS[3]


def _pods() -> dict[str, str]:
    """Short names → the workers' pod names (live pods keep their samplers between loads)."""
    state = ClusterState.build(validate_items(_objects()))
    names = [sorted(state.workers[w].name for w in state.workloads[k].workers) for k in KEYS]
    return {f"{x}-{i}": names[k][i] for k, x in enumerate("abdec") for i in range(2)}


POD = _pods()


def _rows(state: ClusterState) -> list[dict[str, Any]]:
    """Five-minutely rows from 3 days and 2 hours before END to END (the load reads the last 3 days)."""
    (a_ns, a), (b_ns, b), (d_ns, d), (e_ns, e), (c_ns, c) = (k.split("/") for k in KEYS)
    gpu = next(iter(state.gpus))
    begin = END - timedelta(days=3, hours=2)
    # pod name, UID, namespace, workload, from, to (hours after begin), compute written?
    pods = [
        (POD["a-0"], "u-a0", a_ns, a, 0, 74, False),
        (POD["a-1"], "u-a1x", a_ns, a, 0, 27, False),  # restarted: the same name, a new UID ...
        (POD["a-1"], "u-a1y", a_ns, a, 38, 74, False),  # ... after 11 hours away
        (POD["b-0"], "u-b0", b_ns, b, 0, 74, True),
        (POD["b-1"], "u-b1", b_ns, b, 62, 74, True),  # starts late
        (POD["c-0"], "u-c0", c_ns, c, 0, 14, False),  # away for more than a day, then back
        (POD["c-0"], "u-c0", c_ns, c, 52, 74, False),
        (None, "u-c2", c_ns, c, 10, 74, False),  # no pod_name: the UID stands in
        (POD["d-0"], "u-d0", d_ns, d, 0, 24, False),  # a 1 min half-life: references move many times
        (POD["d-1"], "u-d1", d_ns, d, 0, 74, False),
        (POD["e-0"], "u-e0", e_ns, e, 0, 24, False),  # a 1 min half-life, silent for 2 days at the end
    ]
    out = []
    for i, (pod, uid, ns, wl, lo, hi, written) in enumerate(pods):
        t = begin + timedelta(hours=lo)
        m = 0
        while t < begin + timedelta(hours=hi):
            mem = None if (m + i) % 17 == 0 else (1 + (m * 7 + i) % 13 + (m // 200) % 3) * GI
            pct = 5.0 + (m * 11 + 3 * i) % 80
            out.append({"workload": wl, "worker": uid, "pod_name": pod, "namespace": ns, "pool": "p",
                        "node": "n", "uuid": gpu, "compute_tflops": pct * 2.5 if written else 0.0,
                        "compute_percentage": pct, "memory_bytes": mem, "memory_percentage": 1.0,
                        "ts": t})  # fmt: skip
            t += STEP
            m += 1
    return full_rows("tf_worker_usage", out)


class Data:
    def __init__(self, state: ClusterState, metrics: GreptimeMetrics, rows: int) -> None:
        self.state, self.metrics, self.rows = state, metrics, rows


@pytest.fixture(scope="module")
def data(store: MetricsStore) -> Iterator[Data]:
    state = ClusterState.build(validate_items(_objects()))
    rows = _rows(state)
    store.create("aslong", COL, ("tf_worker_usage",))
    store.load("aslong", {"tf_worker_usage": rows}, COL)
    with GreptimeMetrics(store.dsn("aslong"), connect_timeout=3) as metrics:
        yield Data(state, metrics, len(rows))


def _fresh(d: Data) -> AutoscaleState:
    ast = AutoscaleState()
    ast.configure(d.state)
    return ast


def _window(d: Data) -> tuple[datetime, datetime]:
    return END - autoscale_window(d.state), END


def _by_rows(d: Data) -> AutoscaleState:
    ast = _fresh(d)
    ast.add_samples(list(d.metrics.rows("tf_worker_usage", *_window(d))))
    return ast


def _same_hist(
    a: DecayingHistogram, b: DecayingHistogram, where: str, sample_every: timedelta = STEP
) -> None:
    """Equal up to float rounding, `a` the row-by-row load's.

    Row by row, a superseded VRAM peak is added and removed, and a weight of 1 added beside one of
    2^72 (a window's end three days past the reference) is absorbed: removing the large one then
    empties the bucket (VPA's clamp), so a peak of the earliest windows can be lost there, which moves
    the lowest non-empty bucket. The aggregated load adds each window's peak once. The reference
    moves where dense samples would move it: samples further apart than half a half-life move it a
    little later row by row, which scales every weight by the same power of two."""
    hl = a.half_life
    if hl >= 2 * sample_every.total_seconds():
        assert a.ref == b.ref, where
    scale = 2.0 ** ((b.ref - a.ref) / hl)
    assert b.total * scale == pytest.approx(a.total, rel=1e-9), where
    assert [w * scale for w in b.weights] == pytest.approx(a.weights, rel=1e-9, abs=1e-9 * a.total), where
    if a.ref == b.ref:  # the non-empty bounds compare absolute weights with an epsilon
        assert a.max_bucket == b.max_bucket, where
        lo, hi = sorted((a.min_bucket, b.min_bucket))
        assert sum(a.weights[lo:hi]) + sum(b.weights[lo:hi]) <= 1e-9 * a.total, where
    for p in PERCENTILES[1:] if a.ref == b.ref else PERCENTILES[1:-1]:  # the ends follow the bounds
        assert math.isclose(a.percentile(p), b.percentile(p), rel_tol=1e-9), f"{where} p{p}"


def _no_raw_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Any, table: str, start: datetime, end: datetime) -> Any:
        raise AssertionError(f"raw rows of {table} read")

    monkeypatch.setattr(GreptimeMetrics, "rows", refuse)


def test_a_long_first_load_reads_aggregates_and_equals_the_row_by_row_load(
    data: Data, monkeypatch: pytest.MonkeyPatch
) -> None:
    start, end = _window(data)
    assert end - start == timedelta(days=3)
    by_rows = _by_rows(data)
    stale = STALE_KEY
    q = _fresh(data).history_query(start, end, long=True)
    assert q is not None and _fresh(data).history_query(start, end) is None  # too long for one window
    answered = len(data.metrics.usage_histograms(q)) + len(data.metrics.vram_windows(q))
    agg = _fresh(data)
    _no_raw_rows(monkeypatch)
    covered = load_usage(data.metrics, agg, start, end)
    monkeypatch.undo()
    rows = sum(1 for _ in data.metrics.rows("tf_worker_usage", start, end))
    assert (
        covered == rows and answered < rows / 8
    )  # a row per pod and TFLOPS bucket or day, not one per sample
    assert sorted(agg.workloads) == sorted(by_rows.workloads)
    for key, hr in by_rows.workloads.items():
        ha = agg.workloads[key]
        assert (ha.period, ha.vram_samples, ha.vram_first) == (hr.period, hr.vram_samples, hr.vram_first), key
        _same_hist(hr.vram, ha.vram, f"{key} vram")
        assert sorted(ha.samplers) == sorted(hr.samplers), key
        for pod, sr in hr.samplers.items():
            sa = ha.samplers[pod]
            assert (sa.last_tf, sa.last_vram, sa.peak) == (sr.last_tf, sr.last_vram, sr.peak), f"{key} {pod}"
            assert sa.window_end == pytest.approx(sr.window_end, abs=1e-3), f"{key} {pod}"
        if key == stale:
            continue
        assert (ha.samples, ha.tf_first) == (hr.samples, hr.tf_first), key
        _same_hist(hr.tf, ha.tf, f"{key} tflops")
    assert sum(len(h.samplers) for h in agg.workloads.values()) >= 7
    a1 = next(h for h in agg.workloads.values() if POD["a-1"] in h.samplers)
    assert a1.samplers[POD["a-1"]].window_end > a1.vram_first + 2 * 86400  # the third window is open
    # the 1 min half-life workload's last sample is 2 days (2,880 half-lives) before the end: the
    # row-by-row load keeps that stale shape, the aggregated load none (docs/behaviour.md A12)
    assert not by_rows.workloads[stale].tf.is_empty()
    assert agg.workloads[stale].tf.is_empty() and agg.workloads[stale].samples == 0
    by_rows.workloads[stale].tf, by_rows.workloads[stale].samples = agg.workloads[stale].tf, 0
    by_rows.workloads[stale].tf_first = math.inf
    assert recommend(data.state, by_rows, end).to_json() == recommend(data.state, agg, end).to_json()


def test_the_store_and_the_row_stream_find_the_same_daily_peaks(data: Data) -> None:
    start, end = _window(data)
    q = _fresh(data).history_query(start, end, long=True)
    assert q is not None
    stored = sorted(data.metrics.vram_windows(q), key=lambda w: (w.namespace, w.pod, w.index))
    streamed = sorted(
        histograms.vram_windows(q, data.metrics.rows("tf_worker_usage", start, end)),
        key=lambda w: (w.namespace, w.pod, w.index),
    )
    assert stored == streamed
    gaps = {w.pod: sorted(x.index for x in stored if x.pod == w.pod) for w in stored}
    assert (
        gaps[POD["c-0"]] == [0, 2]
        and gaps[POD["a-1"]] == [0, 1, 2]
        and gaps[POD["b-1"]] == [0]
        and gaps["u-c2"] == [0, 1, 2]
    )


def test_incremental_rows_after_a_long_load_keep_agreeing(data: Data) -> None:
    """After the aggregated first load, new rows go through the samplers it left (windows, times)."""
    start, end = _window(data)
    mid = end - timedelta(hours=7)
    by_rows = _fresh(data)
    by_rows.add_samples(list(data.metrics.rows("tf_worker_usage", start, mid)))
    agg = _fresh(data)
    load_usage(data.metrics, agg, start, mid)
    for t in (mid, mid + timedelta(hours=3)):
        by_rows.configure(data.state)
        agg.configure(data.state)
        new = list(data.metrics.rows("tf_worker_usage", t, t + timedelta(hours=3)))
        assert new
        by_rows.add_samples(new)
        load_usage(data.metrics, agg, t, t + timedelta(hours=3))
    for key, hr in by_rows.workloads.items():
        ha = agg.workloads[key]
        _same_hist(hr.vram, ha.vram, f"{key} vram")
        assert ha.vram_samples == hr.vram_samples, key
        if hr.period > timedelta(minutes=2):
            _same_hist(hr.tf, ha.tf, f"{key} tflops")


def test_a_stale_workload_weighs_nothing_and_breaks_nothing(data: Data) -> None:
    """Samples thousands of half-lives before the reference: the store's weight is clamped (PostgreSQL
    raises on a float underflow), and the engine drops the workload's TFLOPS shape, not the load."""
    start, end = _window(data)
    q = _fresh(data).history_query(start, end, long=True)
    assert q is not None
    groups = data.metrics.usage_histograms(q)  # would raise "value out of range: underflow"
    stale = [g for g in groups if g.pod == POD["e-0"] and g.bucket >= 0]
    assert stale and all(0 < g.weight < 2.0**-900 for g in stale)
    agg = _fresh(data)
    load_usage(data.metrics, agg, start, end)  # no OverflowError scaling them back
    e = agg.workloads[STALE_KEY]
    assert (end - start).total_seconds() - 24 * 3600 > STALE * e.tf.half_life  # stale by 2 days
    assert e.tf.is_empty() and e.samples == 0 and e.vram_samples > 0 and not e.vram.is_empty()


def test_the_demo_answers_a_long_first_load_as_a_store_does() -> None:
    """The simulator's metrics (the demo's console and daemon) take the same aggregated path."""
    from tftui.sources.sim.usage import SimMetrics

    objs = _objects()
    state = ClusterState.build(validate_items(objs))
    sim = SimMetrics(objs, history=timedelta(days=3, hours=1))
    start, end = sim.now - autoscale_window(state), sim.now
    by_rows = AutoscaleState()
    by_rows.configure(state)
    by_rows.add_samples(list(sim.rows("tf_worker_usage", start, end)))
    agg = AutoscaleState()
    agg.configure(state)
    calls: list[str] = []
    windows = sim.vram_windows
    sim.vram_windows = lambda q: calls.append("vram_windows") or windows(q)  # type: ignore[method-assign,func-returns-value]
    assert load_usage(sim, agg, start, end) > 100_000 and calls == ["vram_windows"]
    for key, hr in by_rows.workloads.items():  # the simulator samples every minute
        _same_hist(hr.vram, agg.workloads[key].vram, f"{key} vram", timedelta(minutes=1))
        _same_hist(hr.tf, agg.workloads[key].tf, f"{key} tflops", timedelta(minutes=1))
    assert recommend(state, by_rows, end).to_json() == recommend(state, agg, end).to_json()


# -- gaps: raw rows in chunks, a gap longer than the window rebuilt from the aggregates ----------------


class _Failing:
    """`data.metrics` whose `rows` fails at its `fail_at`-th call (a store going down mid-gap)."""

    def __init__(self, metrics: GreptimeMetrics, fail_at: int) -> None:
        self.metrics, self.fail_at = metrics, fail_at
        self.spans: list[timedelta] = []

    def rows(self, table: str, start: datetime, end: datetime) -> Any:
        self.spans.append(end - start)
        if len(self.spans) == self.fail_at:
            raise SourceError("metrics store down")
        return self.metrics.rows(table, start, end)  # type: ignore[arg-type]


def test_a_long_gap_is_read_in_chunks_and_a_failure_keeps_what_is_in(data: Data) -> None:
    start, end = _window(data)
    mid = end - timedelta(hours=7)
    whole = _fresh(data)
    load_usage(data.metrics, whole, start, mid)
    whole.add_samples(list(data.metrics.rows("tf_worker_usage", mid, end)))  # the gap at once, as before
    chunked = _fresh(data)
    load_usage(data.metrics, chunked, start, mid)
    failing = _Failing(data.metrics, fail_at=60)
    marks: list[datetime] = []
    with pytest.raises(SourceError):
        load_usage(failing, chunked, mid, end, marks.append)
    assert max(failing.spans) <= RAW_CHUNK and len(marks) == 59 and marks[-1] == mid + 59 * RAW_CHUNK
    load_usage(data.metrics, chunked, marks[-1], end, marks.append)  # the next run goes on from there
    assert marks[-1] == end
    for key, hw in whole.workloads.items():
        hc = chunked.workloads[key]
        assert (hc.samples, hc.vram_samples) == (hw.samples, hw.vram_samples), key  # nothing twice
        _same_hist(hw.vram, hc.vram, f"{key} vram")
        if hw.period > timedelta(minutes=2):
            _same_hist(hw.tf, hc.tf, f"{key} tflops")


@pytest.mark.parametrize("gap", [timedelta(hours=1, minutes=2), timedelta(hours=73)])
def test_the_daemon_rebuilds_from_the_aggregates_after_a_gap_of_over_an_hour(
    data: Data, monkeypatch: pytest.MonkeyPatch, gap: timedelta
) -> None:
    """A gap longer than an hour (`CATCH_UP`), or than the 72 h window, is not read row by row: the
    histograms are rebuilt from the store's aggregates, as a restarted daemon's are."""
    from tftui.runtime.loops import Runtime
    from tftui.sources.sim.acting import ActingSimCluster

    rt = Runtime(ActingSimCluster(nodes=2), clock=lambda: END, metrics=data.metrics)
    window = autoscale_window(data.state)
    t0 = END - timedelta(hours=30)
    calls: list[str] = []
    agg = data.metrics.usage_histograms_into

    def counted(q: Any, consume: Any) -> Any:
        calls.append("agg")
        return agg(q, consume)

    monkeypatch.setattr(data.metrics, "usage_histograms_into", counted)
    rt._load_usage(data.state, t0)  # the first load
    first = rt.autoscale_state
    rt._load_usage(data.state, t0 + timedelta(minutes=50))  # a tick 50 minutes on: the new rows
    assert rt.autoscale_state is first and calls == ["agg"]
    _no_raw_rows(monkeypatch)
    later = t0 + timedelta(minutes=50) + gap
    rt._load_usage(data.state, later)
    assert calls == ["agg", "agg"] and rt.autoscale_state is not first
    assert rt.autoscale_loaded_until == later - GreptimeMetrics.INGEST_LAG
    restarted = _fresh(data)
    load_usage(data.metrics, restarted, rt.autoscale_loaded_until - window, rt.autoscale_loaded_until)
    for key, h in restarted.workloads.items():  # what a restarted daemon would hold
        _same_hist(h.vram, rt.autoscale_state.workloads[key].vram, key)


def test_upstreams_layout_without_pod_name_keys_the_days_by_uid(store: MetricsStore) -> None:
    """Upstream's DDL (time index `ts`) has no `pod_name`: the `worker` tag (the pod UID) keys the
    samplers and the daily peaks, on both paths alike."""
    state = ClusterState.build(validate_items(_objects()))
    rows = [{k: v for k, v in r.items() if k != "pod_name"} for r in _rows(state)]
    store.create("aslongts", "ts", ("tf_worker_usage",), overrides={"tf_worker_usage": {"pod_name": None}})
    store.load("aslongts", {"tf_worker_usage": rows}, "ts")
    with GreptimeMetrics(store.dsn("aslongts"), connect_timeout=3) as metrics:
        d = Data(state, metrics, len(rows))
        start, end = _window(d)
        by_rows = _by_rows(d)
        agg = _fresh(d)
        assert load_usage(metrics, agg, start, end) == sum(
            1 for _ in metrics.rows("tf_worker_usage", start, end)
        )
    for key, hr in by_rows.workloads.items():
        ha = agg.workloads[key]
        assert sorted(ha.samplers) == sorted(hr.samplers) and all(p.startswith("u-") for p in ha.samplers), (
            key
        )
        assert ha.vram_samples == hr.vram_samples, key
        _same_hist(hr.vram, ha.vram, f"{key} vram")
    assert {"u-a1x", "u-a1y"} <= set(agg.workloads[KEYS[0]].samplers)  # a restart is a new pod here


def test_a_row_that_reaches_the_store_late_is_still_loaded(store: MetricsStore) -> None:
    """The hypervisor's rows reach GreptimeDB through a file and Vector's batches, seconds after
    their timestamp. A load that marked everything up to its `now` as read lost every row written
    after it with an earlier timestamp; loads stop `INGEST_LAG` before now, so the next one reads it."""
    from tftui.runtime.loops import Runtime
    from tftui.sources.sim.acting import ActingSimCluster

    state = ClusterState.build(validate_items(_objects()))
    rows = _rows(state)
    store.create("aslate", COL, ("tf_worker_usage",))
    last = max(r["ts"] for r in rows)
    # samples taken 20 s before the load at END, shipped to the store just after it
    late = [{**r, "ts": END - timedelta(seconds=20)} for r in rows if r["ts"] == last]
    assert late
    store.load("aslate", {"tf_worker_usage": rows}, COL)
    with GreptimeMetrics(store.dsn("aslate"), connect_timeout=3) as metrics:
        rt = Runtime(ActingSimCluster(nodes=2), clock=lambda: END, metrics=metrics)
        rt._load_usage(state, END)
        store.load("aslate", {"tf_worker_usage": late}, COL)  # the batch Vector ships a moment later
        rt._load_usage(state, END + timedelta(minutes=2))
        first = END - GreptimeMetrics.INGEST_LAG - autoscale_window(state)  # the first load's start
        upto = END + timedelta(minutes=2) - GreptimeMetrics.INGEST_LAG
        reference = _fresh(Data(state, metrics, len(rows)))  # every row, the late ones included
        reference.add_samples(list(metrics.rows("tf_worker_usage", first, upto)))
    got, want = rt.autoscale_state.workloads, reference.workloads
    assert sum(h.vram_samples for h in got.values()) == sum(h.vram_samples for h in want.values())
    fresh = [k for k in want if k != STALE_KEY]  # (the stale one's TFLOPS are not loaded, A12)
    assert [got[k].samples for k in fresh] == [want[k].samples for k in fresh]
