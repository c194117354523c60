"""The pools view's waste and alert columns and the header's `waste $`: `…` until the analyses
land, `—` without metrics (never 0), and then the engine's own figures."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from datetime import timedelta
from typing import Any

from rich.text import Text
from textual.pilot import Pilot

from tftui.engine.report import Report
from tftui.engine.wastemodel import workload_waste
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp
from tftui.ui.load.analysis import ALERTS, WASTE, AlertsAnalysis, Analysis, AnalysisSettings, WasteAnalysis
from tftui.ui.load.data import load
from tftui.ui.render.poolwaste import LOADING, pool_waste, waste_summary
from tftui.ui.render.tableops import plain
from tftui.ui.render.views import WIDE, Gauges, pools_table, rendered
from tftui.ui.widgets.table import ResourceTable

HOUR = AnalysisSettings(waste_window=timedelta(hours=1))


def make_app(cluster: Any, metrics: Any) -> TfTuiApp:
    return TfTuiApp(cluster, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None, analysis=HOUR)


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(4):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def cell(app: TfTuiApp, pool: str, column: str) -> str:
    value = app.screen.query_one("#main", ResourceTable).get_cell(pool, column)
    return value.plain if isinstance(value, Text) else str(value)


def header(app: TfTuiApp) -> str:
    return str(app.screen.query_one("#header-summary").render())


def test_loading_then_unknown_never_zero(demo: SimCluster, metrics: SimMetrics) -> None:
    data = load(demo, metrics, DEFAULT_NOW)
    loading = pool_waste(data.state, None, True, None, True)
    assert {w.money for w in loading.values()} == {LOADING}
    assert {w.alerts for w in loading.values()} == {LOADING}
    failed = Analysis(WASTE, "", 1, DEFAULT_NOW, "m", None, None, "metrics: down", 0.0)
    failed_alerts = Analysis(ALERTS, "", 1, DEFAULT_NOW, "m", None, None, "metrics: down", 0.0)
    unknown = pool_waste(data.state, failed, False, failed_alerts, False)
    assert {(w.gpu_hours, w.money, w.alerts) for w in unknown.values()} == {(None, None, None)}
    table = pools_table(data, Gauges(WIDE), unknown)
    for row in table.rows:
        for column in ("gpu_hours", "money", "alerts"):
            assert plain(rendered(row.cells[column])) == "—"
    table = pools_table(data, Gauges(WIDE))  # not computed yet
    assert {plain(rendered(r.cells["money"])) for r in table.rows} == {LOADING}
    assert waste_summary(None, True) == "waste $…"
    assert waste_summary(failed, False) == "waste $—"


async def test_pools_show_the_reports_waste_and_firing_alerts(demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        waste, alerts = app.analysis(WASTE), app.analysis(ALERTS)
        assert waste is not None and isinstance(waste.value, WasteAnalysis)
        assert alerts is not None and isinstance(alerts.value, AlertsAnalysis)
        report: Report = waste.value.report
        assert report.window == timedelta(hours=1)
        firing: dict[str, int] = {}
        for a in alerts.value.history.firing:
            node = app.data.state.nodes.get(str(a.row.get("node")))  # type: ignore[union-attr]
            pool = a.row.get("pool") or (node.pool if node else None)
            firing[str(pool)] = firing.get(str(pool), 0) + 1
        assert sum(firing.values()) > 0  # the demo has firing alerts
        for row in report.pools:
            assert cell(app, row.name, "gpu_hours").strip() == f"{row.wasted_gpu_hours:,.1f}"
            money = cell(app, row.name, "money").strip().rstrip("+")
            assert money == (
                f"${row.wasted_money:,.0f}" if row.wasted_money >= 100 else f"${row.wasted_money:,.2f}"
            )
            assert cell(app, row.name, "alerts").strip() == str(firing.get(row.name, 0))
        assert any(r.wasted_gpu_hours > 0 for r in report.pools)
        total = report.totals.money
        assert f"waste ${total:,.0f}" in header(app) or f"waste ${total:,.2f}" in header(app)
        assert header(app).endswith("/1h")
        # `$` sorts the pools by waste, most first
        await pilot.press("dollar_sign")
        await settle(pilot)
        order = [str(k) for k in app.screen.query_one("#main", ResourceTable).row_keys]
        by_money = [r.name for r in sorted(report.pools, key=lambda r: -r.wasted_money)]
        assert order == by_money


async def test_without_metrics_the_waste_figures_read_unknown(demo: SimCluster) -> None:
    app = make_app(demo, None)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        pools = [str(k) for k in app.screen.query_one("#main", ResourceTable).row_keys]
        assert pools
        for pool in pools:
            assert cell(app, pool, "money").strip() == "—"
            assert cell(app, pool, "alerts").strip() == "—"
        assert header(app).endswith("waste $—")


async def test_pools_screen_keeps_names_and_modes_whole_at_120_columns(
    demo: SimCluster, metrics: SimMetrics
) -> None:
    """At 120 columns the pools view cut PLACEMENT (`NodeCom…owLoad`) and pool names; it now
    shortens the gauges before it cuts a name (`ResourceScreen.WHOLE_NAMES`)."""
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        pools = [str(k) for k in app.screen.query_one("#main", ResourceTable).row_keys]
        for pool in pools:
            assert cell(app, pool, "name") == pool
            assert "…" not in cell(app, pool, "placement")
        assert "NodeCompactGPULowLoad" in {cell(app, p, "placement") for p in pools}
        assert cell(app, pools[0], "money").startswith("$")


# -- the workloads view's WASTE $ ----------------------------------------------------------------

SILENT = ("ml-batch", "embed-batch")
"""A workload the metrics have no rows of (its pods left out of what the simulator measures)."""


def without_silent(demo: SimCluster) -> SimMetrics:
    def silent(o: dict[str, Any]) -> bool:
        meta = o["metadata"]
        return (
            o.get("kind") == "Pod"
            and meta.get("namespace") == SILENT[0]
            and (meta.get("labels") or {}).get("tensor-fusion.ai/workload") == SILENT[1]
        )

    return SimMetrics([o for o in demo.snapshot() if not silent(o)], seed=7, now=DEFAULT_NOW)


async def test_workloads_show_and_sort_by_the_engines_waste_money(demo: SimCluster) -> None:
    app = make_app(demo, without_silent(demo))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("colon", *"workloads", "enter")
        await settle(pilot)
        waste = app.analysis(WASTE)
        assert waste is not None and isinstance(waste.value, WasteAnalysis)
        report = waste.value.report
        figures = workload_waste(report.workloads, report.findings)
        table = app.screen.query_one("#main", ResourceTable)
        assert "WASTE $" in [str(c.label) for c in table.columns.values()]
        # two demo workloads: the engine's figure, and the figure itself (pinned)
        for key, shown in (("research/dpo-finetune", "$4.68"), ("ml-batch/dlrm-train", "$1.89")):
            fig = figures[key]
            assert fig is not None and fig.money is not None and not fig.unpriced
            assert cell(app, key, "money").strip() == f"${fig.money:,.2f}" == shown
        # no metrics for it in the window: unknown, never $0
        assert figures["/".join(SILENT)] is None
        assert cell(app, "/".join(SILENT), "money").strip() == "—"
        # `$`: the most wasted dollars first, unknown last; again: reversed, unknown still last
        await pilot.press("dollar_sign")
        await settle(pilot)
        order = [str(k) for k in table.row_keys]
        known = {k: v.money for k, v in figures.items() if v is not None and v.money is not None}
        ranked = sorted(known, key=lambda k: -known[k])
        assert order[:2] == ["research/dpo-finetune", "research/llama3-8b-sft"]
        assert [known[k] for k in order[: len(ranked)]] == [known[k] for k in ranked]
        assert order[-1] == "/".join(SILENT)
        await pilot.press("dollar_sign")
        await settle(pilot)
        order = [str(k) for k in table.row_keys]
        assert [known[k] for k in order[: len(ranked)]] == sorted(known.values())
        assert order[-1] == "/".join(SILENT)
