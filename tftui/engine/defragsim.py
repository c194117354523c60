"""What a defrag step judges about one node: its eligibility (D3), whether its workers fit elsewhere
(the joint placement simulation, D4) and whether its PDBs allow the drain (D6).

Pure judgements on the step's context, separate from the step that turns them into a `Plan`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tftui.engine.defragconfig import (
    _REJECT_LIMIT,
    _SHOW,
    _SUMMARY_LIMIT,
    _annotations,
    _aware,
    _cut,
    _disruptions_allowed,
    _fmt_pct,
    _labels,
    _meta,
)
from tftui.engine.defragindex import _Ctx, _is_used, _pool_gpus, _util, gpu_utilization
from tftui.engine.fit import DEFRAG_WEIGHTS, Request, gpu_level_score, reject_reason
from tftui.engine.nodefit import NodeFit, PodRes, node_fit, pod_requests
from tftui.engine.plan import Action, Skip
from tftui.engine.state import GPUView, NodeView, PartitionUse, Res, WorkerView
from tftui.model import keys
from tftui.model.duration import format_duration
from tftui.model.provider import ProviderCatalog

# -- eligibility (D3) ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Eligible:
    node: NodeView
    util: float
    workers: list[WorkerView]  # active, sorted by key


def _gate(ctx: _Ctx, node: NodeView, *, drain: bool) -> tuple[_Eligible | None, Skip | None, Action | None]:
    """D3 checks, upstream's order; `drain` (a source being continued) skips the threshold and idle gates."""
    k8s = ctx.k8s_nodes.get(node.name)
    name = node.name
    if node.do_not_disrupt:
        where = "GPUNode" if _labels(node.obj).get(keys.DO_NOT_DISRUPT) == keys.TRUE else "Node"
        return None, Skip(name, "do-not-disrupt", f"{where} label {keys.DO_NOT_DISRUPT}=true"), None
    if _meta(node.obj).get("deletionTimestamp"):
        return None, Skip(name, "not-running", "GPUNode is being deleted"), None
    if node.phase != "Running":
        return None, Skip(name, "not-running", f"GPUNode phase {node.phase}"), None
    if k8s is None:
        return None, Skip(name, "not-running", "no Kubernetes Node"), None
    if node.unschedulable:
        return None, Skip(name, "cordoned", "spec.unschedulable=true"), None
    if ctx.owned(k8s, keys.DEFRAG_EVICT_SKIP, keys.DEFRAG_EVICT_SKIP_POOL):
        reason = _annotations(k8s).get(keys.DEFRAG_EVICT_SKIP_REASON, "")
        return None, Skip(name, "evict-skip", reason), None
    used, total = gpu_utilization(ctx.state, node, ctx.pool)
    util = _util(used, total)
    if not drain:
        if not total:
            return None, Skip(name, "idle", "no pool GPUs"), None
        if used == 0:
            return None, Skip(name, "idle", "no GPU in use; left to node compaction"), None
        if util > ctx.cfg.threshold:
            return (
                None,
                Skip(name, "above-threshold", f"utilization {_fmt_pct(util)}% > {ctx.cfg.threshold:g}%"),
                None,
            )
    # (the terminating pods are found by a scan of every pod: only for a node that has such pods)
    native = (
        [p for p in node.native_gpu_pods if p not in ctx.terminating_pods] if node.native_gpu_pods else []
    )
    if native:
        return (
            None,
            Skip(name, "native-gpu-pod", f"pod {sorted(native)[0]} uses GPUs outside TensorFusion"),
            None,
        )
    workers = ctx.active(name)
    if not workers:
        return None, Skip(name, "no-workers", ""), None
    for w in workers:
        if ctx.fresh(w):
            age = format_duration(ctx.now - (_aware(w.created) or ctx.now))
            detail = (
                f"pod {w.key} is {age} old, younger than maxDuration {format_duration(ctx.cfg.max_duration)}"
            )
            return None, Skip(name, "fresh-worker", detail), None
    for w in workers:
        if not ctx.covering(w):
            msg = (
                f"node {name} skipped from defrag: pod {w.namespace}/{w.name} has no PodDisruptionBudget "
                "covering it; please add a PDB to enable safe defrag"
            )
            return (
                None,
                Skip(name, "missing-pdb", f"pod {w.key} has no PodDisruptionBudget"),
                ctx.event("Warning", "DefragSkipMissingPDB", msg),
            )
    return _Eligible(node, util, workers), None, None


