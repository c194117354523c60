"""Pure table builders: `ConsoleData` in, columns and rows of cells out (k9s `internal/render`).

Nothing here touches a widget, so every view can be tested without a screen. Builders only format
what `ClusterState` and `UsageIndex` already derived; they never decide anything.

Each view has three sets of columns chosen by the terminal width: narrow (below 120 columns)
drops secondary columns and keeps the gauges readable, wide (200 columns) adds the rest; from 160
columns the gauges also print their absolute figures. Column widths are not fixed: the builders keep
every cell's full text, and `widths.fit_table` sizes each column to its content on the rows shown
and cuts only what cannot fit the terminal (prose first, then names; numbers never).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from rich.console import RenderableType
from rich.text import Text

from tftui.engine.autoscale import AutoConfig, effective_autoscaling
from tftui.engine.compaction import released_detail
from tftui.engine.quota import quotas
from tftui.engine.state import ClusterState, GPUView, NodeView, Res, WorkerView, WorkloadView
from tftui.engine.usage import Used
from tftui.ui.load.autoscale import AutoscaleAnalysis
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.autoscaleview import rec_cell, used_cell
from tftui.ui.render.format import NO_DATA, fmt_age, fmt_bytes, fmt_num, fmt_req_lim, fmt_res
from tftui.ui.render.gauge import (
    DEFAULT_STYLES,
    GaugeStyles,
    gauge_plain,
    gauge_width,
    render_gauge,
    render_request_gauge,
    request_gauge_plain,
)
from tftui.ui.render.hunting import pool_hunt
from tftui.ui.render.poolwaste import LOADING, PoolWaste
from tftui.ui.render.rowcache import RowCache, Same

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
ROOMY = Layout("normal", 12, True)
WIDE = Layout("wide", 20, True)


LAYOUT_MIN_WIDTH: dict[LayoutName, int] = {"narrow": 80, "normal": 120, "wide": 200}
"""Terminal width from which a set of columns is used."""
FIGURES_FROM = 160
"""Terminal width from which the gauges also print their absolute figures."""


def layout_for(width: int) -> Layout:
    """Narrow below 120 columns, figures from 160, wide from 200."""
    if width < LAYOUT_MIN_WIDTH["normal"]:
        return NARROW
    if width < FIGURES_FROM:
        return NORMAL
    return ROOMY if width < LAYOUT_MIN_WIDTH["wide"] else WIDE


def layout_candidates(width: int) -> tuple[Layout, ...]:
    """`layout_for(width)`, then the same columns with less gauge (no figures, a shorter bar):
    what a screen falls back to when a table of the first does not fit without cutting names."""
    first = layout_for(width)
    out = [first]
    if first.figures:
        out.append(Layout(first.name, first.bar, False))
    if first.bar > NARROW.bar:
        out.append(Layout(first.name, NARROW.bar, False))
    return tuple(out)


Flex = Literal[0, 1, 2]
"""How a column gives way when a table is wider than the terminal: 0 never (numbers, gauges,
states), 2 first (free text: details, fixes, notes), 1 next (names), each down to its `width`."""


@dataclass(frozen=True, slots=True)
class Column:
    """A displayed column. `width` is what it is drawn at; before `widths.fit_table` sizes it, it is
    the least a flexible column is cut to (a fixed column's width is its content's)."""

    key: str
    label: str
    width: int
    flex: Flex = 0


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
    width: int | tuple[int, int, int] | None  # least width per layout (narrow, normal, wide); None: a gauge
    layouts: frozenset[LayoutName]
    flex: Flex = 0

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
NOT_NORMAL: frozenset[LayoutName] = frozenset({"narrow", "wide"})


def _columns(spec: Sequence[_Col], layout: Layout) -> tuple[Column, ...]:
    return tuple(Column(c.key, c.label, c.width_in(layout), c.flex) for c in spec if layout.name in c.layouts)


class Gauges:
    """Renders the TFLOPS and VRAM gauges of one layout with the table's theme styles."""

    def __init__(self, layout: Layout, styles: GaugeStyles = DEFAULT_STYLES) -> None:
        self.layout = layout
        self.styles = styles

    @property
    def scope(self) -> tuple[Layout, GaugeStyles]:
        """What rows drawn by these gauges depend on beyond their data (a `RowCache` scope)."""
        return (self.layout, self.styles)

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

    def draw_request(
        self, request: float, used: float | None, fmt: Callable[[float], str], unit: str
    ) -> Text:
        return render_request_gauge(
            request,
            used,
            self.layout.bar,
            fmt=self._fmt(fmt),
            unit=unit,
            value_width=FIGURES_WIDTH,
            styles=self.styles,
        )

    def plain_request(
        self, request: float, used: float | None, fmt: Callable[[float], str], unit: str
    ) -> str:
        return request_gauge_plain(
            request, used, self.layout.bar, fmt=self._fmt(fmt), unit=unit, value_width=FIGURES_WIDTH
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

    def request_cells(self, request: Res, used: Used | None) -> tuple[GaugeCell, GaugeCell]:
        """TFLOPS and VRAM use against a request (a workload's or worker's, × devices)."""
        have = used is not None and used.has_data
        t = used.res.tflops if used is not None and have else None
        v = used.res.vram if used is not None and have else None
        return (
            GaugeCell(self, request.tflops, request.tflops, t, fmt_num, "TF", request=True),
            GaugeCell(self, request.vram, request.vram, v, fmt_bytes, "", request=True),
        )


class GaugeCell(LazyCell):
    """One gauge of a table row: its numbers, drawn by `gauges` when displayed.

    One object per gauge holding plain floats: a 40,000-row build allocates few objects the cyclic
    garbage collector has to trace (with the cluster's millions of objects in memory, each full
    collection it triggers costs seconds). `request`: drawn against a request (`cap` is it), the
    figure is use as % of it; else against capacity, `alloc%/used%`. Export reads the numbers.
    """

    __slots__ = ("alloc", "cap", "fmt", "gauges", "request", "unit", "used")

    def __init__(
        self,
        gauges: Gauges,
        cap: float,
        alloc: float,
        used: float | None,
        fmt: Callable[[float], str],
        unit: str,
        *,
        request: bool = False,
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
        self.request = request

    @property
    def used_pct(self) -> float | None:
        """Use as % of capacity (of the request for a request gauge); None without data."""
        return self.used / self.cap * 100.0 if self.used is not None and self.cap > 0 else None

    @property
    def alloc_pct(self) -> float | None:
        return self.alloc / self.cap * 100.0 if self.cap > 0 else None

    @property
    def gap_pct(self) -> float | None:
        """Allocated minus used, in points of the gauge's scale; None without usage data."""
        a, u = self.alloc_pct, self.used_pct
        return a - u if a is not None and u is not None else None

    def text(self) -> str:
        if self.request:
            return self.gauges.plain_request(self.cap, self.used, self.fmt, self.unit)
        return self.gauges.plain(self.cap, self.alloc, self.used, self.fmt, self.unit)

    def draw(self) -> Text:
        if self.request:
            return self.gauges.draw_request(self.cap, self.used, self.fmt, self.unit)
        return self.gauges.draw(self.cap, self.alloc, self.used, self.fmt, self.unit)


class NumCell(LazyCell):
    """A figure shown formatted (`$2,419`, `1,234`) and right-aligned; sort and CSV read `value`
    (None: unknown, shown `—`, sorted last, exported empty)."""

    __slots__ = ("fmt", "style", "value")

    def __init__(self, value: float | None, fmt: Callable[[float], str], style: str = "") -> None:
        super().__init__()
        self.value, self.fmt, self.style = value, fmt, style

    def text(self) -> str:
        return NO_DATA if self.value is None else self.fmt(self.value)

    def draw(self) -> Text:
        return Text(self.plain, style=self.style, justify="right", no_wrap=True, end="")


def _search(*parts: object) -> str:
    return " ".join(str(p) for p in parts if p not in (None, "")).lower()


def _table(spec: Sequence[_Col], layout: Layout, rows: Iterable[Row]) -> Table:
    """Select the layout's columns; cells keep their full text (`widths.fit_table` cuts for display)."""
    return Table(_columns(spec, layout), tuple(rows))


# -- pools ---------------------------------------------------------------------------------------

POOL_COLUMNS = (
    _Col("name", "NAME", 12, ALL, flex=1),
    _Col("provisioning", "PROVISIONING", 12, WIDE_ONLY),
    _Col("placement", "PLACEMENT", 12, NOT_NARROW),  # a mode: never cut (`NodeCom…owLoad` was)
    _Col("nodes", "NODES", 5, ALL),
    _Col("gpus", "GPUS", 4, ALL),
    _Col("workers", "WRKS", 4, NOT_NORMAL),  # at 120 the waste columns take its room
    _Col("tflops", "TFLOPS alloc/used", None, ALL),
    _Col("vram", "VRAM alloc/used", None, ALL),
    _Col("releasable", "REL", 3, ALL),
    _Col("frag", "FRAG", 4, NOT_NARROW),  # at 80 columns the pool names come first
    _Col("gpu_hours", "GPU-h", 5, WIDE_ONLY),
    _Col("money", "WASTE $", 3, NOT_NARROW),
    _Col("alerts", "ALRT", 4, NOT_NARROW),
)
"""REL: nodes compaction releases now (or would, when not due); FRAG: the share of free TFLOPS on
GPUs that cannot host the pool's typical request (`fragmentation.fragmentation`); GPU-h and WASTE $:
the waste diagnosis over its window, ALRT: alerts firing now (`poolwaste`: `…` while the analyses
load, `—` without metrics). From 120 to 199 columns PROVISIONING, WRKS and GPU-h give way to them."""


def _pct(value: float) -> str:
    return f"{value:.0f}%"


def _figure(value: float | int | str | None, fmt: Callable[[float], str]) -> Cell:
    """A waste figure: `…` while its analysis loads, `—` unknown, else the number."""
    if isinstance(value, str):
        return Text(value, justify="right", no_wrap=True, end="")
    return NumCell(value, fmt)


def _money(value: float) -> str:
    return f"${value:,.0f}" if value >= 100 else f"${value:,.2f}"


def _money_plus(value: float) -> str:
    """Part of the waste has no price: the figure is a lower bound."""
    return _money(value) + "+"


def pools_table(data: ConsoleData, gauges: Gauges, waste: Mapping[str, PoolWaste] | None = None) -> Table:
    """Pools; `waste` (from `poolwaste.pool_waste`) fills WASTE GPU-h, $ and ALRT (`…` without it)."""
    st, usage = data.state, data.usage
    hunt = pool_hunt(data)
    loading = PoolWaste(LOADING, LOADING, False, LOADING)
    rows = []
    for name in sorted(st.pools):
        p = st.pools[name]
        used = usage.pools.get(name)
        pw = (waste or {}).get(name, loading)
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
                    "releasable": NumCell(hunt[name].releasable, str),
                    "frag": NumCell(hunt[name].fragmentation, _pct),
                    "gpu_hours": _figure(pw.gpu_hours, lambda h: f"{h:,.1f}"),
                    "money": _figure(pw.money, _money_plus if pw.unpriced else _money),
                    "alerts": _figure(pw.alerts, lambda n: f"{n:.0f}"),
                },
                _search(name, p.provisioning_mode, p.placement_mode, p.template),
            )
        )
    return _table(POOL_COLUMNS, gauges.layout, rows)


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


