"""Placement preview: a request form and, per placement mode, where the worker would land.

The form is parsed by `forms.parse_request` (errors shown under their field); the preview itself
is the engine's `placement.preview`, computed in a thread worker so a big cluster never stalls the
UI, and re-run on every refresh while the screen is open.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Input, Select, Static
from textual.worker import get_current_worker

from tftui.engine.fit import Request
from tftui.engine.placement import Preview, preview
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.model.plaintext import visible
from tftui.ui.actions import bindings
from tftui.ui.forms import parse_request
from tftui.ui.load.data import ConsoleData, describe_error
from tftui.ui.render.gauge import DEFAULT_STYLES
from tftui.ui.render.placementview import placement_view
from tftui.ui.render.views import Gauges, Layout, Table
from tftui.ui.screens.base import ResourceScreen
from tftui.ui.widgets.chrome import Breadcrumb
from tftui.ui.widgets.plain import PlainLabel, PlainStatic

PREVIEW_GROUP = "preview"
DEFAULTS = {"amount": "10", "vram": "8Gi", "count": "1", "model": "", "isolation": "", "partition": "",
            "namespace": ""}  # fmt: skip
"""What the form holds when it opens, so the first preview shows at once."""
INPUTS = (
    ("amount", "compute", "TFLOPS 20 · 312500m · or 25%"),
    ("vram", "vram", "per GPU, e.g. 20Gi"),
    ("count", "gpus", "1-128"),
    ("model", "model", "optional, e.g. H100"),
    ("isolation", "isolation", "soft, hard, shared…"),
    ("partition", "partition", "e.g. 1g.10gb"),
    ("namespace", "namespace", "for its quota"),
)


def default_pool(state: ClusterState) -> str | None:
    """The pool annotated as default, else the first by name (as `tftui place`)."""
    for name in sorted(state.pools):
        ann = (state.pools[name].obj.get("metadata") or {}).get("annotations") or {}
        if ann.get(keys.IS_DEFAULT_POOL) == keys.TRUE:
            return name
    return min(state.pools, default=None)


class FormInput(Input):
    """A form field that leaves `:` to the screen: no request value holds one (quantities,
    percentages, counts, model names), and an operator typing `:pools` wants the view, not a
    field that swallowed it."""

    leaves_to_screen: ClassVar[frozenset[str]] = frozenset({"command"})

    def check_consume_key(self, key: str, character: str | None) -> bool:
        return character != ":" and super().check_consume_key(key, character)

    async def _on_key(self, event: events.Key) -> None:
        if event.character == ":":
            # not Input's to insert (Textual runs every class's handler unless prevented); the
            # event still bubbles to the `:` binding (the command prompt)
            event.prevent_default()
            return
        await super()._on_key(event)


class PreviewReady(Message):
    def __init__(self, preview: Preview, state: ClusterState) -> None:
        super().__init__()
        self.preview = preview
        self.state = state


class PreviewFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class PlacementScreen(ResourceScreen):
    """`p` on a pool, or `:place`: the request form and the per-mode preview."""

    AUTO_FOCUS = "#place-amount"
    BINDINGS: ClassVar[list[BindingType]] = bindings("placement")

    def __init__(self, pool: str | None = None, trail: tuple[str, ...] = ("place",)) -> None:
        super().__init__(trail)
        self.pool = pool
        self.preview: Preview | None = None
        self.request: Request | None = None
        self.errors: dict[str, str] = {}
        self._preview_state: ClusterState | None = None
        self._pool_options: list[str] = []

    # -- composition -----------------------------------------------------------------------------

    def compose_body(self) -> ComposeResult:
        with Vertical(id="place-form"):
            with Horizontal(classes="field", id="field-pool"):
                yield PlainLabel("pool", classes="field-label")
                yield Select[str]([], id="place-pool", compact=True, allow_blank=True, prompt="pool")
            for name, label, hint in INPUTS:
                with Horizontal(classes="field", id=f"field-{name}"):
                    yield PlainLabel(label, classes="field-label")
                    yield FormInput(
                        DEFAULTS[name],
                        placeholder=hint,
                        id=f"place-{name}",
                        compact=True,
                        select_on_focus=False,
                    )
            yield Button("Preview ⏎", id="place-submit", compact=True)
        yield PlainStatic("", id="place-errors")
        with VerticalScroll(id="place-results"):
            yield PlainStatic("", id="place-result")

    def crumb_trail(self) -> tuple[str, ...]:
        if self.is_root:  # `:place` › pool
            return (*self.trail, self.pool or "…")
        return (*self.trail[:-1], self.pool or "…", self.trail[-1])  # pools › pool › place

    def default_focus(self) -> Widget | None:
        return self.query_one("#place-results")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "filter":  # nothing to filter: the results are not rows
            return False
        return super().check_action(action, parameters)

    # -- rendering -------------------------------------------------------------------------------

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        raise NotImplementedError  # no resource tables on this screen

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        select = self.query_one("#place-pool", Select)
        pools = sorted(data.state.pools)
        if self.pool not in data.state.pools:
            self.pool = default_pool(data.state)
        if pools != self._pool_options:
            self._pool_options = pools
            with select.prevent(Select.Changed):
                select.set_options([(Text(visible(p)), p) for p in pools])  # a prompt str is markup
                if self.pool is not None:
                    select.value = self.pool
        if data.state is not self._preview_state:
            self.submit()
        else:
            self._show_result()

    def _show_result(self) -> None:
        result = self.query_one("#place-result", Static)
        if self.preview is None or self._preview_state is None:
            result.update("" if self.errors else "computing…")
            return
        layout = self._layout
        if layout is None:
            return
        result.update(placement_view(self.preview, self._preview_state, layout, DEFAULT_STYLES))

    def _show_errors(self) -> None:
        lines = []
        for name in ("pool", *(n for n, _, _ in INPUTS)):
            field = self.query_one(f"#field-{name}")
            has = name in self.errors
            field.set_class(has, "-invalid")
            if has:
                label = "compute" if name == "amount" else "gpus" if name == "count" else name
                lines.append(f"{label}: {self.errors[name]}")
        errors = self.query_one("#place-errors", Static)
        errors.update("\n".join(lines))
        errors.display = bool(lines)

    # -- input -----------------------------------------------------------------------------------

    def values(self) -> dict[str, str]:
        out = {name: self.query_one(f"#place-{name}", Input).value for name, _, _ in INPUTS}
        select = self.query_one("#place-pool", Select)
        out["pool"] = str(select.value) if isinstance(select.value, str) else (self.pool or "")
        return out

    def submit(self) -> None:
        """Validate the form; if it is valid, start the preview worker."""
        data = self.tui.data
        if data is None:
            return
        request, errors = parse_request(self.values(), set(data.state.pools))
        self.errors = errors
        self._show_errors()
        if request is None:
            self.preview = None
            self._preview_state = None
            self.query_one("#place-result", Static).update("")
            return
        self.request = request
        self.pool = self.values()["pool"]
        self._preview_worker(data.state, self.pool, request)
        self.query_one(Breadcrumb).show(self.crumb_trail(), "", "")

    def action_submit(self) -> None:
        self.submit()

    @on(Input.Submitted, ".field Input")
    def _field_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.submit()

    @on(Button.Pressed, "#place-submit")
    def _button(self, event: Button.Pressed) -> None:
        event.stop()
        self.submit()

    @on(Select.Changed, "#place-pool")
    def _pool_changed(self, event: Select.Changed) -> None:
        event.stop()
        if isinstance(event.value, str) and event.value != self.pool:
            self.pool = event.value
            self.submit()

    def action_back(self) -> None:
        """In the form of a root view, esc leaves the form (so `:` and `q` work again)."""
        focused = self.focused
        in_form = focused is not None and self.query_one("#place-form") in focused.ancestors_with_self
        if in_form and self.is_root and not self.query_one("#prompt").display:
            self.query_one("#place-results").focus()
            return
        super().action_back()

    # -- the worker ------------------------------------------------------------------------------

    @work(
        thread=True, exclusive=True, group=PREVIEW_GROUP, exit_on_error=False, description="placement preview"
    )
    def _preview_worker(self, state: ClusterState, pool: str, request: Request) -> None:
        worker = get_current_worker()
        try:
            result = preview(state, pool, request)
        except Exception as exc:  # an engine bug must not kill the console
            if not worker.is_cancelled:
                self.post_message(PreviewFailed(describe_error(exc)))
            return
        if not worker.is_cancelled:
            self.post_message(PreviewReady(result, state))

    def on_preview_ready(self, message: PreviewReady) -> None:
        self.preview = message.preview
        self._preview_state = message.state
        self._show_result()

    def on_preview_failed(self, message: PreviewFailed) -> None:
        self.preview = None
        self.query_one("#place-result", Static).update(f"the placement engine failed: {message.error}")
