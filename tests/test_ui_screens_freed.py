"""A view switched away from is freed: nothing of the console keeps a closed screen (and its
table's rows) alive."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

import gc
import weakref

from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp
from tftui.ui.screens.resource import GpusScreen, NodesScreen, ResourceScreen
from tftui.ui.widgets.table import ResourceTable


async def test_switched_away_views_are_freed(demo: SimCluster, metrics: SimMetrics) -> None:
    app = TfTuiApp(demo, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None)
    closed: list[weakref.ref[ResourceScreen]] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for view, cls in (("gpus", GpusScreen), ("nodes", NodesScreen)) * 3:
            before = app.screen
            await pilot.press("colon", *view, "enter")
            await pilot.pause()
            assert isinstance(app.screen, cls)
            if isinstance(before, ResourceScreen):
                closed.append(weakref.ref(before))
        await pilot.pause()
        gc.unfreeze()  # what a refresh built is frozen out of the collector (`gcpause.YoungFreezer`)
        gc.collect()
        # the screen closed last may still be held by Textual's own bookkeeping of its removal
        alive = [ref() for ref in closed[:-1] if ref() is not None]
        assert len(closed) == 6
        assert alive == []


async def test_a_closed_view_lets_its_rows_go(demo: SimCluster, metrics: SimMetrics) -> None:
    """A closed screen may wait for the cyclic collector (frozen out of it while a refresh ran):
    it waits without its rows and cached cells."""
    app = TfTuiApp(demo, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("colon", *"gpus", "enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, GpusScreen)
        table = screen.query_one("#main", ResourceTable)
        assert table.row_count > 0 and screen.shown_tables
        await pilot.press("colon", *"nodes", "enter")
        await pilot.pause()
        assert isinstance(app.screen, NodesScreen)
        assert table.row_count == 0 and not table._data and not table._shown
        assert not screen.shown_tables and not screen._built and not screen._row_caches
