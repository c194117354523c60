"""The last page each table was given, kept while what it is made from is the very same.

A render turns a table's rows as filtered into what the DataTable shows: sorted, cut to the first
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

from tftui.ui.render.tableops import marked_table, sorted_table, with_deltas
from tftui.ui.render.views import Cell, Table
from tftui.ui.render.widths import fit_table

__all__ = ["PageMemo", "Prepared"]


@dataclass(frozen=True, slots=True)
class Prepared:
    """One table's render: `shown` every row that passes (sorted; what export and sort read), `page`
    its first rows, `marked` the page as displayed (deltas and marks on)."""

    shown: Table
    page: Table
    marked: Table


@dataclass(frozen=True, slots=True)
class _Inputs:
    scoped: Table
    sort: tuple[str, bool] | None
    previous: Mapping[str, Mapping[str, Cell]]
    marks: frozenset[str]
    limit: int

    def same(self, other: _Inputs) -> bool:
        # the tables and the previous cells by identity (equal rows can be other objects, and the
        # row objects are what the table keeps), the small values by value
        return (
            self.scoped is other.scoped
            and self.previous is other.previous
            and self.sort == other.sort
            and self.marks == other.marks
            and self.limit == other.limit
        )


class PageMemo:
    """The last `Prepared` per key (a table and a layout) and the last fitted table per table id,
    with what they were made from."""

    def __init__(self) -> None:
        self._prepared: dict[Hashable, tuple[_Inputs, Prepared]] = {}
        self._fitted: dict[str, tuple[Table, int, bool, Table]] = {}

    def prepare(
        self,
        key: Hashable,
        scoped: Table,
        sort: tuple[str, bool] | None,
        previous: Mapping[str, Mapping[str, Cell]],
        marks: Collection[str],
        limit: int,
    ) -> Prepared:
        """`scoped` sorted (`sort`: column and reverse), its first `limit` rows with deltas against
        `previous` and `marks` put on; the same objects as last time for `key` when the inputs are."""
        inputs = _Inputs(scoped, sort, previous, frozenset(marks), limit)
        last = self._prepared.get(key)
        if last is not None and last[0].same(inputs):
            return last[1]
        shown = scoped if sort is None else sorted_table(scoped, sort[0], sort[1])
        page = shown.page(limit)
        marked = marked_table(with_deltas(page, previous), inputs.marks)
        made = Prepared(shown, page, marked)
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
        self._prepared.clear()
        self._fitted.clear()
