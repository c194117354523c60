"""Usage and allocation history of the demo cluster, shaped like the GreptimeDB `tf_*` tables.

Nothing is stored: every value is a pure function of (seed, entity, timestamp) — hashed noise on
top of the workload's profile curve (`scenarios.py`) — so a day of 1-minute samples for thousands of
GPUs costs nothing until someone reads it, and two runs return identical rows.

Time grid: one sample every `step`, aligned to the epoch, from the last step at or before `now`
back over `history` (24 h → 1440 samples per series; `now` itself is the newest sample when it is
on the grid). A series starts at its object's `creationTimestamp` (young workers have a shorter
history), exactly as upstream writes rows only for objects it knows.

Row shapes (column names and units as TensorFusion's tables, M12; `ts` is a timezone-aware UTC datetime):

- `tf_gpu_usage`: uuid, node, pool (str); compute_percentage (0-100 of the device), memory_bytes
  (int), memory_percentage and compute_tflops (always 0.0, as upstream writes them), temperature (°C),
  power_usage (W), rx, tx (KB/s); ts.
- `tf_worker_usage` (one row per worker and device): workload, worker (pod UID), pod_name, namespace,
  pool, node, uuid (str); compute_percentage (0-100 of the whole device), memory_bytes (int),
  memory_percentage (of the worker's VRAM limit), compute_tflops (0.0 like upstream); ts.
- `tf_node_metrics`: node, pool, phase (str); allocated_tflops (TFLOPS requested), allocated_tflops_percent,
  allocated_vram_bytes, allocated_vram_percent, allocated_tflops_percent_virtual,
  allocated_vram_percent_virtual (0-100), raw_cost (USD for the step = Σ GPU $/h × step/3600),
  gpu_count (int); ts.
- `tf_worker_resources`: worker (pod name), workload, pool, namespace, qos (str); tflops_request,
  tflops_limit (TFLOPS per device), vram_bytes_request, vram_bytes_limit (bytes per device),
  gpu_count (int), raw_cost (USD for the step from the pool's qosConfig.pricing; 0 without pricing),
  ready (bool); ts.

Following a running clock (`follow=`, the demo console and daemon with `--speed`): the history
slides with the cluster's clock (`now` is read from it on every query, so "used" keeps coming as
simulated time passes), and when the cluster's running workers changed (a defrag eviction, a
replacement, a released node) the objects are indexed again, so replacements report usage from
their creation on. Values stay pure functions of (seed, entity, t): moving the window changes none.

Consistency: a GPU's compute_percentage is the sum of its workers' rows at that timestamp, capped at
100; its memory_bytes is the sum of their memory plus `GPU_DRIVER_OVERHEAD_BYTES` when any worker is
present, capped at capacity. GPUs held by pods outside TensorFusion (`usedBy: nvidia-device-plugin`)
show load but have no worker rows; GPUs without workers read 0.
"""

from __future__ import annotations

import bisect
import functools
import gc
import math
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo

from tftui.model.provider import ProviderCatalog
from tftui.model.usage import (
    HistogramQuery,
    ObjectHistoryQuery,
    ObjectSeries,
    PodBucket,
    PodBucketArrays,
    VramWindow,
)
from tftui.sources import histograms
from tftui.sources.ports import GPUUsage, MetricsTable, WorkerUsage
from tftui.sources.sim import aggregate
from tftui.sources.sim.columns import SimColumns
from tftui.sources.sim.demo_layout import DEFAULT_NOW, as_utc
from tftui.sources.sim.entities import GPU_DRIVER_OVERHEAD_BYTES as GPU_DRIVER_OVERHEAD_BYTES
from tftui.sources.sim.entities import (
    WORKER_MEMORY_CAP,
    _created,
    _Gpu,
    _model,
    _Node,
    _pct,
    _pricing,
    _q,
    _tdp,
    _Worker,
)
from tftui.sources.sim.objhistory import object_series
from tftui.sources.sim.scenarios import (
    PROFILE_ANNOTATION,
    compute_fraction,
    entity_key,
    jitter,
    local_hour,
    memory_fraction,
    native_load,
    pool_timezone,
    profile_params,
    smooth,
    wobble,
)

DEFAULT_LOOKBACK: Final = timedelta(minutes=5)
TF: Final = "tensor-fusion.ai"
_UTC: Final = ZoneInfo("UTC")


def _epoch(dt: datetime) -> float:
    return as_utc(dt).timestamp()


