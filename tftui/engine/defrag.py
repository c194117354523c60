"""Defrag (Strategy #2): drain lightly used GPU nodes, one worker per step, so compaction can release them.

Contract: docs/behaviour.md D1–D12 and the reference page's step 5; where silent, upstream's defrag. Every
function here is pure — (state, pool, now) in, a `Plan` out — so the console previews exactly what the
runtime would do. One call is one controller step: safety sweep, guards, campaign window, then at most
one eviction.

Deliberate differences from the TensorFusion controller (each also in the README):

- **One pod per step** (D5; upstream evicts every worker of the node back to back). A node
  that carries this pool's `defrag-source` marker and still has workers is the campaign's current
  source: instead of upstream's `DefragBlockedBySourceNode` pause, its remaining workers are re-simulated
  and the next one is evicted. If they no longer fit, or the node lost its eligibility (protected,
  cordoned, a fresh worker landed on it, …), the drain is abandoned and the marker cleared.
- **PDB count rule** (D6; upstream only checks `> 0`): every PDB must allow as many disruptions as the
  node has pods it covers, so a drain is never started that a 429 would stop half-way.
- **do-not-disrupt** is read from the GPUNode *or* the Node (D3/C2; upstream reads the GPUNode only).
- **Simulation** (D4) runs on `ClusterState` instead of a scheduler snapshot: cordoned nodes are
  excluded explicitly, the GPU choice inside a target uses CompactFirst 0.5/0.5 GPU scores instead of
  upstream's zero-weight (arbitrary) choice, workers go largest first instead of map order, and ties go
  to the node name (upstream: first evaluated); a target must also pass kube-scheduler's node fit
  (CPU, memory, pod slots: `engine.nodefit`), which upstream's snapshot simulation also runs.
  Isolation modes and partitions are filtered and booked as placement does; the namespace quota is
  not checked (a move leaves its usage as it was) and topology is not simulated; GPUs without a
  reported capacity are ignored instead of failing the whole target, and GPUNodes being deleted are
  not targets. Utilisation counts the GPUs labelled for the pool (`tensor-fusion.ai/gpupool`), as
  upstream.
- A source marker without `-since` is cleared once its node is empty (upstream never clears it and
  blocks the pool forever; D9). Native-GPU pods that are terminating or finished do not block.
- A terminating worker on one of this pool's source nodes blocks like a `defrag-evicted` pod, and the
  source marker stays until it is gone (or stale): the eviction comes before the pod's marker, so a
  crash between the two must not let the next step evict without waiting (see `_sweep`).
- Events: `DefragStarted` marks the start of a node's drain (upstream: every step with candidates);
  `DefragFinished` (with upstream's stats line) closes a step that had candidates but evicted nothing.
  D7 ("emit on state change") and D1's "once per distinct error" are the runtime's job: a plan lists the
  events its step would emit, and the runtime drops repeats.
- Unparsable marker TTLs fall back to their defaults, like `maxDuration`; a TTL ≤ 0 means `never`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from tftui.engine.defragconfig import (
    DEFAULT_MAX_DURATION,
    DEFAULT_MAX_WORKERS_PER_NODE,
    DEFAULT_SOURCE_TTL,
    DEFAULT_THRESHOLD,
    REASON_LIMIT,
    DefragConfig,
    WindowState,
    _annotations,
    _aware,
    _cut_utf8,
    _meta,
    _require_aware,
    _stale,
    campaign_window,
    defrag_spec,
    validate_defrag,
)
from tftui.engine.defragindex import _Ctx, gpu_utilization
from tftui.engine.defragsim import _Eligible, _gate, _pdb_block, _simulate, _size_key
from tftui.engine.fit import RequestError
from tftui.engine.plan import (
    Action,
    AnnotateNode,
    AnnotatePod,
    Candidate,
    DefragResult,
    Eviction,
    EvictPod,
    LabelNode,
    LabelPod,
    PatchPoolStatus,
    Plan,
    Skip,
    pool_event,
    rfc3339,
)
from tftui.engine.state import ClusterState, WorkerView, parse_time
from tftui.model import keys
from tftui.model.gcpause import gc_paused
from tftui.model.giveway import checkpoint, paced

__all__ = [
    "DEFAULT_MAX_DURATION",
    "DEFAULT_MAX_WORKERS_PER_NODE",
    "DEFAULT_SOURCE_TTL",
    "DEFAULT_THRESHOLD",
    "DefragConfig",
    "WindowState",
    "campaign_window",
    "defrag_spec",
    "evict_refused",
    "gpu_utilization",
    "plan_defrag",
    "validate_defrag",
]

# -- markers -------------------------------------------------------------------------------------


def _clear_source(node: str) -> list[Action]:
    return [
        LabelNode(node, {keys.DEFRAG_SOURCE: None}),
        AnnotateNode(node, {keys.DEFRAG_SOURCE_POOL: None, keys.DEFRAG_SOURCE_SINCE: None}),
    ]


def _clear_evict_skip(node: str) -> list[Action]:
    return [
        LabelNode(node, {keys.DEFRAG_EVICT_SKIP: None}),
        AnnotateNode(
            node,
            {
                keys.DEFRAG_EVICT_SKIP_POOL: None,
                keys.DEFRAG_EVICT_SKIP_SINCE: None,
                keys.DEFRAG_EVICT_SKIP_REASON: None,
            },
        ),
    ]


def _clear_evicted(namespace: str, name: str) -> list[Action]:
    return [
        LabelPod(namespace, name, {keys.DEFRAG_EVICTED: None}),
        AnnotatePod(namespace, name, {keys.DEFRAG_EVICTED_POOL: None, keys.DEFRAG_EVICTED_SINCE: None}),
    ]


# -- the step --------------------------------------------------------------------------------------


def _sweep(ctx: _Ctx) -> tuple[list[Action], list[dict[str, Any]], list[str], list[str]]:
    """D8 safety sweep: clear what is stale; return what still stands.

    Returns (actions, blocking evicted pods, source nodes still draining, nodes still on evict-skip).

    A terminating worker on one of this pool's source nodes blocks like a marked evicted pod: the
    `defrag-evicted` marker is written after the eviction, so a crash between the two leaves the
    evicted pod unmarked, and its deletionTimestamp is then the only trace. For the same reason a
    source node keeps its marker until its terminating workers are gone too (unless the marker is
    stale, which bounds a pod stuck terminating by `sourceNodeMarkerTTL`).
    """
    actions: list[Action] = []
    blocking: list[dict[str, Any]] = []
    for p in ctx.index.evicted_pods:
        ann = _annotations(p)
        owner = ann.get(keys.DEFRAG_EVICTED_POOL) or ann.get(keys.GPUPOOL)  # legacy fallback (upstream)
        if owner != ctx.pool:
            continue
        if _stale(ann.get(keys.DEFRAG_EVICTED_SINCE), ctx.cfg.evicted_ttl, ctx.now):
            actions += _clear_evicted(_meta(p).get("namespace", ""), _meta(p).get("name", ""))
        else:
            blocking.append(p)
    sources: list[str] = []
    skips: list[str] = []
    for name in ctx.index.marked_nodes:  # a node without either label owns no marker
        k8s = ctx.k8s_nodes[name]
        has_active = bool(ctx.active(name))
        if ctx.owned(k8s, keys.DEFRAG_SOURCE, keys.DEFRAG_SOURCE_POOL):
            since = _annotations(k8s).get(keys.DEFRAG_SOURCE_SINCE)
            leaving = ctx.leaving(name)
            if _stale(since, ctx.cfg.source_ttl, ctx.now) or not (has_active or leaving):
                actions += _clear_source(name)
            else:
                blocking += [w.obj for w in leaving if not any(w.obj is b for b in blocking)]
                if has_active:
                    sources.append(name)
        if ctx.owned(k8s, keys.DEFRAG_EVICT_SKIP, keys.DEFRAG_EVICT_SKIP_POOL):
            if has_active:
                skips.append(name)
            else:
                actions += _clear_evict_skip(name)
    return actions, blocking, sources, skips


def _advance(ctx: _Ctx, stamp: datetime, evict_skips: Iterable[str]) -> list[Action]:
    """Move the anchor and forget this pool's evict-skip list (D2 advance / skip-missed)."""
    actions: list[Action] = [PatchPoolStatus(ctx.pool, {"lastDefragTime": rfc3339(stamp)})]
    for n in evict_skips:
        actions += _clear_evict_skip(n)
    return actions


