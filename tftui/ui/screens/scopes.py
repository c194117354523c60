"""`:ns` and `:ctx`: the namespaces of the cluster and the kubeconfig's contexts (k9s).

Enter on a namespace scopes every view to it (the breadcrumb says `ns <name>`), `0` or `:ns all`
clears the scope. Enter on a context switches the console to it live (`switching.ScopeCommands`);
the embedded demo and a dump have one context and say so in a line above the table.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import Static

from tftui.ui.actions import bindings
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.scope import cluster_namespaces
from tftui.ui.render.views import Column, Gauges, Layout, Row, Table
from tftui.ui.screens.base import ResourceScreen
from tftui.ui.switching import one_context_words
from tftui.ui.widgets.plain import PlainStatic
from tftui.ui.widgets.table import ResourceTable

NAMESPACE_COLUMNS = (
    Column("current", " ", 1),
    Column("name", "NAMESPACE", 12, 1),
    Column("workloads", "WORKLOADS", 9),
    Column("workers", "WRKS", 4),
    Column("gpus", "GPUS", 4),
    Column("pools", "POOLS", 8, 1),
    Column("quota", "QUOTA", 5),
)
CONTEXT_COLUMNS = (
    Column("current", " ", 1),
    Column("name", "CONTEXT", 12, 1),
    Column("cluster", "CLUSTER", 10, 1),
    Column("user", "USER", 8, 1),
    Column("namespace", "NAMESPACE", 9),
)


def namespaces_table(data: ConsoleData, current: str | None) -> Table:
    """One row per namespace holding workloads or workers: what it occupies (devices held, pools)."""
    st = data.state
    rows = []
    for ns in cluster_namespaces(st):
        workloads = [w for w in st.workloads.values() if w.namespace == ns]
        workers = [w for w in st.workers.values() if w.namespace == ns]
        gpus = {g for w in workers for g in w.gpu_ids}
        pools = sorted({w.pool for w in workers if w.pool} | {w.pool for w in workloads if w.pool})
        rows.append(
            Row(
                ns,
                {
                    "current": "*" if ns == current else "",
                    "name": ns,
                    "workloads": str(len(workloads)),
                    "workers": str(len(workers)),
                    "gpus": str(len(gpus)),
                    "pools": ",".join(pools) or "—",
                    "quota": "yes" if ns in st.quotas else "—",
                },
                " ".join([ns, *pools]).lower(),
            )
        )
    return Table(NAMESPACE_COLUMNS, tuple(rows))


class NamespacesScreen(ResourceScreen):
    """Namespaces; enter scopes every view to the selected one, `0` clears the scope."""

    BINDINGS: ClassVar[list[BindingType]] = bindings("namespaces")

    def __init__(self) -> None:
        super().__init__(("ns",))

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        return namespaces_table(data, self.tui.namespace)

    def open(self, table_id: str, key: str) -> None:
        self.tui.set_namespace(key)
        self.tui.switch_view("workloads")

    def action_all_namespaces(self) -> None:
        self.tui.set_namespace(None)


class ContextsScreen(ResourceScreen):
    """The kubeconfig's contexts (`*` the one in use); enter switches to the selected one."""

    def __init__(self) -> None:
        super().__init__(("ctx",))

    def compose_body(self) -> ComposeResult:
        yield PlainStatic("", id="ctx-note")
        yield ResourceTable(id="main")

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        contexts = self.tui.source_contexts()
        if contexts is None:  # demo, dump, in-cluster: the one source there is
            row = {"current": "*", "name": data.source, "cluster": "—", "user": "—", "namespace": "—"}
            return Table(CONTEXT_COLUMNS, (Row(data.source, row, data.source.lower()),))
        rows = tuple(
            Row(
                c.name,
                {
                    "current": "*" if c.current else "",
                    "name": c.name,
                    "cluster": c.cluster or "—",
                    "user": c.user or "—",
                    "namespace": c.namespace or "—",
                },
                f"{c.name} {c.cluster} {c.user}".lower(),
            )
            for c in contexts
        )
        return Table(CONTEXT_COLUMNS, rows)

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        note = self.query_one("#ctx-note", Static)
        single = self.tui.source_contexts() is None
        note.display = single
        note.update(one_context_words(data.source) if single else "")

    def open(self, table_id: str, key: str) -> None:
        if self.tui.source_contexts() is None:
            self.notify(one_context_words(key), severity="warning")
            return
        self.tui.switch_context(key)
