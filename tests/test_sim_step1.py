"""The simulator's Step1Port (sim/step1.py): exact figures, alerts, NoData, streaming memory.

The hand-made datasets are the ones tests/test_greptime.py (Step1) and tests/test_greptime_alerts.py
(alerts) load into PostgreSQL, with the same expected figures, so both sources are held to one set
of numbers; tests/test_greptime_simulator.py checks that they agree on the simulator's own history.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.pg import (
    CAPACITY,
    EXPECTED_ALERTS,
    NOW,
    DictRows,
    alert_rows_data,
    check_step1,
    rounded,
    step1_rows,
)
from tftui.model.metrics import ALERT_RULES, NoData
from tftui.model.quantity import quantity_float
from tftui.sources.greptime import RULES
from tftui.sources.sim.cluster import generate_objects
from tftui.sources.sim.step1 import SimStep1
from tftui.sources.sim.usage import SimMetrics


def test_step1_exact_figures() -> None:
    check_step1(SimStep1(DictRows(step1_rows())).step1(timedelta(hours=1), NOW, CAPACITY))


def test_step1_empty_window_names_every_table() -> None:
    result = SimStep1(DictRows(step1_rows())).step1(timedelta(hours=1), NOW + timedelta(days=2), CAPACITY)
    assert result.nodes == result.gpus == result.workload_requests == result.workload_usage == ()
    assert result.missing == ("tf_gpu_usage", "tf_node_metrics", "tf_worker_resources", "tf_worker_usage")


def test_step1_without_capacity_keeps_bytes_and_names_the_gpus() -> None:
    result = SimStep1(DictRows(step1_rows())).step1(timedelta(hours=1), NOW, {})
    assert {g.uuid: g.vram_peak_pct for g in result.gpus if g.vram_peak_pct is not None} == {
        "gpu-3e8a1f52-6b1d-4c2e-9f0a-7d1c00000002": 40.0  # the one GPU whose % is written
    }
    assert all(u.tflops_avg is None and u.tflops_peak is None for u in result.workload_usage)  # not 0
    assert len([m for m in result.missing if m.startswith("capacity of ")]) == 5


@pytest.mark.parametrize("rule", ALERT_RULES)
def test_alert_rules_fire_on_crafted_rows_only(rule: str) -> None:
    rows = SimStep1(DictRows(alert_rows_data())).alert_rows(rule, NOW)
    assert rounded(rows) == EXPECTED_ALERTS[rule]


def test_alert_windows_are_the_evaluation_intervals() -> None:
    port = SimStep1(DictRows(alert_rows_data()))
    # 15 s later the throttling samples (NOW − 10 s, NOW) are partly out of WorkerTFlopsThrottled's window
    assert port.alert_rows("WorkerTFlopsThrottled", NOW + timedelta(seconds=10)) == []
    # IdleGPU looks back 10 min: g4's busy-VRAM sample at NOW − 15 min is outside, so is g3's history
    assert RULES["IdleGPU"].window == timedelta(minutes=10)
    with pytest.raises(NoData, match="no rows in tf_worker_usage"):
        port.alert_rows("WorkerTFlopsThrottled", NOW + timedelta(seconds=30))


def test_alerts_no_data_is_not_healthy() -> None:
    data = alert_rows_data()
    for row in data["tf_worker_usage"]:
        row["compute_throttled_cnt"] = None  # declared, never written (upstream)
        row["vram_resumed_cnt"] = 0
    for row in data["tf_gpu_usage"]:
        row["memory_percentage"] = 0.0  # hard-wired to 0 upstream
    del data["tf_system_metrics"]
    port = SimStep1(DictRows(data))
    with pytest.raises(NoData, match=r"tf_worker_usage\.compute_throttled_cnt is never written"):
        port.alert_rows("WorkerTFlopsThrottled", NOW)
    with pytest.raises(NoData, match=r"tf_worker_usage\.vram_resumed_cnt is never written"):
        port.alert_rows("WorkerVRAMSwitchCountIncreasing", NOW)
    with pytest.raises(NoData, match=r"tf_gpu_usage\.memory_percentage is never written"):
        port.alert_rows("GPUVRAMFull", NOW)
    with pytest.raises(NoData, match="table tf_system_metrics does not exist"):
        port.alert_rows("WorkerAllocationFailed", NOW)
    # IdleGPU still evaluates (compute only, as upstream) and carries bytes for M3
    assert [r["uuid"] for r in port.alert_rows("IdleGPU", NOW)] == ["g3", "g4"]


def test_alert_column_absent_is_no_data() -> None:
    data = alert_rows_data()
    for row in data["tf_worker_usage"]:
        del row["compute_throttled_cnt"]
    with pytest.raises(NoData, match=r"column tf_worker_usage\.compute_throttled_cnt does not exist"):
        SimStep1(DictRows(data)).alert_rows("WorkerTFlopsThrottled", NOW)


def test_unknown_rule() -> None:
    with pytest.raises(ValueError, match="unknown alert rule"):
        SimStep1(DictRows({})).alert_rows("NoSuchRule", NOW)


# -- on the simulator's history --------------------------------------------------------------------


@pytest.fixture(scope="module")
def sim() -> tuple[SimMetrics, dict[str, tuple[float, float]]]:
    objects = generate_objects(nodes=12)
    capacity = {
        o["metadata"]["name"]: (
            quantity_float(o["status"]["capacity"]["tflops"]),
            quantity_float(o["status"]["capacity"]["vram"]),
        )
        for o in objects
        if o["kind"] == "GPU"
    }
    return SimMetrics(objects, history=timedelta(hours=3)), capacity


def test_simulator_step1_is_consistent_with_its_rows(sim: tuple[SimMetrics, dict[str, Any]]) -> None:
    metrics, capacity = sim
    window = timedelta(hours=2)
    result = SimStep1(metrics).step1(window, metrics.now, capacity)
    count = {t: sum(1 for _ in metrics.rows(t, metrics.now - window, metrics.now))
             for t in ("tf_node_metrics", "tf_gpu_usage", "tf_worker_resources", "tf_worker_usage")}  # fmt: skip
    assert sum(n.samples for n in result.nodes) == count["tf_node_metrics"]
    assert sum(g.samples for g in result.gpus) == count["tf_gpu_usage"]
    assert sum(r.samples for r in result.workload_requests) == count["tf_worker_resources"]
    assert sum(u.samples for u in result.workload_usage) == count["tf_worker_usage"]
    assert result.missing == ("tf_gpu_usage.memory_percentage",)  # upstream writes 0: VRAM % from bytes
    assert all(g.vram_peak_pct is not None and 0 <= g.vram_peak_pct <= 100 for g in result.gpus)
    for u in result.workload_usage:  # every simulated row is on a known GPU: no figure is missing
        assert u.tflops_avg is not None and u.tflops_peak is not None
        assert 0 <= u.tflops_avg <= u.tflops_peak


def test_simulator_alerts_no_data_for_never_written_columns(sim: tuple[SimMetrics, Any]) -> None:
    metrics, _cap = sim
    port = SimStep1(metrics)
    for rule, pattern in (
        ("WorkerTFlopsThrottled", "compute_throttled_cnt"),
        ("WorkerVRAMSwitchCountIncreasing", "vram_resumed_cnt"),
        ("WorkerAllocationFailed", "tf_system_metrics"),
        ("GPUVRAMFull", "memory_percentage"),
    ):
        with pytest.raises(NoData, match=pattern):
            port.alert_rows(rule, metrics.now)
    for rule in ALERT_RULES[4:]:
        assert isinstance(port.alert_rows(rule, metrics.now), list)


def test_step1_streams_memory_does_not_grow_with_rows() -> None:
    """Peak traced memory over 20× more rows stays within a small constant (groups, not rows)."""

    class Many:
        def __init__(self, minutes: int) -> None:
            self.minutes = minutes

        def rows(self, table: str, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
            for m in range(self.minutes):
                ts = start + timedelta(minutes=m)
                for i in range(50):
                    yield {"node": f"n{i % 5}", "pool": "p", "uuid": f"g{i}", "namespace": "ns",
                           "workload": f"w{i % 10}", "worker": f"k{i}", "compute_percentage": float(i),
                           "memory_percentage": 0.0, "memory_bytes": i * 1000,
                           "allocated_tflops_percent": 1.0, "allocated_vram_percent": 2.0,
                           "tflops_request": 1.0, "vram_bytes_request": 1.0, "gpu_count": 1, "ts": ts}  # fmt: skip

    start = datetime(2026, 1, 1, tzinfo=UTC)

    def peak(minutes: int) -> int:
        tracemalloc.start()
        try:
            SimStep1(Many(minutes)).step1(timedelta(days=1), start + timedelta(days=1), {})
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    # tracemalloc counts every thread's allocations: a thread an earlier test left in this worker
    # process (a store's watchdog, a reader) can add to one run's peak, never take from it, so
    # each figure is the least of three runs (a 20× longer stream held as rows would exceed it
    # in all three)
    peaks = [min(peak(minutes) for _ in range(3)) for minutes in (20, 400)]
    assert peaks[1] < peaks[0] * 1.5 + 50_000, peaks


def test_rule_windows_and_thresholds_match_the_alert_engine() -> None:
    """The sources' windows/thresholds (sources/greptime.py RULES) are the engine's rules."""
    alerts = pytest.importorskip("tftui.engine.alerts")
    for name, spec in RULES.items():
        rule = alerts.RULES_BY_NAME[name]
        assert (spec.window, spec.threshold, spec.consecutive, spec.severity) == (
            rule.interval,
            rule.threshold,
            rule.consecutive,
            rule.severity,
        ), name


def test_alert_history_is_alert_rows_per_instant() -> None:
    port = SimStep1(DictRows(alert_rows_data()))
    times = [NOW - timedelta(seconds=30), NOW]
    history = port.alert_history("GPUTFlopsFull", times)
    assert history[-1] == port.alert_rows("GPUTFlopsFull", NOW) and len(history) == 2
    assert isinstance(history[0], NoData)  # no rows in [NOW − 60 s, NOW − 30 s]
    data = alert_rows_data()
    del data["tf_system_metrics"]
    gone = SimStep1(DictRows(data)).alert_history("WorkerAllocationFailed", times)
    assert [str(g) for g in gone] == ["WorkerAllocationFailed: table tf_system_metrics does not exist "
                                      "(the simulator does not write it)"] * 2  # fmt: skip
    with pytest.raises(ValueError, match="unknown alert rule"):
        port.alert_history("NoSuchRule", times)
