"""Placement: where the TensorFusion scheduler would put one worker, for every mode (P1–P12).

Reproduces the scheduler plugin `GPUResourcesFit` with its allocator: the GPU filter chain (P2, via
`fit.reject_reason`), the node score as the average of the node-level GPU scores (P2) and the GPU
choice on the chosen node (P2); plus upstream's non-scheduler selector (P8), kept for comparison
(no tftui decision uses it: the defrag simulation has its own, D4).
Pure functions over a `ClusterState`; availability can be overridden so simulations work on copies.

Before any GPU is looked at, the request must fit its namespace's GPUResourceQuota
(`engine.quota`); the score weights and `maxWorkerPerNode` are the scheduler's own
(`ClusterState.scheduler`, from the chart's ConfigMap) unless a caller passes others. Isolation
modes and hardware partitions are filtered as the allocator does (`engine.isolation`,
`engine.partitions`); a partitioned request without a template gets the best-fitting one first.

Deviations from upstream, all deliberate (behaviour P2):
* ties between nodes and between GPUs are broken by name (upstream: random / unstable sort), so a
  preview is reproducible;
* only this plugin's node score ranks nodes; kube-scheduler's other score plugins (weight 5 vs theirs)
  and topology are not modelled;
* cordoned nodes (`spec.unschedulable`) are dropped, as kube-scheduler's NodeUnschedulable filter
  would; the allocator itself does not look at them;
* kube-scheduler's NodeResourcesFit and NodeAffinity filters are applied to the worker pod
  (`engine.nodefit`: CPU, memory, pod count, node selector): the plugin runs inside kube-scheduler,
  so a free GPU on a node without free CPU cannot be used.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Collection, Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from tftui.engine import quota
from tftui.engine.fit import (
    DEFAULT_WEIGHTS,
    MODES,
    Mode,
    Request,
    Weights,
    gpu_level_score,
    node_level_score,
    resolve_mode,
)
from tftui.engine.isolation import compatible
from tftui.engine.nodefit import NodeFit, PodRes
from tftui.engine.placementfilter import STAGES as STAGES
from tftui.engine.placementfilter import Assumed as Assumed
from tftui.engine.placementfilter import Candidates as Candidates
from tftui.engine.placementfilter import _avail, _state_avail
from tftui.engine.placementfilter import filter_gpus as filter_gpus
from tftui.engine.state import ClusterState, GPUView, PartitionUse, Res

DEFAULT_MAX_WORKER_PER_NODE = 256  # the chart's `maxWorkerPerNode` (P12)
TOP_NODES = 5
RUNNING_WORKLOADS_NOTE = (
    "running workloads stay where they are; only pods scheduled after the change use the new mode"
)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one request goes under one mode, or why it cannot go anywhere."""

    mode: Mode
    node: str | None
    gpus: tuple[str, ...]
    node_scores: tuple[tuple[str, int], ...]  # top 5, best first
    reason: str | None
    rejected: dict[str, int] = field(default_factory=dict)  # GPUs removed per filter stage
    partition: str = ""  # the partition template a partitioned request books (matched if not given)

    @property
    def ok(self) -> bool:
        return self.node is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "node": self.node,
            "gpus": list(self.gpus),
            "node_scores": [{"node": n, "score": s} for n, s in self.node_scores],
            "reason": self.reason,
            "rejected": dict(self.rejected),
            "partition": self.partition or None,
        }


def pool_mode(state: ClusterState, pool: str) -> Mode:
    """The pool's effective mode (P1): unknown pool, no or missing template, bad value → default."""
    pv = state.pools.get(pool)
    return resolve_mode(pv.placement_mode if pv is not None else None)


def _pick_gpus(
    state: ClusterState,
    names: tuple[str, ...],
    count: int,
    mode: Mode,
    weights: Weights,
    available: Mapping[str, Res] | None,
) -> tuple[str, ...]:
    """GPU choice on the node (P2): best GPU-level score first, ties by name (all of them if count == len)."""

    def key(name: str) -> tuple[int, str]:
        g = state.gpus[name]
        return -gpu_level_score(mode, g.capacity, _avail(g, available), weights), name

    return tuple(sorted(names, key=key)[:count])


def scheduler_weights(state: ClusterState) -> Weights:
    """The score weights of the cluster's scheduler configuration (chart defaults without one)."""
    sc = state.scheduler
    if (sc.vram_weight, sc.tflops_weight) == (DEFAULT_WEIGHTS.vram, DEFAULT_WEIGHTS.tflops):
        return DEFAULT_WEIGHTS
    return Weights(sc.vram_weight, sc.tflops_weight)


