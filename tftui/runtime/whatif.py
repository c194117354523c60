"""What-if: run a placement/defrag/autoscale policy over simulated days and count what it costs.

`simulate()` copies a starting set of objects (the demo, a dump or a live snapshot), applies a
`Policy` to it (every SchedulingConfigTemplate's placement mode, each pool's defrag switch, the
workloads' autoscale switch), and drives the **same code the console and the daemon run**: the
`ActingSimCluster` (evictions, replacements placed by the pool's mode, claim and node removal
delays, events) under a `runtime.loops.Runtime` (compaction on its period, defrag on its cron window,
autoscale on its interval, all planned by `engine.planning.plan_cluster` / `plan_autoscale`).
It lives in runtime/ because it drives the Runtime (sources never import runtime).

**Event queue, not fixed steps.** The clock jumps straight to the next thing that can change the
cluster: a pool's next reconcile or the autoscale run (`Runtime.next_due`), a simulated controller's
timer (`ActingSimCluster.next_due`: pod gone, worker ready, claim or node gone), a workload arrival or
departure batch, a provisioned node coming up, or a sample. Nothing is computed between events, and
the `ClusterState` is rebuilt only when the objects changed (`WhatIfCluster.state`), so quiet hours
cost a few plan calls; the Runtime is only entered when a pool or autoscale is due, and Pending
workers are read from the scheduler's queue, so an instant with nothing due builds no state.

**A change costs what it touches.** States are derived from the previous one
(`engine.incremental.update_state`: the cluster copies on write, so an
unchanged object is the same dict and keeps its views; equal to a full build), the simulated
cluster's status pass re-indexes only the pods changed since the last pass, and defrag derives its
indexes, target judgements and candidate simulations once per state (`ClusterState.derived`). The
simulated cluster hands each state the objects it changed (`engine.snapdelta`), so finding them
costs what changed. A week of the 500-node demo takes about 85 CPU-seconds (`bench/simulate.py`).

**Workload churn** is generated from a seed before any policy runs, so every policy sees the same
arrivals and departures: each workload lives an exponential time (mean `1/churn` days); each pool
receives new workloads at the rate that keeps its size steady, cloned from its own workloads (same
requests, profile and replicas; new names). Arrivals and departures are applied in batches on a grid
(`churn_step`, default 1 h) — one scheduler pass per batch instead of one per workload.

**Usage** (GPU-hours used, throttling, and the rows autoscale reads) is either *generated* — the
demo's usage profiles (`sources.sim.scenarios`), per workload, as a fraction of its *original*
request so a smaller request after autoscale does not shrink the demand — or *recorded*: the mean
TFLOPS per device of each workload per hour of day over the history window of a `MetricsPort`
(GreptimeDB), replayed day after day; clones use their template's profile. A workload without
recorded usage is counted as *unmeasured*, never as idle.

**Provisioning.** A pool with workers that stay Pending gets one node like its largest, after
`provision_delay` (default 5 min), one at a time, up to twice its starting node count.

Throttled minutes: worker-minutes in which the demand exceeded the worker's TFLOPS limit (autoscale
lowering limits shows up here). Node-hours and cost count every node until it is gone (a released
node costs until its claim or the cluster autoscaler removes it); cost is the GPUNode's
`costPerHour`, else its GPUs' prices (`engine.prices`). Active nodes are nodes not being released;
the ratio is active ÷ `engine.lowerbound.pool_bound` (the configured bound), per pool, per sample.

This module is the driver (`simulate`, `compare`) and re-exports the parts, which live apart: the
policies (`whatif_policy`), the cluster (`whatif_cluster`), usage (`whatif_usage`), configuration,
churn and results (`whatif_results`) and output (`whatif_output`).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Final

from tftui.engine.isolation import compatible
from tftui.engine.lowerbound import pool_bound
from tftui.engine.plan import DeleteGPUNodeClaim, EvictPod, LabelNode, Plan
from tftui.engine.prices import gpu_price
from tftui.engine.state import ClusterState, NodeView, WorkerView
from tftui.model import keys
from tftui.model.gcpause import gc_paused
from tftui.runtime.loops import Runtime
from tftui.runtime.sweep import Progress, in_processes
from tftui.runtime.whatif_cluster import WhatIfCluster
from tftui.runtime.whatif_output import render_csv, render_json, render_table
from tftui.runtime.whatif_policy import MODES, PRESETS, Policy, apply_policy, parse_policy, unblock
from tftui.runtime.whatif_results import Feed, PolicyResult, SimConfig, _Churn, churn_schedule
from tftui.runtime.whatif_usage import DemandColumns, Instant, Usage, UsageMetrics, recorded_usage
from tftui.sources.sim.cluster import as_utc

__all__ = [
    "MODES",
    "PRESETS",
    "Feed",
    "Policy",
    "PolicyResult",
    "SimConfig",
    "WhatIfCluster",
    "apply_policy",
    "churn_schedule",
    "compare",
    "holds",
    "parse_policy",
    "recorded_usage",
    "render_csv",
    "render_json",
    "render_table",
    "simulate",
    "unblock",
]

JSON = dict[str, Any]
_ENDED: Final = ("Succeeded", "Failed")


# -- the driver -------------------------------------------------------------------------------------


class _SimRuntime(Runtime):
    """The shared Runtime, reading the what-if cluster's cached state."""

    def __init__(self, cluster: WhatIfCluster, **kw: Any) -> None:
        super().__init__(cluster, clock=cluster.clock, **kw)
        self.sim = cluster

    def state(self) -> ClusterState:
        return self.sim.state()