def _evict_actions(
    ctx: _Ctx, node: str, w: WorkerView, *, start_node: bool, campaign_start: datetime
) -> list[Action]:
    out: list[Action] = []
    now = rfc3339(ctx.now)
    if start_node:
        out.append(ctx.event("Normal", "DefragStarted", f"defrag step started at {rfc3339(campaign_start)}"))
        out.append(LabelNode(node, {keys.DEFRAG_SOURCE: keys.TRUE}))
        out.append(AnnotateNode(node, {keys.DEFRAG_SOURCE_POOL: ctx.pool, keys.DEFRAG_SOURCE_SINCE: now}))
    out.append(EvictPod(w.namespace, w.name))
    out.append(LabelPod(w.namespace, w.name, {keys.DEFRAG_EVICTED: keys.TRUE}))
    out.append(
        AnnotatePod(w.namespace, w.name, {keys.DEFRAG_EVICTED_POOL: ctx.pool, keys.DEFRAG_EVICTED_SINCE: now})
    )
    out.append(
        ctx.event(
            "Normal", "DefragPodEvicted", f"evicted pod {w.namespace}/{w.name} on node {node} for defrag"
        )
    )
    return out


@dataclass(slots=True)
class _Try:
    """Outcome of simulating + preflighting one node."""

    outcome: Literal["evict", "unmovable", "pdb-blocked", "error"]
    worker: WorkerView | None = None
    target: str = ""
    skip: Skip | None = None
    actions: list[Action] = field(default_factory=list)


