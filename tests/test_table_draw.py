"""ResourceTable draws a cell through Rich once for as long as the cell and its styles stay: a focus
change, a resize or another cell's update does not redraw the rest, and what it shows is always
what DataTable would draw from scratch."""

from __future__ import annotations

from typing import Any

import pytest
from rich.style import Style
from rich.text import Text
from textual._styles_cache import StylesCache
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.widgets import DataTable, Input

from tftui.ui.render.views import Column, Row, Table
from tftui.ui.widgets.table import ResourceTable
from tftui.ui.widgets.tabledraw import KeptDrawing, KeptStyling

COLUMNS = (Column("name", "NAME", 16), Column("use", "USE", 12), Column("gpus", "GPUS", 6))


def _table(n: int, changed: int | None = None) -> Table:
    def use(i: int) -> Text:
        return Text.assemble(("█" * (i % 6), "red"), ("░" * (6 - i % 6), "dim"), f" {i % 100}%")

    def name(i: int) -> str:
        return f"node-{i:03d}" + ("-new" if i == changed else "")

    rows = tuple(
        Row(f"n{i}", {"name": name(i), "use": use(i), "gpus": str(i % 9)}, name(i)) for i in range(n)
    )
    return Table(COLUMNS, rows)


class Drawn(App[None]):
    def compose(self) -> ComposeResult:
        yield ResourceTable(id="t")
        yield Input(id="other")


Lines = list[list[tuple[str, Style | None]]]


def _lines(table: ResourceTable) -> Lines:
    strips = table.render_lines(Region(0, 0, table.size.width, table.size.height))
    return [[(seg.text, seg.style) for seg in strip] for strip in strips]


def _from_scratch(table: ResourceTable) -> Lines:
    """The lines drawn and styled with no cache at all; the table's own caches are left as they were."""
    styling = table._styles_cache
    assert isinstance(styling, KeptStyling)
    kept = (dict(table._cells_drawn), dict(table._lines_drawn), dict(styling._styled))
    table.forget_drawn()
    table._clear_caches()
    styling.clear()
    try:
        return _lines(table)
    finally:
        table.forget_drawn()
        table._cells_drawn.update(kept[0])
        table._lines_drawn.update(kept[1])
        styling._styled.update(kept[2])
        table._clear_caches()
        styling.clear()


def _first_arguments(monkeypatch: pytest.MonkeyPatch, method: str) -> list[int]:
    """The first argument of every call of DataTable's own `method` (counted, then run)."""
    calls: list[int] = []
    original = getattr(DataTable, method)

    def counting(self: Any, first: int, *args: Any, **kwargs: Any) -> Any:
        calls.append(first)
        return original(self, first, *args, **kwargs)

    monkeypatch.setattr(DataTable, method, counting)
    return calls


