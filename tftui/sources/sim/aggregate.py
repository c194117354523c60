"""The demo's aggregate queries answered from `SimColumns` blocks instead of generated rows.

Each function returns exactly what its row-streaming counterpart computes from `SimMetrics.rows`
(`SimStep1`'s step 1 and alert rules, `histograms.pod_buckets`): same groups, same NULL handling,
same NoData cases; sums may differ in the last bits because numpy adds in another order. The row
path stays the reference (other row sources use it; the tests compare both on small demos).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

import numpy as np

from tftui.model.giveway import checkpoint, paced
from tftui.model.metrics import (
    AlertResult,
    AlertRow,
    GPUUsageSummary,
    NoData,
    NodeAllocation,
    WorkloadRequest,
    WorkloadUsage,
    add_usage_group,
)
from tftui.model.usage import HistogramQuery, PodBucket, PodBucketArrays
from tftui.sources.sim.columns import F64, I64, GpuBlock, SimColumns, pct_of

_EPS: Final = timedelta(microseconds=1)
_FRAME_MARGIN: Final = timedelta(minutes=5)  # longer than any rule's window
_BUCKET_SPAN: Final = 1 << 20  # (pod, bucket) packed in one int64: bucket + 1 < 2^20


def _ts(t: datetime) -> float:
    return t.timestamp()


# -- step 1 ----------------------------------------------------------------------------------------


def step1_parts(
    c: SimColumns,
    start: datetime,
    end: datetime,
    capacity: Mapping[str, tuple[float, float]],
    missing: set[str],
) -> tuple[list[NodeAllocation], list[GPUUsageSummary], list[WorkloadRequest], list[WorkloadUsage]]:
    """The four step-1 aggregates over [start, end), as `SimStep1._nodes/_gpus/_requests/_usage`."""
    m = c.m
    ts = c.grid(start, end)
    nw, ng, nn = len(m.workers), len(m.gpus), len(m.nodes)
    w_sum, w_n, w_hi, w_mem = np.zeros(nw), np.zeros(nw, np.int64), np.full(nw, -np.inf), np.zeros(nw)
    g_sum, g_n, g_mem = np.zeros(ng), np.zeros(ng, np.int64), np.zeros(ng)
    n_t, n_v, n_n = np.zeros(nn), np.zeros(nn), np.zeros(nn, np.int64)
    for chunk in c.chunks(ts, max(nw, ng, nn)):
        checkpoint()
        hours = c.hours(chunk)
        wb = c.workers(chunk, hours)
        w_sum += wb.pct.sum(axis=1)
        w_n += wb.alive.sum(axis=1)
        w_hi = np.maximum(w_hi, np.where(wb.alive, wb.pct, -np.inf).max(axis=1, initial=-np.inf))
        w_mem = np.maximum(w_mem, wb.mem.max(axis=1, initial=0.0))
        gb = c.gpus(chunk, hours, wb)
        g_sum += gb.pct.sum(axis=1)
        g_n += gb.alive.sum(axis=1)
        g_mem = np.maximum(g_mem, gb.mem.max(axis=1, initial=0.0))
        alive, at, av = c.nodes(chunk)
        n_t += np.where(alive, pct_of(at, c.n_total_t[:, None]), 0.0).sum(axis=1)
        n_v += np.where(alive, pct_of(av, c.n_total_v[:, None]), 0.0).sum(axis=1)
        n_n += alive.sum(axis=1)

    node_acc: dict[tuple[str, str], list[float]] = {}
    for i, node in paced(enumerate(m.nodes)):
        if n_n[i]:
            a = node_acc.setdefault((node.name, node.pool), [0.0, 0.0, 0.0])
            a[0] += float(n_t[i])
            a[1] += float(n_v[i])
            a[2] += int(n_n[i])
    nodes = [
        NodeAllocation(node=k[0], pool=k[1], tflops_allocated_pct=a[0] / a[2],
                       vram_allocated_pct=a[1] / a[2], samples=int(a[2]))
        for k, a in node_acc.items()
    ]  # fmt: skip

    gpus: list[GPUUsageSummary] = []
    for i, g in paced(enumerate(m.gpus)):
        if not g_n[i]:
            continue
        cap = capacity.get(g.name, (0.0, 0.0))[1]
        peak_bytes = float(g_mem[i])
        gpus.append(
            GPUUsageSummary(node=g.node, uuid=g.name, compute_used_pct=float(g_sum[i]) / int(g_n[i]),
                            vram_peak_pct=peak_bytes / cap * 100.0 if cap > 0 else None,
                            vram_peak_bytes=peak_bytes, samples=int(g_n[i]))
        )  # fmt: skip
    if gpus:  # the simulator writes memory_percentage as 0, like upstream
        missing.add("tf_gpu_usage.memory_percentage")

    req: dict[tuple[str, str], list[float]] = {}
    names: dict[tuple[str, str], set[str]] = {}
    for i, w in paced(enumerate(m.workers)):
        n = int(w_n[i])  # worker_resources has one row per worker and sample, like its usage
        if not n:
            continue
        a = req.setdefault((w.namespace, w.workload), [0.0, 0.0, 0.0, 0.0])
        a[0] += w.req_t * n
        a[1] += w.req_v * n
        a[2] += w.gpu_count * n
        a[3] += n
        names.setdefault((w.namespace, w.workload), set()).add(w.name)
    requests = [
        WorkloadRequest(namespace=k[0], workload=k[1], tflops_request=a[0] / a[3],
                        vram_request_bytes=a[1] / a[3], gpu_count=a[2] / a[3],
                        workers=len(names[k]), samples=int(a[3]))
        for k, a in req.items()
    ]  # fmt: skip

    groups: dict[tuple[str, str, str], list[float]] = {}  # Σ pct, n, max pct, max mem
    for i, w in enumerate(m.workers):
        n = int(w_n[i])
        if not n:
            continue
        for g in w.gpus:
            a = groups.setdefault((w.namespace, w.workload, g.name), [0.0, 0, -math.inf, 0.0])
            a[0] += float(w_sum[i])
            a[1] += n
            a[2] = max(a[2], float(w_hi[i]))
            a[3] = max(a[3], float(w_mem[i]))
    acc: dict[tuple[str, str], list[Any]] = {}  # Σ TFLOPS, n, peak TFLOPS, peak bytes, rows
    for (ns, wl, uuid), (total, rows, hi, mem) in groups.items():
        cap = capacity.get(uuid, (0.0, 0.0))[0]
        if cap <= 0:
            missing.add(f"capacity of {uuid}")
        a = acc.setdefault((ns, wl), [0.0, 0.0, None, None, 0])
        add_usage_group(a, cap, total, int(rows), hi, mem, int(rows))  # compute_tflops is written as 0
    usage = [
        WorkloadUsage(namespace=ns, workload=wl, tflops_avg=a[0] / a[1] if a[1] else None,
                      tflops_peak=a[2], vram_peak_bytes=a[3], samples=int(a[4]))
        for (ns, wl), a in acc.items()
    ]  # fmt: skip
    return nodes, gpus, requests, usage


# -- alerts ----------------------------------------------------------------------------------------


class _Frame:
    """Every sample of the alert replay's span, computed once; each evaluation slices its window."""

    def __init__(self, c: SimColumns, start: datetime, end: datetime) -> None:
        self.c = c
        self.start, self.end = start, end
        self.ts = c.grid(start, end)
        # The workers' samples are made in blocks of BLOCK_CELLS, as step 1 makes them, and only
        # the GPUs' samples and the workers' presence are kept: one block for the whole span (37,000
        # workers × 95 samples at 5,000 nodes) was arrays of 28 MB each, every temporary freshly
        # mapped and faulted in (≈ 2 CPU-s in a report; in blocks ≈ 0.3). Each cell is computed by
        # the same operations either way: the same values, bit for bit.
        shape = (len(c.g_key), len(self.ts))
        pct, mem, alive = np.empty(shape), np.empty(shape), np.empty(shape, dtype=np.bool_)
        self.w_alive = np.empty((len(c.w_key), len(self.ts)), dtype=np.bool_)
        done = 0
        for chunk in c.chunks(self.ts, max(len(c.w_key), len(c.g_key), 1)):
            hours = c.hours(chunk)
            workers = c.workers(chunk, hours)
            block = c.gpus(chunk, hours, workers)
            cols = slice(done, done + len(chunk))
            pct[:, cols], mem[:, cols], alive[:, cols] = block.pct, block.mem, block.alive
            self.w_alive[:, cols] = workers.alive
            done += len(chunk)
        self.g = GpuBlock(alive=alive, pct=pct, mem=mem)
        self._temp: F64 | None = None
        self.n_alive, at, av = c.nodes(self.ts)
        self.n_tp = np.where(self.n_alive, pct_of(at, c.n_total_t[:, None]), 0.0)
        self.n_vp = np.where(self.n_alive, pct_of(av, c.n_total_v[:, None]), 0.0)

    @functools.cached_property
    def pools(self) -> tuple[I64, list[str]]:
        """Each node's pool as an index into the pool names."""
        index: dict[str, int] = {}
        of = np.array([index.setdefault(n.pool, len(index)) for n in self.c.m.nodes], dtype=np.int64)
        return of, list(index)

    @property
    def temperature(self) -> F64:
        if self._temp is None:
            self._temp = self.c.temperature(self.ts, self.g.pct)
        return self._temp

    def window(self, lo: datetime, hi: datetime) -> slice:
        a = int(np.searchsorted(self.ts, _ts(lo), side="left"))
        b = int(np.searchsorted(self.ts, _ts(hi), side="left"))
        return slice(a, b)


