"""The last page each table was given, kept while what it is made from is the very same.

A render turns a table's rows into what the DataTable shows: sorted, filtered, cut to the first
`ROW_LIMIT` rows, `↑`/`↓` deltas put on, marks put on, then fitted to the table's width. Each step
makes new objects, so a render whose inputs did not change (a filter key that keeps every row, the
first letters of most filters over 40,000 GPUs) still measured 1,000 rows again and had the table
compare them one by one: ≈ 3 ms of such a key's 10 at 5,000 nodes. Kept here by the identity of
the inputs (and the values of the small ones), a render of the same inputs gives the same objects,
which the measuring (`widths`) and the table (`ResourceTable.show`) recognise at once.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass
from itertools import compress

from tftui.ui.render.resort import SortedRows, sorted_rows
from tftui.ui.render.tableops import marked_table, sorted_table, with_deltas
from tftui.ui.render.views import Cell, Table
from tftui.ui.render.widths import fit_table

__all__ = ["PageMemo", "Prepared"]


@dataclass(frozen=True, slots=True)
class Prepared:
    """One table's page: `page` the first rows of what passes, `marked` as displayed (deltas and
    marks on)."""

    page: Table
    marked: Table


@dataclass(frozen=True, slots=True)
class _Inputs:
    scoped: Table
    previous: Mapping[str, Mapping[str, Cell]]
    marks: frozenset[str]
    limit: int

    def same(self, other: _Inputs) -> bool:
        # the tables and the previous cells by identity (equal rows can be other objects, and the
        # row objects are what the table keeps), the small values by value
        return (
            self.scoped is other.scoped
            and self.previous is other.previous
            and self.marks == other.marks
            and self.limit == other.limit
        )


SORT_PICK_RATIO = 8
"""Rows that pass a filter are sorted themselves while they are fewer than 1/8 of the table's (1/32
once the table is sorted); more are picked from the sorted table, sorted first if it is not yet:
one pass over it by identity takes about as long as sorting 1/32 of it."""


@dataclass(frozen=True, slots=True)
class _Sorted:
    full: Table
    sort: tuple[str, bool]
    latest: SortedRows | None  # the last sort of a whole table (`full` or an earlier one)
    scoped: Table | None  # None: nothing was picked from it yet
    out: Table


class PageMemo:
    """The last `Prepared` per key (a table and a layout) and the last fitted table per table id,
    with what they were made from."""

    def __init__(self) -> None:
        self._sorted: dict[Hashable, _Sorted] = {}
        self._prepared: dict[Hashable, tuple[_Inputs, Prepared]] = {}
        self._fitted: dict[str, tuple[Table, int, bool, Table]] = {}

    def sorted(self, key: Hashable, full: Table, scoped: Table, sort: tuple[str, bool] | None) -> Table:
        """`scoped` (rows of `full` that pass the filter, in `full`'s order) sorted by `sort`
        (column, reverse), without sorting on every filter key: sorting 40,000 GPUs by name takes
        ≈ 50 ms. Once `full` is sorted (kept for `key` while it is the same object), the rows that
        pass are picked from it in its order, which is the order a stable sort gives them; a few
        rows are sorted themselves instead (cheaper than sorting `full` for them). A new `full`
        (a refresh) is sorted from the last one's sort (`sorted_rows`)."""
        if sort is None:
            return scoped
        last = self._sorted.get(key)
        if last is not None and last.full is full and last.sort == sort and last.scoped is scoped:
            return last.out
        latest = last.latest if last is not None else None
        base = latest if latest is not None and latest.source is full and latest.sort == sort else None
        # a pick passes over every row in C; a sort costs ≈ 1.3 µs a row it sorts
        few = SORT_PICK_RATIO if base is None else 4 * SORT_PICK_RATIO
        if len(scoped.rows) * few < len(full.rows):
            out = sorted_table(scoped, *sort)
        else:
            if base is None:
                base = latest = sorted_rows(full, *sort, last=latest)
            if scoped is full:  # every row passes: the sorted table itself, the same object each time
                out = base.table
            else:
                passing = set(map(id, scoped.rows))  # the very row objects: ids, never read
                picked = compress(base.table.rows, map(passing.__contains__, map(id, base.table.rows)))
                out = Table(scoped.columns, tuple(picked))
        self._sorted[key] = _Sorted(full, sort, latest, scoped, out)
        return out

    def sorted_already(self, key: Hashable, done: SortedRows) -> None:
        """A whole table sorted where it was built, off the interface thread (`Prebuilding.presort`):
        the render that shows it, and the filter keys that follow, pick from it."""
        self._sorted[key] = _Sorted(done.source, done.sort, done, None, done.table)

    def prepare(
        self,
        key: Hashable,
        scoped: Table,
        previous: Mapping[str, Mapping[str, Cell]],
        marks: Collection[str],
        limit: int,
    ) -> Prepared:
        """The first `limit` rows of `scoped` with deltas against `previous` and `marks` put on; the
        same objects as last time for `key` when the inputs are."""
        inputs = _Inputs(scoped, previous, frozenset(marks), limit)
        last = self._prepared.get(key)
        if last is not None and last[0].same(inputs):
            return last[1]
        page = scoped.page(limit)
        marked = marked_table(with_deltas(page, previous), inputs.marks)
        made = Prepared(page, marked)
        self._prepared[key] = (inputs, made)
        return made

    def fitted(
        self,
        table_id: str,
        marked: Table,
        width: int,
        scrollbar: bool,
    ) -> Table:
        """`fit_table(marked, width, scrollbar=…)`, the same object as last time for the same inputs."""
        last = self._fitted.get(table_id)
        if last is not None and last[0] is marked and last[1] == width and last[2] == scrollbar:
            return last[3]
        out = fit_table(marked, width, scrollbar=scrollbar)
        self._fitted[table_id] = (marked, width, scrollbar, out)
        return out

    def clear(self) -> None:
        self._sorted.clear()
        self._prepared.clear()
        self._fitted.clear()
