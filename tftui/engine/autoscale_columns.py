"""The autoscaler's histogram feed from usage samples as columns (the what-if simulator's usage):
`add_worker_columns` leaves the histograms and samplers exactly as `AutoscaleState.add_worker_samples`
leaves them after the same samples, bit for bit, with the per-row work done by numpy.

What stays per row in Python is what is sequential by nature: each histogram's own additions
(`DecayingHistogram.add_many`, in the rows' order) and the VRAM peak windows (`add_vram`, in the
rows' order, once per worker and instant: a worker's further GPUs at that instant only count).
The TFLOPS value of a row is `pct / 100 × capacity` and its sample is taken when it is not below
zero, its GPU's capacity is known (not 0) and its time is not before its pod's last TFLOPS sample —
which, the times never decreasing within a load, is the pod's last sample *before* the load.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from tftui.engine.autoscale_config import TFLOPS_SAMPLE_WEIGHT
from tftui.engine.autoscale_usage import AutoscaleState, WorkloadHistory, _add_tflops, _Sampler
from tftui.engine.histogram import go_seconds
from tftui.model.gcpause import without_gc

__all__ = ["WorkerColumns", "add_worker_columns"]


@dataclass(frozen=True, slots=True)
class WorkerColumns:
    """`SampleInstant`s as columns: the same workers at every instant, each with a sample or not.

    Row order is `add_worker_samples`'s: by instant, then worker, then each of the worker's GPUs
    (one `tf_worker_usage` row per GPU, all with the worker's compute % and memory)."""

    times: Sequence[datetime]  # ascending
    pods: Sequence[tuple[str, str, str, Sequence[str]]]  # (namespace, workload, pod name, its GPUs)
    pct: Any  # float64 [instant, worker]: compute % of one device
    mem: Any  # int64 [instant, worker]: memory bytes per device
    present: Any  # bool [instant, worker]: whether the worker has a sample at that instant


@without_gc
def add_worker_columns(astate: AutoscaleState, c: WorkerColumns) -> int:
    """`astate.add_worker_samples` of the samples `c` holds; returns rows read."""
    n_times, n_workers = len(c.times), len(c.pods)
    if not n_times or not n_workers:
        return 0
    present = np.asarray(c.present, dtype=bool)
    gpus = np.array([len(p[3]) for p in c.pods], dtype=np.int64)
    rows = int((present * gpus).sum())
    seen = present & (gpus > 0)  # a worker without GPUs has no row
    times = [go_seconds(ts) for ts in c.times]
    # the pods in the order `add_worker_samples` first meets them (instant, then worker)
    have = seen.any(axis=0)
    first_at = np.where(have, seen.argmax(axis=0), n_times)
    order = np.lexsort((np.arange(n_workers), first_at))[: int(have.sum())].tolist()
    pending: list[tuple[WorkloadHistory, list[tuple[float, float]]]] = []
    by_wl: dict[str, list[tuple[float, float]]] = {}
    cache: dict[tuple[str, str], tuple[list[tuple[float, float]], _Sampler, WorkloadHistory]] = {}
    entry: list[tuple[list[tuple[float, float]], _Sampler, WorkloadHistory] | None] = [None] * n_workers
    for j in order:
        ns, workload, pod, _ = c.pods[j]
        ck = (ns, pod)
        ent = cache.get(ck)
        if ent is None:
            ent = cache[ck] = astate._entry(ns, workload, pod, by_wl, pending)
        entry[j] = ent
    last_tf0 = {id(e[1]): e[1].last_tf for e in cache.values()}  # before this load
    _vram(times, c.mem, seen, gpus.tolist(), entry)
    _tflops(astate, c, times, present, entry, last_tf0)
    _add_tflops(pending)
    return rows


def _vram(
    times: list[float],
    mem: Any,
    seen: Any,
    gpus: list[int],
    entry: Sequence[tuple[list[tuple[float, float]], _Sampler, WorkloadHistory] | None],
) -> None:
    """The VRAM samples, in row order: a worker's first GPU at an instant does what
    `add_worker_samples` does; its further GPUs (the same time and memory) then find the window
    open with that peak and only count, as they do there."""
    for i, t in enumerate(times):
        mems = mem[i].tolist()
        for j in np.flatnonzero(seen[i]).tolist():
            ent = entry[j]
            assert ent is not None
            _, smp, hist = ent
            if t < smp.last_vram:
                continue  # every GPU's row of this instant is older than the pod's last one
            m = mems[j]
            if m > smp.peak or t >= smp.window_end:
                hist.add_vram(smp, t, float(m))
                hist.vram_samples += gpus[j] - 1
            else:
                smp.last_vram = t
                hist.vram_samples += gpus[j]


def _tflops(
    astate: AutoscaleState,
    c: WorkerColumns,
    times: list[float],
    present: Any,
    entry: Sequence[tuple[list[tuple[float, float]], _Sampler, WorkloadHistory] | None],
    last_tf0: dict[int, float],
) -> None:
    """Each row's TFLOPS sample, added to its workload's histogram in row order (what `_add_tflops`
    does with the buffer `add_worker_samples` fills)."""
    caps = astate.gpu_tflops
    row_worker: list[int] = []
    row_cap: list[float] = []
    for j, (_, _, _, uuids) in enumerate(c.pods):
        for uuid in uuids:
            row_worker.append(j)
            row_cap.append(caps.get(uuid or "") or 0.0)  # unknown or 0: no sample
    if not row_worker:
        return
    rw = np.array(row_worker, dtype=np.int64)
    cap = np.array(row_cap, dtype=np.float64)
    n_rows = len(row_worker)
    tfl = np.asarray(c.pct, dtype=np.float64)[:, rw] / 100.0 * cap  # `pct / 100.0 * cap`, row by row
    since = np.array(
        [last_tf0[id(e[1])] if (e := entry[j]) is not None else np.inf for j in row_worker], dtype=np.float64
    )
    t = np.array(times, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        take = present[:, rw] & (cap != 0) & (tfl >= 0) & (t[:, None] >= since[None, :])
    flat = np.flatnonzero(take)  # row order: instant, then worker and GPU
    if not len(flat):
        return
    inst, row = np.divmod(flat, n_rows)
    # each workload's samples in row order (a stable sort by workload keeps it: the pods of one
    # workload interleave by instant, as `add_worker_samples` appends them)
    bufs: dict[int, int] = {}
    pods: dict[int, int] = {}
    buf_ids: list[int] = []
    pod_ids: list[int] = []
    ents: list[tuple[list[tuple[float, float]], _Sampler, WorkloadHistory]] = []
    for j in row_worker:
        e = entry[j]
        if e is None:  # never present: none of its rows is taken
            buf_ids.append(-1)
            pod_ids.append(-1)
            continue
        b = bufs.setdefault(id(e[0]), len(bufs))
        if b == len(ents):
            ents.append(e)
        buf_ids.append(b)
        pod_ids.append(pods.setdefault(id(e[1]), len(pods)))
    bid = np.array(buf_ids, dtype=np.int64)[row]
    by = np.argsort(bid, kind="stable")
    groups, starts = np.unique(bid[by], return_index=True)
    ts = t[inst[by]].tolist()
    vals = tfl[inst[by], row[by]].tolist()
    ends = [*starts.tolist()[1:], len(by)]
    for g, lo, hi in zip(groups.tolist(), starts.tolist(), ends, strict=True):
        hist = ents[g][2]  # `_add_tflops` of its buffer (left empty), the pairs never built as a list
        hist.samples += hi - lo
        hist.tf_first = min(hist.tf_first, ts[lo])
        hist.tf.add_many(zip(ts[lo:hi], vals[lo:hi]), TFLOPS_SAMPLE_WEIGHT)  # noqa: B905 - equal lengths
    # each pod's last TFLOPS sample: its latest row taken
    latest = np.full(len(pods), -np.inf)
    np.maximum.at(latest, np.array(pod_ids, dtype=np.int64)[row], t[inst])
    smps: dict[int, _Sampler] = {}
    for j, p in zip(row_worker, pod_ids, strict=True):
        e = entry[j]
        if e is not None:
            smps.setdefault(p, e[1])
    for p, last in enumerate(latest.tolist()):
        if last > -math.inf:
            smps[p].last_tf = last