def _present(alive: np.ndarray, s: slice) -> bool:
    return bool(alive[:, s].any())


def alert_history(c: SimColumns, rule: str, times: Sequence[datetime]) -> list[AlertResult]:
    """`SimStep1.alert_history` (one `alert_rows` per instant, NoData as there) over one frame."""
    from tftui.sources.greptime import RULES  # here: the autoscale histograms need no SQL client

    spec = RULES.get(rule)
    if spec is None:
        raise ValueError(f"unknown alert rule {rule!r}")
    if not times:
        return []
    start, end = min(times) - spec.window, max(times) + _EPS
    frame = c.cache.get("alerts")  # the rules of one report replay the same span: one frame for all
    if not isinstance(frame, _Frame) or frame.start > start or frame.end < end:
        frame = c.cache["alerts"] = _Frame(c, start - _FRAME_MARGIN, end)

    def one(t: datetime) -> AlertResult:
        checkpoint()
        try:
            return alert_rows(frame, rule, t)
        except NoData as exc:
            return exc

    last = one(times[-1])
    if isinstance(last, NoData):
        return [last] * len(times)
    return [one(t) for t in times[:-1]] + [last]


def _no_rows(rule: str, table: str, now: datetime) -> NoData:
    from tftui.sources.greptime import RULES

    start = (now - RULES[rule].window).replace(tzinfo=None)
    return NoData(f"{rule}: no rows in {table} between {start} and {now.replace(tzinfo=None)} UTC")


