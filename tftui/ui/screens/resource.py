"""The resource screens: Pools, Nodes, GPUs, Workloads, and the drill-downs (node, workers).

Every screen has the same frame (header, breadcrumb, tables, `:`/`/` prompt, footer) and re-renders
when the app's `data` changes. Rendering goes through the pure builders of `views.py` and the
diffing `ResourceTable`, so a refresh only touches the cells that changed. Drill-down pushes a new
screen with a longer breadcrumb; `esc` pops it (k9s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input, Static

from tftui.ui.analysis import AnalysisKey
from tftui.ui.data import ConsoleData
from tftui.ui.views import (
    Gauges,
    Layout,
    Table,
    gpus_table,
    layout_for,
    node_summary,
    nodes_table,
    pools_table,
    workers_table,
    workloads_table,
)
from tftui.ui.widgets.chrome import Breadcrumb, ConsoleHeader, Prompt, PromptMode
from tftui.ui.widgets.table import ResourceTable

if TYPE_CHECKING:
    from tftui.ui.app import TfTuiApp

VIEWS = (
    "pools",
    "nodes",
    "gpus",
    "workloads",
    "place",
    "compaction",
    "defrag",
    "events",
    "waste",
    "alerts",
    "whatif",
)
"""The root views, in the order the prompt and the unknown-view hint list them."""
VIEW_ALIASES: dict[str, str] = {
    "pools": "pools",
    "pool": "pools",
    "nodes": "nodes",
    "node": "nodes",
    "no": "nodes",
    "gpus": "gpus",
    "gpu": "gpus",
    "workloads": "workloads",
    "workload": "workloads",
    "wl": "workloads",
    "place": "place",
    "placement": "place",
    "compaction": "compaction",
    "compact": "compaction",
    "defrag": "defrag",
    "events": "events",
    "event": "events",
    "ev": "events",
    "journal": "events",
    "waste": "waste",
    "diagnosis": "waste",
    "diag": "waste",
    "alerts": "alerts",
    "alert": "alerts",
    "whatif": "whatif",
    "what-if": "whatif",
}
"""`:` command → root view (k9s aliases)."""
QUIT_COMMANDS = ("quit", "q")
COMMANDS = [*VIEWS, *(a for a in VIEW_ALIASES if a not in VIEWS), "quit"]
"""Completion candidates, canonical names first so they win the prefix match."""
PROMPT_HINT = "  ".join(VIEWS)


class ResourceScreen(Screen[None]):
    """Frame and behaviour shared by every resource view; subclasses say what to build and open."""

    AUTO_FOCUS = "ResourceTable"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "colon",
            "command",
            "View",
            key_display=":",
            id="tftui.command",
            tooltip="Switch view by name (views listed below; tab completes)",
        ),
        Binding(
            "slash",
            "filter",
            "Filter",
            key_display="/",
            id="tftui.filter",
            tooltip="Filter rows by text (case-insensitive); esc clears",
        ),
        Binding(
            "escape",
            "back",
            "Back",
            key_display="esc",
            id="tftui.back",
            tooltip="Close the prompt, clear the filter, or go back one screen",
        ),
    ]

    COUNT_LABELS: ClassVar[dict[str, str]] = {}
    """What the breadcrumb calls each table's row count (empty: the bare number)."""
    FILTERED: ClassVar[frozenset[str] | None] = None
    """Ids of the tables `/` filters (None: all of them)."""

    def __init__(self, trail: tuple[str, ...]) -> None:
        super().__init__()
        self.trail = trail
        self.needle = ""
        self._before_prompt: Widget | None = None
        self._layout: Layout | None = None  # of the last render; a resize within it changes nothing

    @property
    def is_root(self) -> bool:
        """Root views (reached with `:`) have a one-element trail; drill-downs are deeper."""
        return len(self.trail) == 1

    @property
    def tui(self) -> TfTuiApp:
        return self.app  # type: ignore[return-value]

    def crumb_trail(self) -> tuple[str, ...]:
        """The breadcrumb (screens with a selection add it to their trail)."""
        return self.trail

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Every screen asks the app: write actions vanish when the console is read-only."""
        return self.tui.allows(action)

    def default_focus(self) -> Widget | None:
        """Where focus goes when the prompt closes and nothing was focused before."""
        return self.query(ResourceTable).first() if self.query(ResourceTable) else None

    # -- composition ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield ConsoleHeader()
        yield Breadcrumb("", id="crumbs", markup=False)
        yield from self.compose_body()
        yield Prompt(COMMANDS, hint=PROMPT_HINT, id="prompt")
        yield Footer(compact=True)

    def compose_body(self) -> ComposeResult:
        yield ResourceTable(id="main")

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        """The full (unfiltered) table for the ResourceTable with id `table_id`."""
        raise NotImplementedError

    def open(self, table_id: str, key: str) -> None:
        """Drill down from the row `key` of table `table_id` (default: nothing below)."""

    def analysis_keys(self) -> tuple[AnalysisKey, ...]:
        """The slow analyses this screen shows: requested on every render, cached per refresh."""
        return ()

    def crumb_count(self, counts: list[str]) -> str:
        """The breadcrumb's count part (screens waiting for an analysis say so)."""
        return ", ".join(counts)

    # -- rendering -----------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.query_one(Prompt).display = False
        self.watch(self.app, "data", self.render_data, init=False)
        if self.analysis_keys():
            self.watch(self.app, "analyses", self.render_data, init=False)
        self.render_data()

    def on_resize(self, event: Resize) -> None:
        if layout_for(event.size.width) != self._layout:
            self.render_data()

    def render_data(self) -> None:
        data = self.tui.data
        if data is None:
            self.query_one(Breadcrumb).show(self.crumb_trail(), "loading…", self.needle)
            return
        for kind, subject in self.analysis_keys():
            self.tui.request_analysis(kind, subject)
        layout = self._layout = layout_for(self.size.width or self.app.size.width)
        for name in ("narrow", "normal", "wide"):
            self.set_class(layout.name == name, f"-{name}")
        counts: list[str] = []
        for table in self.query(ResourceTable):
            full = self.build(table.id or "", data, Gauges(layout, table.gauge_styles()))
            filtered = self.FILTERED is None or (table.id or "") in self.FILTERED
            shown = full.filtered(self.needle) if filtered else full
            table.show(shown)
            n, total = len(shown.rows), len(full.rows)
            label = self.COUNT_LABELS.get(table.id or "", "")
            counts.append((str(n) if n == total else f"{n}/{total}") + (f" {label}" if label else ""))
        self.render_extra(data, layout)
        self.query_one(Breadcrumb).show(self.crumb_trail(), self.crumb_count(counts), self.needle)

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        """Hook for screens with more than tables (the node summary)."""

    # -- actions -------------------------------------------------------------------------------

    def _open_prompt(self, mode: PromptMode) -> None:
        prompt = self.query_one(Prompt)
        if not prompt.display:
            self._before_prompt = self.focused
        if mode == "command":
            prompt.open("command")
        else:
            prompt.open("filter", self.needle)

    def action_command(self) -> None:
        self._open_prompt("command")

    def action_filter(self) -> None:
        self._open_prompt("filter")

    def _close_prompt(self) -> None:
        self.query_one(Prompt).close()
        target = self._before_prompt if self._before_prompt is not None else self.default_focus()
        self._before_prompt = None
        if target is not None:
            target.focus()

    def _set_needle(self, needle: str) -> None:
        if needle != self.needle:
            self.needle = needle
            self.render_data()

    def action_back(self) -> None:
        prompt = self.query_one(Prompt)
        if prompt.display:
            if prompt.mode == "filter":
                self._set_needle("")
            self._close_prompt()
        elif self.needle:
            self._set_needle("")
        elif not self.is_root:
            self.app.pop_screen()

    @on(Input.Changed, "#prompt-input")
    def _prompt_changed(self, event: Input.Changed) -> None:
        if self.query_one(Prompt).mode == "filter":
            self._set_needle(event.value)

    @on(Input.Submitted, "#prompt-input")
    def _prompt_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        prompt = self.query_one(Prompt)
        if prompt.mode == "filter":
            self._set_needle(event.value)
            self._close_prompt()
            return
        command = event.value.strip().lower()
        self._close_prompt()
        if not command:
            return
        if command in QUIT_COMMANDS:
            self.app.exit()
        elif not self.tui.switch_view(command):
            self.notify(f"unknown view {command!r}: try {', '.join(VIEWS)}", severity="warning")

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.open(event.data_table.id or "", str(event.row_key.value))


