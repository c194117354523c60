"""Carry out Plans through a `WritableClusterPort`: one idempotent call per action, each journaled.

Actions run in plan order. They are grouped by the pool they serve, because a pool's actions were
decided together: the first failure stops the rest of *that pool's* actions (the pod markers after a
failed eviction, the `last-sync` stamp after a failed release), other pools go on.

An eviction the Eviction API refuses is D5's case: the step's remaining actions are dropped and
`defrag.evict_refused`'s plan is applied instead (Warning events, the node on the pool's evict-skip
list, its source marker cleared). That covers HTTP 429 (a PodDisruptionBudget) and any other refusal,
as upstream treats every eviction error alike; only 404 differs — upstream counts an eviction of a pod
that is already gone as a success, and so do label and annotation patches of a gone pod here (the
pod's markers went with it), so the step goes on.

`dry_run` journals every action it would take, marked `dry-run:`, and applies none.

`fence` (the daemon's leader check) is asked right before every action: when it says no, the action
is `skipped` and journaled as such, so a replica that lost its lease mid-plan stops at once. The
cluster adapter asks the same fence before every attempt of a call (`sources.kube`): an action whose
retries outlive the lease is abandoned there (`NotLeader`), journaled as abandoned and `skipped`
too — never treated as a refusal (no `evict_refused` fallback, which would write more).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from tftui.engine.defrag import evict_refused
from tftui.engine.plan import (
    Action,
    AnnotateNode,
    AnnotatePod,
    AnnotatePool,
    DeleteGPUNodeClaim,
    Event,
    EvictPod,
    LabelNode,
    LabelPod,
    PatchPoolStatus,
    PatchWorkloadAutoscale,
    PatchWorkloadStatus,
    Plan,
)
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.runtime.journal import Journal
from tftui.sources.ports import ActionError, NotLeader, WritableClusterPort

__all__ = ["ActionResult", "ActionStatus", "Actuator", "describe", "pool_of"]

ActionStatus = Literal["applied", "dry-run", "failed", "skipped"]
_POD_ACTIONS = (EvictPod, LabelPod, AnnotatePod)


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What became of one action: `applied`, `dry-run` (journaled only), `failed` or `skipped`."""

    action: Action
    pool: str
    status: ActionStatus
    error: str = ""
    code: int | None = None  # the ActionError status of a failure
    note: str = ""  # e.g. "already gone" for a 404 that counts as done

    @property
    def ok(self) -> bool:
        return self.status in ("applied", "dry-run")


def _kv(values: Mapping[str, str | None]) -> str:
    """kubectl style: `key=value`, and `key-` for a removal."""
    return " ".join(f"{k}-" if v is None else f"{k}={v}" for k, v in values.items())


def describe(action: Action) -> str:
    """One line for the journal and confirm dialogs."""
    if isinstance(action, LabelNode):
        return f"label Node {action.node} {_kv(action.labels)}"
    if isinstance(action, AnnotateNode):
        return f"annotate Node {action.node} {_kv(action.annotations)}"
    if isinstance(action, LabelPod):
        return f"label Pod {action.namespace}/{action.name} {_kv(action.labels)}"
    if isinstance(action, AnnotatePod):
        return f"annotate Pod {action.namespace}/{action.name} {_kv(action.annotations)}"
    if isinstance(action, AnnotatePool):
        return f"annotate GPUPool {action.pool} {_kv(action.annotations)}"
    if isinstance(action, DeleteGPUNodeClaim):
        return f"delete GPUNodeClaim {action.name}"
    if isinstance(action, EvictPod):
        return f"evict Pod {action.namespace}/{action.name}"
    if isinstance(action, PatchPoolStatus):
        return f"patch GPUPool {action.pool} status {json.dumps(action.fields, sort_keys=True)}"
    if isinstance(action, PatchWorkloadStatus):
        return (
            f"patch TensorFusionWorkload {action.namespace}/{action.name} status "
            f"{json.dumps(action.fields, sort_keys=True)}"
        )
    if isinstance(action, PatchWorkloadAutoscale):
        return (
            f"patch TensorFusionWorkload {action.namespace}/{action.name} "
            f"spec.autoScalingConfig.autoSetResources.enable={str(action.enable).lower()}"
        )
    return f"{action.type} {action.reason} on {action.object}: {action.message}"


