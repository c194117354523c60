"""Screen furniture shared by every view: the header, the breadcrumb, the `:`/`/` prompt, the footer.

The header reads the app's reactive state (`data`, `cluster_error`, `loading`) and re-renders when it
changes, so every screen in the stack shows the same source, refresh time and warnings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal, cast

from textual import events
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.geometry import Size
from textual.screen import Screen
from textual.suggester import SuggestFromList
from textual.widget import Widget
from textual.widgets import Footer, Input, Label

from tftui.ui.actions import bindings
from tftui.ui.host import Host
from tftui.ui.load.analysis import WASTE
from tftui.ui.load.data import store_label
from tftui.ui.render.format import fmt_time
from tftui.ui.render.hunting import cluster_summary
from tftui.ui.render.poolwaste import WASTE_EVERY, waste_summary
from tftui.ui.widgets.plain import PlainLabel

PromptMode = Literal["command", "filter"]


class ConsoleHeader(Vertical):
    """Source, last refresh, warnings count; a second line for cluster and metrics problems."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="header-main"):
            yield PlainLabel("tftui", id="header-title")
            yield PlainLabel("", id="header-source")
            yield PlainLabel("", id="header-time")
            yield PlainLabel("", id="header-clock")
            yield PlainLabel("", id="header-summary")
            yield PlainLabel("", id="header-warnings")
            yield PlainLabel("", id="header-link")
            yield PlainLabel("⏸ paused", id="header-paused")
            yield PlainLabel("read-only", id="header-readonly")
            yield PlainLabel("PRODUCTION", id="header-production")
        yield PlainLabel("", id="header-status")

    def on_mount(self) -> None:
        for attribute in ("data", "cluster_error", "loading", "paused", "stale", "analyses"):
            self.watch(self.app, attribute, self._render_state, init=False)
        self._render_state()

    def _render_state(self) -> None:
        app = cast(Host, self.app)
        data = app.data
        source = data.source if data is not None else app.source_hint
        user = app.context_user()  # the kubeconfig user entry's name, never its credential
        self.query_one("#header-source", Label).update(f"▸ {source}" + (f" · user {user}" if user else ""))
        self.query_one("#header-readonly", Label).display = app.read_only
        self.query_one("#header-paused", Label).display = app.paused
        production = app.is_production(source)
        self.query_one("#header-production", Label).display = production
        self.set_class(production, "-production")
        link = self.query_one("#header-link", Label)
        disconnected = (app.cluster_error or "").startswith("disconnected")
        link.update("DISCONNECTED" if disconnected else "STALE" if app.stale else "")
        link.display = disconnected or app.stale
        if data is None:
            when = "loading…" if app.cluster_error is None else "no data"
        else:
            # the mark's cell is kept while no refresh runs: the header keeps its width, so the start
            # and end of every refresh repaint one label instead of laying the whole screen out
            when = f"refreshed {fmt_time(data.refreshed_at)}" + (" ⟳" if app.loading else "  ")
            if data.pending:  # the first screen: the state is shown, the rest still comes
                when += f" · loading {' and '.join(data.pending)}…"
        self.query_one("#header-time", Label).update(when)
        clock = self.query_one("#header-clock", Label)
        clock.update(app.clock_note())
        clock.display = bool(app.clock_note())
        # the cluster at a glance (allocated vs used, what compaction frees); from 120 columns, where
        # the header has room for it beside the source and the clock
        summary = self.query_one("#header-summary", Label)
        wide = app.size.width >= 160
        text = cluster_summary(data, compact=not wide) if data is not None and app.size.width >= 120 else ""
        if text:  # waste $ over the diagnosis window: `…` until that analysis lands, `—` without metrics
            have = app.analysis(WASTE)
            if have is None or app.data_seq - have.seq >= WASTE_EVERY:
                app.request_analysis(WASTE)
            text += " · " + waste_summary(app.analysis(WASTE), app.computing(WASTE))
        summary.update(text)
        summary.display = bool(text)
        count = len(data.warnings) if data is not None else 0
        warnings = self.query_one("#header-warnings", Label)
        warnings.update(f"⚠ {count} warning{'s' if count != 1 else ''} [w]" if count else "")
        warnings.display = count > 0

        problems: list[str] = []
        error = False
        if app.cluster_error is not None:
            error = True
            kept = f" (showing {fmt_time(data.refreshed_at)})" if data is not None else ""
            problems.append(f"cluster: {app.cluster_error}{kept}")
        if data is not None and data.metrics_error is not None:
            error_text = data.metrics_error
            named = error_text.startswith("metrics")  # `metrics store host:port/db: …` names itself
            problems.append(f"{'' if named else 'metrics: '}{error_text} (allocation only)")
        elif data is not None and data.metrics_late is not None:
            late = data.metrics_late
            store = store_label(data.metrics_source or "") or "store"
            shown = (
                f"showing the samples of {fmt_time(late.shown_at)}"
                if late.shown_at is not None
                else "latest samples still loading"
            )
            problems.append(f"metrics: {store} slow, no answer since {fmt_time(late.asked_at)}; {shown}")
        elif data is not None and not data.metrics_enabled:
            problems.append("metrics: none configured (allocation only)")
        status = self.query_one("#header-status", Label)
        status.update("  ·  ".join(problems))
        status.display = bool(problems)
        status.set_class(error, "-error")


