"""Screenshots of the What-if screen after its comparison finished (table of figures and the chart).

Same demo and determinism kit as `test_screens.py`; the SVGs live in `snapshots/test_whatif_screens/`.
Two policies over the night of demo-dev's defrag campaign (so the lines part at 08:00 UTC); the
simulation runs once and is reused for the three sizes (it is deterministic, and `test_whatif.py`
checks that).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from textual.pilot import Pilot

import tftui.ui.screens.whatif as whatif_ui
from tests.snapshots.conftest import SIZES, settle
from tftui.runtime.whatif import Policy, PolicyResult, SimConfig, compare
from tftui.ui.app import TfTuiApp
from tftui.ui.screens.whatif import WhatIfScreen

_RUNS: dict[str, list[PolicyResult]] = {}


def cached_compare(
    objects: Sequence[dict[str, Any]], policies: Sequence[Policy], start: datetime, cfg: SimConfig
) -> list[PolicyResult]:
    key = ",".join(p.name for p in policies)
    if key not in _RUNS:
        _RUNS[key] = compare(objects, policies, start, cfg)
    return _RUNS[key]


async def open_whatif(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, TfTuiApp)
    await settle(pilot)
    screen = WhatIfScreen(
        policies=("CompactFirst+defrag", "LowLoadFirst+defrag"), duration=timedelta(hours=23), churn=0
    )
    await app.push_screen(screen)
    await settle(pilot)
    assert screen.results is not None
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_whatif_view(
    size: tuple[int, int],
    snap_compare: Any,
    make_app: Callable[[], TfTuiApp],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(whatif_ui, "compare", cached_compare)
    assert snap_compare(make_app(), run_before=open_whatif, terminal_size=size)
