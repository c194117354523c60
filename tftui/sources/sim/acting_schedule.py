"""The acting simulator's scheduler and timers: binding Pending workers, and what comes due in time.

The scheduler places with the engine's placement and node fit; the timers fire the delayed effects
of the writes (acting_writes.py), so this part sits above them.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable
from datetime import datetime

from tftui.engine import incremental, quota
from tftui.engine.fit import Request, RequestError
from tftui.engine.nodefit import node_fit, pod_requests
from tftui.engine.placement import apply_placement, place
from tftui.engine.snapdelta import DeltaSnapshot, KindDelta
from tftui.engine.state import ClusterState, PartitionUse, Res
from tftui.model import keys
from tftui.model.dump import KINDS, Snapshot
from tftui.sources.sim.acting_objects import (
    _ENDED,
    AUTOSCALER_DELAY,
    JSON,
    READY_AFTER,
    Key,
    _labels,
    _meta,
    _ts,
)
from tftui.sources.sim.acting_writes import _ActingWrites


class _ActingScheduler(_ActingWrites):
    """The simulated scheduler and the timer queue's effects, in time order."""

    def _schedule_pending(self) -> None:
        """The simulated scheduler: bind Pending workers, oldest first, in their pool's placement mode."""
        todo = list(self._pending) if self._retry_all else [k for k in self._pending if k in self._untried]
        self._retry_all = False
        self._untried.clear()
        if not todo:
            return
        todo.sort(key=lambda k: (_meta(self._objs[k]).get("creationTimestamp", ""), k))
        state = self._build_state(list(self._objs.values()))
        available: dict[str, Res] = {}
        counts: dict[str, int] = {}
        room = node_fit(state)  # CPU, memory and pod slots, with this pass's bindings booked
        assumed: dict[str, list[PartitionUse]] = {}  # partitions and quota booked in this pass
        quota_used = quota.usage_copy(state)
        for key in todo:
            worker = state.workers.get(f"{key[1]}/{key[2]}")
            if worker is None:  # pragma: no cover - every Pending worker is indexed
                continue
            pool = worker.pool or ""
            if pool not in state.pools:
                self._unschedulable(key, f"GPUPool {pool!r} not found")
                continue
            try:
                request = Request.of_worker(worker)
            except RequestError as err:
                self._unschedulable(key, f"invalid request: {err}")
                continue
            pod = pod_requests(self._objs[key])
            placement = place(
                state,
                pool,
                request,
                available=available,
                worker_counts=counts,
                pod=pod,
                fit=room,
                assumed=assumed,
                quota_used=quota_used,
            )
            if placement.node is None:
                self._unschedulable(key, placement.reason or "no node fits")
                continue
            apply_placement(
                available,
                state,
                placement,
                request,
                assumed=assumed,
                quota_used=quota_used,
                worker=worker.key,
            )
            room.book(placement.node, pod)
            counts[placement.node] = counts.get(placement.node, len(state.nodes[placement.node].workers)) + 1
            self._bind(key, placement.node, placement.gpus, placement.partition)

    def _build_state(self, objects: list[JSON]) -> ClusterState:
        """`ClusterState` of `objects` (the current `_objs`, in order), derived from the last one
        built here: copy-on-write hands the same dict for every object that did not change, so only
        the changes are re-indexed — and the store hands along which those are (`DeltaSnapshot`),
        so finding them costs what changed, not a comparison of every object."""
        prev = self._last_state
        changed, self._base = self._base, {}
        deleted, self._base_deleted = self._base_deleted, set()
        snap: Snapshot | list[JSON] = objects
        if all(kind in KINDS for kind in self._by_kind):  # grouped from the kind index, not per object
            per_kind: dict[str, dict[Key, tuple[JSON | None, int | None]]] = {}
            for key, old in changed.items():
                per_kind.setdefault(key[0], {})[key] = old
            delta: dict[str, KindDelta | None] = {}
            for kind in self._kinds_changed | per_kind.keys():
                delta[kind] = self._relist(kind, per_kind.get(kind, {}), deleted)
            self._kinds_changed.clear()
            lists = self._kind_lists
            for kind, ks in self._by_kind.items():
                if kind not in lists:
                    self._list_kind(kind, ks)
            base = prev.snapshot if prev is not None else None
            kinds = {k: v for k, v in lists.items() if v}
            snap = DeltaSnapshot(objects, kinds, base=base, changed=delta)
        else:
            self._kind_lists.clear()  # the changes were not followed: every kind is listed afresh
        state = ClusterState.build(snap) if prev is None else incremental.update_state(prev, snap)
        if isinstance(snap, DeltaSnapshot):
            snap.take(None)  # a full build kept it: drop the change set (and the previous snapshot)
        self._last_state = state
        self._owned.clear()  # the state holds these dicts now: copy before changing them
        return state

    def _list_kind(self, kind: str, ks: Iterable[Key]) -> list[JSON]:
        keys_ = list(ks)
        objs = self._kind_lists[kind] = list(map(self._objs.__getitem__, keys_))
        ords = self._kind_ords[kind] = list(map(self._order.__getitem__, keys_))
        self._kind_pos[kind] = dict(zip(map(id, objs), ords, strict=True))
        return objs

    def _relist(
        self, kind: str, olds: dict[Key, tuple[JSON | None, int | None]], deleted: set[Key]
    ) -> KindDelta | None:
        """The new list of `kind` (in `_kind_lists`) and its `KindDelta`, from the objects the last
        state had for the changed keys (`olds`), patched into a copy of its list: O(changed) but
        for the copies. Positions are the keys' `_order` (gaps where keys went: only their order
        is read). None when that cannot be told by key (the list is rebuilt, the state compares)."""
        base, ords0, pos0 = (
            self._kind_lists.pop(kind, None),
            self._kind_ords.get(kind),
            self._kind_pos.get(kind),
        )
        ks = self._by_kind.get(kind, {})
        if base is None or ords0 is None or pos0 is None or not olds:
            self._list_kind(kind, ks)
            return None
        objs, ords, pos = list(base), list(ords0), dict(pos0)
        added: list[JSON] = []
        removed: list[JSON] = []
        new_keys: list[Key] = []
        for key, (old, order) in olds.items():
            cur = self._objs.get(key)
            if key in deleted and cur is not None:  # deleted and added again: it went last
                self._list_kind(kind, ks)  # (rare) the state compares, and checks the order
                return None
            if old is cur:
                continue
            if old is not None:
                i = bisect.bisect_left(ords, order) if order is not None else len(ords)
                if i == len(ords) or ords[i] != order or objs[i] is not old:
                    self._list_kind(kind, ks)  # the record does not match the last state: compare
                    return None
                removed.append(old)
                del pos[id(old)]
                if cur is None:
                    del objs[i], ords[i]
                else:
                    objs[i] = cur
                    pos[id(cur)] = ords[i]
            if cur is not None:
                added.append(cur)
                if old is None:
                    new_keys.append(key)
        for key in sorted(new_keys, key=self._order.__getitem__):  # new keys come last, in order
            cur = self._objs[key]
            objs.append(cur)
            ords.append(self._order[key])
            pos[id(cur)] = ords[-1]
        if len(objs) != len(ks):  # the records missed a change: list afresh
            self._list_kind(kind, ks)
            return None
        self._kind_lists[kind], self._kind_ords[kind], self._kind_pos[kind] = objs, ords, pos
        return added, removed, pos if added or removed else {}  # never changed later: shared

    def _unschedulable(self, key: Key, reason: str) -> None:
        self._refused[key] = reason
        cond = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": f"0/{len(self._by_kind.get('Node', ()))} nodes are available: {reason}",
        }
        current = ((self._objs[key].get("status") or {}).get("conditions") or [{}])[0]
        if all(current.get(k) == v for k, v in cond.items()):
            return
        pod = self._mut(key)
        cond["lastTransitionTime"] = _ts(self._now)
        pod["status"]["conditions"] = [cond]

    def _bind(self, key: Key, node: str, gpus: Iterable[str], partition: str = "") -> None:
        self._pending.pop(key, None)
        self._refused.pop(key, None)
        pod = self._mut(key)
        pod["spec"]["nodeName"] = node
        ann = pod["metadata"].setdefault("annotations", {})
        ann[keys.GPU_IDS] = ",".join(gpus)
        if partition:  # the scheduler writes the template it matched at bind time
            ann[keys.PARTITION_ID] = partition
        now = _ts(self._now)
        pod["status"] = {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "False", "lastTransitionTime": now},
                {"type": "Ready", "status": "False", "lastTransitionTime": now},
            ],
            "startTime": now,
            "qosClass": pod.get("status", {}).get("qosClass", "Burstable"),
        }
        self._at(self._now + READY_AFTER, "pod-ready", key[1], key[2], str(pod["metadata"].get("uid", "")))

    # -- timers -------------------------------------------------------------------------------------

    def _run_until(self, target: datetime) -> None:
        while self._timers and self._timers[0][0] <= target:
            t, _, kind, args = heapq.heappop(self._timers)
            self._now = max(self._now, t)
            self._fire(kind, args)
            self._schedule_pending()
        self._now = target

    def _fire(self, kind: str, args: tuple[str, ...]) -> None:
        if kind == "pod-gone":
            ns, name, uid = args
            pod = self._objs.get(("Pod", ns, name))
            if pod is not None and str(_meta(pod).get("uid", "")) == uid:
                self._delete_pod(("Pod", ns, name))
        elif kind == "pod-ready":
            ns, name, uid = args
            key: Key = ("Pod", ns, name)
            pod = self._objs.get(key)
            if pod is None or str(_meta(pod).get("uid", "")) != uid or _meta(pod).get("deletionTimestamp"):
                return
            now = _ts(self._now)
            for cond in self._mut(key)["status"]["conditions"]:
                if cond["type"] in ("Ready", "ContainersReady"):
                    cond["status"] = "True"
                    cond["lastTransitionTime"] = now
        elif kind == "claim-gone":
            (name,) = args
            claim = self._objs.get(("GPUNodeClaim", "", name))
            if claim is None:
                return
            for node in self._claim_nodes(claim):
                self._remove_node(node)
            self._delete(("GPUNodeClaim", "", name))
        elif kind == "autoscaler":
            (node,) = args
            obj = self._objs.get(("Node", "", node))
            if obj is None or _labels(obj).get(keys.SHOULD_DELETE) != keys.TRUE:
                return
            busy = any(
                (p.get("spec") or {}).get("nodeName") == node
                and not _meta(p).get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") not in _ENDED
                for p in (self._objs[k] for k in self._by_kind.get("Pod", ()))
            )
            if busy:
                self._at(self._now + AUTOSCALER_DELAY, "autoscaler", node)
            else:
                self._remove_node(node)
