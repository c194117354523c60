"""Screenshots of the k9s scoping screens and the waste-hunting states: `:ns`, a view scoped to a
namespace, `:ctx` on the demo (one context), `:xray` with a branch open, the pools sorted by waste $,
the nodes by used %, the workloads by the allocated − used gap, and the pools view
without metrics (`—`, never 0); each also in the light theme (at 120×40 only). The workloads sorted
by waste $ (dark only). And the header's clock word: the
demo's clock standing still (`clock paused`) and running (`--speed 60`: `clock ×60`).

Same demo and determinism kit as `test_screens.py`; the SVGs live in `snapshots/test_scope_screens/`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.snapshots.conftest import RunBefore, cases, demo_app, steps
from tftui.config import ConsoleConfig
from tftui.sources.sim.usage import SimMetrics


@dataclass(frozen=True)
class Case:
    run_before: RunBefore
    metrics: bool = True  # whether the console has the demo's metrics
    light: bool = False
    sim_speed: float = 0.0


SCREENS: dict[str, Case] = {
    "ns": Case(steps(view="ns")),
    "ns-scoped-workloads": Case(steps(command="ns speech", view="workloads")),
    "ctx": Case(steps(view="ctx")),
    "xray": Case(steps("enter", view="xray")),
    "pools-sorted-money": Case(steps("dollar_sign")),
    "nodes-sorted-used": Case(steps("U", view="nodes")),
    "pools-no-metrics": Case(steps(), metrics=False),
}
"""The dark-theme screens (their names and SVGs predate the light ones)."""

NEW: dict[str, Case] = {
    # shift+x: the largest allocated − used gap first (of the request: the least used share)
    "workloads-sorted-gap": Case(steps("X", view="workloads")),
    # `/` in :xray: one node under its pool
    "xray-filtered": Case(steps("slash", *"dev-4090-05", "enter", view="xray")),
    "clock-paused": Case(steps()),
    "clock-running": Case(steps(), sim_speed=60.0),
}
SCREENS |= NEW
SCREENS |= {
    f"{name}-light": Case(c.run_before, c.metrics, light=True, sim_speed=c.sim_speed)
    for name, c in SCREENS.items()
    if not name.startswith("clock-")
}
SCREENS |= {
    # `$` on the workloads view: the most wasted dollars first (WASTE $ from 120 columns; at 80
    # the view has no room for it and `$` says so)
    "workloads-sorted-money": Case(steps("dollar_sign", view="workloads")),
}


@pytest.mark.parametrize(("screen", "size"), cases(list(SCREENS), lambda name: SCREENS[name].light))
def test_scope_view(screen: str, size: tuple[int, int], snap_compare: Any, demo_metrics: SimMetrics) -> None:
    case = SCREENS[screen]
    app = demo_app(
        demo_metrics if case.metrics else None,
        config=ConsoleConfig(theme="light") if case.light else None,
        sim_speed=case.sim_speed,
    )
    assert snap_compare(app, run_before=case.run_before, terminal_size=size)
