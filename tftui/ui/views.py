"""Pure table builders: `ConsoleData` in, columns and rows of cells out (k9s `internal/render`).

Nothing here touches a widget, so every view can be tested without a screen. Builders only format
what `ClusterState` and `UsageIndex` already derived; they never decide anything.

Each view has three layouts chosen by the terminal width: narrow (80 columns) drops secondary
columns and keeps the gauges readable, wide (200 columns) adds absolute figures after each gauge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from rich.console import RenderableType
from rich.text import Text

from tftui.engine.quota import quotas
from tftui.engine.state import GPUView, NodeView, Res, WorkerView
from tftui.engine.usage import Used
from tftui.ui.autoscaleview import AutoscaleAnalysis, rec_cell, used_cell
from tftui.ui.data import ConsoleData
from tftui.ui.format import NO_DATA, ellipsize, fmt_age, fmt_bytes, fmt_num, fmt_req_lim, fmt_res, is_number
from tftui.ui.widgets.gauge import DEFAULT_STYLES, GaugeStyles, gauge_plain, gauge_width, render_gauge

LayoutName = Literal["narrow", "normal", "wide"]
FIGURES_WIDTH = 12  # "1.2k/9.9k TF", "479Gi/1.2Ti"


@dataclass(frozen=True, slots=True)
class Layout:
    """How much room a table has: which columns show and how long the gauge bars are."""

    name: LayoutName
    bar: int
    figures: bool

    @property
    def gauge(self) -> int:
        return gauge_width(self.bar, FIGURES_WIDTH if self.figures else 0)


NARROW = Layout("narrow", 8, False)
NORMAL = Layout("normal", 10, False)
WIDE = Layout("wide", 20, True)


LAYOUT_MIN_WIDTH: dict[LayoutName, int] = {"narrow": 80, "normal": 120, "wide": 200}
"""Terminal width from which a layout is used; every table of a layout fits in it."""


def layout_for(width: int) -> Layout:
    """Narrow below 120 columns, wide from 200 (the snapshot sizes 80, 120, 200 hit all three)."""
    if width < LAYOUT_MIN_WIDTH["normal"]:
        return NARROW
    return NORMAL if width < LAYOUT_MIN_WIDTH["wide"] else WIDE


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    width: int


class LazyCell:
    """A cell whose text is cheap and whose styled rendering is drawn only when it is displayed.

    A view of 40,000 GPUs shows at most `ROW_LIMIT` rows, but sort and export read every row:
    `plain` (what sort, `↑`/`↓` deltas and CSV read) is computed on first use, `rendered` (the Rich
    renderable the table draws) only for the rows on screen. Both are kept once computed, so a
    cached build re-uses them on every filter keystroke. Subclasses say how to compute them.
    """

    __slots__ = ("_plain", "_rendered")

    def __init__(self) -> None:
        self._plain: str | None = None
        self._rendered: RenderableType | None = None

    def text(self) -> str:
        """The cell's characters as drawn, without styles."""
        raise NotImplementedError

    def draw(self) -> RenderableType:
        raise NotImplementedError

    @property
    def plain(self) -> str:
        if self._plain is None:
            self._plain = self.text()
        return self._plain

    @property
    def rendered(self) -> RenderableType:
        if self._rendered is None:
            self._rendered = self.draw()
        return self._rendered

    @property
    def drawn(self) -> bool:
        """Whether `rendered` has been asked for (tests and the bench check only shown rows are)."""
        return self._rendered is not None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.plain!r})"


Cell = RenderableType | LazyCell
"""A table cell: text or a Rich renderable as displayed, or one drawn when displayed."""


def rendered(cell: Cell) -> RenderableType:
    """What the DataTable draws for `cell`."""
    return cell.rendered if isinstance(cell, LazyCell) else cell