def _try_node(ctx: _Ctx, e: _Eligible) -> _Try:
    """Simulate and preflight one node. A function of the state, pool and node (not of `now`), so
    it is kept per state: an idle campaign step over an unchanged cluster tries each candidate once."""
    tries: dict[tuple[str, float, tuple[str, ...]], _Try] = ctx.state.derived(
        f"defrag-tries/{ctx.pool}/{ctx.max_workers}", lambda st: {}
    )
    key = (e.node.name, e.util, tuple(w.key for w in e.workers))
    got = tries.get(key)
    if got is None:
        got = tries[key] = _try_node_once(ctx, e)
    return got


def _try_node_once(ctx: _Ctx, e: _Eligible) -> _Try:
    name = e.node.name
    try:
        sim = _simulate(ctx, name, e.util, e.workers)
    except RequestError as err:
        msg = f"node {name} aborted: simulation error: {err}"
        return _Try(
            "error",
            skip=Skip(name, "unmovable", f"simulation error: {err}"),
            actions=[ctx.event("Warning", "DefragAbortNode", msg)],
        )
    if sim.failed is not None:
        ev = ctx.event("Normal", "DefragSkipUnschedulable", f"node {name} skipped: {sim.summary}")
        return _Try("unmovable", skip=Skip(name, "unmovable", sim.summary), actions=[ev])
    block = _pdb_block(ctx, name, e.workers)
    if block is not None:
        ev = ctx.event("Normal", "DefragSkipPDBBlocked", f"node {name} skipped before eviction: {block}")
        return _Try("pdb-blocked", skip=Skip(name, "pdb-blocked", block), actions=[ev])
    first = min(e.workers, key=_size_key)
    return _Try("evict", worker=first, target=sim.placements[first.key][0])


