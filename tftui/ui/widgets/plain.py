"""The console's one door for text: every string it draws is plain text with controls made visible.

Textual and Rich read strings as markup by default (`Static`, `Label`, `notify`, a DataTable's `str`
cells, a Rich table's `str` cells), so a `[/]` in a SchedulingConfigTemplate mode raised MarkupError
and stopped the console, and a `[link=…]` in a name would have drawn a link. Raw `ESC ]0;` in a
GPUNode phase retitled the terminal. Here, instead of trusting every view builder to remember:

- `plain_renderable` turns what a widget is given into Rich `Text` (never markup) with control
  characters shown as escapes (`tftui.model.plaintext.visible`), through `Group`s and Rich tables;
- `PlainStatic` and `PlainLabel` are the only `Static`/`Label` the console uses (`tests/test_plain_text`
  checks no module reaches past them), `ResourceTable` runs every cell through `plain_cell`, and the
  app's `notify` does the same for notifications;
- `ControlFilter` is the last line: a Textual line filter that drops any control character still in
  a rendered line (from a widget not listed above), so nothing raw reaches the terminal even then.
"""

from __future__ import annotations

import functools
from typing import Any, cast

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.segment import Segment
from rich.table import Table as RichTable
from rich.text import Text
from textual.color import Color
from textual.content import Content
from textual.css.scalar import Scalar
from textual.filter import LineFilter
from textual.visual import VisualType
from textual.widgets import Label, Static, Tree

from tftui.model.plaintext import unsafe, visible
from tftui.ui.render.plain import plain_text

__all__ = [
    "ControlFilter",
    "PlainLabel",
    "PlainStatic",
    "PlainTree",
    "plain_cell",
    "plain_renderable",
]


def _plain_content(content: Content, *, multiline: bool) -> Content:
    """Textual `Content` (no console code builds one from object text; its styles are dropped
    if it ever holds a control character)."""
    if not unsafe(content.plain, multiline=multiline):
        return content
    return Content(visible(content.plain, multiline=multiline))


def _plain_table(table: RichTable, *, multiline: bool) -> RichTable:
    """A Rich table's headers and cells, made plain in place (Rich keeps a column's cells in
    `Column._cells`; there is no public setter, and copying a table would lose its settings)."""
    for column in table.columns:
        column.header = plain_renderable(column.header, multiline=multiline)
        column.footer = plain_renderable(column.footer, multiline=multiline)
        column._cells[:] = [plain_renderable(c, multiline=multiline) for c in column._cells]
    return table


def plain_renderable(renderable: Any, *, multiline: bool = True) -> Any:
    """What a widget may draw: `str` becomes `Text` (so it is never parsed as markup), `Text` and
    Textual `Content` get their controls escaped, `Group`s and Rich tables are walked. Other
    renderables (gauges, sparklines) are drawn from numbers and pass as they are; `ControlFilter`
    still covers them on screen."""
    if isinstance(renderable, str):
        return Text(visible(renderable, multiline=multiline))
    if isinstance(renderable, Text):
        return plain_text(renderable, multiline=multiline)
    if isinstance(renderable, Content):
        return _plain_content(renderable, multiline=multiline)
    if isinstance(renderable, Group):
        return Group(
            *(plain_renderable(r, multiline=multiline) for r in renderable.renderables), fit=renderable.fit
        )
    if isinstance(renderable, RichTable):
        return _plain_table(renderable, multiline=multiline)
    return renderable


def _widget_content(content: Any, *, multiline: bool) -> Any:
    """What a plain widget (built with `markup=False`) shows: a `str` stays a `str` (Textual reads
    it as plain text there), anything else as `plain_renderable`."""
    if isinstance(content, str):
        return visible(content, multiline=multiline)
    return plain_renderable(content, multiline=multiline)


def plain_cell(cell: RenderableType) -> RenderableType:
    """A DataTable cell: one line, never markup (the DataTable parses `str` cells as markup)."""
    if type(cell) is str:
        return _str_cell(cell)
    return plain_renderable(cell, multiline=False)


