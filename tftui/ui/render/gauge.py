"""The allocated-versus-used gauge: two layers in one bar, with the numbers always printed.

The scheduler's booking (allocated) and the telemetry (used) are drawn in the same bar so waste is
visible at a glance: `███▒▒▒····  62%/ 31%` reads "62% of capacity is booked, 31% is really used".
One glyph meaning everywhere in the console: `█` is measured use, `▒` allocated (booked or
requested) but not used, `·` free; `▓` is what a placement would add (`render_shift`). When there
are no usage samples the used figure is `—`, never 0 (no data is not idle). A non-zero allocation
always keeps at least one `▒` cell beyond the used ones, so a small booking is never hidden.

Colour marks waste, not load: the `▒` part (booked, not used) and the allocated figure are drawn in
the warning colour when the gap between allocation and use is large (`GAP_WARN`, `GAP_CRIT` points
of capacity), used is drawn in the success colour. A full node that is used is fine; a full node
that idles is what the operator hunts. The percentages are always printed, so colour is never the
only carrier of meaning.

Workloads and workers are drawn against their request (`render_request_gauge`): the bar is the
request, `█` the part used, and the figure is use as a percentage of the request — the same figure
`tftui report` calls USE.

`render_gauge` is pure (numbers in, `rich.text.Text` out) so it can be unit-tested on exact characters
and used directly as a DataTable cell. Reading the themed styles off a widget is the table's part
(`widgets.table.gauge_styles_of`), so the builders draw gauges without importing Textual.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from rich.style import Style
from rich.text import Text

from tftui.ui.render.format import NO_DATA

USED_CHAR = "█"
ALLOC_CHAR = "▒"
FREE_CHAR = "·"
ADDED_CHAR = "▓"
"""What a placement adds to the allocation (`render_shift`); never `█`, which means used."""
FREED_CHAR = "░"
"""What a change frees (`render_shift`)."""
GAP_WARN = 25.0
"""Allocated minus used, in points of capacity, from which the unused booking is a warning."""
GAP_CRIT = 50.0
"""... and from which it is critical (half the object booked and idle)."""
REQUEST_GAP_WARN = 50.0
"""Against a request: unused share of the request (100 − use %) from which it is a warning ..."""
REQUEST_GAP_CRIT = 75.0
"""... and critical (a quarter of the request used, or less)."""
WARN_AT = 70.0
"""Percent of capacity from which a layer is drawn in the warning colour (k9s default)."""
CRIT_AT = 90.0
"""Percent of capacity from which a layer is drawn in the critical colour (k9s default)."""
PCT_WIDTH = 9
"""Width of the `aaa%/uuu%` figure printed after the bar."""

Level = Literal["ok", "warn", "crit"]
Piece = Literal["ok", "warn", "crit", "free", "alloc"]
COMPONENT_CLASSES = frozenset({"gauge--ok", "gauge--warn", "gauge--crit", "gauge--free", "gauge--alloc"})


@dataclass(frozen=True, slots=True)
class GaugeStyles:
    """Styles of the gauge levels; themes supply them through the `gauge--*` component classes."""

    ok: Style
    warn: Style
    crit: Style
    free: Style
    alloc: Style = field(default_factory=Style)
    """Allocated and unused with a small gap (or no usage data to judge it by)."""

    def level(self, level: Level) -> Style:
        return self.ok if level == "ok" else self.warn if level == "warn" else self.crit

    def piece(self, piece: Piece) -> Style:
        if piece == "free":
            return self.free
        if piece == "alloc":
            return self.alloc
        return self.level(piece)


DEFAULT_STYLES = GaugeStyles(
    ok=Style(color="green"),
    warn=Style(color="yellow"),
    crit=Style(color="red"),
    free=Style(color="bright_black"),
    alloc=Style(color="blue"),
)


def level_of(percent: float | None) -> Level:
    if percent is None or percent < WARN_AT:
        return "ok"
    return "warn" if percent < CRIT_AT else "crit"


def gap_level(gap: float | None, warn: float = GAP_WARN, crit: float = GAP_CRIT) -> Piece:
    """The colour of the unused booking: `alloc` (small gap, or unknown), `warn` or `crit`."""
    if gap is None or gap < warn:
        return "alloc"
    return "warn" if gap < crit else "crit"


def percent(part: float | None, whole: float) -> float | None:
    """`part` as a percentage of `whole`; None when either is unknown or the whole is empty."""
    if part is None or whole <= 0:
        return None
    return part / whole * 100.0


def format_percent(value: float | None) -> str:
    """Four characters: ` 62%`, `100%`, ` <1%` (tiny but not zero), `   —` (unknown)."""
    if value is None:
        return f"{NO_DATA:>4}"
    rounded = math.floor(value + 0.5)
    if rounded == 0 and value > 0:
        return " <1%"
    return f"{min(rounded, 999):>3d}%"


def _cells(value: float | None, capacity: float, width: int) -> int:
    """Cells a value fills; any non-zero value gets at least one cell so it is never invisible."""
    if value is None or value <= 0 or capacity <= 0:
        return 0
    return min(width, max(1, math.floor(value / capacity * width + 0.5)))


def _layers(allocated: float, used: float | None, capacity: float, width: int) -> tuple[int, int]:
    """(used cells, used + allocated-but-unused cells). A booking above the use keeps at least one
    `▒` cell of its own, taken from the used cells when the bar is full of them."""
    n_used = _cells(used, capacity, width)
    n_alloc = max(_cells(allocated, capacity, width), n_used)
    if allocated > 0 and capacity > 0 and (used is None or used < allocated) and n_alloc == n_used:
        if n_alloc < width:
            n_alloc += 1
        elif n_used > 1:
            n_used -= 1
    return n_used, n_alloc


def _gauge_parts(
    capacity: float,
    allocated: float,
    used: float | None,
    width: int,
    fmt: Callable[[float], str] | None,
    unit: str,
    value_width: int,
) -> list[tuple[str, Piece | None]]:
    """The gauge's pieces of text with the style each is drawn in (None: unstyled).

    Shared by `render_gauge` and `gauge_plain`, so the text sorted and exported is the text drawn.
    """
    alloc_pct = percent(allocated, capacity)
    used_pct = percent(used, capacity)
    gap = alloc_pct - used_pct if alloc_pct is not None and used_pct is not None else None
    booked = gap_level(gap)
    n_used, n_alloc = _layers(allocated, used, capacity, width)
    parts = _bar(n_used, n_alloc, width, booked)
    parts.append((format_percent(alloc_pct), booked if alloc_pct is not None else "free"))
    parts.append(("/", "free"))
    parts.append((format_percent(used_pct), "ok" if used_pct is not None else "free"))
    if fmt is not None:
        figures = f"{fmt(allocated)}/{fmt(capacity)}{(' ' + unit) if unit else ''}"
        parts.append((" " + figures.rjust(value_width), None))
    return parts


def _bar(n_used: int, n_alloc: int, width: int, booked: Piece) -> list[tuple[str, Piece | None]]:
    """The bar's cells: `█` used, `▒` allocated (styled by the gap), `·` free, then a space."""
    parts: list[tuple[str, Piece | None]] = []
    if n_used:
        parts.append((USED_CHAR * n_used, "ok"))
    if n_alloc > n_used:
        parts.append((ALLOC_CHAR * (n_alloc - n_used), booked))
    if width > n_alloc:
        parts.append((FREE_CHAR * (width - n_alloc), "free"))
    parts.append((" ", None))
    return parts