def place(
    state: ClusterState,
    pool: str,
    request: Request,
    *,
    mode: Mode | None = None,
    weights: Weights | None = None,
    available: Mapping[str, Res] | None = None,
    exclude_nodes: Collection[str] = frozenset(),
    max_worker_per_node: int | None = None,
    worker_counts: Mapping[str, int] | None = None,
    pod: PodRes | None = None,
    fit: NodeFit | None = None,
    assumed: Assumed | None = None,
    quota_used: Mapping[str, quota.Usage] | None = None,
) -> Placement:
    """The scheduler's choice (P2) of node and GPUs for `request` in `pool`.

    Node score = floor of the mean node-level score over the node's matched GPUs and its other GPUs
    that could host the request's isolation mode (any pool, any phase; a Pending one counts a
    quarter, integer division), as upstream. `weights` and `max_worker_per_node` default to the
    cluster's scheduler configuration.
    """
    mode = mode if mode is not None else pool_mode(state, pool)
    weights = weights if weights is not None else scheduler_weights(state)
    cands = filter_gpus(
        state,
        pool,
        request,
        available=available,
        exclude_nodes=exclude_nodes,
        max_worker_per_node=max_worker_per_node,
        worker_counts=worker_counts,
        pod=pod,
        fit=fit,
        assumed=assumed,
        quota_used=quota_used,
    )
    req = cands.request or request
    if cands.reason is not None:
        return Placement(mode, None, (), (), cands.reason, cands.rejected, req.partition)
    scored: list[tuple[str, int]] = []
    avail = _state_avail(state, available)
    isolation = req.isolation
    # a node's score reads its GPUs' views and availabilities alone (its matched GPUs are compatible
    # and Running): kept per node while its GPU views are the same and nothing is booked on them
    memo: dict[str, tuple[tuple[GPUView, ...], dict[tuple[Mode, Weights, str], int]]] = state.derived(
        _NODE_SCORES, lambda st: {}
    )
    if len(memo) > 2 * len(state.nodes) + 64:  # nodes gone from the cluster: forget them all
        memo.clear()
    all_gpus = state.gpus
    booked = {all_gpus[g].node for g in available if g in all_gpus} if available else set()
    skey = (mode, weights, isolation)
    for n in cands.by_node:
        views = state.gpus_of(n)
        if n in booked:
            scored.append((n, _node_score(views, mode, weights, isolation, avail)))
            continue
        e = memo.get(n)
        if e is None or len(e[0]) != len(views) or not all(map(operator.is_, e[0], views)):
            e = memo[n] = (tuple(views), {})
        got = e[1].get(skey)
        if got is None:
            got = e[1][skey] = _node_score(views, mode, weights, isolation, avail)
        scored.append((n, got))
    scored.sort(key=lambda t: (-t[1], t[0]))
    best = scored[0][0]
    gpus = _pick_gpus(state, cands.by_node[best], req.count, mode, weights, available)
    return Placement(mode, best, gpus, tuple(scored[:TOP_NODES]), None, cands.rejected, req.partition)


_NODE_SCORES: Final = "carried/placement-node-scores"
"""`ClusterState.derived` key of node → (its GPU views, (mode, weights, isolation) → `_node_score`
at the state's availabilities); `incremental.CARRIED` keeps it for the next states, an entry
counting only while the node's GPU views are the very same. Forgotten whole once it holds more than
twice the nodes (nodes replaced by new ones, as a cloud pool does): it never grows with the churn."""


def _node_score(
    views: list[GPUView], mode: Mode, weights: Weights, isolation: str, avail: Callable[[GPUView], Res]
) -> int:
    """The scheduler's node score (P2): the floor of the mean node-level score over the node's GPUs
    that could host `isolation` (a Pending one counting a quarter, integer division). The request's
    matched GPUs are among them at full weight: they passed the isolation policy and are Running."""
    total = 0
    counted = 0
    for g in views:
        if not compatible(g, isolation):
            continue
        s = node_level_score(mode, g.capacity, avail(g), weights)
        if g.phase == "Pending":
            s //= 4
        total += s
        counted += 1
    return total // counted if counted else 0


