"""The refresh thread builds the tables of the screen on show (`screens.prebuild`); the render takes
them only when they were built from exactly what it would build from, else builds as before.
Either way the table shows the rows of the data on screen, filtered as the operator typed."""

from __future__ import annotations

import gc
from typing import Any

from textual.pilot import Pilot

from tests.test_refresh_reuse import Objects as ReuseObjects
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.ui.app import TfTuiApp
from tftui.ui.render.nodeviews import gpus_table, nodes_table
from tftui.ui.render.tableops import plain
from tftui.ui.render.views import Gauges, rendered
from tftui.ui.screens.base import ResourceScreen
from tftui.ui.screens.prebuild import Prebuilding
from tftui.ui.screens.resource import GpusScreen, NodesScreen
from tftui.ui.widgets.table import ResourceTable


class Objects(ReuseObjects):
    """A ClusterPort over a list the test changes copy-on-write (and can drop a node from)."""

    def drop_node(self) -> str:
        i = next(i for i, o in enumerate(self.objects) if o.get("kind") == "GPUNode")
        name: str = self.objects.pop(i)["metadata"]["name"]
        return name


def taken(monkeypatch: Any) -> list[bool]:
    """Whether each render found its table prebuilt."""
    out: list[bool] = []
    take = Prebuilding.take_prebuilt

    def recording(self: Any, *args: Any) -> Any:
        table = take(self, *args)
        out.append(table is not None)
        return table

    monkeypatch.setattr(Prebuilding, "take_prebuilt", recording)
    return out


async def refresh(app: TfTuiApp, pilot: Pilot[None]) -> None:
    await pilot.press("ctrl+r")
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


async def on_nodes(app: TfTuiApp, pilot: Pilot[None]) -> NodesScreen:
    await app.workers.wait_for_complete()
    await pilot.pause()
    assert app.switch_view("nodes")
    await pilot.pause()
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, NodesScreen)
    return screen


def shown_rows(table: ResourceTable) -> dict[str, list[str]]:
    return {key: [plain(c).strip() for c in table.get_row(key)] for key in table.row_keys}


def fresh_rows(
    app: TfTuiApp, screen: ResourceScreen, needle: str = "", build: Any = nodes_table
) -> dict[str, list[str]]:
    """The rows a build from scratch (no row cache, no prebuild) gives for the data on screen
    (`build`: the view's table builder)."""
    assert app.data is not None and screen._layout is not None
    table = build(app.data, Gauges(screen._layout))
    return {
        r.key: [plain(rendered(r.cells.get(c.key, ""))).strip() for c in table.columns]
        for r in table.rows
        if needle in r.key
    }


def make() -> tuple[Objects, TfTuiApp]:
    cluster = Objects(generate_objects(nodes=30, gpus_per_node=2, workers=40))
    app = TfTuiApp(cluster, None, clock=lambda: DEFAULT_NOW, refresh_interval=None, read_only=True)
    return cluster, app


async def test_a_refresh_on_nodes_shows_the_table_the_refresh_thread_built(monkeypatch: Any) -> None:
    cluster, app = make()
    renders = taken(monkeypatch)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await on_nodes(app, pilot)
        before = app.prebuilt_tables
        gone = cluster.drop_node()
        renders.clear()
        await refresh(app, pilot)
        assert app.prebuilt_tables == before + 1
        assert renders[:1] == [True]
        table = screen.query_one("#main", ResourceTable)
        assert gone not in table.row_keys
        assert shown_rows(table) == fresh_rows(app, screen)


