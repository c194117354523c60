"""Pure builders for the node and GPU views: their tables, the node flags and a node's summary line.

Split from `views` (which keeps the table model and the pools view) because each view kind is its own
set of columns; like every builder they only format what `ClusterState` and `UsageIndex` derived.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from tftui.engine.compaction import released_detail
from tftui.engine.state import ClusterState, GPUView, NodeView
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.format import NO_DATA, fmt_age
from tftui.ui.render.rowcache import RowCache
from tftui.ui.render.views import (
    ALL,
    NOT_NARROW,
    WIDE_ONLY,
    Gauges,
    Layout,
    Row,
    Table,
    _Col,
    _search,
    _table,
)

# -- nodes ---------------------------------------------------------------------------------------

RELEASING = "Releasing"
"""The PHASE of a node compaction released (cordoned or marked, its claim being deleted)."""

FLAG_LEGEND = (
    ("D", "do-not-disrupt", "compaction and defrag leave the node alone"),
    ("C", "cordoned", "the Kubernetes Node is unschedulable"),
    ("N", "native-gpu", "pods use GPUs outside TensorFusion"),
)


def node_flags(node: NodeView) -> list[str]:
    """The flag words of a node, in legend order."""
    out = []
    if node.do_not_disrupt:
        out.append("do-not-disrupt")
    if node.unschedulable:
        out.append("cordoned")
    if node.native_gpu_pods:
        out.append("native-gpu")
    return out


def _flag_letters(words: Sequence[str]) -> str:
    letters = {word: letter for letter, word, _ in FLAG_LEGEND}
    return "".join(letters[w] for w in words) or NO_DATA


NODE_COLUMNS = (
    _Col("name", "NAME", (14, 16, 20), ALL, flex=1),
    _Col("pool", "POOL", 12, NOT_NARROW, flex=1),
    _Col("phase", "PHASE", 8, NOT_NARROW),
    _Col("gpus", "GPUS", 4, ALL),
    _Col("workers", "WRKS", 4, ALL),
    _Col("flags", "FLAG", 4, ALL),
    _Col("tflops", "TFLOPS alloc/used", None, ALL),
    _Col("vram", "VRAM alloc/used", None, ALL),
    _Col("age", "AGE", 4, NOT_NARROW),
)


def nodes_table(
    data: ConsoleData, gauges: Gauges, pool: str | None = None, cache: RowCache[Row] | None = None
) -> Table:
    """GPU nodes (all, or `pool`'s); with `cache`, rows whose node, GPUs, usage, claim and age are
    as last time are re-used (`rowcache`)."""
    st, usage = data.state, data.usage
    names = sorted(st.pools[pool].nodes if pool in st.pools else []) if pool is not None else sorted(st.nodes)

    def make(name: str) -> Row:
        n = st.nodes[name]
        used = usage.nodes.get(name)
        flags = node_flags(n)
        models = sorted({st.gpus[g].model for g in n.gpus if st.gpus[g].model})
        # a node compaction released still reads Running until it is gone: say it is leaving
        phase = RELEASING if released_detail(st, n) is not None else n.phase
        return Row(
            name,
            {
                "name": name,
                "pool": n.pool or NO_DATA,
                "phase": phase,
                "gpus": str(len(n.gpus)),
                "workers": str(len(n.workers)),
                "flags": _flag_letters(flags),
                "tflops": gauges.tflops_cell(n.capacity, n.allocated, used),
                "vram": gauges.vram_cell(n.capacity, n.allocated, used),
                "age": fmt_age(n.created, data.refreshed_at),
            },
            _search(name, n.pool, phase, *flags, *models),
        )

    if cache is None:
        return _table(NODE_COLUMNS, gauges.layout, map(make, names))

    def deps(name: str) -> tuple[object, ...]:
        n = st.nodes[name]
        claim = st.claims.get(n.claim) if n.claim else None
        gpus = tuple(map(st.gpus.get, n.gpus))
        return (n, usage.nodes.get(name), gpus, claim, fmt_age(n.created, data.refreshed_at))

    rows = cache.rows(gauges.scope, ((name, deps(name), name) for name in names), make)
    return _table(NODE_COLUMNS, gauges.layout, rows)


def node_summary(data: ConsoleData, name: str, gauges: Gauges) -> Text:
    """The header lines of the node screen: identity, flags, and both gauges with figures."""
    n = data.state.nodes.get(name)
    if n is None:
        return Text(f"node {name} is no longer in the cluster", style="bold")
    used = data.usage.nodes.get(name)
    flags = node_flags(n)
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(name, "bold")
    leaving = released_detail(data.state, n)
    phase = f"{RELEASING} ({leaving})" if leaving is not None else n.phase
    text.append(f" · {n.pool or NO_DATA} · {phase} · age {fmt_age(n.created, data.refreshed_at)}")
    if flags:
        text.append(" · ")
        text.append(" ".join(flags), "bold")
    figures = Gauges(Layout(gauges.layout.name, gauges.layout.bar, True), gauges.styles)
    text.append("\nTFLOPS ")
    text.append_text(figures.tflops(n.capacity, n.allocated, used))
    text.append("   VRAM ")
    text.append_text(figures.vram(n.capacity, n.allocated, used))
    return text


# -- GPUs ----------------------------------------------------------------------------------------


def short_model(model: str, vendor: str) -> str:
    """`NVIDIA GeForce RTX 4090` → `GeForce RTX 4090`: the vendor prefix repeats on every row."""
    if not model:
        return NO_DATA
    for prefix in {vendor, "NVIDIA"}:
        if prefix and model.upper().startswith(prefix.upper() + " "):
            return model[len(prefix) + 1 :]
    return model


GPU_COLUMNS = (
    _Col("name", "NAME", (14, 20, 24), ALL, flex=1),
    _Col("node", "NODE", (13, 14, 14), ALL, flex=1),
    _Col("model", "MODEL", 12, NOT_NARROW, flex=2),
    _Col("iso", "ISO", 5, NOT_NARROW),
    _Col("parts", "PARTITIONS", 18, WIDE_ONLY),
    _Col("workers", "WRKS", 4, ALL),
    _Col("tflops", "TFLOPS alloc/used", None, ALL),
    _Col("vram", "VRAM alloc/used", None, ALL),
)
"""`ISO` is the GPU's isolation mode (a Dynamic GPU's current lock, `dynamic` while idle);
`PARTITIONS` the hardware partitions its workers hold, by template."""
NODE_GPU_COLUMNS = tuple(
    _Col(c.key, c.label, c.width, ALL if c.key == "iso" else NOT_NARROW) if c.key in ("iso", "parts") else c
    for c in GPU_COLUMNS
    if c.key != "node"
)


ISO_SHORT = {"shared": "share", "partitioned": "part", "dynamic": "dyn", "conflict": "clash"}


def partitions_text(data: ConsoleData, gpu: GPUView) -> str:
    """The GPU's partitions by template label, `×n` for repeats, in the order its workers hold them."""
    if not gpu.partitions:
        return NO_DATA
    hw = data.state.providers.model(gpu.model)
    counts: dict[str, int] = {}
    for use in gpu.partitions:
        t = hw.template(use.template) if hw is not None else None
        label = t.label if t is not None else use.template
        counts[label] = counts.get(label, 0) + 1
    return " ".join(f"{k}×{n}" if n > 1 else k for k, n in counts.items())


