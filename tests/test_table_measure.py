"""ResourceTable skips DataTable's cell measuring (every column has its own width) and still lays
out exactly as DataTable does: the same scrollable size, the same rows on screen."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from rich.console import RenderableType
from textual.app import App, ComposeResult
from textual.widgets import DataTable
from textual.widgets import _data_table as data_table_module

from tftui.ui.render.views import Column, Row, Table
from tftui.ui.widgets.table import ResourceTable

COLUMNS = (Column("name", "NAME", 24), Column("pool", "POOL", 12), Column("gpus", "GPUS", 6))


def _table(n: int, suffix: str = "") -> Table:
    rows = tuple(
        Row(
            f"n{i}",
            {"name": f"node-{i:04d}{suffix}", "pool": f"pool-{i % 3}", "gpus": str(i % 9)},
            f"node-{i:04d}",
        )
        for i in range(n)
    )
    return Table(COLUMNS, rows)


class Pair(App[None]):
    def compose(self) -> ComposeResult:
        yield ResourceTable(id="ours")
        yield DataTable[RenderableType](id="plain")


def _plain_show(table: DataTable[RenderableType], t: Table) -> None:
    table.clear(columns=True)
    for c in t.columns:
        table.add_column(c.label, width=c.width, key=c.key)
    for r in t.rows:
        table.add_row(*(str(r.cells[c.key]) for c in t.columns), key=r.key)


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every renderable DataTable measures (its module's `measure`, counted)."""
    calls: list[Any] = []
    original = data_table_module.measure

    def counting(console: Any, renderable: Any, default: int, **kw: Any) -> int:
        calls.append(renderable)
        return original(console, renderable, default, **kw)

    monkeypatch.setattr(data_table_module, "measure", counting)
    return calls


async def test_rows_added_and_cells_narrowed_are_not_measured_and_lay_out_as_datatable(
    measured: list[Any],
) -> None:
    app = Pair()
    async with app.run_test(size=(80, 30)) as pilot:
        ours = app.query_one("#ours", ResourceTable)
        plain = app.query_one("#plain", DataTable)
        _plain_show(plain, _table(300))
        await pilot.pause()
        plain_measured = len(measured)
        assert plain_measured >= 300 * len(COLUMNS)  # DataTable measures every cell it is given
        measured.clear()

        ours.show(_table(300))
        await pilot.pause()
        assert len(measured) <= len(COLUMNS)  # the column labels, once each
        assert ours.virtual_size == plain.virtual_size
        assert ours.row_count == 300

        measured.clear()
        ours.show(_table(300, suffix="-a-longer-name"))  # every name cell updated
        await pilot.pause()
        ours.show(_table(300))  # and narrowed again: DataTable would re-measure the whole column
        await pilot.pause()
        assert measured == []
        assert ours.virtual_size == plain.virtual_size
        assert getattr(ours.get_row_at(7)[0], "plain", None) == "node-0007"


async def test_a_filter_and_its_backspace_re_add_the_rows_cells_built_before_and_lay_out_as_datatable() -> (
    None
):
    """A filter key that changes many rows clears the table and adds its rows again, in one batch;
    rows shown by either of the last two shows come back with the very cells built for them."""
    app = Pair()
    async with app.run_test(size=(80, 30)) as pilot:
        ours = app.query_one("#ours", ResourceTable)
        plain = app.query_one("#plain", DataTable)
        full = _table(600)
        ours.show(full)
        await pilot.pause()
        built = {key: ours.get_row(key) for key in ours.row_keys}
        sevens = Table(COLUMNS, tuple(r for r in full.rows if r.key.endswith("7")))
        for shown in (sevens, full):  # "/7", then backspace
            ours.show(shown)
            await pilot.pause()
            _plain_show(plain, shown)
            await pilot.pause()
            assert ours.row_keys == [str(k.value) for k in plain.rows]
            assert ours.virtual_size == plain.virtual_size
            assert all(
                a is b for key in ours.row_keys for a, b in zip(ours.get_row(key), built[key], strict=True)
            )
            assert [getattr(c, "plain", None) for c in ours.get_row_at(3)] == [
                str(c) for c in plain.get_row_at(3)
            ]
        assert ours.cursor_key == "n7"  # the cursor kept its row through both
        ours.focus()
        await pilot.press("down")
        assert ours.cursor_key == "n8"


async def test_a_cleared_table_leaves_its_rows_to_reference_counting() -> None:
    """DataTable's caches are Textual LRUCaches, whose `clear()` left their entries linked in a
    circle: every filter key that clears the table left its rows (and the lines and cells drawn
    from them) as cyclic garbage, frozen with the next refresh's objects while a refresh runs.
    Unlinked, they are freed at once. (Textual's Strips cache themselves: those stay cyclic.)"""
    app = Pair()
    async with app.run_test(size=(80, 30)) as pilot:
        ours = app.query_one("#ours", ResourceTable)
        full = _table(600)
        ours.show(full)
        await pilot.pause()
        assert ours.row_keys[:3] == ["n0", "n1", "n2"]  # ordered rows, lines and cells now cached
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            ours.show(Table(COLUMNS, tuple(r for r in full.rows if r.key.endswith("7"))))  # cleared
            await pilot.pause()
            gc.collect()
            left = [o for o in gc.garbage if isinstance(o, data_table_module.Row)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        assert left == []


async def test_an_auto_width_column_is_still_measured(measured: list[Any]) -> None:
    app = Pair()
    async with app.run_test(size=(80, 30)) as pilot:
        ours = app.query_one("#ours", ResourceTable)
        ours.add_column("AUTO", key="auto")  # no width of its own: DataTable must size it
        ours.add_row("a" * 30, key="r1")
        await pilot.pause()
        assert any(getattr(m, "plain", m) == "a" * 30 for m in measured)
        assert ours.columns[next(iter(ours.columns))].content_width == 30


def _naive_widths(table: Table) -> dict[str, int]:
    """`content_widths` as a plain double loop: each column's widest drawn cell, at least its label."""
    from rich.cells import cell_len

    from tftui.model.plaintext import visible
    from tftui.ui.render.tableops import plain

    widths = {c.key: cell_len(c.label) for c in table.columns}
    for row in table.rows:
        for c in table.columns:
            cell = row.cells.get(c.key)
            if cell is not None:
                widths[c.key] = max(widths[c.key], cell_len(visible(plain(cell), multiline=False)))
    return widths


def test_content_widths_remembered_per_row_equal_measuring_every_cell() -> None:
    from dataclasses import replace

    from rich.text import Text

    from tftui.ui.render.widths import content_widths

    base = _table(50)
    wide = Column("note", "NOTE", 10)
    other = Table(
        (*COLUMNS, wide),
        tuple(replace(r, cells={**r.cells, "note": "x" * (r.key.count("1") * 7)}) for r in base.rows),
    )
    tables = [base, other, base, Table(COLUMNS, base.rows[:10]), other]
    # a changed row (new object, same key) and hostile text: measured again, escapes counted
    changed = replace(
        base.rows[3], cells={**base.rows[3].cells, "name": Text("é" * 40), "pool": "\x1b]0;t\x07"}
    )
    tables.append(Table(COLUMNS, (*base.rows[:3], changed, *base.rows[4:])))
    tables.append(base)
    for t in tables:
        assert content_widths(t) == _naive_widths(t)
    assert content_widths(tables[-2])["name"] == 40