def _node_price(state: ClusterState, nv: NodeView) -> float:
    if nv.cost_per_hour is not None:
        return nv.cost_per_hour
    total = 0.0
    for g in nv.gpus:
        price = gpu_price(state, state.gpus[g].model) if g in state.gpus else None
        total += price or 0.0
    return total


def _releasing(nv: NodeView, state: ClusterState) -> bool:
    labels = ((nv.node_obj or {}).get("metadata") or {}).get("labels") or {}
    if labels.get(keys.SHOULD_DELETE) == keys.TRUE:
        return True
    claim = state.claims.get(nv.claim or "")
    return bool(claim and (claim.get("metadata") or {}).get("deletionTimestamp"))


def _templates(state: ClusterState) -> dict[str, tuple[JSON, JSON]]:
    """Workload key → (workload object, one of its worker pods): what arrivals are cloned from."""
    out: dict[str, tuple[JSON, JSON]] = {}
    for key, wv in state.workloads.items():
        pods = sorted(k for k in wv.workers if k in state.workers)
        if wv.obj is not None and pods:
            out[key] = (wv.obj, state.workers[pods[0]].obj)
    return out


def simulate(
    objects: Sequence[JSON],
    policy: Policy,
    start: datetime,
    cfg: SimConfig,
    *,
    inspect: Callable[[WhatIfCluster, _SimRuntime], None] | None = None,
) -> PolicyResult:
    """Run `policy` from `objects` at `start` for `cfg.duration`; `inspect` is called before each
    reconcile (tests dump the state there).

    The cyclic GC is paused for the run: each step allocates a state's worth of objects while the
    cluster's own stay alive, so generation-2 collections kept rescanning the whole heap; nothing
    the run builds needs the cycle collector (reference counting frees it), and one collection
    runs at the end — while the collector is still paused: re-enabled first, it would find the
    run's allocations counted and collect the youngest generation (everything the run kept) at the
    next allocation, then `gc.collect` would scan it all again."""
    with gc_paused():
        try:
            return _simulate(objects, policy, start, cfg, inspect)
        finally:
            gc.collect()


