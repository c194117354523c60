"""Pure builders for the metrics screens: waste (diagnosis), alerts, and the workload detail.

Like `views.py` and `opsviews.py` they only format what the engine decided (`waste.diagnose` through
`report.assemble`, `alerts.evaluate_history`) or what a port measured (`analysis.WorkloadHistory`);
nothing here touches a widget, so every builder is testable without a screen.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Final

from rich.console import Group, RenderableType
from rich.table import Table as RichTable
from rich.text import Text

from tftui.engine.alerts import RULES, Alert, RuleStatus
from tftui.engine.report import Report
from tftui.engine.waste import Finding, GPURow, NodeRow, WorkloadRow
from tftui.ui.load.analysis import AlertsAnalysis, Analysis, WasteAnalysis, WorkloadHistory
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.format import NO_DATA, fmt_bytes, fmt_num, fmt_res
from tftui.ui.render.opsviews import fmt_stamp, prose, short_duration
from tftui.ui.render.views import ALL, NOT_NARROW, Layout, NumCell, Row, Table, _Col, _search, _table

# -- shared --------------------------------------------------------------------------------------


def fmt_hours(x: float | None) -> str:
    """GPU-hours: `2,589`, `95.9`, `0.42`; `—` when unknown (no GPU capacity)."""
    if x is None:
        return NO_DATA
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.1f}" if x >= 1 or x == 0 else f"{x:.2f}"


def fmt_money(x: float | None) -> str:
    """USD: `$2,419`, `$28.78`; `—` when no price is known."""
    if x is None:
        return NO_DATA
    return f"${x:,.0f}" if x >= 100 else f"${x:,.2f}"


def number(text: str) -> Text:
    """A right-aligned figure for a table cell (a plain string would be left-aligned)."""
    return Text(text, justify="right", no_wrap=True, end="")


def fmt_pct(x: float | None) -> str:
    return NO_DATA if x is None else f"{x:.1f}%"


def window_text(window: timedelta) -> str:
    """`1d`, `2d`, `12h`, `1h30m`: whole days as the reference page writes them, else a short duration."""
    days, rest = divmod(window, timedelta(days=1))
    if days and not rest:
        return f"{days}d"
    return short_duration(window)


def analysis_status(analysis: Analysis | None, computing: bool, what: str, detail: str = "") -> Text | None:
    """The line shown instead of (or above) a result: computing, failed, or stale after an error."""
    if analysis is None or analysis.value is None:
        if analysis is not None and analysis.error is not None and not computing:
            return Text(f"{what} unavailable: {analysis.error}", style="bold red")
        return Text(
            f"computing {what}{detail}… (runs in the background; the console stays usable)", style="italic"
        )
    if analysis.error is not None:
        shown = fmt_stamp(analysis.value_now, date=False)
        return Text(f"metrics store failed, showing {shown}: {analysis.error}", style="bold red")
    return None


# -- waste ---------------------------------------------------------------------------------------

WASTE_COLUMNS = (
    _Col("level", "LEVEL", 8, ALL),
    _Col("name", "NAME", (20, 26, 34), ALL, flex=1),
    _Col("pool", "POOL", 12, NOT_NARROW, flex=1),
    _Col("cls", "CLASS", 16, ALL),
    _Col("hours", "GPU-H", (7, 7, 8), ALL),
    _Col("money", "$", (8, 8, 9), ALL),
    _Col("fix", "FIRST FIX", 20, NOT_NARROW, flex=2),
)


def finding_key(f: Finding) -> str:
    """A finding's row key: one object has at most one finding per class."""
    return f"{f.level}:{f.name}:{f.cls}"


