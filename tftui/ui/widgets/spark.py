"""A sparkline on a fixed scale from 0 to a ceiling (a workload's request).

Textual's `Sparkline` stretches its data from min to max, so use that wanders between 11 and 14
TFLOPS fills the bar as if it were saturated against a 60 TFLOPS request. Waste hunting needs the
opposite: the bar's top is the request, so a low line reads "mostly idle". Values above the ceiling
(bursting towards the limit) are drawn full and the scale grows to them.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.color import Color as RichColor
from rich.color import blend_rgb
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from textual.app import RenderResult as WidgetRenderResult
from textual.reactive import reactive
from textual.widgets import Sparkline

BARS = "▁▂▃▄▅▆▇█"


def _ratios(data: Sequence[float], width: int, ceiling: float | None) -> list[float]:
    if not data or width <= 0:
        return []
    top = max(max(data), ceiling or 0.0)
    n = len(data)
    values = (
        [max(data[i * n // width : max(i * n // width + 1, (i + 1) * n // width)]) for i in range(width)]
        if n >= width
        else [data[i * n // width] for i in range(width)]
    )
    return [max(0.0, v) / top if top > 0 else 0.0 for v in values]


def bar_lines(data: Sequence[float], width: int, ceiling: float | None, height: int = 1) -> list[str]:
    """The glyphs of a sparkline `height` lines high, top line first: a cell's bar is its value's
    share of max(ceiling, max(data)) in eighths of the height."""
    ratios = _ratios(data, width, ceiling)
    steps = len(BARS) * height
    lines: list[str] = []
    for line in reversed(range(height)):
        low = line * len(BARS)
        chars = []
        for r in ratios:
            level = round(r * steps)  # eighths filled in all
            if level <= low:
                chars.append(BARS[0] if line == 0 else " ")
            elif level >= low + len(BARS):
                chars.append(BARS[-1])
            else:
                chars.append(BARS[level - low - 1])
        lines.append("".join(chars))
    return lines


class ScaledBars:
    """Rich renderable of `bar_lines`, coloured from `low` to `high` by each cell's share."""

    def __init__(
        self,
        data: Sequence[float],
        ceiling: float | None,
        width: int,
        height: int,
        low: RichColor,
        high: RichColor,
    ) -> None:
        self.data, self.ceiling, self.width, self.height = data, ceiling, width, height
        self.low, self.high = low, high

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = self.width or options.max_width
        ratios = _ratios(self.data, width, self.ceiling)
        lo, hi = self.low.get_truecolor(), self.high.get_truecolor()
        lines = bar_lines(self.data, width, self.ceiling, self.height)
        for i, line in enumerate(lines):
            for ch, r in zip(line, ratios, strict=True):
                colour = RichColor.from_triplet(blend_rgb(lo, hi, min(1.0, r)))
                yield Segment(ch, Style(color=colour) if ch != " " else None)
            if i < len(lines) - 1:
                yield Segment.line()


class ScaledSparkline(Sparkline):
    """`Sparkline` drawn from 0 to `ceiling` (None: to the data's max) instead of min..max."""

    ceiling = reactive[float | None](None)

    def render(self) -> WidgetRenderResult:
        _, base = self.background_colors
        low = base + self.get_component_styles("sparkline--min-color").color
        high = base + self.get_component_styles("sparkline--max-color").color
        return ScaledBars(
            list(self.data or []),
            self.ceiling,
            self.size.width,
            self.size.height,
            low.rich_color,
            high.rich_color,
        )