# -- workloads and workers -----------------------------------------------------------------------

WORKLOAD_COLUMNS = (
    _Col("key", "NAMESPACE/NAME", (21, 25, 0), NOT_WIDE, flex=1),
    _Col("namespace", "NAMESPACE", 10, WIDE_ONLY, flex=1),
    _Col("name", "NAME", 20, WIDE_ONLY, flex=1),
    _Col("pool", "POOL", (0, 10, 12), NOT_NARROW, flex=1),
    _Col("workers", "WRKS", 4, NOT_NARROW),
    _Col("qos", "QOS", 8, WIDE_ONLY),
    _Col("request", "REQUEST/GPU", 12, NOT_NARROW),
    _Col("used", "USED/GPU", 12, WIDE_ONLY),
    _Col("rec", "RECOMMENDED", 12, ALL),
    _Col("autoscale", "AUTOSCALE", 9, ALL),
    _Col("tflops", "TFLOPS use/req", None, ALL),
    _Col("vram", "VRAM use/req", None, ALL),
)
"""`USED/GPU` is usage per device at the recommender's target percentiles, `RECOMMENDED` the
engine's recommended request per device (bold: it would be applied); both `—` without data.
`AUTOSCALE` says whether autoscaling is on (`a` turns it on or off). The gauges are use against the
request (Σ request × devices): the same percentage `tftui report` calls USE."""