def select_from_store(
    state: ClusterState,
    pool: str,
    request: Request,
    *,
    mode: Mode | None = None,
    weights: Weights | None = None,
    available: Mapping[str, Res] | None = None,
    exclude_nodes: Collection[str] = frozenset(),
) -> Placement:
    """Upstream's non-scheduler selector (P8, `DefaultGPUSelector`, upstream's `Alloc` and defrag use it).

    Differs from `place` on purpose, as upstream does: the node score is the **sum** (not the mean) of
    node-level scores over all GPUs of the node, so nodes with more GPUs rank higher; Pending GPUs are
    not discounted; no maxWorkerPerNode or cordon check. A GPU of a candidate node without a
    capacity in its status fails the whole call (upstream: nil available/capacity).
    """
    mode = mode if mode is not None else pool_mode(state, pool)
    weights = weights if weights is not None else scheduler_weights(state)
    cands = filter_gpus(
        state, pool, request, available=available, exclude_nodes=exclude_nodes, node_filters=False
    )
    request = cands.request or request
    if cands.reason is not None:
        return Placement(mode, None, (), (), cands.reason, cands.rejected, request.partition)
    scored: list[tuple[str, int]] = []
    for n in cands.by_node:
        total = 0
        for g in state.gpus_of(n):
            cap = (g.obj.get("status") or {}).get("capacity") or {}
            if cap.get("tflops") in (None, "") or cap.get("vram") in (None, ""):
                return Placement(
                    mode,
                    None,
                    (),
                    (),
                    f"gpu {g.name} on node {n} has no status.capacity",
                    cands.rejected,
                    request.partition,
                )
            total += node_level_score(mode, g.capacity, _avail(g, available), weights)
        scored.append((n, total))
    scored.sort(key=lambda t: (-t[1], t[0]))
    for n, _ in scored:
        if len(cands.by_node[n]) >= request.count:
            gpus = _pick_gpus(state, cands.by_node[n], request.count, mode, weights, available)
            return Placement(
                mode, n, gpus, tuple(scored[:TOP_NODES]), None, cands.rejected, request.partition
            )
    return Placement(
        mode,
        None,
        (),
        tuple(scored[:TOP_NODES]),
        "not enough gpus in scoring stage",
        cands.rejected,
        request.partition,
    )


def booked_request(placement: Placement, request: Request) -> Request:
    """`request` as the placement books it (a partitioned one with its matched template)."""
    if placement.partition and placement.partition != request.partition:
        return replace(request, partition=placement.partition)
    return request


def apply_placement(
    available: dict[str, Res],
    state: ClusterState,
    placement: Placement,
    request: Request,
    *,
    assumed: MutableMapping[str, list[PartitionUse]] | None = None,
    quota_used: dict[str, quota.Usage] | None = None,
    worker: str = "",
) -> None:
    """Book `request` on the placement's GPUs in `available` (missing entries start from the state).

    Per device, as upstream: TFLOPS (compute % converted with the GPU's capacity, truncated) and
    VRAM; `shared` isolation takes the whole GPU, a partition its template. `assumed` (GPU → its
    partitions) and `quota_used` (namespace → quota usage) are booked too when given; `worker`
    names the booking in `assumed`.
    """
    request = booked_request(placement, request)
    catalog = state.providers
    for name in placement.gpus:
        g = state.gpus[name]
        available[name] = _avail(g, available) - request.take_on(g, catalog)
        if assumed is not None and request.partition:
            held = assumed.get(name)
            if held is None:
                held = assumed[name] = list(g.partitions)
            held.append(PartitionUse(worker, request.partition))
    if quota_used is not None and placement.gpus:
        quota.book(quota_used, state, request)


# -- preview (behaviour P3) ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Share:
    """Allocated share of capacity in percent; 0 when there is no capacity."""

    tflops: float
    vram: float

    @classmethod
    def of(cls, allocated: Res, capacity: Res) -> Share:
        return cls(
            allocated.tflops / capacity.tflops * 100 if capacity.tflops > 0 else 0.0,
            allocated.vram / capacity.vram * 100 if capacity.vram > 0 else 0.0,
        )

    def to_json(self) -> dict[str, float]:
        return {"tflops": round(self.tflops, 2), "vram": round(self.vram, 2)}


@dataclass(frozen=True, slots=True)
class ModePreview:
    placement: Placement
    pool_after: Share
    node_before: Share | None
    node_after: Share | None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.placement.to_json(),
            "pool_after": self.pool_after.to_json(),
            "node_before": self.node_before.to_json() if self.node_before else None,
            "node_after": self.node_after.to_json() if self.node_after else None,
        }