def _simulate(
    objects: Sequence[JSON],
    policy: Policy,
    start: datetime,
    cfg: SimConfig,
    inspect: Callable[[WhatIfCluster, _SimRuntime], None] | None,
) -> PolicyResult:
    wall = time.perf_counter()
    start = as_utc(start)
    sim = WhatIfCluster(apply_policy(objects, policy), start, cfg.seed)
    usage = Usage(cfg.seed, cfg.history)
    columns = DemandColumns(usage)  # the figures' demands (autoscale's usage has its own)
    metrics = UsageMetrics(sim, usage) if policy.autoscale else None
    rt = _SimRuntime(sim, metrics=metrics, autoscale_interval=cfg.autoscale_interval)
    res = PolicyResult(policy.name)
    state0 = sim.state()
    templates = _templates(state0)
    for w in state0.workers.values():
        usage.base(w)
    start_nodes = {p: len(pv.nodes) for p, pv in state0.pools.items()}
    end = start + cfg.duration
    churn = cfg.feed.schedule(start) if cfg.feed is not None else churn_schedule(state0, start, cfg)
    ci = 0
    next_sample = start
    provisioning: dict[str, datetime] = {}  # pool → when its node comes up
    pool_names = sorted(state0.pools)  # the simulation adds and removes no pools
    waiting_of = -1  # sim.generation `waiting` was read at
    waiting: dict[str, set[str]] = {}
    serial = 0
    while True:
        now = sim.now()
        batch: list[_Churn] = []
        while ci < len(churn) and churn[ci].at <= now:
            batch.append(churn[ci])
            ci += 1
        if batch:
            if cfg.feed is not None:  # a trace: its own arrivals and departures
                res.departures += cfg.feed.depart(sim, [c for c in batch if c.kind == "depart"])
                res.arrivals += cfg.feed.arrive(sim, [c for c in batch if c.kind == "arrive"])
                batch = []
            res.departures += sim.remove_workloads((c.namespace, c.name) for c in batch if c.kind == "depart")
            for c in batch:
                if c.kind == "arrive" and c.template in templates:
                    wl, pod = templates[c.template]
                    sim.add_workload(wl, pod, c.name)
                    usage.alias[f"{c.namespace}/{c.name}"] = c.template
                    res.arrivals += 1
            sim.schedule()
        for pool, at in sorted(provisioning.items()):
            if at <= now:
                del provisioning[pool]
                st = sim.state()
                nodes = [st.nodes[n] for n in st.pools[pool].nodes if not _releasing(st.nodes[n], st)]
                modes = waiting.get(pool) or {"soft"}  # like a node that can host what waits
                fitting = [
                    n for n in nodes if any(compatible(g, m) for g in st.gpus_of(n.name) for m in modes)
                ]
                nodes = fitting or nodes
                if nodes:
                    like = max(nodes, key=lambda n: (n.capacity.tflops, n.name))
                    serial += 1
                    sim.add_node_like(like.name, f"whatif-{serial:04d}")
                    res.provisioned += 1
        # Nothing due: skip the Runtime (it would build a state only to find no pool due).
        due = rt.autoscale_due(now) or any(rt.next_reconcile.get(p, now) <= now for p in pool_names)
        if due and inspect is not None and rt.due_pools(sim.state(), now):
            inspect(sim, rt)
        plan = rt.tick_due() if due else None
        if plan is not None:
            res.plans.append(plan)
            for r in rt.last_results:
                if not r.ok:
                    continue
                if isinstance(r.action, EvictPod):
                    res.evictions += 1
                elif isinstance(r.action, DeleteGPUNodeClaim) or (
                    isinstance(r.action, LabelNode) and r.action.labels.get(keys.SHOULD_DELETE) == keys.TRUE
                ):
                    res.releases += 1
        if sim.generation != waiting_of:  # Pending workers ask their pool for a node
            waiting_of = sim.generation
            waiting = sim.pending_pools()
        if any(p in pool_names and p not in provisioning for p in waiting):
            state = sim.state()
            for pool in sorted(waiting):
                pv = state.pools.get(pool)
                if (
                    pv is not None
                    and pool not in provisioning
                    and len(pv.nodes) < 2 * start_nodes.get(pool, 0)
                ):
                    provisioning[pool] = now + cfg.provision_delay
        if now >= next_sample:
            state = sim.state()
            _sample(res, state, columns, now, min(cfg.sample, end - now) if now < end else timedelta(0))
            if cfg.on_sample is not None:
                cfg.on_sample(now)
            next_sample = now + cfg.sample
        if now >= end:
            break
        candidates = [end, next_sample]
        for t in (rt.next_due(), sim.next_due()):
            if t is not None and t > now:
                candidates.append(t)
        if ci < len(churn):
            candidates.append(max(churn[ci].at, now))
        candidates.extend(t for t in provisioning.values() if t > now)
        target = min(t for t in candidates if t > now) if any(t > now for t in candidates) else end
        sim.advance_to(target)
    final = sim.state()
    for pool in sorted(final.pools):
        names = final.pools[pool].nodes
        res.final_active[pool] = sum(not _releasing(final.nodes[n], final) for n in names)
        res.final_bound[pool] = pool_bound(final, pool).nodes
        res.final_packing_bound[pool] = pool_bound(final, pool, configured=False).nodes
        res.final_holds[pool] = holds(
            res.plans, pool, [n for n in names if not _releasing(final.nodes[n], final)]
        )
    res.sim_seconds = cfg.duration.total_seconds()
    res.wall_seconds = time.perf_counter() - wall
    return res


