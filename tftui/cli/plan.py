"""`tftui plan`: compaction, defrag and autoscale actions the controller would take now, without
taking them."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tftui.cli.common import (
    _settle,
    _state,
    default_pool,
    emit,
    metrics_dsn,
    open_cluster,
    open_metrics,
    parse_now,
)
from tftui.model.jsontext import dumps_indented
from tftui.model.plaintext import visible
from tftui.sources.ports import SourceError

if TYPE_CHECKING:
    from tftui.engine.plan import Plan
    from tftui.engine.state import ClusterState
    from tftui.sources.ports import ClusterPort, MetricsPort


def cmd_plan(args: argparse.Namespace) -> int:
    """`tftui plan`: compaction and defrag per pool, plus the autoscale section when usage is readable.

    The autoscale section is additive: its actions follow the pools' actions, and the JSON gains a
    top-level `autoscale` summary per workload (`autoscaleSkipped` says why when there is none).
    """
    from tftui.engine.planning import plan_cluster
    from tftui.textout import render_plan

    now = parse_now(args.now, args.demo)
    cluster = open_cluster(args, acting=False)
    state = _state(cluster)
    pools = [default_pool(state, args.pool)] if args.pool else None
    plan = plan_cluster(state, now, pools=pools)
    summary, skipped = _plan_autoscale(args, cluster, state, now, plan)
    if args.json:
        doc = plan.to_json()
        doc["autoscale"] = summary
        if skipped is not None:
            doc["autoscaleSkipped"] = skipped
        emit(dumps_indented(doc) + "\n", json_text=True)
    else:
        emit(render_plan(plan) + _render_autoscale(summary, skipped))
    return 0


def _plan_autoscale(
    args: argparse.Namespace, cluster: ClusterPort, state: ClusterState, now: datetime, plan: Plan
) -> tuple[dict[str, Any], str | None]:
    """Append autoscale's actions to `plan`; return the per-workload summary, or why it was skipped."""
    from tftui.engine.autoscale import AutoscaleState, plan_autoscale
    from tftui.engine.plan import AnnotatePod, Event, PatchWorkloadStatus
    from tftui.model.duration import format_duration
    from tftui.runtime.history import autoscale_window, load_usage

    if args.no_autoscale:
        return {}, "--no-autoscale"
    dsn = metrics_dsn(args)
    metrics: MetricsPort | None
    if args.demo and not dsn:
        metrics = _demo_usage(cluster, args.seed, now)  # usage up to --now
        _settle()
    else:
        metrics = open_metrics(args, cluster)
    if metrics is None:
        return {}, "no metrics source (give --metrics-dsn DSN or set TFTUI_METRICS_DSN)"
    astate = AutoscaleState()
    astate.configure(state)
    try:  # aggregated where the rows are (store or simulator), as the daemon's first load is
        load_usage(metrics, astate, now - autoscale_window(state), now)
    except SourceError as exc:
        return {}, f"metrics store unreachable: {exc}"
    finally:
        close = getattr(metrics, "close", None)
        if callable(close):
            close()
    ap = plan_autoscale(state, astate, now)
    assert ap.result is not None
    pool_set = set(plan.pools) if args.pool else None
    summary: dict[str, Any] = {}
    keep: set[str] = set()
    for key in sorted(ap.result.workloads):
        rec = ap.result.workloads[key]
        wv = state.workloads[key]
        if pool_set is not None and wv.pool not in pool_set:
            continue
        if rec.reason == "no-data" and not rec.enabled:
            continue
        keep.add(key)
        summary[key] = {
            "enabled": rec.enabled,
            "target": rec.target,
            "current": rec.current.to_json(),
            "recommendation": rec.recommendation.to_json() if rec.recommendation else None,
            "provisional": rec.provisional,
            "history": format_duration(rec.history),
            "wouldApply": rec.would_apply,
            "reason": rec.reason,
            "detail": rec.detail,
        }
    for action in ap.actions():
        if isinstance(action, PatchWorkloadStatus):
            key = f"{action.namespace}/{action.name}"
        elif isinstance(action, Event):
            key = action.object.partition("/")[2]
        elif isinstance(action, AnnotatePod):
            w = state.workers.get(f"{action.namespace}/{action.name}")
            key = f"{action.namespace}/{w.workload}" if w is not None else ""
        else:  # pragma: no cover - autoscale emits only these
            key = ""
        if key in keep:
            plan.actions.append(action)
    return summary, None


def _demo_usage(cluster: ClusterPort, seed: int, now: datetime) -> MetricsPort:
    """The demo's usage: the simulator, with its history aggregates kept in the demo cache when
    the demo is a cached one (`usagecache`; a warm run then builds no simulator)."""
    key = getattr(cluster, "demo_key", None)
    if isinstance(key, str):
        from tftui.sources.sim.usagecache import KeptUsage

        return KeptUsage(cluster.snapshot(), demo_key=key, seed=seed, now=now)
    from tftui.sources.sim.usage import SimMetrics

    return SimMetrics(cluster.snapshot(), seed=seed, now=now)


def _render_autoscale(summary: dict[str, Any], skipped: str | None) -> str:
    lines = ["", "== autoscale"]
    if skipped is not None:
        lines.append(f"skipped: {visible(skipped)}")
        return "\n".join(lines) + "\n"
    if not summary:
        lines.append("no workload with usage data or autoscaling enabled")
    for key, s in summary.items():
        cur, rec = s["current"], s["recommendation"]
        change = "-"
        if rec is not None:
            change = (
                f"TFLOPS {cur['requests']['tflops']}->{rec['requests']['tflops']}, "
                f"VRAM {cur['requests']['vram']}->{rec['requests']['vram']}"
            )
        verdict = "would apply" if s["wouldApply"] else f"not applied: {visible(str(s['reason']))}"
        detail = f" ({visible(str(s['detail']))})" if s["detail"] else ""
        prov = ", provisional" if s["provisional"] else ""
        state = "on" if s["enabled"] else "off"
        lines.append(f"{visible(key)}  autoscale {state}{prov}  {change}  {verdict}{detail}")
    return "\n".join(lines) + "\n"