REQUEST_PCT_WIDTH = 4
"""Width of the ` 20%` figure (use as % of the request) printed after a request gauge."""


def _request_parts(
    request: float,
    used: float | None,
    width: int,
    fmt: Callable[[float], str] | None,
    unit: str,
    value_width: int,
) -> list[tuple[str, Piece | None]]:
    """A request gauge: the bar is the request, `█` the used part, `▒` the unused rest; use above
    the request (up to the limit) fills the bar and prints its real percentage."""
    used_pct = percent(used, request)
    booked = gap_level(100.0 - used_pct if used_pct is not None else None, REQUEST_GAP_WARN, REQUEST_GAP_CRIT)
    n_used, n_alloc = _layers(request, used, request, width)
    parts = _bar(n_used, n_alloc, width, booked)
    parts.append((format_percent(used_pct), booked if used_pct is not None else "free"))
    if fmt is not None:
        used_text = fmt(used) if used is not None else NO_DATA
        figures = f"{used_text}/{fmt(request)}{(' ' + unit) if unit else ''}"
        parts.append((" " + figures.rjust(value_width), None))
    return parts


def _text(parts: list[tuple[str, Piece | None]], styles: GaugeStyles) -> Text:
    text = Text(no_wrap=True, overflow="crop", end="")
    for piece, style in parts:
        if style is None:
            text.append(piece)
        else:
            text.append(piece, styles.piece(style))
    return text