def _gpus_by_node(st: ClusterState) -> list[GPUView]:
    return sorted(
        st.gpus.values(), key=lambda g: (g.node or "", g.index if g.index is not None else -1, g.name)
    )


def gpus_table(
    data: ConsoleData, gauges: Gauges, node: str | None = None, cache: RowCache[Row] | None = None
) -> Table:
    """GPU devices (all, or `node`'s); with `cache`, rows whose GPU, usage and partition templates
    are as last time are re-used (`rowcache`)."""
    st, usage = data.state, data.usage
    if node is None:
        gpus = st.derived("console-gpus-by-node", _gpus_by_node)  # once per state: 40,000 keys
    else:
        gpus = sorted(st.gpus_of(node), key=lambda g: (g.index if g.index is not None else -1, g.name))

    def make(g: GPUView) -> Row:
        return Row(
            g.name,
            {
                "name": g.name,
                "node": g.node or NO_DATA,
                "model": short_model(g.model, g.vendor),
                "iso": ISO_SHORT.get(g.isolation.shown(), g.isolation.shown()),
                "parts": partitions_text(data, g),
                "workers": str(len(g.workers)),
                "tflops": gauges.tflops_cell(g.capacity, g.allocated, usage.gpus.get(g.name)),
                "vram": gauges.vram_cell(g.capacity, g.allocated, usage.gpus.get(g.name)),
            },
            _search(
                g.name,
                g.node,
                g.model,
                g.pool,
                g.phase,
                g.isolation.shown(),
                *(u.template for u in g.partitions),
            ),
        )

    columns = GPU_COLUMNS if node is None else NODE_GPU_COLUMNS
    if cache is None:
        return _table(columns, gauges.layout, map(make, gpus))
    providers = st.providers
    items = (
        (g.name, (g, usage.gpus.get(g.name), providers.model(g.model) if g.partitions else None), g)
        for g in gpus
    )
    return _table(columns, gauges.layout, cache.rows(gauges.scope, items, make))
