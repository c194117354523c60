"""Helpers for the console's operation-screen tests: the writable demo cluster (a fresh one per test)
and its metrics, the app on the demo's clock, a read-only cluster over a fixed object list, and a
reader for the text a Static shows."""

from __future__ import annotations

import io
import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from typing import Any

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static

from tftui.engine.state import ClusterState
from tftui.model.dump import validate_items
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp

RELEASED = ["dev-4090-03", "dev-4090-04"]  # what a forced round of demo-dev releases at DEFAULT_NOW


@pytest.fixture(scope="module")
def metrics() -> SimMetrics:
    return SimMetrics(SimCluster(seed=7, nodes=40, now=DEFAULT_NOW).snapshot(), seed=7, now=DEFAULT_NOW)


@pytest.fixture
def demo() -> ActingSimCluster:
    return ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW)


def state_of(cluster: Any) -> ClusterState:
    return ClusterState.build(validate_items(cluster.snapshot()))


def make_app(cluster: Any, metrics: SimMetrics | None, *, read_only: bool = False) -> TfTuiApp:
    return TfTuiApp(cluster, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None, read_only=read_only)


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def text_of(app: TfTuiApp, selector: str, width: int = 400) -> str:
    """The plain text a Static shows (Rich renderables rendered wide, so nothing is cut)."""
    content = app.screen.query_one(selector, Static).content
    if isinstance(content, str):
        return content
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(content)
    return console.export_text()


class ObjectsCluster:
    """A read-only ClusterPort over a fixed object list (a dump, in effect)."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    def describe(self) -> str:
        return "dump test.json"

    def snapshot(self) -> list[dict[str, Any]]:
        return list(self.objects)
