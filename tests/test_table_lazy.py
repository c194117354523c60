"""ResourceTable builds a row's cells when they are first read: a filter key that re-adds 1,000 rows
builds the cells of the screenful it shows, and a row shows the same whether it was built when
added or later, when scrolled to, after a refresh replaced it, or when read by key."""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.widgets.data_table import RowKey

from tftui.sources.sim.cluster import SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.render.views import Column, LazyCell, Row, Table, rendered
from tftui.ui.screens.resource import ResourceScreen
from tftui.ui.widgets.plain import plain_cell
from tftui.ui.widgets.table import EAGER_ROWS, LazyCells, ResourceTable, RowCells

from .test_table_draw import Drawn, _from_scratch, _lines
from .test_ui_keys import main, make_app, settle

COLUMNS = (Column("name", "NAME", 16), Column("use", "USE", 12), Column("note", "NOTE", 10))


def _row(i: int, tag: str = "") -> Row:
    use = Text.assemble(("█" * (i % 6), "red"), ("░" * (6 - i % 6), "dim"), f" {i % 100}%")
    # object text with markup and a control character: a built cell is plain whenever it is built
    return Row(f"r{i}", {"name": f"gpu-{i:04d}{tag}", "use": use, "note": f"[b]x\x1b{i}"}, f"gpu-{i}")


def _table(n: int, tags: dict[int, str] | None = None, skip: set[int] | None = None) -> Table:
    tags, skip = tags or {}, skip or set()
    return Table(COLUMNS, tuple(_row(i, tags.get(i, "")) for i in range(n) if i not in skip))


def _built(table: ResourceTable) -> set[int]:
    return {int(key[1:]) for key, cells in table._shown.items() if cells.built}


def _expected(row: Row) -> list[str]:
    """The row's cells as plain text, built the way an eager table builds them."""
    return [plain_cell(rendered(row.cells[c.key])).plain for c in COLUMNS]  # type: ignore[union-attr]


def _shown(table: ResourceTable, i: int) -> list[str]:
    return [cell.plain for cell in table.get_row(f"r{i}")]  # type: ignore[union-attr]


async def test_rows_past_the_first_screenful_are_built_when_first_read() -> None:
    app = Drawn()
    async with app.run_test(size=(80, 30)) as pilot:
        table = app.query_one("#t", ResourceTable)
        table.show(_table(1_000))
        table.focus()
        await pilot.pause()
        # built: the first screenful added eagerly; nothing below it was read
        assert _built(table) == set(range(EAGER_ROWS))
        unread = table._data[RowKey("r500")]
        assert isinstance(unread, LazyCells) and not unread.filled
        assert _lines(table) == _from_scratch(table)

        # scrolled to the end: the rows drawn are built, as an eager table would have them
        table.move_cursor(row=999, animate=False)
        await pilot.pause()
        assert 999 in _built(table) and 500 not in _built(table)
        assert _lines(table) == _from_scratch(table)
        assert "gpu-0999" in "".join(text for line in _lines(table) for text, _ in line)

        # read by key (export, a test, DataTable's own API): built on the spot, plain text
        assert _shown(table, 500) == _expected(_row(500))
        assert "\x1b" not in "".join(_shown(table, 500)) and "[b]" in _shown(table, 500)[2]


async def test_a_refresh_replaces_an_unread_row_without_building_it() -> None:
    app = Drawn()
    async with app.run_test(size=(80, 30)) as pilot:
        table = app.query_one("#t", ResourceTable)
        table.show(_table(1_000))
        await pilot.pause()
        built = _built(table)

        # the same rows in the same order, two of them changed: the one in view is updated cell by
        # cell, the unread one takes the new row's cells unbuilt
        table.show(_table(1_000, tags={3: "-new", 700: "-new"}))
        await pilot.pause()
        assert _built(table) == built
        assert table.last_changes == 1  # the one cell that changed in a built row
        assert _shown(table, 700) == _expected(_row(700, "-new"))
        assert _shown(table, 3) == _expected(_row(3, "-new"))

        # unread rows removed one by one (fewer than a rebuild's worth) are not built to go
        before = _built(table)
        table.show(_table(1_000, skip=set(range(800, 900))))
        await pilot.pause()
        assert _built(table) == before - set(range(800, 900))
        assert table.row_count == 900 and f"r{899}" not in table.row_keys
        table.move_cursor(row=899, animate=False)
        await pilot.pause()
        assert _lines(table) == _from_scratch(table)


async def test_rows_re_added_by_a_filter_key_reuse_the_cells_built_before() -> None:
    app = Drawn()
    async with app.run_test(size=(80, 30)) as pilot:
        table = app.query_one("#t", ResourceTable)
        full = _table(1_000)
        table.show(full)
        await pilot.pause()
        made = {key: cells for key, cells in table._shown.items()}
        # a key that narrows to the odd rows, then its backspace: every row re-added, none rebuilt
        table.show(Table(COLUMNS, full.rows[1::2]))
        await pilot.pause()
        table.show(full)
        await pilot.pause()
        assert all(table._shown[key] is cells for key, cells in made.items())
        assert all(isinstance(c, RowCells) for c in table._shown.values())
        assert _lines(table) == _from_scratch(table)


async def test_the_console_builds_a_filtered_views_cells_as_they_come_into_view(
    demo: SimCluster, metrics: SimMetrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On `:gpus` (the first 12 rows built when added, here), a filter re-adds the rows, the
    gauges are drawn for the rows built only, and moving to the last row draws it as DataTable
    would: the screen shows the last GPU's name and equals a draw from scratch."""
    monkeypatch.setattr("tftui.ui.widgets.table.EAGER_ROWS", 12)
    app = make_app(demo, metrics)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot)
        await pilot.press("colon", *"gpus", "enter")
        await settle(pilot)
        screen, table = app.screen, main(app)
        assert isinstance(screen, ResourceScreen)
        await pilot.press("slash", "-", "enter")  # every GPU name has a dash: the rows re-added
        await pilot.pause()
        keys = table.row_keys
        assert len(keys) > 40 and screen.needle == "-"

        def drawn() -> set[str]:
            return {
                r.key
                for r in screen.shown_tables["main"].rows
                if any(isinstance(c, LazyCell) and c.drawn for c in r.cells.values())
            }

        assert keys[-1] not in drawn() and set(keys[:12]) <= drawn()
        table.move_cursor(row=len(keys) - 1, animate=False)  # as `pagedown` held down would
        await pilot.pause()
        assert table.cursor_key == keys[-1] and keys[-1] in drawn()
        assert keys[len(keys) // 2] not in drawn() or len(keys) < 60  # the middle was never shown
        screen_text = "".join(text for line in _lines(table) for text, _ in line)
        assert keys[-1] in screen_text
        assert _lines(table) == _from_scratch(table)
