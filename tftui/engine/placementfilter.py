"""Placement's GPU filter chain: which GPUs of a pool can take a request, and why each other GPU
cannot (its `STAGES`, in the order the scheduler plugin runs them).

The first half of every placement; kept apart from the node scores, the GPU choice, the preview and
the mode change in `engine.placement`, which build on it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from tftui.engine import partitions, quota
from tftui.engine.fit import USED_BY_TF, Request, model_matches, reject_reason
from tftui.engine.isolation import policy_reject
from tftui.engine.nodefit import NodeFit, PodRes, node_fit
from tftui.engine.state import ClusterState, GPUView, PartitionUse, Res
from tftui.model.isolation import PARTITIONED, SHARED

Assumed = Mapping[str, Sequence[PartitionUse]]  # GPU → its partitions, as a simulation booked them
# filter stages in the order they run; `Placement.rejected` uses these keys
STAGES = (
    "quota",  # the namespace's GPUResourceQuota refused the request (every pool GPU counted)
    "excluded",  # caller's exclude_nodes (e.g. defrag's source node)
    "no-node",  # GPU whose node has no GPUNode
    "isolation-policy",  # a Dynamic-policy GPU and a partitioned request
    "isolation-conflict",  # a Dynamic GPU whose recovery found two modes
    "isolation-mode",  # the GPU's (or its Dynamic lock's) mode is another
    "phase",
    "used-by",
    "index",
    "isolation-unsupported",  # the virtualization-capabilities annotation says no
    "shared-busy",  # shared needs a whole idle GPU without partitions
    "partition-template",  # the GPU's model has no such (or no fitting) partition template
    "partition-full",  # the GPU (or this template) is at its partition count
    "resource",
    "model",
    "vendor",
    "partition-slots",  # no free MIG slot / Ascend isolation group or extended resources
    "partition-vendor",  # the vendor has no partition strategy
    "same-node",
    "max-workers",
    "unschedulable",
    "node-affinity",  # kube-scheduler's node filters (engine.nodefit)
    "pods",
    "cpu",
    "memory",
)


def _avail(gpu: GPUView, available: Mapping[str, Res] | None) -> Res:
    if available is not None:
        got = available.get(gpu.name)
        if got is not None:
            return got
    return gpu.available


def _state_avail(state: ClusterState, available: Mapping[str, Res] | None) -> Callable[[GPUView], Res]:
    """`_avail` over one state, the state's figures kept once per GPU (read-only): a scheduler
    pass places many requests over the same pool GPUs."""
    base: dict[str, Res] = state.derived("placement-available", lambda st: {})

    def avail(gpu: GPUView) -> Res:
        if available is not None:
            got = available.get(gpu.name)
            if got is not None:
                return got
        got = base.get(gpu.name)
        if got is None:
            got = base[gpu.name] = gpu.available
        return got

    return avail


@dataclass(frozen=True, slots=True)
class Candidates:
    """Result of the filter stage: valid GPUs per node (names sorted), or why there are none.
    `request` is the one filtered for: a partitioned request's matched template filled in."""

    by_node: dict[str, tuple[str, ...]]
    rejected: dict[str, int]
    reason: str | None = None
    request: Request | None = None


