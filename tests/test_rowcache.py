"""Rows kept between refreshes (`ui.render.rowcache`): an unchanged refresh builds no row, and a row whose
object, usage, age or context changed is built again — a cached table always equals a fresh build
(a stale row on screen is the worst outcome)."""

from __future__ import annotations

import copy
import random
import sys
from dataclasses import replace
from datetime import timedelta
from typing import Any

from tests.test_refresh_reuse import Objects
from tests.test_state_incremental import _mutations
from tftui.engine.usage import UsageIndex
from tftui.model.usage import GPUUsage
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.ui.app import SWITCH_INTERVAL, TfTuiApp
from tftui.ui.load.data import ConsoleData, StateReader, load
from tftui.ui.render.nodeviews import gpus_table, nodes_table
from tftui.ui.render.rowcache import RowCache, RowCaches, Same
from tftui.ui.render.tableops import plain
from tftui.ui.render.views import NARROW, WIDE, Gauges, Row, Table
from tftui.ui.render.workviews import workers_table, workloads_table
from tftui.ui.widgets.table import ResourceTable


def text(table: Table) -> list[tuple[str, dict[str, str], str]]:
    """Every row as shown: key, each cell's characters, the text `/` matches."""
    return [(r.key, {k: plain(c) for k, c in r.cells.items()}, r.search) for r in table.rows]


