"""Tables built in the refresh thread for the screen on show, so the interface thread only shows them.

A refresh's new data re-renders the screen on the interface thread; for the big views (5,000 nodes,
40,000 GPUs) most of that render was `build`: working out, row by row, which rows changed
(`rowcache`). A screen that opts in (`PREBUILD`) is asked by the refresh thread, with the data it is
about to post, to build its tables there — in the layout and theme of its last render, the gauges
that render used — and keeps them with what they were built from. The render that follows takes a
prebuilt table only when everything it would build from is the same: the very data on screen, the
gauges' scope (layout and theme) and the very analyses shown. A screen whose layout, theme or
analyses changed in between (a resize, a theme switch), or a view left and another opened, finds
nothing that matches and builds on the interface thread as before: a prebuilt table is never shown
for anything but what it was built from. Filters, sort, marks and the page apply after `build`,
on the interface thread, so a filter typed while the refresh ran applies to the prebuilt rows.

Only screens whose `build` reads nothing but the data, the gauges and their row caches opt in: the
refresh thread runs it while the interface thread may render (the row caches lock their builds).

A table nothing was built for yet (a view opened for the first time, a resize to new layouts) is
built the same way in a thread of its own when the cluster is big (`ASIDE_OBJECTS`): the screen
says "building rows…" and keys are served meanwhile, instead of the console freezing for the
build (opening `:workloads` at 5,000 nodes: about half a second, `:gpus` a third).
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable
from typing import ClassVar, Final, NamedTuple, cast

from textual.dom import DOMNode

from tftui.engine.state import ClusterState
from tftui.model.gcpause import gc_paused
from tftui.model.giveway import checkpoint
from tftui.ui.background import in_thread
from tftui.ui.host import Host
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.resort import SortedRows, sorted_rows
from tftui.ui.render.views import Gauges, Table

Prebuilt = tuple["weakref.ref[ConsoleData]", Hashable, tuple[object, ...], Table, SortedRows | None]
"""(the data, weakly: a table kept for data no longer shown must not keep its cluster state
alive; the gauges' scope, the analyses shown, the table built from them, that table sorted as the
screen's rows were when it was built)."""


class Taken(NamedTuple):
    """A prebuilt table and, when a sort was on, the same table in that order."""

    table: Table
    presorted: SortedRows | None


ASIDE_OBJECTS: Final = 10_000
"""Objects (nodes, GPUs, workers, workloads) from which a table nothing was built for is built in a
thread of its own: about 270 nodes and up (at 500 nodes, opening `:workloads` in the render held
the interface for 0.35 s; at 5,000 aside, its longest stall is 0.12–0.16 s). Below, a first build
takes a few tens of milliseconds and the view shows its rows in its first frame."""


def state_size(state: ClusterState) -> int:
    """The objects a view's rows are built from."""
    return len(state.nodes) + len(state.gpus) + len(state.workers) + len(state.workloads)


def same_shown(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Whether two `analyses_shown` tuples are the very same values (compared by identity)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class Prebuilding:
    """The refresh thread's side of a screen's tables (a mixin of `ResourceScreen`)."""

    PREBUILD: ClassVar[bool] = False
    """`build` may run in the refresh thread (it reads only the data, gauges and row caches)."""

    def __init__(self) -> None:
        super().__init__()
        # table id → (the refresh, the gauges of each layout built for it, by scope): a render
        # tries the layouts in turn until the tables fit (`layout_candidates`), and the next
        # refresh's render will try the same ones
        self._gauges: dict[str, tuple[int, dict[Hashable, Gauges]]] = {}
        # table id → (id of the data, scope) → table: the refresh thread builds for the next data
        # while an analysis thread builds for the data on screen; the two latest data are kept
        self._prebuilt: dict[str, dict[tuple[int, Hashable], Prebuilt]] = {}
        # (id of the data, table id, scope) → True while built aside, False once that failed (the
        # render then builds on the interface thread and reports the error as any render's)
        self._aside: dict[tuple[int, str, Hashable], bool] = {}
        # (table id, gauges' scope) → the last table `presort` sorted: the next sort of that
        # layout's rows (other layouts' are other row objects) reuses its keys and order
        self._presorted: dict[tuple[str, Hashable], SortedRows] = {}

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        raise NotImplementedError

    def analyses_shown(self) -> tuple[object, ...]:
        """What the tables show of the analyses (compared by identity)."""
        raise NotImplementedError

    def render_data(self) -> None:
        raise NotImplementedError

    def current_sort(self, table_id: str) -> tuple[str, bool] | None:
        """(column, reverse) the rows of `table_id` are shown in; None: as built."""
        return None

    def presort(self, table_id: str, table: Table, scope: Hashable) -> SortedRows | None:
        """`table` in the order of the screen's sort, when one is on: run with the build, outside
        the render, as sorting 40,000 GPUs by name (≈ 50 ms) otherwise held each refresh's render
        on the interface thread; from the last table sorted here (`sorted_rows`)."""
        sort = self.current_sort(table_id)
        if sort is None:  # no sort kept for later: it would hold an old refresh's rows
            for key in [k for k in self._presorted if k[0] == table_id]:
                self._presorted.pop(key, None)
            return None
        done = sorted_rows(table, *sort, last=self._presorted.get((table_id, scope)))
        # replaced whole (never changed in place): a thread reading the old one keeps a valid hint
        self._presorted[table_id, scope] = done
        return done

    def worth_aside(self, data: ConsoleData) -> bool:
        """Whether a table nothing was built for is built in a thread (a big cluster's view)."""
        return state_size(data.state) >= ASIDE_OBJECTS

    def build_aside(self, table_id: str, data: ConsoleData, gauges: Gauges) -> bool:
        """Whether `table_id` is being built for `data` and `gauges` in a thread of its own (started
        here when the cluster is big enough): the render shows that it is, and renders again with
        the table once it is built. False: build it now (a small cluster, or the aside build failed)."""
        if not self.PREBUILD or not self.worth_aside(data):
            return False
        key = (id(data), table_id, gauges.scope)
        running = self._aside.get(key)
        if running is not None:
            return running
        for old in [k for k, v in self._aside.items() if not v and k[0] != key[0]]:
            del self._aside[old]  # failures for earlier data (running ones hold their data alive)
        self._aside[key] = True
        cast(DOMNode, self).run_worker(
            self._aside_build(key, table_id, data, gauges),
            group="aside-build",
            description="building rows",
            exit_on_error=False,
        )
        return True

    async def _aside_build(
        self, key: tuple[int, str, Hashable], table_id: str, data: ConsoleData, gauges: Gauges
    ) -> None:
        def work() -> Prebuilt:
            with gc_paused():  # what it builds lives on: a collection would only rescan it
                entry = self._built_entry(table_id, data, gauges)
                cast(Host, cast(DOMNode, self).app).freeze_built()
                return entry

        try:
            entry = await in_thread(work, name="tftui-build")
        except Exception:
            self._aside[key] = False
        else:
            self._aside.pop(key, None)
            self._keep_prebuilt(table_id, entry)
        if cast(DOMNode, self).is_attached:  # a view closed meanwhile shows nothing
            self.render_data()

    def prebuild(self, data: ConsoleData) -> int:
        """Build, for `data`, the tables the renders of the refresh on screen built, in each layout
        they built them (called from the refresh thread); how many were built."""
        if not self.PREBUILD:
            return 0
        built = 0
        for table_id, (_seq, layouts) in list(self._gauges.items()):
            for gauges in list(layouts.values()):  # keyed by their own scope
                checkpoint()  # not inside `build`: a row cache's lock may be what the interface waits on
                self._keep_prebuilt(table_id, self._built_entry(table_id, data, gauges))
                built += 1
        checkpoint()
        return built

    def _built_entry(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Prebuilt:
        """`table_id` built for `data` and `gauges` outside the render, with the analyses it read."""
        shown = self.analyses_shown()
        table = self.build(table_id, data, gauges)
        return (weakref.ref(data), gauges.scope, shown, table, self.presort(table_id, table, gauges.scope))

    def take_prebuilt(
        self, table_id: str, data: ConsoleData, gauges: Gauges, shown: tuple[object, ...]
    ) -> Taken | None:
        """The table prebuilt for exactly this data, layout, theme and analyses (taken once), else
        None."""
        tables = self._prebuilt.get(table_id)
        entry = tables.get((id(data), gauges.scope)) if tables is not None else None
        if tables is None or entry is None or entry[0]() is not data:
            return None
        if not same_shown(entry[2], shown):
            return None
        tables.pop((id(data), gauges.scope), None)
        return Taken(entry[3], entry[4])

    def _keep_prebuilt(self, table_id: str, entry: Prebuilt) -> None:
        """Keep a prebuilt table (replacing one of the same data and scope), and those of the
        latest other data; older ones go. Copied, not changed in place: the interface thread
        may be taking one."""
        data = entry[0]()
        tables = {k: e for k, e in self._prebuilt.get(table_id, {}).items() if e[0]() is not None}
        tables[(id(data), entry[1])] = entry
        others = [d for d in {id(e[0]()): e[0]() for e in tables.values()}.values() if d is not data]
        for old in others[:-1]:  # in the order added: all but the latest other data's go
            tables = {k: e for k, e in tables.items() if e[0]() is not old}
        self._prebuilt[table_id] = tables

    def built_with(self, table_id: str, gauges: Gauges, seq: int) -> None:
        """Remember the gauges a render built `table_id` with for refresh `seq` (the next prebuild
        builds in each layout built for the latest refresh)."""
        last = self._gauges.get(table_id)
        if last is None or last[0] != seq:
            last = self._gauges[table_id] = (seq, {})
        last[1][gauges.scope] = gauges