def filter_gpus(
    state: ClusterState,
    pool: str,
    request: Request,
    *,
    available: Mapping[str, Res] | None = None,
    exclude_nodes: Collection[str] = frozenset(),
    max_worker_per_node: int | None = None,
    worker_counts: Mapping[str, int] | None = None,
    node_filters: bool = True,
    pod: PodRes | None = None,
    fit: NodeFit | None = None,
    assumed: Assumed | None = None,
    quota_used: Mapping[str, quota.Usage] | None = None,
) -> Candidates:
    """The pool's GPUs that pass upstream's pre-score filters (P2), grouped by node.

    Error texts are upstream's, except the tftui one for "every node with valid GPUs is at the worker
    cap or cordoned" (upstream: kube-scheduler's generic "0/N nodes are available"). `worker_counts` overrides a node's worker count (committed plus, in a
    simulation, assumed); `max_worker_per_node` ≤ 0 disables the cap (None: the scheduler's).
    `node_filters=False` skips the node-level stages (maxWorkerPerNode, cordon, kube-scheduler's
    node fit), as the non-scheduler selector does. `pod` is the worker pod's requests (None: only
    its pod slot), `fit` the nodes' room with a simulation's bookings (None: the state's).
    `assumed` and `quota_used`: partitions and quota usage a simulation booked beyond the state.
    """
    rejected: dict[str, int] = {}
    if max_worker_per_node is None:
        max_worker_per_node = state.scheduler.max_worker_per_node

    def drop(stage: str, n: int = 1) -> None:
        if n:
            rejected[stage] = rejected.get(stage, 0) + n

    gpus = state.gpus_in_pool(pool)
    if (refused := quota.check(state, request, quota_used)) is not None:
        drop("quota", len(gpus))
        return Candidates({}, rejected, refused, request)
    if not gpus:
        return Candidates({}, rejected, f"no gpu devices in pool {pool}", request)
    by_node: dict[str, list[str]] = {}
    avail = _state_avail(state, available)
    nodes = state.nodes
    catalog = state.providers
    uses = assumed.get if assumed is not None else _none
    if request.isolation in (SHARED, PARTITIONED):
        for g in gpus:
            if g.node in exclude_nodes:
                drop("excluded")
            elif g.node is None or g.node not in nodes:
                drop("no-node")
            elif (why := reject_reason(g, avail(g), request, catalog, uses(g.name))) is not None:
                drop(why)
            else:
                by_node.setdefault(g.node, []).append(g.name)
    else:
        _filter_plain(state, pool, gpus, request, available, exclude_nodes, rejected, by_node)
    if by_node and request.isolation == PARTITIONED and not request.partition:
        request, reason = _match_partition(state, request, by_node, avail, uses, drop)
        if reason is not None:
            return Candidates({}, _ordered(rejected), reason, request)
    if not by_node:
        return Candidates(
            {}, _ordered(rejected), f"no gpus available or valid in pool {pool} after filtering", request
        )
    if request.count > 1:
        for n in [n for n, names in by_node.items() if len(names) < request.count]:
            drop("same-node", len(by_node.pop(n)))
        if not by_node:
            return Candidates(
                {}, _ordered(rejected), f"no node has at least {request.count} available GPUs", request
            )
    if node_filters:
        room = fit if fit is not None else node_fit(state)
        for n in sorted(by_node):
            node = state.nodes[n]
            count = (
                worker_counts.get(n, len(node.workers)) if worker_counts is not None else len(node.workers)
            )
            if max_worker_per_node > 0 and count >= max_worker_per_node:
                drop("max-workers", len(by_node.pop(n)))
            elif node.unschedulable:
                drop("unschedulable", len(by_node.pop(n)))
            elif (why := room.refuse(n, pod)) is not None:
                drop(why, len(by_node.pop(n)))
        if not by_node:
            parts = []
            if rejected.get("max-workers"):
                parts.append(f"at maxWorkerPerNode ({max_worker_per_node})")
            if rejected.get("unschedulable"):
                parts.append("unschedulable")
            short = [s for s in ("node-affinity", "pods", "cpu", "memory") if rejected.get(s)]
            if short:
                parts.append(f"without room for the pod ({', '.join(short)})")
            return Candidates(
                {},
                _ordered(rejected),
                f"no node left in pool {pool}: nodes with valid GPUs are {' or '.join(parts)}",
                request,
            )
    return Candidates({n: tuple(by_node[n]) for n in sorted(by_node)}, _ordered(rejected), None, request)


def _none(_: str) -> None:
    return None


_STATIC: Final = "carried/placement-static"
"""`ClusterState.derived` key of the GPU name → (its view, its availability, request shape →
`_static` verdicts) memo; `incremental.CARRIED` keeps it for the next states, an entry counting only for the very
view it was made from (a GPU's view is replaced whenever anything of it changes). Forgotten whole once
it holds more than twice the GPUs (GPUs released and others added): it never grows with the churn."""

_Shape = tuple[str, tuple[int, ...], str | None, str | None]  # isolation, indices, model, vendor
_Memo = tuple[GPUView, Res, dict[_Shape, tuple[str | None, str | None]]]  # view, its availability, verdicts


def _static(g: GPUView, req: Request) -> tuple[str | None, str | None]:
    """`reject_reason`'s filters that read the GPU's view and the request's shape alone, for a
    request that is neither shared nor partitioned: those it runs before the resource filter (the
    isolation policy, phase, used-by, index, virtualization capabilities) and after it (model,
    vendor)."""
    why = policy_reject(g, req.isolation)
    if why is None:
        if g.phase != "Running":
            why = "phase"
        elif g.used_by not in ("", USED_BY_TF):
            why = "used-by"
        elif req.indices and (g.index is None or g.index not in req.indices):
            why = "index"
        else:
            caps = g.isolation.capabilities
            if caps is not None and not caps.supports(req.isolation):
                why = "isolation-unsupported"
    after = None
    if req.model and not model_matches(req.model, g):
        after = "model"
    elif req.vendor and g.vendor != req.vendor:
        after = "vendor"
    return why, after


