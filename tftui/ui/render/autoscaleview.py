"""How the console shows the autoscale figures that `load.autoscale` produced.

Everything here only formats an `AutoscaleAnalysis`: the Workloads columns, the detail section (usage
distribution, percentiles, cron rule, recommendation with bounds, would it apply and why not) and the
body of the autoscale on/off confirmation. The console decides nothing; the external scaler is not
called from here (only the runtime's loop calls it), which the detail says when one is configured.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Final

from rich.text import Text

from tftui.engine.autoscale import WorkloadRecommendation
from tftui.engine.histogram import DecayingHistogram
from tftui.model import keys
from tftui.ui.load.autoscale import AutoscaleAnalysis
from tftui.ui.render.format import NO_DATA, fmt_bytes, fmt_num
from tftui.ui.render.poolwaste import LOADING

__all__ = [
    "detail_text",
    "distribution",
    "rec_cell",
    "toggle_body",
    "used_cell",
]

DIST_BINS: Final = 8
BAR: Final = 20
PERCENTILES: Final = (0.5, 0.9, 0.99)


# -- table cells ---------------------------------------------------------------------------------


def _pair(tflops: float, vram: float) -> str:
    return f"{fmt_num(tflops)} TF {fmt_bytes(vram)}"


NO_RECOMMENDATION: Final = {
    "below-threshold": "≈ request",
    "no-change": "= request",
    "scale-down-locked": "cron lock",
    "invalid-config": "config err",
    "invalid-target": "bad target",
    "external-error": "ext. error",
}
"""What RECOMMENDED says when the engine has data but recommends no change (the detail says why)."""

REASON_WORDS: Final = {
    "no-data": "no usage data, nothing to recommend from (no metrics is not idle)",
    "invalid-config": "the autoscale configuration is invalid",
    "invalid-target": "the target resource is invalid",
    "disabled": "autoscaling is off for this workload (a turns it on)",
    "provisional": "history shorter than initialDelayPeriod: decreases are held",
    "below-threshold": "the change is inside updateThreshold",
    "no-change": "the recommendation equals the current request",
    "scale-down-locked": "a cron rule locks scale-down",
    "capped": "applied, capped by the free capacity of the workers' GPUs",
    "applied": "the runtime applies it on its next autoscale run",
    "external-error": "the external scaler failed",
}
"""The engine's reason codes in words, for the detail."""


_DIM: Final = {reason: Text(label, style="dim") for reason, label in NO_RECOMMENDATION.items()}
"""One cell per reason, shared by every row: cells are never changed once built (marks, deltas
and cuts make new ones), and a `Text` costs ~270 bytes (37,484 rows at 5,000 nodes)."""


def rec_cell(analysis: AutoscaleAnalysis | None, key: str, pending: bool) -> str | Text:
    """The recommended request per device (bold when it would be applied), `—` without data.
    Plain strings where nothing is styled."""
    rec = analysis.result.workloads.get(key) if analysis is not None else None
    if rec is not None and rec.recommendation is None and rec.reason in NO_RECOMMENDATION:
        return _DIM[rec.reason]
    if rec is None or rec.recommendation is None:
        return LOADING if pending and analysis is None else NO_DATA
    r = rec.recommendation
    pair = _pair(float(r.tf_req), float(r.vram_req))
    return Text(pair, style="bold") if rec.would_apply else pair


def cells_shown(analysis: AutoscaleAnalysis | None, key: str, pending: bool) -> tuple[object, ...]:
    """What `rec_cell` and `used_cell` show for `key`, as plain values: the row cache compares this,
    not the analysis, which is a new object at every refresh (every workload row was built again
    each time: 37,484 at 5,000 nodes, and the rows of three refreshes held at once)."""
    rec = analysis.result.workloads.get(key) if analysis is not None else None
    if rec is None:
        return (None, pending and analysis is None)
    r, est = rec.recommendation, rec.estimates
    return (
        rec.reason,
        None if r is None else (float(r.tf_req), float(r.vram_req)),
        rec.would_apply,
        None if est is None else (est.tf_usage[1], est.vram_usage[1]),
    )


def used_cell(analysis: AutoscaleAnalysis | None, key: str, pending: bool) -> str:
    """Usage per device at the recommender's target percentiles, `—` without data."""
    rec = analysis.result.workloads.get(key) if analysis is not None else None
    if rec is None or rec.estimates is None:
        return LOADING if pending and analysis is None else NO_DATA
    est = rec.estimates
    return _pair(est.tf_usage[1], est.vram_usage[1])


