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
        self._gauges: dict[str, Gauges] = {}  # of the last build, by table id
        self._prebuilt: dict[str, Prebuilt] = {}

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        raise NotImplementedError

    def analyses_shown(self) -> tuple[object, ...]:
        """The analysis results the tables show (compared by identity)."""
        raise NotImplementedError

    def prebuild(self, data: ConsoleData) -> int:
        """Build, for `data`, the tables the last render built (called from the refresh thread);
        how many were built."""
        if not self.PREBUILD:
            return 0
        built = 0
        for table_id, gauges in list(self._gauges.items()):
            checkpoint()  # not inside `build`: a row cache's lock may be what the interface waits on
            shown = self.analyses_shown()
            self._prebuilt[table_id] = (data, gauges.scope, shown, self.build(table_id, data, gauges))
            built += 1
        checkpoint()
        return built

    def take_prebuilt(
        self, table_id: str, data: ConsoleData, gauges: Gauges, shown: tuple[object, ...]
    ) -> Table | None:
        """The table prebuilt for exactly this data, layout, theme and analyses (taken once), else
        None. One of other data is dropped; one of another layout is kept, as a render tries the
        layouts in turn and the next may be the one it was built in."""
        entry = self._prebuilt.get(table_id)
        if entry is None:
            return None
        built_data, scope, built_shown, table = entry
        if built_data is not data:
            self._prebuilt.pop(table_id, None)
            return None
        if (
            scope != gauges.scope
            or len(built_shown) != len(shown)
            or any(a is not b for a, b in zip(built_shown, shown, strict=True))
        ):
            return None
        self._prebuilt.pop(table_id, None)
        return table

    def built_with(self, table_id: str, gauges: Gauges) -> None:
        """Remember the gauges a render built `table_id` with (the next prebuild uses them)."""
        self._gauges[table_id] = gauges