# -- joint placement simulation (D4) -------------------------------------------------------------


@dataclass(slots=True)
class _Target:
    node: str
    gpus: list[GPUView]
    avail: dict[str, Res]
    used: int
    workers: int
    scores: dict[str, int] = field(default_factory=dict)  # GPU-level scores at `avail` (memo)
    order: list[GPUView] = field(default_factory=list)  # `gpus` by score (best first), then name
    max_t: float = 0.0  # the largest available TFLOPS and VRAM among `gpus` (`reorder`)
    max_v: float = 0.0
    catalog: ProviderCatalog = field(default_factory=ProviderCatalog)
    parts: dict[str, list[PartitionUse]] = field(default_factory=dict)  # partitions booked here
    tops: list[int] = field(default_factory=list)  # tops[k]: the sum of the k best ranks (`order`)
    caps: tuple[tuple[float, float], ...] = ()  # the GPUs' distinct capacities (TFLOPS, VRAM)

    def copy(self) -> _Target:
        return _Target(
            self.node,
            self.gpus,
            dict(self.avail),
            self.used,
            self.workers,
            dict(self.scores),
            self.order,
            self.max_t,
            self.max_v,
            self.catalog,
            dict(self.parts),
            self.tops,
            self.caps,
        )

    def reject(self, g: GPUView, req: Request) -> str | None:
        return reject_reason(g, self.avail[g.name], req, self.catalog, self.parts.get(g.name))

    def book(self, g: GPUView, req: Request, worker: str) -> None:
        """Take one device of `req` from `g` in this simulation."""
        self.avail[g.name] = self.avail[g.name] - req.take_on(g, self.catalog)
        if req.partition:
            self.parts[g.name] = [*self.parts.get(g.name, g.partitions), PartitionUse(worker, req.partition)]

    def filter_reject(self, req: Request) -> str:
        """Why no `req.count` GPUs of this target pass the filters (upstream's allocator-filter)."""
        reasons = [self.reject(g, req) for g in self.gpus]
        fits = sum(r is None for r in reasons)
        detail = f"filtered={fits} required={req.count}"
        failed = _filter_summary(r for r in reasons if r is not None)
        return f"{self.node}:allocator-filter({detail}{' ' + failed if failed else ''})"

    def reorder(self) -> None:
        """Sort the GPUs by score at the current availabilities; note the largest availabilities
        (a request above them fits no GPU here, whatever the other filters say)."""
        self.order = sorted(self.gpus, key=lambda g: (-self.rank(g), g.name))
        self.tops = [0, *itertools.accumulate(map(self.rank, self.order))]
        self.max_t = max((a.tflops for a in self.avail.values()), default=0.0)
        self.max_v = max((a.vram for a in self.avail.values()), default=0.0)

    def rank(self, g: GPUView) -> int:
        """The GPU's CompactFirst score at its current availability in this simulation."""
        s = self.scores.get(g.name)
        if s is None:
            s = self.scores[g.name] = gpu_level_score(
                "CompactFirst", g.capacity, self.avail[g.name], DEFRAG_WEIGHTS
            )
        return s

    @property
    def util(self) -> float:
        return _util(self.used, len(self.gpus))

    def describe(self) -> str:
        t = len(self.gpus)
        return f"{self.node}(t={t},u={self.used},f={t - self.used})"