def waste_table(waste: WasteAnalysis | None, layout: Layout) -> Table:
    """The diagnosis' findings in the engine's order: largest wasted GPU-hours first."""
    rows = []
    if waste is not None:
        for f in waste.report.findings:
            rows.append(
                Row(
                    finding_key(f),
                    {
                        "level": f.level,
                        "name": f.name,
                        "pool": f.pool or NO_DATA,
                        "cls": f.cls,
                        "hours": NumCell(f.wasted_gpu_hours, fmt_hours),
                        "money": NumCell(f.wasted_money, fmt_money),
                        "fix": prose(f.fixes[0] if f.fixes else ""),
                    },
                    _search(f.level, f.name, f.pool, f.cls, f.detail, *f.fixes),
                )
            )
    return _table(WASTE_COLUMNS, layout, rows)


def waste_summary(analysis: Analysis, layout: Layout) -> Text:
    """Totals over the window (disjoint findings only), per pool, and where the figures come from."""
    assert analysis.value is not None and isinstance(analysis.value, WasteAnalysis)
    r = analysis.value.report
    t = r.totals
    text = Text(no_wrap=False, end="")
    text.append(f"wasted {fmt_hours(t.gpu_hours)} GPU-h · {fmt_money(t.money)}", "bold")
    text.append(f" over {window_text(r.window)}")
    text.append(
        f" = requests above use {fmt_hours(t.requests_gpu_hours)} GPU-h {fmt_money(t.requests_money)}"
        f" + unrequested capacity {fmt_hours(t.capacity_gpu_hours)} GPU-h {fmt_money(t.capacity_money)}"
    )
    if t.unpriced:
        text.append(f" · {t.unpriced} without a GPU price", "bold")
    if layout.name != "narrow":
        pools = [p for p in r.pools if p.wasted_gpu_hours]
        if pools:
            text.append("\n")
            text.append(
                " · ".join(
                    f"{p.name} {fmt_hours(p.wasted_gpu_hours)} GPU-h {fmt_money(p.wasted_money)}"
                    for p in pools
                )
            )
    text.append("\n")
    text.append(f"{len(r.findings)} findings from {r.source} at {fmt_stamp(r.now, date=False)} UTC", "dim")
    if r.missing:
        text.append(f" · no data: {', '.join(r.missing)}", "dim")
    return text


def finding_preview(f: Finding | None) -> Text:
    """Under the table: the highlighted finding's evidence and its first fix, wrapped."""
    text = Text(end="")
    if f is None:
        return text
    text.append(f"{f.detail}\n", "italic")
    if f.fixes:
        text.append("fix: ", "bold")
        text.append(f.fixes[0])
        if len(f.fixes) > 1:
            text.append(f"   (+{len(f.fixes) - 1} more: enter)", "dim")
    return text


def find_finding(report: Report, key: str) -> Finding | None:
    return next((f for f in report.findings if finding_key(f) == key), None)


def fixes_text(f: Finding) -> str:
    """Every fix, one per line, as copied to the clipboard."""
    return "\n".join(f.fixes)