@dataclass(frozen=True, slots=True)
class Row:
    """One table row: cells by column key (hidden columns included) and the text `/` matches."""

    key: str
    cells: Mapping[str, Cell]
    search: str


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]

    def page(self, limit: int) -> Table:
        """The first `limit` rows (the table itself when it has no more)."""
        return self if len(self.rows) <= limit else Table(self.columns, self.rows[:limit])

    def filtered(self, needle: str) -> Table:
        """Rows whose text contains `needle` (case-insensitive substring, k9s `/`)."""
        needle = needle.strip().lower()
        if not needle:
            return self
        return Table(self.columns, tuple(r for r in self.rows if needle in r.search))


@dataclass(frozen=True, slots=True)
class _Col:
    key: str
    label: str
    width: int | tuple[int, int, int] | None  # per layout (narrow, normal, wide); None: a gauge
    layouts: frozenset[LayoutName]

    def width_in(self, layout: Layout) -> int:
        if self.width is None:
            return layout.gauge
        if isinstance(self.width, int):
            return self.width
        return self.width[("narrow", "normal", "wide").index(layout.name)]


ALL: frozenset[LayoutName] = frozenset({"narrow", "normal", "wide"})
NOT_NARROW: frozenset[LayoutName] = frozenset({"normal", "wide"})
WIDE_ONLY: frozenset[LayoutName] = frozenset({"wide"})
NOT_WIDE: frozenset[LayoutName] = frozenset({"narrow", "normal"})


def _columns(spec: Sequence[_Col], layout: Layout) -> tuple[Column, ...]:
    return tuple(Column(c.key, c.label, c.width_in(layout)) for c in spec if layout.name in c.layouts)


class Gauges:
    """Renders the TFLOPS and VRAM gauges of one layout with the table's theme styles."""

    def __init__(self, layout: Layout, styles: GaugeStyles = DEFAULT_STYLES) -> None:
        self.layout = layout
        self.styles = styles

    def _fmt(self, fmt: Callable[[float], str]) -> Callable[[float], str] | None:
        return fmt if self.layout.figures else None

    def draw(
        self, cap: float, alloc: float, used: float | None, fmt: Callable[[float], str], unit: str
    ) -> Text:
        return render_gauge(
            cap,
            alloc,
            used,
            self.layout.bar,
            fmt=self._fmt(fmt),
            unit=unit,
            value_width=FIGURES_WIDTH,
            styles=self.styles,
        )

    def plain(
        self, cap: float, alloc: float, used: float | None, fmt: Callable[[float], str], unit: str
    ) -> str:
        """`draw(...).plain`, without drawing."""
        return gauge_plain(
            cap, alloc, used, self.layout.bar, fmt=self._fmt(fmt), unit=unit, value_width=FIGURES_WIDTH
        )

    def tflops(self, cap: Res, alloc: Res, used: Used | None) -> Text:
        return self.tflops_cell(cap, alloc, used).draw()

    def vram(self, cap: Res, alloc: Res, used: Used | None) -> Text:
        return self.vram_cell(cap, alloc, used).draw()

    def tflops_cell(self, cap: Res, alloc: Res, used: Used | None) -> GaugeCell:
        """The TFLOPS gauge of a table row, drawn only if the row is displayed."""
        u = used.res.tflops if used is not None and used.has_tflops else None
        return GaugeCell(self, cap.tflops, alloc.tflops, u, fmt_num, "TF")

    def vram_cell(self, cap: Res, alloc: Res, used: Used | None) -> GaugeCell:
        """The VRAM gauge of a table row, drawn only if the row is displayed."""
        u = used.res.vram if used is not None and used.has_vram else None
        return GaugeCell(self, cap.vram, alloc.vram, u, fmt_bytes, "")