@dataclass(slots=True)
class _Simulation:
    placements: dict[str, tuple[str, list[str]]]  # worker key → (target node, GPU names)
    failed: WorkerView | None = None
    summary: str = ""


def _budget(ctx: _Ctx, source: str) -> tuple[list[_Target], list[str]]:
    """Other pool nodes a worker may move to, and why the rest may not (D4, upstream's budget rules).
    The pool's nodes are judged once per state (`_judged`): the targets are shared, read-only; a
    simulation books on copies of them."""
    targets: list[_Target] = []
    excluded: list[str] = []
    judged: list[tuple[str, str | None, _Target | None]] = ctx.state.derived(
        f"defrag-budget/{ctx.pool}", lambda st: _judged(ctx)
    )
    for name, reason, t in judged:
        if name == source:
            continue
        if t is not None:
            targets.append(t)
        else:
            excluded.append(f"{name}({reason})")
    return targets, excluded


def _judged(ctx: _Ctx) -> list[tuple[str, str | None, _Target | None]]:
    """Every pool node by name: why it cannot be a target, or the target it is (state-only). A
    node's judgement is re-used from an earlier state while its view and its GPUs' views are the
    very same (`derived_per_node`): it reads nothing else (its Node is its view's, a change of its
    workers makes a new view, and other providers make a new state, not a derived one)."""
    pv = ctx.state.pools.get(ctx.pool)
    names = sorted(pv.nodes) if pv is not None else []
    per_node = ctx.state.derived_per_node(f"defrag-judged/{ctx.pool}", names, lambda st, n: _judge(ctx, n))
    return [per_node[name] for name in names]


def _judge(ctx: _Ctx, node: NodeView) -> tuple[str, str | None, _Target | None]:
    """Why `node` cannot be a target, or the target it is."""
    k8s = node.node_obj  # (the scheduler snapshot's Node of that name, as `ctx.k8s_nodes` has it)
    reason = None
    if k8s is None:
        reason = "not in scheduler snapshot"
    elif _meta(node.obj).get("deletionTimestamp"):
        reason = "deleting"
    elif node.unschedulable:
        reason = "cordoned"
    elif _labels(k8s).get(keys.SHOULD_DELETE) == keys.TRUE:
        reason = "deletion-marked"
    elif _labels(k8s).get(keys.DEFRAG_SOURCE) == keys.TRUE:
        reason = "defrag-source-marked"
    gpus = _pool_gpus(ctx.state, node, ctx.pool) if reason is None else []
    if reason is None and not gpus:
        reason = "no pool GPUs"
    if reason is None:
        avail = {g.name: g.available for g in gpus}
        used = sum(1 for g in gpus if _is_used(g.capacity, avail[g.name]))
        if used == 0:
            reason = f"empty node (t={len(gpus)},u=0,f={len(gpus)})"
        else:
            t = _Target(
                node.name,
                gpus,
                avail,
                used,
                len(ctx.active(node.name)),
                catalog=ctx.state.providers,
                caps=tuple(dict.fromkeys((g.capacity.tflops, g.capacity.vram) for g in gpus)),
            )
            t.reorder()  # every simulation over this state starts from these scores
            return node.name, None, t
    return node.name, reason, None


def _size_key(w: WorkerView) -> tuple[float, float, str]:
    """Largest first: TFLOPS × devices, then VRAM × devices, then name (D4)."""
    return (-w.request.tflops * w.gpu_count, -w.request.vram * w.gpu_count, w.key)


