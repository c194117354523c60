"""`:xray`: the cluster as a tree, pool → node → GPU → worker (k9s `:xray`).

Each level says what matters for waste hunting in one line: allocated and used TFLOPS as a share
of capacity (`—` without usage data), counts below it. Children are added when a branch is first
expanded (2,000 nodes and 8,000 GPUs are not built up front); a refresh rebuilds the tree and opens
again what was open. Labels are object text, drawn plain (`PlainTree`). `d`/`y` describe or show
the object under the cursor; the `:ns` scope keeps what hosts that namespace's workers.

`/` filters the tree as k9s's xray does: an object stays when its line matches (`text`, `!text`,
`-l selector` on its labels) or something below it does, so every match keeps its ancestors
(pool → node → GPU → worker) and the branches leading to matches are open. That walks the whole
tree once per keystroke (labels only; no rows are read). `esc` clears the filter and the tree is
lazy again, with what was open before the filter open again.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from tftui.engine.state import Res
from tftui.engine.usage import Used
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.scope import RowFilter, namespaces_of, object_labels
from tftui.ui.render.views import Layout
from tftui.ui.screens.base import ResourceScreen
from tftui.ui.widgets.plain import PlainTree

Ref = tuple[str, str]
"""(kind, key) of a tree node: the object `d` and `y` open."""


def share(alloc: Res, cap: Res, used: Used | None) -> str:
    """`TF 45% alloc / 12% used` (`used —` without samples)."""
    if cap.tflops <= 0:
        return "TF —"
    text = f"TF {alloc.tflops / cap.tflops * 100:.0f}% alloc"
    if used is not None and used.has_data:
        return text + f" / {used.res.tflops / cap.tflops * 100:.0f}% used"
    return text + " / used —"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


Branch = tuple[str, Ref, bool, list["Branch"]]
"""(label, ref, whether the line itself matches the filter, kept children) of a filtered tree."""


class XrayScreen(ResourceScreen):
    """Pools, their nodes, GPUs and workers as one tree."""

    AUTO_FOCUS = "PlainTree"
    OBJECT_KINDS: ClassVar[dict[str, str]] = {}

    def __init__(self) -> None:
        super().__init__(("xray",))
        self._shown: tuple[int, str | None, RowFilter] | None = None  # (refresh, namespace, filter) shown
        self._opened_unfiltered: set[Ref] = set()  # the branches open before `/` (reopened by `esc`)

    def compose_body(self) -> ComposeResult:
        tree = PlainTree("cluster", id="xray")
        tree.show_root = False
        tree.auto_expand = True
        yield tree

    def default_focus(self) -> PlainTree:
        return self.query_one(PlainTree)

    # -- building ----------------------------------------------------------------------------------

    def _keep(self, data: ConsoleData, kind: str, key: str) -> bool:
        ns = self.tui.namespace
        return ns is None or ns in namespaces_of(data.state, kind, key)

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        rf = self.row_filter if self.row_filter.error is None else RowFilter()
        stamp = (self.tui.data_seq, self.tui.namespace, rf)
        if stamp == self._shown:
            return
        filtering = not rf.empty
        was_filtering = self._shown is not None and not self._shown[2].empty
        self._shown = stamp
        tree = self.query_one(PlainTree)
        if was_filtering:
            opened = self._opened_unfiltered  # what the filter opened is not what the operator opened
        else:
            opened = {n.data for n in _walk(tree.root) if n.is_expanded and n.data is not None}
            self._opened_unfiltered = opened
        cursor = tree.cursor_node.data if tree.cursor_node is not None else None
        tree.clear()
        st = data.state
        hits: list[TreeNode[Ref]] = []
        for name in sorted(st.pools):
            if not self._keep(data, "GPUPool", name):
                continue
            p = st.pools[name]
            label = f"{name}  {_plural(len(p.nodes), 'node')} · {share(p.allocated, p.capacity, data.usage.pools.get(name))}"
            if filtering:
                branch = self._filtered(data, rf, label, ("GPUPool", name), bool(p.nodes))
                if branch is not None:
                    self._add_filtered(tree.root, branch, hits)
                continue
            node = tree.root.add(label, data=("GPUPool", name), allow_expand=bool(p.nodes))
            self._reopen(data, node, opened)
        found = next((n for n in _walk(tree.root) if cursor is not None and n.data == cursor), None)
        if filtering and hits and (found is None or found not in hits):
            found = hits[0]  # the cursor on the first match
        if found is None and tree.root.children:  # a cleared tree has no cursor: enter would open nothing
            found = tree.root.children[0]
        if found is not None:
            tree.get_node_at_line(0)  # lays the lines out: a node added just now has no line before
            tree.move_cursor(found)

    def _reopen(self, data: ConsoleData, node: TreeNode[Ref], opened: set[Ref]) -> None:
        if node.data in opened:
            self._fill(data, node)
            node.expand()
            for child in node.children:
                self._reopen(data, child, opened)

    def _children(self, data: ConsoleData, kind: str, key: str) -> list[tuple[str, Ref, bool]]:
        """(label, ref, whether it can have children) of what is below the object `kind`/`key`."""
        st, usage = data.state, data.usage
        out: list[tuple[str, Ref, bool]] = []
        if kind == "GPUPool":
            pool = st.pools.get(key)
            for name in sorted(pool.nodes if pool is not None else []):
                n = st.nodes.get(name)
                if n is None or not self._keep(data, "GPUNode", name):
                    continue
                label = (
                    f"{name}  {n.phase} · {_plural(len(n.gpus), 'GPU')} · {_plural(len(n.workers), 'worker')}"
                    f" · {share(n.allocated, n.capacity, usage.nodes.get(name))}"
                )
                out.append((label, ("GPUNode", name), bool(n.gpus)))
        elif kind == "GPUNode":
            n = st.nodes.get(key)
            for name in sorted(n.gpus if n is not None else []):
                g = st.gpus.get(name)
                if g is None or not self._keep(data, "GPU", name):
                    continue
                label = (
                    f"{name}  {g.model} · {_plural(len(g.workers), 'worker')}"
                    f" · {share(g.allocated, g.capacity, usage.gpus.get(name))}"
                )
                out.append((label, ("GPU", name), bool(g.workers)))
        elif kind == "GPU":
            g = st.gpus.get(key)
            ns = self.tui.namespace
            for wkey in sorted(g.workers if g is not None else []):
                w = st.workers.get(wkey)
                if w is None or (ns is not None and w.namespace != ns):
                    continue
                label = f"{wkey}  {w.phase} · {w.workload or '—'} · TF {w.allocated.tflops:g} requested"
                out.append((label, ("Pod", wkey), False))
        return out

    def _fill(self, data: ConsoleData, node: TreeNode[Ref]) -> None:
        """Add the children of `node` (once)."""
        if node.children or node.data is None:
            return
        for label, ref, expandable in self._children(data, *node.data):
            if expandable:
                node.add(label, data=ref, allow_expand=True)
            else:
                node.add_leaf(label, data=ref)

    # -- `/` ---------------------------------------------------------------------------------------

    def _matches(self, data: ConsoleData, rf: RowFilter, label: str, ref: Ref) -> bool:
        if rf.selector is not None:
            labels = object_labels(data.state, *ref)
            return all(req.matches(labels) for req in rf.selector)
        return (rf.text in label.lower()) != rf.inverse

    def _filtered(
        self, data: ConsoleData, rf: RowFilter, label: str, ref: Ref, expandable: bool
    ) -> Branch | None:
        """The branch of `ref` with only what matches or leads to a match; None when nothing does."""
        kept: list[Branch] = []
        if expandable:
            for child in self._children(data, *ref):
                found = self._filtered(data, rf, *child)
                if found is not None:
                    kept.append(found)
        hit = self._matches(data, rf, label, ref)
        return (label, ref, hit, kept) if hit or kept else None

    def _add_filtered(self, parent: TreeNode[Ref], branch: Branch, hits: list[TreeNode[Ref]]) -> None:
        label, ref, hit, kept = branch
        node = (
            parent.add(label, data=ref, allow_expand=bool(kept)) if kept else parent.add_leaf(label, data=ref)
        )
        if hit:
            hits.append(node)
        for child in kept:
            self._add_filtered(node, child, hits)
        if kept:
            node.expand()

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[Ref]) -> None:
        event.stop()
        data = self.tui.data
        if data is not None:
            self._fill(data, event.node)

    def crumb_count(self, counts: list[str]) -> str:
        data = self.tui.data
        if data is None:
            return ""
        pools = [p for p in data.state.pools if self._keep(data, "GPUPool", p)]
        if not self.row_filter.empty and self.row_filter.error is None:
            shown = len(self.query_one(PlainTree).root.children)
            return f"{shown}/{_plural(len(pools), 'pool')}"
        return _plural(len(pools), "pool")

    def selected_object(self) -> tuple[str, str] | None:
        node = self.query_one(PlainTree).cursor_node
        return node.data if node is not None else None


def _walk(node: TreeNode[Ref]) -> list[TreeNode[Ref]]:
    out = []
    for child in node.children:
        out.append(child)
        out.extend(_walk(child))
    return out
