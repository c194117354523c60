"""Pure table builders: `ConsoleData` in, columns and rows of cells out (k9s `internal/render`).

This module holds the table model every builder shares (layouts, columns, lazy cells, rows, gauges)
and the pools view; the node and GPU views are in `nodeviews`, workloads and workers in `workviews`.

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

from tftui.engine.state import Res
from tftui.engine.usage import Used
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.format import NO_DATA, fmt_bytes, fmt_num
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
