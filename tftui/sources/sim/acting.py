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
import functools
import heapq
import math
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from random import Random
from typing import Any, Final

from tftui.engine import incremental, quota
from tftui.engine.fit import Request, RequestError
from tftui.engine.nodefit import node_fit, pod_requests
from tftui.engine.partitions import mig_start
from tftui.engine.placement import apply_placement, place
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
from tftui.engine.state import ClusterState, PartitionUse, Res
from tftui.model import keys
from tftui.model.dump import KINDS, Snapshot
from tftui.model.provider import PartitionTemplate, ProviderCatalog
from tftui.model.quantity import QuantityError, parse_quantity
from tftui.model.selectors import selector_matches
from tftui.sources.ports import ActionError
from tftui.sources.sim.cluster import (
    DEFAULT_NOW,
    as_utc,
    capacity_status,
    format_bytes,
    format_tflops,
    generate_objects,
)

__all__ = [
    "AUTOSCALER_DELAY",
    "EVENT_SERIES_WINDOW",
    "EVICTION_GRACE",
    "PROVISIONER_DELAY",
    "READY_AFTER",
    "ActingSimCluster",
]

JSON = dict[str, Any]
Key = tuple[str, str, str]  # kind, namespace ("" for cluster-scoped), name

EVICTION_GRACE: Final = timedelta(seconds=30)  # terminationGracePeriodSeconds default
READY_AFTER: Final = timedelta(seconds=21)  # image pulled, worker started, readiness probe passed
PROVISIONER_DELAY: Final = {"Karpenter": timedelta(minutes=1), "Provisioned": timedelta(minutes=3)}
AUTOSCALER_DELAY: Final = timedelta(minutes=10)  # cluster-autoscaler scale-down-unneeded-time
EVENT_SERIES_WINDOW: Final = timedelta(minutes=5)  # client-go's event series window
MAX_EVENTS: Final = 5000

_ENDED: Final = frozenset({"Succeeded", "Failed"})
_REQUEST_KEYS: Final = frozenset(
    {
        keys.TFLOPS_REQUEST,
        keys.TFLOPS_LIMIT,
        keys.VRAM_REQUEST,
        keys.VRAM_LIMIT,
        keys.COMPUTE_PERCENT_REQUEST,
        keys.COMPUTE_PERCENT_LIMIT,
    }
)
_DEFRAG_POD_KEYS: Final = (keys.DEFRAG_EVICTED, keys.DEFRAG_EVICTED_POOL, keys.DEFRAG_EVICTED_SINCE)
_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generateName alphabet
_PDB_REFUSAL: Final = "Cannot evict pod as it would violate the pod's disruption budget."
_MULTI_PDB: Final = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)
_DEFAULT_OVERSUB: Final = (500, 50, 70)  # CRD defaults: tflopsOversellRatio, vramExpandToHostMem/Disk
_SUM_FIELDS: Final = (
    "nodes", "gpus", "total_t", "total_v", "avail_t", "avail_v", "virt_t", "virt_v", "vavail_t", "vavail_v", "pods",
)  # fmt: skip


def _ts(t: datetime) -> str:
    """RFC 3339 seconds with `Z`, as the API server writes metadata times."""
    return as_utc(t).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro(t: datetime) -> str:
    """MicroTime (events.k8s.io `eventTime`)."""
    return as_utc(t).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", ""))


def _meta(obj: Mapping[str, Any]) -> JSON:
    meta: JSON = obj.get("metadata") or {}
    return meta


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = _meta(obj).get("labels") or {}
    return labels


def _annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    ann: dict[str, str] = _meta(obj).get("annotations") or {}
    return ann


@functools.lru_cache(maxsize=4096)
def _milli(raw: str) -> int:
    """Milli-units of a quantity string; unparsable → 0 (status math must never raise)."""
    try:
        return parse_quantity(raw).milli_value()
    except (QuantityError, TypeError, ValueError):
        return 0


@functools.lru_cache(maxsize=4096)
def _units(raw: str) -> int:
    try:
        return parse_quantity(raw).value()
    except (QuantityError, TypeError, ValueError):
        return 0


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _merge_patch(target: JSON, patch: Mapping[str, Any]) -> None:
    """RFC 7386 JSON merge patch in place: `None` deletes, objects merge, anything else replaces."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, Mapping) and isinstance(target.get(k), dict):
            _merge_patch(target[k], v)
        elif isinstance(v, Mapping):
            target[k] = {}
            _merge_patch(target[k], v)
        else:
            target[k] = copy.deepcopy(v)


def _patch_changes(current: Mapping[str, Any], patch: Mapping[str, Any]) -> bool:
    """Would the merge patch change `current`? (No-op patches leave the object untouched.)"""
    for k, v in patch.items():
        if v is None:
            if k in current:
                return True
        elif isinstance(v, Mapping) and isinstance(current.get(k), dict):
            if _patch_changes(current[k], v):
                return True
        elif current.get(k) != v:
            return True
    return False


def _selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """policy/v1: `{}` selects every pod."""
    return selector_matches(selector, labels, empty_matches_all=True)


def _is_pending_worker(key: Key, obj: Mapping[str, Any]) -> bool:
    """A worker the scheduler still has to place."""
    return (
        key[0] == "Pod"
        and _is_worker(obj)
        and not (obj.get("spec") or {}).get("nodeName")
        and not _meta(obj).get("deletionTimestamp")
        and (obj.get("status") or {}).get("phase", "Pending") == "Pending"
    )


def _ready(pod: Mapping[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _is_worker(pod: Mapping[str, Any]) -> bool:
    return _labels(pod).get(keys.COMPONENT) == keys.COMPONENT_WORKER


def _controller(pod: Mapping[str, Any]) -> JSON | None:
    for ref in _meta(pod).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "TensorFusionWorkload":
            return dict(ref)
    return None


def _scaled(value: Any, total: int, round_up: bool) -> int:
    """A PDB's `minAvailable`/`maxUnavailable`: an int, or a percentage of the expected pods."""
    if isinstance(value, str) and value.endswith("%"):
        try:
            pct = int(value[:-1])
        except ValueError:
            return 0
        x = pct * total / 100
        return math.ceil(x) if round_up else math.floor(x)
    return _int(value, 0)


