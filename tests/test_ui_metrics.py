"""The console's metrics screens through Textual's pilot: waste and its finding detail, the status
line when the metrics store is unreachable, help and table layouts, and the analyses' workers
(computed off the UI thread, once per refresh, never blocking). Alerts and the workload detail:
test_ui_metrics_alerts.py and test_ui_metrics_workload.py.

The expected figures are computed with the engine directly (`assemble`, `evaluate_history`) on the
same demo, so the screens are checked to show the engine's decisions, not their own.
"""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

import threading

import pytest
from textual.widgets import Label, Sparkline

from tests.fitting import WIDTHS, assert_fits
from tests.ui_metrics_support import (
    STORE,
    WINDOW,
    WORKLOAD,
    Store,
    UsageOnly,
    cell,
    crumbs,
    header_status,
    make_app,
    settle,
    static_text,
    table,
)
from tests.ui_metrics_support import alerts as alerts  # a fixture (re-exported for pytest)
from tests.ui_metrics_support import data as data  # a fixture (re-exported for pytest)
from tftui.sources.ports import SourceError
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.step1 import SimStep1
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.load.analysis import (
    ALERTS,
    AUTOSCALE,
    HISTORY,
    WASTE,
    AlertsAnalysis,
    WasteAnalysis,
    compute_waste,
)
from tftui.ui.load.data import ConsoleData, load, metrics_error_text, step1_port, store_name
from tftui.ui.render.metricsviews import finding_key, instances_table, rules_table, waste_table
from tftui.ui.render.views import layout_for
from tftui.ui.screens.metrics import AlertsScreen, FindingScreen, WasteScreen, WorkloadScreen
from tftui.ui.screens.modals import HelpScreen
from tftui.ui.screens.resource import PoolsScreen


@pytest.fixture(scope="module")
def waste(metrics: SimMetrics, data: ConsoleData) -> WasteAnalysis:
    return compute_waste(SimStep1(metrics), data, WINDOW)


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