class Views:
    """Each big table of the console built with its own persistent cache, and without one."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.caches: dict[str, RowCache[Row]] = {}

    def cache(self, name: str) -> RowCache[Row]:
        return self.caches.setdefault(name, RowCache())

    def tables(self, data: ConsoleData, gauges: Gauges, cached: bool) -> dict[str, Table]:
        def c(name: str) -> RowCache[Row] | None:
            return self.cache(name) if cached else None

        node = data.state.nodes.get(self.node)
        return {
            "nodes": nodes_table(data, gauges, cache=c("nodes")),
            "gpus": gpus_table(data, gauges, cache=c("gpus")),
            "node-gpus": gpus_table(data, gauges, node=self.node, cache=c("node-gpus")),
            "workloads": workloads_table(data, gauges, cache=c("workloads")),
            "workers": workers_table(data, gauges, node.workers if node else [], cache=c("workers")),
        }

    def check(self, data: ConsoleData, gauges: Gauges, what: str = "") -> dict[str, Table]:
        cached = self.tables(data, gauges, True)
        fresh = self.tables(data, gauges, False)
        for name, table in cached.items():
            assert table.columns == fresh[name].columns, (what, name)
            assert text(table) == text(fresh[name]), (what, name)
        return cached


def test_a_cache_reuses_equal_dependencies_and_rebuilds_changed_ones() -> None:
    made: list[str] = []

    def make(arg: tuple[str, int]) -> tuple[str, int]:
        made.append(arg[0])
        return arg

    cache: RowCache[tuple[str, int]] = RowCache()
    first = cache.rows("s", [("a", (1,), ("a", 1)), ("b", (2,), ("b", 2))], make)
    again = cache.rows("s", [("a", (1,), ("a", 1)), ("b", (3,), ("b", 3))], make)
    assert made == ["a", "b", "b"] and again[0] is first[0] and again[1] == ("b", 3)
    assert (cache.built, cache.reused) == (1, 1)
    cache.rows("s", [("b", (3,), ("b", 3))], make)  # "a" left the table: its row is dropped
    cache.rows("s", [("a", (1,), ("a", 1))], make)
    assert made[-1] == "a" and cache.built == 1
    cache.rows("other", [("a", (1,), ("a", 1))], make)  # another layout or theme: built again
    assert made[-1] == "a" and cache.built == 1
    one, two = object(), object()
    assert Same(one) == Same(one) and Same(one) != Same(two)


def test_an_unchanged_refresh_builds_no_row_and_reuses_the_drawn_cells() -> None:
    cluster = Objects(generate_objects(4, 40, DEFAULT_NOW))
    reader = StateReader()
    data = load(cluster, None, DEFAULT_NOW, reader=reader)
    views = Views(next(iter(data.state.nodes)))
    gauges = Gauges(WIDE)
    first = views.check(data, gauges)
    assert all(views.caches[n].built == len(t.rows) > 0 for n, t in first.items())
    again = views.check(load(cluster, None, DEFAULT_NOW, reader=reader), Gauges(WIDE))
    for name, table in again.items():
        assert views.caches[name].built == 0, name
        assert all(a is b for a, b in zip(table.rows, first[name].rows, strict=True)), name


def test_every_change_rebuilds_the_rows_it_reaches_and_only_a_few() -> None:
    """Structural changes (engine.incremental's test set) on the console path: after each, every
    cached table equals a fresh build, and a changed object rebuilt a handful of rows."""
    objs = generate_objects(4, 40, DEFAULT_NOW)
    cluster = Objects(objs)
    reader = StateReader()
    data = load(cluster, None, DEFAULT_NOW, reader=reader)
    node = sorted(data.state.nodes)[0]
    views = Views(node)
    gauges = Gauges(WIDE)
    views.check(data, gauges)
    pods = [i for i, o in enumerate(objs) if o["kind"] == "Pod" and o["spec"].get("nodeName") == node]
    objs[pods[0]] = changed = copy.deepcopy(objs[pods[0]])
    changed["status"]["phase"] = "Succeeded"  # a worker of the watched node ends
    data = load(cluster, None, DEFAULT_NOW, reader=reader)
    views.check(data, gauges, "worker ended")
    assert 0 < views.caches["nodes"].built <= 2 and views.caches["node-gpus"].built >= 1
    total = sum(len(t.rows) for t in views.tables(data, gauges, True).values())
    for what in _mutations(objs, random.Random(7)):
        data = load(cluster, None, DEFAULT_NOW, reader=reader)
        views.check(data, gauges, what)
        assert sum(c.built for c in views.caches.values()) < total / 3, what


def test_usage_age_and_layout_changes_rebuild_rows() -> None:
    cluster = Objects(generate_objects(3, 30, DEFAULT_NOW))
    data = load(cluster, None, DEFAULT_NOW, reader=StateReader())
    gpu = next(iter(data.state.gpus.values()))
    views = Views(gpu.node or "")
    views.check(data, Gauges(WIDE))
    sample = GPUUsage(gpu.name, gpu.node or "", 80.0, 1e9, DEFAULT_NOW)
    used = replace(data, usage=UsageIndex.build(data.state, {gpu.name: sample}, {}))
    tables = views.check(used, Gauges(WIDE), "one GPU reports usage")
    assert views.caches["gpus"].built == 1 and views.caches["nodes"].built == 1
    assert "80%" in plain(next(r for r in tables["gpus"].rows if r.key == gpu.name).cells["tflops"])
    later = replace(used, refreshed_at=DEFAULT_NOW + timedelta(days=3))
    views.check(later, Gauges(WIDE), "ages moved")
    assert views.caches["nodes"].built == len(data.state.nodes)  # every AGE cell changed
    views.check(later, Gauges(NARROW), "another layout")
    assert views.caches["gpus"].built == len(data.state.gpus)


async def test_the_screen_shows_a_changed_object_at_once_and_touches_nothing_else() -> None:
    """On the console: an unchanged refresh builds no row and updates no cell; a pod that ends
    changes its node's WRKS cell on screen (never a stale cached row)."""
    objs = generate_objects(3, 40, DEFAULT_NOW)
    cluster = Objects(objs)
    app = TfTuiApp(cluster, None, clock=lambda: DEFAULT_NOW, refresh_interval=None, read_only=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.switch_view("nodes")
        await pilot.pause()
        screen: Any = app.screen
        table = screen.query_one("#main", ResourceTable)
        await pilot.press("ctrl+r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.rows_of("main").built == 0 and table.last_changes == 0
        assert app.data is not None
        workers = {k: w for n in app.data.state.nodes.values() for k in n.workers if (w := n.name)}
        i = next(
            i
            for i, o in enumerate(objs)
            if o["kind"] == "Pod" and f"{o['metadata']['namespace']}/{o['metadata']['name']}" in workers
        )
        node = workers[f"{objs[i]['metadata']['namespace']}/{objs[i]['metadata']['name']}"]
        before = table.get_row(node)
        objs[i] = ended = copy.deepcopy(objs[i])
        ended["status"]["phase"] = "Succeeded"
        await pilot.press("ctrl+r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.rows_of("main").built == 1
        count = len(app.data.state.nodes[node].workers) if app.data else -1
        after = table.get_row(node)
        column = [c.key.value for c in table.ordered_columns].index("workers")
        assert str(after[column]) == f"{count}↓" and str(before[column]) == str(count + 1)
        assert 0 < table.last_changes <= 3


def test_the_app_keeps_the_row_caches_of_recent_views_only() -> None:
    caches: RowCaches[Row] = RowCaches(limit=2)
    gpus = caches.get(("GpusScreen", ("gpus",), "main"))
    nodes = caches.get(("NodesScreen", ("nodes",), "main"))
    assert caches.get(("GpusScreen", ("gpus",), "main")) is gpus  # now the most recent
    caches.get(("NodeScreen", ("nodes", "n1"), "gpus"))  # the least recent (nodes) is dropped
    assert caches.get(("GpusScreen", ("gpus",), "main")) is gpus
    assert caches.get(("NodesScreen", ("nodes",), "main")) is not nodes


async def test_switching_back_to_a_view_reuses_its_rows_and_the_gil_is_handed_over_quickly() -> None:
    """`:gpus`, `:nodes`, a refresh, `:gpus`: the kept GPUs screen, shown again after a refresh
    that changed nothing, renders it and builds no row; while the console runs, a busy refresh
    thread hands the GIL to the UI thread within 0.5 ms."""
    cluster = Objects(generate_objects(3, 40, DEFAULT_NOW))
    before = sys.getswitchinterval()
    app = TfTuiApp(cluster, None, clock=lambda: DEFAULT_NOW, refresh_interval=None, read_only=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert sys.getswitchinterval() == SWITCH_INTERVAL < before
        built: list[int] = []
        seen: list[Any] = []
        for view in ("gpus", "nodes", "gpus"):
            if view == "gpus" and built:
                seq = app.data_seq
                app.action_refresh()
                await app.workers.wait_for_complete()
                await pilot.pause()
                assert app.data_seq == seq + 1
            assert app.switch_view(view)
            await pilot.pause()
            screen: Any = app.screen
            seen.append(screen)
            built.append(screen.rows_of("main").built)
        assert built[0] == len(app.data.state.gpus) if app.data else False
        assert seen[2] is seen[0] and seen[0]._built["main"][0] == app.data_seq  # rendered again
        assert built[2] == 0
    assert sys.getswitchinterval() == before