async def test_a_refresh_on_workloads_shows_the_table_the_refresh_thread_built(monkeypatch: Any) -> None:
    """`:workloads` too: each new state computes every workload's effective autoscaling for the
    AUTOSCALE column, which the refresh thread does now; the rows shown are a fresh build's."""
    from tftui.ui.render.workviews import workloads_table
    from tftui.ui.screens.resource import WorkloadsScreen

    cluster, app = make()
    renders = taken(monkeypatch)
    async with app.run_test(size=(160, 50)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.switch_view("workloads")
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, WorkloadsScreen)
        pod = next(i for i, o in enumerate(cluster.objects) if o.get("kind") == "Pod")
        cluster.objects.pop(pod)
        before = app.prebuilt_tables
        renders.clear()
        await refresh(app, pilot)
        assert app.prebuilt_tables == before + 1 and renders[:1] == [True]
        table = screen.query_one("#main", ResourceTable)
        # no metrics source: no recommendation, no waste figure (`—`), as the screen shows them
        fresh = fresh_rows(app, screen, build=lambda d, g: workloads_table(d, g, None, False, waste={}))
        assert shown_rows(table) == fresh


async def test_a_filter_typed_while_the_refresh_thread_built_applies_to_the_new_rows(
    monkeypatch: Any,
) -> None:
    cluster, app = make()
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await on_nodes(app, pilot)
        prebuild = app._prebuild
        keys = screen.query_one("#main", ResourceTable).row_keys
        needle = keys[-1][-2:]

        def then_type(data: Any) -> None:
            prebuild(data)  # the operator filters after the rows were built, before they land
            app.call_from_thread(screen._set_needle, needle)

        monkeypatch.setattr(app, "_prebuild", then_type)
        cluster.drop_node()
        await refresh(app, pilot)
        table = screen.query_one("#main", ResourceTable)
        assert shown_rows(table) == fresh_rows(app, screen, needle) != {}


async def test_a_theme_changed_while_the_refresh_thread_built_builds_again(monkeypatch: Any) -> None:
    cluster, app = make()
    renders = taken(monkeypatch)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await on_nodes(app, pilot)
        prebuild = app._prebuild
        other = "tftui-light" if app.theme != "tftui-light" else "tftui-dark"

        def then_switch(data: Any) -> None:
            prebuild(data)  # built with the old theme's gauge colours
            app.call_from_thread(setattr, app, "theme", other)

        monkeypatch.setattr(app, "_prebuild", then_switch)
        gone = cluster.drop_node()
        renders.clear()
        await refresh(app, pilot)
        assert app.theme == other
        assert True not in renders  # the old theme's table was not taken
        table = screen.query_one("#main", ResourceTable)
        assert gone not in table.row_keys
        assert shown_rows(table) == fresh_rows(app, screen)


async def test_a_kept_view_switched_away_from_is_built_in_the_refresh_thread_too(monkeypatch: Any) -> None:
    cluster, app = make()
    renders = taken(monkeypatch)
    async with app.run_test(size=(160, 50)) as pilot:
        await on_nodes(app, pilot)
        assert app.switch_view("gpus")
        await pilot.pause()
        shown_first = app.screen
        assert isinstance(shown_first, GpusScreen)
        gpus: GpusScreen = shown_first
        await on_nodes(app, pilot)  # `:gpus` is now a kept view, aside
        aside = app.kept_aside()
        assert gpus in aside and app.screen not in aside
        tables_aside = sum(len(s._gauges) for s in aside if isinstance(s, Prebuilding) and s.PREBUILD)
        before = app.prebuilt_tables
        gone = cluster.drop_node()
        await refresh(app, pilot)
        assert app.prebuilt_tables == before + 1 + tables_aside  # the nodes on show, the views aside
        renders.clear()
        assert app.switch_view("gpus")
        await pilot.pause()
        await pilot.pause()
        assert app.screen is shown_first
        assert renders[:1] == [True]  # shown as built in the refresh thread
        table = gpus.query_one("#main", ResourceTable)
        fresh, shown = fresh_rows(app, gpus, build=gpus_table), shown_rows(table)
        assert fresh.keys() == shown.keys()
        for key, cells in shown.items():  # a cell is the fresh one, or it cut to its column
            for got, want in zip(cells, fresh[key], strict=True):
                assert got == want or (got.endswith("…") and want.startswith(got[:-1])), (key, got, want)
        assert not any(gone in key for key in table.row_keys)


