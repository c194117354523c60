"""Screenshots of the operation screens (placement, compaction, defrag, events), the confirm dialogs
(manual compaction, autoscale on/off) and the placement-mode dialog.

Same demo and determinism kit as `test_screens.py`; the SVGs live in `snapshots/test_ops_screens/`.
The events screen is taken after a confirmed manual compaction, so it shows what the runtime did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.snapshots.conftest import SIZES, RunBefore, steps
from tftui.ui.app import TfTuiApp

SCREENS: dict[str, RunBefore] = {
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