class GaugeCell(LazyCell):
    """One gauge of a table row: its numbers, drawn by `gauges` when displayed.

    One object per gauge holding plain floats: a 40,000-row build allocates few objects the cyclic
    garbage collector has to trace (with the cluster's millions of objects in memory, each full
    collection it triggers costs seconds).
    """

    __slots__ = ("alloc", "cap", "fmt", "gauges", "unit", "used")

    def __init__(
        self,
        gauges: Gauges,
        cap: float,
        alloc: float,
        used: float | None,
        fmt: Callable[[float], str],
        unit: str,
    ) -> None:
        super().__init__()
        self.gauges, self.cap, self.alloc, self.used, self.fmt, self.unit = (
            gauges,
            cap,
            alloc,
            used,
            fmt,
            unit,
        )

    def text(self) -> str:
        return self.gauges.plain(self.cap, self.alloc, self.used, self.fmt, self.unit)

    def draw(self) -> Text:
        return self.gauges.draw(self.cap, self.alloc, self.used, self.fmt, self.unit)


def _search(*parts: object) -> str:
    return " ".join(str(p) for p in parts if p not in (None, "")).lower()


def _table(spec: Sequence[_Col], layout: Layout, rows: Iterable[Row]) -> Table:
    """Select the layout's columns; text too long for its column is cut in the middle, numbers
    never (the table abbreviates them with a unit, or widens their column)."""
    columns = _columns(spec, layout)
    widths = {c.key: c.width for c in columns}
    fitted = []
    for row in rows:
        cut = {
            key: ellipsize(value, width)
            for key, width in widths.items()
            if isinstance(value := row.cells.get(key), str) and len(value) > width and not is_number(value)
        }
        # a row is copied only when a cell is cut: a large build allocates less
        fitted.append(Row(row.key, {**row.cells, **cut}, row.search) if cut else row)
    return Table(columns, tuple(fitted))


# -- pools ---------------------------------------------------------------------------------------

POOL_COLUMNS = (
    _Col("name", "NAME", 15, ALL),
    _Col("provisioning", "PROVISIONING", 12, NOT_NARROW),
    _Col("placement", "PLACEMENT", 21, NOT_NARROW),
    _Col("nodes", "NODES", 5, ALL),
    _Col("gpus", "GPUS", 4, ALL),
    _Col("workers", "WRKS", 4, ALL),
    _Col("tflops", "TFLOPS alloc/used", None, ALL),
    _Col("vram", "VRAM alloc/used", None, ALL),
)


def pools_table(data: ConsoleData, gauges: Gauges) -> Table:
    st, usage = data.state, data.usage
    rows = []
    for name in sorted(st.pools):
        p = st.pools[name]
        used = usage.pools.get(name)
        rows.append(
            Row(
                name,
                {
                    "name": name,
                    "provisioning": p.provisioning_mode,
                    "placement": p.placement_mode,
                    "nodes": str(len(p.nodes)),
                    "gpus": str(p.gpu_count),
                    "workers": str(p.worker_count),
                    "tflops": gauges.tflops_cell(p.capacity, p.allocated, used),
                    "vram": gauges.vram_cell(p.capacity, p.allocated, used),
                },
                _search(name, p.provisioning_mode, p.placement_mode, p.template),
            )
        )
    return _table(POOL_COLUMNS, gauges.layout, rows)


# -- nodes ---------------------------------------------------------------------------------------

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
    _Col("name", "NAME", (14, 16, 20), ALL),
    _Col("pool", "POOL", 14, NOT_NARROW),
    _Col("phase", "PHASE", 8, NOT_NARROW),
    _Col("gpus", "GPUS", 4, ALL),
    _Col("workers", "WRKS", 4, ALL),
    _Col("flags", "FLAG", 4, ALL),
    _Col("tflops", "TFLOPS alloc/used", None, ALL),
    _Col("vram", "VRAM alloc/used", None, ALL),
    _Col("age", "AGE", 4, NOT_NARROW),
)


