"""Operation screens: compaction and defrag per pool, events and the runtime journal.

They share the frame of `ResourceScreen` (header, breadcrumb, `:`/`/` prompt, footer) and render
from `TfTuiApp.data.ops`, which the refresh worker built by asking the engine; nothing is computed
here. Compaction and defrag are master-detail: the pools table on top selects the pool whose
details fill the rest of the screen.
"""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import DataTable, Label, Static

from tftui.ui.actions import bindings
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.opsviews import (
    compaction_decisions_table,
    compaction_pools_table,
    compaction_summary,
    defrag_events,
    defrag_nodes_table,
    defrag_pools_table,
    defrag_summary,
    events_table,
    journal_table,
)
from tftui.ui.render.views import Gauges, Layout, Table
from tftui.ui.screens.base import ResourceScreen
from tftui.ui.screens.resource import POOL_BINDINGS, NodeScreen, PoolActions
from tftui.ui.widgets.plain import PlainLabel, PlainStatic
from tftui.ui.widgets.table import ResourceTable

NEXT_TABLE = bindings("tables")[0]


class PoolOpsScreen(PoolActions, ResourceScreen):
    """Master-detail over pools: `#pools` on top, the selected pool's details below."""

    NEEDS: ClassVar[frozenset[str]] = frozenset({"operations"})

    BINDINGS: ClassVar[list[BindingType]] = [NEXT_TABLE, *POOL_BINDINGS]
    FILTERED: ClassVar[frozenset[str] | None] = frozenset()  # set by subclasses: the detail table

    def __init__(self, trail: tuple[str, ...], pool: str | None = None) -> None:
        super().__init__(trail)
        self._initial_pool = pool

    def selected_pool(self) -> str | None:
        master = self.query_one("#pools", ResourceTable)
        if self._initial_pool is not None and self._initial_pool in master.row_keys:
            index = master.get_row_index(self._initial_pool)
            self._initial_pool = None
            if index != master.cursor_row:
                master.move_cursor(row=index, animate=False)
        return master.cursor_key

    def crumb_trail(self) -> tuple[str, ...]:
        pool = self.selected_pool() if self.is_mounted and self.tui.data is not None else None
        return (*self.trail, pool) if pool else self.trail

    @on(DataTable.RowHighlighted, "#pools")
    def _pool_moved(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self.render_data()

    def open(self, table_id: str, key: str) -> None:
        if table_id == "pools":
            self.query(ResourceTable).last().focus()
        elif self.tui.data is not None and key in self.tui.data.state.nodes:
            self.app.push_screen(NodeScreen(key, trail=(*self.crumb_trail(), key)))


class CompactionScreen(PoolOpsScreen):
    """Per pool: period, due or not, capacity against warm/min, and every node's decision."""

    COUNT_LABELS: ClassVar[dict[str, str]] = {"pools": "pools", "decisions": "nodes"}
    OBJECT_KINDS: ClassVar[dict[str, str]] = {"pools": "GPUPool", "decisions": "GPUNode"}
    FILTERED: ClassVar[frozenset[str] | None] = frozenset({"decisions"})

    def __init__(self, pool: str | None = None, trail: tuple[str, ...] = ("compaction",)) -> None:
        super().__init__(trail, pool)

    def compose_body(self) -> ComposeResult:
        yield ResourceTable(id="pools", classes="master")
        yield PlainStatic("", id="ops-summary")
        yield ResourceTable(id="decisions")

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        if table_id == "pools":
            return compaction_pools_table(data, gauges.layout)
        pool = self.selected_pool()
        return compaction_decisions_table(data.ops.compaction.get(pool or ""), gauges.layout)

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        summary = self.query_one("#ops-summary", Static)
        if data.ops.plan_error is not None:
            summary.update(f"the engine failed: {data.ops.plan_error}")
            return
        view = data.ops.compaction.get(self.selected_pool() or "")
        summary.update(compaction_summary(view, data.refreshed_at))


class DefragScreen(PoolOpsScreen):
    """Per pool: config validity, schedule and zone, window, state, candidates, the move, events."""

    COUNT_LABELS: ClassVar[dict[str, str]] = {"pools": "pools", "defrag-nodes": "nodes"}
    OBJECT_KINDS: ClassVar[dict[str, str]] = {"pools": "GPUPool", "defrag-nodes": "GPUNode"}
    FILTERED: ClassVar[frozenset[str] | None] = frozenset({"defrag-nodes"})

    def __init__(self, pool: str | None = None, trail: tuple[str, ...] = ("defrag",)) -> None:
        super().__init__(trail, pool)

    def compose_body(self) -> ComposeResult:
        yield ResourceTable(id="pools", classes="master")
        yield PlainStatic("", id="ops-summary")
        yield ResourceTable(id="defrag-nodes")
        yield PlainStatic("", id="defrag-events")

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        if table_id == "pools":
            return defrag_pools_table(data, gauges.layout)
        return defrag_nodes_table(data.ops.defrag.get(self.selected_pool() or ""), gauges.layout)

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        summary = self.query_one("#ops-summary", Static)
        events = self.query_one("#defrag-events", Static)
        if data.ops.plan_error is not None:
            summary.update(f"the engine failed: {data.ops.plan_error}")
            events.update("")
            return
        view = data.ops.defrag.get(self.selected_pool() or "")
        summary.update(defrag_summary(view, data.refreshed_at))
        events.update(defrag_events(view, limit=3 if layout.name == "narrow" else 5))


class EventsScreen(ResourceScreen):
    """The cluster's recorded events and the runtime journal, newest first."""

    NEEDS: ClassVar[frozenset[str]] = frozenset({"operations"})

    BINDINGS: ClassVar[list[BindingType]] = [NEXT_TABLE]
    COUNT_LABELS: ClassVar[dict[str, str]] = {"events": "events", "journal": "journal"}

    def __init__(self, trail: tuple[str, ...] = ("events",)) -> None:
        super().__init__(trail)

    def compose_body(self) -> ComposeResult:
        yield PlainLabel("events", id="events-title", classes="section-title")
        yield ResourceTable(id="events")
        yield PlainLabel("journal", id="journal-title", classes="section-title")
        yield ResourceTable(id="journal")

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        if table_id == "events":
            return events_table(data.ops.events, gauges.layout)
        return journal_table(data.ops.journal, gauges.layout)

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        ops = data.ops
        events = "cluster events, newest first"
        if not ops.events_enabled:
            events += f" · {data.source} records none (read-only source)"
        journal = "runtime journal, newest first"
        if not ops.journal_enabled:
            journal += " · no runtime attached (read-only console)"
        self.query_one("#events-title", Label).update(events)
        self.query_one("#journal-title", Label).update(journal)
