"""The What-if screen (`:whatif`): placement modes side by side over a simulated day, and two charts:
active nodes over time, and each placement's GPU allocation curve when the cluster's workers are
replayed by the FGD paper's arrivals protocol (`engine.arrivals`, FGD and the three modes).

A thread worker runs `runtime.whatif.compare` on the console's current snapshot (the same
simulator and engine as `tftui simulate`); the screen only renders what it posts: one row of
figures per policy and the active node count over time per policy, drawn with braille dots by
`NodeChart` (`chart_lines` is the pure drawing, a few dozen lines, so no plotting library).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.events import Resize
from textual.message import Message
from textual.worker import get_current_worker

from tftui.runtime.whatif import MODES, PolicyResult, SimConfig, compare, parse_policy
from tftui.ui.background import in_thread
from tftui.ui.data import ConsoleData, describe_error
from tftui.ui.screens.resource import ResourceScreen
from tftui.ui.views import Column, Gauges, Layout, Row, Table
from tftui.ui.widgets.plain import PlainStatic
from tftui.ui.widgets.table import ResourceTable

__all__ = ["DEFAULT_POLICIES", "NodeChart", "WhatIfScreen", "chart_lines", "kept_by"]

DEFAULT_POLICIES = tuple(f"{m}+defrag" for m in MODES)
COLORS = ("cyan", "magenta", "yellow", "green", "red", "blue", "bright_white", "bright_cyan")
WHATIF_GROUP = "whatif"
CURVE_SEED = 42
CURVE_TO = 130
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


class NodeChart(PlainStatic):
    """Active nodes over time per policy (redrawn to its size)."""

    DEFAULT_CSS = "NodeChart { height: 1fr; min-height: 6; }"

    def __init__(self, **kw: Any) -> None:
        super().__init__("", **kw)
        self.series: list[tuple[str, list[int]]] = []
        self.caption = ""
        self.x_labels: tuple[str, ...] = ()

    def show(
        self, series: list[tuple[str, list[int]]], caption: str = "", x_labels: Sequence[str] = ()
    ) -> None:
        self.series = series
        self.caption = caption
        self.x_labels = tuple(x_labels)
        self._draw()

    def on_resize(self, event: Resize) -> None:
        self._draw()

    def _draw(self) -> None:
        if not self.series:
            self.update("")
            return
        lines = chart_lines(self.series, self.size.width, self.size.height, self.caption, self.x_labels)
        self.update(Text("\n").join(lines))


class _Cancelled(Exception):
    """The screen went away: stop simulating."""


class WhatIfProgress(Message):
    def __init__(self, done: int, total: int) -> None:
        super().__init__()
        self.done, self.total = done, total


class WhatIfReady(Message):
    def __init__(
        self, results: list[PolicyResult], curves: list[tuple[str, list[int]]] | None = None
    ) -> None:
        super().__init__()
        self.results = results
        self.curves = curves or []


class WhatIfFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


_COLUMNS = (
    Column("policy", "POLICY", 12, flex=1),
    Column("ratio", "ACTIVE/LB", 11),
    Column("alloc", "ALLOC%", 6),
    Column("node_hours", "NODE-H", 7),
    Column("gpu_alloc", "GPU-H", 7),
    Column("gpu_used", "USED GPU-H", 10),
    Column("releases", "REL", 4),
    Column("evictions", "EVICT", 5),
    Column("throttled", "THROTTLED", 9),
    Column("cost", "COST $", 8),
    Column("kept", "KEPT BY", 6, flex=2),  # cut first, and far: the policy's name stays whole
)
"""Active nodes against the bound right after the policy: the figure the comparison is about."""
NARROW_COLUMNS = ("policy", "ratio", "alloc", "evictions", "cost", "kept")
"""Below 120 columns: the policy whole and its outcome; the hours are in `tftui simulate`."""


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


class WhatIfScreen(ResourceScreen):
    """Runs the comparison once the console has data; the table and chart fill in when it ends."""

    COUNT_LABELS: ClassVar[dict[str, str]] = {"main": "policies"}

    def __init__(
        self,
        trail: tuple[str, ...] = ("whatif",),
        *,
        policies: Sequence[str] = DEFAULT_POLICIES,
        duration: timedelta = timedelta(days=1),
        churn: float = 0.5,
    ) -> None:
        super().__init__(trail)
        self.policies = [parse_policy(p) for p in policies]
        self.config = SimConfig(duration=duration, churn=churn)
        self.results: list[PolicyResult] | None = None
        self.curves: list[tuple[str, list[int]]] = []
        self.status = "waiting for the cluster…"
        self._started = False

    def compose_body(self) -> ComposeResult:
        table = ResourceTable(id="main")
        table.styles.height = "auto"  # one row per policy; the chart takes the rest
        table.styles.max_height = 12
        yield table
        yield NodeChart(id="whatif-chart")
        yield NodeChart(id="whatif-curves")

    def crumb_count(self, counts: list[str]) -> str:
        return self.status if self.results is None else super().crumb_count(counts)

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, WHATIF_GROUP)

    def render_data(self) -> None:
        data = self.tui.data
        if data is not None and not self._started:
            self._started = True
            hours = self.config.duration.total_seconds() / 3600
            self.status = f"simulating {len(self.policies)} policies over {hours:g} h…"
            start = data.refreshed_at.replace(microsecond=0)
            self._run(list(data.state.snapshot.objects), start)
        super().render_data()

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        rows = []
        for r in self.results or []:
            s = r.summary()
            ratio = s["final_ratio"]
            cells = {
                "policy": r.policy,
                "node_hours": f"{s['node_hours']:.1f}",
                "gpu_alloc": f"{s['gpu_hours_allocated']:.1f}",
                "gpu_used": f"{s['gpu_hours_used']:.1f}",
                "alloc": f"{s['allocation_ratio']:.1%}",
                "releases": str(s["releases"]),
                "evictions": str(s["evictions"]),
                "throttled": f"{s['throttled_minutes']:.0f}",
                "cost": f"{s['cost_usd']:,.0f}",
                "ratio": "—"
                if ratio is None
                else f"{s['final_active_nodes']}/{s['final_lower_bound']} {ratio:.2f}",
                "kept": kept_by(r),
            }
            rows.append(Row(r.policy, cells, r.policy.lower()))
        if gauges.layout.name == "narrow":
            return Table(tuple(c for c in _COLUMNS if c.key in NARROW_COLUMNS), tuple(rows))
        return Table(_COLUMNS, tuple(rows))

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        if self.results is None:
            return
        series = []
        for r in self.results:
            totals = [sum(r.active[p][i] for p in r.active) for i in range(len(r.times))]
            series.append((r.policy, totals))
        times = self.results[0].times if self.results else []
        caption = f"active nodes, {times[0]:%d %b %H:%M} → {times[-1]:%d %b %H:%M} UTC" if times else ""
        ticks = [times[round(i * (len(times) - 1) / 4)] for i in range(5)] if times else []
        self.query_one("#whatif-chart", NodeChart).show(series, caption, [f"{t:%H:%M}" for t in ticks])
        if self.curves:
            self.query_one("#whatif-curves", NodeChart).show(
                self.curves,
                f"GPU allocation % by arrived % (the workers replayed, seed {CURVE_SEED})",
                [f"{CURVE_TO * i // 4}%" for i in range(5)],
            )

    def _run(self, objects: list[dict[str, Any]], start: datetime) -> None:
        """The comparison in a daemon thread (ui/background.py): quitting never waits for it."""
        self.run_worker(
            in_thread(partial(self._simulate, objects, start), name="tftui-whatif"),
            exclusive=True,
            group=WHATIF_GROUP,
            exit_on_error=False,
            description="what-if",
        )

    def _simulate(self, objects: list[dict[str, Any]], start: datetime) -> None:
        worker = get_current_worker()

        hook = self.config.on_sample

        def check(now: datetime) -> None:  # called at every sample: a closed screen stops the run
            if worker.is_cancelled:
                raise _Cancelled
            if hook is not None:
                hook(now)

        config = replace(self.config, on_sample=check)
        results: list[PolicyResult] = []
        try:
            for i, policy in enumerate(self.policies):
                results.extend(compare(objects, [policy], start, config))
                self.post_message(WhatIfProgress(i + 1, len(self.policies)))
        except _Cancelled:
            return
        except Exception as exc:  # a simulator bug must not kill the console
            if not worker.is_cancelled:
                self.post_message(WhatIfFailed(describe_error(exc)))
            return
        curves: list[tuple[str, list[int]]] = []
        try:  # the workers replayed per policy by the FGD paper's protocol: allocation curves
            from tftui.engine.arrivals import (
                POLICIES,
                parse_trace_policy,
                protocol_input_of_state,
                run_arrivals,
            )
            from tftui.engine.state import ClusterState

            nodes, tasks = protocol_input_of_state(ClusterState.build(objects))
            if nodes and tasks:
                for name in POLICIES:
                    if worker.is_cancelled:
                        return
                    r = run_arrivals(nodes, tasks, parse_trace_policy(name), seed=CURVE_SEED)
                    c, last, line = r.curve(), 0, []
                    for x in range(CURVE_TO + 1):  # an arrived % no record rounds to keeps the last value
                        last = round(c[x]) if x in c else last
                        line.append(last)
                    curves.append((name, line))
        except Exception:  # the curves are extra: the comparison stands without them
            curves = []
        if not worker.is_cancelled:
            self.post_message(WhatIfReady(results, curves))

    def on_what_if_progress(self, message: WhatIfProgress) -> None:
        if message.done < message.total:
            self.status = f"simulated {message.done}/{message.total} policies…"
            super().render_data()

    def on_what_if_ready(self, message: WhatIfReady) -> None:
        self.results = message.results
        self.curves = message.curves
        self.status = ""
        super().render_data()

    def on_what_if_failed(self, message: WhatIfFailed) -> None:
        self.status = f"the simulation failed: {message.error}"
        super().render_data()
