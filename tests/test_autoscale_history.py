"""History loads aggregated in the store (A12) equal the row-by-row load, on both metrics stores.

`GreptimeMetrics.usage_histograms` returns per (pod, TFLOPS bucket) decay-weight sums;
`AutoscaleState.add_pod_buckets` must then hold the same histograms, samplers and recommendations
as `add_samples` over the raw rows — also after an incremental (raw-row) load and after a restart.
Rows cover the simulator's percent-only samples (TFLOPS from GPU capacity) plus hand-made edge
cases: `compute_tflops` written, negative TFLOPS, NULL memory, no pod_name, an unknown GPU and a
workload absent from the cluster, and a workload with a 6 h `historyDataPeriod` (other half-life).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.pg import GI, full_rows
from tests.stores import MetricsStore
from tftui.engine.autoscale import AutoscaleState, WorkloadHistory, recommend
from tftui.engine.histogram import DecayingHistogram
from tftui.engine.state import ClusterState
from tftui.model.dump import validate_items
from tftui.runtime.history import load_usage
from tftui.sources.greptime import GreptimeMetrics
from tftui.sources.sim.cluster import generate_objects
from tftui.sources.sim.usage import SimMetrics

PERCENTILES = (0.0, 0.05, 0.3, 0.5, 0.9, 0.95, 0.98, 0.99, 1.0)


def _objects() -> list[dict[str, Any]]:
    objs = generate_objects(nodes=8)
    wls = [o for o in objs if o["kind"] == "TensorFusionWorkload"]
    asr = wls[0]["spec"].setdefault("autoScalingConfig", {}).setdefault("autoSetResources", {})
    asr["historyDataPeriod"] = "6h"  # half-life 3 h instead of the default 1 h
    return objs


def _extra(now: datetime) -> list[dict[str, Any]]:
    """Edge rows for a workload the cluster does not know (default period)."""
    out = []
    for m in range(150):
        ts = now - timedelta(minutes=150 - m)
        for i, (tflops, pct, mem, pod) in enumerate(
            [(12.5 + m % 7, 0.0, (3 + m % 5) * GI, "ghost-0"), (-1.0 if m % 3 else 0.0, 40.0, None, None),
             (0.0, 20.0 + m % 9, GI, "ghost-2")]
        ):  # fmt: skip
            out.append({"workload": "ghost", "worker": f"uid-ghost-{i}", "pod_name": pod, "namespace": "ns-x",
                        "pool": "p", "node": "n-x", "uuid": "gpu-unknown" if i == 2 else "gpu-missing",
                        "compute_tflops": tflops, "compute_percentage": pct, "memory_bytes": mem,
                        "memory_percentage": 1.0, "ts": ts})  # fmt: skip
    return full_rows("tf_worker_usage", out)


class Data:
    def __init__(self, state: ClusterState, metrics: GreptimeMetrics, now: datetime) -> None:
        self.state, self.metrics, self.now = state, metrics, now


COL = "greptime_timestamp"  # the dialect server's line-protocol layout: pod_name, Int64 memory_bytes


@pytest.fixture(scope="module")
def data(store: MetricsStore) -> Iterator[Data]:
    objs = _objects()
    state = ClusterState.build(validate_items(objs))
    sim = SimMetrics(objs, history=timedelta(hours=3))
    now = sim.now
    store.create("ashist", COL, ("tf_worker_usage",))
    store.load(
        "ashist", {"tf_worker_usage": list(sim.rows("tf_worker_usage", now - timedelta(hours=4), now))}, COL
    )
    store.load("ashist", {"tf_worker_usage": _extra(now)}, COL)
    with GreptimeMetrics(store.dsn("ashist"), connect_timeout=3) as metrics:
        yield Data(state, metrics, now - timedelta(minutes=20))


def _fresh(d: Data) -> AutoscaleState:
    ast = AutoscaleState()
    ast.configure(d.state)
    return ast


def _by_rows(d: Data, start: datetime, end: datetime, ast: AutoscaleState | None = None) -> AutoscaleState:
    ast = ast or _fresh(d)
    ast.add_samples(list(d.metrics.rows("tf_worker_usage", start, end)))
    return ast


def _same_hist(a: DecayingHistogram, b: DecayingHistogram, where: str) -> None:
    assert a.ref == b.ref, where
    assert (a.min_bucket, a.max_bucket) == (b.min_bucket, b.max_bucket), where
    assert b.total == pytest.approx(a.total, rel=1e-9, abs=1e-12), where
    assert b.weights == pytest.approx(a.weights, rel=1e-9, abs=1e-12), where
    for p in PERCENTILES:
        assert math.isclose(a.percentile(p), b.percentile(p), rel_tol=1e-9), f"{where} p{p}"


def _same(a: AutoscaleState, b: AutoscaleState) -> None:
    assert sorted(a.workloads) == sorted(b.workloads)
    for key, ha in a.workloads.items():
        hb: WorkloadHistory = b.workloads[key]
        assert (ha.period, ha.samples, ha.first) == (hb.period, hb.samples, hb.first), key
        _same_hist(ha.tf, hb.tf, f"{key} tflops")
        _same_hist(ha.vram, hb.vram, f"{key} vram")
        assert sorted(ha.samplers) == sorted(hb.samplers), key
        for pod, sa in ha.samplers.items():
            sb = hb.samplers[pod]
            assert (sa.last_tf, sa.last_vram, sa.window_end, sa.peak) == (
                sb.last_tf, sb.last_vram, sb.window_end, sb.peak), f"{key} {pod}"  # fmt: skip


def test_store_aggregated_history_equals_row_by_row(data: Data) -> None:
    start, end = data.now - timedelta(hours=2), data.now
    by_rows = _by_rows(data, start, end)
    agg = _fresh(data)
    q = agg.history_query(start, end)
    assert q is not None
    ns, _, name = next(iter(data.state.workloads)).partition("/")
    assert q.half_lives == ((ns, name, 3 * 3600.0),)
    groups = data.metrics.usage_histograms(q)
    rows = sum(1 for _ in data.metrics.rows("tf_worker_usage", start, end))
    assert agg.add_pod_buckets(q, groups) == rows
    assert len(groups) < rows / 5  # a few rows per pod, not one per sample
    _same(by_rows, agg)
    assert "ns-x/ghost" in agg.workloads and {"ghost-0", "uid-ghost-1", "ghost-2"} == set(
        agg.workloads["ns-x/ghost"].samplers
    )
    assert any(h.period == timedelta(hours=6) for h in agg.workloads.values())
    assert sum(h.tf.percentile(0.9) > 1 for h in agg.workloads.values()) > len(agg.workloads) / 2
    assert all(h.vram.percentile(0.5) > 0 for h in agg.workloads.values())
    assert recommend(data.state, by_rows, end).to_json() == recommend(data.state, agg, end).to_json()


def test_incremental_rows_after_an_aggregated_load(data: Data) -> None:
    """Only the new rows are read after the first load; both paths keep agreeing tick after tick."""
    start, end = data.now - timedelta(hours=2), data.now
    by_rows, agg = _by_rows(data, start, end), _fresh(data)
    assert load_usage(data.metrics, agg, start, end) > 0
    assert agg.history_query(end, end + timedelta(minutes=1)) is None  # samplers exist: raw rows
    t = end
    for step in (timedelta(seconds=30), timedelta(minutes=3), timedelta(minutes=10)):
        by_rows.configure(data.state)
        agg.configure(data.state)
        _by_rows(data, t, t + step, by_rows)
        load_usage(data.metrics, agg, t, t + step)
        t += step
        _same(by_rows, agg)
    assert recommend(data.state, by_rows, t).to_json() == recommend(data.state, agg, t).to_json()


def test_rebuild_after_restart_from_the_store_alone(data: Data) -> None:
    """A fresh process rebuilds from the store what a long-running one accumulated tick by tick."""
    end = data.now
    long_running = _fresh(data)
    t = end - timedelta(hours=2)
    load_usage(data.metrics, long_running, t, end - timedelta(minutes=30))
    load_usage(data.metrics, long_running, end - timedelta(minutes=30), end)
    restarted = _fresh(data)
    assert load_usage(data.metrics, restarted, t, end) > 0
    _same(long_running, restarted)


def test_history_query_falls_back_to_rows_when_it_cannot_be_exact(data: Data) -> None:
    ast = _fresh(data)
    assert ast.history_query(data.now - timedelta(hours=25), data.now) is None  # > one VRAM window
    assert ast.history_query(data.now, data.now) is None
    q = ast.history_query(data.now - timedelta(hours=2), data.now)
    assert q is not None and q.ref_unix == math.floor(data.now.timestamp())
    assert dict(q.gpu_tflops) == {n: g.capacity.tflops for n, g in data.state.gpus.items()}


def test_runtime_first_tick_aggregates_in_the_store_then_reads_new_rows(store: MetricsStore) -> None:
    """The runtime's loop over GreptimeMetrics: same histograms as the row-by-row simulator path."""
    from tftui.runtime.loops import Runtime
    from tftui.sources.sim.acting import ActingSimCluster

    sim = ActingSimCluster(nodes=6)
    rows_src = SimMetrics(sim.snapshot(), sim.seed, now=sim.now() + timedelta(hours=1))
    now = sim.now()
    store.create("asrt", COL, ("tf_worker_usage",))
    rows = list(rows_src.rows("tf_worker_usage", now - timedelta(hours=3), now + timedelta(hours=1)))
    store.load("asrt", {"tf_worker_usage": rows}, COL)
    calls: list[Any] = []
    with GreptimeMetrics(store.dsn("asrt"), connect_timeout=3) as metrics:
        agg = metrics.usage_histograms_into
        metrics.usage_histograms_into = lambda q, consume: calls.append(q) or agg(q, consume)  # type: ignore[method-assign,func-returns-value]
        rt = Runtime(sim, clock=sim.clock, metrics=metrics)
        assert rt.tick_due() is not None
        upto = now - GreptimeMetrics.INGEST_LAG  # what a late writer may still add is read next time
        assert len(calls) == 1 and calls[0].start == upto - timedelta(hours=2) and calls[0].end == upto
        state = ClusterState.build(sim.snapshot())
        reference = AutoscaleState()
        reference.configure(state)
        reference.add_samples(list(metrics.rows("tf_worker_usage", upto - timedelta(hours=2), upto)))
        reference.configure(state)
        _same(reference, rt.autoscale_state)
        sim.advance(timedelta(minutes=2))
        rt.tick_due()
        assert len(calls) == 1  # the second load reads only the new rows
        assert rt.autoscale_loaded_until == sim.now() - GreptimeMetrics.INGEST_LAG


