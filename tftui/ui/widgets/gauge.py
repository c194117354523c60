"""The allocated-versus-used gauge: two layers in one bar, with the numbers always printed.

The scheduler's booking (allocated) and the telemetry (used) are drawn in the same bar so waste is
visible at a glance: `███▒▒▒····  62%/ 31%` reads "62% of capacity is booked, 31% is really used".
Used is drawn solid over the lighter allocated layer; free capacity is `·`. When there are no usage
samples the used figure is `—`, never 0 (no data is not idle). Colour follows thresholds, but the
percentages are always printed so the gauge does not rely on colour alone.

`render_gauge` is pure (numbers in, `rich.text.Text` out) so it can be unit-tested on exact characters
and used directly as a DataTable cell.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from tftui.ui.format import NO_DATA

USED_CHAR = "█"
ALLOC_CHAR = "▒"
FREE_CHAR = "·"
WARN_AT = 70.0
"""Percent of capacity from which a layer is drawn in the warning colour (k9s default)."""
CRIT_AT = 90.0
"""Percent of capacity from which a layer is drawn in the critical colour (k9s default)."""
PCT_WIDTH = 9
"""Width of the `aaa%/uuu%` figure printed after the bar."""

Level = Literal["ok", "warn", "crit"]
COMPONENT_CLASSES = frozenset({"gauge--ok", "gauge--warn", "gauge--crit", "gauge--free"})


@dataclass(frozen=True, slots=True)
class GaugeStyles:
    """Styles of the gauge levels; themes supply them through the `gauge--*` component classes."""

    ok: Style
    warn: Style
    crit: Style
    free: Style

    def level(self, level: Level) -> Style:
        return self.ok if level == "ok" else self.warn if level == "warn" else self.crit


DEFAULT_STYLES = GaugeStyles(
    ok=Style(color="green"),
    warn=Style(color="yellow"),
    crit=Style(color="red"),
    free=Style(color="bright_black"),
)


def gauge_styles_of(widget: Widget) -> GaugeStyles:
    """Gauge styles from a widget's `gauge--*` component classes (foreground colour only).

    Only the colour is taken, so the table's cursor and zebra backgrounds still show through.
    """

    def fg(name: str) -> Style:
        styles = widget.get_component_styles(name)
        return Style(color=styles.color.rich_color, bold=styles.text_style.bold or None)

    return GaugeStyles(fg("gauge--ok"), fg("gauge--warn"), fg("gauge--crit"), fg("gauge--free"))


def level_of(percent: float | None) -> Level:
    if percent is None or percent < WARN_AT:
        return "ok"
    return "warn" if percent < CRIT_AT else "crit"


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


def _gauge_parts(
    capacity: float,
    allocated: float,
    used: float | None,
    width: int,
    fmt: Callable[[float], str] | None,
    unit: str,
    value_width: int,
) -> list[tuple[str, Level | Literal["free"] | None]]:
    """The gauge's pieces of text with the level each is coloured by (None: unstyled).

    Shared by `render_gauge` and `gauge_plain`, so the text sorted and exported is the text drawn.
    """
    alloc_pct = percent(allocated, capacity)
    used_pct = percent(used, capacity)
    alloc_level, used_level = level_of(alloc_pct), level_of(used_pct)
    n_used = _cells(used, capacity, width)
    n_alloc = max(_cells(allocated, capacity, width), n_used)
    parts: list[tuple[str, Level | Literal["free"] | None]] = []
    if n_used:
        parts.append((USED_CHAR * n_used, used_level))
    if n_alloc > n_used:
        parts.append((ALLOC_CHAR * (n_alloc - n_used), alloc_level))
    if width > n_alloc:
        parts.append((FREE_CHAR * (width - n_alloc), "free"))
    parts.append((" ", None))
    parts.append((format_percent(alloc_pct), alloc_level if alloc_pct is not None else "free"))
    parts.append(("/", "free"))
    parts.append((format_percent(used_pct), used_level if used_pct is not None else "free"))
    if fmt is not None:
        figures = f"{fmt(allocated)}/{fmt(capacity)}{(' ' + unit) if unit else ''}"
        parts.append((" " + figures.rjust(value_width), None))
    return parts


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
    text = Text(no_wrap=True, overflow="crop", end="")
    for piece, level in _gauge_parts(capacity, allocated, used, width, fmt, unit, value_width):
        if level is None:
            text.append(piece)
        else:
            text.append(piece, styles.free if level == "free" else styles.level(level))
    return text


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


def gauge_width(bar: int, value_width: int = 0) -> int:
    """Total characters of a gauge cell with a `bar`-cell bar (and optional figures)."""
    return bar + 1 + PCT_WIDTH + (1 + value_width if value_width else 0)


SHIFT_WIDTH = 10
"""Width of the `bbb%→aaa%` figure printed after a before/after bar."""


def render_shift(before: float, after: float, width: int, *, styles: GaugeStyles = DEFAULT_STYLES) -> Text:
    """A before → after allocation bar (percent of capacity): `███▒······  40%→ 52%`.

    `█` is what is allocated now, `▒` what the change adds, `·` what stays free; a change that frees
    capacity shows the freed cells as `▒` in the free colour. The bar's colour follows the level after.
    """
    n_before = _cells(before, 100.0, width)
    n_after = _cells(after, 100.0, width)
    style = styles.level(level_of(after))
    text = Text(no_wrap=True, overflow="crop", end="")
    low, high = min(n_before, n_after), max(n_before, n_after)
    if low:
        text.append(USED_CHAR * low, style)
    if high > low:
        text.append(ALLOC_CHAR * (high - low), style if n_after > n_before else styles.free)
    if width > high:
        text.append(FREE_CHAR * (width - high), styles.free)
    text.append(" ")
    text.append(format_percent(before), styles.level(level_of(before)))
    text.append("→", styles.free)
    text.append(format_percent(after), style)
    return text
