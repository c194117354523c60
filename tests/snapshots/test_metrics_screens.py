"""Screenshots of the metrics screens: waste and a finding, the workload detail with its 24 h
sparklines, alerts, and the status line when the metrics store is unreachable.

Same demo and determinism kit as `test_screens.py` (the waste window is 1 h, see `ANALYSIS`); the
SVGs live in `snapshots/test_metrics_screens/`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.snapshots.conftest import ANALYSIS, SIZES, fixed_clock, settle
from tftui.model.metrics import AlertResult, AlertRow, Step1
from tftui.model.usage import GPUUsage, WorkerUsage
from tftui.sources.ports import SourceError
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW
from tftui.ui.app import TfTuiApp

WORKLOAD = "ml-serving/bert-ner"  # 3 workers with a full day of history, over-requested
STORE = "metrics.example:4003/public"


class UnreachableStore:
    """A GreptimeDB-like store (both ports) that refuses every connection, as `GreptimeMetrics` says it."""

    def describe(self) -> str:
        return f"greptime {STORE}"

    def _fail(self) -> SourceError:
        return SourceError(
            f"metrics store {STORE}: cannot connect (connection refused) — is GreptimeDB running and "
            "its PostgreSQL port (default 4003) reachable from here?"
        )

    def latest_gpu_usage(
        self, now: datetime, lookback: timedelta = timedelta(minutes=5)
    ) -> dict[str, GPUUsage]:
        raise self._fail()

    def latest_worker_usage(
        self, now: datetime, lookback: timedelta = timedelta(minutes=5)
    ) -> dict[tuple[str, str], WorkerUsage]:
        raise self._fail()

    def rows(self, table: str, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        raise self._fail()

    def step1(self, window: timedelta, now: datetime, gpu_capacity: Any) -> Step1:
        raise self._fail()

    def alert_rows(self, rule: str, now: datetime) -> list[AlertRow]:
        raise self._fail()

    def alert_history(self, rule: str, times: Sequence[datetime]) -> list[AlertResult]:
        raise self._fail()


def steps(
    view: str = "pools", *presses: str, workload: str | None = None
) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """A `run_before`: wait for data, open a view (or a workload), press keys, wait for the analyses."""

    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, TfTuiApp)
        await settle(pilot)
        if view != "pools":
            assert app.switch_view(view)
            await settle(pilot)
        if workload is not None:
            app.open_workload(workload)
            await settle(pilot)
        if presses:
            await pilot.press(*presses)
            await settle(pilot)
        app.clear_notifications()
        await pilot.pause()

    return run_before


SCREENS: dict[str, Callable[[Pilot[Any]], Awaitable[None]]] = {
    "waste": steps("waste"),
    "finding": steps("waste", "enter"),  # the largest finding: an empty node with three fixes
    "workload": steps("workloads", workload=WORKLOAD),
    "alerts": steps("alerts"),
    "unreachable": steps("pools"),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_metrics_view(
    screen: str, size: tuple[int, int], snap_compare: Any, make_app: Callable[[], TfTuiApp]
) -> None:
    if screen == "unreachable":
        cluster = ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW)
        app = TfTuiApp(
            cluster, UnreachableStore(), clock=fixed_clock, refresh_interval=None, analysis=ANALYSIS
        )
    else:
        app = make_app()
    assert snap_compare(app, run_before=SCREENS[screen], terminal_size=size)
