"""24 h sparklines (allocated vs used TFLOPS) in a node's and a GPU's detail, as workloads have."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from datetime import timedelta
from typing import Any

from textual.pilot import Pilot

from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp
from tftui.ui.load.analysis import OBJHISTORY, AnalysisSettings
from tftui.ui.load.objhistory import ObjectHistory, subject
from tftui.ui.screens.resource import NodeScreen, WorkersScreen
from tftui.ui.widgets.plain import PlainLabel
from tftui.ui.widgets.spark import ScaledSparkline

SHORT = AnalysisSettings(waste_window=timedelta(hours=1), history_span=timedelta(hours=2))


def make_app(cluster: Any, metrics: Any) -> TfTuiApp:
    return TfTuiApp(cluster, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None, analysis=SHORT)


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(4):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def label(app: TfTuiApp, id_: str) -> str:
    return str(app.screen.query_one(f"#{id_}", PlainLabel).render())


def expected_used(metrics: SimMetrics, app: TfTuiApp, node: str) -> float:
    """The last 15-minute bucket's capacity-weighted compute %, recomputed from the rows."""
    assert app.data is not None
    caps = {g: v.capacity.tflops for g, v in app.data.state.gpus.items()}
    end = app.data.refreshed_at
    start = end - timedelta(minutes=15)
    minutes: dict[Any, list[float]] = {}
    for r in metrics.rows("tf_gpu_usage", end - SHORT.history_span, end):
        if r["node"] == node and r["ts"] >= start:
            acc = minutes.setdefault(r["ts"], [0.0, 0.0])
            acc[0] += r["compute_percentage"] * caps[r["uuid"]]
            acc[1] += caps[r["uuid"]]
    values = [a / c for a, c in minutes.values()]
    return sum(values) / len(values)


async def test_node_detail_draws_allocated_and_used_history(demo: SimCluster, metrics: SimMetrics) -> None:
    node = "inf-l40s-03"
    app = make_app(demo, metrics)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await app.push_screen(NodeScreen(node, trail=("nodes", node)))
        await settle(pilot)
        analysis = app.analysis(OBJHISTORY, subject("GPUNode", node))
        assert analysis is not None and isinstance(analysis.value, ObjectHistory)
        history = analysis.value
        assert history.rows > 0 and history.used[-1] is not None and history.allocated[-1] is not None
        assert abs(history.used[-1] - expected_used(metrics, app, node)) < 1e-6
        alloc_line, used_line = label(app, "hist-alloc-label"), label(app, "hist-used-label")
        assert (
            alloc_line.startswith("TFLOPS allocated") and f"last {history.allocated[-1]:.0f}%" in alloc_line
        )
        assert used_line.startswith("TFLOPS used") and f"last {history.used[-1]:.0f}%" in used_line
        sparks = list(app.screen.query(ScaledSparkline).results())
        assert len(sparks) == 2 and all(s.display and s.ceiling == 100.0 and s.data for s in sparks)


async def test_gpu_detail_has_used_history_and_says_allocation_is_not_stored(
    demo: SimCluster, metrics: SimMetrics
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.data is not None
        gpu = next(g for g in sorted(app.data.state.gpus) if app.data.state.gpus[g].workers)
        await app.push_screen(WorkersScreen("gpu", gpu, trail=("gpus", gpu, "workers")))
        await settle(pilot)
        assert "no per-GPU allocation history" in label(app, "hist-alloc-label")
        assert label(app, "hist-used-label").startswith("TFLOPS used")
        assert not app.screen.query_one("#hist-alloc", ScaledSparkline).display
        assert app.screen.query_one("#hist-used", ScaledSparkline).data


async def test_without_metrics_the_history_says_why_and_at_24_lines_it_gives_way(demo: SimCluster) -> None:
    node = "inf-l40s-03"
    app = make_app(demo, None)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await app.push_screen(NodeScreen(node, trail=("nodes", node)))
        await settle(pilot)
        assert "history unavailable: no metrics source configured" in label(app, "hist-alloc-label")
        assert not app.screen.query_one("#hist-used", ScaledSparkline).display
    app = make_app(demo, None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await app.push_screen(NodeScreen(node, trail=("nodes", node)))
        await settle(pilot)
        assert not app.screen.query_one("#node-history").display
