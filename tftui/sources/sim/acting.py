"""The embedded cluster that acts: the demo objects plus a clock, an API server and its controllers.

`ActingSimCluster` is the `WritableClusterPort` behind `tftui --demo`. The runtime's Plans are carried
out on an in-memory copy of the generated objects, and the cluster answers the way a real one would,
in simulated time, so a night of defrag and compaction can be watched (or tested) in seconds:

- **Patches**: labels and annotations of Node, Pod and GPUPool, and GPUPool and TensorFusionWorkload
  `status`, are JSON merge patches (`None` removes a key); an unknown object is
  `ActionError(..., 404)`. Autoscale's in-place resize (a worker's `tflops-*`/`vram-*` annotations)
  changes its GPUs' `available` and the node and pool figures at the next read, and a smaller request
  lets Pending workers try again.
- **GPUNodeClaim deletion**: the claim gets a `deletionTimestamp` and its Node is cordoned (Karpenter
  taints a node it disrupts; a terminated VM goes NotReady); after the provisioner's delay
  (`Provisioned` 3 min, `Karpenter` 1 min) claim, Node, GPUNode and GPUs are gone.
- **Cluster autoscaler**: a Node labelled `should-delete=true` (AutoSelect release) is removed 10 min
  later, once nothing runs on it (it is checked again every 10 min until then).
- **Eviction API** (policy/v1): a pod covered by a PDB with `status.disruptionsAllowed <= 0` is refused
  with 429, by two PDBs with 500; otherwise it gets a `deletionTimestamp` and is gone after its 30 s
  grace period. Pending pods bypass PDBs, as in Kubernetes.
- **Workload controller**: as soon as a worker is terminating or deleted, its TensorFusionWorkload gets
  a replacement (`<workload>-tf-worker-<5 chars>`, same labels and annotations minus `gpu-ids` and
  defrag markers), created Pending.
- **Scheduler**: Pending workers are placed with `engine.placement.place` in their pool's placement
  mode (binding sets `spec.nodeName` and `gpu-ids`); a worker becomes Ready 21 s after binding. What
  does not fit stays Pending with a `PodScheduled=False` condition and is retried whenever capacity
  is freed.
- **Events**: recorded events.k8s.io/v1-style at the simulated time; a repeat (same object, type,
  reason and note) within 5 min bumps `series.count` of the existing event.

Statuses (GPU `available`/`runningApps`, GPUNode, GPUPool and TensorFusionCluster capacity blocks,
TensorFusionWorkload worker counts, PDB health) are recomputed from the pods, with the generator's
arithmetic, before the next read after a change — so the console's figures, `ClusterState` and the
objects always agree. The pass is incremental (only what the pods changed since the last pass reach;
`recompute_statuses()` forces a full one, with the same result).

Objects handed out by `snapshot()` are never mutated afterwards (copy-on-write): a `ClusterState` built
from an earlier snapshot stays self-consistent while the cluster moves on. Nothing happens between
calls: `advance(dt)` runs what came due in time order (ties in creation order), and every random
choice (names, UIDs) comes from an RNG seeded by `seed`, so a run is reproducible.

Workers are placed with kube-scheduler's node fit too (CPU, memory, pod slots: `engine.nodefit`).
Limitations: pods that are not TensorFusion workers are never scheduled (bound ones run); the
cluster autoscaler does not drain nodes; pods that are not TensorFusion workers are not recreated
when their node goes; `SimMetrics(..., follow=sim)` follows the cluster (its clock, and a re-index
when the running workers change; a few milliseconds for the 40-node demo): history of a replacement
starts at its creation, evicted pods lose theirs. `SimMetrics` derives usage from the requests it
was built with, so a rebuild after autoscale
resized workers makes their usage follow the new requests (keep the first one to hold demand fixed).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

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
)
from tftui.model import keys
from tftui.sources.ports import ActionError
from tftui.sources.sim.acting_objects import (
    _REQUEST_KEYS,
    AUTOSCALER_DELAY,
    EVENT_SERIES_WINDOW,
    EVICTION_GRACE,
    MAX_EVENTS,
    PROVISIONER_DELAY,
    READY_AFTER,
    Key,
    _merge_patch,
    _meta,
    _micro,
    _patch_changes,
    _ts,
)
from tftui.sources.sim.acting_schedule import _ActingScheduler
from tftui.sources.sim.demo_layout import as_utc

__all__ = [
    "AUTOSCALER_DELAY",
    "EVENT_SERIES_WINDOW",
    "EVICTION_GRACE",
    "PROVISIONER_DELAY",
    "READY_AFTER",
    "ActingSimCluster",
]


class ActingSimCluster(_ActingScheduler):
    """`WritableClusterPort` over the demo objects, with a simulated clock (see the module docstring).

    Same constructor as `SimCluster` (plus `objects`, to start from a given object list instead of the
    generated demo). `now()` is the start time plus simulated elapsed time; `clock` is that method, for
    the console's header and the runtime. Thread-safe: the console reads while the runtime acts.
    """

    # -- the port ----------------------------------------------------------------------------------

    def describe(self) -> str:
        """Always `demo`: the header shows the embedded cluster."""
        return "demo"

    def snapshot(self) -> list[dict[str, Any]]:
        """Current objects, statuses up to date; the dicts are never mutated later (treat as read-only)."""
        with self._lock:
            if self._dirty:
                self._refresh()
            if self._cache is None:
                self._cache = list(self._objs.values())
            self._owned.clear()
            return list(self._cache)

    def recompute_statuses(self) -> None:
        """Recompute every derived status from scratch at the next read (the status pass is
        otherwise incremental); the result is the same either way."""
        with self._lock:
            self._hw_changed = True
            self._full_wanted = True  # not the shortcut for deleted nodes either
            self._changed()

    def events(self) -> list[dict[str, Any]]:
        """Recorded events, oldest first (copies)."""
        with self._lock:
            return copy.deepcopy(self._events)

    def apply(self, action: Action) -> None:
        """Carry out one Plan action at `now()`; raises ActionError (404 unknown, 429 PDB, 500)."""
        with self._lock:
            self._apply(action)
            if not self._batching:
                self._schedule_pending()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Apply several actions as one batch: no scheduler pass after each `apply` inside, one when
        the batch ends (an autoscale tick patches hundreds of pods' requests, and each patch made
        the next pass try every Pending worker again, on a state re-derived for it). The clock does
        not move inside, so the Pending workers are still placed at the same instant, seeing the
        room the whole batch left."""
        with self._lock:
            self._batching += 1
            try:
                yield
            finally:
                self._batching -= 1
                if not self._batching:
                    self._schedule_pending()

    # -- the clock ---------------------------------------------------------------------------------

    def now(self) -> datetime:
        """Start time plus simulated elapsed time."""
        with self._lock:
            return self._now

    @property
    def clock(self) -> Callable[[], datetime]:
        """`now` as a callable, for `TfTuiApp(clock=...)` and `Runtime(clock=...)`."""
        return self.now

    def elapsed(self) -> timedelta:
        with self._lock:
            return self._now - self.start

    def next_due(self) -> datetime | None:
        """When the next simulated controller action happens (None: nothing pending)."""
        with self._lock:
            return self._timers[0][0] if self._timers else None

    def advance(self, dt: timedelta) -> None:
        """Move the clock by `dt`, running every deletion, replacement and node removal that comes due."""
        if dt < timedelta(0):
            raise ValueError("the simulated clock cannot go backwards")
        with self._lock:
            self._run_until(self._now + dt)

    def advance_to(self, t: datetime) -> None:
        """Move the clock to `t` (no-op if `t` is not in the future)."""
        with self._lock:
            self._run_until(max(self._now, as_utc(t)))

    # -- generic patch (console writes that are not Plan actions, e.g. the placement mode) ------------

    def patch(self, kind: str, name: str, patch: Mapping[str, Any], namespace: str = "") -> None:
        """JSON merge patch of any object (e.g. a SchedulingConfigTemplate's `spec.placement.mode`)."""
        with self._lock:
            key = (kind, namespace, name)
            obj = self._get(key)
            if _patch_changes(obj, patch):
                _merge_patch(self._mut(key), patch)
                self._retry_all = True  # e.g. an uncordoned node
                self._schedule_pending()

    # -- actions ------------------------------------------------------------------------------------

    def _apply(self, action: Action) -> None:
        if isinstance(action, LabelNode):
            self._patch_meta(("Node", "", action.node), "labels", action.labels)
            if action.labels.get(keys.SHOULD_DELETE) == keys.TRUE:
                self._at(self._now + AUTOSCALER_DELAY, "autoscaler", action.node)
        elif isinstance(action, AnnotateNode):
            self._patch_meta(("Node", "", action.node), "annotations", action.annotations)
        elif isinstance(action, LabelPod):
            self._patch_meta(("Pod", action.namespace, action.name), "labels", action.labels)
        elif isinstance(action, AnnotatePod):
            self._patch_meta(("Pod", action.namespace, action.name), "annotations", action.annotations)
            if any(k in _REQUEST_KEYS for k in action.annotations):
                self._retry_all = True  # a smaller request frees room for Pending workers
        elif isinstance(action, AnnotatePool):
            self._patch_meta(("GPUPool", "", action.pool), "annotations", action.annotations)
        elif isinstance(action, PatchPoolStatus):
            key: Key = ("GPUPool", "", action.pool)
            if _patch_changes(self._get(key).get("status") or {}, action.fields):
                pool = self._mut(key)
                _merge_patch(pool.setdefault("status", {}), action.fields)
        elif isinstance(action, PatchWorkloadStatus):
            wkey: Key = ("TensorFusionWorkload", action.namespace, action.name)
            if _patch_changes(self._get(wkey).get("status") or {}, action.fields):
                self._mut_merge(wkey, {"status": action.fields})
        elif isinstance(action, PatchWorkloadAutoscale):
            akey: Key = ("TensorFusionWorkload", action.namespace, action.name)
            patch = action.patch()
            if _patch_changes(self._get(akey), patch):
                _merge_patch(self._mut(akey), patch)
        elif isinstance(action, DeleteGPUNodeClaim):
            self._delete_claim(action.name)
        elif isinstance(action, EvictPod):
            self._evict(action.namespace, action.name)
        elif isinstance(action, Event):
            self._record_event(action)
        else:  # pragma: no cover - the Action union is closed
            raise ActionError(f"unsupported action {action!r}", 400)

    def _patch_meta(self, key: Key, field: str, patch: Mapping[str, str | None]) -> None:
        current = _meta(self._get(key)).get(field) or {}
        if not _patch_changes(current, patch):
            return
        self._mut_merge(key, {"metadata": {field: patch}})
        meta = self._objs[key]["metadata"]  # this change's own copy (or the owned object)
        if not meta[field]:
            del meta[field]

    def _record_event(self, ev: Event) -> None:
        kind, _, name = ev.object.partition("/")
        ident = (kind, name, ev.type, ev.reason, ev.message)
        idx = self._series.get(ident)
        if idx is not None:
            idx -= self._events_dropped
            old = self._events[idx]
            last = (old.get("series") or {}).get("lastObservedTime") or old["eventTime"]
            if self._now - datetime.fromisoformat(last) <= EVENT_SERIES_WINDOW:
                count = (old.get("series") or {}).get("count", 1) + 1
                self._events[idx] = {**old, "series": {"count": count, "lastObservedTime": _micro(self._now)}}
                return
        self._event_seq += 1
        self._events.append(
            {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{name}.{self._event_seq:08x}",
                    "namespace": "default",
                    "creationTimestamp": _ts(self._now),
                },
                "eventTime": _micro(self._now),
                "reportingController": "tftui",
                "reportingInstance": "tftui-demo",
                "action": ev.reason,
                "reason": ev.reason,
                "regarding": {"kind": kind, "name": name},
                "note": ev.message,
                "type": ev.type,
            }
        )
        self._series[ident] = self._events_dropped + len(self._events) - 1
        if len(self._events) > MAX_EVENTS:
            self._trim_events(len(self._events) - MAX_EVENTS)
        self.generation += 1

    def _trim_events(self, n: int) -> None:
        """Drop the `n` oldest events, and the identities whose latest event they were (no event of
        those is left). Per trimmed event, not per kept one: at the cap, every new event trims one."""
        for i, e in enumerate(self._events[:n], start=self._events_dropped):
            ident = (e["regarding"]["kind"], e["regarding"]["name"], e["type"], e["reason"], e["note"])
            if self._series.get(ident) == i:
                del self._series[ident]
        del self._events[:n]
        self._events_dropped += n
