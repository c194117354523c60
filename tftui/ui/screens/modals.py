"""Overlays: `?` help (generated from the bindings of the screen it was opened on), `w` warnings,
the confirmation of dangerous actions and the placement-mode choice (Cancel focused by default).

Help is built from the live bindings rather than written by hand, so it cannot drift from the keys
the footer shows and the app obeys.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table as RichTable
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import DescendantFocus
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from tftui.engine.state import StateWarning
from tftui.ui.actions import bindings
from tftui.ui.render.gauge import ADDED_CHAR, ALLOC_CHAR, FREE_CHAR, USED_CHAR
from tftui.ui.render.nodeviews import FLAG_LEGEND
from tftui.ui.widgets.plain import PlainLabel, PlainStatic

NAVIGATION = "Move"
NAVIGATION_KEYS = "↑↓"


@dataclass(frozen=True, slots=True)
class HelpEntry:
    key: str
    description: str
    tooltip: str


class HelpScreen(ModalScreen[None]):
    """Keys of the screen it was opened from, then how to read gauges and node flags."""

    BINDINGS: ClassVar[list[BindingType]] = bindings("help")

    def __init__(self, title: str, entries: Sequence[HelpEntry], views: Sequence[str] = ()) -> None:
        super().__init__()
        self._title = title
        self._entries = entries
        self._views = views

    @property
    def keys_text(self) -> str:
        """The key list as plain lines (`key  Description  tooltip`), as a screen reader would get it."""
        return "\n".join(f"{e.key}  {e.description}  {e.tooltip}" for e in self._entries)

    def compose(self) -> ComposeResult:
        rows = [*self._entries, HelpEntry(NAVIGATION_KEYS, NAVIGATION, "the cursor (pgup pgdn too)")]
        keys = RichTable.grid(padding=(0, 1))
        keys.add_column(style="bold", no_wrap=True, justify="right", min_width=max(len(e.key) for e in rows))
        keys.add_column(no_wrap=True, min_width=max(len(e.description) for e in rows))
        # the tooltip wraps: at 80 columns a no-wrap grid collapsed the key column to nothing and cut
        # every description; the key and its name keep their width, the explanation takes the rest
        keys.add_column(style="dim", ratio=1, overflow="fold")
        for entry in rows:
            keys.add_row(entry.key, entry.description, entry.tooltip)
        views = RichTable.grid()
        views.add_column(width=7, style="bold", no_wrap=True)
        views.add_column()
        views.add_row("views", " ".join(f":{v}" for v in self._views))
        legend = Text(no_wrap=True, overflow="ellipsis", end="")
        legend.append("gauges ", "bold")
        legend.append(
            f"{USED_CHAR} used  {ALLOC_CHAR} allocated, not used  {FREE_CHAR} free  {ADDED_CHAR} a placement\n"
        )
        legend.append("       alloc%/used% of capacity; workloads and workers: use % of request\n")
        legend.append("       colour: a large allocated − used gap (waste), not load; — = no usage data\n")
        legend.append("flags  ", "bold")
        legend.append("  ".join(f"{letter} {word}" for letter, word, _ in FLAG_LEGEND) + "\n")
        legend.append("alerts ", "bold")
        legend.append("● firing  ◐ pending  ? no-data (nothing to read: not healthy)  ✓ ok")
        with Vertical(id="help-box"):
            yield PlainLabel(f"Help · {self._title}", id="help-title")
            with VerticalScroll(id="help-scroll"):
                yield PlainStatic(keys, id="help-keys")
                yield PlainStatic(legend, id="help-legend")
                if self._views:
                    yield PlainStatic(views, id="help-views")
            yield PlainLabel("esc or ? to close · ↑/↓ scroll · ! writes to the cluster", id="help-hint")


class WarningsScreen(ModalScreen[None]):
    """Inconsistencies found while indexing the snapshot (objects kept, problems listed)."""

    BINDINGS: ClassVar[list[BindingType]] = bindings("warnings")

    def __init__(self, warnings: Sequence[StateWarning]) -> None:
        super().__init__()
        self._warnings = warnings

    def compose(self) -> ComposeResult:
        text = Text(no_wrap=False)
        for w in self._warnings:
            text.append(w.ref, "bold")
            text.append(f": {w.message}\n")
        if not self._warnings:
            text.append("no warnings")
        with Vertical(id="warnings-box"):
            yield PlainLabel(f"⚠ {len(self._warnings)} warnings", id="warnings-title")
            with VerticalScroll():
                yield PlainStatic(text, id="warnings-list")
            yield PlainLabel("esc or w to close", id="warnings-hint")


class ConfirmScreen(ModalScreen[bool]):
    """A dangerous action's confirmation: what it will do, then Cancel (focused) and the action.

    `enter` on the focused Cancel closes; `tab` then `enter` confirms; `esc` cancels. The dialog
    only answers yes or no: the caller performs the action (through `TfTuiApp.perform`).
    """

    AUTO_FOCUS = "#confirm-cancel"
    BINDINGS: ClassVar[list[BindingType]] = bindings("confirm")

    def __init__(self, title: str, body: RenderableType, action_label: str) -> None:
        super().__init__()
        self._title = title
        self._body = body
        self._action_label = action_label

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield PlainLabel(self._title, id="confirm-title")
            with VerticalScroll(id="confirm-scroll", can_focus=False):
                yield PlainStatic(self._body, id="confirm-body")
            with Horizontal(id="confirm-buttons"):
                yield Button("Cancel", id="confirm-cancel", compact=True)
                yield Button(self._action_label, id="confirm-ok", variant="error", compact=True)
            yield PlainLabel("⏎ on Cancel closes · tab, ⏎ confirms · esc cancels", id="confirm-hint")

    def action_cancel(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm-ok")


class ModeScreen(ModalScreen[str | None]):
    """`m` on a pool: pick its new placement mode. Cancel is focused; focusing a mode's button shows
    what the change does (`describe(mode)`, behaviour P4); pressing it is the confirmation.

    Answers the chosen mode, or None. The caller writes (through `TfTuiApp.perform`).
    """

    AUTO_FOCUS = "#mode-cancel"
    BINDINGS: ClassVar[list[BindingType]] = bindings("mode")

    def __init__(self, pool: str, current: str, modes: Sequence[str], describe: Callable[[str], str]) -> None:
        super().__init__()
        self._pool = pool
        self._current = current
        self._modes = [m for m in modes if m != current]
        self._describe = describe

    def compose(self) -> ComposeResult:
        with Vertical(id="mode-box"):
            yield PlainLabel(f"Placement mode · pool {self._pool}", id="mode-title")
            yield PlainLabel(f"now {self._current}; choose the new mode", id="mode-current")
            with Horizontal(id="mode-buttons"):
                yield Button("Cancel", id="mode-cancel", compact=True)
                for i, mode in enumerate(self._modes):
                    yield Button(mode, id=f"mode-{i}", name=mode, compact=True)
            yield PlainStatic("", id="mode-body")
            yield PlainLabel("tab/→ choose · ⏎ on a mode changes it · esc cancels", id="mode-hint")

    def on_descendant_focus(self, event: DescendantFocus) -> None:
        widget = event.widget
        mode = widget.name if isinstance(widget, Button) and widget.id != "mode-cancel" else None
        body = self.query_one("#mode-body", Static)
        body.update(self._describe(mode) if mode else "nothing changes")

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.name if event.button.id != "mode-cancel" else None)