class Data:
    """A stand-in for a refresh's data (held weakly, as `ConsoleData` is)."""


def test_a_prebuilt_table_is_taken_only_for_its_own_data_scope_and_analyses() -> None:
    class Screen(Prebuilding):
        PREBUILD = True

        def build(self, table_id: str, data: Any, gauges: Gauges) -> Any:
            return ("table", data)

        def analyses_shown(self) -> tuple[object, ...]:
            return shown

    from tftui.ui.render.views import NORMAL, WIDE

    shown: tuple[object, ...] = (object(),)
    screen = Screen()
    gauges = Gauges(NORMAL)
    screen.built_with("main", gauges, 1)
    data: Any = Data()
    assert screen.prebuild(data) == 1
    other: Any = Data()
    assert screen.take_prebuilt("main", other, gauges, shown) is None  # other data
    assert screen.prebuild(data) == 1
    assert screen.take_prebuilt("main", data, gauges, (object(),)) is None  # another analysis
    assert screen.prebuild(data) == 1
    assert screen.take_prebuilt("main", data, Gauges(WIDE), shown) is None  # another layout: kept
    assert screen.take_prebuilt("main", data, gauges, shown) == ("table", data)
    assert screen.prebuild(data) == 1
    assert screen.prebuild(data) == 1
    assert screen.take_prebuilt("main", data, gauges, shown) == ("table", data)
    assert screen.take_prebuilt("main", data, gauges, shown) is None  # taken once


def test_every_layout_a_render_tried_is_prebuilt_and_taken() -> None:
    """A render tries the layouts in turn until the tables fit: each one built for the refresh on
    screen is built again by the next prebuild and taken by the next render; a later refresh's
    render that tried fewer keeps only those. The tables of the two latest data are kept (an
    analysis thread builds for the data on screen while the refresh thread builds the next)."""

    class Screen(Prebuilding):
        PREBUILD = True

        def build(self, table_id: str, data: Any, gauges: Gauges) -> Any:
            return ("table", id(data), gauges.scope)  # not the data: it is held weakly

        def analyses_shown(self) -> tuple[object, ...]:
            return ()

    from tftui.ui.render.views import NORMAL, WIDE

    screen = Screen()
    wide, normal = Gauges(WIDE), Gauges(NORMAL)
    screen.built_with("main", wide, 1)
    screen.built_with("main", normal, 1)
    data: Any = Data()
    assert screen.prebuild(data) == 2
    assert screen.take_prebuilt("main", data, wide, ()) == ("table", id(data), wide.scope)
    assert screen.take_prebuilt("main", data, normal, ()) == ("table", id(data), normal.scope)
    assert screen.take_prebuilt("main", data, wide, ()) is None  # taken once
    newer: Any = Data()
    assert screen.prebuild(data) == 2  # an analysis' outcome for the data on screen
    assert screen.prebuild(newer) == 2  # the next refresh's, built meanwhile: both kept
    assert screen.take_prebuilt("main", data, wide, ()) == ("table", id(data), wide.scope)
    assert screen.take_prebuilt("main", newer, normal, ()) == ("table", id(newer), normal.scope)
    newest: Any = Data()
    assert screen.prebuild(newest) == 2  # a third data: the oldest's go
    assert screen.take_prebuilt("main", data, normal, ()) is None
    assert screen.take_prebuilt("main", newer, wide, ()) == ("table", id(newer), wide.scope)
    screen.built_with("main", normal, 2)  # the next refresh's render fitted the first it tried
    assert screen.prebuild(newest) == 1
    assert screen.take_prebuilt("main", newest, normal, ()) == ("table", id(newest), normal.scope)
    assert screen.prebuild(newest) == 1
    del newest
    gc.collect()
    fresh: Any = Data()
    assert len(screen._prebuilt["main"]) == 2  # newest's, not taken (its wide one too)
    assert screen.prebuild(fresh) == 1 and list(screen._prebuilt["main"]) == [(id(fresh), normal.scope)]
