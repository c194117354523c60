"""Plans: what a decision wants done, the events it would emit, and why it left the rest alone.

Every engine decision returns these values instead of acting, so the console can preview, the daemon
can journal and `--dry-run` can stop short, all from the same output. `Plan.to_json()` is the
canonical form used by `--json` and by tests: same snapshot and `now` → byte-identical text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from tftui.model.jsontext import dumps_indented

EventType = Literal["Normal", "Warning"]
DefragState = Literal["disabled", "invalid", "not-due", "skip-missed", "blocked", "idle", "evict"]


def rfc3339(t: datetime) -> str:
    """Seconds precision in UTC with `Z`, as the controller writes timestamps."""
    if t.tzinfo is None:
        raise ValueError("naive datetime: engine times must be timezone-aware")
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- actions -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabelNode:
    node: str
    labels: dict[str, str | None]  # None removes the key (JSON merge patch null)
    kind: Literal["label-node"] = "label-node"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "node": self.node, "labels": dict(self.labels)}


@dataclass(frozen=True, slots=True)
class AnnotateNode:
    node: str
    annotations: dict[str, str | None]
    kind: Literal["annotate-node"] = "annotate-node"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "node": self.node, "annotations": dict(self.annotations)}


@dataclass(frozen=True, slots=True)
class LabelPod:
    namespace: str
    name: str
    labels: dict[str, str | None]
    kind: Literal["label-pod"] = "label-pod"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "labels": dict(self.labels),
        }


@dataclass(frozen=True, slots=True)
class AnnotatePod:
    namespace: str
    name: str
    annotations: dict[str, str | None]
    kind: Literal["annotate-pod"] = "annotate-pod"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "annotations": dict(self.annotations),
        }


@dataclass(frozen=True, slots=True)
class AnnotatePool:
    pool: str
    annotations: dict[str, str | None]
    kind: Literal["annotate-pool"] = "annotate-pool"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "pool": self.pool, "annotations": dict(self.annotations)}


@dataclass(frozen=True, slots=True)
class DeleteGPUNodeClaim:
    name: str
    kind: Literal["delete-gpunodeclaim"] = "delete-gpunodeclaim"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name}


@dataclass(frozen=True, slots=True)
class EvictPod:
    namespace: str
    name: str
    kind: Literal["evict-pod"] = "evict-pod"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name}


@dataclass(frozen=True, slots=True)
class PatchPoolStatus:
    pool: str
    fields: dict[str, Any]
    kind: Literal["patch-pool-status"] = "patch-pool-status"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "pool": self.pool, "fields": dict(self.fields)}


@dataclass(frozen=True, slots=True)
class PatchWorkloadStatus:
    """Merge patch of a TensorFusionWorkload's `status` (recommendation, cron rule, condition)."""

    namespace: str
    name: str
    fields: dict[str, Any]
    kind: Literal["patch-workload-status"] = "patch-workload-status"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "fields": dict(self.fields),
        }


@dataclass(frozen=True, slots=True)
class PatchWorkloadAutoscale:
    """Turn a TensorFusionWorkload's autoscaling on or off (the console's toggle, A1).

    A merge patch of `spec.autoScalingConfig.autoSetResources.enable` only: every other autoscale
    setting of the workload is kept. The pod-template equivalent is `tensor-fusion.ai/autoscale`.
    """

    namespace: str
    name: str
    enable: bool
    kind: Literal["patch-workload-autoscale"] = "patch-workload-autoscale"

    def patch(self) -> dict[str, Any]:
        """The JSON merge patch of the TensorFusionWorkload."""
        return {"spec": {"autoScalingConfig": {"autoSetResources": {"enable": self.enable}}}}

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "enable": self.enable,
        }


@dataclass(frozen=True, slots=True)
class Event:
    """A Kubernetes event on `object` (`GPUPool/<pool>`), with upstream's reason and message."""

    object: str
    type: EventType
    reason: str
    message: str
    kind: Literal["event"] = "event"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "object": self.object,
            "type": self.type,
            "reason": self.reason,
            "message": self.message,
        }


Action = (
    LabelNode
    | AnnotateNode
    | LabelPod
    | AnnotatePod
    | AnnotatePool
    | DeleteGPUNodeClaim
    | EvictPod
    | PatchPoolStatus
    | PatchWorkloadStatus
    | PatchWorkloadAutoscale
    | Event
)


def pool_event(pool: str, type_: EventType, reason: str, message: str) -> Event:
    return Event(f"GPUPool/{pool}", type_, reason, message)


# -- per-pool results ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Skip:
    """A node (or pod) the decision did not act on, with a stable kebab-case reason code."""

    node: str
    reason: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "reason": self.reason, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Release:
    node: str
    action: str  # "label-should-delete" | "delete-gpunodeclaim <name>"

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "action": self.action}


@dataclass(slots=True)
class CompactionResult:
    due: bool
    released: list[Release] = field(default_factory=list)
    kept: list[Skip] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "due": self.due,
            "released": [r.to_json() for r in self.released],
            "kept": [k.to_json() for k in self.kept],
        }


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    utilization: float  # share of the node's pool GPUs in use, 0-100

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "utilization": round(self.utilization, 2)}


@dataclass(frozen=True, slots=True)
class Eviction:
    pod: str  # "<ns>/<name>"
    node: str
    target: str  # the node the simulation placed it on

    def to_json(self) -> dict[str, Any]:
        return {"pod": self.pod, "node": self.node, "target": self.target}


@dataclass(slots=True)
class DefragResult:
    state: DefragState
    window: tuple[datetime, datetime] | None = None  # campaign start, deadline
    candidates: list[Candidate] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    evict: Eviction | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "window": {"start": rfc3339(self.window[0]), "deadline": rfc3339(self.window[1])}
            if self.window
            else None,
            "candidates": [c.to_json() for c in self.candidates],
            "skipped": [s.to_json() for s in self.skipped],
            "evict": self.evict.to_json() if self.evict else None,
        }


@dataclass(slots=True)
class PoolPlan:
    compaction: CompactionResult | None = None
    defrag: DefragResult | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.compaction is not None:
            out["compaction"] = self.compaction.to_json()
        if self.defrag is not None:
            out["defrag"] = self.defrag.to_json()
        return out


@dataclass(slots=True)
class Plan:
    now: datetime
    pools: dict[str, PoolPlan] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)

    def pool(self, name: str) -> PoolPlan:
        return self.pools.setdefault(name, PoolPlan())

    def events(self) -> list[Event]:
        return [a for a in self.actions if isinstance(a, Event)]

    def merge(self, other: Plan) -> None:
        """Fold another decision's plan for the same `now` into this one (actions keep order)."""
        for name, pp in other.pools.items():
            mine = self.pool(name)
            mine.compaction = pp.compaction if pp.compaction is not None else mine.compaction
            mine.defrag = pp.defrag if pp.defrag is not None else mine.defrag
        self.actions.extend(other.actions)

    def to_json(self) -> dict[str, Any]:
        return {
            "now": rfc3339(self.now),
            "pools": {name: self.pools[name].to_json() for name in sorted(self.pools)},
            "actions": [a.to_json() for a in self.actions],
        }

    def dumps(self) -> str:
        """Canonical text: stable key order, two-space indent, trailing newline."""
        return dumps_indented(self.to_json()) + "\n"
