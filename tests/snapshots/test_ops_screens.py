"""Screenshots of the operation screens (placement, compaction, defrag, events), the confirm dialogs
(manual compaction, autoscale on/off) and the placement-mode dialog.

Same demo and determinism kit as `test_screens.py`; the SVGs live in `snapshots/test_ops_screens/`.
The events screen is taken after a confirmed manual compaction, so it shows what the runtime did.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.snapshots.conftest import SIZES, settle
from tftui.ui.app import TfTuiApp


def steps(
    *presses: str,
    view: str | None = None,
    push: Callable[[], Any] | None = None,
    then_view: str | None = None,
) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """A `run_before`: wait for data, open a view (or push a screen), press keys, open `then_view`."""

    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, TfTuiApp)
        await settle(pilot)
        if view is not None:
            assert app.switch_view(view)
            await settle(pilot)
        if push is not None:
            await app.push_screen(push())
            await settle(pilot)
        if presses:
            await pilot.press(*presses)
            await settle(pilot)
        if then_view is not None:
            assert app.switch_view(then_view)
            await settle(pilot)
        app.clear_notifications()  # toasts time out on the wall clock
        await pilot.pause()

    return run_before


SCREENS: dict[str, Callable[[Pilot[Any]], Awaitable[None]]] = {
    # `p` on the first pool row (demo-dev): the form with its defaults and the preview per mode
    "place": steps("p"),
    "compaction": steps(view="compaction"),
    # demo-dev's window is tomorrow: its first step is simulated on today's cluster
    "defrag": steps(view="defrag"),
    "confirm": steps("c"),
    # `m` on demo-dev, then tab to the first other mode: what the change does (behaviour P4)
    "mode": steps("m", "tab"),
    # a confirmed manual compaction (c, tab, enter), then `:events`: events and journal lines
    "events": steps("c", "tab", "enter", then_view="events"),
    # `a` on the first workload (autoscaling on): the patch and its pod-template annotation
    "autoscale": steps("a", view="workloads"),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_ops_view(
    screen: str, size: tuple[int, int], snap_compare: Any, make_app: Callable[[], TfTuiApp]
) -> None:
    assert snap_compare(make_app(), run_before=SCREENS[screen], terminal_size=size)