def pool_of(action: Action, state: ClusterState | None, default: str = "") -> str:
    """The pool an action serves: named by pool actions and events, else via the node or pod in `state`."""
    if isinstance(action, AnnotatePool | PatchPoolStatus):
        return action.pool
    if isinstance(action, Event):
        kind, _, name = action.object.partition("/")
        if kind == "TensorFusionWorkload" and state is not None:
            wv = state.workloads.get(name)
            return (wv.pool if wv else None) or default
        return name if kind == "GPUPool" else default
    if state is None:
        return default
    if isinstance(action, PatchWorkloadStatus | PatchWorkloadAutoscale):
        wv = state.workloads.get(f"{action.namespace}/{action.name}")
        return (wv.pool if wv else None) or default
    if isinstance(action, LabelNode | AnnotateNode):
        nv = state.nodes.get(action.node)
        return (nv.pool if nv else None) or default
    if isinstance(action, DeleteGPUNodeClaim):
        for nv in state.nodes.values():
            if nv.claim == action.name and nv.pool:
                return nv.pool
        claim = state.claims.get(action.name) or {}
        return str(((claim.get("metadata") or {}).get("labels") or {}).get(keys.MANAGED_BY) or default)
    w = state.workers.get(f"{action.namespace}/{action.name}")
    return (w.pool if w else None) or default


class Actuator:
    """Applies Plans to a cluster (or, in dry-run, only journals them)."""

    def __init__(
        self,
        cluster: WritableClusterPort,
        journal: Journal,
        dry_run: bool = False,
        fence: Callable[[], bool] | None = None,
    ) -> None:
        self.cluster = cluster
        self.journal = journal
        self.dry_run = dry_run
        self.fence = fence

    def execute(self, plan: Plan, state: ClusterState | None = None) -> list[ActionResult]:
        """Apply `plan.actions` in order, per-pool failure handling as the module says.

        `state` is the snapshot the plan was made from: it attributes actions to pools and feeds
        `evict_refused` (built from a fresh snapshot when absent and needed).
        """
        single = next(iter(plan.pools)) if len(plan.pools) == 1 else None
        results: list[ActionResult] = []
        stopped: dict[str, int] = {}  # pool → actions skipped after its failure
        for action in plan.actions:
            pool = single if single is not None else pool_of(action, state)
            if pool in stopped:
                stopped[pool] += 1
                results.append(ActionResult(action, pool, "skipped"))
                continue
            result = self._one(plan, action, pool)
            results.append(result)
            if result.status != "failed":
                continue
            stopped[pool] = 0
            if isinstance(action, EvictPod):
                if state is None:
                    state = ClusterState.build(self.cluster.snapshot())
                results += self._refused(plan, action, pool, result.error, state)
        for pool, skipped in stopped.items():
            if skipped:
                self.journal.record(
                    plan.now,
                    pool,
                    "action",
                    f"skipped {skipped} remaining action(s) of this step after the failure",
                    ok=False,
                )
        return results

    def _one(self, plan: Plan, action: Action, pool: str) -> ActionResult:
        kind: Literal["event", "action"] = "event" if isinstance(action, Event) else "action"
        text = describe(action)
        if self.dry_run:
            self.journal.record(plan.now, pool, kind, f"dry-run: {text}")
            return ActionResult(action, pool, "dry-run")
        if self.fence is not None and not self.fence():
            self.journal.record(plan.now, pool, "error", f"{text} not applied: not the leader", ok=False)
            return ActionResult(action, pool, "skipped", note="not the leader")
        try:
            self.cluster.apply(action)
        except NotLeader as err:
            self.journal.record(plan.now, pool, "error", f"{text} abandoned: {err}", ok=False)
            return ActionResult(action, pool, "skipped", error=str(err), note="not the leader")
        except ActionError as err:
            if err.status == 404 and isinstance(action, _POD_ACTIONS):
                self.journal.record(plan.now, pool, kind, f"{text} (pod already gone)")
                return ActionResult(action, pool, "applied", code=404, note="already gone")
            self.journal.record(plan.now, pool, "error", f"{text} failed ({err.status}): {err}", ok=False)
            return ActionResult(action, pool, "failed", error=str(err), code=err.status)
        self.journal.record(plan.now, pool, kind, text)
        return ActionResult(action, pool, "applied")

    def _refused(
        self, plan: Plan, action: EvictPod, pool: str, error: str, state: ClusterState
    ) -> list[ActionResult]:
        """D5: the refused step's plan is replaced by `evict_refused`'s."""
        key = f"{action.namespace}/{action.name}"
        res = plan.pools.get(pool)
        ev = res.defrag.evict if res is not None and res.defrag is not None else None
        if ev is not None and ev.pod == key:
            node = ev.node
        else:
            w = state.workers.get(key)
            node = (w.node if w else None) or ""
        self.journal.record(
            plan.now,
            pool,
            "defrag",
            f"eviction of {key} refused; node {node} goes on the evict-skip list and its drain stops",
            ok=False,
        )
        fallback = evict_refused(state, pool, node, key, error, plan.now)
        return self._sequence(plan, fallback.actions, pool)

    def _sequence(self, plan: Plan, actions: Iterable[Action], pool: str) -> list[ActionResult]:
        out: list[ActionResult] = []
        failed = False
        for action in actions:
            if failed:
                out.append(ActionResult(action, pool, "skipped"))
                continue
            result = self._one(plan, action, pool)
            out.append(result)
            failed = result.status == "failed"
        return out
