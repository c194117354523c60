"""The demo console as `tftui --demo` wires it: its clock, the simulated metrics that follow it.

`--speed` runs the embedded cluster's clock; the simulated usage must come along with it (it used
to end at the start time, so after a few simulated minutes every "used" figure was `—`), and a
clock that stands still must say so in the header.
"""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from datetime import timedelta
from typing import Any

from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Label

from tftui.cli import build_parser, open_metrics
from tftui.engine.plan import EvictPod
from tftui.sources.ports import ActionError
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW
from tftui.ui.app import TfTuiApp
from tftui.ui.widgets.table import ResourceTable


def demo_ports(*flags: str) -> tuple[ActingSimCluster, Any]:
    """The demo cluster and the metrics `tftui --demo` opens for it."""
    args = build_parser().parse_args(["--demo", *flags])
    cluster = ActingSimCluster(seed=args.seed, nodes=args.nodes, now=DEFAULT_NOW)
    return cluster, open_metrics(args, cluster)


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def used_figures(app: TfTuiApp) -> list[str]:
    table = app.screen.query_one("#main", ResourceTable)
    cells = [table.get_cell(key, "tflops") for key in table.row_keys]
    return [(c.plain if isinstance(c, Text) else str(c)).rsplit("/", 1)[-1].strip() for c in cells]


async def test_usage_keeps_coming_as_the_demo_clock_runs() -> None:
    cluster, metrics = demo_ports()
    app = TfTuiApp(cluster, metrics, clock=cluster.clock, refresh_interval=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "—" not in used_figures(app)
        for _ in range(3):  # 3 h of simulated time, as `--speed 60` gets through in 3 minutes
            cluster.advance(timedelta(hours=1))
            app.action_refresh()
            await settle(pilot)
            assert app.data is not None and app.data.refreshed_at == cluster.now()
            figures = used_figures(app)
            assert figures and "—" not in figures, figures
        assert app.data is not None and "metrics" not in str(
            app.screen.query_one("#header-status", Label).render()
        )


def test_replaced_workers_report_usage_from_their_creation() -> None:
    cluster, metrics = demo_ports()
    now = cluster.now()
    workers = [
        o
        for o in cluster.snapshot()
        if o["kind"] == "Pod"
        and o["metadata"].get("labels", {}).get("tensor-fusion.ai/component") == "worker"
        and o["status"].get("phase") == "Running"
    ]
    before = set(metrics.latest_worker_usage(now))
    for pod in workers:  # the first worker no PDB protects
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        try:
            cluster.apply(EvictPod(ns, name))
        except ActionError:
            continue
        break
    assert (ns, name) in before
    cluster.advance(timedelta(minutes=10))  # grace period, replacement, scheduling, Ready
    later = metrics.latest_worker_usage(cluster.now())
    assert (ns, name) not in later  # the evicted pod has no samples after it is gone
    new = set(later) - before
    assert new and all(k[0] == ns for k in new), new  # its replacement reports usage
    rows = list(metrics.rows("tf_gpu_usage", cluster.now() - timedelta(minutes=2), cluster.now()))
    assert rows and max(r["ts"] for r in rows) >= now + timedelta(minutes=9)


def header_text(app: TfTuiApp) -> str:
    return " ".join(str(label.render()) for label in app.screen.query("#header-main Label") if label.display)


async def test_header_says_the_demo_clock_stands_still_or_runs() -> None:
    cluster, metrics = demo_ports()
    app = TfTuiApp(cluster, metrics, clock=cluster.clock, refresh_interval=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "refreshed 12:00:00 UTC" in header_text(app)
        assert "clock paused" in header_text(app)  # frozen on purpose, not a stuck refresh
    cluster, metrics = demo_ports("--speed", "60")
    app = TfTuiApp(cluster, metrics, clock=cluster.clock, refresh_interval=None, sim_speed=60)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "clock ×60" in header_text(app) and "paused" not in header_text(app)
