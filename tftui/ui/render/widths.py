"""Column widths that follow the content and the terminal (the displayed page of a `views.Table`).

Every column is as wide as its widest cell on the rows shown (or its label). When that is wider
than the terminal, only flexible columns give way, free text first (details, fixes, notes: cut at
the end), then names (cut in the middle, where names differ least: `ml-batch/…transcribe-2`), each
down to its least width, the widest first. Numbers, gauges, states and counts are never cut: a
figure wider than its column widens the column. If even that does not fit, the table scrolls
sideways rather than lie.

Pure: a `Table` and a width in, the same rows with sized columns (and cut text) out. It runs on the
displayed page only (at most `ROW_LIMIT` rows), after sort, marks and deltas, so sort and export
still see every full text.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace

from rich.cells import cell_len
from rich.text import Text

from tftui.model.plaintext import visible
from tftui.ui.render.format import ellipsize
from tftui.ui.render.plain import plain_text
from tftui.ui.render.tableops import plain
from tftui.ui.render.views import Cell, Column, Row, Table

CELL_PADDING = 1
"""The DataTable's padding on each side of a cell."""
SCROLLBAR = 2
"""Room kept for the vertical scrollbar."""
HARD_MIN = 6
"""A name is never cut below this many cells (below it nothing useful is left)."""

__all__ = ["CELL_PADDING", "SCROLLBAR", "content_widths", "fit_table", "fit_widths", "fits"]


def _width(cell: Cell) -> int:
    """Cells as drawn: control characters show as escapes (`\\x1b`), four cells, not zero."""
    return _text_width(plain(cell))


@functools.lru_cache(maxsize=65_536)
def _text_width(text: str) -> int:
    """Kept per text: a figure, a pool, a model or a phase repeats down a column, and the rows a
    filter key brings up are measured anew (1,000 rows: 5 ms of the key's frame at 5,000 nodes)."""
    return cell_len(visible(text, multiline=False))


_RowWidths = dict[int, tuple[Row, tuple[int, ...]]]
_measured: dict[tuple[str, ...], tuple[tuple[Row, ...], tuple[str, ...], _RowWidths, dict[str, int]]] = {}
"""Per column set, the last page measured: its rows, the cell widths of each (by row identity) and
the columns' natural widths. Rows are immutable and re-used while their object does not change
(`rowcache`, `with_deltas`, a filter key narrowing the last page): a render sizes the same page three
times (`fits`, `fit_widths`, `fit_table`), answered from the first, and a refresh or a filter key
mostly re-shows the same rows, so each row's cells are measured once. Only the last page of each
column set is kept."""


def _cell_width(cell: Cell | None) -> int:
    """`_width`, 0 for no cell; a `str` (most cells) goes straight to the kept widths."""
    if cell.__class__ is str:
        return _text_width(cell)
    return 0 if cell is None else _width(cell)


def _row_widths(row: Row, keys: tuple[str, ...]) -> tuple[int, ...]:
    # passes in C over the columns: a filter key measures up to 1,000 new rows of ≈ 10 cells
    return tuple(map(_cell_width, map(row.cells.get, keys)))


def _measure(table: Table) -> tuple[_RowWidths, dict[str, int]]:
    """(each row's cell widths by row identity, each column's natural width) of `table`'s page."""
    keys = tuple(c.key for c in table.columns)
    labels = tuple(c.label for c in table.columns)
    last = _measured.get(keys)
    if last is not None and last[0] is table.rows and last[1] == labels:
        return last[2], last[3]
    before = last[2] if last is not None else {}
    seen: _RowWidths = {}
    for row in table.rows:
        hit = before.get(id(row))
        seen[id(row)] = hit if hit is not None and hit[0] is row else (row, _row_widths(row, keys))
    least = [cell_len(label) for label in labels]
    # the widest of each column, in C: `max` over the column's position in every row's widths
    widths = list(map(max, least, *(w for _, w in seen.values()))) if seen else least
    natural = dict(zip(keys, widths, strict=True))
    _measured[keys] = (table.rows, labels, seen, natural)
    return seen, natural


def content_widths(table: Table) -> dict[str, int]:
    """Each column's natural width: its widest cell on `table`'s rows, at least its label."""
    return dict(_measure(table)[1])


