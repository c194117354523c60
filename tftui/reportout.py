"""Text and CSV forms of the step-1 report and of its verification (`tftui report`).

The text is for reading in a terminal: a summary first, then one table per pool, node, GPU and
workload, the diagnosis largest waste first with each fix on its own line, the alerts. Missing
figures print as `—`, never as 0. The CSV is for spreadsheets: one table per section, separated by
a blank line, every row starting with its section name so `grep '^finding,'` extracts one table;
numbers are raw (percent 0-100, bytes, GPU-hours, USD) and missing ones are empty cells.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from tftui.engine.plan import rfc3339
from tftui.engine.report import Report
from tftui.engine.reportverify import Verification
from tftui.engine.waste import Finding
from tftui.model import gpuinfo
from tftui.model.duration import format_duration
from tftui.model.plaintext import csv_cell, visible
from tftui.textout import table

GI = 1024**3
DASH = "—"


def _pct(x: float | None) -> str:
    return DASH if x is None else f"{x:.1f}%"


def _num(x: float | None, digits: int = 1) -> str:
    return DASH if x is None else f"{x:.{digits}f}"


def _money(x: float | None) -> str:
    return DASH if x is None else f"${x:,.2f}"


def _gib(x: float | None) -> str:
    return DASH if x is None else f"{x / GI:.1f}Gi"


def window_text(window: timedelta) -> str:
    """`1d`-style when the window is whole days (as the page writes it), else the Go duration."""
    days, rest = divmod(window, timedelta(days=1))
    if days and not rest:
        return f"{days}d"
    return format_duration(window)


def _short_model(model: str) -> str:
    info = gpuinfo.lookup(model) if model else None
    return info.model if info else (model or DASH)


def _classes(classes: Sequence[str], in_cluster: bool, metrics_only: bool = False) -> str:
    text = ",".join(classes)
    return text if in_cluster else f"{text} ({'not in cluster' if metrics_only else 'gone'})"


def _summary(r: Report) -> list[str]:
    t = r.totals
    out = [
        f"wasted over {window_text(r.window)}: {t.gpu_hours:.1f} GPU-h ({_money(t.money)}) = requests above usage "
        f"{t.requests_gpu_hours:.1f} GPU-h ({_money(t.requests_money)}) + capacity nobody requested "
        f"{t.capacity_gpu_hours:.1f} GPU-h ({_money(t.capacity_money)})"
        + (f"; {t.unpriced} finding(s) without a GPU price" if t.unpriced else "")
    ]
    counts = Counter((f.level, f.cls) for f in r.findings)
    if counts:
        parts = []
        for level in ("workload", "node", "gpu"):
            items = sorted((cls, n) for (lv, cls), n in counts.items() if lv == level)
            if items:
                parts.append(f"{level}s: " + ", ".join(f"{n} {cls}" for cls, n in items))
        out.append("findings: " + "; ".join(parts))
    else:
        out.append("findings: none")
    firing = Counter(a.rule for a in r.alerts)
    alerts = ", ".join(f"{rule} ×{n}" for rule, n in sorted(firing.items())) if firing else "none firing"
    no_data = [x.rule for x in r.rules if x.state == "no-data"]
    out.append(f"alerts: {alerts}" + (f"; no data: {', '.join(no_data)}" if no_data else ""))
    return out


def _finding_lines(i: int, f: Finding) -> list[str]:
    waste = (
        f"{f.wasted_gpu_hours:.1f} GPU-h ({_money(f.wasted_money)})"
        if f.wasted_gpu_hours is not None
        else "waste unknown (no GPU capacity)"
    )
    lines = [f"{i:>3}. {f.level} {visible(f.name)} — {f.cls} — {waste}", f"     {visible(f.detail)}"]
    for j, fix in enumerate(f.fixes):
        lines.append(f"     {'fix:' if j == 0 else '    '} {visible(fix)}")
    return lines


def _is_ok(classes: Sequence[str], in_cluster: bool) -> bool:
    return tuple(classes) == ("ok",) and in_cluster


def _hidden(n: int, what: str) -> list[str]:
    return [f"({n} {what} diagnosed ok not shown; --all lists them)"] if n else []


def render_report(r: Report, *, all_rows: bool = False) -> str:
    """The text report; rows diagnosed only `ok` (in the cluster) are counted, not listed, unless
    `all_rows`: on the demo they are most of the 1,250 lines and hide what needs fixing."""
    nodes = [n for n in r.nodes if all_rows or not _is_ok(n.classes, n.in_cluster)]
    gpus = [g for g in r.gpus if all_rows or not _is_ok(g.classes, g.in_cluster)]
    workloads = [w for w in r.workloads if all_rows or not _is_ok(w.classes, w.in_cluster)]
    out = [
        f"Step-1 report — metrics {visible(r.source)}, cluster {visible(r.cluster)}",
        f"window {window_text(r.window)}: {rfc3339(r.now - r.window)} → {rfc3339(r.now)}"
        + (f"; alerts replayed over the last {format_duration(r.alert_span)}" if r.alert_span else ""),
    ]
    if r.missing:
        out.append("no data in: " + visible(", ".join(r.missing)))
    if r.metrics_only:
        out.append(
            "no cluster: figures from the metrics alone; every object is marked (not in cluster) and the "
            "fixes, which name cluster objects (workloads, pools, nodes), are left out; pools count the "
            "nodes that reported"
        )
    out.append("")
    out += _summary(r)

    out.append("\n== pools (allocation: window average over the nodes still present)")
    out.append(
        table(
            ["POOL", "NODES", "GPUS", "PLACEMENT", "TFLOPS ALLOC", "VRAM ALLOC", "NOW TF/VRAM", "COMPUTE USED",
             "WASTED GPU-H", "WASTED $"],
            [
                [p.name, str(p.nodes), str(p.gpus), p.placement_mode or DASH, _pct(p.tflops_allocated_pct),
                 _pct(p.vram_allocated_pct), f"{_pct(p.tflops_allocated_now_pct)}/{_pct(p.vram_allocated_now_pct)}",
                 _pct(p.compute_used_pct), _num(p.wasted_gpu_hours), _money(p.wasted_money)]
                for p in r.pools
            ],
        )
    )  # fmt: skip

    out.append("\n== nodes (allocated: window average; used: its GPUs' average, VRAM peak)")
    out.append(
        table(
            ["NODE", "POOL", "GPUS", "TFLOPS ALLOC", "VRAM ALLOC", "COMPUTE USED", "VRAM PEAK", "DIAGNOSIS"],
            [
                [n.name, n.pool or DASH, f"{n.gpus_reporting}/{n.gpus}", _pct(n.tflops_allocated_pct),
                 _pct(n.vram_allocated_pct), _pct(n.compute_used_pct), _pct(n.vram_peak_pct),
                 _classes(n.classes, n.in_cluster, r.metrics_only)]
                for n in nodes
            ],
        )
    )  # fmt: skip
    out += _hidden(len(r.nodes) - len(nodes), "nodes")

    out.append("\n== GPUs (allocated: now; used: window average, VRAM peak)")
    out.append(
        table(
            ["GPU", "NODE", "MODEL", "TFLOPS ALLOC", "VRAM ALLOC", "COMPUTE USED", "VRAM PEAK", "DIAGNOSIS"],
            [
                [g.name, g.node or DASH, _short_model(g.model), _pct(g.tflops_allocated_pct),
                 _pct(g.vram_allocated_pct), _pct(g.compute_used_pct), _pct(g.vram_peak_pct),
                 _classes(g.classes, g.in_cluster, r.metrics_only)]
                for g in gpus
            ],
        )
    )  # fmt: skip
    out += _hidden(len(r.gpus) - len(gpus), "GPUs")

    out.append("\n== workloads (per GPU: request vs window average and peak use)")
    out.append(
        table(
            ["WORKLOAD", "POOL", "WORKERS", "TFLOPS REQ", "AVG", "PEAK", "USE", "VRAM REQ", "VRAM PEAK",
             "AUTOSCALE", "DIAGNOSIS"],
            [
                [w.key, w.pool or DASH,
                 DASH if w.workers is None else f"{w.workers}×{w.gpu_count or 1}",
                 _num(w.tflops_request), _num(w.tflops_avg), _num(w.tflops_peak),
                 _pct(None if w.tflops_use_ratio is None else w.tflops_use_ratio * 100.0),
                 _gib(w.vram_request_bytes), _gib(w.vram_peak_bytes), "on" if w.autoscale else "off",
                 _classes(w.classes, w.in_cluster, r.metrics_only)]
                for w in workloads
            ],
        )
    )  # fmt: skip
    out += _hidden(len(r.workloads) - len(workloads), "workloads")

    out.append("\n== diagnosis (largest waste first; levels overlap, the summary adds only disjoint ones)")
    if r.findings:
        for i, f in enumerate(r.findings, 1):
            out += _finding_lines(i, f)
    else:
        out.append("nothing to fix")

    out.append(f"\n== alerts firing at {rfc3339(r.now)}")
    if r.alerts:
        out.append(
            table(
                ["SEVERITY", "RULE", "INSTANCE", "FIRING SINCE", "SUMMARY"],
                [
                    [
                        a.severity,
                        a.rule,
                        a.instance,
                        ("≤ " if a.open_start else "") + rfc3339(a.fired_at),
                        a.summary,
                    ]
                    for a in r.alerts
                ],
            )
        )
    else:
        out.append("none")
    out.append("\n== alert rules")
    out.append(
        table(
            ["RULE", "SEVERITY", "STATE", "FIRING", "PENDING", "DETAIL"],
            [[x.rule, x.severity, x.state, str(x.firing), str(x.pending), x.detail] for x in r.rules],
        )
    )
    return "\n".join(out) + "\n"


def _arrow(before: str, after: str) -> str:
    return f"{before} → {after}"


def _int(x: int | None) -> str:
    return DASH if x is None else str(x)


def render_verification(v: Verification) -> str:
    out = [
        f"== verify: before {rfc3339(v.before_now)} (window {window_text(v.before_window)}) → "
        f"after {rfc3339(v.after_now)} (window {window_text(v.after_window)})",
        table(["CHECK", "RESULT", "DETAIL"], [[c.name, c.result, c.detail] for c in v.checks]),
        "",
        table(
            ["POOL", "NODES", "TFLOPS ALLOC", "VRAM ALLOC", "THROTTLED", "WASTED GPU-H"],
            [
                [
                    p.pool,
                    _arrow(_int(p.nodes_before), _int(p.nodes_after)),
                    _arrow(_pct(p.tflops_before), _pct(p.tflops_after)),
                    _arrow(_pct(p.vram_before), _pct(p.vram_after)),
                    _arrow(
                        "no data" if p.throttled_before is None else str(p.throttled_before),
                        "no data" if p.throttled_after is None else str(p.throttled_after),
                    ),
                    _arrow(_num(p.wasted_before), _num(p.wasted_after)),
                ]
                for p in v.pools
            ],
        ),
        "",
        table(
            ["NODE", "POOL", "CHANGE", "TFLOPS ALLOC", "VRAM ALLOC"],
            [
                [
                    n.node,
                    n.pool or DASH,
                    n.change,
                    _arrow(_pct(n.tflops_before), _pct(n.tflops_after)),
                    _arrow(_pct(n.vram_before), _pct(n.vram_after)),
                ]
                for n in v.nodes
            ],
        ),
    ]
    return "\n".join(out) + "\n"


# -- CSV -----------------------------------------------------------------------------------------


def _cell(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, tuple | list):
        return " | ".join(str(i) for i in x)
    return str(x)


def _section(w: Any, name: str, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    w.writerow(["section", *headers])
    for row in rows:
        w.writerow([name, *(csv_cell(_cell(c)) for c in row)])  # object text: no formula, no control


def render_csv(r: Report, verification: Verification | None = None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    t = r.totals
    sections: list[tuple[str, list[str], list[list[Any]]]] = [
        ("report",
         ["source", "cluster", "now", "window", "wasted_gpu_hours", "wasted_usd", "requests_gpu_hours",
          "requests_usd", "capacity_gpu_hours", "capacity_usd", "missing"],
         [[r.source, r.cluster, rfc3339(r.now), format_duration(r.window), round(t.gpu_hours, 4),
           round(t.money, 4), t.requests_gpu_hours, t.requests_money, t.capacity_gpu_hours, t.capacity_money,
           r.missing]]),
        ("pool",
         ["pool", "nodes", "gpus", "placement_mode", "tflops_allocated_pct", "vram_allocated_pct",
          "tflops_allocated_now_pct", "vram_allocated_now_pct", "compute_used_pct", "wasted_gpu_hours", "wasted_usd"],
         [[p.name, p.nodes, p.gpus, p.placement_mode, p.tflops_allocated_pct, p.vram_allocated_pct,
           p.tflops_allocated_now_pct, p.vram_allocated_now_pct, p.compute_used_pct, p.wasted_gpu_hours,
           p.wasted_money] for p in r.pools]),
        ("node",
         ["node", "pool", "gpus", "gpus_reporting", "in_cluster", "tflops_allocated_pct", "vram_allocated_pct",
          "compute_used_pct", "vram_peak_pct", "hours", "usd_per_gpu_hour", "diagnosis"],
         [[n.name, n.pool, n.gpus, n.gpus_reporting, n.in_cluster, n.tflops_allocated_pct, n.vram_allocated_pct,
           n.compute_used_pct, n.vram_peak_pct, n.hours, n.price_per_gpu_hour, n.classes] for n in r.nodes]),
        ("gpu",
         ["gpu", "node", "pool", "model", "in_cluster", "tflops_allocated_now_pct", "vram_allocated_now_pct",
          "compute_used_pct", "vram_peak_pct", "hours", "usd_per_hour", "diagnosis"],
         [[g.name, g.node, g.pool, g.model, g.in_cluster, g.tflops_allocated_pct, g.vram_allocated_pct,
           g.compute_used_pct, g.vram_peak_pct, g.hours, g.price_per_hour, g.classes] for g in r.gpus]),
        ("workload",
         ["namespace", "workload", "pool", "in_cluster", "workers", "gpus_per_worker", "tflops_request",
          "tflops_limit", "tflops_avg", "tflops_peak", "vram_request_bytes", "vram_peak_bytes", "device_hours",
          "autoscale", "diagnosis"],
         [[x.namespace, x.name, x.pool, x.in_cluster, x.workers, x.gpu_count, x.tflops_request, x.tflops_limit,
           x.tflops_avg, x.tflops_peak, x.vram_request_bytes, x.vram_peak_bytes, x.device_hours, x.autoscale,
           x.classes] for x in r.workloads]),
        ("finding",
         ["rank", "level", "object", "pool", "class", "wasted_gpu_hours", "wasted_usd", "detail", "fixes"],
         [[i, f.level, f.name, f.pool, f.cls, f.wasted_gpu_hours, f.wasted_money, f.detail, f.fixes]
          for i, f in enumerate(r.findings, 1)]),
        ("alert",
         ["rule", "severity", "instance", "node", "pool", "starts_at", "fired_at", "open_start", "summary",
          "description", "runbook_url"],
         [[a.rule, a.severity, a.instance, a.node, a.pool, rfc3339(a.starts_at), rfc3339(a.fired_at), a.open_start,
           a.summary, a.description, a.runbook_url] for a in r.alerts]),
        ("rule",
         ["rule", "severity", "state", "firing", "pending", "detail"],
         [[x.rule, x.severity, x.state, x.firing, x.pending, x.detail] for x in r.rules]),
    ]  # fmt: skip
    if verification is not None:
        v = verification
        sections += [
            ("check", ["check", "result", "detail"], [[c.name, c.result, c.detail] for c in v.checks]),
            ("pool_change",
             ["pool", "nodes_before", "nodes_after", "tflops_allocated_pct_before", "tflops_allocated_pct_after",
              "vram_allocated_pct_before", "vram_allocated_pct_after", "throttled_before", "throttled_after",
              "wasted_gpu_hours_before", "wasted_gpu_hours_after"],
             [[p.pool, p.nodes_before, p.nodes_after, p.tflops_before, p.tflops_after, p.vram_before,
               p.vram_after, p.throttled_before, p.throttled_after, p.wasted_before, p.wasted_after]
              for p in v.pools]),
            ("node_change",
             ["node", "pool", "change", "tflops_allocated_pct_before", "tflops_allocated_pct_after",
              "vram_allocated_pct_before", "vram_allocated_pct_after"],
             [[n.node, n.pool, n.change, n.tflops_before, n.tflops_after, n.vram_before, n.vram_after]
              for n in v.nodes]),
        ]  # fmt: skip
    for i, (name, headers, rows) in enumerate(sections):
        if i:
            buf.write("\n")
        _section(w, name, headers, rows)
    return buf.getvalue()
