"""`KeptDrawing`: a DataTable that keeps what it drew for as long as the cells and their look stay.

DataTable keys its caches of drawn cells, rows and lines by its update count and its pseudo
classes, so every focus change (`:` opens the prompt, a kept view is shown again), resize (the
prompt takes a line) and updated cell makes it draw every visible cell through Rich and assemble
every visible line again: ≈ 0.1 ms a cell and 0.2 ms a line, 50-80 ms of a frame at 200 × 50
(about half of a `:nodes` switch at 5,000 nodes). What a line looks like depends only on its cells
(never changed in place: the console hands the table new ones), its place (the segments carry the
row and column index a mouse click selects), the column widths and the styles, so lines are kept by
exactly those; the focus tints the background, so both looks are kept. A one-line `Text` cell is
kept by what it shows (its text, spans and text style), its width and styles, and its place is put
on after: a filter key re-adds every row at a new index, and a figure, a pool or a model repeats
down a column, so the rows a filter brings into view are mostly drawn already (a filter key on
`:gpus` at 5,000 nodes: 100 → 67 ms).
`tests/test_table_draw.py` compares every frame with a draw from scratch.

Only the common shape is cached: a row cursor, no fixed rows or columns, no row labels; anything
else is drawn by DataTable as before.

A drawn line then goes through Textual's styles cache, which adds the widget's background, tint
and opacity: that cache is emptied by every repaint of the whole widget (a focus change, a resize,
a screen shown again), and each line it styles anew is a new `Strip`, so the line filters after it
(ANSI colours to true colour, the control-character net) run again on it too: ≈ 0.1 ms a line, twice
a table each view switch. `KeptStyling` hands back the same styled line for the same drawn line in
the same look, so the filters' own caches, keyed by the line, hit as well.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import RenderableType
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.terminal_theme import DEFAULT_TERMINAL_THEME, TerminalTheme
from rich.text import Text
from textual._styles_cache import StylesCache
from textual._types import SegmentLines
from textual.cache import LRUCache
from textual.color import Color
from textual.content import Content
from textual.css.styles import StylesBase
from textual.filter import LineFilter
from textual.geometry import Region, Size, Spacing
from textual.renderables.styled import Styled
from textual.strip import Strip
from textual.style import Style as TextualStyle
from textual.widgets import DataTable
from textual.widgets._data_table import default_cell_formatter

DRAWN_CELLS = 8_192
"""Drawn cells kept (a full screen is ≈ 600, each in two looks); cleared when full."""
DRAWN_LINES = 1_024
"""Drawn lines kept (a full screen is ≈ 50, each in two looks); cleared when full."""
STYLED_LINES = 256
"""Styled lines kept: each holds its filtered copies too (≈ 7 KB a line at 200 columns), so only
what a screenful in both looks and some scrolling need; cleared when full."""


BorderLabel = tuple[Content, Color, Color, TextualStyle] | None
"""A border title or subtitle as Textual's styles cache takes it."""


