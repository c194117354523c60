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
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable
from typing import ClassVar

from tftui.model.giveway import checkpoint
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.views import Gauges, Table

Prebuilt = tuple["weakref.ref[ConsoleData]", Hashable, tuple[object, ...], Table]
"""(the data, weakly: a table kept for data no longer shown must not keep its cluster state
alive; the gauges' scope, the analyses shown, the table built from them)."""


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

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        raise NotImplementedError

    def analyses_shown(self) -> tuple[object, ...]:
        """What the tables show of the analyses (compared by identity)."""
        raise NotImplementedError

    def prebuild(self, data: ConsoleData) -> int:
        """Build, for `data`, the tables the renders of the refresh on screen built, in each layout
        they built them (called from the refresh thread); how many were built."""
        if not self.PREBUILD:
            return 0
        built = 0
        for table_id, (_seq, layouts) in list(self._gauges.items()):
            for scope, gauges in list(layouts.items()):
                checkpoint()  # not inside `build`: a row cache's lock may be what the interface waits on
                shown = self.analyses_shown()
                table = self.build(table_id, data, gauges)
                self._keep_prebuilt(table_id, (weakref.ref(data), scope, shown, table))
                built += 1
        checkpoint()
        return built

    def take_prebuilt(
        self, table_id: str, data: ConsoleData, gauges: Gauges, shown: tuple[object, ...]
    ) -> Table | None:
        """The table prebuilt for exactly this data, layout, theme and analyses (taken once), else
        None."""
        tables = self._prebuilt.get(table_id)
        entry = tables.get((id(data), gauges.scope)) if tables is not None else None
        if tables is None or entry is None or entry[0]() is not data:
            return None
        built_shown, table = entry[2], entry[3]
        if not same_shown(built_shown, shown):
            return None
        tables.pop((id(data), gauges.scope), None)
        return table

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