def _figure_rows(report: Report, f: Finding) -> list[tuple[str, str]]:
    """The object's row of the diagnosis, as label/value pairs."""
    out: list[tuple[str, str]] = []
    if f.level == "workload":
        w: WorkloadRow | None = next((x for x in report.workloads if x.key == f.name), None)
        if w is None:
            return out
        out += [
            ("workers × GPUs", f"{w.workers if w.workers is not None else NO_DATA} × {w.gpu_count or NO_DATA}"),
            ("TFLOPS / device", f"request {_n(w.tflops_request)} · limit {_n(w.tflops_limit)} · "
             f"avg {_n(w.tflops_avg)} · peak {_n(w.tflops_peak)}"),
            ("VRAM / device", f"request {_b(w.vram_request_bytes)} · peak {_b(w.vram_peak_bytes)}"),
            ("device", f"{_n(w.device_tflops)} TFLOPS · {_b(w.device_vram_bytes)} · "
             f"{fmt_hours(w.device_hours)} device-hours in the window"),
            ("autoscale", "on" if w.autoscale else "off"),
            ("classes", _classes(w.classes, w.in_cluster)),
        ]  # fmt: skip
    elif f.level == "node":
        n: NodeRow | None = next((x for x in report.nodes if x.name == f.name), None)
        if n is None:
            return out
        out += [
            ("allocated", f"TFLOPS {fmt_pct(n.tflops_allocated_pct)} · VRAM {fmt_pct(n.vram_allocated_pct)}"),
            ("used", f"compute {fmt_pct(n.compute_used_pct)} · VRAM peak {fmt_pct(n.vram_peak_pct)}"),
            ("GPUs", f"{n.gpus} ({n.gpus_reporting} reporting)"),
            ("hours", f"{fmt_hours(n.hours)} h of rows · {fmt_money(n.price_per_gpu_hour)}/GPU-h"),
            ("classes", _classes(n.classes, n.in_cluster)),
        ]
    else:
        g: GPURow | None = next((x for x in report.gpus if x.name == f.name), None)
        if g is None:
            return out
        out += [
            ("node · model", f"{g.node or NO_DATA} · {g.model or NO_DATA}"),
            (
                "allocated now",
                f"TFLOPS {fmt_pct(g.tflops_allocated_pct)} · VRAM {fmt_pct(g.vram_allocated_pct)}",
            ),
            ("used", f"compute {fmt_pct(g.compute_used_pct)} · VRAM peak {fmt_pct(g.vram_peak_pct)}"),
            ("hours", f"{fmt_hours(g.hours)} h of rows · {fmt_money(g.price_per_hour)}/h"),
            ("classes", _classes(g.classes, g.in_cluster)),
        ]
    return out


def _n(x: float | None) -> str:
    return NO_DATA if x is None else fmt_num(x)


def _b(x: float | None) -> str:
    return NO_DATA if x is None else fmt_bytes(x)


def _classes(classes: Sequence[str], in_cluster: bool) -> str:
    text = ", ".join(classes) or NO_DATA
    return text if in_cluster else f"{text} (no longer in the cluster)"


def finding_detail(report: Report, f: Finding) -> RenderableType:
    """Everything about one finding: evidence, cost, every fix in full (numbered), the figures."""
    head = Text(end="")
    head.append(f"{f.level} {f.name}", "bold")
    head.append(f" · pool {f.pool or NO_DATA} · ")
    head.append(f.cls, "bold")
    head.append("\nwasted ")
    head.append(f"{fmt_hours(f.wasted_gpu_hours)} GPU-h · {fmt_money(f.wasted_money)}", "bold")
    head.append(f" over {window_text(report.window)} to {fmt_stamp(report.now)} UTC")
    head.append(f"\n{f.detail}", "italic")
    fixes = RichTable.grid(padding=(0, 1))
    fixes.add_column(no_wrap=True, justify="right")
    fixes.add_column(overflow="fold")
    for i, fix in enumerate(f.fixes, 1):
        fixes.add_row(Text(f"{i}.", style="bold"), Text(fix))
    figures = RichTable.grid(padding=(0, 2))
    figures.add_column(no_wrap=True, style="bold")
    figures.add_column(overflow="fold")
    for label, value in _figure_rows(report, f):
        figures.add_row(label, value)
    parts: list[RenderableType] = [head, Text("\nfixes (c copies them all)", style="bold underline"), fixes]
    if figures.row_count:
        parts += [Text("\nfigures", style="bold underline"), figures]
    return Group(*parts)


# -- alerts --------------------------------------------------------------------------------------

STATE_ORDER: Final = ("firing", "pending", "no-data", "ok", "not-evaluated")
STATE_STYLE: Final = {
    "firing": ("●", "bold red"),
    "pending": ("◐", "yellow"),
    "no-data": ("?", "bold cyan"),
    "ok": ("✓", "green"),
    "not-evaluated": ("·", "dim"),
}
"""Glyph and style per rule state: `no-data` is a question, never the healthy tick."""
SEVERITY_STYLE: Final = {"P0": "bold red", "P1": "yellow", "P2": ""}