class _GpuAcc:
    """Per-GPU accumulator of one status pass (integers: milli-TFLOPS and bytes)."""

    __slots__ = ("apps", "avail_t", "avail_v", "cap_t", "cap_v", "parts", "pods")

    def __init__(self, cap_t: int, cap_v: int) -> None:
        self.cap_t = cap_t
        self.cap_v = cap_v
        self.avail_t = cap_t
        self.avail_v = cap_v
        self.apps: dict[tuple[str, str], list[JSON]] = {}
        self.pods: list[JSON] = []
        self.parts: list[tuple[str, str, str, str]] = []  # (pod uid, name, namespace, template)


class _PodRec:
    """What the status pass reads from one pod, kept between passes."""

    __slots__ = ("counted", "gpus", "labels", "nodes", "owner", "ready", "workload")

    def __init__(self, pod: JSON, gpu_node: Mapping[str, str | None]) -> None:
        meta = _meta(pod)
        self.labels: dict[str, str] = dict(meta.get("labels") or {})
        self.workload: str = self.labels.get(keys.WORKLOAD, "")
        self.owner = str((_controller(pod) or {}).get("name", ""))  # the TensorFusionWorkload a PDB counts
        self.ready = _ready(pod)
        live_worker = _is_worker(pod) and (pod.get("status") or {}).get("phase") not in _ENDED
        self.counted = live_worker and not meta.get("deletionTimestamp")
        ids = [g for g in (_annotations(pod).get(keys.GPU_IDS) or "").split(",") if g] if live_worker else []
        self.gpus = tuple(g for g in ids if g in gpu_node)
        nodes: set[str | None] = {gpu_node[g] for g in self.gpus}
        if ids:
            nodes.add((pod.get("spec") or {}).get("nodeName") or None)
        self.nodes = frozenset(nodes)  # the nodes whose GPU/GPUNode statuses it is accounted on


