"""What-if usage: the demand a run replays, generated from the demo's profiles or recorded from a
metrics store, and the `MetricsPort` rows autoscale reads during the run. Missing recorded usage is
*unmeasured*, never idle."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo

import numpy as np

from tftui.engine.autoscale_columns import WorkerColumns
from tftui.engine.state import ClusterState, WorkerView
from tftui.model.usage import SampleInstant, WorkerSample
from tftui.runtime.whatif_cluster import WhatIfCluster
from tftui.sources.ports import MetricsPort
from tftui.sources.sim.cluster import as_utc
from tftui.sources.sim.scenarios import (
    _JITTER_XOR,
    DRIFT,
    IDLE_MAX_FRACTION,
    MEMORY_MAX_FRACTION,
    OVER_REQUEST_RANGE,
    PROFILE_ANNOTATION,
    PROFILES,
    RIGHT_SIZED_RANGE,
    bump,
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


_U64 = np.uint64
_M1, _M2, _M3 = _U64(0xBF58476D1CE4E5B9), _U64(0x94D049BB133111EB), _U64(0x9E3779B97F4A7C15)
_PROFILE_CODES: Final = {"over-request": 0, "idle": 1, "bursty": 2}  # anything else: right-sized


def _units(keys: np.ndarray, n: int) -> np.ndarray:
    """`scenarios.unit(key, n)` of every key (uint64 arithmetic wraps as the Python's `& _MASK`)."""
    x = (keys ^ _U64((n * 0xD1B54A32D192ED03) & 0xFFFFFFFFFFFFFFFF)) + _M3
    x = (x ^ (x >> _U64(30))) * _M1
    x = (x ^ (x >> _U64(27))) * _M2
    return ((x ^ (x >> _U64(31))) >> _U64(11)).astype(np.float64) * (1.0 / (1 << 53))


class DemandColumns:
    """Every workload's demand at one instant in a few numpy operations: `demand_at`'s very floats
    (the same operations in the same order, each rounded alike; the cosines and sines stay
    Python's), for the generated profiles. Recorded usage (`Usage.history`) keeps `demand_at`."""

    def __init__(self, usage: Usage) -> None:
        self.usage = usage
        self._keys: list[str] = []
        self._cols: dict[str, Any] = {}

    def _columns(self, keys: list[str]) -> dict[str, Any]:
        if keys == self._keys:
            return self._cols
        params = self.usage._params
        base = self.usage._base
        zones: dict[ZoneInfo, int] = {}
        rows = []
        for k in keys:
            p, wkey, tz = params[k]
            rows.append(
                (wkey, _PROFILE_CODES.get(p.profile, 3), p.level, p.peak, p.peak_hour, p.mem_level,
                 *base[k], zones.setdefault(tz, len(zones)))
            )  # fmt: skip
        cols = list(zip(*rows, strict=True)) if rows else [()] * 9
        code = np.array(cols[1], dtype=np.int64)
        bursty = np.flatnonzero(code == 2)
        self._keys = list(keys)
        self._cols = {
            "wkey": np.array(cols[0], dtype=np.uint64),
            "over": code == 0, "idle": code == 1, "bursty": bursty, "right": code == 3,
            "level": np.array(cols[2], dtype=np.float64), "peak": np.array(cols[3], dtype=np.float64),
            "peak_hours": [float(cols[4][i]) for i in bursty], "mem_level": np.array(cols[5], dtype=np.float64),
            "base_t": np.array(cols[6], dtype=np.float64), "base_v": np.array(cols[7], dtype=np.float64),
            "zone": np.array(cols[8], dtype=np.int64), "zones": list(zones),
        }  # fmt: skip
        return self._cols

    def at(
        self, state: ClusterState, firsts: Mapping[str, WorkerView], at: Instant
    ) -> dict[str, tuple[float, float] | None]:
        """Workload key → its demand at `at` (`demand_at(usage, state, firsts[key], at, key)`)."""
        usage = self.usage
        if usage.history is not None:
            return {k: demand_at(usage, state, w, at, k) for k, w in firsts.items()}
        keys = list(firsts)
        d0, d1 = self.arrays(state, firsts, at)
        return dict(zip(keys, zip(d0.tolist(), d1.tolist(), strict=True), strict=True))

    def arrays(self, state: ClusterState, firsts: Mapping[str, WorkerView], at: Instant) -> tuple[Any, Any]:
        """`at` as two float64 columns in `firsts`' order (TFLOPS, VRAM), for the generated
        profiles (`Usage.history` None: every demand is known)."""
        usage = self.usage
        assert usage.history is None
        for k, w in firsts.items():
            if k not in usage._params or k not in usage._base:
                usage.demand(state, w, at.t)  # draws the profile (and keeps the base) as demand_at does
        keys = list(firsts)
        c = self._columns(keys)
        if not keys:
            return np.zeros(0), np.zeros(0)
        wkey = c["wkey"]
        a, b = _units(wkey, at.knot), _units(wkey, at.knot + 1)
        j = _units(wkey ^ _U64(_JITTER_XOR), at.minute)
        noise = 0.75 * (2.0 * (a + (b - a) * at.weight) - 1.0) + 0.25 * (2.0 * j - 1.0)
        hours = []
        for tz in c["zones"]:
            hour = at.hours.get(tz)
            if hour is None:
                hour = at.hours[tz] = local_hour(at.t, tz)
            hours.append(hour)
        hour_of = np.array(hours, dtype=np.float64)[c["zone"]]
        diurnal = np.array([0.03 * math.sin(2.0 * math.pi * (h - 9.0) / 24.0) for h in hours])[c["zone"]]
        level = c["level"]
        cf = np.minimum(
            np.maximum(level + diurnal + 0.04 * noise, RIGHT_SIZED_RANGE[0]), RIGHT_SIZED_RANGE[1]
        )
        over = np.minimum(np.maximum(level + 0.04 * noise, OVER_REQUEST_RANGE[0]), OVER_REQUEST_RANGE[1])
        idle = np.minimum(np.maximum(level + 0.003 * noise, 0.0), IDLE_MAX_FRACTION)
        cf = np.where(c["over"], over, np.where(c["idle"], idle, cf))
        mem = c["mem_level"] + 0.03 * noise
        bi = c["bursty"]
        if len(bi):
            hb = hour_of[bi].tolist()
            bumps = np.array([bump(h, ph) for h, ph in zip(hb, c["peak_hours"], strict=True)])
            burst = level[bi] + (c["peak"][bi] - level[bi]) * bumps + 0.03 * noise[bi]
            cf[bi] = np.maximum(burst, 0.01)
            mem[bi] = mem[bi] + 0.2 * bumps
        mf = np.minimum(np.maximum(mem, 0.02), MEMORY_MAX_FRACTION)
        return cf * c["base_t"], mf * c["base_v"]


def recorded_usage(
    metrics: MetricsPort, state: ClusterState, start: datetime, window: timedelta
) -> dict[str, list[float | None]]:
    """Mean TFLOPS per device of each workload per UTC hour of day over `window` before `start`.

    A store that sums per hour (`hourly_usage`) does; from another port's rows, a row's TFLOPS are
    `compute_tflops`, or compute % × the GPU's capacity where it is 0 (none for an unknown GPU).
    """
    sums: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}
    hourly = getattr(metrics, "hourly_usage", None)
    if callable(hourly):
        caps = [(name, g.capacity.tflops) for name, g in state.gpus.items()]
        for ns, wl, hour, total, n in hourly(start - window, start, caps):
            key = f"{ns}/{wl}"
            sums.setdefault(key, [0.0] * 24)[hour % 24] += total
            counts.setdefault(key, [0] * 24)[hour % 24] += n
        return _hourly_means(sums, counts)
    for r in metrics.rows("tf_worker_usage", start - window, start):
        gpu = state.gpus.get(str(r.get("uuid") or ""))
        tfl = r.get("compute_tflops") or 0.0
        if not tfl:
            pct = r.get("compute_percentage")
            if pct is None or gpu is None or gpu.capacity.tflops <= 0:
                continue
            tfl = float(pct) / 100.0 * gpu.capacity.tflops
        ts = r.get("ts") or r.get("greptime_timestamp")
        if not isinstance(ts, datetime):
            continue
        key = f"{r.get('namespace', '')}/{r.get('workload', '')}"
        h = as_utc(ts).hour
        sums.setdefault(key, [0.0] * 24)[h] += float(tfl)
        counts.setdefault(key, [0] * 24)[h] += 1
    return _hourly_means(sums, counts)


