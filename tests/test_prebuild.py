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
        assert_cut_from(shown_rows(table), fresh_rows(app, gpus, build=gpus_table))
        assert not any(gone in key for key in table.row_keys)


def assert_cut_from(shown: dict[str, list[str]], fresh: dict[str, list[str]]) -> None:
    """The same rows, each cell the fresh one or that cut to its column."""
    assert fresh.keys() == shown.keys()
    for key, cells in shown.items():
        for got, want in zip(cells, fresh[key], strict=True):
            assert got == want or (got.endswith("…") and want.startswith(got[:-1])), (key, got, want)


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
    assert screen.take_prebuilt("main", data, gauges, shown) == (("table", data), None)
    assert screen.prebuild(data) == 1
    assert screen.prebuild(data) == 1
    assert screen.take_prebuilt("main", data, gauges, shown) == (("table", data), None)
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
    assert screen.take_prebuilt("main", data, wide, ()) == (("table", id(data), wide.scope), None)
    assert screen.take_prebuilt("main", data, normal, ()) == (("table", id(data), normal.scope), None)
    assert screen.take_prebuilt("main", data, wide, ()) is None  # taken once
    newer: Any = Data()
    assert screen.prebuild(data) == 2  # an analysis' outcome for the data on screen
    assert screen.prebuild(newer) == 2  # the next refresh's, built meanwhile: both kept
    assert screen.take_prebuilt("main", data, wide, ()) == (("table", id(data), wide.scope), None)
    assert screen.take_prebuilt("main", newer, normal, ()) == (("table", id(newer), normal.scope), None)
    newest: Any = Data()
    assert screen.prebuild(newest) == 2  # a third data: the oldest's go
    assert screen.take_prebuilt("main", data, normal, ()) is None
    assert screen.take_prebuilt("main", newer, wide, ()) == (("table", id(newer), wide.scope), None)
    screen.built_with("main", normal, 2)  # the next refresh's render fitted the first it tried
    assert screen.prebuild(newest) == 1
    assert screen.take_prebuilt("main", newest, normal, ()) == (("table", id(newest), normal.scope), None)
    assert screen.prebuild(newest) == 1
    del newest
    gc.collect()
    fresh: Any = Data()
    assert len(screen._prebuilt["main"]) == 2  # newest's, not taken (its wide one too)
    assert screen.prebuild(fresh) == 1 and list(screen._prebuilt["main"]) == [(id(fresh), normal.scope)]


def built_on(monkeypatch: Any, cls: Any, gate: Any = None, fail_aside: bool = False) -> list[str]:
    """The threads `cls.build` ran in, in order. `gate` (a `threading.Event`): a build outside the
    interface thread waits for it; `fail_aside`: such a build raises instead."""
    import threading

    out: list[str] = []
    build = cls.build

    def recording(self: Any, *args: Any) -> Any:
        name = threading.current_thread().name
        out.append(name)
        if name != "MainThread":
            if fail_aside:
                raise RuntimeError("aside build failed")
            if gate is not None:
                assert gate.wait(30)
        return build(self, *args)

    monkeypatch.setattr(cls, "build", recording)
    return out


def crumb(app: TfTuiApp) -> str:
    from tftui.ui.widgets.chrome import Breadcrumb

    return str(app.screen.query_one(Breadcrumb).render())


async def test_a_big_clusters_view_shows_at_once_and_its_rows_are_built_aside(monkeypatch: Any) -> None:
    """A view nothing was built for yet, on a big cluster (`ASIDE_OBJECTS`, lowered here): the
    screen is up at once saying so, keys are served meanwhile, and the rows come from a thread of
    their own (at 5,000 nodes opening `:workloads` froze the console for 0.6–1.7 s)."""
    import threading

    from tftui.ui.screens import prebuild

    monkeypatch.setattr(prebuild, "ASIDE_OBJECTS", 0)
    gate = threading.Event()
    threads = built_on(monkeypatch, GpusScreen, gate)
    _cluster, app = make()
    async with app.run_test(size=(160, 50)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.switch_view("gpus")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, GpusScreen)
        table = screen.query_one("#main", ResourceTable)
        assert table.row_count == 0 and "building rows…" in crumb(app)
        await pilot.press("slash", "g")  # served while the rows are built: the filter is typed
        assert screen.needle == "g"
        gate.set()
        await app.workers.wait_for_complete()
        for _ in range(3):
            await pilot.pause()
        assert table.row_count > 0 and "building rows…" not in crumb(app)
        assert threads and all(t == "tftui-build" for t in threads), threads
        assert_cut_from(shown_rows(table), fresh_rows(app, screen, "g", build=gpus_table))


async def test_a_failed_aside_build_builds_on_the_interface_thread(monkeypatch: Any) -> None:
    """A build that fails in its thread is done again where a render builds (whose error, if it
    fails there too, ends the console with its crash report as any render error does)."""
    from tftui.ui.screens import prebuild

    monkeypatch.setattr(prebuild, "ASIDE_OBJECTS", 0)
    threads = built_on(monkeypatch, GpusScreen, fail_aside=True)
    _cluster, app = make()
    async with app.run_test(size=(160, 50)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.switch_view("gpus")
        await app.workers.wait_for_complete()
        for _ in range(3):
            await pilot.pause()
        screen = app.screen
        assert isinstance(screen, GpusScreen)
        assert "tftui-build" in threads and threads[-1] == "MainThread"
        shown = shown_rows(screen.query_one("#main", ResourceTable))
        assert_cut_from(shown, fresh_rows(app, screen, build=gpus_table))
        assert app.crash is None


async def test_one_pools_nodes_and_a_small_cluster_build_where_they_render(monkeypatch: Any) -> None:
    """A pool's nodes (a drill-down: a few rows) and any view of a small cluster show their rows in
    their first frame, built on the interface thread."""
    from tftui.ui.screens import prebuild

    threads = built_on(monkeypatch, NodesScreen)
    _cluster, app = make()
    async with app.run_test(size=(160, 50)) as pilot:
        await on_nodes(app, pilot)
        assert threads == ["MainThread"]
        monkeypatch.setattr(prebuild, "ASIDE_OBJECTS", 0)
        assert app.data is not None
        pool = next(iter(app.data.state.pools))
        app.push_screen(NodesScreen(pool=pool, trail=("pools", pool, "nodes")))
        await pilot.pause()
        await pilot.pause()
        assert threads == ["MainThread", "MainThread"]
        assert app.screen.query_one("#main", ResourceTable).row_count > 0


async def test_opening_workloads_derives_no_configuration_on_the_interface_thread(monkeypatch: Any) -> None:
    """Each workload's effective autoscaling configuration (the AUTOSCALE column) is derived by the
    refresh: opening `:workloads` only reads it (deriving 37,000 took a second of the interface
    thread at 5,000 nodes)."""
    import threading

    from tftui.engine import autoscale_config
    from tftui.ui.screens.resource import WorkloadsScreen

    threads: list[str] = []
    inputs = autoscale_config._effective_inputs

    def recording(state: Any, wv: Any) -> Any:
        threads.append(threading.current_thread().name)
        return inputs(state, wv)

    monkeypatch.setattr(autoscale_config, "_effective_inputs", recording)
    _cluster, app = make()
    async with app.run_test(size=(160, 50)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.data is not None and threads and set(threads) == {"tftui-refresh"}
        assert len(threads) == len(app.data.state.workloads)
        assert app.switch_view("workloads")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, WorkloadsScreen)
        assert app.screen.query_one("#main", ResourceTable).row_count > 0
        assert "MainThread" not in threads
