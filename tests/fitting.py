"""Checks shared by the table tests: a table fitted to a terminal width really fits it."""

from __future__ import annotations

from rich.cells import cell_len

from tftui.ui.render.tableops import plain
from tftui.ui.render.views import Table
from tftui.ui.render.widths import CELL_PADDING, SCROLLBAR, content_widths, fit_table

WIDTHS = (80, 120, 160, 220)
"""The terminal widths every view is checked at."""


def assert_fits(table: Table, width: int) -> Table:
    """Fit `table` to `width` and check it: the columns add up to no more than the terminal (unless
    even the least widths cannot), no cell is wider than its column, a fixed column (numbers,
    gauges, states) is never narrower than its content, and nothing is cut when it all fits."""
    natural = content_widths(table)
    fitted = fit_table(table, width)
    total = sum(c.width + 2 * CELL_PADDING for c in fitted.columns) + SCROLLBAR
    fixed = sum(natural[c.key] + 2 * CELL_PADDING for c in table.columns if not c.flex) + SCROLLBAR
    assert total <= max(width, fixed + 8 * sum(1 for c in table.columns if c.flex)), (
        width,
        [(c.key, c.width) for c in fitted.columns],
    )
    for col in fitted.columns:
        if not col.flex:
            assert col.width >= natural[col.key], (col.key, col.width, natural[col.key])
    for row in fitted.rows:
        for col in fitted.columns:
            text = plain(row.cells.get(col.key, ""))
            assert cell_len(text) <= col.width, (width, col.key, text)
    if sum(natural.values()) + 2 * CELL_PADDING * len(table.columns) + SCROLLBAR <= width:
        assert {c.key: c.width for c in fitted.columns} == natural  # nothing cut
    return fitted