def _shrink(widths: dict[str, int], columns: Sequence[Column], floor: Mapping[str, int], excess: int) -> int:
    """Take up to `excess` cells from `columns`, the widest first, none below its floor; returns
    what is still to take."""
    while excess > 0:
        room = [c for c in columns if widths[c.key] > floor[c.key]]
        if not room:
            break
        widest = max(widths[c.key] for c in room)
        tops = [c for c in room if widths[c.key] == widest]
        below = max((widths[c.key] for c in room if widths[c.key] < widest), default=0)
        lowest_floor = max(floor[c.key] for c in tops)
        target = max(below, lowest_floor)
        per = widest - target
        if per * len(tops) >= excess:
            per, extra = divmod(excess, len(tops))
            for i, c in enumerate(tops):
                widths[c.key] = widest - per - (1 if i < extra else 0)
            return 0
        for c in tops:
            widths[c.key] = target
        excess -= per * len(tops)
    return excess


def fit_widths(table: Table, available: int, *, scrollbar: bool = True) -> dict[str, int]:
    """The width of each column of `table` in `available` terminal cells (see the module docstring);
    `scrollbar`: keep room for a vertical scrollbar (the rows are more than the table shows)."""
    widths = content_widths(table)
    used = sum(widths.values()) + 2 * CELL_PADDING * len(table.columns) + (SCROLLBAR if scrollbar else 0)
    excess = used - available
    for flex in (2, 1):
        if excess <= 0:
            break
        columns = [c for c in table.columns if c.flex == flex]
        floor = {
            c.key: max(min(c.width, widths[c.key]), cell_len(c.label) if flex == 2 else 0) for c in columns
        }
        excess = _shrink(widths, columns, floor, excess)
    if excess > 0:  # the least widths do not fit either: names down to what still reads
        columns = [c for c in table.columns if c.flex]
        floor = {c.key: min(widths[c.key], max(HARD_MIN, cell_len(c.label))) for c in columns}
        _shrink(widths, columns, floor, excess)
    return widths


def fits(table: Table, available: int, *, scrollbar: bool = True, whole: bool = False) -> bool:
    """Whether `table` fits `available` without cutting any column below its least width (`whole`:
    without cutting any column at all)."""
    if not table.columns:
        return True
    natural = content_widths(table)
    widths = fit_widths(table, available, scrollbar=scrollbar)
    if whole:
        return all(widths[c.key] >= natural[c.key] for c in table.columns)
    return all(widths[c.key] >= min(c.width, natural[c.key]) for c in table.columns)


def _cut(cell: Cell, width: int, flex: int) -> Cell:
    if _width(cell) <= width:
        return cell
    if isinstance(cell, str):
        cell = visible(cell, multiline=False)  # cut what is drawn, escapes included
    elif isinstance(cell, Text):
        cell = plain_text(cell, multiline=False)
    if isinstance(cell, str):
        return ellipsize(cell, width) if flex == 1 else cell[: max(0, width - 1)] + "…"
    if isinstance(cell, Text):
        cut = cell.copy()
        cut.truncate(width, overflow="ellipsis")
        return cut
    return cell  # a renderable drawn to the column's width by the table


def fit_table(table: Table, available: int, *, scrollbar: bool = True) -> Table:
    """`table` with its columns sized for `available` cells and the text of cut cells ellipsized."""
    if not table.columns:
        return table
    widths = fit_widths(table, available, scrollbar=scrollbar)
    columns = tuple(replace(c, width=widths[c.key]) for c in table.columns)
    measured, natural = _measure(table)
    cut_cols = [(i, c) for i, c in enumerate(columns) if c.flex and c.width < natural[c.key]]
    if not cut_cols:  # every cell fits its column: the rows as they are
        return Table(columns, table.rows)
    rows: list[Row] = []
    for row in table.rows:
        cell_widths = measured[id(row)][1]
        changed: dict[str, Cell] = {}
        for i, c in cut_cols:
            cell = row.cells.get(c.key)
            if cell is None or cell_widths[i] <= c.width:
                continue
            new = _cut(cell, c.width, c.flex)
            if new is not cell:
                changed[c.key] = new
        rows.append(replace(row, cells={**row.cells, **changed}) if changed else row)
    return Table(columns, tuple(rows))