class Breadcrumb(PlainLabel):
    """Where the operator is (`pools › demo-dev › nodes`), the row count and the active filter."""

    def show(self, trail: tuple[str, ...], count: str, needle: str, extra: str = "") -> None:
        text = " › ".join(trail) + (f" ({count})" if count else "")
        namespace = getattr(self.app, "namespace", None)  # the `:ns` scope, on every screen
        text += f"   ns {namespace}" if namespace else ""
        if needle:
            text += f"   /{needle}"
        if extra:
            text += f"   {extra}"
        self.update(text)


class PromptInput(Input):
    """The prompt's input; `tab` accepts the completion like a shell."""

    BINDINGS: ClassVar[list[BindingType]] = bindings("prompt")

    @property
    def content_width(self) -> int:
        """At least the input's own width. `Input` sets its virtual size to its text's width on
        every keystroke and the layout sets it back to the widget's size, so each key typed laid
        the whole screen out again (3-4 ms of a filter key's frame at 5,000 nodes); a text that
        fits is the same width as the widget here, and a longer one scrolls as before."""
        return max(super().content_width, self.outer_size.width)

    def on_resize(self, _event: events.Resize) -> None:
        # laid out (the prompt opened): the virtual size the first key would set, set now and
        # silently, so that key does not lay the screen out either
        self.set_reactive(Widget.virtual_size, Size(self.content_width, 1))

    def action_complete(self) -> None:
        self.action_end()
        self.action_cursor_right()  # at the end of the text this accepts the suggestion

    def watch_value(self, value: str) -> None:
        prompt = self.parent
        if isinstance(prompt, Prompt):
            prompt.typed(value)


class Prompt(Horizontal):
    """k9s prompt: `:` switches view (with completion), `/` filters the rows.

    A filter's text reaches `on_filter` as it is typed, inside the key's own handling, not through
    `Input.Changed`: that message hops from the input to the screen through three message queues,
    and the key's frame (which ends the key's hold on background work, `model.giveway`) was often
    drawn before it arrived, so the rows were filtered while a refresh competed for the interpreter
    (at 5,000 nodes, while refreshing: a filter key's median 26 ms, 15 ms since)."""

    def __init__(
        self,
        commands: list[str],
        *,
        hint: str = "",
        on_filter: Callable[[str], None] | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.mode: PromptMode = "command"
        self._hint = hint
        self._suggester = SuggestFromList(commands, case_sensitive=False)
        self._on_filter = on_filter
        self._setting = False  # `open`/`close` set the text: not typed, no filter change

    def typed(self, value: str) -> None:
        """The input's text changed (typed, pasted, deleted)."""
        if self.mode == "filter" and not self._setting and self._on_filter is not None:
            self._on_filter(value)

    def compose(self) -> ComposeResult:
        yield PlainLabel(":", id="prompt-sigil")
        yield PromptInput(id="prompt-input", select_on_focus=False)

    @property
    def input(self) -> PromptInput:
        return self.query_one(PromptInput)

    def open(self, mode: PromptMode, value: str = "") -> None:
        self.mode = mode
        self.query_one("#prompt-sigil", Label).update(":" if mode == "command" else "/")
        field = self.input
        field.suggester = self._suggester if mode == "command" else None
        field.placeholder = self._hint if mode == "command" else "filter rows"
        self._set_text(value)
        field.cursor_position = len(value)
        self.display = True
        # Focus now, not after the queued messages (`focus()` defers it): keys typed right after
        # `:` may already wait in the queue behind it, and must reach the prompt, not the table
        # as hotkeys (seen under load, when a refresh kept the app busy).
        self.screen.set_focus(field)
        self._dim_footer(True)  # in this frame, not after it (the focus change's signal comes later)

    def close(self) -> None:
        self.display = False
        self._set_text("")  # clearing the text must not clear the filter
        self._dim_footer(False)

    def _dim_footer(self, on: bool) -> None:
        for footer in self.screen.query(SteadyFooter):
            footer.prompting(on)

    def _set_text(self, value: str) -> None:
        """The input's text set by the prompt itself: not typed, so no filter change."""
        field = self.input
        self._setting = True
        try:
            with field.prevent(Input.Changed):
                field.value = value
        finally:
            self._setting = False


class SteadyFooter(Footer):
    """Textual's footer, composed again only when the keys it shows changed, and kept as it is
    (dimmed) while the `:`/`/` prompt has the focus.

    Footer recomposes (a dozen widgets mounted and styled) on every `bindings_updated` signal, and
    the screen sends one on each focus change: `:` and its return, and each view shown again,
    re-made the same footer twice per switch. While the prompt is open the view's keys stay, as
    k9s keeps its key hints while one types a command (the prompt's own keys were `esc` and
    `ctrl+r` alone); dimmed, since the letters go to the prompt. Recomposing there cost a second
    layout and full frame after the prompt's own, within the first typed key's time.
    """

    def __init__(self) -> None:
        super().__init__(compact=True, show_command_palette=False)
        self._keys_shown: tuple[tuple[str, str, str, bool], ...] | None = None

    def prompting(self, on: bool) -> None:
        """Dim the keys shown while the prompt has the focus (once keys are shown at all)."""
        self.set_class(on and self._keys_shown is not None, "-prompting")

    def bindings_changed(self, screen: Screen[Any]) -> None:
        self.prompting(isinstance(screen.focused, PromptInput))
        if self.has_class("-prompting"):
            return  # the view's keys stay while the prompt has the focus
        keys = tuple(
            (binding.key, binding.description, binding.action, enabled)
            for _node, binding, enabled, _tooltip in screen.active_bindings.values()
            if binding.show
        )
        if keys == self._keys_shown:
            return
        super().bindings_changed(screen)
        if screen.app.app_focus and self.is_attached and screen is self.screen:  # it recomposes
            self._keys_shown = keys