def workloads_table(
    data: ConsoleData,
    gauges: Gauges,
    autoscale: AutoscaleAnalysis | None = None,
    autoscale_pending: bool = False,
    cache: RowCache[Row] | None = None,
) -> Table:
    """Workloads; `autoscale` (the engine's recommendations, when computed) fills USED and REC.
    With `cache`, rows whose workload, usage, autoscaling and analysis are as last time are re-used."""
    st, usage = data.state, data.usage

    def enabled_of(wl: WorkloadView) -> bool:
        return AutoConfig.parse(effective_autoscaling(st, wl).get("autoSetResources")).enable

    def make(item: tuple[str, bool]) -> Row:
        key, enabled = item
        wl = st.workloads[key]
        used = usage.workloads.get(key)
        tflops, vram = gauges.request_cells(wl.allocated, used)
        return Row(
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
                "autoscale": "on" if enabled else "off",
                "tflops": tflops,
                "vram": vram,
            },
            _search(key, wl.pool, wl.qos, "autoscale-on" if enabled else "autoscale-off"),
        )

    items = []
    for key in sorted(st.workloads):
        wl = st.workloads[key]
        enabled = enabled_of(wl)
        deps = (wl, usage.workloads.get(key), enabled, Same(autoscale), autoscale_pending)
        items.append((key, deps, (key, enabled)))
    if cache is None:
        return _table(WORKLOAD_COLUMNS, gauges.layout, (make(arg) for _, _, arg in items))
    return _table(WORKLOAD_COLUMNS, gauges.layout, cache.rows(gauges.scope, items, make))


