"""Pure operations on a built `views.Table`: sort (k9s shift+letter), marks, CSV export, deltas.

They work on the table as shown (its rows, filter and sort applied), from the cells' values: a gauge
column sorts by its allocated percentage, `used` by the used one and `gap` by allocated minus used
(the waste hunt), figures (`NumCell`) by their number. Export writes every shown row in full (never
cut to a column's width) and a gauge as numeric columns — allocated, used and capacity (or request)
as numbers and both percentages — so a spreadsheet reads numbers, not bar glyphs. Lazy cells are
read without being drawn.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Collection, Mapping
from dataclasses import replace

from rich.text import Text

from tftui.model.plaintext import csv_cell
from tftui.ui.render.views import Cell, Column, GaugeCell, LazyCell, NumCell, Row, Table, rendered

_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_AGE = re.compile(r"^(\d+)([smhd])$")
_PERCENT = re.compile(r"(-?\d+(?:\.\d+)?)%")
_AGE_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MARK = "▸"
_NUMERIC_START = frozenset("-0123456789")


def plain(cell: Cell) -> str:
    """A cell's text as shown (gauges included)."""
    if isinstance(cell, LazyCell):
        return cell.plain
    if isinstance(cell, Text):
        return cell.plain
    return cell if isinstance(cell, str) else str(cell)


VIRTUAL_SORTS: dict[str, tuple[str, str]] = {"used": ("tflops", "used"), "gap": ("tflops", "gap")}
"""Sort keys read from a gauge column rather than a column of their own: (column, figure)."""


def _figure(value: float | None) -> tuple[int, float, str]:
    return (2, 0.0, "") if value is None else (0, value, "")


def sort_key(cell: Cell, figure: str = "") -> tuple[int, float, str]:
    """Numbers (counts, ages, figures, a gauge's allocated % — or with `figure` its used % or its
    gap) before text; unknowns (`—`) last."""
    if isinstance(cell, GaugeCell):
        if figure == "used":
            return _figure(cell.used_pct)
        if figure == "gap":
            return _figure(cell.gap_pct)
        return _figure(cell.used_pct if cell.request else cell.alloc_pct)
    if isinstance(cell, NumCell):
        return _figure(cell.value)
    text = plain(cell).strip()
    if text[:1] in _NUMERIC_START:  # a number or an age starts so: names, models, phases do not
        if _NUMBER.match(text):
            return (0, float(text), "")
        age = _AGE.match(text)
        if age:
            return (0, float(int(age.group(1)) * _AGE_SECONDS[age.group(2)]), "")
    if "%" in text:  # the search tried every position of every name (40,000 GPUs: 0.1 s a sort)
        percent = _PERCENT.search(text)
        if percent:
            return (0, float(percent.group(1)), "")
    if not text or text == "—":
        return (2, 0.0, "")
    lowered = text.lower()  # the cell's own string when it is lower case: a kept sort holds no copy
    return (1, 0.0, text if lowered == text else lowered)


def has_column(table: Table, column: str) -> bool:
    key = VIRTUAL_SORTS.get(column, (column, ""))[0]
    return any(c.key == key for c in table.columns)


def sorted_table(table: Table, column: str, reverse: bool = False) -> Table:
    """Rows ordered by `column` (stable: ties keep the builder's order); unknown column: as is.
    Unknown values stay last in either direction."""
    if not has_column(table, column):
        return table
    key, figure = VIRTUAL_SORTS.get(column, (column, ""))
    keyed = [(sort_key(r.cells.get(key, ""), figure), r) for r in table.rows]
    known = sorted((kr for kr in keyed if kr[0][0] != 2), key=lambda kr: kr[0], reverse=reverse)
    unknown = [kr for kr in keyed if kr[0][0] == 2]
    return Table(table.columns, tuple(r for _, r in known + unknown))


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


def _number(value: float | None, *, whole: bool = False) -> str:
    """A CSV number: empty when unknown (never 0), whole bytes as integers, else at most 3 decimals."""
    if value is None:
        return ""
    if whole:
        return str(round(value))
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _gauge_headers(column: Column, cell: GaugeCell | None) -> list[str]:
    name = column.label.split()[0]  # `TFLOPS alloc/used` → TFLOPS
    unit = "TFLOPS" if name == "TFLOPS" else "bytes"
    if cell is not None and cell.request:
        return [f"{name} requested ({unit})", f"{name} used ({unit})", f"{name} used % of request"]
    return [
        f"{name} allocated ({unit})",
        f"{name} used ({unit})",
        f"{name} capacity ({unit})",
        f"{name} allocated %",
        f"{name} used %",
    ]


def _gauge_values(cell: Cell, width: int) -> list[str]:
    if not isinstance(cell, GaugeCell):
        return [""] * width
    whole = cell.unit != "TF"
    if cell.request:
        return [_number(cell.cap, whole=whole), _number(cell.used, whole=whole), _number(cell.used_pct)]
    return [
        _number(cell.alloc, whole=whole),
        _number(cell.used, whole=whole),
        _number(cell.cap, whole=whole),
        _number(cell.alloc_pct),
        _number(cell.used_pct),
    ]


def table_csv(table: Table) -> str:
    """The table as shown (its columns, its row order) as CSV with a header line.

    Text cells are written in full; a gauge column becomes numeric columns (allocated, used and
    capacity or request in TFLOPS or bytes, and the percentages; unknown use is empty, not 0); a
    figure (`NumCell`) its number. Cells that would start a spreadsheet formula get a `'` in front
    and controls show as escapes (`csv_cell`)."""
    gauges = {
        c.key: next((r.cells[c.key] for r in table.rows if isinstance(r.cells.get(c.key), GaugeCell)), None)
        for c in table.columns
    }
    is_gauge = {k: isinstance(v, GaugeCell) for k, v in gauges.items()}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header: list[str] = []
    for c in table.columns:
        cell = gauges[c.key]
        header += (
            _gauge_headers(c, cell if isinstance(cell, GaugeCell) else None) if is_gauge[c.key] else [c.label]
        )
    writer.writerow(header)
    for row in table.rows:
        line: list[str] = []
        for c in table.columns:
            cell = row.cells.get(c.key, "")
            if is_gauge[c.key]:
                first = gauges[c.key]
                width = len(_gauge_headers(c, first if isinstance(first, GaugeCell) else None))
                line += _gauge_values(cell, width)
            elif isinstance(cell, NumCell):
                line.append(_number(cell.value))
            else:
                line.append(csv_cell(plain(cell).strip()))
        writer.writerow(line)
    return out.getvalue()


def _cell_number(cell: Cell) -> float | None:
    if isinstance(cell, NumCell):
        return cell.value
    text = plain(cell).strip()
    return float(text) if _NUMBER.match(text) else None


def with_deltas(table: Table, previous: Mapping[str, Mapping[str, Cell]]) -> Table:
    """Numeric cells that changed since the previous refresh get `↑`/`↓` (k9s deltas)."""
    if not previous:
        return table
    rows: list[Row] = []
    for row in table.rows:
        before = previous.get(row.key)
        if before is None or before is row.cells:  # a re-used row (`rowcache`) did not change
            rows.append(row)
            continue
        cells = dict(row.cells)
        changed = False
        for key, cell in row.cells.items():
            new, old = _cell_number(cell), _cell_number(before.get(key, ""))
            if new is None or old is None or new == old:
                continue
            arrow = "↑" if new > old else "↓"
            cells[key] = Text(plain(cell)).append(arrow, style="bold")
            changed = True
        rows.append(replace(row, cells=cells) if changed else row)
    return Table(table.columns, tuple(rows))
