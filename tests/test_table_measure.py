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
    # each text's width is kept: measured afresh, the widths are the same
    from tftui.ui.render import widths as widths_module

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(widths_module, "_measured", {})
        widths_module._text_width.cache_clear()
        for t in tables:
            assert content_widths(t) == _naive_widths(t)


def _naive_fit(table: Table, width: int) -> Table:
    """`fit_table` as it cut before its rows' measured widths were read: every flexible cell through
    `_cut`, whatever its width."""
    from dataclasses import replace

    from tftui.ui.render.widths import _cut, fit_widths

    widths = fit_widths(table, width)
    columns = tuple(replace(c, width=widths[c.key]) for c in table.columns)
    rows = []
    for row in table.rows:
        cells = dict(row.cells)
        for c in columns:
            if c.flex and c.key in cells:
                cells[c.key] = _cut(cells[c.key], c.width, c.flex)
        rows.append(replace(row, cells=cells))
    return Table(columns, tuple(rows))


def test_fit_table_measures_a_page_once_and_cuts_as_every_cell_through_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A render sizes its page three times (`fits`, `fit_widths`, `fit_table`): the cells are measured
    once, and only the cells wider than their column go through the cut; the result is the cut of
    every cell (a hostile name, a wide character, a `Text`, a label that changed alone)."""
    from dataclasses import replace

    from rich.text import Text

    from tftui.ui.render import widths as widths_module

    name, note = Column("name", "NAME", 8, flex=2), Column("note", "NOTE", 6, flex=1)
    rows = tuple(
        Row(
            f"n{i}",
            {"name": f"node-{i:03d}" + "x" * (i % 23), "note": Text("é" * (i % 31)), "gpus": str(i)},
            "",
        )
        for i in range(60)
    )
    rows += (Row("evil", {"name": "\x1b]0;title\x07" + "n" * 30, "note": "a\nb", "gpus": "1"}, ""),)
    base = Table((name, note, COLUMNS[2]), rows)
    relabelled = Table((replace(name, label="NAME↓"), note, COLUMNS[2]), rows)
    measured: list[object] = []
    real_width = widths_module._width

    def counting(cell: object) -> int:
        measured.append(cell)
        return real_width(cell)  # type: ignore[arg-type]

    monkeypatch.setattr(widths_module, "_width", counting)
    for table in (base, relabelled, base, Table(base.columns, rows[:7])):
        for width in (30, 60, 200):
            measured.clear()
            widths_module.fits(table, width)
            first = len(measured)
            widths_module.fit_widths(table, width)
            got = widths_module.fit_table(table, width)
            wider = sum(  # the cut measures the cells it cuts, nothing else
                1
                for c in got.columns
                if c.flex
                for r in table.rows
                if c.key in r.cells and real_width(r.cells[c.key]) > c.width
            )
            assert len(measured) - first == wider
            measured.clear()
            assert got == _naive_fit(table, width)
    widths_module.fit_table(base, 60)
    measured.clear()
    fitted = widths_module.fit_table(base, 400)  # the page measured already, and it all fits
    assert measured == []
    assert fitted.rows == base.rows


def test_fitted_columns_widen_as_a_plain_loop() -> None:
    """`fitted_columns` (numbers never cut) with the longest text per column first: the same widths
    as looking at every cell, for a number a unit abbreviates, one nothing fits, a single row and none."""
    from tftui.ui.render.format import fit_number, is_number
    from tftui.ui.render.widths import content_widths
    from tftui.ui.widgets.table import fitted_columns

    def naive(columns: tuple[Column, ...], rows: tuple[Row, ...]) -> dict[str, int]:
        """Column by column, every cell: a number wider than the column so far that no unit fits."""
        out = {}
        for column in columns:
            width = column.width
            for text in (row.cells.get(column.key) for row in rows):
                if (
                    type(text) is str
                    and len(text) > width
                    and is_number(text)
                    and fit_number(text, width) is None
                ):
                    width = len(text)
            out[column.key] = width
        return out

    columns = (Column("a", "A", 3), Column("b", "B", 4), Column("c", "C", 2))
    values = ["12", "10000", "-123456", "1.5", "abcdefgh", "999", "12345678901", "7"]
    rows = tuple(
        Row(f"r{i}", {"a": values[i % 8], "b": values[(i * 3) % 8], "c": values[(i * 5) % 8]}, "")
        for i in range(20)
    )
    for page in (rows, rows[:1], (), rows[3:9], rows):
        want = naive(columns, page)
        assert {c.key: c.width for c in fitted_columns(columns, page)} == want
        natural = content_widths(Table(columns, page))  # as `show` passes it: looks at fewer columns
        assert {c.key: c.width for c in fitted_columns(columns, page, natural)} == want