def nodes_table(data: ConsoleData, gauges: Gauges, pool: str | None = None) -> Table:
    st, usage = data.state, data.usage
    names = sorted(st.pools[pool].nodes if pool in st.pools else []) if pool is not None else sorted(st.nodes)
    rows = []
    for name in names:
        n = st.nodes[name]
        used = usage.nodes.get(name)
        flags = node_flags(n)
        models = sorted({st.gpus[g].model for g in n.gpus if st.gpus[g].model})
        rows.append(
            Row(
                name,
                {
                    "name": name,
                    "pool": n.pool or NO_DATA,
                    "phase": n.phase,
                    "gpus": str(len(n.gpus)),
                    "workers": str(len(n.workers)),
                    "flags": _flag_letters(flags),
                    "tflops": gauges.tflops_cell(n.capacity, n.allocated, used),
                    "vram": gauges.vram_cell(n.capacity, n.allocated, used),
                    "age": fmt_age(n.created, data.refreshed_at),
                },
                _search(name, n.pool, n.phase, *flags, *models),
            )
        )
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
    text.append(f" · {n.pool or NO_DATA} · {n.phase} · age {fmt_age(n.created, data.refreshed_at)}")
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
    _Col("name", "NAME", (14, 20, 40), ALL),
    _Col("node", "NODE", (13, 14, 13), ALL),
    _Col("model", "MODEL", 16, NOT_NARROW),
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