def render_gauge(
    capacity: float,
    allocated: float,
    used: float | None,
    width: int,
    *,
    fmt: Callable[[float], str] | None = None,
    unit: str = "",
    value_width: int = 0,
    styles: GaugeStyles = DEFAULT_STYLES,
) -> Text:
    """Draw `width` bar cells, then `alloc%/used%`, then (with `fmt`) `allocated/capacity unit`.

    `used=None` means no usage samples: only the allocated layer is drawn and used prints `—`.
    Values above capacity fill the bar and print their real percentage (e.g. `120%`).
    `value_width` right-aligns the optional absolute figures so columns line up.
    """
    return _text(_gauge_parts(capacity, allocated, used, width, fmt, unit, value_width), styles)


def gauge_plain(
    capacity: float,
    allocated: float,
    used: float | None,
    width: int,
    *,
    fmt: Callable[[float], str] | None = None,
    unit: str = "",
    value_width: int = 0,
) -> str:
    """`render_gauge(...).plain` without building the styled Text: what sort and CSV export read
    for every row, where the styled gauge is only drawn for the rows on screen."""
    return "".join(
        piece for piece, _ in _gauge_parts(capacity, allocated, used, width, fmt, unit, value_width)
    )


def render_request_gauge(
    request: float,
    used: float | None,
    width: int,
    *,
    fmt: Callable[[float], str] | None = None,
    unit: str = "",
    value_width: int = 0,
    styles: GaugeStyles = DEFAULT_STYLES,
) -> Text:
    """Draw use against a request: `width` bar cells, `uuu%` of the request, then (with `fmt`)
    `used/request`."""
    return _text(_request_parts(request, used, width, fmt, unit, value_width), styles)


def request_gauge_plain(
    request: float,
    used: float | None,
    width: int,
    *,
    fmt: Callable[[float], str] | None = None,
    unit: str = "",
    value_width: int = 0,
) -> str:
    """`render_request_gauge(...).plain` without building the styled Text."""
    return "".join(piece for piece, _ in _request_parts(request, used, width, fmt, unit, value_width))


def gauge_width(bar: int, value_width: int = 0, *, request: bool = False) -> int:
    """Total characters of a gauge cell with a `bar`-cell bar (and optional figures)."""
    figure = REQUEST_PCT_WIDTH if request else PCT_WIDTH
    return bar + 1 + figure + (1 + value_width if value_width else 0)


SHIFT_WIDTH = 10
"""Width of the `bbb%→aaa%` figure printed after a before/after bar."""


def render_shift(before: float, after: float, width: int, *, styles: GaugeStyles = DEFAULT_STYLES) -> Text:
    """A before → after allocation bar (percent of capacity): `▒▒▒▓······  40%→ 52%`.

    `▒` is what is allocated now (the same glyph as in every gauge), `▓` what the change adds, `·`
    what stays free; a change that frees capacity shows the freed cells as `░`. The bar's colour
    follows the level after (a placement is about room left, not about waste).
    """
    n_before = _cells(before, 100.0, width)
    n_after = _cells(after, 100.0, width)
    style = styles.level(level_of(after))
    text = Text(no_wrap=True, overflow="crop", end="")
    low, high = min(n_before, n_after), max(n_before, n_after)
    if low:
        text.append(ALLOC_CHAR * low, styles.alloc)
    if high > low:
        if n_after > n_before:
            text.append(ADDED_CHAR * (high - low), style)
        else:
            text.append(FREED_CHAR * (high - low), styles.free)
    if width > high:
        text.append(FREE_CHAR * (width - high), styles.free)
    text.append(" ")
    text.append(format_percent(before), styles.level(level_of(before)))
    text.append("→", styles.free)
    text.append(format_percent(after), style)
    return text