class _PodIndex:
    """The status pass's indexes of pods (kept between passes, updated for the changed pods) and
    of GPUs and PDBs (rebuilt by a full pass: any GPU, GPUNode or PDB change triggers one)."""

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self.recs: dict[Key, _PodRec] = {}
        self.on_node: dict[str | None, set[Key]] = {}  # node → live workers accounted on it
        self.by_workload: dict[tuple[str, str], set[Key]] = {}  # (ns, workload label) → counted
        self.by_owner: dict[tuple[str, str], set[Key]] = {}  # (ns, controller workload) → pods
        self.by_label: dict[tuple[str, str, str], set[Key]] = {}  # (ns, key, value) a PDB selects on
        self.by_ns: dict[str, set[Key]] = {}
        self.gpu_node: dict[str, str | None] = {}
        self.pool_of: dict[str, str | None] = {}  # GPUNode → its pool
        self.gpus_of: dict[str | None, list[str]] = {}  # node → its GPUs, in object order
        self.pdb_pairs: dict[tuple[str, str, str], list[Key]] = {}  # every matchLabels pair → PDBs
        self.pdb_scan: dict[str, list[Key]] = {}  # namespace → PDBs without matchLabels
        self.wanted: dict[str, set[str]] = {}  # namespace → label keys its PDBs' matchLabels name

    def reset(self, objs: Mapping[Key, JSON], by_kind: Mapping[str, Mapping[Key, None]]) -> None:
        self._clear()
        for k in by_kind.get("GPUNode", ()):
            self.pool_of[k[2]] = _pool_of_gpunode(objs[k])
        for k in by_kind.get("GPU", ()):
            status = objs[k].get("status") or {}
            node = (status.get("nodeSelector") or {}).get(keys.HOSTNAME) or None
            self.gpu_node[k[2]] = node
            self.gpus_of.setdefault(node, []).append(k[2])
        for k in by_kind.get("PodDisruptionBudget", ()):
            selector = (objs[k].get("spec") or {}).get("selector")
            ml = selector.get("matchLabels") if isinstance(selector, dict) else None
            if isinstance(ml, dict) and ml:
                self.wanted.setdefault(k[1], set()).update(str(lk) for lk in ml)
                for lk, lv in ml.items():
                    self.pdb_pairs.setdefault((k[1], str(lk), str(lv)), []).append(k)
            else:
                self.pdb_scan.setdefault(k[1], []).append(k)

    def drop(self, key: Key) -> _PodRec | None:
        rec = self.recs.pop(key, None)
        if rec is None:
            return None
        for n in rec.nodes:
            self.on_node[n].discard(key)
        if rec.counted:
            self.by_workload[(key[1], rec.workload)].discard(key)
        self.by_owner[(key[1], rec.owner)].discard(key)
        for lk in self.wanted.get(key[1], ()):
            if lk in rec.labels:
                self.by_label[(key[1], lk, rec.labels[lk])].discard(key)
        self.by_ns[key[1]].discard(key)
        return rec

    def add(self, key: Key, pod: JSON | None) -> _PodRec | None:
        if pod is None:
            return None
        rec = self.recs[key] = _PodRec(pod, self.gpu_node)
        for n in rec.nodes:
            self.on_node.setdefault(n, set()).add(key)
        if rec.counted:
            self.by_workload.setdefault((key[1], rec.workload), set()).add(key)
        self.by_owner.setdefault((key[1], rec.owner), set()).add(key)
        for lk in self.wanted.get(key[1], ()):
            if lk in rec.labels:
                self.by_label.setdefault((key[1], lk, rec.labels[lk]), set()).add(key)
        self.by_ns.setdefault(key[1], set()).add(key)
        return rec

    def pdbs_selecting(self, ns: str, labels: Mapping[str, str]) -> list[Key]:
        """The PDBs that might select a pod with these labels (a superset)."""
        out = list(self.pdb_scan.get(ns, ()))
        for lk, lv in labels.items():
            out += self.pdb_pairs.get((ns, lk, lv), ())
        return out

    def candidates(self, pdb: JSON, ns: str) -> set[Key]:
        """The pods a PDB's selector can match: those with its rarest `matchLabels` pair, else the
        namespace's (a superset the selector then filters; a status does not depend on order)."""
        selector = (pdb.get("spec") or {}).get("selector")
        ml = selector.get("matchLabels") if isinstance(selector, dict) else None
        if isinstance(ml, dict) and ml:
            return min((self.by_label.get((ns, str(k), str(v)), set()) for k, v in ml.items()), key=len)
        return self.by_ns.get(ns, set())

    def workload_counts(self, ns: str, name: str) -> tuple[int, int]:
        """(live workers, ready ones) carrying the workload label."""
        keys_ = self.by_workload.get((ns, name), set())
        return len(keys_), sum(self.recs[k].ready for k in keys_)