class SimMetrics:
    """`MetricsPort` over a day of generated samples for the given objects (see module docstring)."""

    def __init__(
        self,
        objects: list[dict[str, Any]],
        seed: int = 7,
        now: datetime | None = None,
        history: timedelta = timedelta(hours=24),
        step: timedelta = timedelta(minutes=1),
        follow: Any | None = None,
    ) -> None:
        step_s = step.total_seconds()
        if step_s < 1 or step_s != int(step_s):
            raise ValueError("step must be a whole number of seconds, at least 1")
        self.seed = seed
        self.now = as_utc(now or DEFAULT_NOW)
        self.step = int(step_s)
        self.end = int(_epoch(self.now)) // self.step * self.step  # newest sample
        samples = max(1, int(history.total_seconds()) // self.step)
        self.start = self.end - (samples - 1) * self.step  # oldest sample
        self._samples = samples
        self._by_node: dict[str, list[_Gpu]] | None = None
        self._follow = follow  # a cluster with `now()`, `snapshot()` and a `generation` counter
        self._generation = getattr(follow, "generation", None)
        self._sync_lock = threading.Lock()
        self._signature = _running_workers(objects) if follow is not None else None
        # the objects hold ~a million acyclic dicts; pause the cyclic collector while indexing so it
        # does not rescan them over and over (it dominated indexing time at 5000 nodes)
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._index(objects)
        finally:
            if was_enabled:
                gc.enable()

    # -- following a running cluster ---------------------------------------------------------

    def _sync(self) -> None:
        """With `follow`: move the window to the cluster's clock, and index the objects again when
        its running workers changed. Without: nothing (a fixed day of history)."""
        follow = self._follow
        if follow is None:
            return
        with self._sync_lock:
            now = as_utc(follow.now())
            generation = getattr(follow, "generation", None)
            if generation != self._generation:
                self._generation = generation
                objects = follow.snapshot()
                signature = _running_workers(objects)
                if signature != self._signature:
                    self._signature = signature
                    was_enabled = gc.isenabled()
                    gc.disable()
                    try:
                        self._index(objects)
                    finally:
                        if was_enabled:
                            gc.enable()
            if now > self.now:
                self.now = now
                self.end = int(_epoch(now)) // self.step * self.step
                self.start = self.end - (self._samples - 1) * self.step

    # -- index -------------------------------------------------------------------------------

    def _index(self, objects: list[dict[str, Any]]) -> None:
        """Join the objects once: pools → GPUs → workers → nodes, with every constant a sample needs."""
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for obj in objects:
            by_kind.setdefault(str(obj.get("kind", "")), []).append(obj)
        pools = {str((p.get("metadata") or {}).get("name", "")): p for p in by_kind.get("GPUPool", [])}
        self._tz = {name: pool_timezone(p) for name, p in pools.items()}
        self._pricing = {name: _pricing(p) for name, p in pools.items()}
        self._catalog = ProviderCatalog.of(by_kind.get("ProviderConfig", []))
        self.tzs: set[ZoneInfo] = {_UTC, *self._tz.values()}
        gpus = [self._gpu(o) for o in by_kind.get("GPU", [])]
        gpu_by_name = {g.name: g for g in gpus}
        profiles: dict[tuple[str, str], tuple[str, str]] = {}
        for wl in by_kind.get("TensorFusionWorkload", []):
            meta = wl.get("metadata") or {}
            profile = (meta.get("annotations") or {}).get(PROFILE_ANNOTATION, "right-sized")
            profiles[(meta.get("namespace", ""), meta.get("name", ""))] = (
                profile,
                meta.get("uid") or meta["name"],
            )
        workers = []
        for pod in by_kind.get("Pod", []):
            worker = self._worker(pod, gpu_by_name, profiles)
            if worker is not None:
                workers.append(worker)
                for gpu in worker.gpus:
                    gpu.workers.append(worker)
        by_node: dict[str, list[_Gpu]] = {}
        for g in gpus:
            by_node.setdefault(g.node, []).append(g)
        self._by_node = by_node
        # assigned whole: a query running in another thread keeps the lists it started with
        self.gpus, self.workers = gpus, workers
        self.nodes = [self._node(o) for o in by_kind.get("GPUNode", [])]

    def _gpu(self, obj: dict[str, Any]) -> _Gpu:
        meta, status = obj.get("metadata") or {}, obj.get("status") or {}
        labels = meta.get("labels") or {}
        cap = status.get("capacity") or {}
        node = (status.get("nodeSelector") or {}).get("kubernetes.io/hostname") or labels.get(
            f"{TF}/managed-by", ""
        )
        pool = labels.get(f"{TF}/gpupool", "unknown")
        model = str(status.get("gpuModel", ""))
        info = _model(model)
        tdp, idle = _tdp(model)
        return _Gpu(
            name=meta["name"],
            model=model,
            node=node,
            pool=pool,
            cap_t=_q(cap.get("tflops")) or (info.tflops if info else 0.0),
            cap_v=int(_q(cap.get("vram"))),
            native=status.get("usedBy") == "nvidia-device-plugin",
            created=_created(obj),
            key=entity_key(self.seed, "gpu", meta["name"]),
            tz=self._tz.get(pool, _UTC),
            tdp=tdp,
            idle_w=idle,
            price_per_hour=info.price_per_hour if info else 0.0,
        )

    def _worker(
        self,
        pod: dict[str, Any],
        gpu_by_name: dict[str, _Gpu],
        profiles: dict[tuple[str, str], tuple[str, str]],
    ) -> _Worker | None:
        """A running TF worker pod with the GPUs it names, or None for anything else."""
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        labels, ann = meta.get("labels") or {}, meta.get("annotations") or {}
        if labels.get(f"{TF}/component") != "worker" or status.get("phase") != "Running":
            return None
        gpus = [gpu_by_name[g] for g in str(ann.get(f"{TF}/gpu-ids", "")).split(",") if g in gpu_by_name]
        if not gpus:
            return None
        ns, workload = meta.get("namespace", ""), labels.get(f"{TF}/workload", "unknown")
        profile, wl_key = profiles.get((ns, workload), ("right-sized", f"{ns}/{workload}"))
        pool = ann.get(f"{TF}/gpupool") or gpus[0].pool
        qos = ann.get(f"{TF}/qos", "medium")
        req_t = _q(ann.get(f"{TF}/tflops-request"))
        lim_t = _q(ann.get(f"{TF}/tflops-limit"))
        cap_t = float(gpus[0].cap_t)
        if not ann.get(f"{TF}/tflops-request") and ann.get(f"{TF}/compute-percent-request"):
            req_t = _q(ann.get(f"{TF}/compute-percent-request")) * cap_t / 100.0  # as upstream's recorder
        if not ann.get(f"{TF}/tflops-limit") and ann.get(f"{TF}/compute-percent-limit"):
            lim_t = _q(ann.get(f"{TF}/compute-percent-limit")) * cap_t / 100.0
        lim_t = lim_t or req_t
        req_v = _q(ann.get(f"{TF}/vram-request"))
        lim_v = _q(ann.get(f"{TF}/vram-limit")) or float(
            gpus[0].cap_v
        )  # upstream: limit falls back to capacity
        try:
            gpu_count = max(1, int(ann.get(f"{TF}/gpu-count", "1")))
        except ValueError:
            gpu_count = 1
        book_t, book_v = req_t, req_v
        if ann.get(f"{TF}/isolation") == "shared":
            book_t, book_v = cap_t, float(gpus[0].cap_v)
        elif ann.get(f"{TF}/isolation") == "partitioned" and ann.get(f"{TF}/partition-id"):
            hw = self._catalog.model(gpus[0].model)
            t = hw.template(str(ann[f"{TF}/partition-id"])) if hw is not None else None
            if t is not None:
                book_t, book_v = t.resources(cap_t)
        elif not ann.get(f"{TF}/tflops-request") and ann.get(f"{TF}/compute-percent-request"):
            book_t = float(int(req_t))  # the allocator truncates a percent to whole TFLOPS
        # upstream recorder: requests plus the over-request share of limits, per device, × devices
        per_t, per_g, ratio = self._pricing.get(pool, {}).get(qos, (0.0, 0.0, 0.0))
        gib_req, gib_lim = req_v / (1 << 30), lim_v / (1 << 30)
        over = max(lim_t - req_t, 0.0) * per_t + max(gib_lim - gib_req, 0.0) * per_g
        uid = meta.get("uid") or meta.get("name", "")
        return _Worker(
            uid=uid,
            name=meta.get("name", ""),
            namespace=ns,
            workload=workload,
            pool=pool,
            node=spec.get("nodeName") or gpus[0].node,
            qos=qos,
            gpus=gpus,
            gpu_count=gpu_count,
            req_t=req_t,
            lim_t=lim_t,
            req_v=req_v,
            lim_v=lim_v,
            book_t=book_t,
            book_v=book_v,
            created=_created(pod),
            ready=any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
            ),
            params=profile_params(profile, entity_key(self.seed, "workload", wl_key)),
            key=entity_key(self.seed, "worker", uid),
            tz=self._tz.get(pool, _UTC),
            cost_per_second=(req_t * per_t + gib_req * per_g + over * ratio) * gpu_count,
        )

    def _node(self, obj: dict[str, Any]) -> _Node:
        """A GPUNode with its GPU prices and a cumulative allocation curve over its workers' start times."""
        meta, status = obj.get("metadata") or {}, obj.get("status") or {}
        labels = meta.get("labels") or {}
        name = meta["name"]
        pool = labels.get(f"{TF}/managed-by") or next(
            (k.removeprefix(f"{TF}/pool-") for k in labels if k.startswith(f"{TF}/pool-")), "unknown"
        )
        gpus = self._gpus_of(name)
        node = _Node(
            name=name,
            pool=pool,
            phase=str(status.get("phase", "Unknown")),
            created=_created(obj),
            total_t=_q(status.get("totalTFlops")),
            total_v=_q(status.get("totalVRAM")),
            virt_t=_q(status.get("virtualTFlops")),
            virt_v=_q(status.get("virtualVRAM")),
            gpu_count=int(status.get("totalGPUs") or len(gpus)),
            price_per_hour=sum(g.price_per_hour for g in gpus),
        )
        cum_t = cum_v = 0.0
        for w in sorted((w for g in gpus for w in g.workers if w.gpus[0] is g), key=lambda w: w.created):
            cum_t += w.book_t * w.gpu_count
            cum_v += w.book_v * w.gpu_count
            node.alloc_times.append(w.created)
            node.alloc_t.append(cum_t)
            node.alloc_v.append(cum_v)
        return node

    def _gpus_of(self, node: str) -> list[_Gpu]:
        return (self._by_node or {}).get(node, [])

    # -- time grid ---------------------------------------------------------------------------

    def _grid(self, start: datetime, end: datetime) -> Iterator[int]:
        """Sample times t (epoch seconds) with start <= t < end, oldest first."""
        lo, hi = _epoch(start), _epoch(end)
        t = self.start
        if lo > t:
            t += math.ceil((lo - t) / self.step) * self.step
        while t < hi and t <= self.end:
            yield t
            t += self.step

    def _latest(self, now: datetime, lookback: timedelta) -> int | None:
        """The last sample time at or before `now`, if it lies within `lookback` and the history."""
        at = _epoch(now)
        t = min(self.end, self.start + math.floor((at - self.start) / self.step) * self.step)
        if t < self.start or t < at - lookback.total_seconds():
            return None
        return t

    def _hours(self, t: int) -> dict[ZoneInfo, float]:
        return {tz: local_hour(t, tz) for tz in self.tzs}

    # -- samples -----------------------------------------------------------------------------

    def _worker_sample(self, w: _Worker, t: int, hours: dict[ZoneInfo, float]) -> tuple[float, int]:
        """(compute % of one device, memory bytes per device) of a worker at t.

        The profile says how much of the request is used; the device caps it at the worker's limit
        and at 100 %, and memory never reaches the VRAM limit.
        """
        hour = hours[w.tz]
        cap_t = w.gpus[0].cap_t
        drift = smooth(w.key, t, 900)  # shared by compute and memory: load moves both
        frac = compute_fraction(w.params, hour, 0.75 * drift + 0.25 * jitter(w.key, t))
        pct = 0.0
        if cap_t > 0:
            pct = min(frac * w.req_t, w.lim_t, cap_t) / cap_t * 100.0
        mem_frac = memory_fraction(w.params, hour, drift)
        mem = int(min(mem_frac * w.req_v, WORKER_MEMORY_CAP * w.lim_v))
        return round(pct, 3), mem

    def _gpu_sample(
        self, g: _Gpu, t: int, hours: dict[ZoneInfo, float], workers: dict[str, tuple[float, int]]
    ) -> tuple[float, int]:
        """(compute %, memory bytes) of a device at t, from its workers' samples."""
        if g.native:
            pct, mem_frac = native_load(g.key, hours[g.tz], wobble(g.key, t))
            return round(pct, 3), int(mem_frac * g.cap_v)
        pct = 0.0
        mem = 0
        any_worker = False
        for w in g.workers:
            sample = workers.get(w.uid)
            if sample is not None:
                any_worker = True
                pct += sample[0]
                mem += sample[1]
        if not any_worker:
            return 0.0, 0
        return round(min(pct, 100.0), 3), min(mem + GPU_DRIVER_OVERHEAD_BYTES, g.cap_v)

    def _workers_at(self, t: int, hours: dict[ZoneInfo, float]) -> dict[str, tuple[float, int]]:
        return {w.uid: self._worker_sample(w, t, hours) for w in self.workers if w.created <= t}

    # -- MetricsPort ---------------------------------------------------------------------------

    @functools.cached_property
    def columns(self) -> SimColumns:
        """The same index as numpy columns, for the aggregate queries (`aggregate.py`)."""
        return SimColumns(self)

    def latest_gpu_usage(self, now: datetime, lookback: timedelta = DEFAULT_LOOKBACK) -> dict[str, GPUUsage]:
        """GPU name → its sample at the last step <= now (none if that is older than `lookback`)."""
        self._sync()
        t = self._latest(now, lookback)
        if t is None:
            return {}
        ts = datetime.fromtimestamp(t, UTC)
        gpus, _workers = aggregate.latest(self.columns, t)
        out: dict[str, GPUUsage] = {}
        for i, pct, mem in gpus:
            g = self.gpus[i]
            out[g.name] = GPUUsage(gpu=g.name, node=g.node, compute_percent=pct, memory_bytes=mem, ts=ts)
        return out

    def latest_worker_usage(
        self, now: datetime, lookback: timedelta = DEFAULT_LOOKBACK
    ) -> dict[tuple[str, str], WorkerUsage]:
        """(namespace, pod) → the worker's sample at the last step <= now, summed over its devices."""
        self._sync()
        t = self._latest(now, lookback)
        if t is None:
            return {}
        ts = datetime.fromtimestamp(t, UTC)
        _gpus, workers = aggregate.latest(self.columns, t)
        out: dict[tuple[str, str], WorkerUsage] = {}
        for i, pct, mem in workers:
            w = self.workers[i]
            n = len(w.gpus)
            out[(w.namespace, w.name)] = WorkerUsage(
                namespace=w.namespace,
                pod=w.name,
                workload=w.workload,
                compute_percent=pct,
                tflops=pct / 100.0 * w.gpus[0].cap_t * n,
                memory_bytes=mem * n,
                ts=ts,
            )
        return out

    def usage_histograms(self, q: HistogramQuery) -> list[PodBucket]:
        """The autoscaler's history window aggregated as the store does, from numpy blocks (no rows)."""
        return aggregate.pod_buckets(self.columns, q)

    def vram_windows(self, q: HistogramQuery) -> list[VramWindow]:
        """Each pod's VRAM peak per day of a long history window, streamed from the rows (a few
        numbers per pod and day held, not the rows)."""
        return histograms.vram_windows(q, self.rows("tf_worker_usage", q.start, q.end))

    def usage_histogram_arrays(self, q: HistogramQuery) -> PodBucketArrays:
        """`usage_histograms` as columns (`AutoscaleState.add_pod_bucket_arrays`)."""
        return aggregate.pod_bucket_arrays(self.columns, q)

    def object_history(self, q: ObjectHistoryQuery) -> ObjectSeries:
        """One node's or GPU's bucketed allocated and used TFLOPS, from its own samples only."""
        self._sync()
        return object_series(self, q)

    def rows(self, table: MetricsTable, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        """Rows of `table` with start <= ts < end, ordered by ts; generated on demand."""
        emit = {
            "tf_gpu_usage": self._gpu_rows,
            "tf_worker_usage": self._worker_usage_rows,
            "tf_node_metrics": self._node_rows,
            "tf_worker_resources": self._worker_resource_rows,
        }.get(table)
        if emit is None:
            raise ValueError(f"unknown metrics table {table!r}")
        self._sync()
        for t in self._grid(start, end):
            yield from emit(t, datetime.fromtimestamp(t, UTC))

    def _gpu_rows(self, t: int, ts: datetime) -> Iterator[dict[str, Any]]:
        hours = self._hours(t)
        workers = self._workers_at(t, hours)
        for g in self.gpus:
            if g.created > t:
                continue
            pct, mem = self._gpu_sample(g, t, hours, workers)
            noise = jitter(g.key, t)
            yield {
                "uuid": g.name,
                "node": g.node,
                "pool": g.pool,
                "compute_percentage": pct,
                "memory_bytes": mem,
                "memory_percentage": 0.0,
                "compute_tflops": 0.0,
                "temperature": round(31.0 + 0.5 * pct + 1.5 * noise, 1),
                "power_usage": round(g.idle_w + (g.tdp - g.idle_w) * pct / 100.0 + 4.0 * noise, 1),
                "rx": round(40.0 + 180.0 * pct * (1.0 + 0.2 * noise), 1),
                "tx": round(25.0 + 120.0 * pct * (1.0 - 0.2 * noise), 1),
                "ts": ts,
            }

    def workload_rows(
        self, namespace: str, workload: str, start: datetime, end: datetime
    ) -> Iterator[dict[str, Any]]:
        """`rows("tf_worker_usage", …)` of one workload's workers only (a workload's history)."""
        self._sync()
        mine = [w for w in self.workers if w.namespace == namespace and w.workload == workload]
        for t in self._grid(start, end):
            yield from self._worker_usage_rows(t, datetime.fromtimestamp(t, UTC), mine)

    def _worker_usage_rows(
        self, t: int, ts: datetime, workers: Sequence[_Worker] | None = None
    ) -> Iterator[dict[str, Any]]:
        hours = self._hours(t)
        for w in self.workers if workers is None else workers:
            if w.created > t:
                continue
            pct, mem = self._worker_sample(w, t, hours)
            mem_pct = round(mem / w.lim_v * 100.0, 3) if w.lim_v > 0 else 0.0
            for g in w.gpus:
                yield {
                    "workload": w.workload,
                    "worker": w.uid,
                    "pod_name": w.name,
                    "namespace": w.namespace,
                    "pool": w.pool,
                    "node": w.node,
                    "uuid": g.name,
                    "compute_percentage": pct,
                    "memory_bytes": mem,
                    "memory_percentage": mem_pct,
                    "compute_tflops": 0.0,
                    "ts": ts,
                }

    def _node_rows(self, t: int, ts: datetime) -> Iterator[dict[str, Any]]:
        for n in self.nodes:
            if n.created > t:
                continue
            i = bisect.bisect_right(n.alloc_times, t)
            alloc_t = n.alloc_t[i - 1] if i else 0.0
            alloc_v = n.alloc_v[i - 1] if i else 0.0
            yield {
                "node": n.name,
                "pool": n.pool,
                "phase": n.phase,
                "allocated_tflops": round(alloc_t, 3),
                "allocated_tflops_percent": _pct(alloc_t, n.total_t),
                "allocated_vram_bytes": alloc_v,
                "allocated_vram_percent": _pct(alloc_v, n.total_v),
                "allocated_tflops_percent_virtual": _pct(alloc_t, n.virt_t),
                "allocated_vram_percent_virtual": _pct(alloc_v, n.virt_v),
                "raw_cost": n.price_per_hour * self.step / 3600.0,
                "gpu_count": n.gpu_count,
                "ts": ts,
            }

    def _worker_resource_rows(self, t: int, ts: datetime) -> Iterator[dict[str, Any]]:
        for w in self.workers:
            if w.created > t:
                continue
            yield {
                "worker": w.name,
                "workload": w.workload,
                "pool": w.pool,
                "namespace": w.namespace,
                "qos": w.qos,
                "tflops_request": w.req_t,
                "tflops_limit": w.lim_t,
                "vram_bytes_request": w.req_v,
                "vram_bytes_limit": w.lim_v,
                "gpu_count": w.gpu_count,
                "raw_cost": w.cost_per_second * self.step,
                "ready": w.ready,
                "ts": ts,
            }


def _running_workers(objects: list[dict[str, Any]]) -> frozenset[tuple[str, str, str]]:
    """What the index depends on that a running cluster changes: its Running TensorFusion workers
    (uid, phase, gpu-ids). Status-only changes (capacities recomputed) leave it equal."""
    out = set()
    for o in objects:
        if o.get("kind") != "Pod":
            continue
        meta = o.get("metadata") or {}
        if (meta.get("labels") or {}).get(f"{TF}/component") != "worker":
            continue
        phase = str((o.get("status") or {}).get("phase", ""))
        gpus = str((meta.get("annotations") or {}).get(f"{TF}/gpu-ids", ""))
        out.add((str(meta.get("uid") or meta.get("name", "")), phase, gpus))
    return frozenset(out)
