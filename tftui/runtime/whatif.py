"""What-if: run a placement/defrag/autoscale policy over simulated days and count what it costs.

`simulate()` copies a starting set of objects (the demo, a dump or a live snapshot), applies a
`Policy` to it (every SchedulingConfigTemplate's placement mode, each pool's defrag switch, the
workloads' autoscale switch), and drives the **same code the console and the daemon run**: the
`ActingSimCluster` (evictions, replacements placed by the pool's mode, claim and node removal
delays, events) under a `runtime.loops.Runtime` (compaction on its period, defrag on its cron window,
autoscale on its interval, all planned by `engine.planning.plan_cluster` / `plan_autoscale`).
It lives in runtime/ because it drives the Runtime (sources never import runtime).

**Event queue, not fixed steps.** The clock jumps straight to the next thing that can change the
cluster: a pool's next reconcile or the autoscale run (`Runtime.next_due`), a simulated controller's
timer (`ActingSimCluster.next_due`: pod gone, worker ready, claim or node gone), a workload arrival or
departure batch, a provisioned node coming up, or a sample. Nothing is computed between events, and
the `ClusterState` is rebuilt only when the objects changed (`WhatIfCluster.state`), so quiet hours
cost a few plan calls; the Runtime is only entered when a pool or autoscale is due, and Pending
workers are read from the scheduler's queue, so an instant with nothing due builds no state.

**A change costs what it touches.** States are derived from the previous one
(`engine.incremental.update_state`: the cluster copies on write, so an
unchanged object is the same dict and keeps its views; equal to a full build), the simulated
cluster's status pass re-indexes only the pods changed since the last pass, and defrag derives its
indexes, target judgements and candidate simulations once per state (`ClusterState.derived`). A
week of the 500-node demo takes about a minute of CPU (`bench/simulate.py`).

**Workload churn** is generated from a seed before any policy runs, so every policy sees the same
arrivals and departures: each workload lives an exponential time (mean `1/churn` days); each pool
receives new workloads at the rate that keeps its size steady, cloned from its own workloads (same
requests, profile and replicas; new names). Arrivals and departures are applied in batches on a grid
(`churn_step`, default 1 h) — one scheduler pass per batch instead of one per workload.

**Usage** (GPU-hours used, throttling, and the rows autoscale reads) is either *generated* — the
demo's usage profiles (`sources.sim.scenarios`), per workload, as a fraction of its *original*
request so a smaller request after autoscale does not shrink the demand — or *recorded*: the mean
TFLOPS per device of each workload per hour of day over the history window of a `MetricsPort`
(GreptimeDB), replayed day after day; clones use their template's profile. A workload without
recorded usage is counted as *unmeasured*, never as idle.

**Provisioning.** A pool with workers that stay Pending gets one node like its largest, after
`provision_delay` (default 5 min), one at a time, up to twice its starting node count.

Throttled minutes: worker-minutes in which the demand exceeded the worker's TFLOPS limit (autoscale
lowering limits shows up here). Node-hours and cost count every node until it is gone (a released
node costs until its claim or the cluster autoscaler removes it); cost is the GPUNode's
`costPerHour`, else its GPUs' prices (`engine.prices`). Active nodes are nodes not being released;
the ratio is active ÷ `engine.lowerbound.pool_bound` (the configured bound), per pool, per sample.
"""

from __future__ import annotations

import copy
import csv
import gc
import io
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from random import Random
from typing import Any, Final, Protocol

from tftui.engine.isolation import compatible
from tftui.engine.lowerbound import pool_bound
from tftui.engine.plan import DeleteGPUNodeClaim, EvictPod, LabelNode, Plan
from tftui.engine.prices import gpu_price
from tftui.engine.quota import QUOTA_REFUSAL
from tftui.engine.state import ClusterState, NodeView, WorkerView
from tftui.model import keys
from tftui.model.gcpause import gc_paused
from tftui.model.plaintext import csv_cell
from tftui.model.selectors import selector_matches
from tftui.runtime.loops import Runtime
from tftui.runtime.sweep import Progress, in_processes
from tftui.sources.ports import MetricsPort
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import as_utc
from tftui.sources.sim.scenarios import (
    PROFILE_ANNOTATION,
    PROFILES,
    compute_fraction,
    entity_key,
    local_hour,
    memory_fraction,
    pool_timezone,
    profile_params,
    unit,
    wobble,
)

__all__ = [
    "MODES",
    "PRESETS",
    "Policy",
    "PolicyResult",
    "SimConfig",
    "WhatIfCluster",
    "compare",
    "holds",
    "parse_policy",
    "render_csv",
    "render_json",
    "render_table",
    "simulate",
    "unblock",
]

JSON = dict[str, Any]
MODES: Final = ("CompactFirst", "LowLoadFirst", "NodeCompactGPULowLoad")
DEFAULT_DEFRAG: Final[JSON] = {
    "enabled": True,
    "schedule": "0 3 * * *",
    "timezone": "UTC",
    "maxDuration": "2h",
    "utilizationThresholdPercent": 40,
}
_ENDED: Final = ("Succeeded", "Failed")


# -- policies ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Policy:
    """What to change before simulating: None keeps what the objects say."""

    name: str
    placement: str | None = None  # every SchedulingConfigTemplate's spec.placement.mode
    defrag: bool | None = None  # True: enable (a 03:00 UTC, 2 h campaign where none is set)
    threshold: float | None = None  # defrag utilizationThresholdPercent (None: as configured)
    autoscale: bool = False  # autoSetResources on every workload, and the autoscale loop on
    unblock: bool = False  # lift the blockers an operator controls (see `unblock`)


