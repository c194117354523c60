"""The console's metrics screens through Textual's pilot: waste and its finding detail, alerts, the
workload detail with its 24 h sparklines, the status line when the metrics store is unreachable,
and the analyses' workers (computed off the UI thread, once per refresh, never blocking).

The expected figures are computed with the engine directly (`assemble`, `evaluate_history`) on the
same demo, so the screens are checked to show the engine's decisions, not their own.
"""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from rich.console import Console, RenderableType
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Label, Sparkline, Static

from tests.fitting import WIDTHS, assert_fits
from tftui.engine.alerts import RULES
from tftui.model.metrics import AlertResult, AlertRow, Step1
from tftui.model.usage import GPUUsage, WorkerUsage
from tftui.sources.ports import SourceError
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.step1 import SimStep1
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp
from tftui.ui.load.analysis import (
    ALERTS,
    AUTOSCALE,
    HISTORY,
    WASTE,
    AlertsAnalysis,
    AnalysisSettings,
    WasteAnalysis,
    WorkloadHistory,
    compute_alerts,
    compute_history,
    compute_waste,
)
from tftui.ui.load.data import ConsoleData, load, metrics_error_text, step1_port, store_name
from tftui.ui.render.format import fmt_num
from tftui.ui.render.metricsviews import (
    finding_key,
    instances_table,
    rules_table,
    spark_values,
    waste_table,
)
from tftui.ui.render.views import layout_for
from tftui.ui.screens.metrics import AlertsScreen, FindingScreen, WasteScreen, WorkloadScreen
from tftui.ui.screens.modals import HelpScreen
from tftui.ui.screens.resource import NodeScreen, PoolsScreen
from tftui.ui.widgets.chrome import Breadcrumb
from tftui.ui.widgets.table import ResourceTable

WINDOW = timedelta(hours=1)
FAST = AnalysisSettings(waste_window=WINDOW, history_span=timedelta(hours=2))
WORKLOAD = "ml-serving/bert-ner"  # 3 workers, a full day of history
STORE = "metrics.example:4003/public"


@pytest.fixture(scope="module")
def data(demo: SimCluster, metrics: SimMetrics) -> ConsoleData:
    return load(demo, metrics, DEFAULT_NOW)


@pytest.fixture(scope="module")
def waste(metrics: SimMetrics, data: ConsoleData) -> WasteAnalysis:
    return compute_waste(SimStep1(metrics), data, WINDOW)


@pytest.fixture(scope="module")
def alerts(metrics: SimMetrics) -> AlertsAnalysis:
    return compute_alerts(SimStep1(metrics), DEFAULT_NOW)


