"""`usage_histograms` over a stream of rows: the store-side aggregation, done where the rows are.

GreptimeMetrics asks the store for the autoscaler's per (pod, TFLOPS bucket) sums
(`HistogramQuery` → `PodBucket`s); a source that generates its rows (the simulator, a dump) can
answer the same question by streaming them once, holding a few numbers per pod and bucket instead
of the whole window (5,000 demo nodes: gigabytes of rows). Same semantics as the SQL, row for row:
TFLOPS = `compute_tflops`, or `compute_percentage` / 100 × the GPU's TFLOPS when it is 0 (or
NULL); negative or missing TFLOPS (NULL %, a GPU of unknown capacity) → bucket −1 (VRAM only);
grouped by the `worker` tag (the pod UID), the namespace, workload and pod name taken with min();
NULL memory is no VRAM sample (left out of the VRAM count, times and peak).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from tftui.model.numbers import MAX_FINITE
from tftui.model.usage import HistogramQuery, PodBucket, VramWindow

__all__ = ["pod_buckets", "vram_windows"]


def _min(a: Any, b: Any) -> Any:
    if a is None:
        return b
    return a if b is None or a <= b else b


def pod_buckets(q: HistogramQuery, rows: Iterable[Mapping[str, Any]]) -> list[PodBucket]:
    """Rows in [q.start, q.end) aggregated as `GreptimeMetrics.usage_histograms` does in SQL."""
    caps = {g: float(c) for g, c in q.gpu_tflops if c}
    half = {(ns, wl): float(hl) for ns, wl, hl in q.half_lives}
    first, r1, lr = q.tflops.first, q.tflops.ratio1, q.tflops.log_ratio
    # (worker, bucket) → [ns, wl, pod, weight, n, lo, hi, peak mem, mem n, mem lo, mem hi]
    groups: dict[tuple[str, int], list[Any]] = {}
    for r in rows:
        ts = r["ts"]
        e = ts.timestamp() if isinstance(ts, datetime) else float(ts) / 1000.0
        ns, wl = r.get("namespace"), r.get("workload")
        v = r.get("compute_tflops")
        if not v and "compute_percentage" in r:  # NULL %, or a GPU of unknown capacity: no sample
            pct, cap = r.get("compute_percentage"), caps.get(r.get("uuid") or "")
            v = None if pct is None or not cap else pct / 100.0 * cap
        if v is None or v < 0:
            bucket = -1
        else:
            bucket = 0 if v < first else math.floor(math.log(v * r1 / first + 1) / lr)
        hl = half.get((ns, wl), q.default_half_life)  # type: ignore[arg-type]
        key = (str(r.get("worker") or ""), bucket)
        g = groups.get(key)
        if g is None:
            g = groups[key] = [ns, wl, r.get("pod_name"), 0.0, 0, e, e, None, 0, None, None]
        else:
            g[0], g[1], g[2] = _min(g[0], ns), _min(g[1], wl), _min(g[2], r.get("pod_name"))
            g[5], g[6] = min(g[5], e), max(g[6], e)
        g[3] += 2.0 ** ((e - q.ref_unix) / hl)
        g[4] += 1
        mem = r.get("memory_bytes")
        if mem is not None:  # NULL memory is no VRAM sample
            g[7] = float(mem) if g[7] is None else max(g[7], float(mem))
            g[8] += 1
            g[9] = e if g[9] is None else min(g[9], e)
            g[10] = e if g[10] is None else max(g[10], e)
    return [
        PodBucket(namespace=str(ns), workload=str(wl), pod=str(pod or uid), bucket=b, weight=w, count=n,
                  first=lo, last=hi, peak_memory=mem, vram_count=mn, vram_first=mlo, vram_last=mhi)
        for (uid, b), (ns, wl, pod, w, n, lo, hi, mem, mn, mlo, mhi) in groups.items()
    ]  # fmt: skip


def vram_windows(q: HistogramQuery, rows: Iterable[Mapping[str, Any]]) -> list[VramWindow]:
    """Rows in [q.start, q.end), in time order, as `GreptimeMetrics.vram_windows` aggregates them:
    per pod (`pod_name`, else `worker`, within its namespace) the peak of each `q.vram_window` from
    its first finite memory sample."""
    anchors: dict[tuple[str, str], float] = {}
    # (namespace, pod, window) → [workload, peak, count, first, last]
    groups: dict[tuple[str, str, int], list[Any]] = {}
    for r in rows:
        mem = r.get("memory_bytes")
        if mem is None or not -MAX_FINITE <= mem <= MAX_FINITE:
            continue
        ts = r["ts"]
        e = ts.timestamp() if isinstance(ts, datetime) else float(ts) / 1000.0
        ns, pod = str(r.get("namespace")), str(r.get("pod_name") or r.get("worker") or "")
        e0 = anchors.setdefault((ns, pod), e)
        key = (ns, pod, math.floor((e - e0) / q.vram_window))
        g = groups.get(key)
        if g is None:
            groups[key] = [str(r.get("workload")), float(mem), 1, e, e]
        else:
            g[0], g[1] = min(g[0], str(r.get("workload"))), max(g[1], float(mem))
            g[2], g[3], g[4] = g[2] + 1, min(g[3], e), max(g[4], e)
    return [
        VramWindow(namespace=ns, workload=wl, pod=pod, index=k, peak=float(peak), count=n, first=lo, last=hi)
        for (ns, pod, k), (wl, peak, n, lo, hi) in groups.items()
    ]
