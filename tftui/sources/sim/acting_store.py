"""The acting simulator's object store: the copy-on-write objects, their indexes and the timer queue.

The base of `ActingSimCluster` (acting.py): every other part reads and writes objects only through
these helpers, so a snapshot handed out is never mutated and every change marks what the status pass
must recompute.
"""

from __future__ import annotations

import copy
import heapq
import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from random import Random
from typing import Any

from tftui.engine.state import ClusterState
from tftui.model.provider import ProviderCatalog
from tftui.sources.ports import ActionError
from tftui.sources.sim.acting_objects import (
    _ALPHABET,
    JSON,
    Key,
    _is_pending_worker,
    _key,
    _merge_patch,
    _merged,
    _PodIndex,
)
from tftui.sources.sim.cluster import generate_objects
from tftui.sources.sim.demo_layout import DEFAULT_NOW, as_utc


class _ActingStore:
    """The object store and clock state every part of the acting simulator works on."""

    def __init__(
        self,
        seed: int = 7,
        nodes: int = 40,
        now: datetime | None = None,
        *,
        gpus_per_node: int | None = None,
        workers: int | None = None,
        objects: Iterable[dict[str, Any]] | None = None,
    ) -> None:
        self.seed = seed
        self.start = as_utc(now or DEFAULT_NOW).replace(microsecond=0)
        self._now = self.start
        if objects is None:
            objects = generate_objects(seed, nodes, self.start, gpus_per_node=gpus_per_node, workers=workers)
        self._objs: dict[Key, JSON] = {_key(o): o for o in objects}
        # position of each key in `_objs` (a replaced object keeps its place, a new key goes last)
        self._order: dict[Key, int] = {k: i for i, k in enumerate(self._objs)}
        self._next_order = len(self._order)
        # the keys of each kind, in `_objs` order: the passes over one kind never walk the others
        self._by_kind: dict[str, dict[Key, None]] = {}
        for k in self._objs:
            self._by_kind.setdefault(k[0], {})[k] = None
        self._ns_pods: dict[str, dict[Key, None]] = {}  # namespace → its pods' keys, in `_objs` order
        for k in self._by_kind.get("Pod", ()):
            self._ns_pods.setdefault(k[1], {})[k] = None
        self._owned: set[Key] = set()  # copied since the last snapshot: safe to mutate in place
        self._dirty = False  # statuses need recomputing
        # incremental status pass (`_refresh`): only the statuses whose inputs changed since the
        # last pass are recomputed: the GPUs and GPUNodes the changed pods touch (or whose pool's
        # oversubscription changed), the workloads and PDBs they count in. Any change to a GPU,
        # GPUNode or PDB object makes the next pass a full one.
        self._touched: set[Key] = set()  # objects changed since the last pass
        self._hw_changed = True
        self._full_wanted = False  # `recompute_statuses`: a full pass, whatever changed
        self._node_cache: dict[str, tuple[tuple[int, int, int], dict[str, int]]] = {}  # → (oversub, sums)
        # the pools' sums of the last pass, with the GPUNode keys and their pools it was summed over
        self._pool_memo: tuple[list[Key], list[str | None], dict[str, dict[str, int]]] | None = None
        # each workload's spec and metadata as the last pass saw them (the dicts: a change replaces
        # them, so the same dicts mean a status-only change, which no PDB's status reads)
        self._wl_parts: dict[Key, tuple[object, object]] = {}
        self._pods = _PodIndex()
        self._catalog_key: tuple[int, ...] | None = None
        self._catalog_value = ProviderCatalog()
        self._cache: list[JSON] | None = None
        self._rng = Random(f"tftui-acting-{seed}")
        # the scheduler's queue: Pending workers; new ones are tried at once, all of them again only
        # after something may have freed room (a pod gone, a patch), so applying stays cheap
        self._pending: dict[Key, None] = {k: None for k, o in self._objs.items() if _is_pending_worker(k, o)}
        self._untried: set[Key] = set(self._pending)
        self._refused: dict[Key, str] = {}  # Pending worker → why the scheduler's last pass refused it
        self._retry_all = False
        self._batching = 0  # inside `ActingSimCluster.batch()`: no scheduler pass per action
        self._timers: list[tuple[datetime, int, str, tuple[str, ...]]] = []
        self._seq = 0
        self._events: list[JSON] = []
        # each event identity → the number of its latest event (its index in `_events` plus
        # `_events_dropped`, the events trimmed from the front so far: a trim renumbers nothing)
        self._series: dict[tuple[str, str, str, str, str], int] = {}
        self._events_dropped = 0
        self._event_seq = 0
        self._lock = threading.RLock()
        self.generation = 0  # bumped on every change: cheap "did anything happen?" for readers
        self._last_state: ClusterState | None = None  # the last state built (`_build_state`)
        # each kind's objects as the last state got them, until one of that kind is replaced
        self._kind_lists: dict[str, list[JSON]] = {}
        self._kinds_changed: set[str] = set()
        # what changed since the last state was built, handed to the next one (`DeltaSnapshot`):
        # each key changed → its object in that state's snapshot and its `_order` then (None: it
        # had none), the keys deleted meanwhile, and for every kind list its objects' `_order`
        # (ascending) and the same by id of the object (positions that keep the list's order)
        self._base: dict[Key, tuple[JSON | None, int | None]] = {}
        self._base_deleted: set[Key] = set()
        self._kind_ords: dict[str, list[int]] = {}
        self._kind_pos: dict[str, dict[int, int]] = {}

    # -- store helpers ------------------------------------------------------------------------------

    def _get(self, key: Key) -> JSON:
        obj = self._objs.get(key)
        if obj is None:
            kind, ns, name = key
            where = f" in namespace {ns}" if ns else ""
            raise ActionError(f'{kind} "{name}"{where} not found', 404)
        return obj

    def _record(self, key: Key) -> None:
        """Note `key`'s object as the last state has it, before its first change since that state."""
        if key not in self._base:
            self._base[key] = (self._objs.get(key), self._order.get(key))

    def _changed(self, key: Key | None = None) -> None:
        if key is not None:
            self._touched.add(key)
            self._kinds_changed.add(key[0])
            if key[0] in ("GPU", "GPUNode", "PodDisruptionBudget"):
                self._hw_changed = True
        self._dirty = True
        self._cache = None
        self.generation += 1

    def _mut(self, key: Key) -> JSON:
        """The object for in-place change: copied first if a snapshot may hold it."""
        obj = self._get(key)
        if key not in self._owned:
            self._record(key)
            obj = copy.deepcopy(obj)
            self._objs[key] = obj
            self._owned.add(key)
        self._changed(key)
        return obj

    def _mut_merge(self, key: Key, patch: Mapping[str, Any]) -> None:
        """JSON merge patch of `key`'s object: in place if owned, else a copy of only the dicts the
        patch reaches (`_merged`; the rest stays shared with the snapshots, so the object stays
        not owned and a later `_mut` copies it whole). The same object as `_merge_patch(_mut(key))`:
        an autoscale tick patches hundreds of pods' annotations, and a deep copy of each cost more
        than the rest of the tick's writes."""
        if key in self._owned:
            _merge_patch(self._mut(key), patch)
            return
        obj = self._get(key)
        self._record(key)
        self._objs[key] = _merged(obj, patch)
        self._changed(key)

    def _add(self, obj: JSON) -> None:
        key = _key(obj)
        self._record(key)
        if key not in self._objs:
            self._order[key] = self._next_order
            self._next_order += 1
        self._objs[key] = obj
        self._by_kind.setdefault(key[0], {})[key] = None
        if key[0] == "Pod":
            self._ns_pods.setdefault(key[1], {})[key] = None
        self._owned.add(key)
        if _is_pending_worker(key, obj):
            self._pending[key] = None
            self._untried.add(key)
        self._changed(key)

    def _delete(self, key: Key) -> None:
        if key in self._objs:
            self._record(key)
            self._base_deleted.add(key)
        if self._objs.pop(key, None) is not None:
            self._by_kind[key[0]].pop(key, None)
            self._order.pop(key, None)
            if key[0] == "Pod":
                self._ns_pods[key[1]].pop(key, None)
            self._owned.discard(key)
            self._pending.pop(key, None)
            self._untried.discard(key)
            if key[0] == "Pod":
                self._retry_all = True  # its GPUs are free now
            self._changed(key)

    def _keys(self, kind: str) -> list[Key]:
        """The keys of one kind, in `_objs` order (a copy: safe to change the store meanwhile)."""
        return list(self._by_kind.get(kind, ()))

    def _at(self, t: datetime, kind: str, *args: str) -> None:
        self._seq += 1
        heapq.heappush(self._timers, (t, self._seq, kind, args))

    def _uid(self) -> str:
        h = f"{self._rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"

    def _suffix(self) -> str:
        return "".join(self._rng.choice(_ALPHABET) for _ in range(5))