def quota_summary(data: ConsoleData, namespace: str | None = None) -> Text | None:
    """One line per namespace with a GPUResourceQuota: usage against each total it sets (bold at
    or above its alert threshold), or why the controller would not enforce it; None without any.
    `namespace` (the `:ns` scope): that namespace's line only."""
    views = {ns: v for ns, v in quotas(data.state).items() if namespace is None or ns == namespace}
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
    _Col("namespace", "NAMESPACE", 12, WIDE_ONLY, flex=1),
    _Col("name", "NAME", (20, 27, 34), ALL, flex=1),
    _Col("node", "NODE", 14, NOT_NARROW, flex=1),
    _Col("gpus", "GPUS", 4, ALL),
    _Col("qos", "QOS", 8, WIDE_ONLY),
    _Col("reqlim", "REQ/LIM PER GPU", 19, NOT_NARROW),
    _Col("tflops", "TFLOPS use/req", None, ALL),
    _Col("vram", "VRAM use/req", None, ALL),
)


def workers_table(
    data: ConsoleData, gauges: Gauges, keys: Iterable[str], cache: RowCache[Row] | None = None
) -> Table:
    """Workers with their node, devices, request and limit; gauges are use against the request.
    With `cache`, rows whose worker and usage are as last time are re-used (`rowcache`)."""
    st, usage = data.state, data.usage
    # by pod name: the namespace column is hidden below the wide layout
    workers = sorted((st.workers[k] for k in keys if k in st.workers), key=lambda w: (w.name, w.namespace))

    def make(w: WorkerView) -> Row:
        key = w.key
        used = usage.workers.get(key)
        tflops, vram = gauges.request_cells(w.allocated, used)
        return Row(
            key,
            {
                "namespace": w.namespace,
                "name": w.name,
                "workload": w.workload or NO_DATA,
                "node": w.node or NO_DATA,
                "gpus": str(w.gpu_count),
                "qos": w.qos,
                "reqlim": fmt_req_lim(w.request, w.limit),
                "tflops": tflops,
                "vram": vram,
            },
            _search(key, w.workload, w.node, w.qos, w.phase, *w.gpu_ids),
        )

    if cache is None:
        return _table(WORKER_COLUMNS, gauges.layout, map(make, workers))
    items = ((w.key, (w, usage.workers.get(w.key)), w) for w in workers)
    return _table(WORKER_COLUMNS, gauges.layout, cache.rows(gauges.scope, items, make))
