"""Screenshots of the screens and dialogs added with the action registry: the worker list, the
YAML and describe views, warnings, the command palette, a sorted and marked table, the light
theme (at 120×40 only), a read-only production context and a filter being typed.

Same demo and determinism kit as `test_screens.py`; the SVGs live in `snapshots/test_console_screens/`.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.snapshots.conftest import RunBefore, cases, demo_app, steps
from tftui.config import ConsoleConfig
from tftui.sources.sim.usage import SimMetrics

SCREENS: dict[str, tuple[RunBefore, ConsoleConfig | None, bool]] = {
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
    # `/` typed on the nodes: the prompt with its text, the rows it keeps, the view's keys dimmed
    "filtering": (steps("slash", *"a100", view="nodes"), None, False),
}


@pytest.mark.parametrize(("screen", "size"), cases(list(SCREENS), lambda name: name == "light"))
def test_console_view(
    screen: str, size: tuple[int, int], snap_compare: Any, demo_metrics: SimMetrics
) -> None:
    run_before, config, read_only = SCREENS[screen]
    app = demo_app(demo_metrics, config=config, read_only=read_only)
    assert snap_compare(app, run_before=run_before, terminal_size=size)