def alert_rows(frame: _Frame, rule: str, now: datetime) -> list[AlertRow]:
    """Rows firing `rule` at `now`, as `SimStep1.alert_rows` computes them from the window's rows."""
    from tftui.sources.greptime import RULES, alert_row_key

    spec = RULES[rule]
    thr = float(spec.threshold)
    s = frame.window(now - spec.window, now + _EPS)
    m = frame.c.m
    out: list[AlertRow] = []
    if rule in ("WorkerTFlopsThrottled", "WorkerVRAMSwitchCountIncreasing"):
        if not _present(frame.w_alive, s):
            raise _no_rows(rule, "tf_worker_usage", now)
        col = "compute_throttled_cnt" if rule == "WorkerTFlopsThrottled" else "vram_resumed_cnt"
        raise NoData(f"{rule}: column tf_worker_usage.{col} does not exist (never written)")
    if rule == "WorkerAllocationFailed":
        raise NoData(f"{rule}: table tf_system_metrics does not exist (the simulator does not write it)")
    if rule in ("GPUVRAMFull", "GPUTFlopsFull", "GPUTemperatureHigh", "IdleGPU"):
        g = frame.g
        if not _present(g.alive, s):
            raise _no_rows(rule, "tf_gpu_usage", now)
        if rule == "GPUVRAMFull":
            raise NoData(
                f"{rule}: tf_gpu_usage.memory_percentage is never written (NULL or 0 throughout the window)"
            )
        alive = g.alive[:, s]
        if rule == "IdleGPU":
            n = alive.sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                compute = g.pct[:, s].sum(axis=1) / n
                mem = g.mem[:, s].sum(axis=1) / n
            for i in np.flatnonzero((n > 0) & (compute < 1) & (thr > 0.0)):
                gpu = m.gpus[i]
                out.append({"node": gpu.node, "pool": gpu.pool, "uuid": gpu.name, "compute": float(compute[i]),
                            "vram": 0.0, "memory_bytes": float(mem[i])})  # fmt: skip
            return sorted(out, key=alert_row_key)
        values = g.pct[:, s] if rule == "GPUTFlopsFull" else frame.temperature[:, s]
        alias = "compute_used" if rule == "GPUTFlopsFull" else "avg_temperature"
        hot = alive & (values > thr)
        n = hot.sum(axis=1)
        total = np.where(hot, values, 0.0).sum(axis=1)
        for i in np.flatnonzero(n):
            gpu = m.gpus[i]
            out.append({"node": gpu.node, "pool": gpu.pool, "uuid": gpu.name, alias: float(total[i] / n[i])})
        return sorted(out, key=alert_row_key)
    if not _present(frame.n_alive, s):
        raise _no_rows(rule, "tf_node_metrics", now)
    if rule == "EmptyGPU":
        nodes = {m.nodes[i].name for i in np.flatnonzero(frame.n_alive[:, s].any(axis=1))}
        busy = {m.workers[i].node for i in np.flatnonzero(frame.w_alive[:, s].any(axis=1))}
        return sorted(({"node": n} for n in nodes - busy), key=alert_row_key)
    values = frame.n_tp if "TFlops" in rule else frame.n_vp
    alias = "tflops_available" if "TFlops" in rule else "vram_available"
    n = frame.n_alive[:, s].sum(axis=1)
    total = values[:, s].sum(axis=1)
    if rule.startswith("Node"):
        with np.errstate(invalid="ignore", divide="ignore"):
            avg = total / n
        for i in np.flatnonzero((n > 0) & (100 - avg < thr)):
            node = m.nodes[i]
            out.append({"node": node.name, "pool": node.pool, alias: 100 - float(avg[i])})
        return sorted(out, key=alert_row_key)
    pool_of, pools = frame.pools
    tot = np.bincount(pool_of, total, len(pools))
    cnt = np.bincount(pool_of, n, len(pools))
    for j in np.flatnonzero(cnt):
        avg_pool = float(tot[j]) / float(cnt[j])
        if 100 - avg_pool < thr:
            out.append({"pool": pools[j], alias: 100 - avg_pool})
    return sorted(out, key=alert_row_key)