@pytest.fixture
def rich_draws(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every body cell drawn through Rich (`KeptDrawing._draw_cell`)."""
    calls: list[str] = []
    draw = KeptDrawing._draw_cell

    def drawing(self: KeptDrawing, cell: Any, *args: Any) -> Any:
        calls.append(cell.plain if isinstance(cell, Text) else str(cell))
        return draw(self, cell, *args)

    monkeypatch.setattr(KeptDrawing, "_draw_cell", drawing)
    return calls


def _texts(table: ResourceTable, *rows: int) -> set[str]:
    """The texts of the cells of `rows` (by index) and of the header."""
    texts = {str(c.label) for c in table.ordered_columns}
    for index in rows:
        texts |= {c.plain if isinstance(c, Text) else str(c) for c in table.get_row_at(index)}
    return texts


@pytest.fixture
def assembled(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every line DataTable assembles from its cells (its own `_render_line`, by y)."""
    return _first_arguments(monkeypatch, "_render_line")


@pytest.fixture
def styled(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every line of a ResourceTable that Textual's styles cache styles (by y)."""
    calls: list[int] = []
    original = StylesCache.render_line

    def counting(self: StylesCache, styles: Any, y: int, *args: Any) -> Any:
        if isinstance(self, KeptStyling):
            calls.append(y)
        return original(self, styles, y, *args)

    monkeypatch.setattr(StylesCache, "render_line", counting)
    return calls


async def test_a_focus_change_redraws_only_the_cursor_row_and_every_frame_equals_a_fresh_draw(
    rich_draws: list[str], assembled: list[int], styled: list[int]
) -> None:
    app = Drawn()
    async with app.run_test(size=(60, 24)) as pilot:
        table = app.query_one("#t", ResourceTable)
        table.show(_table(60))
        table.focus()
        await pilot.pause()
        assert _lines(table) == _from_scratch(table)
        assert len(set(rich_draws)) >= 10  # the screenful drawn from scratch

        other = app.query_one("#other", Input)
        other.focus()  # as `:` does: the table loses the focus, and its background tint
        await pilot.pause()
        blurred = _lines(table)
        assert blurred == _from_scratch(table)
        table.focus()
        await pilot.pause()
        focused = _lines(table)
        assert focused == _from_scratch(table)
        assert focused != blurred

        # DataTable's own caches are keyed by its pseudo classes, so each change of focus misses
        # all of them; the cells drawn in both looks before go to Rich no more, only the cursor
        # row (whose cursor style follows the focus, and was just drawn anew) and the header
        for target, want in ((other, blurred), (table, focused)):
            rich_draws.clear()
            assembled.clear()
            styled.clear()
            target.focus()
            await pilot.pause()
            assert _lines(table) == want
            assert set(rich_draws) <= _texts(table, 0)
            assert set(assembled) <= {1}  # nor are the other lines assembled again, header included
            # nor styled again (the whole widget is repainted: Textual's styles cache is emptied)
            assert set(styled) <= {1}

        await pilot.press("down", "down")
        assert _lines(table) == _from_scratch(table)

        rich_draws.clear()
        table.show(_table(60, changed=1))  # one cell updated: DataTable's caches all reset
        await pilot.pause()
        updated = _lines(table)
        assert set(rich_draws) <= _texts(table, 1, 2)  # the updated row, the cursor row
        assert updated == _from_scratch(table)
        assert "node-001-new" in "".join(text for text, _ in updated[2])

        # a row removed above the others: every row below moves up one index, and a cell's lines
        # carry its row's index (what a click on it selects), so each is drawn at its new place
        # (drawn through Rich once: a cell's look is kept by what it shows, its place put on after;
        # only the row that came into view at the bottom is new)
        fewer = _table(60, changed=1)
        rich_draws.clear()
        table.show(Table(fewer.columns, tuple(r for r in fewer.rows if r.key != "n0")))
        await pilot.pause()
        assert len(rich_draws) <= len(COLUMNS)
        assert _lines(table) == _from_scratch(table)

        # the same rows built anew (new cells equal to the old, as a filter key or a refresh hands
        # over): drawn through Rich no more, but for the cursor row's, which the clear moved; nor
        # are their lines assembled again (kept by what their cells show), but for the cursor's
        rich_draws.clear()
        assembled.clear()
        table.show(Table(COLUMNS, ()))
        table.show(Table(fewer.columns, tuple(r for r in _table(60, changed=1).rows if r.key != "n0")))
        await pilot.pause()
        assert len(rich_draws) <= len(COLUMNS)
        assert len(set(assembled)) <= 2
        assert _lines(table) == _from_scratch(table)

        await pilot.resize_terminal(50, 20)  # the widths change: drawn anew, and right
        await pilot.pause()
        assert _lines(table) == _from_scratch(table)

        table.zebra_stripes = True  # a row's look changes with its stripe: drawn anew
        await pilot.pause()
        assert _lines(table) == _from_scratch(table)

        app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
        await pilot.pause()
        assert _lines(table) == _from_scratch(table)

        # what the styles cache adds around a drawn line: a styled line kept for one look is not
        # shown in another (a tint, a text opacity; padding takes Textual's own path)
        for rule, value in (("tint", "red 30%"), ("text_opacity", "60%"), ("padding", (0, 2))):
            before = _lines(table)
            setattr(table.styles, rule, value)
            await pilot.pause()
            after = _lines(table)
            assert after == _from_scratch(table)
            assert after != before
