"""The console's metrics views over `GreptimeMetrics` on both metrics stores (the other UI metrics tests
use the simulator's ports): the demo's last hours of rows are loaded into the store, and the alerts
and waste views must show what the engine decides on those same rows through the simulator's port."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tests.pg import SIM_TABLES, DictRows
from tests.stores import MetricsStore
from tests.ui_metrics_support import FAST, WINDOW, cell, header_status, make_app, settle, table
from tftui.engine.alerts import RULES
from tftui.sources.greptime import GreptimeMetrics
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.step1 import SimStep1
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.load.analysis import compute_alerts, compute_waste
from tftui.ui.load.data import load
from tftui.ui.screens.metrics import AlertsScreen, WasteScreen

COL = "greptime_timestamp"


@pytest.fixture(scope="module")
def loaded(
    store: MetricsStore, demo: SimCluster, metrics: SimMetrics
) -> Iterator[tuple[GreptimeMetrics, DictRows]]:
    start = DEFAULT_NOW - FAST.history_span - timedelta(minutes=30)
    rows = {t: list(metrics.rows(t, start, DEFAULT_NOW + timedelta(seconds=1))) for t in SIM_TABLES}
    store.create("console", COL)
    store.load("console", rows, COL)
    held = {
        t: [{k: v for k, v in r.items() if k == "ts" or store.has(COL, t, k)} for r in rs]
        for t, rs in rows.items()
    }
    with GreptimeMetrics(store.dsn("console"), connect_timeout=3) as gm:
        yield gm, DictRows({**held, "tf_system_metrics": []})


async def test_alerts_view_on_the_store_shows_the_engines_states(
    demo: SimCluster, loaded: tuple[GreptimeMetrics, Any]
) -> None:
    gm, rows = loaded
    expected = {s.rule: s.state for s in compute_alerts(SimStep1(rows), DEFAULT_NOW).history.statuses}
    assert set(expected.values()) >= {"firing", "no-data"}
    app = make_app(demo, gm)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        assert app.switch_view("alerts")
        await settle(pilot)
        assert isinstance(app.screen, AlertsScreen)
        rules = table(app, "#rules")
        assert sorted(rules.row_keys) == sorted(r.name for r in RULES)
        marks = {"firing": "● firing", "pending": "◐ pending", "no-data": "? no-data", "ok": "✓ ok"}
        assert {k: cell(rules, k, "state") for k in rules.row_keys} == {
            k: marks[v] for k, v in expected.items()
        }


async def test_waste_view_on_the_store_lists_the_engines_findings(
    demo: SimCluster, loaded: tuple[GreptimeMetrics, Any]
) -> None:
    gm, rows = loaded
    data = load(demo, gm, DEFAULT_NOW)
    expected = compute_waste(SimStep1(rows), data, WINDOW).report.findings
    assert len(expected) > 5
    app = make_app(demo, gm)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        assert app.switch_view("waste")
        await settle(pilot)
        assert isinstance(app.screen, WasteScreen)
        shown = table(app)
        assert len(shown.row_keys) == len(expected)


async def test_a_store_that_stops_answering_is_shown_then_recovers(
    store: MetricsStore, demo: SimCluster, loaded: tuple[GreptimeMetrics, Any]
) -> None:
    """A held table (a locked table, an overloaded GreptimeDB) ends the console's queries at the
    query timeout: the header says so and allocation still renders; once released, a refresh is
    whole again. Before, the analyses waited on the store for good."""
    with GreptimeMetrics(store.dsn("console"), connect_timeout=3, query_timeout=1) as gm:
        app = make_app(demo, gm)
        async with app.run_test(size=(200, 50)) as pilot:
            await settle(pilot)
            assert header_status(app) == ""
            with store.hold("console", "tf_worker_usage"):
                await pilot.press("ctrl+r")
                await settle(pilot)
                status = header_status(app)
                assert "no result within 1 s while" in status and "(tf_worker_usage)" in status, status
                assert table(app).row_keys  # the pools, from allocation
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert header_status(app) == ""
