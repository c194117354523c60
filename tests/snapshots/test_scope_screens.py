"""Screenshots of the k9s scoping screens and the waste-hunting states: `:ns`, a view scoped to a
namespace, `:ctx` on the demo (one context), `:xray` with a branch open, the pools sorted by waste $
and the nodes by used %, and the pools view without metrics (`—`, never 0).

Same demo and determinism kit as `test_screens.py`; the SVGs live in `snapshots/test_scope_screens/`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.snapshots.conftest import ANALYSIS, SIZES, fixed_clock, settle
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp


def steps(
    *presses: str, view: str | None = None, command: str | None = None
) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, TfTuiApp)
        await settle(pilot)
        if command is not None:
            assert app.run_command(command)
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


SCREENS: dict[str, tuple[Callable[[Pilot[Any]], Awaitable[None]], bool]] = {
    "ns": (steps(view="ns"), True),
    "ns-scoped-workloads": (steps(command="ns speech", view="workloads"), True),
    "ctx": (steps(view="ctx"), True),
    "xray": (steps("enter", view="xray"), True),
    "pools-sorted-money": (steps("dollar_sign"), True),
    "nodes-sorted-used": (steps("U", view="nodes"), True),
    "pools-no-metrics": (steps(), False),
}
"""name → (steps, whether the console has the demo's metrics)."""


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_scope_view(screen: str, size: tuple[int, int], snap_compare: Any, demo_metrics: SimMetrics) -> None:
    run_before, with_metrics = SCREENS[screen]
    app = TfTuiApp(
        ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW),
        demo_metrics if with_metrics else None,
        clock=fixed_clock,
        refresh_interval=None,
        analysis=ANALYSIS,
    )
    assert snap_compare(app, run_before=run_before, terminal_size=size)