def plan_defrag(
    state: ClusterState, pool: str, now: datetime, *, max_workers_per_node: int | None = None
) -> Plan:
    """One defrag step of `pool` at `now` (D1–D7): `plans.pools[pool].defrag` plus the actions.

    Order as upstream (D8): disabled → invalid config (Warning, nothing else) → safety sweep → evicted-pod
    guard (`blocked`) → campaign window (`not-due`, `skip-missed` advancing the anchor, deadline reached
    advancing it) → continue the current source node → rank candidates and evict at most one pod.
    `max_workers_per_node` is the scheduler's `maxWorkerPerNode` (0: no cap; None: the cluster's
    scheduler configuration). Raises KeyError for an unknown pool and ValueError for a naive `now`.
    """
    _require_aware(now)
    if max_workers_per_node is None:
        max_workers_per_node = state.scheduler.max_worker_per_node
    with gc_paused():  # the first pass over a freshly built state otherwise triggers full collections
        return _plan_defrag(state, pool, now, max_workers_per_node)


def _plan_defrag(state: ClusterState, pool: str, now: datetime, max_workers_per_node: int) -> Plan:
    plan = Plan(now)
    res = DefragResult("disabled")
    plan.pool(pool).defrag = res
    pv = state.pools.get(pool)
    if pv is None:
        raise KeyError(f"pool {pool!r} not found")
    if defrag_spec(pv.obj).get("enabled") is not True:
        return plan
    cfg = validate_defrag(pv.obj)
    if isinstance(cfg, str):
        res.state = "invalid"
        plan.actions.append(pool_event(pool, "Warning", "DefragConfigInvalid", f"defrag disabled: {cfg}"))
        return plan
    ctx = _Ctx.build(state, pool, cfg, now, max_workers_per_node)
    checkpoint()
    actions, blocking, sources, evict_skips = _sweep(ctx)
    checkpoint()
    plan.actions += actions
    last = _aware(parse_time((pv.obj.get("status") or {}).get("lastDefragTime")))
    wstate, start, deadline = campaign_window(cfg, last, ctx.now)
    if start is not None and deadline is not None:
        res.window = (start, deadline)
    if blocking:
        res.state = "blocked"
        plan.actions.append(
            ctx.event(
                "Normal",
                "DefragBlockedByEvictedPod",
                "defrag step paused: defrag-evicted pod still pending reschedule",
            )
        )
        return plan
    if wstate == "not-due":
        res.state = "not-due"
        return plan
    if wstate == "skip-missed":
        res.state = "skip-missed"
        plan.actions += _advance(ctx, ctx.now, evict_skips)
        return plan
    assert start is not None and deadline is not None
    if ctx.now >= deadline:  # the campaign context is already done: upstream finishes "deadline" and advances
        res.state = "idle"
        plan.actions += _advance(ctx, start, evict_skips)
        return plan

    abandoned: set[str] = set()
    for src in sources:  # D5: the current source is drained to the end before another node starts
        nv = state.nodes.get(src)
        if nv is None or nv.pool != pool:
            continue
        el, skip, ev = _gate(ctx, nv, drain=True)
        tried = _try_node(ctx, el) if el is not None else None
        if el is not None and tried is not None and tried.outcome == "evict":
            assert tried.worker is not None
            res.state = "evict"
            res.candidates = [Candidate(src, el.util)]
            res.evict = Eviction(tried.worker.key, src, tried.target)
            plan.actions += _evict_actions(ctx, src, tried.worker, start_node=False, campaign_start=start)
            return plan
        if tried is not None and tried.outcome == "pdb-blocked":  # wait for the budget to recover
            assert tried.skip is not None
            res.state = "blocked"
            res.skipped.append(tried.skip)
            plan.actions += tried.actions
            return plan
        # the drain cannot go on: give the node up and fall through to fresh candidates
        abandoned.add(src)
        if skip is not None:
            res.skipped.append(skip)
        if ev is not None:
            plan.actions.append(ev)
        if tried is not None:
            assert tried.skip is not None
            res.skipped.append(tried.skip)
            plan.actions += tried.actions
        plan.actions += _clear_source(src)

    eligible: list[_Eligible] = []
    missing_pdb = 0
    for nv in paced(sorted(state.nodes_of(pool), key=lambda n: n.name), 64):
        if nv.name in abandoned:
            continue
        el, skip, ev = _gate(ctx, nv, drain=False)
        if el is not None:
            eligible.append(el)
        if skip is not None:
            res.skipped.append(skip)
            missing_pdb += skip.reason == "missing-pdb"
        if ev is not None:
            plan.actions.append(ev)
    eligible.sort(key=lambda e: (e.util, e.node.name))
    res.candidates = [Candidate(e.node.name, e.util) for e in eligible]
    stats = {"processed": 0, "unmovable": 0, "pdbBlocked": 0}
    for e in paced(eligible, 16):
        stats["processed"] += 1
        tried = _try_node(ctx, e)
        if tried.outcome == "evict":
            assert tried.worker is not None
            res.state = "evict"
            res.evict = Eviction(tried.worker.key, e.node.name, tried.target)
            plan.actions += _evict_actions(
                ctx, e.node.name, tried.worker, start_node=True, campaign_start=start
            )
            return plan
        assert tried.skip is not None
        res.skipped.append(tried.skip)
        plan.actions += tried.actions
        if tried.outcome == "unmovable":
            stats["unmovable"] += 1
        elif tried.outcome == "pdb-blocked":
            stats["pdbBlocked"] += 1
        else:  # simulation error aborts the step (upstream "abortedNode")
            break
    res.state = "idle"
    if eligible:
        plan.actions.append(
            ctx.event(
                "Normal",
                "DefragFinished",
                f"defrag step finished: candidates={len(eligible)} processed={stats['processed']} evicted=0 "
                f"failed=0 unmovable={stats['unmovable']} pdbBlocked={stats['pdbBlocked']} "
                f"missingPdb={missing_pdb} freshSkip=0 deadline=false",
            )
        )
    return plan


