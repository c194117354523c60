"""Step-1 diagnosis (behaviour M4): classify every node, GPU and workload, name the fix, price the waste.

Input is the reference page's four aggregates over a window (`Step1`) and the cluster as it is now
(`ClusterState`: capacities, which GPUs a node has and which workers a workload runs, the pool's
template and settings the fixes refer to). The patterns and levers are docs/behaviour.md M4; its
thresholds are console heuristics and live below as named constants with the anchor they come from.

Rules that keep the diagnosis honest:

- Missing data is never a decision. An object without the figures a pattern needs is not classified
  by that pattern; if nothing could be decided it is `no-data`, distinct from `ok`. A node's usage is
  only used when every one of its GPUs reported (a silent GPU could be the busy one). Rows whose
  values are NULL, or TFLOPS on a GPU the cluster does not know, are no sample (the sources leave
  the figure None), so a window of such rows is `no-data`, never `idle-reservation`.
- Allocation per node and requests per workload are window averages (queries 1 and 3); the four
  queries have no per-GPU allocation, so a GPU's allocation is the current snapshot's.
- Waste is "(allocated − used) share of a GPU × hours": the share is the larger of the TFLOPS and
  VRAM fractions, because a GPU is full when either is; compute counts at its window average, VRAM at
  its peak (it cannot be taken back from a running process). Hours are the rows the window holds at
  upstream's one row per object per minute, capped at the window. Money is GPU-hours × the GPU's
  hourly price (`GPUNode.spec.costPerHour` ÷ GPUs when set, else the ProviderConfig's price, else
  the public GPU table; `engine.prices`).
- Findings at different levels describe the same capacity (a node's over-request is the sum of its
  workloads'); `Totals` adds only disjoint ones: requests above usage (workload over-request and
  idle reservation) and capacity nobody requested (empty and fragmented nodes).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TypeVar

from tftui.engine.state import ClusterState
from tftui.engine.wastefixes import (
    _empty_node_fixes,
    _fragmentation_fixes,
    _idle_fixes,
    _names,
    _node_over_request_fixes,
    _node_under_request_fixes,
    _over_request_fixes,
    _saturation_fixes,
    _under_request_fixes,
    _vram_bound_fixes,
    _workers_over_request_fixes,
    _workers_under_request_fixes,
)
from tftui.engine.wastemodel import (
    _EPS,
    EMPTY_ALLOC_PCT,
    FRAGMENTED_MIN_NODES,
    HIGH_ALLOC_PCT,
    HIGH_USED_PCT,
    IDLE_COMPUTE_PCT,
    IDLE_REQUEST_RATIO,
    IDLE_VRAM_PCT,
    LEVELS,
    LIMIT_NEAR_RATIO,
    LOW_ALLOC_PCT,
    LOW_USED_PCT,
    OVER_REQUEST_RATIO,
    UNDER_REQUEST_MARGIN_PCT,
    VRAM_BOUND_GAP_PCT,
    VRAM_BOUND_MIN_PCT,
    Cls,
    Level,
    _gpu_price,
    _hours,
    _money,
    disjoint_waste,
    gib,
)
from tftui.engine.wastemodel import CAPACITY_WASTE as CAPACITY_WASTE
from tftui.engine.wastemodel import REQUEST_WASTE as REQUEST_WASTE
from tftui.engine.wastemodel import Diagnosis as Diagnosis
from tftui.engine.wastemodel import Finding as Finding
from tftui.engine.wastemodel import GPURow as GPURow
from tftui.engine.wastemodel import NodeRow as NodeRow
from tftui.engine.wastemodel import Totals as Totals
from tftui.engine.wastemodel import WorkloadRow as WorkloadRow
from tftui.engine.wastemodel import num as num
from tftui.model.giveway import checkpoint, paced
from tftui.model.metrics import GPUUsageSummary, NodeAllocation, Step1, WorkloadRequest, WorkloadUsage

# -- figures -------------------------------------------------------------------------------------


def _gpu_usage_index(step1: Step1) -> dict[str, GPUUsageSummary]:
    return {g.uuid.lower(): g for g in step1.gpus}


def _vram_pct(g: GPUUsageSummary, cap_vram: float | None) -> float | None:
    if g.vram_peak_pct is not None:
        return g.vram_peak_pct
    if cap_vram and g.vram_peak_bytes is not None:
        return g.vram_peak_bytes / cap_vram * 100.0
    return None


def _gpu_rows(step1: Step1, state: ClusterState, usage: dict[str, GPUUsageSummary]) -> list[GPURow]:
    def order(name: str) -> tuple[str, int, str]:
        gv = state.gpus.get(name)
        node = (gv.node if gv else None) or (usage[name].node if name in usage else "")
        return (node or "", gv.index if gv and gv.index is not None else -1, name)

    rows: list[GPURow] = []
    for name in sorted(set(state.gpus) | set(usage), key=order):
        gv = state.gpus.get(name)
        u = usage.get(name)
        cap_t = gv.capacity.tflops if gv else 0.0
        cap_v = gv.capacity.vram if gv else 0.0
        rows.append(
            GPURow(
                name=name,
                node=gv.node if gv else (u.node if u else None),
                pool=gv.pool if gv else None,
                model=gv.model if gv else "",
                in_cluster=gv is not None,
                tflops_allocated_pct=gv.allocated.tflops / cap_t * 100.0 if gv and cap_t else None,
                vram_allocated_pct=gv.allocated.vram / cap_v * 100.0 if gv and cap_v else None,
                compute_used_pct=u.compute_used_pct if u and u.samples else None,
                vram_peak_pct=_vram_pct(u, cap_v or None) if u and u.samples else None,
                hours=_hours(u.samples, step1.window) if u else 0.0,
                price_per_hour=_gpu_price(state, name),
                classes=(),
            )
        )
    return rows


def _node_rows(step1: Step1, state: ClusterState, gpu_rows: dict[str, GPURow]) -> list[NodeRow]:
    alloc: dict[str, NodeAllocation] = {n.node: n for n in step1.nodes}
    rows: list[NodeRow] = []
    for name in sorted(set(state.nodes) | set(alloc)):
        nv = state.nodes.get(name)
        a = alloc.get(name) if alloc.get(name) and alloc[name].samples else None
        gpus = nv.gpus if nv else []
        reporting = [gpu_rows[g] for g in gpus if g in gpu_rows and gpu_rows[g].compute_used_pct is not None]
        used: float | None = None
        if gpus and len(reporting) == len(gpus):
            weights = [state.gpus[g.name].capacity.tflops for g in reporting]
            total = sum(weights)
            if total > 0:
                used = (
                    sum(w * (g.compute_used_pct or 0.0) for w, g in zip(weights, reporting, strict=True))
                    / total
                )
        peaks = [g.vram_peak_pct for g in reporting if g.vram_peak_pct is not None]
        prices = [gpu_rows[g].price_per_hour for g in gpus if g in gpu_rows]
        price = None
        if nv is not None and nv.cost_per_hour is not None and gpus:
            price = nv.cost_per_hour / len(gpus)
        elif prices and all(p is not None for p in prices):
            price = sum(p for p in prices if p is not None) / len(prices)
        rows.append(
            NodeRow(
                name=name,
                pool=(nv.pool if nv else None) or (alloc[name].pool if name in alloc else None),
                gpus=len(gpus),
                in_cluster=nv is not None,
                tflops_allocated_pct=a.tflops_allocated_pct if a else None,
                vram_allocated_pct=a.vram_allocated_pct if a else None,
                compute_used_pct=used,
                vram_peak_pct=max(peaks) if peaks else None,
                gpus_reporting=len(reporting),
                hours=_hours(a.samples, step1.window) if a else 0.0,
                price_per_gpu_hour=price,
                classes=(),
            )
        )
    return rows


def _workload_rows(step1: Step1, state: ClusterState) -> tuple[list[WorkloadRow], dict[str, float | None]]:
    """Rows per workload and the mean hourly price of the GPUs each runs on."""
    req: dict[str, WorkloadRequest] = {f"{r.namespace}/{r.workload}": r for r in step1.workload_requests}
    use: dict[str, WorkloadUsage] = {f"{u.namespace}/{u.workload}": u for u in step1.workload_usage}
    rows: list[WorkloadRow] = []
    prices: dict[str, float | None] = {}
    for key in paced(sorted(set(state.workloads) | set(req) | set(use)), 64):
        wv = state.workloads.get(key)
        r = req.get(key) if req.get(key) and req[key].samples else None
        u = use.get(key) if use.get(key) and use[key].samples else None
        ns, _, name = key.partition("/")
        devices = [
            g for w in (state.workers_of_workload(key) if wv else []) for g in w.gpu_ids if g in state.gpus
        ]
        cap_t = sum(state.gpus[g].capacity.tflops for g in devices) / len(devices) if devices else None
        cap_v = sum(state.gpus[g].capacity.vram for g in devices) / len(devices) if devices else None
        dev_prices = [_gpu_price(state, g) for g in devices]
        prices[key] = (
            sum(p for p in dev_prices if p is not None) / len(dev_prices)
            if dev_prices and all(p is not None for p in dev_prices)
            else None
        )
        gpu_count = (
            max(1, round(r.gpu_count)) if r and r.gpu_count is not None else (wv.gpu_count if wv else None)
        )
        limit = None
        if wv is not None:
            workers = state.workers_of_workload(key)
            limit = workers[0].limit.tflops if workers else wv.limit.tflops
        rows.append(
            WorkloadRow(
                namespace=ns,
                name=name,
                pool=wv.pool if wv else None,
                in_cluster=wv is not None,
                workers=r.workers if r else (len(wv.workers) if wv else None),
                gpu_count=gpu_count,
                tflops_request=r.tflops_request if r else None,
                tflops_limit=limit or None,
                tflops_avg=u.tflops_avg if u else None,
                tflops_peak=u.tflops_peak if u else None,
                vram_request_bytes=r.vram_request_bytes if r else None,
                vram_peak_bytes=u.vram_peak_bytes if u else None,
                device_tflops=cap_t or None,
                device_vram_bytes=cap_v or None,
                device_hours=_hours(r.samples, step1.window, r.workers) * (gpu_count or 1) if r else 0.0,
                autoscale=wv.autoscale if wv else False,
                classes=(),
            )
        )
    return rows, prices


# -- classification ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Ctx:
    """The classification pass: the cluster the fixes refer to, and the findings collected so far."""

    state: ClusterState
    findings: list[Finding]

    def add(
        self,
        level: Level,
        name: str,
        pool: str | None,
        cls: Cls,
        detail: str,
        fixes: Iterable[str],
        gpu_hours: float | None,
        price: float | None,
    ) -> str:
        hours = None if gpu_hours is None else max(0.0, gpu_hours)
        self.findings.append(
            Finding(level, name, pool, cls, detail, tuple(fixes), hours, _money(hours, price))
        )
        return cls


def _verdict(found: list[str], decidable: bool) -> tuple[str, ...]:
    if found:
        return tuple(found)
    return ("ok",) if decidable else ("no-data",)


def _classify_node(ctx: _Ctx, row: NodeRow, fragmented_in_pool: int) -> tuple[str, ...]:
    st = ctx.state
    nv = st.nodes.get(row.name)
    if nv is None or row.tflops_allocated_pct is None or row.vram_allocated_pct is None:
        return ("no-data",)
    pv = st.pools.get(row.pool) if row.pool else None
    t, v, used = row.tflops_allocated_pct, row.vram_allocated_pct, row.compute_used_pct
    held = max(t, v)
    gpu_h = row.gpus * row.hours
    price = row.price_per_gpu_hour
    found: list[str] = []
    if held <= EMPTY_ALLOC_PCT + _EPS and not nv.workers:
        found.append(
            ctx.add(
                "node", row.name, row.pool, "empty-node",
                f"nothing allocated over the window on {row.gpus} GPU(s) and no worker now",
                _empty_node_fixes(st, nv, pv), gpu_h, price,
            )
        )  # fmt: skip
        return tuple(found)
    if used is not None and t >= HIGH_ALLOC_PCT and used >= HIGH_USED_PCT:
        found.append(
            ctx.add(
                "node", row.name, row.pool, "saturation",
                f"TFLOPS {num(t)}% allocated and compute {num(used)}% used",
                _saturation_fixes(st, pv), 0.0, price,
            )
        )  # fmt: skip
    if used is not None and t >= HIGH_ALLOC_PCT and used <= LOW_USED_PCT:
        found.append(
            ctx.add(
                "node", row.name, row.pool, "over-request",
                f"TFLOPS {num(t)}% allocated but compute only {num(used)}% used",
                _node_over_request_fixes(st, nv), (t - used) / 100.0 * gpu_h, price,
            )
        )  # fmt: skip
    if held <= LOW_ALLOC_PCT and fragmented_in_pool >= FRAGMENTED_MIN_NODES:
        found.append(
            ctx.add(
                "node", row.name, row.pool, "fragmentation",
                f"only {num(held)}% allocated (TFLOPS {num(t)}%, VRAM {num(v)}%), one of "
                f"{fragmented_in_pool} partly used nodes in pool {row.pool}",
                _fragmentation_fixes(st, nv, pv), (100.0 - held) / 100.0 * gpu_h, price,
            )
        )  # fmt: skip
    if v >= VRAM_BOUND_MIN_PCT and v - t >= VRAM_BOUND_GAP_PCT:
        found.append(
            ctx.add(
                "node", row.name, row.pool, "vram-bound",
                f"VRAM {num(v)}% allocated vs TFLOPS {num(t)}%: {num(v - t)} points of compute "
                "stranded behind full memory",
                _vram_bound_fixes(st, st.workers_of_node(nv.name), pv), (v - t) / 100.0 * gpu_h, price,
            )
        )  # fmt: skip
    if used is not None and used > t + UNDER_REQUEST_MARGIN_PCT:
        found.append(
            ctx.add(
                "node", row.name, row.pool, "under-request",
                f"compute {num(used)}% used but only {num(t)}% of TFLOPS allocated",
                _node_under_request_fixes(st, nv), 0.0, price,
            )
        )  # fmt: skip
    return _verdict(found, used is not None)


def _classify_gpu(ctx: _Ctx, row: GPURow) -> tuple[str, ...]:
    st = ctx.state
    gv = st.gpus.get(row.name)
    if gv is None or row.tflops_allocated_pct is None or row.vram_allocated_pct is None:
        return ("no-data",)
    t, v, used, peak = (
        row.tflops_allocated_pct,
        row.vram_allocated_pct,
        row.compute_used_pct,
        row.vram_peak_pct,
    )
    held = max(t, v)
    pv = st.pools.get(row.pool) if row.pool else None
    workers = st.workers_of_gpu(gv.name)
    found: list[str] = []
    if (
        held > _EPS
        and used is not None
        and peak is not None
        and used < IDLE_COMPUTE_PCT
        and peak < IDLE_VRAM_PCT
    ):
        found.append(
            ctx.add(
                "gpu", row.name, row.pool, "idle-reservation",
                f"{num(held)}% reserved by {_names(w.key for w in workers)} but compute {num(used, 2)}% "
                f"and VRAM peak {num(peak)}%",
                _idle_fixes(st, pv, sorted({w.qos for w in workers}), [w.workload or w.name for w in workers]),
                held / 100.0 * row.hours, row.price_per_hour,
            )
        )  # fmt: skip
    elif used is not None and t >= HIGH_ALLOC_PCT and used <= LOW_USED_PCT:
        found.append(
            ctx.add(
                "gpu", row.name, row.pool, "over-request",
                f"TFLOPS {num(t)}% allocated but compute only {num(used)}% used",
                _workers_over_request_fixes(workers), (t - used) / 100.0 * row.hours, row.price_per_hour,
            )
        )  # fmt: skip
    if used is not None and t >= HIGH_ALLOC_PCT and used >= HIGH_USED_PCT:
        found.append(
            ctx.add(
                "gpu", row.name, row.pool, "saturation",
                f"TFLOPS {num(t)}% allocated and compute {num(used)}% used",
                _saturation_fixes(st, pv), 0.0, row.price_per_hour,
            )
        )  # fmt: skip
    if v >= VRAM_BOUND_MIN_PCT and v - t >= VRAM_BOUND_GAP_PCT:
        found.append(
            ctx.add(
                "gpu", row.name, row.pool, "vram-bound",
                f"VRAM {num(v)}% allocated vs TFLOPS {num(t)}%",
                _vram_bound_fixes(st, workers, pv), (v - t) / 100.0 * row.hours if row.hours else None,
                row.price_per_hour,
            )
        )  # fmt: skip
    if used is not None and used > t + UNDER_REQUEST_MARGIN_PCT:
        found.append(
            ctx.add(
                "gpu", row.name, row.pool, "under-request",
                f"compute {num(used)}% used but only {num(t)}% of TFLOPS allocated",
                _workers_under_request_fixes(workers), 0.0, row.price_per_hour,
            )
        )  # fmt: skip
    return _verdict(found, used is not None)


def _classify_workload(ctx: _Ctx, row: WorkloadRow, price: float | None) -> tuple[str, ...]:
    st = ctx.state
    wv = st.workloads.get(row.key)
    if (
        wv is None
        or row.tflops_request is None
        or row.vram_request_bytes is None
        or row.tflops_avg is None
        or row.tflops_peak is None
        or row.vram_peak_bytes is None
    ):
        return ("no-data",)
    req, avg, peak = row.tflops_request, row.tflops_avg, row.tflops_peak
    vreq, vpeak = row.vram_request_bytes, row.vram_peak_bytes
    pv = st.pools.get(row.pool) if row.pool else None
    waste = _request_waste(row)
    found: list[str] = []
    share = avg / row.device_tflops * 100.0 if row.device_tflops else None
    idle = req > 0 and avg < IDLE_REQUEST_RATIO * req and (share is None or share < IDLE_COMPUTE_PCT)
    tf_over = req > 0 and avg / req < OVER_REQUEST_RATIO
    vram_over = vreq > 0 and vpeak / vreq < OVER_REQUEST_RATIO
    use_text = (
        f"uses {num(avg)} of {num(req)} TFLOPS requested per GPU on average ({num(avg / req * 100.0 if req else 0.0)}%), "
        f"peak {num(peak)}; VRAM peak {gib(vpeak)} of {gib(vreq)}"
    )
    if idle:
        found.append(
            ctx.add(
                "workload", row.key, row.pool, "idle-reservation", use_text,
                _idle_fixes(st, pv, [wv.qos], [row.key]), waste, price,
            )
        )  # fmt: skip
    elif tf_over or vram_over:
        found.append(
            ctx.add(
                "workload", row.key, row.pool, "over-request", use_text,
                _over_request_fixes(row, wv, tf_over, vram_over), waste, price,
            )
        )  # fmt: skip
    limit = row.tflops_limit
    near_limit = limit is not None and limit > 0 and peak >= LIMIT_NEAR_RATIO * limit
    if (req > 0 and avg > req) or vpeak > vreq or near_limit:
        found.append(
            ctx.add(
                "workload", row.key, row.pool, "under-request", use_text
                + (f"; peak at {num(peak / limit * 100.0)}% of its {num(limit)} TFLOPS limit" if near_limit and limit else ""),
                _under_request_fixes(row, avg > req > 0, vpeak > vreq, near_limit), 0.0, price,
            )
        )  # fmt: skip
    return _verdict(found, True)


def _request_waste(row: WorkloadRow) -> float | None:
    """(held − needed) share of a device × device-hours; None without the device's capacity."""
    if not row.device_tflops or not row.device_vram_bytes:
        return None
    assert row.tflops_request is not None and row.vram_request_bytes is not None
    assert row.tflops_avg is not None and row.vram_peak_bytes is not None
    held = max(row.tflops_request / row.device_tflops, row.vram_request_bytes / row.device_vram_bytes)
    needed = max(row.tflops_avg / row.device_tflops, row.vram_peak_bytes / row.device_vram_bytes)
    return max(0.0, held - needed) * row.device_hours