class KeptStyling(StylesCache):
    """A styles cache that keeps each styled line by the drawn line it styles (the same `Strip`
    object, which `KeptDrawing` hands back while the cells and their look stay) and the look around
    it. Only a widget with no border, outline, padding or hatch takes this path: its line `y` is
    then its content's line `y`, styled by the background, tint, text opacity and opacity alone."""

    def __init__(self) -> None:
        super().__init__()
        self._styled: dict[tuple[object, ...], tuple[Strip, Strip]] = {}
        self._look: tuple[object, ...] | None = None  # None: not the simple shape, Textual styles it

    def forget(self) -> None:
        self._styled.clear()

    def render(
        self,
        styles: StylesBase,
        size: Size,
        base_background: Color,
        background: Color,
        render_content_line: Callable[[int], Strip],
        filters: Sequence[LineFilter],
        border_title: BorderLabel,
        border_subtitle: BorderLabel,
        content_size: Size | None = None,
        padding: Spacing | None = None,
        crop: Region | None = None,
        opacity: float = 1.0,
        ansi_theme: TerminalTheme = DEFAULT_TERMINAL_THEME,
        native_ansi: bool = False,
    ) -> list[Strip]:
        plain = (
            not any(styles.gutter)
            and not any(edge for edge, _ in styles.outline)
            and not (styles.has_rule("hatch") and styles.hatch != "none")
            and (content_size is None or content_size == size)
            and (padding is None or not any(padding))
        )
        self._look = (
            (
                size,
                base_background,
                background,
                styles.tint,
                styles.text_opacity,
                opacity,
                id(ansi_theme),
                native_ansi,
            )
            if plain
            else None
        )
        return super().render(
            styles, size, base_background, background, render_content_line, filters, border_title,
            border_subtitle, content_size, padding, crop, opacity, ansi_theme, native_ansi,
        )  # fmt: skip

    def render_line(
        self,
        styles: StylesBase,
        y: int,
        size: Size,
        content_size: Size,
        padding: Spacing,
        base_background: Color,
        background: Color,
        render_content_line: Callable[[int], Strip],
        border_title: BorderLabel,
        border_subtitle: BorderLabel,
        opacity: float,
        ansi_theme: TerminalTheme,
        native_ansi: bool,
    ) -> Strip:
        look = self._look
        if look is None or y >= size.height:
            return super().render_line(
                styles, y, size, content_size, padding, base_background, background, render_content_line,
                border_title, border_subtitle, opacity, ansi_theme, native_ansi,
            )  # fmt: skip
        drawn = render_content_line(y)
        key = (id(drawn), look)
        kept = self._styled.get(key)
        if kept is not None and kept[0] is drawn:
            return kept[1]
        styled = super().render_line(
            styles, y, size, content_size, padding, base_background, background, lambda _y: drawn,
            border_title, border_subtitle, opacity, ansi_theme, native_ansi,
        )  # fmt: skip
        if len(self._styled) >= STYLED_LINES:
            self._styled.clear()
        self._styled[key] = (drawn, styled)
        return styled