def state_cell(state: str) -> Text:
    glyph, style = STATE_STYLE.get(state, ("·", ""))
    return Text(f"{glyph} {state}", style=style, no_wrap=True, end="")


def fmt_since(start: datetime, now: datetime, open_start: bool) -> str:
    """`11:32 28m` (HH:MM UTC and how long ago); `≤11:00 ≥1h` when it was already there at the
    first replayed evaluation (it may have started earlier)."""
    minutes = max(0, int((now - start) / timedelta(minutes=1)))
    age = f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"
    if minutes >= 60 and minutes % 60 == 0:
        age = f"{minutes // 60}h"
    mark = "≤" if open_start else ""
    return f"{mark}{start:%H:%M} {'≥' if open_start else ''}{age}"


def _rule_order(statuses: Sequence[RuleStatus]) -> list[RuleStatus]:
    upstream = {r.name: i for i, r in enumerate(RULES)}
    return sorted(
        statuses,
        key=lambda s: (STATE_ORDER.index(s.state) if s.state in STATE_ORDER else 9, upstream.get(s.rule, 99)),
    )


def rule_alerts(alerts: AlertsAnalysis, rule: str) -> list[Alert]:
    """The rule's firing alerts, then its pending ones, each by instance."""
    h = alerts.history
    return [a for a in h.firing if a.rule == rule] + [a for a in h.pending if a.rule == rule]


def _rule_since(alerts: AlertsAnalysis, status: RuleStatus) -> str:
    items = rule_alerts(alerts, status.rule)
    if not items:
        return NO_DATA
    first = min(items, key=lambda a: a.starts_at)
    return fmt_since(first.starts_at, alerts.history.now, alerts.open_start(first.rule, first.starts_at))


RULE_COLUMNS = (
    _Col("state", "STATE", 9, ALL),
    _Col("severity", "SEV", 3, ALL),
    _Col("rule", "RULE", 20, ALL, flex=1),
    _Col("firing", "FIRING", 6, ALL),
    _Col("pending", "PEND", 4, ALL),
    _Col("since", "SINCE", 12, NOT_NARROW),
    _Col("detail", "DETAIL", 20, NOT_NARROW, flex=2),
)


def rules_table(alerts: AlertsAnalysis | None, layout: Layout) -> Table:
    """Every built-in rule: firing first, then pending, no data, ok (upstream order within)."""
    rows = []
    if alerts is not None:
        for s in _rule_order(alerts.history.statuses):
            items = rule_alerts(alerts, s.rule)
            detail = s.detail if s.state == "no-data" else (items[0].summary if items else "")
            rows.append(
                Row(
                    s.rule,
                    {
                        "state": state_cell(s.state),
                        "severity": Text(
                            s.severity, style=SEVERITY_STYLE.get(s.severity, ""), no_wrap=True, end=""
                        ),
                        "rule": s.rule,
                        "firing": number(str(s.firing) if s.firing else ""),
                        "pending": number(str(s.pending) if s.pending else ""),
                        "since": _rule_since(alerts, s),
                        "detail": prose(detail) if detail else "",
                    },
                    _search(s.rule, s.state, s.severity, s.detail),
                )
            )
    return _table(RULE_COLUMNS, layout, rows)


INSTANCE_COLUMNS = (
    _Col("state", "STATE", 9, ALL),
    _Col("instance", "INSTANCE", (16, 28, 40), ALL, flex=1),
    _Col("since", "SINCE", 12, ALL),
    _Col("fired", "FIRED", 8, NOT_NARROW),
    _Col("summary", "SUMMARY", 19, ALL, flex=2),
)