PRESETS: Final[dict[str, tuple[str, ...]]] = {
    "modes": tuple(f"{m}+{d}" for d in ("defrag", "nodefrag") for m in MODES),
    "autoscale": tuple(f"{m}+defrag{a}" for a in ("", "+autoscale") for m in MODES),
    "all": tuple(f"{m}+{d}{a}" for a in ("", "+autoscale") for d in ("defrag", "nodefrag") for m in MODES),
    # one change per step, as the reference page takes them: defrag as configured, then CompactFirst
    # placement, then an 80 % defrag threshold, then the operator-controlled blockers lifted
    "ladder": (
        "configured+defrag",
        "CompactFirst+defrag",
        "CompactFirst+defrag=80",
        "CompactFirst+defrag=80+unblock",
    ),
}


def parse_policy(text: str) -> Policy:
    """`configured` or a mode, then `+defrag[=PCT]`/`+nodefrag`/`+autoscale`/`+unblock` (e.g.
    `CompactFirst+defrag`); `defrag=PCT` also sets the utilization threshold under which nodes are
    drained; `unblock` lifts cordons, do-not-disrupt and PDB blocks first (`unblock()`)."""
    parts = [p.strip() for p in text.split("+")]
    head, flags = parts[0], parts[1:]
    placement: str | None
    if head.lower() == "configured":
        placement = None
    else:
        match = [m for m in MODES if m.lower() == head.lower()]
        if not match:
            raise ValueError(f"policy {text!r}: unknown placement mode {head!r} (one of {', '.join(MODES)})")
        placement = match[0]
    defrag: bool | None = None
    threshold: float | None = None
    autoscale = unblock_ = False
    for f in flags:
        if f.lower().startswith("defrag="):
            defrag = True
            try:
                threshold = float(f.split("=", 1)[1])
            except ValueError:
                threshold = -1.0
            if not 0 <= threshold <= 100:
                raise ValueError(f"policy {text!r}: defrag threshold must be a percentage 0-100")
        elif f.lower() == "defrag":
            defrag = True
        elif f.lower() == "nodefrag":
            defrag = False
        elif f.lower() == "autoscale":
            autoscale = True
        elif f.lower() == "unblock":
            unblock_ = True
        else:
            raise ValueError(
                f"policy {text!r}: unknown option {f!r} (defrag, defrag=PCT, nodefrag, autoscale, unblock)"
            )
    return Policy(text, placement, defrag, threshold, autoscale, unblock_)


def apply_policy(objects: Iterable[JSON], policy: Policy) -> list[JSON]:
    """`objects` with the policy's settings written in; only the objects it changes are copied (the
    simulated cluster copies on write, so the others are shared, never modified)."""
    out: list[JSON] = []
    for original in unblock(objects) if policy.unblock else objects:
        kind = original.get("kind")
        if (
            (kind == "SchedulingConfigTemplate" and policy.placement is not None)
            or (kind == "GPUPool" and policy.defrag is not None)
            or (kind == "TensorFusionWorkload" and policy.autoscale)
        ):
            obj = copy.deepcopy(original)
            spec = obj.setdefault("spec", {})
            if kind == "SchedulingConfigTemplate":
                spec.setdefault("placement", {})["mode"] = policy.placement
            elif kind == "GPUPool":
                nc = spec.setdefault("nodeManagerConfig", {}).setdefault("nodeCompaction", {})
                current = nc.get("defrag")
                if policy.defrag:
                    nc["defrag"] = {**DEFAULT_DEFRAG, **(current or {}), "enabled": True}
                    if policy.threshold is not None:
                        nc["defrag"]["utilizationThresholdPercent"] = policy.threshold
                elif current is not None:
                    nc["defrag"] = {**current, "enabled": False}
            else:
                asc = spec.setdefault("autoScalingConfig", {})
                asc["autoSetResources"] = {**(asc.get("autoSetResources") or {}), "enable": True}
            out.append(obj)
        else:
            out.append(original)
    return out


def _allows_none(pdb: JSON) -> bool:
    """A PDB that lets no pod go: its status says so, or (no status yet) `maxUnavailable: 0`."""
    status = pdb.get("status") or {}
    if "disruptionsAllowed" in status:
        return bool(status.get("disruptionsAllowed") == 0)
    return (pdb.get("spec") or {}).get("maxUnavailable") in (0, "0", "0%")


def unblock(objects: Iterable[JSON]) -> list[JSON]:
    """`objects` without the blockers an operator controls, to price them (`+unblock`): nodes
    uncordoned; `do-not-disrupt` cleared on Nodes and GPUNodes; PDBs that allow no disruption set to
    `maxUnavailable: 1`; a `maxUnavailable: 1` PDB (`<workload>-whatif-pdb`) for every workload
    whose workers no PDB covers (defrag requires one). Pods using GPUs outside TensorFusion stay:
    they are not the operator's to move. Only changed objects are copied."""
    objs = list(objects)
    selectors: dict[str, list[Any]] = {}  # namespace → its PDBs' selectors (a PDB covers its namespace only)
    for o in objs:
        if o.get("kind") == "PodDisruptionBudget":
            ns = (o.get("metadata") or {}).get("namespace") or ""
            selectors.setdefault(ns, []).append((o.get("spec") or {}).get("selector"))
    uncovered: dict[tuple[str, str], None] = {}
    for o in objs:
        meta = o.get("metadata") or {}
        labels = meta.get("labels") or {}
        if o.get("kind") != "Pod" or labels.get(keys.COMPONENT) != keys.COMPONENT_WORKER:
            continue
        ns, wl = meta.get("namespace") or "", labels.get(keys.WORKLOAD)
        if not wl or any(
            selector_matches(sel, labels, empty_matches_all=False) for sel in selectors.get(ns, ())
        ):
            continue
        uncovered[(ns, wl)] = None
    out: list[JSON] = []
    for o in objs:
        kind = o.get("kind")
        meta = o.get("metadata") or {}
        labels = meta.get("labels") or {}
        cordoned = kind == "Node" and bool((o.get("spec") or {}).get("unschedulable"))
        dnd = kind in ("Node", "GPUNode") and keys.DO_NOT_DISRUPT in labels
        if cordoned or dnd:
            o = copy.deepcopy(o)
            o.get("spec", {}).pop("unschedulable", None)
            o["metadata"].get("labels", {}).pop(keys.DO_NOT_DISRUPT, None)
        elif kind == "PodDisruptionBudget" and _allows_none(o):
            o = copy.deepcopy(o)
            spec = o.setdefault("spec", {})
            spec.pop("minAvailable", None)
            spec["maxUnavailable"] = 1
            o.pop("status", None)  # the simulated disruption controller recomputes it
        out.append(o)
    for ns, wl in uncovered:
        out.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": f"{wl}-whatif-pdb", "namespace": ns},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {keys.WORKLOAD: wl}}},
            }
        )
    return out


