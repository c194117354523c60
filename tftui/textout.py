"""Readable terminal tables for the CLI commands (`place`, `plan`); `--json` prints the canonical form.

Object text (names, reasons, details) is printed through `visible`: a control character in a field
shows as an escape and a newline cannot start a line of its own (`tftui.model.plaintext`).
"""

from __future__ import annotations

from collections.abc import Sequence

from tftui.engine.placement import Preview
from tftui.engine.plan import Plan, rfc3339
from tftui.model.plaintext import visible

GI = 1024**3


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces (like kubectl get); cells shown as `visible`."""
    headers = [visible(h) for h in headers]
    rows = [[visible(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [headers, *rows]]
    return "\n".join(lines)


def _pct(before: float, after: float) -> str:
    return f"{before:.1f}%→{after:.1f}%"


def render_preview(pv: Preview) -> str:
    r = pv.request
    amount = f"{r.compute_percent:g}% compute" if r.compute_percent is not None else f"{r.tflops:g} TFLOPS"
    iso = r.isolation if r.isolation != "soft" else ""
    extra = "".join(
        f", {k} {visible(v)}"
        for k, v in (("model", r.model), ("vendor", r.vendor), ("isolation", iso), ("partition", r.partition))
        if v
    )
    if r.namespace:
        extra += f"; namespace {visible(r.namespace)}"
    head = (
        f"Request: {r.count} × ({amount}, {r.vram / GI:g}Gi VRAM{extra}) in pool {visible(pv.pool)}"
        f" — current placement mode {visible(pv.mode)}"
    )
    rows = []
    for m in pv.modes:
        p = m.placement
        current = " *" if p.mode == pv.mode else ""
        if p.node is None:
            rows.append([p.mode + current, "—", "—", "—", "—", p.reason or "nothing fits"])
            continue
        nb, na = m.node_before, m.node_after
        assert nb is not None and na is not None
        rows.append(
            [
                p.mode + current,
                p.node,
                ",".join(p.gpus)
                + (f" ({p.partition})" if p.partition and p.partition != r.partition else ""),
                f"TF {_pct(nb.tflops, na.tflops)}  VRAM {_pct(nb.vram, na.vram)}",
                f"TF {_pct(pv.pool_before.tflops, m.pool_after.tflops)}  VRAM {_pct(pv.pool_before.vram, m.pool_after.vram)}",
                " ".join(f"{n}={s}" for n, s in p.node_scores[:3]),
            ]
        )
    body = table(["MODE", "NODE", "GPUS", "NODE ALLOCATED", "POOL ALLOCATED", "TOP NODE SCORES"], rows)
    return f"{head}\n\n{body}\n\n* = the pool's current mode; changing it affects only workloads scheduled afterwards.\n"


def render_plan(plan: Plan) -> str:
    out = [f"Plan at {rfc3339(plan.now)}"]
    for name in sorted(plan.pools):
        pp = plan.pools[name]
        out.append(f"\n== pool {visible(name)}")
        if pp.compaction is not None:
            c = pp.compaction
            out.append(f"compaction: {'due' if c.due else 'not due'}, {len(c.released)} node(s) to release")
            rows = [[r.node, "release", r.action] for r in c.released]
            rows += [[k.node, k.reason, k.detail] for k in c.kept]
            if rows:
                out.append(table(["NODE", "DECISION", "DETAIL"], rows))
        if pp.defrag is not None:
            d = pp.defrag
            window = f" window {rfc3339(d.window[0])} → {rfc3339(d.window[1])}" if d.window else ""
            out.append(f"defrag: {visible(d.state)}{window}")
            if d.candidates:
                out.append(
                    table(
                        ["CANDIDATE", "UTILIZATION"],
                        [[c.node, f"{c.utilization:.1f}%"] for c in d.candidates],
                    )
                )
            if d.skipped:
                out.append(
                    table(["SKIPPED", "REASON", "DETAIL"], [[s.node, s.reason, s.detail] for s in d.skipped])
                )
            if d.evict is not None:
                e = d.evict
                out.append(
                    f"evict {visible(e.pod)} from {visible(e.node)} (simulated target {visible(str(e.target))})"
                )
    if plan.actions:
        out.append("\n== actions")
        for a in plan.actions:
            j = a.to_json()
            kind = j.pop("kind")
            out.append(
                f"- {visible(str(kind))}: " + ", ".join(f"{k}={visible(str(v))}" for k, v in j.items())
            )
    else:
        out.append("\nno actions")
    return "\n".join(out) + "\n"