def _hourly_means(
    sums: dict[str, list[float]], counts: dict[str, list[int]]
) -> dict[str, list[float | None]]:
    """Each workload's mean per hour; an hour without samples takes the mean of its known hours."""
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
        self.columns = DemandColumns(usage)

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
        firsts: dict[str, WorkerView] = {}
        for w, key, *_ in running:
            firsts.setdefault(key, w)  # its workload's demand is drawn with its first worker
        out: list[SampleInstant] = []
        t0 = -(-int(start.timestamp()) // self.step) * self.step
        for t in range(t0, int(end.timestamp()), self.step):
            ts = datetime.fromtimestamp(t, UTC)
            wants = self.columns.at(state, firsts, Instant(t))
            samples: list[WorkerSample] = []
            for _w, key, known, cap, limit, (ns, workload, pod, gpu_ids) in running:
                d = wants[key]
                if not known or d is None:
                    continue
                used = min(d[0], limit or d[0], cap)
                samples.append((ns, workload, pod, gpu_ids, used / cap * 100.0, int(d[1])))
            out.append((ts, samples))
        return out

    def usage_columns(self, start: datetime, end: datetime) -> WorkerColumns | None:
        """`usage_samples` as columns (`engine.autoscale_columns.add_worker_columns`, which
        `runtime.history.load_usage` prefers): the same values, each worker's by numpy, for the
        generated profiles; None for recorded usage (whose demands may be unknown: the tuples then)."""
        if self.usage.history is not None:
            return None
        state = self.cluster.state()
        running = self._running(state)
        firsts: dict[str, WorkerView] = {}
        for w in running:
            firsts.setdefault(f"{w.namespace}/{w.workload}", w)  # its workload's demand is drawn with it
        index = {k: i for i, k in enumerate(firsts)}
        of = np.array([index[f"{w.namespace}/{w.workload}"] for w in running], dtype=np.int64)
        caps = []
        for w in running:
            gpu = state.gpus.get(w.gpu_ids[0])
            caps.append(gpu.capacity.tflops if gpu is not None else 0.0)
        cap = np.array(caps, dtype=np.float64)
        known = np.array(
            [gpu is not None for gpu in (state.gpus.get(w.gpu_ids[0]) for w in running)], dtype=bool
        )
        known &= cap > 0
        limit = np.array([w.limit.tflops for w in running], dtype=np.float64)
        pods = [(w.namespace, str(w.workload), w.name or w.uid or "", w.gpu_ids) for w in running]
        t0 = -(-int(start.timestamp()) // self.step) * self.step
        grid = range(t0, int(end.timestamp()), self.step)
        pct = np.zeros((len(grid), len(running)))
        mem = np.zeros((len(grid), len(running)), dtype=np.int64)
        safe = np.where(known, cap, 1.0)  # unknown capacity: no sample (and no division by it)
        for i, t in enumerate(grid):
            d0, d1 = self.columns.arrays(state, firsts, Instant(t))
            want, vram = d0[of], d1[of]
            # `min(d[0], limit or d[0], cap)`: Python's min keeps the first of equals, compares with <
            lim = np.where(limit != 0, limit, want)
            used = np.where(lim < want, lim, want)
            used = np.where(cap < used, cap, used)
            pct[i] = used / safe * 100.0
            mem[i] = _ints(vram)
        present = np.broadcast_to(known, pct.shape)
        return WorkerColumns([datetime.fromtimestamp(t, UTC) for t in grid], pods, pct, mem, present)

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


def _ints(x: Any) -> Any:
    """`int()` of each float (truncation toward zero), as int64; `int()` itself (and its error)
    for a value an int64 cannot hold exactly."""
    if len(x) and not (np.isfinite(x).all() and np.abs(x).max() < 2.0**62):
        return np.array([int(v) for v in x.tolist()], dtype=object)
    return np.trunc(x).astype(np.int64)