class KeptDrawing(DataTable[RenderableType]):
    """DataTable with drawn cells and lines kept by what they show (see the module docstring)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._styling = self._styles_cache = KeptStyling()
        self._cells_drawn: dict[tuple[object, ...], tuple[object, SegmentLines]] = {}
        self._lines_drawn: dict[tuple[object, ...], tuple[tuple[object, ...], Strip]] = {}
        self._frame: tuple[object, ...] = ()  # what every line of this frame depends on

    def forget_drawn(self) -> None:
        self._cells_drawn.clear()
        self._lines_drawn.clear()
        self._styling.forget()

    def _clear_caches(self) -> None:
        """DataTable's caches emptied with their entries unlinked first: a Textual `LRUCache` keeps
        its entries in a circular list that its `clear()` leaves linked, so each clear (every
        filter key, every updated cell) left a cycle holding every cached row, line and cell: tens of
        thousands of objects for the cyclic collector a filter key at 5,000 nodes, frozen with a
        refresh when one runs (`gcpause.YoungFreezer`). Unlinked, reference counting frees them."""
        for cache in (
            self._row_render_cache, self._cell_render_cache, self._row_renderable_cache, self._line_cache,
            self._offset_cache, self._ordered_row_cache,
        ):  # fmt: skip
            unlink(cache)
        super()._clear_caches()

    def _simple(self) -> bool:
        return (
            self.cursor_type == "row"
            and not self.fixed_rows
            and not self.fixed_columns
            and not (self._labelled_row_exists and self.show_row_labels)
        )

    def render_lines(self, crop: Region) -> list[Strip]:
        # once a frame: the column widths, and the cursor, hover, stripe and header looks lines depend on
        styles = self._get_styles_to_render_cell
        show, hover = self.show_cursor, self._show_hover_cursor
        self._frame = (
            tuple(column.get_render_width(self) for column in self.ordered_columns),
            self.get_pseudo_class_state(),
            show,
            hover,
            styles(False, False, False, False, True, show, hover, False, False),
            styles(False, False, False, True, False, show, hover, False, False),
            styles(False, False, False, True, True, show, hover, False, False),
            self.zebra_stripes and self.get_component_rich_style("datatable--even-row"),
            self.zebra_stripes and self.get_component_rich_style("datatable--odd-row"),
            self.get_component_rich_style("datatable--header"),
            self.get_component_rich_style("datatable--header-hover"),
        )
        return super().render_lines(crop)

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        if not self._simple():
            return super()._render_line(y, x1, x2, base_style)
        try:
            row_key, line_no = self._get_offsets(y)
        except LookupError:
            return super()._render_line(y, x1, x2, base_style)
        index: int | None
        shown: tuple[object, ...]
        if row_key is self._header_row_key:  # its cells are the column labels
            index, shown = -1, tuple(column.label for column in self.ordered_columns)
        else:
            cells = self._data.get(row_key)
            if cells is None:
                return super()._render_line(y, x1, x2, base_style)
            index, shown = self._row_locations.get(row_key), tuple(cells.values())
        key = (
            row_key, line_no, index, x1, x2, self.size.width, base_style, self._frame,
            index == self.cursor_coordinate.row, index == self.hover_coordinate.row,
        )  # fmt: skip
        drawn = self._lines_drawn.get(key)
        if drawn is not None and _same(drawn[0], shown):
            return drawn[1]
        strip = super()._render_line(y, x1, x2, base_style)
        if len(self._lines_drawn) >= DRAWN_LINES:
            self._lines_drawn.clear()
        self._lines_drawn[key] = (shown, strip)
        return strip

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> SegmentLines:
        if row_index < self.fixed_rows or column_index < self.fixed_columns:  # header, labels
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        row = self.rows.get(row_key) if row_key is not None else None
        if (
            row is None
            or row.height != 1
            or column_key is None
            or column_key not in self._data.get(row.key, {})
        ):
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        cell = self._data[row.key][column_key]
        styles = self._get_styles_to_render_cell(
            False, False, False, hover, cursor, self.show_cursor, self._show_hover_cursor,
            self.cursor_foreground_priority == "css", self.cursor_background_priority == "css",
        )  # fmt: skip
        look = (width, self.cell_padding, base_style, styles)
        what = _content(cell)
        key = (what, *look) if what is not None else (id(cell), *look)
        drawn = self._cells_drawn.get(key)
        if drawn is None or (what is None and drawn[0] is not cell):
            drawn = (cell, self._draw_cell(cell, width, base_style, styles))
            if len(self._cells_drawn) >= DRAWN_CELLS:
                self._cells_drawn.clear()
            self._cells_drawn[key] = drawn
        # the place goes on last: a click reads the row and column from the segments' meta
        place = Style.from_meta({"row": row_index, "column": column_index})
        return [[Segment(text, style + place if style else place, control) for text, style, control in line]
                for line in drawn[1]]  # fmt: skip

    def _draw_cell(
        self, cell: RenderableType, width: int, base_style: Style, styles: tuple[Style, Style]
    ) -> SegmentLines:
        """What DataTable draws for a one-line cell, without its place (as its `_render_cell`)."""
        component_style, post_style = styles
        options = self.app.console_options.update_dimensions(width, 1).update(no_wrap=True)
        renderable = default_cell_formatter(cell, wrap=False, height=1)
        return self.app.console.render_lines(
            Styled(Padding(renderable, (0, self.cell_padding)), pre_style=base_style + component_style,
                   post_style=post_style),
            options,
        )  # fmt: skip


def _content(cell: object) -> tuple[object, ...] | None:
    """What a `Text` cell draws as, hashable: cells equal in it draw the same (a pool name, a
    phase, a model, a figure repeat down a column), whichever row they are in. None: another
    renderable, kept by identity."""
    if type(cell) is not Text:
        return None
    return (
        cell.plain, tuple(cell.spans), cell.style, cell.justify, cell.overflow, cell.no_wrap, cell.end,
        cell.tab_size,
    )  # fmt: skip


def unlink(cache: object) -> None:
    """Empty a Textual `LRUCache` with its circular list unlinked (see `KeptDrawing._clear_caches`;
    pinned version: the entries are the lists `_cache` maps to)."""
    if isinstance(cache, LRUCache):
        for link in cache._cache.values():
            link.clear()
        cache.clear()


def _same(kept: tuple[object, ...], shown: tuple[object, ...]) -> bool:
    """The very same cells, or cells that draw the same (`_content`): a row built anew with equal
    cells (the rows a filter brought back, a view shown again) keeps its lines; a line kept for
    cells that since changed is drawn again."""
    if len(kept) != len(shown):
        return False
    for a, b in zip(kept, shown, strict=True):
        if a is not b and (type(a) is not Text or type(b) is not Text or _content(a) != _content(b)):
            return False
    return True