def instances_table(alerts: AlertsAnalysis | None, rule: str | None, layout: Layout) -> Table:
    """The selected rule's firing and pending alerts with their rendered summary and since when."""
    rows = []
    if alerts is not None and rule is not None:
        now = alerts.history.now
        for a in rule_alerts(alerts, rule):
            rows.append(
                Row(
                    a.fingerprint,
                    {
                        "state": state_cell("firing" if a.firing else "pending"),
                        "instance": a.instance,
                        "since": fmt_since(a.starts_at, now, alerts.open_start(a.rule, a.starts_at)),
                        "fired": f"{a.fired_at:%H:%M:%S}" if a.fired_at is not None else NO_DATA,
                        "summary": prose(a.summary),
                    },
                    _search(a.instance, a.summary, a.description),
                )
            )
    return _table(INSTANCE_COLUMNS, layout, rows)


def alerts_summary(analysis: Analysis, rule: str | None) -> Text:
    """Counts per state, the replay, the source; then the selected rule's description."""
    assert analysis.value is not None and isinstance(analysis.value, AlertsAnalysis)
    h = analysis.value.history
    counts = {state: sum(1 for s in h.statuses if s.state == state) for state in STATE_ORDER}
    text = Text(end="")
    parts = (
        ("firing", f"{counts['firing']} rules firing ({len(h.firing)} alerts)"),
        ("pending", f"{len(h.pending)} alerts pending"),
        ("no-data", f"{counts['no-data']} rules without data"),
        ("ok", f"{counts['ok']} ok"),
    )
    for state, words in parts:
        glyph, style = STATE_STYLE[state]
        n = len(h.firing) if state == "firing" else len(h.pending) if state == "pending" else counts[state]
        text.append(f"{glyph} {words}", style if n else "dim")
        text.append("  ")
    text.append(
        f"· replayed {short_duration(h.span)} to {fmt_stamp(h.now, date=False)} UTC from {analysis.source}",
        "dim",
    )
    status = next((s for s in h.statuses if s.rule == rule), None)
    spec = next((r for r in RULES if r.name == rule), None)
    if status is not None and spec is not None:
        text.append("\n")
        text.append(rule or "", "bold")
        text.append(
            f": every {short_duration(spec.interval)}, fires after {spec.consecutive} in a row"
            f" (≈{short_duration(spec.for_duration)}), threshold {spec.threshold:g}"
        )
        if status.state == "no-data":
            text.append(f" · no data: {status.detail}", "bold cyan")
    return text


# -- workload detail -----------------------------------------------------------------------------


def workload_summary(data: ConsoleData, key: str) -> Text:
    """Identity, workers and devices, request per device, autoscaling."""
    wl = data.state.workloads.get(key)
    text = Text(end="")
    if wl is None:
        text.append(f"workload {key} is no longer in the cluster", "bold")
        return text
    text.append(key, "bold")
    devices = sum(data.state.workers[w].gpu_count for w in wl.workers if w in data.state.workers)
    text.append(
        f" · pool {wl.pool or NO_DATA} · qos {wl.qos} · {len(wl.workers)} workers on {devices} GPUs"
        f" · request {fmt_res(wl.request)} per device · autoscale {'on' if wl.autoscale else 'off'}"
    )
    return text


def workload_verdict(key: str, waste: WasteAnalysis | None) -> Text:
    """The diagnosis' classes for the workload and its first fix, on one line (cut at the screen's
    edge: `:waste` has every fix in full); empty until the diagnosis is computed."""
    verdict = Text(no_wrap=True, overflow="ellipsis", end="")
    if waste is None:
        return verdict
    row = next((w for w in waste.report.workloads if w.key == key), None)
    findings = [f for f in waste.report.findings if f.level == "workload" and f.name == key]
    verdict.append("diagnosis: ", "bold")
    verdict.append(", ".join(row.classes) if row is not None and row.classes else NO_DATA)
    verdict.append(f" over {window_text(waste.report.window)}")
    if findings:
        f = findings[0]
        verdict.append(f" · wasted {fmt_hours(f.wasted_gpu_hours)} GPU-h {fmt_money(f.wasted_money)}")
        if f.fixes:
            verdict.append(" · fix: ", "bold")
            verdict.append(f.fixes[0])
    return verdict


def _ratio(x: float | None, of: float) -> str:
    return NO_DATA if x is None or of <= 0 else f"{x / of * 100:.0f}%"