class ActingSimCluster:
    """`WritableClusterPort` over the demo objects, with a simulated clock (see the module docstring).

    Same constructor as `SimCluster` (plus `objects`, to start from a given object list instead of the
    generated demo). `now()` is the start time plus simulated elapsed time; `clock` is that method, for
    the console's header and the runtime. Thread-safe: the console reads while the runtime acts.
    """

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
        self._node_cache: dict[str, tuple[tuple[int, int, int], dict[str, int]]] = {}  # → (oversub, sums)
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
        self._timers: list[tuple[datetime, int, str, tuple[str, ...]]] = []
        self._seq = 0
        self._events: list[JSON] = []
        self._series: dict[tuple[str, str, str, str, str], int] = {}  # → index in _events
        self._event_seq = 0
        self._lock = threading.RLock()
        self.generation = 0  # bumped on every change: cheap "did anything happen?" for readers
        self._last_state: ClusterState | None = None  # the last state built (`_build_state`)
        # each kind's objects as the last state got them, until one of that kind is replaced
        self._kind_lists: dict[str, list[JSON]] = {}
        self._kinds_changed: set[str] = set()

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
            self._changed()

    def events(self) -> list[dict[str, Any]]:
        """Recorded events, oldest first (copies)."""
        with self._lock:
            return copy.deepcopy(self._events)

    def apply(self, action: Action) -> None:
        """Carry out one Plan action at `now()`; raises ActionError (404 unknown, 429 PDB, 500)."""
        with self._lock:
            self._apply(action)
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

    # -- store helpers ------------------------------------------------------------------------------

    def _get(self, key: Key) -> JSON:
        obj = self._objs.get(key)
        if obj is None:
            kind, ns, name = key
            where = f" in namespace {ns}" if ns else ""
            raise ActionError(f'{kind} "{name}"{where} not found', 404)
        return obj

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
            obj = copy.deepcopy(obj)
            self._objs[key] = obj
            self._owned.add(key)
        self._changed(key)
        return obj

    def _add(self, obj: JSON) -> None:
        key = _key(obj)
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
                wl = self._mut(wkey)
                _merge_patch(wl.setdefault("status", {}), action.fields)
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
        meta = self._mut(key).setdefault("metadata", {})
        target = meta.setdefault(field, {})
        _merge_patch(target, patch)
        if not target:
            del meta[field]

    def _record_event(self, ev: Event) -> None:
        kind, _, name = ev.object.partition("/")
        ident = (kind, name, ev.type, ev.reason, ev.message)
        idx = self._series.get(ident)
        if idx is not None:
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
        if len(self._events) > MAX_EVENTS:
            del self._events[: len(self._events) - MAX_EVENTS]
            self._series = {
                (e["regarding"]["kind"], e["regarding"]["name"], e["type"], e["reason"], e["note"]): i
                for i, e in enumerate(self._events)
            }
        else:
            self._series[ident] = len(self._events) - 1
        self.generation += 1

    # -- GPUNodeClaims and node removal ---------------------------------------------------------------

    def _claim_nodes(self, claim: JSON) -> list[str]:
        name = _meta(claim).get("name", "")
        nodes = {n for n in [(claim.get("spec") or {}).get("nodeName")] if n}
        for k in self._keys("Node") + self._keys("GPUNode"):
            if _labels(self._objs[k]).get(keys.NODE_PROVISIONER) == name:
                nodes.add(k[2])
        return sorted(nodes)

    def _delete_claim(self, name: str) -> None:
        key: Key = ("GPUNodeClaim", "", name)
        claim = self._get(key)
        if _meta(claim).get("deletionTimestamp"):
            return
        pool = self._objs.get(("GPUPool", "", _labels(claim).get(keys.MANAGED_BY, "")))
        mode = (((pool or {}).get("spec") or {}).get("nodeManagerConfig") or {}).get("provisioningMode")
        delay = PROVISIONER_DELAY.get(str(mode), PROVISIONER_DELAY["Provisioned"])
        meta = self._mut(key)["metadata"]
        meta["deletionTimestamp"] = _ts(self._now)
        meta.setdefault("finalizers", [f"{keys.DOMAIN}/finalizer"])
        taint = "karpenter.sh/disrupted" if mode == "Karpenter" else "node.kubernetes.io/unreachable"
        for node in self._claim_nodes(claim):
            self._cordon(node, taint)
        self._at(self._now + delay, "claim-gone", name)

    def _cordon(self, node: str, taint: str) -> None:
        key: Key = ("Node", "", node)
        if key not in self._objs:
            return
        spec = self._mut(key).setdefault("spec", {})
        spec["unschedulable"] = True
        taints = spec.setdefault("taints", [])
        if not any(t.get("key") == taint for t in taints):
            taints.append({"key": taint, "effect": "NoSchedule", "timeAdded": _ts(self._now)})

    def _remove_node(self, node: str) -> None:
        """The machine is gone: its pods, Node, GPUNode and GPUs disappear (workers get replacements)."""
        objs = self._objs
        for k in [k for k in self._keys("Pod") if (objs[k].get("spec") or {}).get("nodeName") == node]:
            self._delete_pod(k)
        for k in self._keys("GPU"):
            if ((objs[k].get("status") or {}).get("nodeSelector") or {}).get(keys.HOSTNAME) == node:
                self._delete(k)
        self._delete(("GPUNode", "", node))
        self._delete(("Node", "", node))

    # -- pods: eviction, deletion, replacement, scheduling ---------------------------------------------

    def _covering_pdbs(self, pod: JSON) -> list[JSON]:
        ns, labels = _meta(pod).get("namespace", ""), _labels(pod)
        pdbs = (self._objs[k] for k in self._keys("PodDisruptionBudget") if k[1] == ns)
        return [p for p in pdbs if _selector_matches((p.get("spec") or {}).get("selector"), labels)]

    def _refresh_pdbs(self, namespace: str, pdbs: list[JSON]) -> list[JSON]:
        """Bring these PDBs' statuses up to date (as the status pass would), returning them as now
        stored: an eviction reads only its own budgets, so it need not recompute every status."""
        pods = [self._objs[k] for k in self._ns_pods.get(namespace, ())]
        ready = {id(p): _ready(p) for p in pods}
        out = []
        for pdb in pdbs:
            key = _key(pdb)
            self._pdb_status(key, pods, ready)
            out.append(self._objs[key])
        return out

    def _evict(self, namespace: str, name: str) -> None:
        key: Key = ("Pod", namespace, name)
        pod = self._get(key)
        if _meta(pod).get("deletionTimestamp"):
            return  # already going: the Eviction API accepts it again
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        if phase not in ("Pending", *_ENDED):  # Kubernetes lets Pending and finished pods go unchecked
            pdbs = self._covering_pdbs(pod)
            if self._dirty and pdbs:  # the budget must reflect every earlier eviction
                pdbs = self._refresh_pdbs(namespace, pdbs)
            if len(pdbs) > 1:
                raise ActionError(f'pods "{name}" in namespace {namespace}: {_MULTI_PDB}', 500)
            if pdbs:
                pdb = pdbs[0]
                st = pdb.get("status") or {}
                if _int(st.get("disruptionsAllowed"), 0) <= 0:
                    raise ActionError(
                        f'pods "{name}" in namespace {namespace}: the disruption budget '
                        f"{_meta(pdb).get('name')} needs {_int(st.get('desiredHealthy'), 0)} healthy pods "
                        f"and has {_int(st.get('currentHealthy'), 0)} currently. {_PDB_REFUSAL}",
                        429,
                    )
        self._terminate(key, EVICTION_GRACE, "EvictionByEvictionAPI", "Eviction API: evicting")

    def _terminate(self, key: Key, grace: timedelta, reason: str, message: str) -> None:
        pod = self._mut(key)
        self._pending.pop(key, None)
        self._untried.discard(key)
        meta = pod["metadata"]
        meta["deletionTimestamp"] = _ts(self._now + grace)
        meta["deletionGracePeriodSeconds"] = int(grace.total_seconds())
        status = pod.setdefault("status", {})
        status.setdefault("conditions", []).append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": reason,
                "message": message,
                "lastTransitionTime": _ts(self._now),
            }
        )
        self._at(self._now + grace, "pod-gone", key[1], key[2], str(meta.get("uid", "")))
        self._replace(pod)

    def _delete_pod(self, key: Key) -> None:
        pod = self._objs.get(key)
        if pod is None:
            return
        self._delete(key)
        if not _meta(pod).get("deletionTimestamp"):
            self._replace(pod)  # never marked terminating: the controller notices it now

    def _replace(self, template: JSON) -> None:
        """TensorFusionWorkload controller: keep `spec.replicas` non-terminating workers."""
        owner = _controller(template)
        meta = _meta(template)
        ns = str(meta.get("namespace", ""))
        if owner is None or not _is_worker(template):
            return
        wl = self._objs.get(("TensorFusionWorkload", ns, str(owner.get("name", ""))))
        if wl is None:
            return
        wl_name = _meta(wl)["name"]
        replicas = _int((wl.get("spec") or {}).get("replicas"), 1)
        active = [
            p
            for p in (self._objs[k] for k in self._ns_pods.get(ns, ()))
            if _labels(p).get(keys.WORKLOAD) == wl_name and not _meta(p).get("deletionTimestamp")
        ]
        for _ in range(replicas - len(active)):
            name = f"{wl_name}-tf-worker-{self._suffix()}"
            while ("Pod", ns, name) in self._objs:  # a name no pod of the namespace has
                name = f"{wl_name}-tf-worker-{self._suffix()}"
            self._add(self._new_worker(template, name))

    def _new_worker(self, template: JSON, name: str) -> JSON:
        meta = _meta(template)
        labels = {k: v for k, v in _labels(template).items() if k not in _DEFRAG_POD_KEYS}
        ann = {
            k: v for k, v in _annotations(template).items() if k != keys.GPU_IDS and k not in _DEFRAG_POD_KEYS
        }
        spec = copy.deepcopy(template.get("spec") or {})
        spec.pop("nodeName", None)
        created = _ts(self._now)
        new_meta: JSON = {
            "name": name,
            "generateName": name[:-5],
            "namespace": meta.get("namespace", ""),
            "uid": self._uid(),
            "creationTimestamp": created,
            "labels": labels,
            "annotations": ann,
        }
        for field in ("ownerReferences", "finalizers"):
            if meta.get(field):
                new_meta[field] = copy.deepcopy(meta[field])
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": new_meta,
            "spec": spec,
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "lastTransitionTime": created}],
                "qosClass": (template.get("status") or {}).get("qosClass", "Burstable"),
            },
        }

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
        the changes are re-indexed."""
        snap: Snapshot | list[JSON] = objects
        if all(kind in KINDS for kind in self._by_kind):  # grouped from the kind index, not per object
            lists = self._kind_lists
            for kind in self._kinds_changed:
                lists.pop(kind, None)
            self._kinds_changed.clear()
            for kind, ks in self._by_kind.items():
                if kind not in lists:
                    lists[kind] = list(map(self._objs.__getitem__, ks))
            snap = Snapshot(objects, {k: v for k, v in lists.items() if v})
        prev = self._last_state
        state = ClusterState.build(snap) if prev is None else incremental.update_state(prev, snap)
        self._last_state = state
        self._owned.clear()  # the state holds these dicts now: copy before changing them
        return state

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

    # -- statuses -------------------------------------------------------------------------------------

    def _set_status(self, key: Key, status: JSON) -> None:
        """Replace an object's status if it changed, without touching objects a snapshot holds."""
        obj = self._objs[key]
        if obj.get("status") == status:
            return
        if key in self._owned:
            obj["status"] = status
        else:
            self._objs[key] = {**obj, "status": status}  # shares metadata/spec, so stays un-owned
            self._kinds_changed.add(key[0])

    def _refresh(self) -> None:
        """Recompute the derived statuses from the pods.

        A full pass re-indexes every pod; otherwise only the pods changed since the last pass are
        re-indexed (`_PodIndex`) and only the statuses they reach are recomputed: GPUs and GPUNodes
        of the nodes they touch (before or after the change) or whose pool's oversubscription
        changed, the workloads they count in, the PDBs whose selectors they carry (and those of a
        changed workload's pods: a PDB counts their replicas). The result is the same as a full pass."""
        self._dirty = False
        self._cache = None
        full = self._hw_changed
        self._hw_changed = False
        touched, self._touched = self._touched, set()
        objs = self._objs
        idx = self._pods
        nodes: set[str | None] = {None}  # GPUs on no node: always recomputed
        if full:
            self._node_cache.clear()
            idx.reset(objs, self._by_kind)
            pods = self._by_kind.get("Pod", {})
            nodes.update(idx.gpus_of)
        else:
            pods = {k: None for k in touched if k[0] == "Pod"}
        workloads: set[tuple[str, str]] = set()
        pdbs: set[Key] = set()
        owners: set[tuple[str, str]] = set()  # workloads whose pods' PDBs need a look
        for k in pods:
            old = idx.drop(k)
            new = idx.add(k, objs.get(k))
            for rec in (old, new):
                if rec is not None:
                    nodes.update(rec.nodes)
                    if rec.counted:
                        workloads.add((k[1], rec.workload))
                    pdbs.update(idx.pdbs_selecting(k[1], rec.labels))
        for k in touched:
            if k[0] == "TensorFusionWorkload":
                workloads.add((k[1], k[2]))
                owners.add((k[1], k[2]))
        by_kind = self._by_kind
        oversub: dict[str, tuple[int, int, int]] = {}
        for k in by_kind.get("GPUPool", ()):
            over = ((objs[k].get("spec") or {}).get("capacityConfig") or {}).get("oversubscription") or {}
            oversub[k[2]] = (
                _int(over.get("tflopsOversellRatio"), _DEFAULT_OVERSUB[0]),
                _int(over.get("vramExpandToHostMem"), _DEFAULT_OVERSUB[1]),
                _int(over.get("vramExpandToHostDisk"), _DEFAULT_OVERSUB[2]),
            )
        pool_of = idx.pool_of
        for k in by_kind.get("GPUNode", ()):
            pool = pool_of[k[2]]
            cached = self._node_cache.get(k[2])
            if full or cached is None or cached[0] != oversub.get(pool or "", _DEFAULT_OVERSUB):
                nodes.add(k[2])
        gpus: dict[str, _GpuAcc] = {}
        for n in nodes:
            for g in idx.gpus_of.get(n, ()):
                status = objs[("GPU", "", g)].get("status") or {}
                cap = status.get("capacity") or {}
                gpus[g] = _GpuAcc(_milli(str(cap.get("tflops", "0"))), _units(str(cap.get("vram", "0"))))
        node_lim: dict[str, list[int]] = {}
        node_pods: dict[str, int] = {}
        accounted: set[Key] = set()
        for n in nodes:
            accounted.update(idx.on_node.get(n, ()))
        for k in sorted(accounted, key=self._order.__getitem__):
            for g in idx.recs[k].gpus:  # a worker may name GPUs of a clean node too
                if g not in gpus:
                    status = objs[("GPU", "", g)].get("status") or {}
                    cap = status.get("capacity") or {}
                    gpus[g] = _GpuAcc(_milli(str(cap.get("tflops", "0"))), _units(str(cap.get("vram", "0"))))
            self._account_worker(k, objs[k], gpus, node_lim, node_pods)
        for n in nodes:
            for g in idx.gpus_of.get(n, ()):
                self._gpu_status(("GPU", "", g), gpus[g])
        pool_sums = self._node_statuses(by_kind, gpus, node_lim, node_pods, nodes, oversub, pool_of)
        self._pool_statuses(by_kind, pool_sums)
        wl_keys = by_kind.get("TensorFusionWorkload", {})
        for ns, name in [(k[1], k[2]) for k in wl_keys] if full else workloads:
            k = ("TensorFusionWorkload", ns, name)
            if k not in objs:
                continue
            count, ready = idx.workload_counts(ns, name)
            old_status = objs[k].get("status") or {}
            replicas = _int((objs[k].get("spec") or {}).get("replicas"), count)
            phase = "Running" if ready >= replicas else "Pending"
            self._set_status(k, {**old_status, "workerCount": count, "readyWorkers": ready, "phase": phase})
        pdb_keys = by_kind.get("PodDisruptionBudget", {})
        if not full:  # a PDB counts the replicas of its pods' workloads
            for ns, name in owners:
                for p in idx.by_owner.get((ns, name), ()):
                    pdbs.update(idx.pdbs_selecting(ns, idx.recs[p].labels))
        for k in pdb_keys if full else pdbs:
            if k in objs:
                cands = idx.candidates(objs[k], k[1])
                self._pdb_status(k, [objs[p] for p in cands], {id(objs[p]): idx.recs[p].ready for p in cands})

    def _account_worker(
        self,
        key: Key,
        pod: JSON,
        gpus: dict[str, _GpuAcc],
        node_lim: dict[str, list[int]],
        node_pods: dict[str, int],
    ) -> None:
        ann = _annotations(pod)
        ids = [g for g in (ann.get(keys.GPU_IDS) or "").split(",") if g]
        wl = _labels(pod).get(keys.WORKLOAD, "")
        if not ids:
            return
        first = gpus.get(ids[0])
        req_t = self._tflops(ann, keys.TFLOPS_REQUEST, keys.COMPUTE_PERCENT_REQUEST, first)
        lim_t = self._tflops(ann, keys.TFLOPS_LIMIT, keys.COMPUTE_PERCENT_LIMIT, first)
        req_v = _units(ann.get(keys.VRAM_REQUEST) or "0")
        lim_v = _units(ann.get(keys.VRAM_LIMIT) or "0")
        info = {
            "name": key[2],
            "namespace": key[1],
            "uid": _meta(pod).get("uid", ""),
            "qos": ann.get(keys.QOS) or "medium",
            "requests": {"tflops": format_tflops(req_t), "vram": format_bytes(req_v)},
            "limits": {"tflops": format_tflops(lim_t), "vram": format_bytes(lim_v)},
        }
        isolation = ann.get(keys.ISOLATION) or ""
        partition = (ann.get(keys.PARTITION_ID) or "") if isolation == "partitioned" else ""
        for gid in ids:
            acc = gpus.get(gid)
            if acc is None:
                continue
            take_t, take_v = req_t, req_v
            if isolation == "shared":  # a shared worker holds its whole GPU
                take_t, take_v = acc.cap_t, acc.cap_v
            elif partition and (template := self._template(gid, partition)) is not None:
                t, v = template.resources(acc.cap_t / 1000)
                take_t, take_v = round(t * 1000), int(v)
            acc.avail_t -= take_t
            acc.avail_v -= take_v
            acc.apps.setdefault((key[1], wl), []).append(info)
            acc.pods.append(info)
            if partition:
                acc.parts.append((str(_meta(pod).get("uid", "")), key[2], key[1], partition))
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            lim = node_lim.setdefault(node, [0, 0])
            lim[0] += lim_t
            lim[1] += lim_v
            node_pods[node] = node_pods.get(node, 0) + 1

    def _catalog(self) -> ProviderCatalog:
        """The ProviderConfigs' catalogue, rebuilt when one of them changed."""
        objs = [self._objs[k] for k in self._by_kind.get("ProviderConfig", ())]
        ident = tuple(map(id, objs))
        if self._catalog_key != ident:
            self._catalog_key, self._catalog_value = ident, ProviderCatalog.of(objs)
        return self._catalog_value

    def _template(self, gpu: str, partition: str) -> PartitionTemplate | None:
        model = ((self._objs.get(("GPU", "", gpu)) or {}).get("status") or {}).get("gpuModel") or ""
        hw = self._catalog().model(model)
        return hw.template(partition) if hw is not None else None

    @staticmethod
    def _tflops(ann: Mapping[str, str], tflops_key: str, pct_key: str, gpu: _GpuAcc | None) -> int:
        """Milli-TFLOPS per device; a compute percentage is truncated to whole TFLOPS (upstream)."""
        if ann.get(tflops_key):
            return _milli(ann[tflops_key])
        if ann.get(pct_key) and gpu is not None:
            return math.trunc(_milli(ann[pct_key]) * gpu.cap_t / 100_000_000) * 1000
        return 0

    def _gpu_status(self, key: Key, acc: _GpuAcc) -> None:
        old = self._objs[key].get("status") or {}
        status = dict(old)
        status["available"] = {"tflops": format_tflops(acc.avail_t), "vram": format_bytes(acc.avail_v)}
        status["runningApps"] = [
            {"name": wl, "namespace": ns, "count": len(pods), "pods": pods}
            for (ns, wl), pods in acc.apps.items()
        ]
        if acc.parts or old.get("allocatedPartitions"):
            status["allocatedPartitions"] = self._partitions(
                key[2], old.get("allocatedPartitions") or {}, acc
            )
        self._set_status(key, status)

    def _partitions(self, gpu: str, old: Mapping[str, JSON], acc: _GpuAcc) -> dict[str, JSON]:
        """`status.allocatedPartitions` as the allocator keeps it: one entry per partitioned pod, its
        MIG slot kept where it was recorded, a new one at the first free start of its template."""
        model = ((self._objs.get(("GPU", "", gpu)) or {}).get("status") or {}).get("gpuModel") or ""
        hw = self._catalog().model(model)
        out: dict[str, JSON] = {}
        uses: list[PartitionUse] = []
        for uid, name, ns, tid in acc.parts:
            prev = old.get(uid)
            if prev is not None:
                out[uid] = dict(prev)
                start, end = prev.get("allocatedSlotStart"), prev.get("allocatedSlotEnd")
                slot = (start, end) if isinstance(start, int) and isinstance(end, int) else None
                uses.append(PartitionUse(f"{ns}/{name}", tid, slot))
        for uid, name, ns, tid in acc.parts:
            if uid in out:
                continue
            entry: JSON = {"templateId": tid, "podUid": uid, "podName": name, "namespace": ns,
                           "allocatedAt": _ts(self._now)}  # fmt: skip
            t = hw.template(tid) if hw is not None else None
            if hw is not None and t is not None and t.placement_limit and t.placement_offset:
                start = mig_start(hw, t, uses)
                if start is not None:
                    entry["allocatedSlotStart"], entry["allocatedSlotEnd"] = start, start + t.placement_offset
                    uses.append(PartitionUse(f"{ns}/{name}", tid, (start, start + t.placement_offset)))
            out[uid] = entry
        return out

    def _node_statuses(
        self,
        by_kind: dict[str, dict[Key, None]],
        gpus: dict[str, _GpuAcc],
        node_lim: dict[str, list[int]],
        node_pods: dict[str, int],
        dirty: set[str | None],
        oversub: dict[str, tuple[int, int, int]],
        pool_of: dict[str, str | None],
    ) -> dict[str, dict[str, int]]:
        """Recompute the dirty GPUNodes' statuses; every pool's sums (clean nodes' from the cache)."""
        pool_sums: dict[str, dict[str, int]] = {}
        for k in by_kind.get("GPUNode", ()):
            name = k[2]
            pool = pool_of[name]
            over = oversub.get(pool or "", _DEFAULT_OVERSUB)
            if name in dirty:
                names = self._pods.gpus_of.get(name, [])
                sums = self._node_status(k, names, over, gpus, node_lim, node_pods)
                self._node_cache[name] = (over, sums)
            else:
                sums = self._node_cache[name][1]
            if pool is not None:
                acc = pool_sums.setdefault(pool, dict.fromkeys(sums, 0))
                for f, v in sums.items():
                    acc[f] += v
        return pool_sums

    def _node_status(
        self,
        k: Key,
        names: list[str],
        over: tuple[int, int, int],
        gpus: dict[str, _GpuAcc],
        node_lim: dict[str, list[int]],
        node_pods: dict[str, int],
    ) -> dict[str, int]:
        """Set one GPUNode's status from its GPUs and pods; returns its sums for the pool."""
        gn = self._objs[k]
        name = k[2]
        accs = [gpus[g] for g in names]
        total_t, total_v = sum(a.cap_t for a in accs), sum(a.cap_v for a in accs)
        old = gn.get("status") or {}
        info = old.get("nodeInfo") or {}
        ratio, mem, disk = over
        virt_t = total_t * ratio // 100
        ram_b, disk_b = _int_str(info.get("ramSize")), _int_str(info.get("dataDiskSize"))
        virt_v = total_v + ram_b * mem // 100 + disk_b * disk // 100
        lim_t, lim_v = node_lim.get(name, [0, 0])
        sums = {
            "nodes": 1,
            "gpus": len(names),
            "total_t": total_t,
            "total_v": total_v,
            "avail_t": sum(a.avail_t for a in accs),
            "avail_v": sum(a.avail_v for a in accs),
            "virt_t": virt_t,
            "virt_v": virt_v,
            "vavail_t": virt_t - lim_t,
            "vavail_v": virt_v - lim_v,
            "pods": node_pods.get(name, 0),
        }
        status = dict(old)
        status.update(capacity_status(sums))
        status["totalGPUs"] = status["managedGPUs"] = len(names)
        status["managedGPUDeviceIDs"] = list(names)
        status["totalGPUPods"] = sums["pods"]
        status["allocatedPods"] = {g: list(gpus[g].pods) for g in names if gpus[g].pods}
        self._set_status(k, status)
        return sums

    def _pool_statuses(
        self, by_kind: dict[str, dict[Key, None]], pool_sums: dict[str, dict[str, int]]
    ) -> None:
        grand: dict[str, int] = {}
        for k in by_kind.get("GPUPool", []):
            sums = pool_sums.get(k[2]) or dict.fromkeys(_SUM_FIELDS, 0)
            status = dict(self._objs[k].get("status") or {})
            status.update(capacity_status(sums))
            status["totalNodes"] = status["readyNodes"] = sums["nodes"]
            status["notReadyNodes"] = 0
            status["totalGPUs"] = sums["gpus"]
            status["runningAppsCnt"] = sums["pods"]
            self._set_status(k, status)
            for f, v in sums.items():
                grand[f] = grand.get(f, 0) + v
        for k in by_kind.get("TensorFusionCluster", []):
            status = dict(self._objs[k].get("status") or {})
            if grand:
                status.update(capacity_status(grand))
            status["totalNodes"] = grand.get("nodes", 0)
            status["totalGPUs"] = grand.get("gpus", 0)
            self._set_status(k, status)

    def _pdb_status(self, key: Key, pods: list[JSON], ready: Mapping[int, bool]) -> None:
        pdb = self._objs[key]
        spec = pdb.get("spec") or {}
        selector = spec.get("selector")
        matched = [p for p in pods if _selector_matches(selector, _labels(p))]
        healthy = sum(
            1
            for p in matched
            if not _meta(p).get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") == "Running"
            and ready[id(p)]
        )
        owners: dict[str, int] = {}
        uncontrolled = 0
        for p in matched:
            ref = _controller(p)
            wl = self._objs.get(("TensorFusionWorkload", key[1], str((ref or {}).get("name", ""))))
            if wl is None:
                uncontrolled += not _meta(p).get("deletionTimestamp")
            else:
                owners[_meta(wl)["name"]] = _int((wl.get("spec") or {}).get("replicas"), 1)
        expected = sum(owners.values()) + uncontrolled
        if "minAvailable" in spec:
            desired = _scaled(spec["minAvailable"], expected, round_up=True)
        else:
            desired = max(0, expected - _scaled(spec.get("maxUnavailable", 0), expected, round_up=True))
        allowed = max(0, healthy - desired)
        old = pdb.get("status") or {}
        status = dict(old)
        status.update(
            {
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "expectedPods": expected,
                "disruptionsAllowed": allowed,
            }
        )
        cond = {
            "type": "DisruptionAllowed",
            "status": "True" if allowed else "False",
            "reason": "SufficientPods" if allowed else "InsufficientPods",
        }
        prev = next((c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None)
        if prev is None or prev.get("status") != cond["status"]:
            status["conditions"] = [{**cond, "lastTransitionTime": _ts(self._now)}]
        self._set_status(key, status)


def _int_str(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _pool_of_gpunode(gn: Mapping[str, Any]) -> str | None:
    """As `ClusterState`: the `pool-<name>=true` label first, else `managed-by`."""
    labels = _labels(gn)
    for k, v in labels.items():
        if k.startswith(keys.POOL_LABEL_PREFIX) and v == keys.TRUE:
            return k[len(keys.POOL_LABEL_PREFIX) :]
    return labels.get(keys.MANAGED_BY)
