"""Views switched away from: the big root views are kept mounted and shown again as they were
(`app.KEPT_VIEWS`), rendering nothing while aside; every other closed view is freed, rows and all."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

import gc
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from textual.pilot import Pilot

from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import KEPT_VIEWS, TfTuiApp
from tftui.ui.screens.ops import CompactionScreen, EventsScreen
from tftui.ui.screens.resource import GpusScreen, NodesScreen, PoolsScreen, ResourceScreen
from tftui.ui.widgets.table import ResourceTable


@asynccontextmanager
async def opened(
    demo: SimCluster, metrics: SimMetrics, width: int = 120
) -> AsyncIterator[tuple[TfTuiApp, Pilot[None]]]:
    """The demo console with its first refresh done (no timed refreshes)."""
    app = TfTuiApp(demo, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None)
    async with app.run_test(size=(width, 40)) as pilot:
        await app.workers.wait_for_complete()
        yield app, pilot


async def view(pilot: Pilot[None], name: str) -> None:
    await pilot.press("colon", *name, "enter")
    await pilot.pause()


async def refreshed(app: TfTuiApp, pilot: Pilot[None]) -> None:
    seq = app.data_seq
    app.action_refresh()
    await app.workers.wait_for_complete()
    await pilot.pause()
    assert app.data_seq > seq


async def test_switched_away_views_are_freed(demo: SimCluster, metrics: SimMetrics) -> None:
    app = TfTuiApp(demo, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None)
    closed: list[weakref.ref[ResourceScreen]] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert {"compaction", "events"}.isdisjoint(KEPT_VIEWS)
        for name, cls in (("compaction", CompactionScreen), ("events", EventsScreen)) * 3:
            before = app.screen
            await view(pilot, name)
            assert isinstance(app.screen, cls)
            if isinstance(before, (CompactionScreen, EventsScreen)):
                closed.append(weakref.ref(before))
        await pilot.pause()
        gc.unfreeze()  # what a refresh built is frozen out of the collector (`gcpause.YoungFreezer`)
        gc.collect()
        # the screen closed last may still be held by Textual's own bookkeeping of its removal
        alive = [ref() for ref in closed[:-1] if ref() is not None]
        assert len(closed) == 5
        assert alive == []


async def test_a_closed_view_lets_its_rows_go(demo: SimCluster, metrics: SimMetrics) -> None:
    """A closed screen may wait for the cyclic collector (frozen out of it while a refresh ran):
    it waits without its rows and cached cells."""
    async with opened(demo, metrics) as (app, pilot):
        await view(pilot, "compaction")
        screen = app.screen
        assert isinstance(screen, CompactionScreen)
        table = screen.query_one("#pools", ResourceTable)
        assert table.row_count > 0 and screen.shown_tables
        await view(pilot, "nodes")
        assert isinstance(app.screen, NodesScreen)
        assert table.row_count == 0 and not table._data and not table._shown
        assert not screen.shown_tables and not screen._built and not screen._row_caches


async def test_a_kept_view_comes_back_as_left_and_up_to_date(demo: SimCluster, metrics: SimMetrics) -> None:
    async with opened(demo, metrics) as (app, pilot):
        await view(pilot, "gpus")
        gpus = app.screen
        assert isinstance(gpus, GpusScreen)
        table = gpus.query_one("#main", ResourceTable)
        table.move_cursor(row=3, animate=False)
        await pilot.press("shift+n")  # sort by name: kept with the view
        await pilot.pause()
        sort = (gpus.sort_column, gpus.sort_reverse)
        assert sort[0] is not None
        shown_seq = gpus._built["main"][0]

        await view(pilot, "nodes")
        await refreshed(app, pilot)  # while the GPUs are aside: they render nothing, only note it
        assert gpus.is_attached and gpus._stale and gpus._built["main"][0] == shown_seq

        await view(pilot, "gpus")
        assert not gpus._stale
        assert gpus._built["main"][0] == app.data_seq  # the refresh missed while aside, shown
        assert (gpus.sort_column, gpus.sort_reverse) == sort and table.row_count > 0
        assert app.screen is gpus


async def test_a_context_switch_drops_the_kept_views(demo: SimCluster, metrics: SimMetrics) -> None:
    async with opened(demo, metrics) as (app, pilot):
        pools = app.screen
        assert isinstance(pools, PoolsScreen)
        await view(pilot, "gpus")
        gpus = weakref.ref(app.screen)
        await view(pilot, "pools")
        assert app.screen is pools  # kept: the same screen again
        app.switch_view("pools", fresh=True)  # what `on_context_switched` does
        await pilot.pause()
        assert isinstance(app.screen, PoolsScreen) and app.screen is not pools
        assert not pools.is_attached
        await view(pilot, "nodes")
        await view(pilot, "pools")
        assert app.screen is not pools  # the new pools view is the kept one now
        gc.unfreeze()
        gc.collect()
        assert gpus() is None


async def test_a_kept_view_follows_a_resize_made_while_aside(demo: SimCluster, metrics: SimMetrics) -> None:
    async with opened(demo, metrics, width=200) as (app, pilot):
        await view(pilot, "gpus")
        gpus = app.screen
        assert isinstance(gpus, GpusScreen) and gpus.has_class("-wide")
        await view(pilot, "nodes")
        await pilot.resize_terminal(90, 40)
        await pilot.pause()
        await view(pilot, "gpus")
        assert gpus.has_class("-narrow") and not gpus.has_class("-wide")
        assert app.screen is gpus
