"""The demo's samples as numpy blocks: every entity × a run of sample times in a few array operations.

`SimMetrics.rows` builds one dict per sample (a day at 5,000 nodes is ~60 million of them); the
aggregate queries (step 1, the alert rules, the autoscaler's histograms, the latest sample) need
only sums, counts and maxima. `SimColumns` evaluates the very same pure functions of (seed, entity,
time) — the SplitMix64 noise of `scenarios.py`, the profile curves, the caps and roundings of
`usage.py` — over a matrix (entities × times) at once, so those queries cost numpy passes instead of
Python loops. A sample that does not exist (the entity was not created yet) is masked out, never
read as 0.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import numpy as np
import numpy.typing as npt

from tftui.sources.sim.entities import GPU_DRIVER_OVERHEAD_BYTES, WORKER_MEMORY_CAP, SampleIndex, _Node
from tftui.sources.sim.scenarios import (
    IDLE_MAX_FRACTION,
    MEMORY_MAX_FRACTION,
    OVER_REQUEST_RANGE,
    RIGHT_SIZED_RANGE,
    unit,
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
Bool = npt.NDArray[np.bool_]

_C_N: Final = np.uint64(0xD1B54A32D192ED03)
_C_ADD: Final = np.uint64(0x9E3779B97F4A7C15)
_C_M1: Final = np.uint64(0xBF58476D1CE4E5B9)
_C_M2: Final = np.uint64(0x94D049BB133111EB)
_JITTER_XOR: Final = np.uint64(0x5A5A5A5A)
_INV53: Final = 1.0 / (1 << 53)
_PROFILE_CODE: Final = {"over-request": 0, "idle": 1, "bursty": 2, "right-sized": 3}
BLOCK_CELLS: Final = 1 << 19  # entity × time cells per block: 4 MB per float array


def unit_v(key: U64, n: I64) -> F64:
    """`scenarios.unit` over arrays (broadcast), bit for bit: uint64 arithmetic wraps like `& MASK`."""
    with np.errstate(over="ignore"):
        x = key ^ (n.astype(np.uint64) * _C_N)
        x = x + _C_ADD
        x = (x ^ (x >> np.uint64(30))) * _C_M1
        x = (x ^ (x >> np.uint64(27))) * _C_M2
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) * _INV53


def smooth_v(key: U64, t: I64, period: int) -> F64:
    """`scenarios.smooth`: cosine-interpolated hashed knots every `period` seconds."""
    k, r = np.divmod(t, period)
    a = unit_v(key, k)
    b = unit_v(key, k + 1)
    w = (1.0 - np.cos(np.pi * r / period)) * 0.5
    return 2.0 * (a + (b - a) * w) - 1.0


def smooth_grid(key: U64, ts: I64, period: int) -> F64:
    """`smooth_v(key, ts[None, :], period)` with each knot hashed once (keys × knots, not × times).

    The same operations on the same operands, bit for bit: b − a is taken between neighbouring
    knots, and each run of times between two knots broadcasts its knot column instead of gathering
    one per time."""
    k, r = np.divmod(ts, period)
    out = np.empty((len(key), len(ts)), dtype=np.float64)
    if not len(ts):
        return out
    k0 = int(k.min())
    knots = unit_v(key, np.arange(k0, int(k.max()) + 2, dtype=np.int64)[None, :])
    step = knots[:, 1:] - knots[:, :-1]
    w = (1.0 - np.cos(np.pi * r / period)) * 0.5
    edges = [0, *(np.flatnonzero(np.diff(k)) + 1).tolist(), len(ts)]
    for lo, hi in itertools.pairwise(edges):  # a run of times with the same knot pair
        j = int(k[lo]) - k0
        seg = out[:, lo:hi]
        np.multiply(step[:, j : j + 1], w[lo:hi], out=seg)
        seg += knots[:, j : j + 1]
    out *= 2.0
    out -= 1.0
    return out


def jitter_v(key: U64, t: I64) -> F64:
    """`scenarios.jitter`: per-minute noise in [-1, 1]."""
    return 2.0 * unit_v(key ^ _JITTER_XOR, t // 60) - 1.0


def quarter_jitter(key: U64, t: I64) -> F64:
    """`0.25 * jitter_v(key, t)`, bit for bit, hashed in place over the block.

    unit = y·2⁻⁵³ for an integer y < 2⁵³, so 0.25·(2·unit − 1) = y·2⁻⁵⁴ − 0.25 with every step
    exact (scalings by powers of two, and a difference that is representable)."""
    with np.errstate(over="ignore"):
        x = (key ^ _JITTER_XOR) ^ ((t // 60).astype(np.uint64) * _C_N)
        x += _C_ADD
        tmp = x >> np.uint64(30)
        x ^= tmp
        x *= _C_M1
        np.right_shift(x, np.uint64(27), out=tmp)
        x ^= tmp
        x *= _C_M2
        np.right_shift(x, np.uint64(31), out=tmp)
        x ^= tmp
        np.right_shift(x, np.uint64(11), out=x)
    out = x.astype(np.float64)
    out *= 2.0**-54
    out -= 0.25
    return out


def _bump(hour: F64, peak_hour: F64) -> F64:
    c = (1.0 + np.cos(2.0 * np.pi * (hour - peak_hour) / 24.0)) * 0.5
    return c * c * c


def _clip(x: F64, lo: float, hi: float) -> F64:
    return np.minimum(np.maximum(x, lo), hi)


@dataclass(frozen=True, slots=True)
class WorkerBlock:
    """Per worker × time: alive (created by then), compute % of one device, memory bytes per device."""

    alive: Bool
    pct: F64
    mem: F64


@dataclass(frozen=True, slots=True)
class GpuBlock:
    """Per GPU × time: alive, compute %, memory bytes (as `_gpu_sample`)."""

    alive: Bool
    pct: F64
    mem: F64


class SimColumns:
    """Array view of a `SimMetrics` index: the constants of every worker, GPU and node as columns."""

    def __init__(self, metrics: SampleIndex) -> None:
        self.m = metrics
        self.cache: dict[str, object] = {}  # the aggregates' reusable blocks (aggregate.py)
        self._mem_cap = WORKER_MEMORY_CAP
        self._overhead = float(GPU_DRIVER_OVERHEAD_BYTES)
        ws, gs, ns = metrics.workers, metrics.gpus, metrics.nodes
        tzs = sorted(metrics.tzs, key=str)
        self.tzs = tzs
        tz_index = {tz: i for i, tz in enumerate(tzs)}
        gpu_index = {id(g): i for i, g in enumerate(gs)}
        f = np.float64
        self.w_key = np.array([w.key for w in ws], dtype=np.uint64)
        self.w_created = np.array([w.created for w in ws], dtype=np.int64)
        self.w_tz = np.array([tz_index[w.tz] for w in ws], dtype=np.int64)
        self.w_cap = np.array([w.gpus[0].cap_t for w in ws], dtype=f)
        self._all_caps = bool((self.w_cap > 0).all())
        self.w_req_t = np.array([w.req_t for w in ws], dtype=f)
        self.w_lim_t = np.array([w.lim_t for w in ws], dtype=f)
        self.w_req_v = np.array([w.req_v for w in ws], dtype=f)
        self.w_lim_v = np.array([w.lim_v for w in ws], dtype=f)
        self.w_profile = np.array([_PROFILE_CODE.get(w.params.profile, 3) for w in ws], dtype=np.int64)
        self.w_level = np.array([w.params.level for w in ws], dtype=f)
        self.w_peak = np.array([w.params.peak for w in ws], dtype=f)
        self.w_peak_hour = np.array([w.params.peak_hour for w in ws], dtype=f)
        self.w_mem_level = np.array([w.params.mem_level for w in ws], dtype=f)
        self._by_profile = [(c, np.flatnonzero(self.w_profile == c)) for c in range(4)]
        self._by_profile = [(c, idx) for c, idx in self._by_profile if len(idx)]
        # (worker, device) pairs in row order: one tf_worker_usage row each, and a GPU's workers
        pairs = [(i, gpu_index[id(g)]) for i, w in enumerate(ws) for g in w.gpus]
        self.p_worker = np.array([p[0] for p in pairs], dtype=np.int64)
        self.p_gpu = np.array([p[1] for p in pairs], dtype=np.int64)
        # the pairs grouped by GPU (stable: each GPU's workers in order), as slots: slot k holds the
        # k-th worker of every GPU that has more than k, so a GPU's sum is its workers added in order
        by_gpu = np.argsort(self.p_gpu, kind="stable")
        gw_worker, gw_gpu = self.p_worker[by_gpu], self.p_gpu[by_gpu]
        _gpus, starts, counts = np.unique(gw_gpu, return_index=True, return_counts=True)
        rank = np.arange(len(gw_gpu)) - np.repeat(starts, counts)
        self._slots = [
            (gw_gpu[rank == k], gw_worker[rank == k]) for k in range(int(rank.max(initial=-1)) + 1)
        ]
        self.g_key = np.array([g.key for g in gs], dtype=np.uint64)
        self.g_created = np.array([g.created for g in gs], dtype=np.int64)
        self.g_tz = np.array([tz_index[g.tz] for g in gs], dtype=np.int64)
        self.g_native = np.array([g.native for g in gs], dtype=np.bool_)
        self.g_cap_v = np.array([g.cap_v for g in gs], dtype=f)
        self.g_native_level = 45.0 + 30.0 * unit_v(self.g_key, np.full(len(gs), 7, dtype=np.int64))
        self.g_native_mem = 0.45 + 0.3 * unit_v(self.g_key, np.full(len(gs), 8, dtype=np.int64))
        self.n_created = np.array([n.created for n in ns], dtype=np.int64)
        self._node_events(ns)

    def _node_events(self, nodes: list[_Node]) -> None:
        """Every node's allocation steps in one sorted array, keyed (node, time), for one searchsorted."""
        self.n_total_t = np.array([n.total_t for n in nodes], dtype=np.float64)
        self.n_total_v = np.array([n.total_v for n in nodes], dtype=np.float64)
        self.n_virt_t = np.array([n.virt_t for n in nodes], dtype=np.float64)
        self.n_virt_v = np.array([n.virt_v for n in nodes], dtype=np.float64)
        keys: list[tuple[int, int]] = [(i, t) for i, n in enumerate(nodes) for t in n.alloc_times]
        self._ev_node = np.array([k[0] for k in keys], dtype=np.int64)
        self._ev_time = np.array([k[1] for k in keys], dtype=np.int64)
        # cumulative values per node, with a 0 in front of each node's run (index = events before)
        self._ev_t = np.array([v for n in nodes for v in n.alloc_t], dtype=np.float64)
        self._ev_v = np.array([v for n in nodes for v in n.alloc_v], dtype=np.float64)
        lo = min(int(self._ev_time.min()) if len(keys) else 0, 0)
        self._ev_lo = lo
        self._ev_span = (int(self._ev_time.max()) if len(keys) else 0) - lo + (1 << 33)
        self._ev_sorted = self._ev_node * self._ev_span + (self._ev_time - lo)
        self._ev_first = np.searchsorted(self._ev_sorted, np.arange(len(nodes)) * self._ev_span)

    # -- time --------------------------------------------------------------------------------

    def grid(self, start: datetime, end: datetime) -> I64:
        """Sample times t with start <= t < end within the history (as `SimMetrics._grid`)."""
        m = self.m
        lo, hi = start.astimezone(UTC).timestamp(), end.astimezone(UTC).timestamp()
        t0 = m.start
        if lo > t0:
            t0 += int(np.ceil((lo - t0) / m.step)) * m.step
        ts = np.arange(t0, m.end + 1, m.step, dtype=np.int64)
        return ts[ts < hi]

    def chunks(self, ts: I64, width: int) -> Iterator[I64]:
        """`ts` in runs short enough that a block of `width` entities stays under BLOCK_CELLS."""
        n = max(1, BLOCK_CELLS // max(width, 1))
        for i in range(0, len(ts), n):
            yield ts[i : i + n]

    def hours(self, ts: I64) -> F64:
        """Local hour of day per timezone × time (offsets looked up once per distinct hour)."""
        out = np.empty((len(self.tzs), len(ts)), dtype=np.float64)
        for i, tz in enumerate(self.tzs):
            offsets: dict[int, int] = {}
            off = np.empty(len(ts), dtype=np.int64)
            for j, t in enumerate(ts.tolist()):
                # DST changes fall on whole quarter hours: one lookup per quarter hour is exact
                q = t - t % 900
                o = offsets.get(q)
                if o is None:
                    delta = tz.utcoffset(datetime.fromtimestamp(t, UTC))
                    o = offsets[q] = int(delta.total_seconds()) if delta is not None else 0
                off[j] = o
            out[i] = ((ts + off) % 86400) / 3600.0
        return out

    # -- samples -----------------------------------------------------------------------------

    def workers(self, ts: I64, hours: F64) -> WorkerBlock:
        """`SimMetrics._worker_sample` for every worker at every t in `ts`.

        Each profile's curve is evaluated on its own workers only (`_by_profile`), and the 15-minute
        knots of the drift are hashed once per knot, not once per sample."""
        t = ts[None, :]
        key = self.w_key[:, None]
        drift = smooth_grid(key, ts, 900)
        noise = 0.75 * drift
        noise += quarter_jitter(key, t)
        frac = np.empty_like(noise)
        mem_frac = 0.03 * drift
        mem_frac += self.w_mem_level[:, None]
        for code, idx in self._by_profile:
            level = self.w_level[idx, None]
            nz = noise[idx]
            if code == 0:
                frac[idx] = _clip(level + 0.04 * nz, *OVER_REQUEST_RANGE)
            elif code == 1:
                frac[idx] = _clip(level + 0.003 * nz, 0.0, IDLE_MAX_FRACTION)
            elif code == 2:
                bump = _bump(hours[self.w_tz[idx]], self.w_peak_hour[idx, None])
                frac[idx] = np.maximum(level + (self.w_peak[idx, None] - level) * bump + 0.03 * nz, 0.01)
                mem_frac[idx] += 0.2 * bump
            else:  # the diurnal term depends on the timezone and time only: once per timezone
                diurnal = 0.03 * np.sin(2.0 * np.pi * (hours - 9.0) / 24.0)
                x = diurnal[self.w_tz[idx]]
                x += level  # (level + diurnal) + 0.04·noise, in that order
                nz *= 0.04
                x += nz
                frac[idx] = _clip(x, *RIGHT_SIZED_RANGE)
        np.multiply(frac, self.w_req_t[:, None], out=frac)
        np.minimum(frac, self.w_lim_t[:, None], out=frac)
        cap = self.w_cap[:, None]
        used = np.minimum(frac, cap, out=frac)
        if self._all_caps:  # no device without capacity: nothing to mask
            used /= cap
            used *= 100.0
            pct = np.round(used, 3, out=used)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                pct = np.round(np.where(cap > 0, used / cap * 100.0, 0.0), 3)
        mem_frac = _clip(mem_frac, 0.02, MEMORY_MAX_FRACTION)
        np.multiply(mem_frac, self.w_req_v[:, None], out=mem_frac)
        mem = np.trunc(
            np.minimum(mem_frac, self._mem_cap * self.w_lim_v[:, None], out=mem_frac), out=mem_frac
        )
        alive = self.w_created[:, None] <= t
        young = np.flatnonzero(self.w_created > ts.min()) if len(ts) else np.arange(0)
        if len(young):  # only workers created inside the block have samples that do not exist yet
            pct[young] = np.where(alive[young], pct[young], 0.0)
            mem[young] = np.where(alive[young], mem[young], 0.0)
        return WorkerBlock(alive=alive, pct=pct, mem=mem)

    def gpus(self, ts: I64, hours: F64, w: WorkerBlock) -> GpuBlock:
        """`SimMetrics._gpu_sample` for every GPU at every t: its workers' sum, or a native load."""
        g = len(self.g_key)
        shape = (g, len(ts))
        pct_sum = np.zeros(shape)
        mem_sum = np.zeros(shape)
        present = np.zeros(shape, dtype=np.int64)
        for k, (at, ws) in enumerate(self._slots):  # each GPU at most once per slot: no collisions
            if k == 0:  # every GPU with workers: its first worker's sample is the sum so far
                pct_sum[at] = w.pct[ws]
                mem_sum[at] = w.mem[ws]
                present[at] = w.alive[ws]
            else:
                pct_sum[at] += w.pct[ws]
                mem_sum[at] += w.mem[ws]
                present[at] += w.alive[ws]
        pct = np.where(present > 0, np.round(np.minimum(pct_sum, 100.0), 3), 0.0)
        cap_v = self.g_cap_v[:, None]
        mem = np.where(present > 0, np.minimum(mem_sum + self._overhead, cap_v), 0.0)
        if self.g_native.any():
            idx = np.flatnonzero(self.g_native)
            t = ts[None, :]
            key = self.g_key[idx, None]
            noise = 0.75 * smooth_v(key, t, 900) + 0.25 * jitter_v(key, t)
            hour = hours[self.g_tz[idx]]
            load = (
                self.g_native_level[idx, None]
                + 10.0 * np.sin(2.0 * np.pi * (hour - 10.0) / 24.0)
                + 6.0 * noise
            )
            frac = _clip(self.g_native_mem[idx, None] + 0.02 * noise, 0.05, 0.95)
            pct[idx] = np.round(_clip(load, 1.0, 100.0), 3)
            mem[idx] = np.trunc(frac * cap_v[idx])
        alive = self.g_created[:, None] <= ts[None, :]
        return GpuBlock(alive=alive, pct=np.where(alive, pct, 0.0), mem=np.where(alive, mem, 0.0))

    def temperature(self, ts: I64, pct: F64) -> F64:
        """The `temperature` column of tf_gpu_usage for the GPUs × `ts` of `pct`."""
        noise = jitter_v(self.g_key[:, None], ts[None, :])
        return np.round(31.0 + 0.5 * pct + 1.5 * noise, 1)

    def nodes(self, ts: I64) -> tuple[Bool, F64, F64]:
        """(alive, allocated TFLOPS, allocated VRAM bytes) per node × time: the step curve at t."""
        n = len(self.n_created)
        node = np.arange(n, dtype=np.int64)[:, None]
        query = node * self._ev_span + (ts[None, :] - self._ev_lo)
        i = np.searchsorted(self._ev_sorted, query, side="right")  # events of this node at or before t
        has = i > self._ev_first[:, None]
        j = np.maximum(i - 1, 0)
        alloc_t = np.where(has, self._ev_t[j] if len(self._ev_t) else 0.0, 0.0)
        alloc_v = np.where(has, self._ev_v[j] if len(self._ev_v) else 0.0, 0.0)
        alive = self.n_created[:, None] <= ts[None, :]
        return alive, alloc_t, alloc_v


def pct_of(part: F64, whole: F64) -> F64:
    """`usage._pct` over arrays: round(part / whole × 100, 3), 0 where whole is not positive."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(whole > 0, np.round(part / whole * 100.0, 3), 0.0)


def check_unit(key: int, n: int) -> bool:
    """`unit_v` agrees with `scenarios.unit` at one point (a cheap self-test for the bench)."""
    got = float(unit_v(np.array([key], dtype=np.uint64), np.array([n], dtype=np.int64))[0])
    return got == unit(key, n)