# -- the detail ----------------------------------------------------------------------------------


def distribution(hist: DecayingHistogram, bins: int = DIST_BINS) -> list[tuple[float, float, float]]:
    """The decayed weights regrouped into at most `bins` ranges over the occupied buckets:
    (from, to, share of the total weight). Display only; percentiles come from the histogram."""
    if hist.is_empty() or hist.total <= 0:
        return []
    lo, hi = hist.min_bucket, hist.max_bucket
    n = hi - lo + 1
    per = max(1, -(-n // bins))
    opts = hist.options
    out: list[tuple[float, float, float]] = []
    for first in range(lo, hi + 1, per):
        last = min(hi, first + per - 1)
        weight = sum(hist.span(first, last + 1))
        end = opts.bucket_start(last + 1) if last + 1 < opts.num_buckets else opts.bucket_start(last)
        out.append((opts.bucket_start(first), end, weight / hist.total))
    return out


HIST_CHAR: Final = "━"
HIST_HALF: Final = "╸"
"""The distribution's bars: a glyph of their own (`█` means measured use in every gauge)."""


def _range_labels(rows: Sequence[tuple[float, float, float]], vram: bool) -> list[str]:
    """`11.2–11.6 TF`: the fewest decimals that keep every range's ends (and the ranges) apart.
    The short table formatters round 11.2 and 11.6 to `11`, which read `11–11 TF`."""
    scale, unit = (1024**3, "Gi") if vram else (1.0, " TF")
    ends = [(a / scale, b / scale) for a, b, _ in rows]
    for decimals in range(4):

        def f(x: float, d: int = decimals) -> str:
            return f"{x:,.{d}f}"

        labels = [f"{f(a)}–{f(b)}{unit}" for a, b in ends]
        if all(f(a) != f(b) for a, b in ends) and len(set(labels)) == len(labels):
            return labels
    return [f"{a:.4g}–{b:.4g}{unit}" for a, b in ends]


def _bars(rows: Sequence[tuple[float, float, float]], vram: bool) -> list[Text]:
    top = max((s for _, _, s in rows), default=0.0) or 1.0
    labels = _range_labels(rows, vram)
    width = max(15, *(len(label) for label in labels))
    out = []
    for label, (_, _, share) in zip(labels, rows, strict=True):
        cells = share / top * BAR
        full = int(cells)
        bar = HIST_CHAR * full + (HIST_HALF if cells - full >= 0.5 else "")
        out.append(Text.assemble(f"  {label:<{width}}", (bar.ljust(BAR), "cyan"), f" {share * 100:5.1f}%"))
    return out


def _res(tf: float, vram: float) -> str:
    return f"{fmt_num(tf)} TF / {fmt_bytes(vram)}"


def detail_text(
    analysis: AutoscaleAnalysis | None, key: str, *, error: str | None = None, pending: bool = False
) -> Text:
    """The autoscale section of the workload detail."""
    head = Text("Autoscale  ", style="bold")
    if analysis is None:
        why = error or ("computing the recommendation…" if pending else "no recommendation (no metrics)")
        return Text.assemble(head, why)
    rec = analysis.result.workloads.get(key)
    if rec is None:
        return Text.assemble(head, f"{key} is not in the cluster")
    lines: list[Text] = []
    state = "on" if rec.enabled else "off"
    lines.append(
        Text.assemble(
            head,
            (state, "bold green" if rec.enabled else "bold"),
            f" · target {rec.target} · qos {rec.qos} · history {_age(rec.history)}"
            + (" (provisional)" if rec.provisional else "")
            + f" · {rec.samples} samples",
            (f"  (stale: {error})" if error else "", "yellow"),
        )
    )
    verdict = "would apply" if rec.would_apply else "not applied"
    recommended: Text | str = "none"
    if rec.recommendation is not None:
        r = rec.recommendation
        recommended = Text(
            f"{fmt_num(float(r.tf_req))}/{fmt_num(float(r.tf_lim))} TF  "
            f"{fmt_bytes(float(r.vram_req))}/{fmt_bytes(float(r.vram_lim))}",
            style="bold",
        )
    why = REASON_WORDS.get(rec.reason, rec.reason)
    lines.append(
        Text.assemble(
            "  recommended  ",
            recommended,
            "  ",
            (verdict, "bold green" if rec.would_apply else "bold yellow"),
            f" ({rec.reason}): {why}" + (f" — {rec.detail}" if rec.detail else ""),
        )
    )
    cur = rec.current
    lines.append(
        Text(
            f"  current      request/limit per device {fmt_num(float(cur.tf_req))}/{fmt_num(float(cur.tf_lim))} TF  "
            f"{fmt_bytes(float(cur.vram_req))}/{fmt_bytes(float(cur.vram_lim))}"
        )
    )
    est = rec.estimates
    hist = analysis.histograms.get(key)
    tf_hist, vram_hist = (hist.tf, hist.vram) if hist is not None else (None, None)
    if est is None or tf_hist is None or vram_hist is None:
        lines.append(Text(f"  usage: no data in tf_worker_usage over the last {_age(analysis.window)}"))
    else:
        tfp = " ".join(f"P{int(p * 100)} {fmt_num(tf_hist.percentile(p))}" for p in PERCENTILES)
        vp = " ".join(f"P{int(p * 100)} {fmt_bytes(vram_hist.percentile(p))}" for p in PERCENTILES)
        lines.append(
            Text(f"  TFLOPS used  lower/target/upper {'/'.join(fmt_num(x) for x in est.tf_usage)}  ·  {tfp}")
        )
        lines.append(
            Text(
                f"  VRAM used    lower/target/upper {'/'.join(fmt_bytes(x) for x in est.vram_usage)}  ·  {vp}"
            )
        )
        lines.append(
            Text(
                f"  bounds       TFLOPS {'/'.join(fmt_num(x) for x in est.tf)}  "
                f"VRAM {'/'.join(fmt_bytes(x) for x in est.vram)}  (with margin)"
            )
        )
    rule = rec.cron_rule
    if rule is None:
        lines.append(Text("  cron rule    none active"))
    else:
        d = rule.desired
        lines.append(
            Text(
                f"  cron rule    {rule.name}  {rule.start} → {rule.end}  "
                f"{fmt_num(float(d.tf_req))}/{fmt_num(float(d.tf_lim))} TF  "
                f"{fmt_bytes(float(d.vram_req))}/{fmt_bytes(float(d.vram_lim))}"
            )
        )
    if rec.external:
        lines.append(Text(f"  external     {rec.external}"))
    if tf_hist is not None and vram_hist is not None and est is not None:
        tf_rows = distribution(tf_hist)
        v_rows = distribution(vram_hist)
        if tf_rows:
            lines.append(Text("  TFLOPS usage distribution (decayed weight)", style="dim"))
            lines += _bars(tf_rows, vram=False)
        if v_rows:
            lines.append(Text("  VRAM usage distribution (daily peaks)", style="dim"))
            lines += _bars(v_rows, vram=True)
    return Text("\n").join(lines)


def _age(d: timedelta) -> str:
    minutes = int(d.total_seconds() // 60)
    if minutes < 60:
        return f"{minutes}m"
    h, m = divmod(minutes, 60)
    return f"{h}h{m:02d}m" if m else f"{h}h"


# -- the toggle ----------------------------------------------------------------------------------


def toggle_body(key: str, rec: WorkloadRecommendation | None, enable: bool, pod_annotation: bool) -> Text:
    """What turning autoscaling on/off writes, its pod-template equivalent and what follows."""
    verb = "on" if enable else "off"
    lines = [
        Text.assemble("Turn autoscaling ", (verb, "bold"), f" for TensorFusionWorkload {key}."),
        Text(""),
        Text("Writes (JSON merge patch):"),
        Text(
            '  {"spec": {"autoScalingConfig": {"autoSetResources": {"enable": '
            + ("true" if enable else "false")
            + "}}}}",
            style="bold",
        ),
        Text("Equivalent pod-template annotation:"),
        Text(f'  {keys.AUTOSCALE}: "{"true" if enable else "false"}"', style="bold"),
    ]
    if not enable:
        lines.append(
            Text('  (only "true" turns it on: "false" and no annotation both mean off)', style="dim")
        )
    if not enable and pod_annotation:
        lines.append(
            Text(
                f'Its workers carry {keys.AUTOSCALE}: "true", which keeps autoscaling on until they '
                "are re-created without it.",
                style="yellow",
            )
        )
    if rec is not None and rec.recommendation is not None and enable:
        r = rec.recommendation
        lines.append(Text(""))
        lines.append(
            Text(
                f"Current recommendation: {fmt_num(float(r.tf_req))} TF {fmt_bytes(float(r.vram_req))} per "
                f"device ({'would apply' if rec.reason in ('disabled', 'applied', 'capped') else rec.reason})."
            )
        )
    return Text("\n").join(lines)
