"""The reference page's verify step (M6): two step-1 reports of the same cluster, before and after
a change, compared (allocation ratio up, fewer nodes, no throttling), pool by pool and node by node."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from tftui.engine.report import THROTTLE_RULE, Report, _weighted

__all__ = ["Check", "CheckResult", "NodeChange", "NodeChangeKind", "PoolChange", "Verification", "compare"]

CheckResult = Literal["pass", "fail", "unknown"]
NodeChangeKind = Literal["kept", "removed", "added"]


# -- verify (M6) ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    result: CheckResult
    detail: str


@dataclass(frozen=True, slots=True)
class PoolChange:
    pool: str
    nodes_before: int | None  # None: the pool is absent from that report
    nodes_after: int | None
    tflops_before: float | None
    tflops_after: float | None
    vram_before: float | None
    vram_after: float | None
    throttled_before: int | None  # WorkerTFlopsThrottled alerts firing in the pool; None: no data
    throttled_after: int | None
    wasted_before: float | None
    wasted_after: float | None


@dataclass(frozen=True, slots=True)
class NodeChange:
    node: str
    pool: str | None
    change: NodeChangeKind
    tflops_before: float | None
    tflops_after: float | None
    vram_before: float | None
    vram_after: float | None


@dataclass(frozen=True, slots=True)
class Verification:
    before_now: datetime
    after_now: datetime
    before_window: timedelta
    after_window: timedelta
    checks: tuple[Check, ...]
    pools: tuple[PoolChange, ...]
    nodes: tuple[NodeChange, ...]


def _pct(x: float | None) -> str:
    return "no data" if x is None else f"{x:.1f}%"


def _overall(report: Report) -> tuple[float | None, float | None]:
    if report.metrics_only:  # no capacities: pools weighted by the nodes that reported
        t = _weighted((p.tflops_allocated_pct, float(p.nodes)) for p in report.pools)
        v = _weighted((p.vram_allocated_pct, float(p.nodes)) for p in report.pools)
        return t, v
    t = _weighted((p.tflops_allocated_pct, p.tflops_capacity) for p in report.pools)
    v = _weighted((p.vram_allocated_pct, p.vram_capacity_bytes) for p in report.pools)
    return t, v


def _throttled(report: Report, pool: str | None) -> int | None:
    rule = report.rule(THROTTLE_RULE)
    if rule is None or rule.state in ("no-data", "not-evaluated"):
        return None
    return sum(1 for a in report.alerts if a.rule == THROTTLE_RULE and (pool is None or a.pool == pool))


def _ratio_check(before: Report, after: Report) -> Check:
    tb, vb = _overall(before)
    ta, va = _overall(after)
    detail = f"TFLOPS {_pct(tb)} → {_pct(ta)}, VRAM {_pct(vb)} → {_pct(va)}"
    if tb is None or ta is None or vb is None or va is None:
        return Check("allocation ratio of remaining nodes up", "unknown", detail)
    up = (ta > tb and va >= vb) or (va > vb and ta >= tb)
    return Check("allocation ratio of remaining nodes up", "pass" if up else "fail", detail)


def _throttle_check(after: Report) -> Check:
    name = f"{THROTTLE_RULE} not firing"
    rule = after.rule(THROTTLE_RULE)
    if rule is None or rule.state == "not-evaluated":
        return Check(name, "unknown", "alerts were not evaluated")
    if rule.state == "no-data":
        return Check(name, "unknown", f"no data: {rule.detail or 'the rule reads nothing'}")
    if rule.firing:
        workers = sorted({a.instance for a in after.alerts if a.rule == THROTTLE_RULE})
        return Check(
            name,
            "fail",
            f"firing for {len(workers)} worker(s) ({', '.join(workers[:3])}): requests or limits were lowered too far",
        )
    return Check(name, "pass", "not firing" + (f" ({rule.pending} pending)" if rule.pending else ""))


def compare(before: Report, after: Report) -> Verification:
    """The reference page's verify step: `before` and `after` are step-1 reports of the same cluster."""
    nb = sum(p.nodes for p in before.pools)
    na = sum(p.nodes for p in after.pools)
    checks = (
        _ratio_check(before, after),
        Check("node count down", "pass" if na < nb else "fail", f"{nb} → {na} GPU nodes"),
        _throttle_check(after),
    )
    pb = {p.name: p for p in before.pools}
    pa = {p.name: p for p in after.pools}
    pools = []
    for name in sorted(set(pb) | set(pa)):
        b, a = pb.get(name), pa.get(name)
        pools.append(
            PoolChange(
                pool=name,
                nodes_before=b.nodes if b else None,
                nodes_after=a.nodes if a else None,
                tflops_before=b.tflops_allocated_pct if b else None,
                tflops_after=a.tflops_allocated_pct if a else None,
                vram_before=b.vram_allocated_pct if b else None,
                vram_after=a.vram_allocated_pct if a else None,
                throttled_before=_throttled(before, name) if b else None,
                throttled_after=_throttled(after, name) if a else None,
                wasted_before=b.wasted_gpu_hours if b else None,
                wasted_after=a.wasted_gpu_hours if a else None,
            )
        )
    # a node "is there" when it is in the cluster, or (metrics only) when it reported in the window
    nb_rows = {n.name: n for n in before.nodes if n.in_cluster or (before.metrics_only and n.hours > 0)}
    na_rows = {n.name: n for n in after.nodes if n.in_cluster or (after.metrics_only and n.hours > 0)}
    nodes = []
    for name in sorted(set(nb_rows) | set(na_rows)):
        b_row, a_row = nb_rows.get(name), na_rows.get(name)
        change: NodeChangeKind = "kept" if b_row and a_row else ("removed" if b_row else "added")
        either = a_row or b_row
        assert either is not None
        nodes.append(
            NodeChange(
                node=name,
                pool=either.pool,
                change=change,
                tflops_before=b_row.tflops_allocated_pct if b_row else None,
                tflops_after=a_row.tflops_allocated_pct if a_row else None,
                vram_before=b_row.vram_allocated_pct if b_row else None,
                vram_after=a_row.vram_allocated_pct if a_row else None,
            )
        )
    return Verification(
        before_now=before.now,
        after_now=after.now,
        before_window=before.window,
        after_window=after.window,
        checks=checks,
        pools=tuple(pools),
        nodes=tuple(nodes),
    )