@dataclass(frozen=True, slots=True)
class Preview:
    """The request placed under every mode, with the pool's and the chosen node's allocation."""

    pool: str
    request: Request
    mode: Mode  # the pool's current mode
    pool_before: Share
    modes: tuple[ModePreview, ...]  # in `MODES` order

    def for_mode(self, mode: Mode) -> ModePreview:
        return next(m for m in self.modes if m.placement.mode == mode)

    def to_json(self) -> dict[str, Any]:
        r = self.request
        return {
            "pool": self.pool,
            "request": {
                "tflops": None if r.tflops is None else float(r.tflops),
                "compute_percent": None if r.compute_percent is None else float(r.compute_percent),
                "vram": float(r.vram),
                "count": r.count,
                "model": r.model,
                "vendor": r.vendor,
                "isolation": r.isolation,
                "indices": list(r.indices),
                "partition": r.partition or None,
                "namespace": r.namespace or None,
            },
            "mode": self.mode,
            "pool_before": self.pool_before.to_json(),
            "modes": {m.placement.mode: m.to_json() for m in self.modes},
        }

    def dumps(self) -> str:
        """Canonical text: stable key order, two-space indent, trailing newline."""
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"


def _booked(state: ClusterState, placement: Placement, request: Request) -> Res:
    total = Res()
    request = booked_request(placement, request)
    for name in placement.gpus:
        total.add(request.take_on(state.gpus[name], state.providers))
    return total


def preview(state: ClusterState, pool: str, request: Request, *, weights: Weights | None = None) -> Preview:
    """`place` under each mode, and the allocation before → after (behaviour P3)."""
    pv = state.pools.get(pool)
    pool_alloc = pv.allocated if pv is not None else Res()
    pool_cap = pv.capacity if pv is not None else Res()
    out: list[ModePreview] = []
    for mode in MODES:
        p = place(state, pool, request, mode=mode, weights=weights)
        booked = _booked(state, p, request)
        node_before = node_after = None
        if p.node is not None:
            nv = state.nodes[p.node]
            node_before = Share.of(nv.allocated, nv.capacity)
            node_after = Share.of(nv.allocated + booked, nv.capacity)
        out.append(ModePreview(p, Share.of(pool_alloc + booked, pool_cap), node_before, node_after))
    return Preview(pool, request, pool_mode(state, pool), Share.of(pool_alloc, pool_cap), tuple(out))


# -- mode change (behaviour P4) ------------------------------------------------------------------


def template_patch(state: ClusterState, pool: str, mode: str) -> tuple[str, dict[str, Any]]:
    """The SchedulingConfigTemplate to patch and the JSON merge patch that sets `mode` for `pool`.

    The mode lives in the cluster-scoped template, not the pool, so every pool referencing the same
    template changes too (`mode_change_message` names them). Raises ValueError naming the pool and
    the field when there is nothing valid to patch.
    """
    if mode not in MODES:
        raise ValueError(
            f"pool {pool}: unknown placement mode {mode!r} for spec.placement.mode "
            f"(one of {', '.join(MODES)})"
        )
    pv = state.pools.get(pool)
    if pv is None:
        raise ValueError(f"pool {pool}: no such GPUPool")
    if not pv.template:
        raise ValueError(
            f"pool {pool}: spec.schedulingConfigTemplate is not set, so there is no template to patch "
            f"(the pool uses the default mode {pool_mode(state, pool)})"
        )
    if pv.template not in state.templates:
        raise ValueError(
            f"pool {pool}: spec.schedulingConfigTemplate names {pv.template!r}, "
            "but no such SchedulingConfigTemplate exists"
        )
    return pv.template, {"spec": {"placement": {"mode": mode}}}


def mode_change_message(state: ClusterState, pool: str, mode: str) -> str:
    """What the change does, for the confirmation dialog and the journal (behaviour P4)."""
    name, _ = template_patch(state, pool, mode)
    others = sorted(p for p, v in state.pools.items() if v.template == name and p != pool)
    also = f"; it also applies to pool{'s' if len(others) > 1 else ''} {', '.join(others)}" if others else ""
    return (
        f"pool {pool}: placement mode {pool_mode(state, pool)} → {mode} in SchedulingConfigTemplate "
        f"{name}{also}; {RUNNING_WORKLOADS_NOTE}"
    )