_Row = TypeVar("_Row", NodeRow, GPURow, WorkloadRow)


# -- entry point ---------------------------------------------------------------------------------


def _sort_key(f: Finding) -> tuple[float, int, str, str]:
    w = -1.0 if f.wasted_gpu_hours is None else f.wasted_gpu_hours
    return (-w, LEVELS.index(f.level), f.name, f.cls)


def diagnose(step1: Step1, state: ClusterState) -> Diagnosis:
    """Classify every node, GPU and workload of `state` and `step1`; findings by wasted GPU-hours."""
    ctx = _Ctx(state, [])
    usage = _gpu_usage_index(step1)
    gpu_rows = _gpu_rows(step1, state, usage)
    checkpoint()
    gpu_index = {g.name: g for g in gpu_rows}
    node_rows = _node_rows(step1, state, gpu_index)
    checkpoint()
    wl_rows, wl_prices = _workload_rows(step1, state)
    checkpoint()

    partly: dict[str | None, int] = defaultdict(int)
    for n in node_rows:
        if n.in_cluster and n.tflops_allocated_pct is not None and n.vram_allocated_pct is not None:
            held = max(n.tflops_allocated_pct, n.vram_allocated_pct)
            if EMPTY_ALLOC_PCT + _EPS < held <= LOW_ALLOC_PCT:
                partly[n.pool] += 1

    nodes = tuple(_with(n, _classify_node(ctx, n, partly[n.pool])) for n in paced(node_rows))
    gpus = tuple(_with(g, _classify_gpu(ctx, g)) for g in paced(gpu_rows))
    workloads = tuple(_with(w, _classify_workload(ctx, w, wl_prices.get(w.key))) for w in paced(wl_rows))
    findings = tuple(sorted(ctx.findings, key=_sort_key))
    return Diagnosis(step1.window, nodes, gpus, workloads, findings, _totals(findings))


def _with(row: _Row, classes: tuple[str, ...]) -> _Row:
    return replace(row, classes=classes)


def _totals(findings: Iterable[Finding]) -> Totals:
    req_h = req_m = cap_h = cap_m = 0.0
    unpriced = 0
    for f in findings:
        if not disjoint_waste(f):
            continue
        assert f.wasted_gpu_hours is not None
        if f.level == "workload":
            req_h += f.wasted_gpu_hours
            req_m += f.wasted_money or 0.0
        else:
            cap_h += f.wasted_gpu_hours
            cap_m += f.wasted_money or 0.0
        if f.wasted_money is None and f.wasted_gpu_hours > 0:
            unpriced += 1
    return Totals(req_h, req_m, cap_h, cap_m, unpriced)
