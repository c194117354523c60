"""Pure operations on a built `views.Table`: sort (k9s shift+letter), marks, CSV export, deltas.

They work on what the operator sees (cells as displayed), so export writes the visible table and
sorting by a gauge column sorts by its first figure (the allocated percentage). Lazy cells (gauges)
are read through their plain text, which is the drawn text without its styles: sort and export read
every row without drawing a gauge.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Collection, Mapping
from dataclasses import replace

from rich.text import Text

from tftui.model.plaintext import csv_cell
from tftui.ui.views import Cell, LazyCell, Row, Table, rendered

_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_AGE = re.compile(r"^(\d+)([smhd])$")
_PERCENT = re.compile(r"(-?\d+(?:\.\d+)?)%")
_AGE_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MARK = "▸"


def plain(cell: Cell) -> str:
    """A cell's text as shown (gauges included)."""
    if isinstance(cell, LazyCell):
        return cell.plain
    if isinstance(cell, Text):
        return cell.plain
    return cell if isinstance(cell, str) else str(cell)


def sort_key(cell: Cell) -> tuple[int, float, str]:
    """Numbers (counts, ages, a gauge's allocated %) before text; unknowns (`—`) last."""
    text = plain(cell).strip()
    if _NUMBER.match(text):
        return (0, float(text), "")
    age = _AGE.match(text)
    if age:
        return (0, float(int(age.group(1)) * _AGE_SECONDS[age.group(2)]), "")
    percent = _PERCENT.search(text)
    if percent:
        return (0, float(percent.group(1)), "")
    if not text or text == "—":
        return (2, 0.0, "")
    return (1, 0.0, text.lower())


def has_column(table: Table, column: str) -> bool:
    return any(c.key == column for c in table.columns)


def sorted_table(table: Table, column: str, reverse: bool = False) -> Table:
    """Rows ordered by `column` (stable: ties keep the builder's order); unknown column: as is."""
    if not has_column(table, column):
        return table
    rows = sorted(table.rows, key=lambda r: sort_key(r.cells.get(column, "")), reverse=reverse)
    return Table(table.columns, tuple(rows))


def marked_table(table: Table, marked: Collection[str]) -> Table:
    """Marked rows get `▸` before their first cell (k9s `space`)."""
    if not marked or not table.columns:
        return table
    first = table.columns[0].key
    rows = []
    for row in table.rows:
        if row.key in marked:
            cells = dict(row.cells)
            text = Text(MARK, style="bold")
            cell = rendered(cells.get(first, ""))
            text.append_text(cell if isinstance(cell, Text) else Text(plain(cell)))
            cells[first] = text
            row = replace(row, cells=cells)
        rows.append(row)
    return Table(table.columns, tuple(rows))


def table_csv(table: Table) -> str:
    """The table as shown (its columns, its row order) as CSV with a header line. Cells that would
    start a spreadsheet formula get a `'` in front and controls show as escapes (`csv_cell`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([c.label for c in table.columns])
    for row in table.rows:
        writer.writerow([csv_cell(plain(row.cells.get(c.key, "")).strip()) for c in table.columns])
    return out.getvalue()


def _number(cell: Cell) -> float | None:
    text = plain(cell).strip()
    return float(text) if _NUMBER.match(text) else None


def with_deltas(table: Table, previous: Mapping[str, Mapping[str, Cell]]) -> Table:
    """Numeric cells that changed since the previous refresh get `↑`/`↓` (k9s deltas)."""
    if not previous:
        return table
    rows: list[Row] = []
    for row in table.rows:
        before = previous.get(row.key)
        if before is None:
            rows.append(row)
            continue
        cells = dict(row.cells)
        changed = False
        for key, cell in row.cells.items():
            new, old = _number(cell), _number(before.get(key, ""))
            if new is None or old is None or new == old:
                continue
            arrow = "↑" if new > old else "↓"
            cells[key] = Text(plain(cell)).append(arrow, style="bold")
            changed = True
        rows.append(replace(row, cells=cells) if changed else row)
    return Table(table.columns, tuple(rows))