POOL_BINDINGS: list[BindingType] = [
    Binding(
        "p",
        "place",
        "Place",
        id="tftui.place",
        tooltip="Where a new worker would land in this pool, under every mode",
    ),
    Binding(
        "c",
        "manual_compaction",
        "Compact",
        id="tftui.write.manual_compaction",
        tooltip="Manual compaction of this pool: lists what it releases, asks",
    ),
    Binding(
        "m",
        "placement_mode",
        "Mode",
        show=False,  # listed in help: the 80-column footer has no room left
        id="tftui.write.placement_mode",
        tooltip="Change the pool's placement mode (patches its SchedulingConfigTemplate), asks",
    ),
]
"""Keys acting on the selected pool; `tftui.write.*` ids are write actions (hidden when read-only)."""


class PoolActions:
    """`p`, `c` and `m` on whichever pool the screen has selected."""

    def selected_pool(self) -> str | None:
        raise NotImplementedError

    def action_place(self) -> None:
        screen: ResourceScreen = self  # type: ignore[assignment]
        screen.tui.open_placement(self.selected_pool(), screen.trail)

    def action_manual_compaction(self) -> None:
        screen: ResourceScreen = self  # type: ignore[assignment]
        pool = self.selected_pool()
        if pool is None:
            screen.notify("no pool selected", severity="warning")
            return
        screen.tui.start_manual_compaction(pool)

    def action_placement_mode(self) -> None:
        screen: ResourceScreen = self  # type: ignore[assignment]
        pool = self.selected_pool()
        if pool is None:
            screen.notify("no pool selected", severity="warning")
            return
        screen.tui.start_placement_mode(pool)