class Store:
    """A GreptimeDB-like store implementing both ports over the simulator, that can be taken down.

    Records which thread each call ran on and counts the step-1 queries.
    """

    def __init__(self, metrics: SimMetrics) -> None:
        self.metrics = metrics
        self.step1_port = SimStep1(metrics)
        self.down = False
        self.gate: threading.Event | None = None  # step1 waits on it (a slow store)
        self.threads: list[str] = []
        self.step1_calls = 0
        self.rows_calls = 0  # passes over a table's rows
        self._last_end: datetime | None = None
        self.gpu_capacity: Mapping[str, tuple[float, float]] = {}

    def describe(self) -> str:
        return f"greptime {STORE}"

    def _check(self) -> None:
        self.threads.append(threading.current_thread().name)
        if self.down:
            raise SourceError(
                f"metrics store {STORE}: cannot connect (connection refused) — is GreptimeDB running?"
            )

    def latest_gpu_usage(
        self, now: datetime, lookback: timedelta = timedelta(minutes=5)
    ) -> dict[str, GPUUsage]:
        self._check()
        return self.metrics.latest_gpu_usage(now, lookback)

    def latest_worker_usage(
        self, now: datetime, lookback: timedelta = timedelta(minutes=5)
    ) -> dict[tuple[str, str], WorkerUsage]:
        self._check()
        return self.metrics.latest_worker_usage(now, lookback)

    def rows(self, table: Any, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        self._check()
        if start != self._last_end:  # a pass: the chunks of one load follow each other (RAW_CHUNK)
            self.rows_calls += 1
        self._last_end = end
        return self.metrics.rows(table, start, end)

    def workload_rows(
        self, namespace: str, workload: str, start: datetime, end: datetime
    ) -> Iterator[dict[str, Any]]:
        self._check()
        self.rows_calls += 1
        return self.metrics.workload_rows(namespace, workload, start, end)

    def step1(
        self, window: timedelta, now: datetime, gpu_capacity: Mapping[str, tuple[float, float]]
    ) -> Step1:
        self._check()
        self.step1_calls += 1
        if self.gate is not None:
            assert self.gate.wait(10), "the test never released the store"
        return self.step1_port.step1(window, now, gpu_capacity)

    def alert_rows(self, rule: str, now: datetime) -> list[AlertRow]:
        self._check()
        return self.step1_port.alert_rows(rule, now)

    def alert_history(self, rule: str, times: Sequence[datetime]) -> list[AlertResult]:
        self._check()
        return self.step1_port.alert_history(rule, times)


class UsageOnly:
    """A `MetricsPort` with latest usage and rows but no step-1 queries."""

    def __init__(self, metrics: SimMetrics) -> None:
        self.metrics = metrics

    def latest_gpu_usage(
        self, now: datetime, lookback: timedelta = timedelta(minutes=5)
    ) -> dict[str, GPUUsage]:
        return self.metrics.latest_gpu_usage(now, lookback)

    def latest_worker_usage(
        self, now: datetime, lookback: timedelta = timedelta(minutes=5)
    ) -> dict[tuple[str, str], WorkerUsage]:
        return self.metrics.latest_worker_usage(now, lookback)

    def rows(self, table: Any, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        return self.metrics.rows(table, start, end)


def make_app(cluster: Any, metrics: Any, settings: AnalysisSettings = FAST) -> TfTuiApp:
    return TfTuiApp(cluster, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None, analysis=settings)


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def plain(value: RenderableType | object) -> str:
    """The text of a cell or a Static's content, as a wide terminal would print it."""
    if isinstance(value, str):
        return value
    if isinstance(value, Text):
        return value.plain
    console = Console(width=400, record=True, color_system=None)
    console.print(value)
    return console.export_text()


def static_text(app: TfTuiApp, selector: str) -> str:
    return plain(app.screen.query_one(selector, Static).content)


def crumbs(app: TfTuiApp) -> str:
    return str(app.screen.query_one(Breadcrumb).render())


def header_status(app: TfTuiApp) -> str:
    label = app.screen.query_one("#header-status", Label)
    return str(label.render()) if label.display else ""


def table(app: TfTuiApp, selector: str = "#main") -> ResourceTable:
    return app.screen.query_one(selector, ResourceTable)


def cell(t: ResourceTable, key: str, column: str) -> str:
    return plain(t.get_cell(key, column))


# -- waste ---------------------------------------------------------------------------------------


async def test_waste_view_lists_the_engines_findings_by_wasted_gpu_hours(
    demo: SimCluster, metrics: SimMetrics, waste: WasteAnalysis
) -> None:
    report = waste.report
    assert len(report.findings) > 10
    app = make_app(demo, metrics)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        assert app.switch_view("waste")
        await settle(pilot)
        assert isinstance(app.screen, WasteScreen)
        t = table(app)
        assert t.row_keys == [finding_key(f) for f in report.findings]  # the engine's order
        hours = [f.wasted_gpu_hours or 0.0 for f in report.findings]
        assert hours == sorted(hours, reverse=True)
        top = report.findings[0]
        key = finding_key(top)
        assert cell(t, key, "level") == top.level and cell(t, key, "cls") == top.cls
        assert cell(t, key, "pool") == top.pool
        assert cell(t, key, "hours").strip() == f"{top.wasted_gpu_hours:.1f}"
        assert cell(t, key, "money").strip() == f"${top.wasted_money:,.2f}"
        assert top.fixes[0].startswith(cell(t, key, "fix").rstrip("…"))
        assert crumbs(app) == f"waste ({len(report.findings)} findings)"
        summary = static_text(app, "#waste-summary")
        totals = report.totals
        assert f"wasted {totals.gpu_hours:.0f} GPU-h · ${totals.money:,.0f} over 1h" in summary
        assert f"requests above use {totals.requests_gpu_hours:.1f} GPU-h" in summary
        assert f"unrequested capacity {totals.capacity_gpu_hours:.1f} GPU-h" in summary
        assert "from demo (simulated metrics)" in summary
        assert "no data: tf_gpu_usage.memory_percentage" in summary  # the demo writes 0 there
        preview = static_text(app, "#waste-preview")
        assert top.detail in preview and top.fixes[0] in preview
        # `/` filters findings by any of their text (here: a class)
        await pilot.press("slash", *"idle-reservation", "enter")
        await pilot.pause()
        assert t.row_keys and all(k.endswith(":idle-reservation") for k in t.row_keys)


async def test_enter_opens_the_finding_with_every_fix_in_full_and_c_copies_them(
    demo: SimCluster, metrics: SimMetrics, waste: WasteAnalysis, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = waste.report.findings[0]
    assert len(top.fixes) > 1
    app = make_app(demo, metrics)
    copied: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.switch_view("waste")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, FindingScreen)
        assert crumbs(app) == f"waste › {top.name}"
        body = " ".join(static_text(app, "#finding-body").split())  # unwrap the 400-column render
        for i, fix in enumerate(top.fixes, 1):
            assert f"{i}. {' '.join(fix.split())}" in body  # in full, never cut
        assert top.detail in body and "figures" in body and "classes" in body
        assert f"wasted {top.wasted_gpu_hours:.1f} GPU-h · ${top.wasted_money:,.2f} over 1h" in body
        await pilot.press("c")
        await pilot.pause()
        assert copied == ["\n".join(top.fixes)]
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, WasteScreen)


async def test_waste_runs_in_a_worker_shows_computing_and_never_blocks(
    demo: SimCluster, metrics: SimMetrics
) -> None:
    store = Store(metrics)
    store.gate = threading.Event()
    app = make_app(demo, store)
    async with app.run_test(size=(120, 40)) as pilot:
        # the first screen asks for the waste (its WASTE $ column): `…` while the store answers
        for _ in range(200):
            if app.data is not None and not app.data.pending and app.computing(WASTE):
                break
            await pilot.pause(0.05)
        assert app.computing(WASTE)
        for _ in range(3):
            await pilot.pause()
        assert {cell(table(app), p, "money").strip() for p in table(app).row_keys} == {"…"}
        assert app.switch_view("waste")
        for _ in range(3):
            await pilot.pause()
        # the store is still answering: the screen says so and the console stays usable
        assert app.computing(WASTE)
        assert crumbs(app) == "waste (computing…)"
        assert "computing the waste diagnosis" in static_text(app, "#waste-summary")
        assert app.switch_view("pools")
        await pilot.pause()
        assert isinstance(app.screen, PoolsScreen) and table(app).row_keys
        assert app.switch_view("waste")  # asking again while it runs starts nothing new
        await pilot.pause()
        store.gate.set()
        await settle(pilot)
        assert store.step1_calls == 1
        assert not app.computing(WASTE)
        assert table(app).row_keys
        step1_threads = [t for t in store.threads if t != "MainThread"]
        assert step1_threads and threading.main_thread().name not in store.threads


async def test_analyses_are_cached_per_refresh(demo: SimCluster, metrics: SimMetrics) -> None:
    store = Store(metrics)
    app = make_app(demo, store)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert store.step1_calls == 1  # the first screen asks (its WASTE $ column, the header)
        assert app.switch_view("waste")
        await settle(pilot)
        assert store.step1_calls == 1  # same refresh: cached
        assert app.switch_view("pools")
        await settle(pilot)
        assert app.switch_view("waste")
        await settle(pilot)
        assert store.step1_calls == 1  # same refresh: cached
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert store.step1_calls == 2  # a new refresh: computed again, once
        analysis = app.analysis(WASTE)
        assert analysis is not None and analysis.seq == app.data_seq
        assert analysis.source == f"greptime {STORE}"  # the store's own step-1 queries answered


async def test_a_metrics_port_without_step1_says_so(demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, UsageOnly(metrics))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.switch_view("waste")
        await settle(pilot)
        assert "does not answer the step-1 and alert queries" in static_text(app, "#waste-summary")
        assert crumbs(app) == "waste (no data)"
        assert app.switch_view("alerts")
        await settle(pilot)
        assert "does not answer the step-1 and alert queries" in static_text(app, "#alerts-summary")


def test_step1_port_detection(metrics: SimMetrics) -> None:
    store = Store(metrics)
    assert step1_port(store) is store  # GreptimeMetrics: the port itself
    assert isinstance(step1_port(metrics), SimStep1)  # the demo: SimStep1 over SimMetrics
    assert step1_port(UsageOnly(metrics)) is None
    assert step1_port(None) is None
    assert store_name(metrics) == "demo (simulated metrics)"
    assert store_name(UsageOnly(metrics)) is None


# -- metrics store unreachable -------------------------------------------------------------------


def test_metrics_errors_name_the_store(metrics: SimMetrics) -> None:
    store = Store(metrics)
    # GreptimeMetrics messages already name `host:port/db`: kept as they are
    named = SourceError(f"metrics store {STORE}: cannot connect (connection refused)")
    assert metrics_error_text(store, named) == str(named)
    # anything else gets the store's description in front
    assert metrics_error_text(store, SourceError("timeout")) == f"greptime {STORE}: timeout"
    assert metrics_error_text(UsageOnly(metrics), SourceError("timeout")) == "timeout"
    assert metrics_error_text(store, KeyError("ts")) == f"greptime {STORE}: KeyError: 'ts'"


async def test_unreachable_store_keeps_allocation_says_so_and_recovers(
    demo: SimCluster, metrics: SimMetrics
) -> None:
    store = Store(metrics)
    app = make_app(demo, store)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert header_status(app) == ""
        assert app.switch_view("waste")
        await settle(pilot)
        good = table(app).row_keys
        assert good

        store.down = True
        await pilot.press("ctrl+r")
        await settle(pilot)
        status = header_status(app)
        assert status.startswith(f"metrics store {STORE}: cannot connect (connection refused)")
        assert status.endswith("(allocation only)")
        # the failed analysis keeps the last good findings on screen and says since when
        assert table(app).row_keys == good
        summary = static_text(app, "#waste-summary")
        assert "metrics store failed, showing 12:00:00" in summary and "connection refused" in summary
        # allocation still renders: gauges with used unknown (—), never 0
        assert app.switch_view("pools")
        await settle(pilot)
        gauge = cell(table(app), "demo-training", "tflops")
        assert gauge.rstrip().endswith("/   —") and "▒" in gauge
        # the alerts replay fails the same way; it keeps the replay the first screen made and says so
        assert app.switch_view("alerts")
        await settle(pilot)
        assert "metrics store failed, showing 12:00:00" in static_text(app, "#alerts-summary")

        store.down = False
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert header_status(app) == ""
        assert table(app, "#rules").row_keys  # recomputed on the good refresh
        assert app.switch_view("pools")
        await settle(pilot)
        assert not cell(table(app), "demo-training", "tflops").rstrip().endswith("—")


async def test_unreachable_at_start_shows_errors_not_tracebacks(
    demo: SimCluster, metrics: SimMetrics
) -> None:
    store = Store(metrics)
    store.down = True
    app = make_app(demo, store)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "cannot connect" in header_status(app)
        app.open_workload(WORKLOAD)
        await settle(pilot)
        assert isinstance(app.screen, WorkloadScreen)
        label = str(app.screen.query_one("#spark-tflops-label", Label).render())
        assert label.startswith("the 24 h history unavailable: metrics store")
        assert not app.screen.query_one("#spark-tflops", Sparkline).display
        assert table(app, "#workers").row_keys  # allocation still listed


def test_load_hands_gpu_capacities_to_the_store(demo: SimCluster, metrics: SimMetrics) -> None:
    store = Store(metrics)
    data = load(demo, store, DEFAULT_NOW)
    gpu = next(iter(data.state.gpus.values()))
    assert store.gpu_capacity[gpu.name] == (gpu.capacity.tflops, gpu.capacity.vram)
    assert data.metrics_source == f"greptime {STORE}"


# -- alerts --------------------------------------------------------------------------------------


async def test_alerts_view_shows_every_rule_state_and_the_selected_rules_alerts(
    demo: SimCluster, metrics: SimMetrics, alerts: AlertsAnalysis
) -> None:
    history = alerts.history
    states = {s.rule: s for s in history.statuses}
    assert {s.state for s in history.statuses} >= {"firing", "no-data", "ok"}
    app = make_app(demo, metrics)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        assert app.switch_view("alerts")
        await settle(pilot)
        assert isinstance(app.screen, AlertsScreen)
        rules = table(app, "#rules")
        assert sorted(rules.row_keys) == sorted(r.name for r in RULES)  # every rule, always
        order = [states[k].state for k in rules.row_keys]
        assert order == sorted(order, key=["firing", "pending", "no-data", "ok"].index)
        for rule, status in states.items():
            text = cell(rules, rule, "state")
            assert (
                text
                == {"firing": "● firing", "pending": "◐ pending", "no-data": "? no-data", "ok": "✓ ok"}[
                    status.state
                ]
            )
            assert cell(rules, rule, "severity") == status.severity
            if status.state == "no-data":  # why, instead of looking healthy
                assert status.detail.startswith(cell(rules, rule, "detail").rstrip("…"))
        # no-data is drawn differently from ok, not just worded differently
        no_data = next(k for k in rules.row_keys if states[k].state == "no-data")
        ok = next(k for k in rules.row_keys if states[k].state == "ok")
        no_data_cell, ok_cell = rules.get_cell(no_data, "state"), rules.get_cell(ok, "state")
        assert isinstance(no_data_cell, Text) and isinstance(ok_cell, Text)
        assert no_data_cell.style != ok_cell.style

        first = rules.row_keys[0]
        firing = [a for a in history.firing if a.rule == first]
        pending = [a for a in history.pending if a.rule == first]
        assert firing
        instances = table(app, "#instances")
        assert instances.row_keys == [a.fingerprint for a in firing + pending]
        alert = firing[0]
        assert cell(instances, alert.fingerprint, "instance") == alert.instance
        assert alert.summary.startswith(cell(instances, alert.fingerprint, "summary").rstrip("…"))
        assert cell(instances, alert.fingerprint, "fired") == f"{alert.fired_at:%H:%M:%S}"
        since = cell(instances, alert.fingerprint, "since")
        assert since.endswith(("m", "h")) and f"{alert.starts_at:%H:%M}" in since
        assert crumbs(app).startswith(f"alerts › {first} (")
        assert crumbs(app).endswith(f"· {len(firing) + len(pending)} of this rule)")
        summary = static_text(app, "#alerts-summary")
        n_firing = sum(1 for s in history.statuses if s.state == "firing")
        assert f"{n_firing} rules firing ({len(history.firing)} alerts)" in summary
        assert "replayed 1h to 12:00:00 UTC from demo (simulated metrics)" in summary

        # moving to a no-data rule shows why it has no data, and no alerts
        await pilot.press("down", "down", "down")
        await settle(pilot)
        selected = rules.cursor_key
        assert selected is not None and states[selected].state == "no-data"
        assert instances.row_keys == []
        assert f"no data: {states[selected].detail}" in static_text(app, "#alerts-summary")


# -- workload detail -----------------------------------------------------------------------------


async def test_workload_detail_request_vs_use_sparklines_and_workers(
    demo: SimCluster, metrics: SimMetrics, data: ConsoleData
) -> None:
    store = Store(metrics)
    settings = AnalysisSettings(waste_window=WINDOW)  # the history over the full 24 h
    expected = compute_history(metrics, data, WORKLOAD)
    wl = data.state.workloads[WORKLOAD]
    app = make_app(demo, store, settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.switch_view("workloads")
        await settle(pilot)
        await pilot.press("slash", *"bert-ner", "enter", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, WorkloadScreen) and screen.key == WORKLOAD
        assert crumbs(app) == f"workloads › {WORKLOAD} (3 workers)"
        history = app.analysis(HISTORY, WORKLOAD)
        assert history is not None and history.value == expected
        # one pass over tf_worker_usage for the history and one for the autoscale window (asked by
        # the Workloads view, reused by the detail), in worker threads
        assert store.rows_calls == 2
        assert "MainThread" not in store.threads

        figures = static_text(app, "#wl-figures")
        assert "REQUEST" in figures and "AVG 24h" in figures and "PEAK 24h" in figures
        assert expected.tflops_avg is not None and expected.tflops_peak is not None
        tf_row = next(line for line in figures.splitlines() if line.startswith("TFLOPS"))
        assert tf_row.split()[1:3] == ["90", "200"]  # request and limit per device (spec)
        assert tf_row.split()[3:5] == [f"{expected.tflops_avg:.0f}", f"{expected.tflops_peak:.0f}"]
        assert wl.request.tflops == 90
        verdict = static_text(app, "#wl-verdict")
        assert verdict.startswith("diagnosis: over-request over 1h · wasted")

        spark = screen.query_one("#spark-tflops", Sparkline)
        assert spark.display
        assert list(spark.data or []) == spark_values(expected.tflops)[0]
        assert len(expected.tflops) == 96 and all(v is not None for v in expected.tflops)  # 15 min
        vram = screen.query_one("#spark-vram", Sparkline)
        assert list(vram.data or []) == spark_values(expected.vram)[0]
        label = str(screen.query_one("#spark-tflops-label", Label).render())
        assert label.startswith("TFLOPS used (workload total, 15m means) · min")
        # the bars run from 0 to what the running workers requested, not min..max of the use
        assert getattr(spark, "ceiling", None) == wl.allocated.tflops > 0
        assert f"scale 0–{fmt_num(wl.allocated.tflops)} (request)" in label
        assert str(screen.query_one("#spark-axis", Label).render()).endswith("12:00 UTC")

        workers = table(app, "#workers")
        assert workers.row_keys == sorted(wl.workers)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        assert app.screen.node == data.state.workers[workers.row_keys[0]].node


def test_history_buckets_exact_figures(data: ConsoleData) -> None:
    """Per-bucket workload totals are the mean of per-minute sums; per-device figures over rows."""
    wl = data.state.workloads[WORKLOAD]
    w1, w2 = (data.state.workers[k] for k in wl.workers[:2])
    gpu1, gpu2 = w1.gpu_ids[0], w2.gpu_ids[0]
    cap1, cap2 = data.state.gpus[gpu1].capacity.tflops, data.state.gpus[gpu2].capacity.tflops
    now = data.refreshed_at
    gi = 1024**3

    def row(minutes_ago: int, worker: Any, gpu: str, pct: float, mem: int) -> dict[str, Any]:
        return {"namespace": wl.namespace, "workload": wl.name, "worker": worker.uid, "uuid": gpu,
                "compute_percentage": pct, "memory_bytes": mem, "ts": now - timedelta(minutes=minutes_ago)}  # fmt: skip

    rows = [
        row(50, w1, gpu1, 10.0, 2 * gi),  # bucket 0 (of 4 × 15 min)
        row(50, w2, gpu2, 20.0, 4 * gi),
        row(49, w1, gpu1, 30.0, 2 * gi),
        {**row(48, w1, gpu1, 99.0, 9 * gi), "workload": "someone-else"},  # filtered out
        row(5, w1, gpu1, 50.0, 6 * gi),  # bucket 3
    ]

    class Rows:
        def rows(self, table: Any, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
            assert (table, start, end) == ("tf_worker_usage", now - timedelta(hours=1), now)
            return iter(rows)

    h = compute_history(Rows(), data, WORKLOAD, span=timedelta(hours=1))  # type: ignore[arg-type]
    assert isinstance(h, WorkloadHistory) and h.rows == 4 and h.workers == 2
    t50 = 0.10 * cap1 + 0.20 * cap2
    t49 = 0.30 * cap1
    assert h.tflops[0] == pytest.approx((t50 + t49) / 2)
    assert h.tflops[1] is None and h.tflops[2] is None  # no rows: no data, not 0
    assert h.tflops[3] == pytest.approx(0.5 * cap1)
    assert h.vram == ((6 * gi + 2 * gi) / 2, None, None, 6 * gi)
    assert h.tflops_avg == pytest.approx((0.1 * cap1 + 0.2 * cap2 + 0.3 * cap1 + 0.5 * cap1) / 4)
    assert h.tflops_peak == pytest.approx(0.5 * cap1)
    assert h.vram_avg == (2 + 4 + 2 + 6) * gi / 4 and h.vram_peak == 6 * gi
    values, first = spark_values(h.tflops)
    assert first == 0 and values[1:3] == [0.0, 0.0]


def test_workload_history_takes_compute_tflops_where_it_is_written(data: ConsoleData) -> None:
    """As step 1 does, per GPU: `compute_tflops` where it is non-zero somewhere in the span (a NULL
    row of that GPU is no sample), compute % × capacity where it is always 0. The history used to
    derive every figure from compute %, so a workload on a GPU whose writer fills compute_tflops
    showed other figures in its detail than in the waste report."""
    wl = data.state.workloads[WORKLOAD]
    w1, w2 = (data.state.workers[k] for k in wl.workers[:2])
    gpu1, gpu2 = w1.gpu_ids[0], w2.gpu_ids[0]
    cap2 = data.state.gpus[gpu2].capacity.tflops
    now = data.refreshed_at

    def row(minutes_ago: int, worker: Any, gpu: str, pct: float, tflops: float | None) -> dict[str, Any]:
        return {"namespace": wl.namespace, "workload": wl.name, "worker": worker.uid, "uuid": gpu,
                "compute_percentage": pct, "compute_tflops": tflops, "memory_bytes": 1,
                "ts": now - timedelta(minutes=minutes_ago)}  # fmt: skip

    rows = [
        row(50, w1, gpu1, 10.0, 0.0),  # gpu1 writes compute_tflops (non-zero at minute 40): taken, 0
        row(50, w2, gpu2, 20.0, 0.0),  # gpu2 never does: compute % × capacity
        row(40, w1, gpu1, 30.0, 55.0),
        row(30, w1, gpu1, 30.0, None),  # NULL: no sample, not the derived figure
    ]
    seen: list[tuple[str, str]] = []

    class OfWorkload:
        def rows(self, table: Any, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
            raise AssertionError("a port with workload_rows is asked for the workload's rows only")

        def workload_rows(
            self, ns: str, name: str, start: datetime, end: datetime
        ) -> Iterator[dict[str, Any]]:
            seen.append((ns, name))
            return iter(rows)

    h = compute_history(OfWorkload(), data, WORKLOAD, span=timedelta(hours=1))  # type: ignore[arg-type]
    assert seen == [(wl.namespace, wl.name)]
    assert h.tflops_avg == pytest.approx((0.0 + 0.2 * cap2 + 55.0) / 3)
    assert h.tflops_peak == pytest.approx(max(55.0, 0.2 * cap2))
    assert h.rows == 4 and h.unknown_gpus == ()


def test_the_simulators_workload_rows_are_its_rows_of_that_workload(metrics: SimMetrics) -> None:
    start, end = DEFAULT_NOW - timedelta(hours=2), DEFAULT_NOW
    ns, _, name = WORKLOAD.partition("/")
    every = [
        r
        for r in metrics.rows("tf_worker_usage", start, end)
        if (r["namespace"], r["workload"]) == (ns, name)
    ]
    assert len(every) > 100
    assert list(metrics.workload_rows(ns, name, start, end)) == every


# -- help, layouts ---------------------------------------------------------------------------------


async def test_help_lists_the_new_views(demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.switch_view("waste")
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        views = static_text(app, "#help-views")
        assert ":waste" in views and ":alerts" in views and ":pools" in views
        legend = static_text(app, "#help-legend")
        assert "? no-data" in legend and "✓ ok" in legend


def test_every_metrics_table_fits_the_terminal(
    data: ConsoleData, waste: WasteAnalysis, alerts: AlertsAnalysis
) -> None:
    firing = next(s.rule for s in alerts.history.statuses if s.state == "firing")
    for width in WIDTHS:
        layout = layout_for(width)
        for t in (
            waste_table(waste, layout),
            rules_table(alerts, layout),
            instances_table(alerts, firing, layout),
        ):
            assert t.rows
            assert_fits(t, width)


def test_analysis_keys_are_what_the_screens_ask_for() -> None:
    assert WasteScreen().analysis_keys() == ((WASTE, ""),)
    assert AlertsScreen().analysis_keys() == ((ALERTS, ""),)
    assert WorkloadScreen(WORKLOAD, ("workloads", WORKLOAD)).analysis_keys() == (
        (HISTORY, WORKLOAD),
        (WASTE, ""),
        (AUTOSCALE, ""),
    )


async def test_alerts_counts_agree_and_every_rule_is_on_screen(
    demo: SimCluster, metrics: SimMetrics, alerts: AlertsAnalysis
) -> None:
    """The title said `(15 rules, 3 alerts)` while the summary said `3 rules firing (83 alerts)`,
    and 11 of the 15 rules showed with empty lines below."""
    history = alerts.history
    firing_rules = sum(1 for s in history.statuses if s.state == "firing")
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.switch_view("alerts")
        await settle(pilot)
        rules = table(app, "#rules")
        mine = len(table(app, "#instances").row_keys)
        crumb = str(app.screen.query_one(Breadcrumb).render())
        words = f"{firing_rules} of {len(history.statuses)} rules firing ({len(history.firing)} alerts)"
        assert words in crumb and f"{mine} of this rule" in crumb
        assert f"{firing_rules} rules firing ({len(history.firing)} alerts)" in static_text(
            app, "#alerts-summary"
        )
        assert rules.size.height >= rules.row_count + 1  # header and every rule
