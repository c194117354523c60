"""Why a worker is pending, and the moves that would admit it: the console's describe of a Pending
worker and its `tftui.write.admit` action.

The reason is the first that holds, in the order an operator can act on them:
`quota` (the scheduler said so in the pod's PodScheduled condition), `model` (no GPU of the pool
passes the model or vendor filter), `capacity` (the pool's free TFLOPS or VRAM on acceptable GPUs
is less than the worker asks for in all), `cpu` (GPUs would fit but kube-scheduler's node fit
refuses every such node: CPU, memory, pod slots, node affinity), `nodes` (cordoned or at
maxWorkerPerNode), else `fragmentation` (enough free in all, but no one GPU or node has it).
`admission` is `engine.admit`'s smallest PDB-safe move set in the pool's mode (None: none found).
Movable: TensorFusion workers that are not terminating, not on a do-not-disrupt node and covered by
at most one PDB, whose budget (`status.disruptionsAllowed`) bounds how many of its pods move.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tftui.engine.fit import Request, RequestError, model_matches
from tftui.engine.nodefit import pod_requests
from tftui.engine.placement import place, pool_mode
from tftui.engine.state import ClusterState
from tftui.model.selectors import selector_matches

if TYPE_CHECKING:  # imported where used: the console imports this module at start, and the
    # admission search's packing model brings numpy, which its first screen does not need
    from tftui.engine.admit import Admission
    from tftui.engine.packing import Packing


@dataclass(frozen=True, slots=True)
class PendingWhy:
    reason: str  # quota | model | capacity | cpu | nodes | fragmentation | fits | invalid
    detail: str
    admission: Admission | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "detail": self.detail,
            "admission": None if self.admission is None else self.admission.to_json(),
        }


def is_pending(state: ClusterState, key: str) -> bool:
    w = state.workers.get(key)
    return w is not None and w.phase == "Pending" and not w.node and not w.terminating


def movable_packing(state: ClusterState, pool: str) -> Packing:
    """The pool as `engine.admit` searches it: every worker, its blocker and its one PDB."""
    from tftui.engine.packing import Packing

    pk = Packing.from_state(state, pool)
    pdbs = [p for p in state.pdbs if isinstance(p, dict)]
    for key, p in pk.pods.items():
        w = state.workers[key]
        node = state.nodes.get(w.node or "")
        labels = (w.obj.get("metadata") or {}).get("labels") or {}
        covering = [
            d
            for d in pdbs
            if (d.get("metadata") or {}).get("namespace", "") == w.namespace
            and selector_matches((d.get("spec") or {}).get("selector"), labels, empty_matches_all=True)
        ]
        if node is not None and node.do_not_disrupt:
            p.blocked = "do-not-disrupt"
        elif len(covering) > 1:
            p.blocked = "several PDBs"
        elif covering:
            name = f"{w.namespace}/{(covering[0].get('metadata') or {}).get('name', '')}"
            p.pdb = name
            allowed = (covering[0].get("status") or {}).get("disruptionsAllowed")
            pk.budgets[name] = allowed if isinstance(allowed, int) else 0  # unknown: none
    return pk


def explain(state: ClusterState, key: str) -> PendingWhy | None:
    """Why the Pending worker `key` has no node, and what would admit it (None: not pending)."""
    if not is_pending(state, key):
        return None
    w = state.workers[key]
    pool = w.pool or ""
    try:
        req = Request.of_worker(w)
    except RequestError as exc:
        return PendingWhy("invalid", f"the request cannot be placed as written: {exc}")
    pod = pod_requests(w.obj)
    p = place(state, pool, req, pod=pod)
    if p.ok:
        return PendingWhy("fits", f"fits now on {p.node} ({', '.join(p.gpus)}): the scheduler binds it next")
    cond: dict[str, Any] = next(
        (c for c in (w.obj.get("status") or {}).get("conditions") or () if c.get("type") == "PodScheduled"),
        {},
    )
    message = str(cond.get("message") or "")
    rej = p.rejected
    why, detail = _reason(state, pool, req, rej, message)
    from tftui.engine.admit import Admitter
    from tftui.engine.packing import task_of_worker

    pk = movable_packing(state, pool)
    mode = pool_mode(state, pool)
    adm = Admitter(pk, lambda t, ex: pk.place_mode(t, mode, ex)).admit(task_of_worker(w))
    text = f"{detail}; filters: {', '.join(f'{k}={v}' for k, v in rej.items()) or 'none'}"
    return PendingWhy(why, text, adm[1] if adm is not None else None)


def _reason(
    state: ClusterState, pool: str, req: Request, rej: dict[str, int], message: str
) -> tuple[str, str]:
    if "quota" in message.lower():
        return "quota", f"the scheduler reports a quota: {message}"
    gpus = [g for g in state.gpus_in_pool(pool) if g.phase == "Running"]
    ok = [
        g
        for g in gpus
        if (not req.model or model_matches(req.model, g)) and (not req.vendor or g.vendor == req.vendor)
    ]
    if not ok:
        return "model", f"no Running GPU of pool {pool} is {req.model or req.vendor}"
    free_t = sum(max(0.0, g.available.tflops) for g in ok)
    free_v = sum(max(0.0, g.available.vram) for g in ok)
    need_t = sum(req.tflops_on(g.capacity.tflops) for g in ok[:1]) * req.count
    if free_t < need_t or free_v < req.vram * req.count:
        return "capacity", f"pool {pool} has {free_t:g} TFLOPS and {free_v / 2**30:.1f} GiB free on such GPUs"
    if any(rej.get(s) for s in ("cpu", "memory", "pods", "node-affinity")):
        return "cpu", "GPUs would fit, but kube-scheduler's node fit refuses their nodes"
    if any(rej.get(s) for s in ("unschedulable", "max-workers")):
        return "nodes", "the nodes with room are cordoned or at maxWorkerPerNode"
    return "fragmentation", "enough is free in the pool, but no single GPU (or node) has the room"
