"""Screenshots of the metrics screens: waste and a finding, the workload detail with its 24 h
sparklines, alerts, and the status line when the metrics store is unreachable.

Same demo and determinism kit as `test_screens.py` (the waste window is 1 h, see `ANALYSIS`); the
SVGs live in `snapshots/test_metrics_screens/`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.snapshots.conftest import SIZES, RunBefore, demo_app, steps
from tftui.model.metrics import AlertResult, AlertRow, Step1
from tftui.model.usage import GPUUsage, WorkerUsage
from tftui.sources.ports import SourceError
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


SCREENS: dict[str, RunBefore] = {
    "waste": steps(view="waste"),
    "finding": steps("enter", view="waste"),  # the largest finding: an empty node with three fixes
    "workload": steps(view="workloads", workload=WORKLOAD),
    "alerts": steps(view="alerts"),
    "unreachable": steps(),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_metrics_view(
    screen: str, size: tuple[int, int], snap_compare: Any, make_app: Callable[[], TfTuiApp]
) -> None:
    app = demo_app(UnreachableStore()) if screen == "unreachable" else make_app()
    assert snap_compare(app, run_before=SCREENS[screen], terminal_size=size)
