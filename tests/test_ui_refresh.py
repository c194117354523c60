"""Console refresh driven through Textual's pilot, against the embedded demo cluster: the refresh
worker (thread, typed messages, diff updates, periodic ticks that never overlap and back off) and
degraded sources (metrics down, cluster down, invalid objects, errors with credentials)."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

import threading
from datetime import datetime, timedelta
from typing import Any

from textual.message import Message
from textual.widgets import Label

from tests.ui_support import POOLS, FlakyCluster, cell_text, command, main_table, make_app, settle
from tftui.model.usage import GPUUsage, WorkerUsage
from tftui.sources.ports import SourceError
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import DataLoaded, LoadFailed, TfTuiApp


class BrokenMetrics:
    """A MetricsPort that is down."""

    def latest_gpu_usage(
        self, now: datetime, lookback: timedelta = timedelta(minutes=5)
    ) -> dict[str, GPUUsage]:
        raise SourceError("greptime: connection refused")

    def latest_worker_usage(
        self, now: datetime, lookback: timedelta = timedelta(minutes=5)
    ) -> dict[tuple[str, str], WorkerUsage]:
        raise SourceError("greptime: connection refused")

    def rows(self, table: str, start: datetime, end: datetime) -> Any:
        raise SourceError("greptime: connection refused")


def header_status(app: TfTuiApp) -> str:
    label = app.screen.query_one("#header-status", Label)
    return str(label.render()) if label.display else ""


# -- refresh and degraded sources ----------------------------------------------------------------


async def test_refresh_runs_in_a_thread_and_posts_typed_messages(
    demo: SimCluster, metrics: SimMetrics
) -> None:
    cluster = FlakyCluster(demo)
    seen: list[Message] = []
    app = make_app(cluster, metrics)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+r")
        await settle(pilot)
    # the first refresh shows the state first, then metrics and operations; later ones post once
    loaded = [m.data.pending for m in seen if isinstance(m, DataLoaded)]
    assert loaded == [("metrics", "operations"), (), ()]
    assert cluster.threads and threading.main_thread().name not in cluster.threads


async def test_unchanged_refresh_touches_no_cell_and_keeps_the_cursor(
    demo: SimCluster, metrics: SimMetrics
) -> None:
    cluster = FlakyCluster(demo)
    app = make_app(cluster, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await command(pilot, "nodes")
        table = main_table(app)
        await pilot.press("down", "down", "down")
        key = table.cursor_key
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert table.last_changes == 0
        assert table.cursor_key == key

        # the node above the cursor disappears: its row goes, the cursor stays on its node
        objects = [o for o in demo.snapshot() if o["metadata"]["name"] != table.row_keys[0]]
        removed = table.row_keys[0]
        cluster.objects = objects
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert removed not in table.row_keys
        assert table.cursor_key == key
        assert 0 < table.last_changes < 10


async def test_periodic_refresh_never_overlaps_and_backs_off(demo: SimCluster, metrics: SimMetrics) -> None:
    cluster = FlakyCluster(demo)
    app = TfTuiApp(cluster, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=0.1)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app._refresh_interval == 2.0  # clamped like k9s
        assert app._timer is not None
        app._timer.pause()  # the ticks below are driven by hand; a slow machine must not add one
        calls = len(cluster.threads)
        app._tick()
        app._tick()  # the first tick's worker is still running: no second one
        await settle(pilot)
        assert len(cluster.threads) == calls + 1
        cluster.error = SourceError("down")
        for _ in range(3):  # three failures in a row: skip 3 ticks before the next attempt
            await pilot.press("ctrl+r")
            await settle(pilot)
        calls = len(cluster.threads)
        for _ in range(3):
            app._tick()
        await settle(pilot)
        assert len(cluster.threads) == calls
        app._tick()
        await settle(pilot)
        assert len(cluster.threads) == calls + 1


async def test_metrics_failure_keeps_allocation_and_says_why(demo: SimCluster) -> None:
    app = make_app(demo, BrokenMetrics())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "metrics: greptime: connection refused" in header_status(app)
        table = main_table(app)
        assert table.row_keys == POOLS
        gauge = cell_text(table, "demo-training", "tflops")
        assert gauge.rstrip().endswith("/   —")  # used unknown, not 0
        assert "▒" in gauge  # allocation still drawn


async def test_an_unworded_error_shows_no_credential(demo: SimCluster, metrics: SimMetrics) -> None:
    """An error no source worded (a client quoting the URL or conninfo it used) reaches the header
    and a notification with its credentials masked."""
    cluster = FlakyCluster(demo)
    app = make_app(cluster, metrics)
    async with app.run_test(size=(160, 40), notifications=True) as pilot:
        await settle(pilot)
        cluster.error = KeyError("https://admin:s3cret-pw@api:6443 password=conninfo-pw")
        await pilot.press("ctrl+r")
        await settle(pilot)
        status = header_status(app)
        app.notify("write failed: postgresql://tf:s3cret-pw@greptime:4003/public", severity="error")
        await settle(pilot)
        shown = [status, *(n.message for n in app._notifications)]
        assert "KeyError" in status and "api:6443" in status, status
        assert any("greptime:4003/public" in text for text in shown), shown
        assert not any("s3cret-pw" in text or "conninfo-pw" in text for text in shown), shown


async def test_no_metrics_source_is_stated(demo: SimCluster) -> None:
    app = make_app(demo, None)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "metrics: none configured" in header_status(app)


async def test_cluster_failure_keeps_the_last_state(demo: SimCluster, metrics: SimMetrics) -> None:
    cluster = FlakyCluster(demo)
    seen: list[Message] = []
    app = make_app(cluster, metrics)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await settle(pilot)
        before = app.data
        cluster.error = SourceError("apiserver: connection refused")
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert any(isinstance(m, LoadFailed) for m in seen)
        assert app.data is before
        status = header_status(app)
        assert "cluster: apiserver: connection refused (showing 12:00:00 UTC)" in status
        assert main_table(app).row_keys == POOLS
        # recovery clears the error
        cluster.error = None
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert "cluster:" not in header_status(app)


async def test_cluster_down_at_start_and_invalid_objects(demo: SimCluster, metrics: SimMetrics) -> None:
    cluster = FlakyCluster(demo)
    cluster.error = ConnectionRefusedError(111, "Connection refused")
    app = make_app(cluster, metrics)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.data is None
        assert "cluster: ConnectionRefusedError" in header_status(app)
        assert "no data" in str(app.screen.query_one("#header-time", Label).render())
        assert "flaky" in str(app.screen.query_one("#header-source", Label).render())
        cluster.error = None
        cluster.objects = [{"kind": "GPU", "apiVersion": "tensor-fusion.ai/v1", "metadata": {}}]
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert app.data is None
        assert "cluster: flaky: GPU <no name>" in header_status(app)