# -- the cluster ------------------------------------------------------------------------------------


class WhatIfCluster(ActingSimCluster):
    """`ActingSimCluster` plus what a what-if run needs: a cached `ClusterState`, workloads that come
    and go, and nodes that are provisioned."""

    def __init__(self, objects: Iterable[JSON], now: datetime, seed: int) -> None:
        super().__init__(seed=seed, now=now, objects=objects)
        self._state_src: list[JSON] | None = None
        self._state: ClusterState | None = None

    def describe(self) -> str:
        return "what-if"

    def state(self) -> ClusterState:
        """The `ClusterState` of the current objects, rebuilt only after they changed."""
        with self._lock:
            self.snapshot()
            if self._state is None or self._state_src is not self._cache:
                assert self._cache is not None
                self._state_src = self._cache
                self._state = self._build_state(list(self._cache))
            return self._state

    def add_workload(self, template: JSON, pod: JSON, name: str) -> None:
        """A new TensorFusionWorkload like `template` named `name`; its workers are created Pending
        (and scheduled at once) by the simulated workload controller."""
        with self._lock:
            wl = copy.deepcopy(template)
            meta = wl["metadata"]
            uid = self._uid()
            wl["metadata"] = {
                **{k: v for k, v in meta.items() if k in ("namespace", "labels", "annotations")},
                "name": name,
                "uid": uid,
                "creationTimestamp": self._now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            wl["status"] = {}
            self._add(wl)
            tpl = copy.deepcopy(pod)
            tpl["metadata"].setdefault("labels", {})[keys.WORKLOAD] = name
            refs = tpl["metadata"].get("ownerReferences") or []
            tpl["metadata"]["ownerReferences"] = [
                {**r, "name": name, "uid": uid} if r.get("kind") == "TensorFusionWorkload" else r
                for r in refs
            ]
            self._replace(tpl)  # Pending until `schedule()`: a batch of arrivals is placed in one pass

    def add_object(self, obj: JSON) -> None:
        """Add `obj` as it is (a trace's pod, bound by the caller); Pending workers are queued."""
        with self._lock:
            self._add(obj)

    def pending_pools(self) -> dict[str, set[str]]:
        """Pools of the workers waiting for a node, with the isolation modes they ask for: the
        scheduler's queue (the same workers as `ClusterState`'s Pending, unbound, not terminating
        ones), read without building a state. Workers their namespace's quota refused wait for
        room in the quota, not for a node, and do not count."""
        with self._lock:
            out: dict[str, set[str]] = {}
            for k in self._pending:
                if self._refused.get(k, "").startswith(QUOTA_REFUSAL):
                    continue
                pod = self._objs[k]
                meta = pod["metadata"]
                ann, labels = meta.get("annotations") or {}, meta.get("labels") or {}
                pool = ann.get(keys.GPUPOOL) or labels.get(keys.GPUPOOL) or ""
                out.setdefault(pool, set()).add(ann.get(keys.ISOLATION) or "soft")
            return out

    def schedule(self) -> None:
        """Run the simulated scheduler over the Pending workers (after a batch of arrivals)."""
        with self._lock:
            self._schedule_pending()

    def remove_workloads(self, workloads: Iterable[tuple[str, str]]) -> int:
        """Delete these (namespace, name) workloads and their workers, no replacements, in one pass
        over the objects; returns how many existed."""
        with self._lock:
            gone = {w for w in workloads if ("TensorFusionWorkload", *w) in self._objs}
            for ns, name in gone:
                self._delete(("TensorFusionWorkload", ns, name))
            if gone:
                for k in self._keys("Pod"):
                    wl = (self._objs[k]["metadata"].get("labels") or {}).get(keys.WORKLOAD)
                    if wl is not None and (k[1], wl) in gone:
                        self._delete(k)
                self._schedule_pending()
            return len(gone)

    def add_node_like(self, node: str, new: str) -> None:
        """A new, empty node with the GPUs, labels and claim of `node` (renamed), created now."""
        with self._lock:
            names = {node: new}
            objs: list[JSON] = []
            claim = None
            for k, o in self._objs.items():
                if k[0] in ("Node", "GPUNode") and k[2] == node:
                    objs.append(o)
                    claim = claim or (o["metadata"].get("labels") or {}).get(keys.NODE_PROVISIONER)
                elif (
                    k[0] == "GPU"
                    and ((o.get("status") or {}).get("nodeSelector") or {}).get(keys.HOSTNAME) == node
                ):
                    objs.append(o)
                    names[k[2]] = f"{k[2]}-{new}"
            if claim and ("GPUNodeClaim", "", claim) in self._objs:
                objs.append(self._objs[("GPUNodeClaim", "", claim)])
                names[claim] = f"{claim}-{new}"
            text = json.dumps(objs)
            for old, nu in names.items():  # exact string values only: names, selectors, labels
                text = text.replace(json.dumps(old), json.dumps(nu))
            created = self._now.strftime("%Y-%m-%dT%H:%M:%SZ")
            for o in json.loads(text):
                meta = o["metadata"]
                meta["uid"] = self._uid()
                meta["creationTimestamp"] = created
                meta.pop("deletionTimestamp", None)
                if o["kind"] == "Node":
                    o.setdefault("spec", {}).pop("unschedulable", None)
                    o["spec"].pop("taints", None)
                    (meta.get("labels") or {}).pop(keys.SHOULD_DELETE, None)
                self._add(o)
            self._retry_all = True
            self._schedule_pending()


# -- usage ------------------------------------------------------------------------------------------


class Usage:
    """Demand of a worker at an instant: TFLOPS per device it wants (None: unknown)."""

    def __init__(self, seed: int, history: Mapping[str, list[float | None]] | None = None) -> None:
        self.seed = seed
        self.history = history  # workload key → TFLOPS per device per hour of day (recorded mode)
        self.alias: dict[str, str] = {}  # clone workload → its template (recorded profiles)
        self._base: dict[str, tuple[float, float]] = {}  # workload → original (TFLOPS, VRAM) request
        self._params: dict[str, Any] = {}

    def base(self, w: WorkerView) -> tuple[float, float]:
        key = f"{w.namespace}/{w.workload}"
        got = self._base.get(key)
        if got is None:
            got = self._base[key] = (w.request.tflops, w.request.vram)
        return got

    def demand(self, state: ClusterState, w: WorkerView, t: int) -> tuple[float, float] | None:
        """(TFLOPS per device, VRAM bytes per device) the worker wants at epoch second `t`."""
        key = f"{w.namespace}/{w.workload}"
        base_t, base_v = self.base(w)
        if self.history is not None:
            hours = self.history.get(key) or self.history.get(self.alias.get(key, ""))
            used = hours[(t // 3600) % 24] if hours else None
            return None if used is None else (used, 0.5 * base_v)
        params = self._params.get(key)
        pool = state.pools.get(w.pool or "")
        if params is None:
            wl = state.workloads.get(key)
            ann = (((wl.obj if wl else None) or {}).get("metadata") or {}).get("annotations") or {}
            wkey = entity_key(self.seed, "workload", key)
            profile = ann.get(PROFILE_ANNOTATION) or PROFILES[int(unit(wkey, 11) * len(PROFILES))]
            params = self._params[key] = (
                profile_params(profile, wkey),
                wkey,
                pool_timezone(pool.obj if pool else None),
            )
        p, wkey, tz = params
        hour = local_hour(t, tz)
        noise = wobble(wkey, t)
        return compute_fraction(p, hour, noise) * base_t, memory_fraction(p, hour, noise) * base_v


def recorded_usage(
    metrics: MetricsPort, state: ClusterState, start: datetime, window: timedelta
) -> dict[str, list[float | None]]:
    """Mean TFLOPS per device of each workload per UTC hour of day over `window` before `start`."""
    sums: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}
    for r in metrics.rows("tf_worker_usage", start - window, start):
        gpu = state.gpus.get(str(r.get("uuid") or ""))
        tfl = r.get("compute_tflops") or 0.0
        if not tfl:
            pct = r.get("compute_percentage")
            if pct is None or gpu is None:
                continue
            tfl = float(pct) / 100.0 * gpu.capacity.tflops
        ts = r.get("ts") or r.get("greptime_timestamp")
        if not isinstance(ts, datetime):
            continue
        key = f"{r.get('namespace', '')}/{r.get('workload', '')}"
        h = as_utc(ts).hour
        sums.setdefault(key, [0.0] * 24)[h] += float(tfl)
        counts.setdefault(key, [0] * 24)[h] += 1
    out: dict[str, list[float | None]] = {}
    for key, s in sums.items():
        c = counts[key]
        known = [s[h] / c[h] for h in range(24) if c[h]]
        fill = sum(known) / len(known)
        out[key] = [s[h] / c[h] if c[h] else fill for h in range(24)]
    return out


class UsageMetrics:
    """`MetricsPort` of the simulated usage, for the autoscale loop: `tf_worker_usage` rows of the
    workers running now, on a `step` grid (earlier times included: workers are taken as they are now)."""

    def __init__(self, cluster: WhatIfCluster, usage: Usage, step: timedelta = timedelta(minutes=5)) -> None:
        self.cluster = cluster
        self.usage = usage
        self.step = int(step.total_seconds())

    def latest_gpu_usage(self, now: datetime, lookback: timedelta = timedelta(minutes=5)) -> dict[str, Any]:
        return {}

    def latest_worker_usage(
        self, now: datetime, lookback: timedelta = timedelta(minutes=5)
    ) -> dict[str, Any]:
        return {}

    def rows(self, table: str, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        if table != "tf_worker_usage":
            return
        state = self.cluster.state()
        running = [
            w for w in state.workers.values() if w.phase == "Running" and w.gpu_ids and not w.terminating
        ]
        t0 = -(-int(start.timestamp()) // self.step) * self.step
        for t in range(t0, int(end.timestamp()), self.step):
            ts = datetime.fromtimestamp(t, UTC)
            for w in running:
                gpu = state.gpus.get(w.gpu_ids[0])
                d = self.usage.demand(state, w, t)
                if gpu is None or d is None or gpu.capacity.tflops <= 0:
                    continue
                used = min(d[0], w.limit.tflops or d[0], gpu.capacity.tflops)
                for g in w.gpu_ids:
                    yield {
                        "workload": w.workload, "worker": w.uid, "pod_name": w.name,
                        "namespace": w.namespace, "pool": w.pool, "node": w.node, "uuid": g,
                        "compute_percentage": used / gpu.capacity.tflops * 100.0,
                        "memory_bytes": int(d[1]), "memory_percentage": 0.0, "compute_tflops": 0.0, "ts": ts,
                    }  # fmt: skip


# -- configuration and results ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SimConfig:
    """How long, how much churn, how often to sample; `seed` makes all of it reproducible."""

    duration: timedelta = timedelta(days=1)
    seed: int = 7
    churn: float = 0.5  # fraction of workloads that leave (and arrive) per day
    churn_step: timedelta = timedelta(hours=1)
    sample: timedelta = timedelta(minutes=30)
    provision_delay: timedelta = timedelta(minutes=5)
    autoscale_interval: timedelta = timedelta(minutes=15)
    history: Mapping[str, list[float | None]] | None = None  # recorded usage (None: generated)
    on_sample: Callable[[datetime], None] | None = None  # progress hook
    feed: Feed | None = None  # arrivals and departures of a trace (None: generated churn)


class Feed(Protocol):
    """Where a run's workloads come from when not from generated churn (`runtime.lifetimes`)."""

    def schedule(self, start: datetime) -> list[_Churn]: ...
    def arrive(self, sim: WhatIfCluster, batch: list[_Churn]) -> int: ...
    def depart(self, sim: WhatIfCluster, batch: list[_Churn]) -> int: ...


@dataclass(slots=True)
class PolicyResult:
    """One policy's figures over the run, plus the node counts over time for plotting."""

    policy: str
    node_hours: float = 0.0
    gpu_hours_allocated: float = 0.0
    gpu_hours_used: float = 0.0
    unmeasured_worker_hours: float = 0.0
    capacity_tflops_hours: float = 0.0
    allocated_tflops_hours: float = 0.0
    releases: int = 0
    evictions: int = 0
    provisioned: int = 0
    throttled_minutes: float = 0.0
    pending_minutes: float = 0.0
    cost: float = 0.0
    arrivals: int = 0
    departures: int = 0
    final_active: dict[str, int] = field(default_factory=dict)
    final_bound: dict[str, int] = field(default_factory=dict)
    final_packing_bound: dict[str, int] = field(default_factory=dict)
    final_holds: dict[str, dict[str, str]] = field(default_factory=dict)  # pool → active node → why kept
    times: list[datetime] = field(default_factory=list)
    active: dict[str, list[int]] = field(default_factory=dict)  # pool → active nodes per sample
    bound: dict[str, list[int]] = field(default_factory=dict)  # pool → configured bound per sample
    plans: list[Plan] = field(default_factory=list, repr=False)
    sim_seconds: float = 0.0
    wall_seconds: float = 0.0

    @property
    def allocation_ratio(self) -> float:
        return self.allocated_tflops_hours / self.capacity_tflops_hours if self.capacity_tflops_hours else 0.0

    def final_ratio(self, pool: str) -> float | None:
        b = self.final_bound.get(pool, 0)
        return self.final_active.get(pool, 0) / b if b else None

    def summary(self) -> JSON:
        """The figures, rounded, in a stable order (CSV columns and JSON keys)."""
        total_active = sum(self.final_active.values())
        total_bound = sum(self.final_bound.values())
        return {
            "policy": self.policy,
            "node_hours": round(self.node_hours, 2),
            "gpu_hours_allocated": round(self.gpu_hours_allocated, 2),
            "gpu_hours_used": round(self.gpu_hours_used, 2),
            "unmeasured_worker_hours": round(self.unmeasured_worker_hours, 2),
            "allocation_ratio": round(self.allocation_ratio, 4),
            "releases": self.releases,
            "evictions": self.evictions,
            "provisioned": self.provisioned,
            "throttled_minutes": round(self.throttled_minutes, 1),
            "pending_minutes": round(self.pending_minutes, 1),
            "cost_usd": round(self.cost, 2),
            "arrivals": self.arrivals,
            "departures": self.departures,
            "final_active_nodes": total_active,
            "final_lower_bound": total_bound,
            "final_ratio": round(total_active / total_bound, 4) if total_bound else None,
            "pools": {
                p: {
                    "active": self.final_active[p],
                    "lower_bound": self.final_bound[p],
                    "packing_bound": self.final_packing_bound[p],
                    "ratio": None if (r := self.final_ratio(p)) is None else round(r, 4),
                    "held_by": dict(Counter(self.final_holds.get(p, {}).values())),
                }
                for p in sorted(self.final_active)
            },
        }


# -- churn ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Churn:
    at: datetime
    kind: str  # "arrive" | "depart"
    namespace: str
    name: str
    template: str  # arrive: the workload key it is cloned from


def churn_schedule(state: ClusterState, start: datetime, cfg: SimConfig) -> list[_Churn]:
    """Arrivals and departures over the run, from the seed alone (the same for every policy)."""
    if cfg.churn <= 0:
        return []
    rng = Random(f"tftui-whatif-{cfg.seed}")
    step = cfg.churn_step.total_seconds()
    end = start + cfg.duration
    mean_life = 86400.0 / cfg.churn

    def on_grid(t: datetime) -> datetime:
        off = math.ceil((t - start).total_seconds() / step) * step
        return start + timedelta(seconds=off)

    out: list[_Churn] = []
    by_pool: dict[str, list[str]] = {}
    for key in sorted(state.workloads):
        wv = state.workloads[key]
        if wv.obj is None or not any(k in state.workers for k in wv.workers):
            continue
        by_pool.setdefault(wv.pool or "", []).append(key)
        leave = start + timedelta(seconds=rng.expovariate(1.0 / mean_life))
        if leave < end:
            out.append(_Churn(on_grid(leave), "depart", wv.namespace, wv.name, ""))
    serial = 0
    for pool in sorted(by_pool):
        keys_ = by_pool[pool]
        rate = len(keys_) / mean_life  # arrivals per second that keep the pool's size steady
        t = start + timedelta(seconds=rng.expovariate(rate))
        while t < end:
            tpl = keys_[rng.randrange(len(keys_))]
            ns, name = tpl.split("/", 1)
            serial += 1
            new = f"{name[:40]}-w{serial:05d}"
            out.append(_Churn(on_grid(t), "arrive", ns, new, tpl))
            leave = t + timedelta(seconds=rng.expovariate(1.0 / mean_life))
            if leave < end:
                out.append(_Churn(on_grid(leave), "depart", ns, new, ""))
            t += timedelta(seconds=rng.expovariate(rate))
    order = {"depart": 0, "arrive": 1}
    out.sort(key=lambda c: (c.at, order[c.kind], c.namespace, c.name))
    return out


# -- the driver -------------------------------------------------------------------------------------


class _SimRuntime(Runtime):
    """The shared Runtime, reading the what-if cluster's cached state."""

    def __init__(self, cluster: WhatIfCluster, **kw: Any) -> None:
        super().__init__(cluster, clock=cluster.clock, **kw)
        self.sim = cluster

    def state(self) -> ClusterState:
        return self.sim.state()


def _node_price(state: ClusterState, nv: NodeView) -> float:
    if nv.cost_per_hour is not None:
        return nv.cost_per_hour
    total = 0.0
    for g in nv.gpus:
        price = gpu_price(state, state.gpus[g].model) if g in state.gpus else None
        total += price or 0.0
    return total


def _releasing(nv: NodeView, state: ClusterState) -> bool:
    labels = ((nv.node_obj or {}).get("metadata") or {}).get("labels") or {}
    if labels.get(keys.SHOULD_DELETE) == keys.TRUE:
        return True
    claim = state.claims.get(nv.claim or "")
    return bool(claim and (claim.get("metadata") or {}).get("deletionTimestamp"))


def _templates(state: ClusterState) -> dict[str, tuple[JSON, JSON]]:
    """Workload key → (workload object, one of its worker pods): what arrivals are cloned from."""
    out: dict[str, tuple[JSON, JSON]] = {}
    for key, wv in state.workloads.items():
        pods = sorted(k for k in wv.workers if k in state.workers)
        if wv.obj is not None and pods:
            out[key] = (wv.obj, state.workers[pods[0]].obj)
    return out


def simulate(
    objects: Sequence[JSON],
    policy: Policy,
    start: datetime,
    cfg: SimConfig,
    *,
    inspect: Callable[[WhatIfCluster, _SimRuntime], None] | None = None,
) -> PolicyResult:
    """Run `policy` from `objects` at `start` for `cfg.duration`; `inspect` is called before each
    reconcile (tests dump the state there).

    The cyclic GC is paused for the run: each step allocates a state's worth of objects while the
    cluster's own stay alive, so generation-2 collections kept rescanning the whole heap; nothing
    the run builds needs the cycle collector (reference counting frees it), and one collection
    runs at the end."""
    try:
        with gc_paused():
            return _simulate(objects, policy, start, cfg, inspect)
    finally:
        gc.collect()


def _simulate(
    objects: Sequence[JSON],
    policy: Policy,
    start: datetime,
    cfg: SimConfig,
    inspect: Callable[[WhatIfCluster, _SimRuntime], None] | None,
) -> PolicyResult:
    wall = time.perf_counter()
    start = as_utc(start)
    sim = WhatIfCluster(apply_policy(objects, policy), start, cfg.seed)
    usage = Usage(cfg.seed, cfg.history)
    metrics = UsageMetrics(sim, usage) if policy.autoscale else None
    rt = _SimRuntime(sim, metrics=metrics, autoscale_interval=cfg.autoscale_interval)
    res = PolicyResult(policy.name)
    state0 = sim.state()
    templates = _templates(state0)
    for w in state0.workers.values():
        usage.base(w)
    start_nodes = {p: len(pv.nodes) for p, pv in state0.pools.items()}
    end = start + cfg.duration
    churn = cfg.feed.schedule(start) if cfg.feed is not None else churn_schedule(state0, start, cfg)
    ci = 0
    next_sample = start
    provisioning: dict[str, datetime] = {}  # pool → when its node comes up
    pool_names = sorted(state0.pools)  # the simulation adds and removes no pools
    waiting_of = -1  # sim.generation `waiting` was read at
    waiting: dict[str, set[str]] = {}
    serial = 0
    while True:
        now = sim.now()
        batch: list[_Churn] = []
        while ci < len(churn) and churn[ci].at <= now:
            batch.append(churn[ci])
            ci += 1
        if batch:
            if cfg.feed is not None:  # a trace: its own arrivals and departures
                res.departures += cfg.feed.depart(sim, [c for c in batch if c.kind == "depart"])
                res.arrivals += cfg.feed.arrive(sim, [c for c in batch if c.kind == "arrive"])
                batch = []
            res.departures += sim.remove_workloads((c.namespace, c.name) for c in batch if c.kind == "depart")
            for c in batch:
                if c.kind == "arrive" and c.template in templates:
                    wl, pod = templates[c.template]
                    sim.add_workload(wl, pod, c.name)
                    usage.alias[f"{c.namespace}/{c.name}"] = c.template
                    res.arrivals += 1
            sim.schedule()
        for pool, at in sorted(provisioning.items()):
            if at <= now:
                del provisioning[pool]
                st = sim.state()
                nodes = [st.nodes[n] for n in st.pools[pool].nodes if not _releasing(st.nodes[n], st)]
                modes = waiting.get(pool) or {"soft"}  # like a node that can host what waits
                fitting = [
                    n for n in nodes if any(compatible(g, m) for g in st.gpus_of(n.name) for m in modes)
                ]
                nodes = fitting or nodes
                if nodes:
                    like = max(nodes, key=lambda n: (n.capacity.tflops, n.name))
                    serial += 1
                    sim.add_node_like(like.name, f"whatif-{serial:04d}")
                    res.provisioned += 1
        # Nothing due: skip the Runtime (it would build a state only to find no pool due).
        due = rt.autoscale_due(now) or any(rt.next_reconcile.get(p, now) <= now for p in pool_names)
        if due and inspect is not None and rt.due_pools(sim.state(), now):
            inspect(sim, rt)
        plan = rt.tick_due() if due else None
        if plan is not None:
            res.plans.append(plan)
            for r in rt.last_results:
                if not r.ok:
                    continue
                if isinstance(r.action, EvictPod):
                    res.evictions += 1
                elif isinstance(r.action, DeleteGPUNodeClaim) or (
                    isinstance(r.action, LabelNode) and r.action.labels.get(keys.SHOULD_DELETE) == keys.TRUE
                ):
                    res.releases += 1
        if sim.generation != waiting_of:  # Pending workers ask their pool for a node
            waiting_of = sim.generation
            waiting = sim.pending_pools()
        if any(p in pool_names and p not in provisioning for p in waiting):
            state = sim.state()
            for pool in sorted(waiting):
                pv = state.pools.get(pool)
                if (
                    pv is not None
                    and pool not in provisioning
                    and len(pv.nodes) < 2 * start_nodes.get(pool, 0)
                ):
                    provisioning[pool] = now + cfg.provision_delay
        if now >= next_sample:
            state = sim.state()
            _sample(res, state, usage, now, min(cfg.sample, end - now) if now < end else timedelta(0))
            if cfg.on_sample is not None:
                cfg.on_sample(now)
            next_sample = now + cfg.sample
        if now >= end:
            break
        candidates = [end, next_sample]
        for t in (rt.next_due(), sim.next_due()):
            if t is not None and t > now:
                candidates.append(t)
        if ci < len(churn):
            candidates.append(max(churn[ci].at, now))
        candidates.extend(t for t in provisioning.values() if t > now)
        target = min(t for t in candidates if t > now) if any(t > now for t in candidates) else end
        sim.advance_to(target)
    final = sim.state()
    for pool in sorted(final.pools):
        names = final.pools[pool].nodes
        res.final_active[pool] = sum(not _releasing(final.nodes[n], final) for n in names)
        res.final_bound[pool] = pool_bound(final, pool).nodes
        res.final_packing_bound[pool] = pool_bound(final, pool, configured=False).nodes
        res.final_holds[pool] = holds(
            res.plans, pool, [n for n in names if not _releasing(final.nodes[n], final)]
        )
    res.sim_seconds = cfg.duration.total_seconds()
    res.wall_seconds = time.perf_counter() - wall
    return res


def holds(plans: Sequence[Plan], pool: str, active: Sequence[str]) -> dict[str, str]:
    """Why each of `pool`'s `active` nodes is still there: the reason code its last defrag step with
    a ranking gave (`above-threshold`, `cordoned`, `pdb-blocked`, `native-gpu-pod`, …; a candidate
    the campaign did not reach is `not-drained`), else the last compaction round's (`has-workers`,
    …). This is what an operator changes to get closer to the bound (e.g. `+defrag=80` for
    `above-threshold`); `unknown` when no decision ran for the pool."""
    defrag: dict[str, str] | None = None
    compaction: dict[str, str] | None = None
    for plan in reversed(plans):
        pp = plan.pools.get(pool)
        if pp is None:
            continue
        d = pp.defrag
        if defrag is None and d is not None and (d.candidates or d.skipped):
            defrag = {c.node: "not-drained" for c in d.candidates}
            defrag.update((s.node, s.reason) for s in d.skipped)
        if compaction is None and pp.compaction is not None and pp.compaction.due:
            compaction = {k.node: k.reason for k in pp.compaction.kept}
        if defrag is not None and compaction is not None:
            break
    out: dict[str, str] = {}
    for node in active:
        reason = (defrag or {}).get(node) or (compaction or {}).get(node)
        out[node] = reason or "unknown"
    return out


def _held_by(holds_: Mapping[str, str]) -> str:
    """`above-threshold 6 (dev-05, dev-06, dev-07, …), cordoned 1 (dev-09)`, most nodes first."""
    by: dict[str, list[str]] = {}
    for node in sorted(holds_):
        by.setdefault(holds_[node], []).append(node)
    parts = []
    for reason, nodes in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        names = ", ".join(nodes[:3]) + (", …" if len(nodes) > 3 else "")
        parts.append(f"{reason} {len(nodes)} ({names})")
    return ", ".join(parts)


def _bound_nodes(state: ClusterState, pool: str) -> int:
    return pool_bound(state, pool).nodes


def _sample(res: PolicyResult, state: ClusterState, usage: Usage, now: datetime, dt: timedelta) -> None:
    """Record the node counts at `now` and integrate every figure over the next `dt`."""
    hours = dt.total_seconds() / 3600.0
    t = int(now.timestamp())
    res.times.append(now)
    for pool in sorted(state.pools):
        pv = state.pools[pool]
        active = 0
        for n in pv.nodes:
            nv = state.nodes[n]
            res.node_hours += hours
            res.cost += _node_price(state, nv) * hours
            if not _releasing(nv, state):
                active += 1
                res.capacity_tflops_hours += nv.capacity.tflops * hours
        res.active.setdefault(pool, []).append(active)
        # a function of the state: samples over an unchanged cluster share it
        res.bound.setdefault(pool, []).append(
            state.derived(f"whatif-bound/{pool}", partial(_bound_nodes, pool=pool))
        )
    demands: dict[str, tuple[float, float] | None] = {}
    for w in state.workers.values():
        if w.terminating or w.phase in _ENDED:
            continue
        if w.phase == "Pending" and not w.node:
            res.pending_minutes += hours * 60.0
            continue
        if w.phase != "Running" or not w.gpu_ids:
            continue
        gpu = state.gpus.get(w.gpu_ids[0])
        cap = gpu.capacity.tflops if gpu is not None else 0.0
        if cap <= 0:
            continue
        res.allocated_tflops_hours += w.request.tflops * w.gpu_count * hours
        res.gpu_hours_allocated += w.request.tflops / cap * w.gpu_count * hours
        key = f"{w.namespace}/{w.workload}"  # a workload's workers want the same at one instant
        d = demands[key] if key in demands else demands.setdefault(key, usage.demand(state, w, t))
        if d is None:
            res.unmeasured_worker_hours += hours
            continue
        limit = w.limit.tflops or w.request.tflops
        used = min(d[0], limit, cap)
        res.gpu_hours_used += used / cap * w.gpu_count * hours
        if d[0] > limit + 1e-9:
            res.throttled_minutes += hours * 60.0


def compare(
    objects: Sequence[JSON],
    policies: Sequence[Policy],
    start: datetime,
    cfg: SimConfig,
    *,
    workers: int = 1,
    progress: Progress | None = None,
) -> list[PolicyResult]:
    """Every policy from the same objects, seed and churn; results in the order given.

    `workers` > 1 runs the policies in that many processes (`sweep.in_processes`): each run is
    seeded and independent, so the results are the same as one after another."""
    total = cfg.duration.total_seconds()

    def one(i: int, report: Callable[[float], None]) -> PolicyResult:
        hook = cfg.on_sample

        def sampled(now: datetime) -> None:
            report(min(1.0, (now - start).total_seconds() / total) if total > 0 else 1.0)
            if hook is not None:
                hook(now)

        return simulate(objects, policies[i], start, replace(cfg, on_sample=sampled))

    return in_processes(one, len(policies), workers=workers, progress=progress)


# -- output -----------------------------------------------------------------------------------------

_COLUMNS: Final = (
    ("policy", "policy", "{}"),
    ("node_hours", "node-h", "{:.1f}"),
    ("gpu_hours_allocated", "GPU-h alloc", "{:.1f}"),
    ("gpu_hours_used", "GPU-h used", "{:.1f}"),
    ("allocation_ratio", "alloc %", "{:.1%}"),
    ("releases", "releases", "{}"),
    ("evictions", "evictions", "{}"),
    ("throttled_minutes", "throttled min", "{:.0f}"),
    ("cost_usd", "cost $", "{:,.0f}"),
    ("final_active_nodes", "active", "{}"),
    ("final_lower_bound", "bound", "{}"),
    ("final_ratio", "active/bound", "{:.2f}"),
)


def render_table(results: Sequence[PolicyResult]) -> str:
    """A plain-text table, one row per policy, then each pool's active ÷ bound at the end."""
    rows = [
        [("—" if s[k] is None else fmt.format(s[k])) for k, _, fmt in _COLUMNS]
        for s in (r.summary() for r in results)
    ]
    heads = [h for _, h, _ in _COLUMNS]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    out = [line(heads), *(line(r) for r in rows)]
    if results:
        out.append("")
        out.append(
            "active nodes ÷ lower bound at the end, per pool (configured bound; packing bound in brackets):"
        )
        for r in results:
            parts = []
            for p in sorted(r.final_active):
                ratio = r.final_ratio(p)
                parts.append(
                    f"{p} {r.final_active[p]}/{r.final_bound[p]} [{r.final_packing_bound[p]}]"
                    + (f" = {ratio:.2f}" if ratio is not None else "")
                )
            out.append(f"  {r.policy}: " + ", ".join(parts))
            for p in sorted(r.final_active):
                if r.final_active[p] > r.final_bound[p] and r.final_holds.get(p):
                    out.append(f"    {p} nodes kept by: {_held_by(r.final_holds[p])}")
    return "\n".join(out) + "\n"


def render_csv(results: Sequence[PolicyResult]) -> str:
    buf = io.StringIO()
    keys_ = [k for k in results[0].summary() if k != "pools"] if results else []
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(keys_)
    for r in results:
        s = r.summary()
        w.writerow(["" if s[k] is None else csv_cell(str(s[k])) for k in keys_])
    return buf.getvalue()


def render_json(results: Sequence[PolicyResult], *, series: bool = True) -> str:
    docs = []
    for r in results:
        doc = r.summary()
        if series:
            doc["series"] = {
                "times": [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in r.times],
                "active": r.active,
                "lower_bound": r.bound,
            }
        docs.append(doc)
    return json.dumps({"policies": docs}, indent=2, ensure_ascii=False) + "\n"