def workload_figures(data: ConsoleData, key: str, history: WorkloadHistory | None) -> RichTable:
    """Per device: request and limit (spec) against the average and peak of the history's rows."""
    wl = data.state.workloads.get(key)
    span = short_duration(history.end - history.start) if history is not None else "24h"
    grid = RichTable(box=None, padding=(0, 2), show_edge=False, pad_edge=False, header_style="bold")
    for label in ("per device", "REQUEST", "LIMIT", f"AVG {span}", f"PEAK {span}", "AVG÷REQ", "PEAK÷REQ"):
        grid.add_column(label, no_wrap=True, justify="left" if label == "per device" else "right")
    if wl is None:
        return grid
    h = history if history is not None and history.has_data else None
    grid.add_row(
        "TFLOPS",
        fmt_num(wl.request.tflops),
        fmt_num(wl.limit.tflops) if wl.limit.tflops else NO_DATA,
        _n(h.tflops_avg) if h else NO_DATA,
        _n(h.tflops_peak) if h else NO_DATA,
        _ratio(h.tflops_avg if h else None, wl.request.tflops),
        _ratio(h.tflops_peak if h else None, wl.request.tflops),
    )
    grid.add_row(
        "VRAM",
        fmt_bytes(wl.request.vram),
        fmt_bytes(wl.limit.vram) if wl.limit.vram else NO_DATA,
        _b(h.vram_avg) if h else NO_DATA,
        _b(h.vram_peak) if h else NO_DATA,
        _ratio(h.vram_avg if h else None, wl.request.vram),
        _ratio(h.vram_peak if h else None, wl.request.vram),
    )
    return grid


def spark_values(values: Sequence[float | None]) -> tuple[list[float], int]:
    """Sparkline points from the first bucket with data on; gaps after it drawn as 0 (counted)."""
    start = next((i for i, v in enumerate(values) if v is not None), len(values))
    shown = values[start:]
    return [v if v is not None else 0.0 for v in shown], start


def spark_label(history: WorkloadHistory, which: str, ceiling: float | None = None) -> Text:
    """`TFLOPS used (workload total, 15m means) · min 1.2 · max 9.9 · last 3.4 · scale 0–60
    (request)`: the bars run from 0 to `ceiling` (the request of the running workers) when given."""
    values = history.tflops if which == "tflops" else history.vram
    fmt = fmt_num if which == "tflops" else fmt_bytes
    have = [v for v in values if v is not None]
    _, first = spark_values(values)
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    text.append("TFLOPS used" if which == "tflops" else "VRAM used", "bold")
    text.append(f" (workload total, {short_duration(history.bucket)} means)")
    if have:
        text.append(f" · min {fmt(min(have))} · max {fmt(max(have))} · last {fmt(have[-1])}")
        gaps = sum(1 for v in values[first:] if v is None)
        if gaps:
            text.append(f" · {gaps} buckets without samples (drawn as 0)", "dim")
        if ceiling is not None:
            top = max(ceiling, max(have))
            text.append(f" · scale 0–{fmt(top)}{' (request)' if top == ceiling else ''}", "dim")
    else:
        text.append(" · no samples in the window", "bold")
    return text


def spark_axis(history: WorkloadHistory, width: int) -> str:
    """Time labels under a sparkline of `width` cells: first bucket, middle, end (UTC)."""
    _, first = spark_values(history.tflops)
    start = history.start + history.bucket * first
    end = history.end
    mid = start + (end - start) / 2
    left, centre, right = f"{start:%H:%M}", f"{mid:%H:%M}", f"{end:%H:%M} UTC"
    if width < len(left) + len(centre) + len(right) + 2:
        return f"{left}{right.rjust(max(0, width - len(left)))}"
    pad = width - len(left) - len(centre) - len(right)
    lpad = max(1, (width - len(centre)) // 2 - len(left))
    return left + " " * lpad + centre + " " * max(1, pad - lpad) + right
