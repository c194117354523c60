"""Helpers for the console's metrics-screen tests: a GreptimeDB-like store over the simulator that can
be taken down or held (and counts its queries), a port without step-1 queries, the app on the demo's
clock with short analysis windows, the demo's console data and alert replay, and text readers."""

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
from textual.widgets import Label, Static

from tftui.model.metrics import AlertResult, AlertRow, Step1
from tftui.model.usage import GPUUsage, WorkerUsage
from tftui.sources.ports import SourceError
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.step1 import SimStep1
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp
from tftui.ui.load.analysis import AlertsAnalysis, AnalysisSettings, compute_alerts
from tftui.ui.load.data import ConsoleData, load
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