@functools.lru_cache(maxsize=16_384)
def _str_cell(text: str) -> Text:
    """A `str` cell's `Text`, kept by its text and handed to every cell showing it: a pool, a model,
    a phase or a figure repeats down a column, and the 1,000 rows a filter key brings up each made
    theirs anew (8,000 `Text`s, about 8 ms of the key's frame at 5,000 nodes). Sharing is safe:
    nothing changes a cell in place (the table draws it; a cut copies it first). At most 16,384
    (≈ 5 MiB): names are unique and only pass through; the values that repeat stay."""
    return cast(Text, plain_renderable(text, multiline=False))  # the one place a str becomes a Text


class PlainStatic(Static):
    """A `Static` whose content is always plain text (multi-line; newlines kept)."""

    MULTILINE = True

    def __init__(
        self,
        content: VisualType = "",
        *,
        expand: bool = False,
        shrink: bool = False,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(
            _widget_content(content, multiline=self.MULTILINE),
            expand=expand,
            shrink=shrink,
            markup=False,
            name=name,
            id=id,
            classes=classes,
            disabled=disabled,
        )

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        super().update(_widget_content(content, multiline=self.MULTILINE), layout=layout)


class PlainLabel(Label):
    """A `Label` whose content is always one line of plain text (newlines shown as `\\n`)."""

    def __init__(
        self,
        content: VisualType = "",
        *,
        expand: bool = False,
        shrink: bool = False,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(
            _widget_content(content, multiline=False),
            expand=expand,
            shrink=shrink,
            markup=False,
            name=name,
            id=id,
            classes=classes,
            disabled=disabled,
        )

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        """As `Label.update`, without the work when nothing the screen shows changes: the same
        text again repaints nothing, and a text of the same width repaints this label only.
        (Textual lays out the whole screen again on every `update`, and the header's labels are
        updated on every refresh: at 5,000 nodes each layout redrew the full screen.)"""
        shown = _widget_content(content, multiline=False)
        before = self.content
        if isinstance(shown, str) and isinstance(before, str):
            if shown == before:
                return
            layout = layout and cell_len(shown) != cell_len(before)
        super().update(shown, layout=layout and not self.sized_by_styles())

    def sized_by_styles(self) -> bool:
        """Whether the stylesheet fixes both dimensions (no `auto`): the text then cannot change
        the label's size, so a new text repaints it alone (the breadcrumb, whose count and filter
        change with every filter key: each layout cost 3-4 ms of the key's frame at 5,000 nodes)."""
        styles = self.styles
        return (
            styles.has_rule("width")
            and styles.has_rule("height")
            and not cast(Scalar, styles.width).is_auto
            and not cast(Scalar, styles.height).is_auto
        )


class ControlFilter(LineFilter):
    """Drops control characters from rendered lines: the net under the plain widgets.

    Everything the console builds is escaped before this point (and shows as `\\x1b`); this only
    catches text a Textual widget drew from somewhere else (an input's value, a toast's title).
    Dropping rather than escaping keeps the line's width, which the layout has already fixed.
    Textual caches filtered lines per line, so an unchanged screen costs nothing.
    """

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if not unsafe("".join(s.text for s in segments if not s.control)):  # one search a line
            return segments
        return [
            s if s.control or not s.text or not unsafe(s.text) else Segment(_drop(s.text), s.style, s.control)
            for s in segments
        ]


def _drop(text: str) -> str:
    return "".join(ch for ch in text if not unsafe(ch))


class PlainTree(Tree[Any]):
    """A `Tree` whose labels are plain text: Textual reads a `str` label as markup (a `[/]` in a pod
    name would raise, a `[link=…]` draw a link), so strings become `Text` with controls escaped."""

    def process_label(self, label: str | Text) -> Text:
        # escape before `Text` sees the string: Rich drops some controls (BEL) on construction
        text = Text(visible(label, multiline=False)) if isinstance(label, str) else label
        shown = plain_text(text, multiline=False)
        return shown.split()[0] if shown.plain else shown
