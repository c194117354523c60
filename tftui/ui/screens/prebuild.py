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

from collections.abc import Hashable
from typing import ClassVar

from tftui.model.giveway import checkpoint
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.views import Gauges, Table

Prebuilt = tuple[ConsoleData, Hashable, tuple[object, ...], Table]
"""(the data, the gauges' scope, the analyses shown, the table built from them)."""


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
        self._prebuilt: dict[str, dict[Hashable, Prebuilt]] = {}  # table id → scope → table

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
                tables = self._prebuilt.get(table_id)
                if tables is None or any(entry[0] is not data for entry in tables.values()):
                    tables = self._prebuilt[table_id] = {}
                tables[scope] = (data, scope, shown, table)
                built += 1
        checkpoint()
        return built

    def take_prebuilt(
        self, table_id: str, data: ConsoleData, gauges: Gauges, shown: tuple[object, ...]
    ) -> Table | None:
        """The table prebuilt for exactly this data, layout, theme and analyses (taken once), else
        None. Those of other data are dropped; one of another layout is kept for the render's
        next layout."""
        tables = self._prebuilt.get(table_id)
        entry = tables.get(gauges.scope) if tables is not None else None
        if tables is None or entry is None:
            return None
        built_data, _scope, built_shown, table = entry
        if built_data is not data:
            self._prebuilt.pop(table_id, None)
            return None
        if len(built_shown) != len(shown) or any(a is not b for a, b in zip(built_shown, shown, strict=True)):
            return None
        del tables[gauges.scope]
        return table

    def built_with(self, table_id: str, gauges: Gauges, seq: int) -> None:
        """Remember the gauges a render built `table_id` with for refresh `seq` (the next prebuild
        builds in each layout built for the latest refresh)."""
        last = self._gauges.get(table_id)
        if last is None or last[0] != seq:
            last = self._gauges[table_id] = (seq, {})
        last[1][gauges.scope] = gauges
