"""What-if usage: the demand a run replays, generated from the demo's profiles or recorded from a
metrics store, and the `MetricsPort` rows autoscale reads during the run. Missing recorded usage is
*unmeasured*, never idle."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tftui.engine.state import ClusterState, WorkerView
from tftui.model.usage import SampleInstant, WorkerSample
from tftui.runtime.whatif_cluster import WhatIfCluster
from tftui.sources.ports import MetricsPort
from tftui.sources.sim.cluster import as_utc
from tftui.sources.sim.scenarios import (
    DRIFT,
    PROFILE_ANNOTATION,
    PROFILES,
    compute_fraction,
    entity_key,
    local_hour,
    memory_fraction,
    pool_timezone,
    profile_params,
    smooth_weight,
    unit,
    wobble,
    wobble_at,
)

JSON = dict[str, Any]


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


class Instant:
    """What every workload's demand at epoch second `t` shares (`Usage.demand` computes it per call):
    the noise's knot, interpolation weight and minute, and the local hour per time zone."""

    __slots__ = ("hours", "knot", "minute", "t", "weight")

    def __init__(self, t: int) -> None:
        self.t = t
        self.knot, r = divmod(t, DRIFT)
        self.weight = smooth_weight(r, DRIFT)
        self.minute = t // 60
        self.hours: dict[ZoneInfo, float] = {}


def demand_at(
    usage: Usage, state: ClusterState, w: WorkerView, at: Instant, key: str
) -> tuple[float, float] | None:
    """`usage.demand(state, w, at.t)`, the same floats, with what the instant shares computed once
    (`scenarios.wobble_at`); `key` is the worker's workload key (namespace/workload)."""
    params = usage._params.get(key)
    if usage.history is not None or params is None:
        return usage.demand(state, w, at.t)  # recorded usage, or the workload's first demand
    base_t, base_v = usage._base.get(key) or usage.base(w)
    p, wkey, tz = params
    hour = at.hours.get(tz)
    if hour is None:
        hour = at.hours[tz] = local_hour(at.t, tz)
    noise = wobble_at(wkey, at.knot, at.weight, at.minute)
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

    def _running(self, state: ClusterState) -> list[WorkerView]:
        return [w for w in state.workers.values() if w.phase == "Running" and w.gpu_ids and not w.terminating]

    def usage_samples(self, start: datetime, end: datetime) -> list[SampleInstant]:
        """The rows of `rows("tf_worker_usage", start, end)` as per-worker tuples, for
        `AutoscaleState.add_worker_samples` (`runtime.history.load_usage` prefers them): the same
        values, computed once per workload and instant (its workers want the same) and without a
        dict per row."""
        state = self.cluster.state()
        # per worker, what every instant reuses: its workload key, GPU capacity (0: unknown) and the
        # parts of its sample that do not change
        running = []
        for w in self._running(state):
            gpu = state.gpus.get(w.gpu_ids[0])
            cap = gpu.capacity.tflops if gpu is not None else 0.0
            known = gpu is not None and cap > 0
            ident = (w.namespace, str(w.workload), w.name or w.uid or "", w.gpu_ids)
            running.append((w, f"{w.namespace}/{w.workload}", known, cap, w.limit.tflops, ident))
        usage = self.usage
        out: list[SampleInstant] = []
        t0 = -(-int(start.timestamp()) // self.step) * self.step
        for t in range(t0, int(end.timestamp()), self.step):
            ts = datetime.fromtimestamp(t, UTC)
            at = Instant(t)
            wants: dict[str, tuple[float, float] | None] = {}
            samples: list[WorkerSample] = []
            for w, key, known, cap, limit, (ns, workload, pod, gpu_ids) in running:
                if key in wants:
                    d = wants[key]
                else:
                    d = wants[key] = demand_at(usage, state, w, at, key)
                if not known or d is None:
                    continue
                used = min(d[0], limit or d[0], cap)
                samples.append((ns, workload, pod, gpu_ids, used / cap * 100.0, int(d[1])))
            out.append((ts, samples))
        return out

    def rows(self, table: str, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        if table != "tf_worker_usage":
            return
        state = self.cluster.state()
        running = self._running(state)
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
