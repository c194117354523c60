"""The simulator's history loaded into both metrics stores: GreptimeMetrics gives the same Step1,
alert rows, alert history, latest usage and rows as the simulator (sim/step1.py, sim/usage.py),
and NoData for the columns the simulator never writes.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from tests.greptime_support import VARIANTS, _keyed, _metrics, _same, make_db
from tests.pg import NOW, SIM_TABLES
from tests.stores import MetricsStore
from tftui.engine.alerts import RULES, AlertHistory, evaluate_history
from tftui.model.metrics import ALERT_RULES, NoData
from tftui.model.quantity import quantity_float
from tftui.sources.sim.cluster import generate_objects
from tftui.sources.sim.step1 import SimStep1
from tftui.sources.sim.usage import SimMetrics


@dataclasses.dataclass
class Sim:
    metrics: SimMetrics
    capacity: dict[str, tuple[float, float]]
    dsn: dict[str, str]
    store: MetricsStore


@pytest.fixture(scope="module")
def sim(store: MetricsStore) -> Sim:
    """12 nodes, 3 h of the simulator's rows, loaded into both variants (no tf_system_metrics)."""
    objects = generate_objects(nodes=12)
    capacity = {
        o["metadata"]["name"]: (
            quantity_float(o["status"]["capacity"]["tflops"]),
            quantity_float(o["status"]["capacity"]["vram"]),
        )
        for o in objects
        if o["kind"] == "GPU"
    }
    metrics = SimMetrics(objects, history=timedelta(hours=3))
    dsn = {}
    start, end = metrics.now - timedelta(hours=4), metrics.now + timedelta(minutes=1)
    rows = {t: list(metrics.rows(t, start, end)) for t in SIM_TABLES}
    assert all(rows.values())
    for col in VARIANTS:
        dsn[col] = make_db(store, f"sim_{col}", col, rows, tables=(*SIM_TABLES, "tf_gpu_metrics"))
    return Sim(metrics, capacity, dsn, store)


# -- same data, same report ------------------------------------------------------------------------------


@pytest.mark.parametrize("col", VARIANTS)
def test_same_step1_as_simulator(sim: Sim, col: str) -> None:
    port = SimStep1(sim.metrics)
    with _metrics(sim.dsn[col]) as metrics:
        for window, now in (
            (timedelta(hours=2), sim.metrics.now),
            (timedelta(minutes=37), sim.metrics.now - timedelta(minutes=50)),
        ):
            sql_result = metrics.step1(window, now, sim.capacity)
            sim_result = port.step1(window, now, sim.capacity)
            assert len(sql_result.workload_usage) > 20 and len(sql_result.gpus) > 50
            _same(_keyed(sql_result), _keyed(sim_result))
        assert metrics.describe().endswith(f"(time column {col})")


def test_same_alert_rows_as_simulator(sim: Sim) -> None:
    port = SimStep1(sim.metrics)
    with _metrics(sim.dsn["greptime_timestamp"]) as metrics:
        for now in (sim.metrics.now, sim.metrics.now - timedelta(minutes=7, seconds=30)):
            for rule in ALERT_RULES:
                try:
                    expected: Any = port.alert_rows(rule, now)
                except NoData:
                    expected = NoData
                try:
                    got: Any = metrics.alert_rows(rule, now)
                except NoData:
                    got = NoData
                if expected is NoData or got is NoData:
                    assert got is expected, rule
                else:
                    _same(got, expected, rule)


def test_latest_usage_and_rows_as_simulator(sim: Sim) -> None:
    col = "ts" if sim.store.has("ts", "tf_worker_usage", "pod_name") else "greptime_timestamp"  # pods by name
    with _metrics(sim.dsn[col], gpu_capacity=sim.capacity) as metrics:
        now = sim.metrics.now - timedelta(seconds=30)
        _same(metrics.latest_gpu_usage(now), sim.metrics.latest_gpu_usage(now))
        _same(metrics.latest_worker_usage(now), sim.metrics.latest_worker_usage(now))
        assert metrics.latest_gpu_usage(now + timedelta(days=1)) == {}
        start, end = now - timedelta(minutes=3), now
        got = list(metrics.rows("tf_node_metrics", start, end))
        want = list(sim.metrics.rows("tf_node_metrics", start, end))
        key = lambda r: (r["ts"], r["node"])  # noqa: E731
        assert [r["ts"] for r in got] == sorted(r["ts"] for r in got)  # ordered by time
        _same(sorted(({k: r[k] for k in want[0]} for r in got), key=key), sorted(want, key=key))


def test_alerts_never_written_columns_are_no_data(store: MetricsStore, sim: Sim) -> None:
    with _metrics(sim.dsn["ts"]) as metrics:
        for rule, pattern in (
            ("WorkerTFlopsThrottled", r"tf_worker_usage\.compute_throttled_cnt is never written"),
            ("WorkerVRAMSwitchCountIncreasing", r"tf_worker_usage\.vram_resumed_cnt is never written"),
            ("GPUVRAMFull", r"tf_gpu_usage\.memory_percentage is never written"),
            ("WorkerAllocationFailed", "table tf_system_metrics does not exist"),
        ):
            with pytest.raises(NoData, match=pattern):
                metrics.alert_rows(rule, sim.metrics.now)
    store.create("alerts_nocol", "ts", overrides={"tf_worker_usage": {"compute_throttled_cnt": None}})
    with (
        _metrics(store.dsn("alerts_nocol")) as metrics,
        pytest.raises(NoData, match=r"column tf_worker_usage\.compute_throttled_cnt does not exist"),
    ):
        metrics.alert_rows("WorkerTFlopsThrottled", NOW)


def _without_details(h: AlertHistory) -> AlertHistory:
    return dataclasses.replace(h, statuses=tuple(dataclasses.replace(s, detail="") for s in h.statuses))


def test_same_alert_history_as_simulator(sim: Sim) -> None:
    with _metrics(sim.dsn["ts"]) as metrics:
        for now in (sim.metrics.now, sim.metrics.now - timedelta(minutes=7, seconds=30)):
            got = evaluate_history(metrics, RULES, now=now, span=timedelta(hours=1))
            expected = evaluate_history(SimStep1(sim.metrics), RULES, now=now, span=timedelta(hours=1))
            # a column the simulator never writes is absent there and NULL in the table: both NoData
            _same(_without_details(got), _without_details(expected))
            assert {s.rule for s in got.statuses if s.state == "no-data"} == {
                "WorkerTFlopsThrottled", "WorkerVRAMSwitchCountIncreasing", "WorkerAllocationFailed", "GPUVRAMFull",
            }  # fmt: skip
            assert got.transitions or got.firing or got.pending
