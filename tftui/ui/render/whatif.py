"""The What-if screen's pure parts: the braille line chart and the KEPT BY column.

`chart_lines` draws series of node counts as braille dots (a few dozen lines, so no plotting
library); `kept_by` words why a policy's nodes stay above the bound. Both are plain functions of
their inputs, tested without a screen; `screens.whatif` shows them.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from tftui.runtime.whatif import PolicyResult

__all__ = ["COLORS", "OVERLAP", "chart_lines", "kept_by"]

COLORS = ("cyan", "magenta", "yellow", "green", "red", "blue", "bright_white", "bright_cyan")
# braille dot bits by (column, row) within a 2×4 cell
_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))


OVERLAP = "bright_white"
"""The colour of a cell two or more different lines pass through (named in the legend)."""


def _y_labels(hi: int, rows: int) -> list[str]:
    """A label every few rows (0 at the bottom, `hi` on top, whole values between, none repeated)."""
    step = max(1, rows // 4)
    out: list[str] = []
    seen: set[int] = set()
    for r in range(rows):
        value = round(hi * (rows - 1 - r) / max(1, rows - 1))
        show = r in (0, rows - 1) or (r % step == 0 and rows - 1 - r >= step)
        out.append(str(value) if show and value not in seen else "")
        if show:
            seen.add(value)
    return out


def _x_axis(gutter: int, cols: int, labels: Sequence[str]) -> tuple[Text, Text]:
    """The axis under the plot with a tick per label, evenly spaced, and the labels under their
    ticks (the first left-aligned, the last right-aligned, those between centred)."""
    ticks = [round(i * (cols - 1) / max(1, len(labels) - 1)) for i in range(len(labels))]
    axis = ["─"] * cols
    for t in ticks:
        axis[t] = "┬"
    under = [" "] * cols
    for i, (t, label) in enumerate(zip(ticks, labels, strict=True)):
        start = t if i == 0 else t - len(label) + 1 if i == len(labels) - 1 else t - len(label) // 2
        start = max(0, min(start, cols - len(label)))
        if any(c != " " for c in under[max(0, start - 1) : start + len(label) + 1]):
            continue  # no room: a label never runs into its neighbour
        under[start : start + len(label)] = label
    return Text(" " * (gutter - 1) + "└" + "".join(axis), style="dim"), Text(" " * gutter + "".join(under))


def chart_lines(
    series: Sequence[tuple[str, Sequence[int]]],
    width: int,
    height: int,
    caption: str = "",
    x_labels: Sequence[str] = (),
) -> list[Text]:
    """`series` (name, values ≥ 0 per sample) as a braille line chart `width`×`height` cells from 0 to
    the maximum: a y axis with a value every few rows, an x axis with a tick under each of
    `x_labels` (evenly spaced over the samples) when given, and a legend as the last line. Series
    with the same values are one line, named together in the legend (`A = B`); a cell two different
    lines pass through is drawn in `OVERLAP`, so a line is never silently hidden under another."""
    values = [v for _, vs in series for v in vs]
    axis_rows = 2 if x_labels else 0
    if not values or width < 10 or height < 3 + axis_rows:
        return [Text("no data")]
    merged: list[tuple[list[str], Sequence[int]]] = []
    for name, vs in series:
        same = next((m for m in merged if list(m[1]) == list(vs)), None)
        if same is not None:
            same[0].append(name)
        else:
            merged.append(([name], vs))
    lo, hi = 0, max(max(values), 1)  # from zero: the height of a line is the node count
    gutter = len(str(hi)) + 1
    cols, rows = width - gutter, height - 1 - axis_rows
    xdots, ydots = 2 * cols, 4 * rows
    bits = [[0] * cols for _ in range(rows)]
    color: list[list[str | None]] = [[None] * cols for _ in range(rows)]
    overlap = False
    for i, (_, vs) in enumerate(merged):
        if not vs:
            continue
        mine = COLORS[i % len(COLORS)]
        prev: int | None = None
        for x in range(xdots):
            v = vs[round(x * (len(vs) - 1) / max(1, xdots - 1))]
            y = round((v - lo) * (ydots - 1) / (hi - lo))
            for yy in range(
                min(y, prev if prev is not None else y), max(y, prev if prev is not None else y) + 1
            ):
                r, c = (ydots - 1 - yy) // 4, x // 2
                bits[r][c] |= _DOTS[x % 2][(ydots - 1 - yy) % 4]
                if color[r][c] not in (None, mine):
                    color[r][c] = OVERLAP
                    overlap = True
                elif color[r][c] is None:
                    color[r][c] = mine
            prev = y
    lines: list[Text] = []
    for r, label in enumerate(_y_labels(hi, rows)):
        line = Text(label.rjust(gutter - 1) + ("┤" if label else "│"), style="dim")
        for c in range(cols):
            line.append(chr(0x2800 + bits[r][c]) if bits[r][c] else " ", style=color[r][c] or "")
        lines.append(line)
    if x_labels:
        lines += _x_axis(gutter, cols, x_labels)
    legend = Text(" " * gutter)
    for i, (names, _) in enumerate(merged):
        legend.append("■ ", style=COLORS[i % len(COLORS)])
        legend.append(f"{' = '.join(names)}  ")
    if overlap:
        legend.append("■ ", style=OVERLAP)
        legend.append("lines cross  ")
    if caption:
        legend.append(caption, style="dim")
    lines.append(legend)
    return lines


def kept_by(result: PolicyResult) -> str:
    """The rules that keep the nodes above the bound, most nodes first, over the pools that have any:
    what to change next (`above-threshold 10, cordoned 2`)."""
    counts: dict[str, int] = {}
    for pool, active in result.final_active.items():
        if active <= result.final_bound.get(pool, 0):
            continue
        for reason in result.final_holds.get(pool, {}).values():
            counts[reason] = counts.get(reason, 0) + 1
    return ", ".join(f"{r} {n}" for r, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) or "—"