def holds(plans: Sequence[Plan], pool: str, active: Sequence[str]) -> dict[str, str]:
    """Why each of `pool`'s `active` nodes is still there: the reason code its last defrag step with
    a ranking gave (`above-threshold`, `cordoned`, `pdb-blocked`, `native-gpu-pod`, …; a candidate
    the campaign did not reach is `not-drained`), else the last compaction round's (`has-workers`,
    …). This is what an operator changes to get closer to the bound (e.g. `+defrag=80` for
    `above-threshold`); `unknown` when no decision ran for the pool."""
    defrag: dict[str, str] | None = None
    compaction: dict[str, str] | None = None
    for plan in reversed(plans):
        pp = plan.pools.get(pool)
        if pp is None:
            continue
        d = pp.defrag
        if defrag is None and d is not None and (d.candidates or d.skipped):
            defrag = {c.node: "not-drained" for c in d.candidates}
            defrag.update((s.node, s.reason) for s in d.skipped)
        if compaction is None and pp.compaction is not None and pp.compaction.due:
            compaction = {k.node: k.reason for k in pp.compaction.kept}
        if defrag is not None and compaction is not None:
            break
    out: dict[str, str] = {}
    for node in active:
        reason = (defrag or {}).get(node) or (compaction or {}).get(node)
        out[node] = reason or "unknown"
    return out


def _bound_nodes(state: ClusterState, pool: str) -> int:
    return pool_bound(state, pool).nodes


def _sample(
    res: PolicyResult, state: ClusterState, columns: DemandColumns, now: datetime, dt: timedelta
) -> None:
    """Record the node counts at `now` and integrate every figure over the next `dt`."""
    hours = dt.total_seconds() / 3600.0
    t = int(now.timestamp())
    res.times.append(now)
    for pool in sorted(state.pools):
        pv = state.pools[pool]
        active = 0
        for n in pv.nodes:
            nv = state.nodes[n]
            res.node_hours += hours
            res.cost += _node_price(state, nv) * hours
            if not _releasing(nv, state):
                active += 1
                res.capacity_tflops_hours += nv.capacity.tflops * hours
        res.active.setdefault(pool, []).append(active)
        # a function of the state: samples over an unchanged cluster share it
        res.bound.setdefault(pool, []).append(
            state.derived(f"whatif-bound/{pool}", partial(_bound_nodes, pool=pool))
        )
    running: list[tuple[WorkerView, float, str]] = []
    firsts: dict[str, WorkerView] = {}  # a workload's workers want the same at one instant
    for w in state.workers.values():
        if w.terminating or w.phase in _ENDED:
            continue
        if w.phase == "Pending" and not w.node:
            res.pending_minutes += hours * 60.0
            continue
        if w.phase != "Running" or not w.gpu_ids:
            continue
        gpu = state.gpus.get(w.gpu_ids[0])
        cap = gpu.capacity.tflops if gpu is not None else 0.0
        if cap <= 0:
            continue
        key = f"{w.namespace}/{w.workload}"
        running.append((w, cap, key))
        firsts.setdefault(key, w)
    demands = columns.at(state, firsts, Instant(t))  # every workload's at once (the same floats)
    for w, cap, key in running:
        res.allocated_tflops_hours += w.request.tflops * w.gpu_count * hours
        res.gpu_hours_allocated += w.request.tflops / cap * w.gpu_count * hours
        d = demands[key]
        if d is None:
            res.unmeasured_worker_hours += hours
            continue
        limit = w.limit.tflops or w.request.tflops
        used = min(d[0], limit, cap)
        res.gpu_hours_used += used / cap * w.gpu_count * hours
        if d[0] > limit + 1e-9:
            res.throttled_minutes += hours * 60.0


def compare(
    objects: Sequence[JSON],
    policies: Sequence[Policy],
    start: datetime,
    cfg: SimConfig,
    *,
    workers: int = 1,
    progress: Progress | None = None,
) -> list[PolicyResult]:
    """Every policy from the same objects, seed and churn; results in the order given.

    `workers` > 1 runs the policies in that many processes (`sweep.in_processes`): each run is
    seeded and independent, so the results are the same as one after another."""
    total = cfg.duration.total_seconds()

    def one(i: int, report: Callable[[float], None]) -> PolicyResult:
        hook = cfg.on_sample

        def sampled(now: datetime) -> None:
            report(min(1.0, (now - start).total_seconds() / total) if total > 0 else 1.0)
            if hook is not None:
                hook(now)

        return simulate(objects, policies[i], start, replace(cfg, on_sample=sampled))

    return in_processes(one, len(policies), workers=workers, progress=progress)