class PoolsScreen(PoolActions, ResourceScreen):
    """Pools with provisioning and placement modes and pool-wide gauges; enter lists the pool's nodes."""

    BINDINGS: ClassVar[list[BindingType]] = POOL_BINDINGS

    def __init__(self) -> None:
        super().__init__(("pools",))

    def selected_pool(self) -> str | None:
        return self.query_one("#main", ResourceTable).cursor_key

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        return pools_table(data, gauges)

    def open(self, table_id: str, key: str) -> None:
        self.app.push_screen(NodesScreen(pool=key, trail=(*self.trail, key, "nodes")))


class NodesScreen(ResourceScreen):
    """GPU nodes (all, or one pool's); enter opens the node."""

    def __init__(self, pool: str | None = None, trail: tuple[str, ...] = ("nodes",)) -> None:
        super().__init__(trail)
        self.pool = pool

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        return nodes_table(data, gauges, self.pool)

    def open(self, table_id: str, key: str) -> None:
        self.app.push_screen(NodeScreen(key, trail=(*self.trail, key)))


class GpusScreen(ResourceScreen):
    """Every GPU device; enter lists the workers holding it."""

    def __init__(self) -> None:
        super().__init__(("gpus",))

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        return gpus_table(data, gauges)

    def open(self, table_id: str, key: str) -> None:
        self.app.push_screen(WorkersScreen("gpu", key, trail=(*self.trail, key, "workers")))


class WorkloadsScreen(ResourceScreen):
    """Workloads with request per device and request/used against limits; enter opens the workload."""

    def __init__(self) -> None:
        super().__init__(("workloads",))

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        return workloads_table(data, gauges)

    def open(self, table_id: str, key: str) -> None:
        self.tui.open_workload(key, self.trail)


class NodeScreen(ResourceScreen):
    """One node: summary gauges, its GPUs and its workers (tab moves between the two tables)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "tab",
            "app.focus_next",
            "Next",
            id="tftui.next_table",
            tooltip="Move between the GPU and worker tables",
        ),
    ]

    COUNT_LABELS: ClassVar[dict[str, str]] = {"gpus": "GPUs", "workers": "workers"}

    def __init__(self, node: str, trail: tuple[str, ...]) -> None:
        super().__init__(trail)
        self.node = node

    def compose_body(self) -> ComposeResult:
        yield Static("", id="node-summary", markup=False)
        yield ResourceTable(id="gpus")
        yield ResourceTable(id="workers")

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        if table_id == "gpus":
            return gpus_table(data, gauges, node=self.node)
        node = data.state.nodes.get(self.node)
        return workers_table(data, gauges, node.workers if node is not None else [])

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        gauges = Gauges(layout, self.query_one("#gpus", ResourceTable).gauge_styles())
        self.query_one("#node-summary", Static).update(node_summary(data, self.node, gauges))

    def open(self, table_id: str, key: str) -> None:
        if table_id == "gpus":
            self.app.push_screen(WorkersScreen("gpu", key, trail=(*self.trail, key, "workers")))


class WorkersScreen(ResourceScreen):
    """Workers of one GPU or one workload; enter opens the worker's node."""

    def __init__(self, kind: str, name: str, trail: tuple[str, ...]) -> None:
        super().__init__(trail)
        self.kind = kind
        self.name_ = name

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        st = data.state
        if self.kind == "gpu":
            gpu = st.gpus.get(self.name_)
            keys = gpu.workers if gpu is not None else []
        else:
            wl = st.workloads.get(self.name_)
            keys = wl.workers if wl is not None else []
        return workers_table(data, gauges, keys)

    def open(self, table_id: str, key: str) -> None:
        data = self.tui.data
        worker = data.state.workers.get(key) if data is not None else None
        node = worker.node if worker is not None else None
        if data is not None and node is not None and node in data.state.nodes:
            self.app.push_screen(NodeScreen(node, trail=(*self.trail, node)))