# -- the groups streamed into the histograms ----------------------------------------------------------


def _loaded(d: Data) -> tuple[datetime, datetime, AutoscaleState]:
    start, end = d.now - timedelta(hours=2), d.now
    ast = _fresh(d)
    return start, end, ast


def test_the_groups_reach_the_histograms_as_they_come_and_equal_the_whole_result(data: Data) -> None:
    """The history's groups are handed over as an iterator off the wire (a 5,000-node window is
    180,000 groups: never held whole beside libpq's copy), the same groups as the whole result,
    and the load equals one from that list."""
    start, end, streamed = _loaded(data)
    q = streamed.history_query(start, end)
    assert q is not None
    seen: list[Any] = []

    def consume(groups: Any) -> int:
        assert not isinstance(groups, (list, tuple))  # an iterator, taken as it comes
        seen.extend(groups)
        return len(seen)

    assert data.metrics.usage_histograms_into(q, consume) == len(seen) > 0
    assert sorted(seen, key=repr) == sorted(
        data.metrics.usage_histograms(q), key=repr
    )  # DataFusion: any order
    load_usage(data.metrics, streamed, start, end)
    whole = _fresh(data)
    whole.add_pod_buckets(q, data.metrics.usage_histograms(q))
    _same(whole, streamed)


def test_a_result_that_fails_midway_applies_nothing_and_the_store_stays_usable(
    data: Data, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value the client cannot read in the 40th group, or the process stopping while the groups
    come: one SourceError out of the load, and the histograms hold nothing of it (the engine
    applies the groups once the last is in); the pool's connection still answers after it."""
    from tftui.sources.greptime import usage
    from tftui.sources.ports import SourceError

    start, end, ast = _loaded(data)
    real = usage._pod_bucket
    taken = [0]

    def bad_at_40(row: tuple[Any, ...]) -> Any:
        taken[0] += 1
        if taken[0] == 40:
            raise ValueError("could not convert string to float: 'x'")
        return real(row)

    monkeypatch.setattr(usage, "_pod_bucket", bad_at_40)
    with pytest.raises(SourceError, match="malformed values while aggregating the usage history"):
        load_usage(data.metrics, ast, start, end)
    assert taken[0] == 40 and not any(h.samples or h.samplers for h in ast.workloads.values())
    monkeypatch.undo()
    q = ast.history_query(start, end)
    assert q is not None
    first = data.metrics.usage_histograms_into(q, lambda groups: next(groups))  # stops after one
    assert first in data.metrics.usage_histograms(q)  # the cut-short result left nothing behind


# -- plan, recommend and the console read aggregates, not raw rows ------------------------------------


def _raw_rows_load(metrics: Any, astate: AutoscaleState, start: datetime, end: datetime) -> int:
    """How plan/recommend loaded usage before: every raw row of the window, materialised."""
    return astate.add_samples(list(metrics.rows("tf_worker_usage", start, end)))


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    from tftui.cli import main

    assert main(list(args)) == 0
    return capsys.readouterr().out


def test_simulator_aggregates_like_the_store(data: Data) -> None:
    """SimMetrics.usage_histograms (rows streamed once) gives what add_samples over its rows gives."""
    objs = _objects()
    state = ClusterState.build(validate_items(objs))
    sim = SimMetrics(objs, history=timedelta(hours=3))
    start, end = sim.now - timedelta(hours=2), sim.now
    by_rows = AutoscaleState()
    by_rows.configure(state)
    by_rows.add_samples(list(sim.rows("tf_worker_usage", start, end)))
    agg = AutoscaleState()
    agg.configure(state)
    assert load_usage(sim, agg, start, end) == sum(1 for _ in sim.rows("tf_worker_usage", start, end))
    _same(by_rows, agg)
    assert recommend(state, by_rows, end).to_json() == recommend(state, agg, end).to_json()


@pytest.mark.parametrize("command", ["plan", "recommend"])
def test_plan_and_recommend_on_the_demo_read_aggregates_with_todays_results(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = (command, "--demo", "--nodes", "12", "--json", "--now", "2026-11-30T12:00:00Z")
    aggregated: list[Any] = []
    real = SimMetrics.usage_histogram_arrays  # the aggregate as columns (`usage_histograms`' groups)

    def counted(self: SimMetrics, q: Any) -> Any:
        aggregated.append(q)
        return real(self, q)

    monkeypatch.setattr(SimMetrics, "usage_histogram_arrays", counted)
    monkeypatch.setattr(SimMetrics, "rows", _no_raw_rows(SimMetrics.rows))
    new = _run(capsys, *args)
    assert len(aggregated) == 1  # one aggregated read, no raw tf_worker_usage rows
    monkeypatch.undo()
    monkeypatch.setattr("tftui.runtime.history.load_usage", _raw_rows_load)
    assert new == _run(capsys, *args)  # the same bytes as the row-by-row load


def _no_raw_rows(rows: Any) -> Any:
    def guarded(self: Any, table: str, start: datetime, end: datetime) -> Any:
        stack = __import__("traceback").extract_stack()
        assert table != "tf_worker_usage" or any(f.name == "usage_histograms" for f in stack), "raw rows read"
        return rows(self, table, start, end)

    return guarded


def test_recommend_and_plan_on_a_store_read_aggregates_with_todays_results(
    data: Data, tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": _objects()}))
    now = data.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    dsn = data.metrics._dsn
    for command in ("recommend", "plan"):
        args = (command, "--from", str(dump), "--metrics-dsn", dsn, "--json", "--now", now)
        real_rows = GreptimeMetrics.rows
        streamed: list[str] = []

        def counted(
            self: Any, t: str, s: datetime, e: datetime, seen: list[str] = streamed, rows: Any = real_rows
        ) -> Any:
            seen.append(t)
            return rows(self, t, s, e)

        monkeypatch.setattr(GreptimeMetrics, "rows", counted)
        new = _run(capsys, *args)
        assert streamed == []  # usage_histograms only
        monkeypatch.undo()
        monkeypatch.setattr("tftui.runtime.history.load_usage", _raw_rows_load)
        assert new == _run(capsys, *args), command
        monkeypatch.undo()
        assert '"recommendation"' in new or "recommendations" in new
