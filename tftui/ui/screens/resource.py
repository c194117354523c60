"""The resource screens: Pools, Nodes, GPUs, Workloads, and the drill-downs (node, workers).

Every screen has the same frame (`base.ResourceScreen`: header, breadcrumb, tables, `:`/`/` prompt,
footer) and re-renders when the app's `data` changes. Drill-down pushes a new screen with a longer
breadcrumb; `esc` pops it (k9s).
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import Static

from tftui.engine.pending import is_pending
from tftui.ui.actions import bindings
from tftui.ui.load.analysis import ALERTS, AUTOSCALE, OBJHISTORY, WASTE, AnalysisKey, AnalysisKind
from tftui.ui.load.autoscale import AutoscaleAnalysis
from tftui.ui.load.data import ConsoleData
from tftui.ui.load.objhistory import ObjectHistory
from tftui.ui.load.objhistory import subject as history_subject
from tftui.ui.render.nodeviews import gpus_table, node_summary, nodes_table
from tftui.ui.render.poolwaste import WASTE_EVERY, pool_waste, waste_loading, workloads_waste
from tftui.ui.render.views import Gauges, Layout, Table, pools_table
from tftui.ui.render.workviews import quota_summary, workers_table, workloads_table
from tftui.ui.screens.autoscale import AUTOSCALE_BINDINGS, AutoscaleActions
from tftui.ui.screens.base import ResourceScreen as ResourceScreen
from tftui.ui.screens.viewnames import VIEWS as VIEWS
from tftui.ui.widgets.history import HistorySparks
from tftui.ui.widgets.plain import PlainStatic
from tftui.ui.widgets.table import ResourceTable


def show_history(screen: ResourceScreen, kind: str, name: str) -> None:
    """Fill the screen's `HistorySparks` from the object's history analysis (or say it is coming)."""
    from tftui.ui.render.metricsviews import analysis_status

    key = history_subject(kind, name)
    analysis = screen.tui.analysis(OBJHISTORY, key)
    status = analysis_status(analysis, screen.tui.computing(OBJHISTORY, key), "the 24 h history")
    value = analysis.value if analysis is not None and isinstance(analysis.value, ObjectHistory) else None
    screen.query_one(HistorySparks).show(value, status)


POOL_BINDINGS: list[BindingType] = bindings("pool")
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
    OBJECT_KINDS: ClassVar[dict[str, str]] = {"main": "GPUPool"}
    CACHE_BUILDS: ClassVar[bool] = True
    ANALYSIS_EVERY: ClassVar[int] = WASTE_EVERY
    WHOLE_NAMES: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__(("pools",))

    def selected_pool(self) -> str | None:
        return self.query_one("#main", ResourceTable).cursor_key

    def analysis_keys(self) -> tuple[AnalysisKey, ...]:
        return ((WASTE, ""), (ALERTS, ""))  # per-pool waste and firing alerts, after the first screen

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        app = self.tui
        waste = pool_waste(
            data.state, app.analysis(WASTE), app.computing(WASTE), app.analysis(ALERTS), app.computing(ALERTS)
        )
        return pools_table(data, gauges, waste)

    def open(self, table_id: str, key: str) -> None:
        self.app.push_screen(NodesScreen(pool=key, trail=(*self.trail, key, "nodes")))


class NodesScreen(ResourceScreen):
    """GPU nodes (all, or one pool's); enter opens the node."""

    OBJECT_KINDS: ClassVar[dict[str, str]] = {"main": "GPUNode"}
    CACHE_BUILDS: ClassVar[bool] = True
    PREBUILD: ClassVar[bool] = True

    def __init__(self, pool: str | None = None, trail: tuple[str, ...] = ("nodes",)) -> None:
        super().__init__(trail)
        self.pool = pool

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        return nodes_table(data, gauges, self.pool, cache=self.rows_of(table_id))

    def worth_aside(self, data: ConsoleData) -> bool:
        return self.pool is None and super().worth_aside(data)  # one pool's nodes: a few rows

    def open(self, table_id: str, key: str) -> None:
        self.app.push_screen(NodeScreen(key, trail=(*self.trail, key)))


class GpusScreen(ResourceScreen):
    """Every GPU device; enter lists the workers holding it."""

    OBJECT_KINDS: ClassVar[dict[str, str]] = {"main": "GPU"}
    CACHE_BUILDS: ClassVar[bool] = True
    PREBUILD: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__(("gpus",))

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        return gpus_table(data, gauges, cache=self.rows_of(table_id))

    def open(self, table_id: str, key: str) -> None:
        self.app.push_screen(WorkersScreen("gpu", key, trail=(*self.trail, key, "workers")))


class WorkloadsScreen(AutoscaleActions, ResourceScreen):
    """Workloads with request per device, the engine's recommendation and request/used against
    limits; enter opens the workload, `a` turns its autoscaling on or off."""

    BINDINGS: ClassVar[list[BindingType]] = [*AUTOSCALE_BINDINGS, *bindings("worker")]

    OBJECT_KINDS: ClassVar[dict[str, str]] = {"main": "TensorFusionWorkload"}
    CACHE_BUILDS: ClassVar[bool] = True
    # built in the refresh thread: each new state computes every workload's effective autoscaling
    # configuration and its checks for the AUTOSCALE column (1.2 s of the interface thread at
    # 5,000 nodes); the analyses read are compared by identity when the table is taken
    PREBUILD: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__(("workloads",))

    def analysis_keys(self) -> tuple[AnalysisKey, ...]:
        return ((AUTOSCALE, ""), (WASTE, ""))  # recommendations; the waste $ column

    def analysis_every(self, kind: AnalysisKind) -> int:
        # the waste diagnosis over a day hardly moves between refreshes (as on the pools view)
        return WASTE_EVERY if kind == WASTE else self.ANALYSIS_EVERY

    def selected_workload(self) -> str | None:
        return self.query_one("#main", ResourceTable).cursor_key

    def action_admit(self) -> None:
        """`e` on a workload: admit its first Pending worker (the workers view shows each)."""
        data, key = self.tui.data, self.selected_workload()
        wv = data.state.workloads.get(key) if data is not None and key is not None else None
        pending = [w for w in (wv.workers if wv else []) if data is not None and is_pending(data.state, w)]
        if not pending:
            self.app.notify(f"{key or 'no workload'}: no Pending worker", severity="warning")
            return
        self.tui.start_admit(sorted(pending)[0])

    def compose_body(self) -> ComposeResult:
        yield PlainStatic("", id="quota-summary")
        yield ResourceTable(id="main")

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        summary = self.query_one("#quota-summary", Static)
        text = quota_summary(data, self.tui.namespace)
        summary.display = text is not None
        summary.update(text or "")

    def analyses_shown(self) -> tuple[object, ...]:
        """What the rows read of the analyses, not the analyses themselves: every refresh brings a
        new outcome, and one that shows the same (no metrics store: the same error each time; an
        error after a value: that value kept) must not rebuild 37,000 rows on the interface thread.
        `…` only until the first outcome: a recomputation keeps the last one on screen (as the
        values do), so the rows need not be built once for `…` and again for the outcome; and
        never without a metrics source, whose outcome is known (`—`)."""
        auto, waste = self.tui.analysis(AUTOSCALE), self.tui.analysis(WASTE)
        store = self.tui.data is None or self.tui.data.metrics_enabled
        return (
            store and auto is None and self.tui.computing(AUTOSCALE),
            auto.value if auto is not None else None,
            store and waste_loading(waste, self.tui.computing(WASTE)),
            waste.value if waste is not None else None,
        )

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        pending, value, loading, waste = self.analyses_shown()
        auto = value if isinstance(value, AutoscaleAnalysis) else None
        figures = workloads_waste(waste, loading is True)
        return workloads_table(
            data, gauges, auto, pending is True, cache=self.rows_of(table_id), waste=figures
        )

    def open(self, table_id: str, key: str) -> None:
        self.tui.open_workload(key, self.trail)


class NodeScreen(ResourceScreen):
    """One node: summary gauges, its GPUs and its workers (tab moves between the two tables)."""

    BINDINGS: ClassVar[list[BindingType]] = bindings("tables")

    COUNT_LABELS: ClassVar[dict[str, str]] = {"gpus": "GPUs", "workers": "workers"}
    OBJECT_KINDS: ClassVar[dict[str, str]] = {"gpus": "GPU", "workers": "Pod"}
    CACHE_BUILDS: ClassVar[bool] = True
    ANALYSIS_EVERY: ClassVar[int] = WASTE_EVERY  # 15-minute buckets of a day: hardly move per refresh

    def __init__(self, node: str, trail: tuple[str, ...]) -> None:
        super().__init__(trail)
        self.node = node

    def analysis_keys(self) -> tuple[AnalysisKey, ...]:
        return ((OBJHISTORY, history_subject("GPUNode", self.node)),)

    def compose_body(self) -> ComposeResult:
        yield PlainStatic("", id="node-summary")
        yield HistorySparks(id="node-history")
        yield ResourceTable(id="gpus")
        yield ResourceTable(id="workers")

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        if table_id == "gpus":
            return gpus_table(data, gauges, node=self.node, cache=self.rows_of(table_id))
        node = data.state.nodes.get(self.node)
        return workers_table(
            data, gauges, node.workers if node is not None else [], cache=self.rows_of(table_id)
        )

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        gauges = Gauges(layout, self.query_one("#gpus", ResourceTable).gauge_styles())
        self.query_one("#node-summary", Static).update(node_summary(data, self.node, gauges))
        show_history(self, "GPUNode", self.node)

    def open(self, table_id: str, key: str) -> None:
        if table_id == "gpus":
            self.app.push_screen(WorkersScreen("gpu", key, trail=(*self.trail, key, "workers")))
        else:
            self.open_worker(key)


class WorkersScreen(ResourceScreen):
    """Workers of one GPU or one workload; enter opens the worker's workload (or node), `e` admits a
    Pending one (the move set `d` describes)."""

    BINDINGS: ClassVar[list[BindingType]] = bindings("worker")
    OBJECT_KINDS: ClassVar[dict[str, str]] = {"main": "Pod"}
    CACHE_BUILDS: ClassVar[bool] = True
    ANALYSIS_EVERY: ClassVar[int] = WASTE_EVERY  # 15-minute buckets of a day: hardly move per refresh

    def __init__(self, kind: str, name: str, trail: tuple[str, ...]) -> None:
        super().__init__(trail)
        self.kind = kind
        self.name_ = name

    def analysis_keys(self) -> tuple[AnalysisKey, ...]:
        return ((OBJHISTORY, history_subject("GPU", self.name_)),) if self.kind == "gpu" else ()

    def compose_body(self) -> ComposeResult:
        if self.kind == "gpu":  # a GPU's detail: its 24 h history above the workers holding it
            yield HistorySparks(id="gpu-history")
        yield ResourceTable(id="main")

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        if self.kind == "gpu":
            show_history(self, "GPU", self.name_)

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        st = data.state
        if self.kind == "gpu":
            gpu = st.gpus.get(self.name_)
            keys = gpu.workers if gpu is not None else []
        else:
            wl = st.workloads.get(self.name_)
            keys = wl.workers if wl is not None else []
        return workers_table(data, gauges, keys, cache=self.rows_of(table_id))

    def action_admit(self) -> None:
        key = self.query_one("#main", ResourceTable).cursor_key
        if key is None:
            self.app.notify("no worker selected", severity="warning")
            return
        self.tui.start_admit(key)

    def open(self, table_id: str, key: str) -> None:
        self.open_worker(key)
