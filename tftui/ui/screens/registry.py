"""The root views `:` switches to, by canonical name (aliases live in `viewnames.VIEW_ALIASES`)."""

from __future__ import annotations

from collections.abc import Callable

from tftui.ui.screens.base import ResourceScreen
from tftui.ui.screens.metrics import AlertsScreen, WasteScreen
from tftui.ui.screens.ops import CompactionScreen, DefragScreen, EventsScreen
from tftui.ui.screens.placement import PlacementScreen
from tftui.ui.screens.resource import GpusScreen, NodesScreen, PoolsScreen, WorkloadsScreen
from tftui.ui.screens.scopes import ContextsScreen, NamespacesScreen
from tftui.ui.screens.xray import XrayScreen


def _whatif() -> ResourceScreen:
    """The what-if screen, imported when first opened: it brings the what-if runtime and the
    acting simulator (about 0.15 CPU-s), which the console's start does not need."""
    from tftui.ui.screens.whatif import WhatIfScreen

    return WhatIfScreen()


ROOT_VIEWS: dict[str, Callable[[], ResourceScreen]] = {
    "pools": PoolsScreen,
    "nodes": NodesScreen,
    "gpus": GpusScreen,
    "workloads": WorkloadsScreen,
    "place": PlacementScreen,
    "compaction": CompactionScreen,
    "defrag": DefragScreen,
    "events": EventsScreen,
    "waste": WasteScreen,
    "alerts": AlertsScreen,
    "whatif": _whatif,
    "ns": NamespacesScreen,
    "ctx": ContextsScreen,
    "xray": XrayScreen,
}
