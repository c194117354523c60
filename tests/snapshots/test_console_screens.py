"""Screenshots of the screens and dialogs added with the action registry: the worker list, the
YAML and describe views, warnings, the command palette, a sorted and marked table, the light
theme and a read-only production context.

Same demo and determinism kit as `test_screens.py`; the SVGs live in `snapshots/test_console_screens/`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.snapshots.conftest import ANALYSIS, SIZES, fixed_clock, settle
from tftui.config import ConsoleConfig
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp


def steps(*presses: str, view: str | None = None) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, TfTuiApp)
        await settle(pilot)
        if view is not None:
            assert app.switch_view(view)
            await settle(pilot)
        if presses:
            await pilot.press(*presses)
            await settle(pilot)
        app.clear_notifications()  # toasts time out on the wall clock
        await pilot.pause()

    return run_before


SCREENS: dict[str, tuple[Callable[[Pilot[Any]], Awaitable[None]], ConsoleConfig | None, bool]] = {
    # enter on the first GPU: the workers holding it
    "workers": (steps("down", "down", "enter", view="gpus"), None, False),
    "yaml": (steps("y"), None, False),
    "describe": (steps("d", view="nodes"), None, False),
    "warnings": (steps("w"), None, False),
    "palette": (steps("ctrl+p", *"comp"), None, False),
    # sorted by TFLOPS allocation (descending), two rows marked
    "sorted-marked": (steps("shift+t", "shift+t", "space", "space", view="nodes"), None, False),
    "light": (steps(view="nodes"), ConsoleConfig(theme="light"), False),
    "production-read-only": (steps(), ConsoleConfig(production=("dem*",)), True),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_console_view(screen: str, size: tuple[int, int], snap_compare: Any, demo_metrics: SimMetrics) -> None:
    run_before, config, read_only = SCREENS[screen]
    app = TfTuiApp(
        ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW),
        demo_metrics,
        clock=fixed_clock,
        refresh_interval=None,
        analysis=ANALYSIS,
        read_only=read_only,
        config=config,
    )
    assert snap_compare(app, run_before=run_before, terminal_size=size)