def evict_refused(state: ClusterState, pool: str, node: str, pod: str, error: str, now: datetime) -> Plan:
    """D5: the Eviction API refused `pod` ("ns/name") on `node` (HTTP 429 or any other error).

    As upstream (D5): Warning `DefragPodEvictFailed`, the node goes on this pool's evict-skip list
    (reason cut to 256 bytes, on a character boundary), Warning `DefragNodeEvictSkip`, the source marker
    is cleared and Warning `DefragAbortNode` closes the node. Markers of pods already evicted stay, so
    the evicted-pod guard still waits for them. The step's result is `idle` with the node skipped; the
    runtime drops the refused step's remaining actions (the pod markers) and applies these instead.
    """
    _require_aware(now)
    now = now.astimezone(UTC)
    ns, _, name = pod.partition("/")
    reason = _cut_utf8(f"evict pod {ns}/{name} failed: {error}", REASON_LIMIT)
    plan = Plan(now)
    res = DefragResult("idle", skipped=[Skip(node, "evict-skip", reason)])
    plan.pool(pool).defrag = res
    pv = state.pools.get(pool)
    cfg = validate_defrag(pv.obj) if pv is not None else None
    if pv is not None and isinstance(cfg, DefragConfig):
        last = _aware(parse_time((pv.obj.get("status") or {}).get("lastDefragTime")))
        _, start, deadline = campaign_window(cfg, last, now)
        if start is not None and deadline is not None:
            res.window = (start, deadline)
    plan.actions += [
        pool_event(
            pool,
            "Warning",
            "DefragPodEvictFailed",
            f"failed to evict pod {ns}/{name} on node {node}: {error} (node eviction aborted)",
        ),
        LabelNode(node, {keys.DEFRAG_EVICT_SKIP: keys.TRUE, keys.DEFRAG_SOURCE: None}),
        AnnotateNode(
            node,
            {
                keys.DEFRAG_EVICT_SKIP_POOL: pool,
                keys.DEFRAG_EVICT_SKIP_SINCE: rfc3339(now),
                keys.DEFRAG_EVICT_SKIP_REASON: reason,
                keys.DEFRAG_SOURCE_POOL: None,
                keys.DEFRAG_SOURCE_SINCE: None,
            },
        ),
        pool_event(
            pool,
            "Warning",
            "DefragNodeEvictSkip",
            f"node {node} added to defrag evict-skip list after eviction failure: {error}",
        ),
        pool_event(pool, "Warning", "DefragAbortNode", f"node {node}: eviction aborted"),
    ]
    return plan