def _filter_summary(reasons: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for r in reasons:
        counts[r] = counts.get(r, 0) + 1
    return ",".join(f"{k}={v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _simulate(ctx: _Ctx, source: str, source_util: float, workers: Sequence[WorkerView]) -> _Simulation:
    """Place every worker of `source` on the budget, all or nothing; raises RequestError on bad requests.

    Each worker goes to the target of the highest score, the first in budget order among equals.
    The targets are tried best bound first (`_bound`: no target scores above it), and the search
    stops once no untried target can beat the best found: the choice of trying every target, in
    budget order, at a fraction of the cost (every target is tried only when none takes the worker,
    and then its rejection is reported in budget order)."""
    shared, excluded = _budget(ctx, source)
    own: dict[str, _Target] = {}  # copies of the targets this simulation booked workers on
    sim = _Simulation({})
    room = node_fit(ctx.state)  # kube-scheduler's node fit, with this simulation's moves booked
    for w in sorted(workers, key=_size_key):
        req = Request.of_worker(w)
        pod = pod_requests(w.obj)
        best: tuple[int, _Target, list[GPUView]] | None = None
        best_i = -1
        rejects: list[tuple[int, str | _Target]] = []  # a target: its allocator-filter text, made if shown
        targets = [own.get(t.node, t) for t in shared] if own else shared
        need_t = (req.tflops or 0.0) if req.compute_percent is None else 0.0
        bounds = _bounds(targets, req)
        for i in sorted(range(len(targets)), key=lambda i: (-bounds[i], i)):
            if best is not None:
                if bounds[i] < best[0]:
                    break  # the rest are bounded lower still
                if bounds[i] == best[0] and i > best_i:
                    continue  # at best a tie, after the best in budget order
            t = targets[i]
            got = _try_target(ctx, t, req, pod, room, source_util, need_t)
            if isinstance(got, list):
                # the node-level score of CompactFirst is the GPU-level formula: the memoized rank
                score = sum(t.rank(g) for g in got)
                if best is None or score > best[0] or (score == best[0] and i < best_i):
                    best, best_i = (score, t, got), i
            else:
                rejects.append((i, got))
        if best is None:
            sim.failed = w
            rejects.sort(key=lambda r: r[0])
            shown = [r if isinstance(r, str) else r.filter_reject(req) for _, r in rejects[:_SHOW]]
            sim.summary = _unmovable_summary(w, targets, shown, excluded)
            return sim
        _book(sim, own, room, best[1], best[2], req, w, pod)
    return sim


def _book(
    sim: _Simulation,
    own: dict[str, _Target],
    room: NodeFit,
    t: _Target,
    chosen: list[GPUView],
    req: Request,
    w: WorkerView,
    pod: PodRes,
) -> None:
    """Book worker `w` on the GPUs `chosen` on target `t` for the rest of this simulation."""
    if t.node not in own:  # the state's judged target is shared: book on a copy
        t = own[t.node] = t.copy()
    for g in chosen:
        was_free = not _is_used(g.capacity, t.avail[g.name])
        t.book(g, req, w.key)
        t.scores.pop(g.name, None)
        if was_free and _is_used(g.capacity, t.avail[g.name]):
            t.used += 1
    t.reorder()
    t.workers += 1
    room.book(t.node, pod)
    sim.placements[w.key] = (t.node, [g.name for g in chosen])


def _bounds(targets: Sequence[_Target], req: Request) -> list[int]:
    """Per target, a score no placement of `req` there exceeds: the sum of its `count` best ranks,
    and `count` times the rank of a GPU left with just the request's room (a GPU that passes the
    resource filter has at least that room, and the rank only falls as the room grows)."""
    count = req.count
    at_caps: dict[tuple[tuple[float, float], ...], int] = {}  # the GPUs' capacities → count × best rank
    out: list[int] = []
    for t in targets:
        cb = at_caps.get(t.caps)
        if cb is None:
            cb = at_caps[t.caps] = count * max(
                (
                    gpu_level_score(
                        "CompactFirst", Res(*c), Res(req.tflops_on(c[0]), req.vram), DEFRAG_WEIGHTS
                    )
                    for c in t.caps
                ),
                default=0,
            )
        tops = t.tops
        top = tops[count] if count < len(tops) else tops[-1]
        out.append(top if top < cb else cb)
    return out


def _try_target(
    ctx: _Ctx,
    t: _Target,
    req: Request,
    pod: PodRes,
    room: NodeFit,
    source_util: float,
    need_t: float,
) -> list[GPUView] | str | _Target:
    """The GPUs of `t` that take `req` (the best-ranked that pass the filters), or why none do: a
    text, or the target itself when no GPU has the room (its filter text, made if shown)."""
    if ctx.max_workers > 0 and t.workers >= ctx.max_workers:
        return f"{t.node}:max-worker-per-node(workers={t.workers} max={ctx.max_workers})"
    if t.util < source_util:
        return f"{t.node}:monotonicity(targetUtil={_fmt_pct(t.util)} sourceUtil={_fmt_pct(source_util)})"
    if req.vram > t.max_v or need_t > t.max_t:  # no GPU has the room
        return t
    if (why := room.refuse(t.node, pod)) is not None:  # the scheduler would not bind it here
        return f"{t.node}:node-resources-fit({why})"
    # the best-scored GPUs that pass the filters: the first `count` in score order
    chosen: list[GPUView] = []
    reasons: list[str] = []
    for g in t.order:
        why = t.reject(g, req)
        if why is not None:
            reasons.append(why)
            continue
        chosen.append(g)
        if len(chosen) == req.count:
            return chosen
    # every GPU was looked at
    detail = f"filtered={len(chosen)} required={req.count}"
    failed = _filter_summary(reasons)
    return f"{t.node}:allocator-filter({detail}{' ' + failed if failed else ''})"


def _unmovable_summary(w: WorkerView, targets: list[_Target], rejects: list[str], excluded: list[str]) -> str:
    """The `DefragSkipUnschedulable` detail, in upstream's shape (D4), without scheduler fields."""
    ex = ",".join(_cut(e, _REJECT_LIMIT) for e in excluded[:_SHOW])
    if not targets:
        text = f"current TF workers cannot be jointly placed; pod={w.key} budgetTargets=0"
    else:
        top = ",".join(_cut(r, _REJECT_LIMIT) for r in rejects[:_SHOW]) or "no feasible defrag target"
        budget = ",".join(t.describe() for t in targets[:_SHOW])
        text = f"pod={w.key} budgetTargets={len(targets)} topRejects={top} budget={budget}"
    if ex:
        text += f" excluded={ex}"
    return _cut(text, _SUMMARY_LIMIT)


# -- PDB preflight (D6) ----------------------------------------------------------------------------


def _pdb_block(ctx: _Ctx, node: str, workers: Sequence[WorkerView]) -> str | None:
    """D6: upstream's PDB check, over the PDBs the Eviction API checks (an empty selector's too),
    plus the rules it enforces: at most one PDB a pod, and each allowing ≥ the node's pods it covers."""
    covered: dict[tuple[str, str], int] = {}
    per_worker: list[tuple[WorkerView, list[dict[str, Any]]]] = []
    for w in workers:
        pdbs = ctx.checked(w)
        if len(pdbs) > 1:
            names = ", ".join(_meta(p).get("name", "") for p in pdbs)
            return (
                f"pod {w.namespace}/{w.name} is selected by {len(pdbs)} PDBs ({names}): "
                "the Eviction API refuses to evict a pod with more than one"
            )
        per_worker.append((w, pdbs))
        for p in pdbs:
            k = (_meta(p).get("namespace", ""), _meta(p).get("name", ""))
            covered[k] = covered.get(k, 0) + 1
    for w, pdbs in per_worker:
        for p in pdbs:
            ns, name = _meta(p).get("namespace", ""), _meta(p).get("name", "")
            allowed = _disruptions_allowed(p)
            head = f"pod {w.namespace}/{w.name} is blocked by PDB {ns}/{name}: disruptionsAllowed={allowed}"
            if allowed <= 0:
                return head
            if allowed < covered[(ns, name)]:
                return f"{head} < {covered[(ns, name)]} pods it covers on node {node}"
    return None
