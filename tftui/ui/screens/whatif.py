"""The What-if screen (`:whatif`): placement modes side by side over a simulated day, and two charts:
active nodes over time, and each placement's GPU allocation curve when the cluster's workers are
replayed by the FGD paper's arrivals protocol (`engine.arrivals`, FGD and the three modes).

A thread worker runs `runtime.whatif.compare` on the console's current snapshot (the same
simulator and engine as `tftui simulate`); the screen only renders what it posts: one row of
figures per policy and the active node count over time per policy, drawn with braille dots by
`NodeChart` (`render.whatif.chart_lines` is the pure drawing, so no plotting library).
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
from tftui.ui.load.data import ConsoleData, describe_error
from tftui.ui.render.views import Column, Gauges, Layout, Row, Table
from tftui.ui.render.whatif import chart_lines, kept_by
from tftui.ui.screens.base import ResourceScreen
from tftui.ui.widgets.plain import PlainStatic
from tftui.ui.widgets.table import ResourceTable

__all__ = ["DEFAULT_POLICIES", "NodeChart", "WhatIfScreen"]

DEFAULT_POLICIES = tuple(f"{m}+defrag" for m in MODES)
WHATIF_GROUP = "whatif"
CURVE_SEED = 42
CURVE_TO = 130


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