# -- autoscale histograms --------------------------------------------------------------------------


def pod_buckets(c: SimColumns, q: HistogramQuery) -> list[PodBucket]:
    """`histograms.pod_buckets(q, metrics.rows("tf_worker_usage", q.start, q.end))`, in blocks."""
    return pod_bucket_arrays(c, q).groups()


def pod_bucket_arrays(c: SimColumns, q: HistogramQuery) -> PodBucketArrays:
    """`pod_buckets` as columns (no object per group)."""
    m = c.m
    caps = {g: float(cap) for g, cap in q.gpu_tflops if cap}
    half = {(ns, wl): float(hl) for ns, wl, hl in q.half_lives}
    first, r1, lr = q.tflops.first, q.tflops.ratio1, q.tflops.log_ratio
    uid_index: dict[str, int] = {}
    w_uid = np.array([uid_index.setdefault(w.uid, len(uid_index)) for w in m.workers], dtype=np.int64)
    # a GPU of unknown capacity gives no TFLOPS sample: bucket −1 (VRAM only), as in the row path
    p_cap = np.array([caps.get(g.name, 0.0) for w in m.workers for g in w.gpus], dtype=np.float64)
    w_hl = np.array([half.get((w.namespace, w.workload), q.default_half_life) for w in m.workers])
    pw = c.p_worker
    parts: list[tuple[np.ndarray, ...]] = []
    offset = 0
    ts_all = c.grid(q.start, q.end)
    for chunk in c.chunks(ts_all, max(len(pw), 1)):
        wb = c.workers(chunk, c.hours(chunk))
        # rows in stream order: time-major, then worker, then device (transpose to (time, pair))
        alive = wb.alive[pw].T
        v = (wb.pct[pw] / 100.0 * p_cap[:, None]).T
        mem = wb.mem[pw].T
        with np.errstate(divide="ignore"):
            raw = np.floor(np.log(v * r1 / first + 1) / lr)
        no_cap = (p_cap <= 0)[None, :]
        bucket = np.where((v < 0) | no_cap, -1, np.where(v < first, 0, raw)).astype(np.int64)
        sel = alive.ravel()
        if not sel.any():
            offset += sel.size
            continue
        if int(bucket.max()) + 1 >= _BUCKET_SPAN:
            raise ValueError("TFLOPS bucket out of range")
        pair = np.broadcast_to(np.arange(len(pw)), alive.shape).ravel()[sel]
        e = np.broadcast_to(chunk.astype(np.float64)[:, None], alive.shape).ravel()[sel]
        key = w_uid[pw[pair]] * _BUCKET_SPAN + bucket.ravel()[sel] + 1
        weight = 2.0 ** ((e - q.ref_unix) / w_hl[pw[pair]])
        order = np.flatnonzero(sel) + offset
        offset += sel.size
        uniq, first_at, inv = np.unique(key, return_index=True, return_inverse=True)
        k = len(uniq)
        lo, hi, mx = np.full(k, np.inf), np.full(k, -np.inf), np.zeros(k)
        np.minimum.at(lo, inv, e)
        np.maximum.at(hi, inv, e)
        np.maximum.at(mx, inv, mem.ravel()[sel])
        parts.append(
            (uniq, np.bincount(inv, weight, k), np.bincount(inv, minlength=k), lo, hi, mx, order[first_at])
        )
    if not parts:
        none = np.zeros(0, dtype=np.int64)
        return PodBucketArrays([], none, none, none.astype(np.float64), none, none.astype(np.float64),
                               none.astype(np.float64), none.astype(np.float64))  # fmt: skip
    keys = np.concatenate([p[0] for p in parts])
    uniq, inv = np.unique(keys, return_inverse=True)
    k = len(uniq)
    weight = np.bincount(inv, np.concatenate([p[1] for p in parts]), k)
    count = np.bincount(inv, np.concatenate([p[2] for p in parts]).astype(np.float64), k)
    lo, hi, mx = np.full(k, np.inf), np.full(k, -np.inf), np.zeros(k)
    order = np.full(k, np.iinfo(np.int64).max)
    np.minimum.at(lo, inv, np.concatenate([p[3] for p in parts]))
    np.maximum.at(hi, inv, np.concatenate([p[4] for p in parts]))
    np.maximum.at(mx, inv, np.concatenate([p[5] for p in parts]))
    np.minimum.at(order, inv, np.concatenate([p[6] for p in parts]))
    tags: dict[int, list[str]] = {}  # uid → min namespace, workload, pod name over its workers
    for i, w in enumerate(m.workers):
        t = tags.get(int(w_uid[i]))
        if t is None:
            tags[int(w_uid[i])] = [w.namespace, w.workload, w.name]
        else:
            t[0], t[1], t[2] = min(t[0], w.namespace), min(t[1], w.workload), min(t[2], w.name)
    uids = list(uid_index)
    names = [(t[0], t[1], t[2] or uids[u]) for u, t in sorted(tags.items())]  # per uid
    index: dict[tuple[str, str, str], int] = {}
    of_uid = np.array([index.setdefault(n, len(index)) for n in names], dtype=np.int64)
    at = np.argsort(order, kind="stable")  # the groups in stream order
    pod_of, bucket_of = np.divmod(uniq[at], _BUCKET_SPAN)
    return PodBucketArrays(
        pods=list(index), pod=of_uid[pod_of], bucket=bucket_of - 1, weight=weight[at],
        count=count[at].astype(np.int64), first=lo[at], last=hi[at], peak_memory=mx[at],
    )  # fmt: skip


# -- latest sample ---------------------------------------------------------------------------------


def latest(c: SimColumns, t: int) -> tuple[list[tuple[int, float, float]], list[tuple[int, float, float]]]:
    """(GPU index, compute %, memory bytes) and (worker index, compute %, memory bytes per device)
    of every entity that exists at sample time t."""
    ts = np.array([t], dtype=np.int64)
    hours = c.hours(ts)
    wb = c.workers(ts, hours)
    gb = c.gpus(ts, hours, wb)
    gpus = [(int(i), float(gb.pct[i, 0]), float(gb.mem[i, 0])) for i in np.flatnonzero(gb.alive[:, 0])]
    workers = [(int(i), float(wb.pct[i, 0]), float(wb.mem[i, 0])) for i in np.flatnonzero(wb.alive[:, 0])]
    return gpus, workers
