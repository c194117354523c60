"""A full-screen text view (k9s `y` and `d`): the selected object's YAML or description; esc closes."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.screen import Screen
from textual.widgets import TextArea

from tftui.model.plaintext import visible
from tftui.ui.actions import bindings
from tftui.ui.widgets.chrome import Breadcrumb, ConsoleHeader, SteadyFooter


class TextScreen(Screen[None]):
    """Read-only text with the console's header; arrows and page keys scroll, the mouse selects."""

    AUTO_FOCUS = "#text-scroll"
    BINDINGS: ClassVar[list[BindingType]] = bindings("text")

    def __init__(self, trail: tuple[str, ...], text: str) -> None:
        super().__init__()
        self.trail = trail
        self.text = visible(text, multiline=True)  # object text: controls shown as escapes

    def crumb_trail(self) -> tuple[str, ...]:
        return self.trail

    def compose(self) -> ComposeResult:
        yield ConsoleHeader()
        yield Breadcrumb(" › ".join(self.trail), id="crumbs")
        yield TextArea(
            self.text, id="text-scroll", read_only=True, soft_wrap=False, show_cursor=False, compact=True
        )
        yield SteadyFooter()

    def action_close(self) -> None:
        self.app.pop_screen()
