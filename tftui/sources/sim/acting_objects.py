"""The acting simulator's vocabulary: its timings, the object helpers and the pod and GPU indexes.

Shared by every part of `ActingSimCluster` (the store, the status pass, the writes and the scheduler),
so it lives below all of them.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from tftui.model import keys
from tftui.model.quantity import QuantityError, parse_quantity
from tftui.sources.sim.demo_layout import as_utc

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


def _merged(current: Mapping[str, Any], patch: Mapping[str, Any]) -> JSON:
    """`_merge_patch` of a deep copy of `current`, copying only the dicts on the patch's paths: the
    same value (and key order), and everything the patch does not reach is shared with `current`.
    The result must not be changed in place (the store treats it as not owned, see `_mut_merge`)."""
    out = dict(current)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merged(out[k], v)
        elif isinstance(v, Mapping):
            out[k] = {}
            _merge_patch(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


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

    __slots__ = ("counted", "gpus", "health", "labels", "nodes", "owner", "ready", "workload")

    def __init__(self, pod: JSON, gpu_node: Mapping[str, str | None]) -> None:
        meta = _meta(pod)
        self.labels: dict[str, str] = dict(meta.get("labels") or {})
        self.workload: str = self.labels.get(keys.WORKLOAD, "")
        self.owner = str((_controller(pod) or {}).get("name", ""))  # the TensorFusionWorkload a PDB counts
        self.ready = _ready(pod)
        # what else a PDB's status reads of it: its phase and whether it is being deleted
        self.health = ((pod.get("status") or {}).get("phase"), bool(meta.get("deletionTimestamp")))
        live_worker = _is_worker(pod) and (pod.get("status") or {}).get("phase") not in _ENDED
        self.counted = live_worker and not meta.get("deletionTimestamp")
        ids = [g for g in (_annotations(pod).get(keys.GPU_IDS) or "").split(",") if g] if live_worker else []
        self.gpus = tuple(g for g in ids if g in gpu_node)
        nodes: set[str | None] = {gpu_node[g] for g in self.gpus}
        if ids:
            nodes.add((pod.get("spec") or {}).get("nodeName") or None)
        self.nodes = frozenset(nodes)  # the nodes whose GPU/GPUNode statuses it is accounted on


def same_for_pdbs(old: _PodRec, new: _PodRec) -> bool:
    """Whether a PDB's status reads the same of both (an annotation patch, say): labels, owner,
    readiness, phase and deletion."""
    return (
        old.labels == new.labels
        and old.owner == new.owner
        and old.ready == new.ready
        and old.health == new.health
    )


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