def _filter_plain(
    state: ClusterState,
    pool: str,
    gpus: Sequence[GPUView],
    req: Request,
    available: Mapping[str, Res] | None,
    exclude_nodes: Collection[str],
    rejected: dict[str, int],
    by_node: dict[str, list[str]],
) -> None:
    """The per-GPU stages of `filter_gpus` for a request neither shared nor partitioned: the same
    verdicts as `reject_reason`, whose filters but the resource one are kept per GPU view and
    request shape (`_static`) over the states, with the view's availability, so a placement costs
    the resource check per GPU."""
    memo: dict[str, _Memo] = state.derived(_STATIC, lambda st: {})
    if len(memo) > 2 * len(state.gpus) + 64:  # GPUs gone from the cluster: forget them all
        memo.clear()
    shape: _Shape = (req.isolation, req.indices, req.model, req.vendor)
    nodes = state.nodes
    booked = available.get if available else _none
    pct = req.compute_percent
    need_t = req.tflops or 0.0
    need_v = req.vram
    if not exclude_nodes:  # the GPUs past the static filters, once per state, pool and shape
        per_shape: dict[_Shape, _Survivors] = state.derived(f"placement-plain/{pool}", lambda st: {})
        got = per_shape.get(shape)
        if got is None:
            got = per_shape[shape] = _survivors(gpus, req, shape, nodes, memo)
        for stage, n in got[0].items():
            rejected[stage] = rejected.get(stage, 0) + n
        short = 0
        for g, gname, gnode, a0, after in got[1]:
            a = booked(gname) or a0
            if pct is not None:
                need_t = req.tflops_on(g.capacity.tflops)
            if a.tflops < need_t or a.vram < need_v:
                short += 1
            elif after is not None:
                rejected[after] = rejected.get(after, 0) + 1
            else:
                by_node.setdefault(gnode, []).append(gname)
        if short:
            rejected["resource"] = rejected.get("resource", 0) + short
        return
    for g in gpus:
        node = g.node
        if node in exclude_nodes:
            why: str | None = "excluded"
        elif node is None or node not in nodes:
            why = "no-node"
        else:
            name = g.name
            base, v = _judged(memo, g, req, shape)
            why = v[0]
            if why is None:
                a = booked(name) or base
                if pct is not None:
                    need_t = req.tflops_on(g.capacity.tflops)
                if a.tflops < need_t or a.vram < need_v:
                    why = "resource"
                else:
                    why = v[1]
                    if why is None:
                        by_node.setdefault(node, []).append(name)
        if why is not None:
            rejected[why] = rejected.get(why, 0) + 1


_Survivors = tuple[dict[str, int], list[tuple[GPUView, str, str, Res, str | None]]]


def _survivors(
    gpus: Sequence[GPUView], req: Request, shape: _Shape, nodes: Mapping[str, object], memo: dict[str, _Memo]
) -> _Survivors:
    """The pool's GPUs that pass the no-node check and the static filters before the resource one
    (as `_filter_plain` judges them), with their availability and later static verdict, in pool
    order; and how many each static stage rejected."""
    counts: dict[str, int] = {}
    out: list[tuple[GPUView, str, str, Res, str | None]] = []
    for g in gpus:
        node = g.node
        if node is None or node not in nodes:
            counts["no-node"] = counts.get("no-node", 0) + 1
            continue
        base, v = _judged(memo, g, req, shape)
        if v[0] is not None:
            counts[v[0]] = counts.get(v[0], 0) + 1
        else:
            out.append((g, g.name, node, base, v[1]))
    return counts, out


def _judged(
    memo: dict[str, _Memo], g: GPUView, req: Request, shape: _Shape
) -> tuple[Res, tuple[str | None, str | None]]:
    """(the view's availability, its `_static` verdicts for `shape`), from the memo while the GPU's
    view is the very one they were made from."""
    e = memo.get(g.name)
    if e is None or e[0] is not g:
        e = memo[g.name] = (g, g.available, {})
    v = e[2].get(shape)
    if v is None:
        v = e[2][shape] = _static(g, req)
    return e[1], v


def _match_partition(
    state: ClusterState,
    request: Request,
    by_node: dict[str, list[str]],
    avail: Callable[[GPUView], Res],
    uses: Callable[[str], Sequence[PartitionUse] | None],
    drop: Callable[[str, int], None],
) -> tuple[Request, str | None]:
    """A partitioned request without a template: the scheduler's pre-filter matches the template
    that fits with the least waste over the filtered GPUs; the GPUs that cannot take it then drop."""
    passing = [state.gpus[n] for names in by_node.values() for n in names]
    t = partitions.match_template(
        state.providers, passing, request.tflops, request.compute_percent, request.vram
    )
    if t is None:
        drop("partition-template", len(passing))
        by_node.clear()
        return request, (
            "no suitable partition template: no partition template can satisfy request: "
            f"TFLOPs={request.tflops or 0:.2f}, VRAM={int(request.vram)}"
        )
    request = replace(request, partition=t.id)
    for node in list(by_node):
        keep = []
        for name in by_node[node]:
            g = state.gpus[name]
            why = reject_reason(g, avail(g), request, state.providers, uses(name))
            if why is None:
                keep.append(name)
            else:
                drop(why, 1)
        if keep:
            by_node[node] = keep
        else:
            del by_node[node]
    return request, None


def _ordered(rejected: dict[str, int]) -> dict[str, int]:
    return {s: rejected[s] for s in STAGES if s in rejected}