def gpus_table(data: ConsoleData, gauges: Gauges, node: str | None = None) -> Table:
    st, usage = data.state, data.usage
    if node is None:
        gpus = sorted(
            st.gpus.values(), key=lambda g: (g.node or "", g.index if g.index is not None else -1, g.name)
        )
    else:
        gpus = sorted(st.gpus_of(node), key=lambda g: (g.index if g.index is not None else -1, g.name))
    rows = [
        Row(
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
        for g in gpus
    ]
    return _table(GPU_COLUMNS if node is None else NODE_GPU_COLUMNS, gauges.layout, rows)


# -- workloads and workers -----------------------------------------------------------------------

WORKLOAD_COLUMNS = (
    _Col("key", "NAMESPACE/NAME", (21, 25, 0), NOT_WIDE),
    _Col("namespace", "NAMESPACE", 10, WIDE_ONLY),
    _Col("name", "NAME", 20, WIDE_ONLY),
    _Col("pool", "POOL", (0, 10, 14), NOT_NARROW),
    _Col("workers", "WRKS", 4, NOT_NARROW),
    _Col("qos", "QOS", 8, WIDE_ONLY),
    _Col("request", "REQUEST/GPU", 12, NOT_NARROW),
    _Col("used", "USED/GPU", 12, WIDE_ONLY),
    _Col("rec", "RECOMMENDED", 12, ALL),
    _Col("tflops", "TFLOPS req/used", None, ALL),
    _Col("vram", "VRAM req/used", None, ALL),
)
"""`USED/GPU` is usage per device at the recommender's target percentiles, `RECOMMENDED` the
engine's recommended request per device (bold: it would be applied); both `—` without data."""


def _limits(workers: Iterable[WorkerView]) -> Res:
    """Σ limit × devices: the ceiling a workload's or worker's gauge is drawn against."""
    total = Res()
    for w in workers:
        total.add(w.limit, w.gpu_count)
    return total


def _ceiling(limit: Res, booked: Res) -> Res:
    """Limits, or the booking where no limit is set, so the bar always has a scale."""
    return Res(max(limit.tflops, booked.tflops), max(limit.vram, booked.vram))


def workloads_table(
    data: ConsoleData,
    gauges: Gauges,
    autoscale: AutoscaleAnalysis | None = None,
    autoscale_pending: bool = False,
) -> Table:
    """Workloads; `autoscale` (the engine's recommendations, when computed) fills USED and REC."""
    st, usage = data.state, data.usage
    rows = []
    for key in sorted(st.workloads):
        wl = st.workloads[key]
        cap = _ceiling(_limits(st.workers[w] for w in wl.workers if w in st.workers), wl.allocated)
        used = usage.workloads.get(key)
        rows.append(
            Row(
                key,
                {
                    "key": key,
                    "namespace": wl.namespace,
                    "name": wl.name,
                    "pool": wl.pool or NO_DATA,
                    "workers": str(len(wl.workers)),
                    "qos": wl.qos,
                    "request": fmt_res(wl.request),
                    "used": used_cell(autoscale, key, autoscale_pending),
                    "rec": rec_cell(autoscale, key, autoscale_pending),
                    "tflops": gauges.tflops_cell(cap, wl.allocated, used),
                    "vram": gauges.vram_cell(cap, wl.allocated, used),
                },
                _search(key, wl.pool, wl.qos),
            )
        )
    return _table(WORKLOAD_COLUMNS, gauges.layout, rows)


def quota_summary(data: ConsoleData) -> Text | None:
    """One line per namespace with a GPUResourceQuota: usage against each total it sets (bold at
    or above its alert threshold), or why the controller would not enforce it; None without any."""
    views = quotas(data.state)
    if not views:
        return None
    text = Text(no_wrap=True, overflow="ellipsis")
    for i, (ns, v) in enumerate(views.items()):
        q, u = v.quota, v.usage
        if i:
            text.append("\n")
        text.append(f"quota {ns}", "bold")
        if q.problem:
            text.append(f" · not enforced: {q.problem}")
            continue
        parts: list[tuple[str, float, float | None]] = []
        if q.total_requests is not None:
            parts.append((f"{fmt_num(u.req_tflops)}/{fmt_num(q.total_requests.tflops or 0)} TF req", u.req_tflops,
                          q.total_requests.tflops or 0))  # fmt: skip
            parts.append((f"{fmt_bytes(u.req_vram)}/{fmt_bytes(q.total_requests.vram or 0)} req", u.req_vram,
                          q.total_requests.vram or 0))  # fmt: skip
        if q.total_limits is not None:
            parts.append((f"{fmt_num(u.lim_tflops)}/{fmt_num(q.total_limits.tflops or 0)} TF lim", u.lim_tflops,
                          q.total_limits.tflops or 0))  # fmt: skip
        if q.max_workers is not None:
            parts.append((f"{u.workers}/{q.max_workers} workers", u.workers, q.max_workers))
        for label, used, total in parts:
            text.append(" · ")
            alert = total is not None and (total <= 0 or used >= total * q.alert_percent / 100.0)
            text.append(label, "bold" if alert else "")
    return text


WORKER_COLUMNS = (
    _Col("namespace", "NAMESPACE", 12, WIDE_ONLY),
    _Col("name", "NAME", (28, 27, 34), ALL),
    _Col("node", "NODE", 14, NOT_NARROW),
    _Col("gpus", "GPUS", 4, ALL),
    _Col("qos", "QOS", 8, WIDE_ONLY),
    _Col("reqlim", "REQ/LIM PER GPU", 19, NOT_NARROW),
    _Col("tflops", "TFLOPS req/used", None, ALL),
    _Col("vram", "VRAM req/used", None, ALL),
)


def workers_table(data: ConsoleData, gauges: Gauges, keys: Iterable[str]) -> Table:
    """Workers with their node, devices, request and limit; gauges are drawn against the limit."""
    st, usage = data.state, data.usage
    rows = []
    # by pod name: the namespace column is hidden below the wide layout
    for w in sorted((st.workers[k] for k in keys if k in st.workers), key=lambda w: (w.name, w.namespace)):
        key = w.key
        cap = _ceiling(_limits([w]), w.allocated)
        used = usage.workers.get(key)
        rows.append(
            Row(
                key,
                {
                    "namespace": w.namespace,
                    "name": w.name,
                    "workload": w.workload or NO_DATA,
                    "node": w.node or NO_DATA,
                    "gpus": str(w.gpu_count),
                    "qos": w.qos,
                    "reqlim": fmt_req_lim(w.request, w.limit),
                    "tflops": gauges.tflops_cell(cap, w.allocated, used),
                    "vram": gauges.vram_cell(cap, w.allocated, used),
                },
                _search(key, w.workload, w.node, w.qos, w.phase, *w.gpu_ids),
            )
        )
    return _table(WORKER_COLUMNS, gauges.layout, rows)
