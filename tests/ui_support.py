"""Helpers for the console behaviour tests (test_ui.py, test_ui_refresh.py): the app on the demo's
clock with short analysis windows, a cluster whose reads fail on demand, readers for the main table
and its cells, and the `:` command."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

import threading
from datetime import timedelta
from typing import Any

from rich.console import RenderableType
from rich.text import Text
from textual.pilot import Pilot

from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.ui.app import TfTuiApp
from tftui.ui.load.analysis import AnalysisSettings
from tftui.ui.screens.resource import ResourceScreen
from tftui.ui.widgets.table import ResourceTable

POOLS = ["demo-dev", "demo-inference", "demo-isolation", "demo-training"]


class FlakyCluster:
    """A ClusterPort whose next reads fail (or return other objects) on demand; records threads."""

    def __init__(self, inner: SimCluster) -> None:
        self.inner = inner
        self.error: Exception | None = None
        self.objects: list[dict[str, Any]] | None = None
        self.threads: list[str] = []

    def describe(self) -> str:
        return "flaky"

    def snapshot(self) -> list[dict[str, Any]]:
        self.threads.append(threading.current_thread().name)
        if self.error is not None:
            raise self.error
        return list(self.objects) if self.objects is not None else self.inner.snapshot()


FAST = AnalysisSettings(waste_window=timedelta(hours=1), history_span=timedelta(hours=1))
"""Short windows: the workload detail computes its history and the diagnosis as soon as it opens."""


def make_app(cluster: Any, metrics: Any) -> TfTuiApp:
    return TfTuiApp(cluster, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None, analysis=FAST)


async def settle(pilot: Pilot[None]) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


def screen(app: TfTuiApp) -> ResourceScreen:
    current = app.screen
    assert isinstance(current, ResourceScreen), current
    return current


def main_table(app: TfTuiApp) -> ResourceTable:
    return screen(app).query_one("#main", ResourceTable)


def plain(value: RenderableType) -> str:
    if isinstance(value, str):
        return value
    assert isinstance(value, Text), value
    return value.plain


def cell_text(table: ResourceTable, key: str, column: str) -> str:
    return plain(table.get_cell(key, column))


async def command(pilot: Pilot[None], text: str) -> None:
    await pilot.press("colon", *text, "enter")
    await pilot.pause()
