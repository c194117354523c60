"""Autoscaling's usage state (A4): per-workload TFLOPS and VRAM decaying histograms, fed from
`tf_worker_usage` rows once for history and then incrementally, with the per-worker samplers.

The only stateful part of autoscaling; kept apart from the recommenders, which only read it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from tftui.engine.autoscale_config import (
    DEFAULT_PERIOD,
    TFLOPS_SAMPLE_WEIGHT,
    VRAM_SAMPLE_WEIGHT,
    VRAM_WINDOW,
    effective_config,
)
from tftui.engine.histogram import (
    _UNIX_FROM_GO_ZERO,
    TFLOPS_OPTIONS,
    VRAM_OPTIONS,
    DecayingHistogram,
    go_seconds,
    unix_to_go,
)
from tftui.engine.state import ClusterState
from tftui.model.gcpause import without_gc
from tftui.model.giveway import paced
from tftui.model.numbers import MAX_FINITE
from tftui.model.usage import HistogramQuery, PodBucket, PodBucketArrays, SampleInstant

# -- usage state ---------------------------------------------------------------------------------


class _Sampler:
    """Per-worker sampler state (A4, keyed by pod): last timestamps and the open VRAM window."""

    __slots__ = ("last_tf", "last_vram", "peak", "window_end")

    def __init__(self) -> None:
        self.last_tf = -math.inf
        self.last_vram = -math.inf
        self.window_end = -math.inf
        self.peak = 0.0


class WorkloadHistory:
    """The workload-level aggregator: one TFLOPS and one VRAM histogram over all its workers.

    Only real samples count: a row whose TFLOPS cannot be known (NULL, or compute % on a GPU of
    unknown capacity) adds no TFLOPS sample, a row with NULL memory no VRAM sample, and neither
    moves `first` (so NULL rows never make the history look long enough to act on).
    """

    __slots__ = ("period", "samplers", "samples", "tf", "tf_first", "vram", "vram_first", "vram_samples")

    def __init__(self, period: timedelta) -> None:
        hl = period.total_seconds() / 2
        self.period = period
        self.tf = DecayingHistogram(TFLOPS_OPTIONS, hl)
        self.vram = DecayingHistogram(VRAM_OPTIONS, hl)
        self.samplers: dict[str, _Sampler] = {}
        self.tf_first = math.inf  # go seconds of the first TFLOPS sample
        self.vram_first = math.inf  # ... of the first VRAM sample
        self.samples = 0  # TFLOPS samples
        self.vram_samples = 0

    @property
    def first(self) -> float:
        """Go seconds of the first real sample (inf: none)."""
        return min(self.tf_first, self.vram_first)

    def is_empty(self) -> bool:
        return self.tf.is_empty() and self.vram.is_empty()

    def add_vram(self, s: _Sampler, t: float, mem: float) -> None:
        """Daily peak per worker, added and removed at the window's end (the A4 fix)."""
        if t < s.last_vram:
            return
        s.last_vram = t
        self.vram_samples += 1
        if t < self.vram_first:
            self.vram_first = t
        if t < s.window_end:
            if mem > s.peak:
                self.vram.subtract(s.peak, VRAM_SAMPLE_WEIGHT, s.window_end)
                self.vram.add(mem, VRAM_SAMPLE_WEIGHT, s.window_end)
                s.peak = mem
            return
        if s.window_end == -math.inf:
            s.window_end = t
        s.window_end += (math.floor((t - s.window_end) / VRAM_WINDOW) + 1) * VRAM_WINDOW
        s.peak = mem
        self.vram.add(mem, VRAM_SAMPLE_WEIGHT, s.window_end)


class AutoscaleState:
    """Histograms per workload, fed from `tf_worker_usage` rows; rebuildable from the TSDB alone.

    Call `configure(state)` before loading so half-lives and GPU capacities are known; then
    `add_samples` once with the history window and again with each new interval's rows.
    """

    def __init__(self) -> None:
        self.workloads: dict[str, WorkloadHistory] = {}
        self.periods: dict[str, timedelta] = {}
        self.gpu_tflops: dict[str, float] = {}

    def configure(self, state: ClusterState) -> None:
        """Adopt the cluster's GPU capacities and each workload's `historyDataPeriod`.

        A changed period replaces the workload's histograms (as upstream); per-worker samplers of
        pods that no longer exist are pruned by pod name (A4).
        """
        self.gpu_tflops = {name: g.capacity.tflops for name, g in state.gpus.items()}
        for key, wv in state.workloads.items():
            cfg = effective_config(state, wv)
            period = cfg.history if cfg.history > timedelta(0) else DEFAULT_PERIOD
            self.periods[key] = period
            hist = self.workloads.get(key)
            if hist is not None:
                if hist.period != period:
                    self.workloads[key] = WorkloadHistory(period)
                else:
                    live = {state.workers[w].name for w in wv.workers if w in state.workers}
                    for pod in [p for p in hist.samplers if p not in live]:
                        del hist.samplers[pod]

    @without_gc
    def add_samples(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Feed rows in ts order (a history load or an incremental one); returns rows read.

        TFLOPS is `compute_tflops`, or `compute_percentage` × the GPU's capacity when the writer
        leaves TFLOPS at zero (the simulator and percent-isolated workers). TFLOPS samples are
        buffered per workload and added in one pass per histogram: this loop is the load's hot path.
        Missing is not zero: NULL compute (or compute % on a GPU of unknown capacity) is no TFLOPS
        sample and NULL memory no VRAM sample (`usage_histograms` in the store does the same).
        """
        pending: list[tuple[WorkloadHistory, list[tuple[float, float]]]] = []
        by_wl: dict[str, list[tuple[float, float]]] = {}
        cache: dict[tuple[str, str], tuple[list[tuple[float, float]], _Sampler, WorkloadHistory]] = {}
        caps = self.gpu_tflops
        last_ts: object = None
        t = 0.0
        n = 0
        for r in rows:
            n += 1
            ts = r["ts"]
            if ts is not last_ts:
                last_ts = ts
                t = go_seconds(ts) if isinstance(ts, datetime) else unix_to_go(float(ts) / 1000.0)
            ck = (r["namespace"], r.get("pod_name") or r.get("worker") or "")
            ent = cache.get(ck)
            if ent is None:
                ent = cache[ck] = self._entry(r["namespace"], r["workload"], ck[1], by_wl, pending)
            buf, smp, hist = ent
            tfl = r.get("compute_tflops")
            if not tfl and (pct := r.get("compute_percentage")) is not None:
                cap = caps.get(r.get("uuid") or "")
                tfl = pct / 100.0 * cap if cap else None  # no capacity: no sample, not 0
            elif not tfl and "compute_percentage" in r:
                tfl = None  # both NULL (or 0 and NULL): nothing measured
            # a NaN or ±Infinity is no sample (G1): it has no histogram bucket
            if tfl is not None and t >= smp.last_tf and 0 <= tfl <= MAX_FINITE:
                smp.last_tf = t
                buf.append((t, tfl))
            mem = r.get("memory_bytes")
            if mem is not None and t >= smp.last_vram and -MAX_FINITE <= mem <= MAX_FINITE:
                if mem > smp.peak or t >= smp.window_end:
                    hist.add_vram(smp, t, float(mem))
                else:
                    smp.last_vram = t
                    hist.vram_samples += 1
        _add_tflops(pending)
        return n

    @without_gc
    def add_worker_samples(self, instants: Iterable[SampleInstant]) -> int:
        """`add_samples` of the rows these samples stand for (each GPU of a worker one row, with
        `compute_tflops` 0, `compute_percentage`, `memory_bytes` and `uuid`), the same histograms
        and samplers bit for bit, without a dict per row; returns rows read. The simulator's usage
        takes this path: a what-if autoscale tick feeds thousands of workers every 15 minutes."""
        pending: list[tuple[WorkloadHistory, list[tuple[float, float]]]] = []
        by_wl: dict[str, list[tuple[float, float]]] = {}
        cache: dict[tuple[str, str], tuple[list[tuple[float, float]], _Sampler, WorkloadHistory]] = {}
        caps = self.gpu_tflops
        n = 0
        for ts, workers in instants:
            t = go_seconds(ts)
            for ns, workload, pod, uuids, pct, mem in workers:
                if not uuids:
                    continue  # no row
                ck = (ns, pod)
                ent = cache.get(ck)
                if ent is None:
                    ent = cache[ck] = self._entry(ns, workload, pod, by_wl, pending)
                buf, smp, hist = ent
                for uuid in uuids:
                    n += 1
                    if pct is not None:
                        cap = caps.get(uuid or "")
                        tfl = pct / 100.0 * cap if cap else None
                        if tfl is not None and t >= smp.last_tf and tfl >= 0:
                            smp.last_tf = t
                            buf.append((t, tfl))
                    if mem is not None and t >= smp.last_vram:
                        if mem > smp.peak or t >= smp.window_end:
                            hist.add_vram(smp, t, float(mem))
                        else:
                            smp.last_vram = t
                            hist.vram_samples += 1
        _add_tflops(pending)
        return n

    def history_query(self, start: datetime, end: datetime, *, long: bool = False) -> HistogramQuery | None:
        """The pre-aggregation a metrics store can do for a first (history) load, or None.

        None means "read raw rows instead": some worker already has sampler state (an incremental
        load must honour its last timestamps and open VRAM window), or — unless `long` — the window
        is longer than one VRAM peak window (each pod's windows are anchored at its own first
        sample) or than 50 half-lives of some workload (its reference time would move mid-window).
        A `long` query is answered with the per-window VRAM peaks as well
        (`engine.autoscale_long.add_long_history`).
        """
        span = (end - start).total_seconds()
        if span <= 0 or any(h.samplers for h in self.workloads.values()):
            return None
        default = DEFAULT_PERIOD.total_seconds() / 2
        periods = {**self.periods, **{k: h.period for k, h in self.workloads.items()}}
        half_lives = {k: p.total_seconds() / 2 for k, p in periods.items()}
        if not long and (span > VRAM_WINDOW or span > 50 * min((default, *half_lives.values()))):
            return None
        end_s = math.floor(end.timestamp())
        return HistogramQuery(
            start=start,
            end=end,
            ref_unix=float(end_s),
            tflops=TFLOPS_OPTIONS.layout(),
            default_half_life=default,
            half_lives=tuple(
                sorted(
                    (k.partition("/")[0], k.partition("/")[2], hl)
                    for k, hl in half_lives.items()
                    if hl != default
                )
            ),
            gpu_tflops=tuple(sorted(self.gpu_tflops.items())),
            vram_window=VRAM_WINDOW,
        )

    def add_pod_buckets(self, query: HistogramQuery, groups: Iterable[PodBucket]) -> int:
        """Apply a history window the store aggregated per (pod, TFLOPS bucket); returns rows covered.

        The result equals `add_samples` over the same rows: TFLOPS weights are rescaled from
        `ref_unix` to each histogram's reference (moved first, as the first sample would move it);
        each new pod's VRAM window opens at its first sample with the window's peak, added at the
        window's end (the add/subtract pairs of `add_vram` net out to exactly that).
        """
        sums = TflopsSums(query.tflops.last)
        # (wkey, pod) → [first, last tf, VRAM samples, first VRAM t, last VRAM t, VRAM peak]
        pods: dict[tuple[str, str], list[Any]] = {}
        for g in groups:
            wkey = sums.add(g)
            p = pods.get((wkey, g.pod))
            if p is None:
                p = pods[(wkey, g.pod)] = [g.first, -math.inf, 0, math.inf, -math.inf, None]
            p[0] = min(p[0], g.first)
            if g.vram_count and g.peak_memory is not None:
                p[2] += g.vram_count
                p[3] = min(p[3], g.vram_first if g.vram_first is not None else g.first)
                p[4] = max(p[4], g.vram_last if g.vram_last is not None else g.last)
                p[5] = g.peak_memory if p[5] is None else max(p[5], g.peak_memory)
            if g.bucket >= 0:
                p[1] = max(p[1], g.last)
        ref_go = unix_to_go(query.ref_unix)
        for wkey, (weights, count, tf_first, _tf_last) in sums.workloads.items():
            hist = self.workloads.get(wkey)
            if hist is None:
                hist = self.workloads[wkey] = WorkloadHistory(self.periods.get(wkey, DEFAULT_PERIOD))
            if count:
                hist.samples += count
                hist.tf_first = min(hist.tf_first, unix_to_go(tf_first))
                tfh = hist.tf
                tfh._factor(unix_to_go(tf_first))  # moves the reference as the first sample would
                scale = TFLOPS_SAMPLE_WEIGHT * 2.0 ** ((ref_go - tfh.ref) / tfh.half_life)
                tfh.add_weights({b: w * scale for b, w in weights.items()})
        # in the order add_samples opens the VRAM windows: by first VRAM sample (then first row)
        for (wkey, pod), (_first, last_tf, v_n, v_first, v_last, peak) in sorted(
            pods.items(), key=lambda kv: (kv[1][3], kv[1][0])
        ):
            hist = self.workloads[wkey]
            if not v_n or peak is None:  # no VRAM sample: no window opened, as add_samples leaves it
                hist.samplers[pod] = _sampler(last_tf)
                continue
            _open_vram_window(hist, pod, last_tf, v_first, v_last, float(peak), v_n)
        return sums.rows

    def add_pod_bucket_arrays(self, query: HistogramQuery, g: PodBucketArrays) -> int:
        """`add_pod_buckets(query, g.groups())`, the same histograms bit for bit, from the columns.

        The sums are numpy's `bincount` over the groups in their order, which adds each bucket's
        weights one by one in that order from 0.0, as the loop does; buckets, workloads and pods are
        visited in the order of their first group, as the loop's dicts are. What is left per
        workload and pod (the histograms' own updates) is the loop's code."""
        import numpy as np  # here, not at the top: the console and one-shot commands import this
        # module at start, and only a columnar usage source (the simulator's) reaches this method

        n = len(g.pods)
        if not len(g.pod):
            return 0
        wkeys: dict[str, int] = {}
        wl_of_pod = np.array([wkeys.setdefault(f"{ns}/{wl}", len(wkeys)) for ns, wl, _ in g.pods], np.int64)
        wl_of = wl_of_pod[g.pod]
        nw = len(wkeys)
        tf = g.bucket >= 0
        b = np.minimum(g.bucket, query.tflops.last)
        span = int(b.max(initial=0)) + 1
        cells, first_at, inv = np.unique(wl_of[tf] * span + b[tf], return_index=True, return_inverse=True)
        sums = np.bincount(inv, g.weight[tf], len(cells)).tolist()
        by_first = np.argsort(first_at, kind="stable")  # the cells in the order they first occur
        cell_wl, cell_b = np.divmod(cells[by_first], span)
        weights: list[dict[int, float]] = [{} for _ in range(nw)]
        for w, bb, i in paced(zip(cell_wl.tolist(), cell_b.tolist(), by_first.tolist(), strict=True), 1024):
            weights[w][bb] = sums[i]
        tf_count = np.bincount(wl_of[tf], g.count[tf], nw).astype(np.int64).tolist()
        tf_first = np.full(nw, np.inf)
        np.minimum.at(tf_first, wl_of[tf], g.first[tf])
        first = np.full(n, np.inf)
        np.minimum.at(first, g.pod, g.first)
        last_tf = np.full(n, -np.inf)
        np.maximum.at(last_tf, g.pod[tf], g.last[tf])
        last = np.full(n, -np.inf)
        np.maximum.at(last, g.pod, g.last)
        peak = np.full(n, -np.inf)
        np.maximum.at(peak, g.pod, g.peak_memory)
        v_n = np.bincount(g.pod, g.count, n).astype(np.int64).tolist()
        ref_go = unix_to_go(query.ref_unix)
        names = list(wkeys)
        hists: dict[int, WorkloadHistory] = {}  # workload index → its history (those with groups)
        for w in _by_first_group(wl_of):
            wkey = names[w]
            hist = self.workloads.get(wkey)
            if hist is None:
                hist = self.workloads[wkey] = WorkloadHistory(self.periods.get(wkey, DEFAULT_PERIOD))
            hists[w] = hist
            if tf_count[w]:
                hist.samples += tf_count[w]
                hist.tf_first = min(hist.tf_first, unix_to_go(float(tf_first[w])))
                tfh = hist.tf
                tfh._factor(unix_to_go(float(tf_first[w])))
                scale = TFLOPS_SAMPLE_WEIGHT * 2.0 ** ((ref_go - tfh.ref) / tfh.half_life)
                tfh.add_weights({bb: x * scale for bb, x in weights[w].items()})
        # pods by first VRAM sample (every group has VRAM: its first time), then their first group;
        # `_open_vram_window` per pod, its times moved to Go's clock by numpy (the same float adds)
        seen = np.array(_by_first_group(g.pod), dtype=np.int64)
        ordered = seen[np.argsort(first[seen], kind="stable")]
        lt = last_tf[ordered]
        go_lt = np.where(lt > -math.inf, lt + _UNIX_FROM_GO_ZERO, -math.inf).tolist()
        go_first = first[ordered] + _UNIX_FROM_GO_ZERO
        ends = (go_first + VRAM_WINDOW).tolist()
        of_wl = wl_of_pod[ordered].tolist()
        for p, w, glt, gla, gf, end, pk, cnt in zip(
            ordered.tolist(), of_wl, go_lt, (last[ordered] + _UNIX_FROM_GO_ZERO).tolist(), go_first.tolist(),
            ends, peak[ordered].tolist(), [v_n[i] for i in ordered.tolist()], strict=True,
        ):  # fmt: skip
            hist = hists[w]
            smp = hist.samplers[g.pods[p][2]] = _Sampler()
            smp.last_tf, smp.last_vram, smp.window_end, smp.peak = glt, gla, end, pk
            hist.vram_samples += cnt
            if gf < hist.vram_first:
                hist.vram_first = gf
            hist.vram.add(pk, VRAM_SAMPLE_WEIGHT, end)
        return int(g.count.sum())

    def _entry(
        self,
        ns: str,
        workload: str,
        pod: str,
        by_wl: dict[str, list[tuple[float, float]]],
        pending: list[tuple[WorkloadHistory, list[tuple[float, float]]]],
    ) -> tuple[list[tuple[float, float]], _Sampler, WorkloadHistory]:
        wkey = f"{ns}/{workload}"
        hist = self.workloads.get(wkey)
        if hist is None:
            hist = self.workloads[wkey] = WorkloadHistory(self.periods.get(wkey, DEFAULT_PERIOD))
        buf = by_wl.get(wkey)
        if buf is None:
            buf = by_wl[wkey] = []
            pending.append((hist, buf))
        smp = hist.samplers.get(pod)
        if smp is None:
            smp = hist.samplers[pod] = _Sampler()
        return buf, smp, hist


class TflopsSums:
    """Store groups' TFLOPS weights summed per workload (bucket clamped to the layout's last):
    `workloads[key]` = [weights per bucket, samples, first and last sample time]; a group without
    TFLOPS (bucket −1) only opens its workload. `rows` counts every group's rows."""

    __slots__ = ("last", "rows", "workloads")

    def __init__(self, last: int) -> None:
        self.last = last
        self.rows = 0
        self.workloads: dict[str, list[Any]] = {}

    def add(self, g: PodBucket) -> str:
        """Add one group; returns its workload key."""
        self.rows += g.count
        wkey = f"{g.namespace}/{g.workload}"
        a = self.workloads.get(wkey)
        if a is None:
            a = self.workloads[wkey] = [{}, 0, math.inf, -math.inf]
        if g.bucket >= 0:
            b = min(g.bucket, self.last)
            a[0][b] = a[0].get(b, 0.0) + g.weight
            a[1] += g.count
            a[2], a[3] = min(a[2], g.first), max(a[3], g.last)
        return wkey


def _by_first_group(ids: Any) -> list[int]:
    """The distinct values of `ids` in the order they first occur."""
    import numpy as np

    values, first = np.unique(ids, return_index=True)
    return values[np.argsort(first, kind="stable")].tolist()


def _sampler(last_tf: float) -> _Sampler:
    """A pod's sampler after its buckets were loaded, its last TFLOPS sample at `last_tf` (Unix s)."""
    smp = _Sampler()
    smp.last_tf = unix_to_go(last_tf) if last_tf > -math.inf else -math.inf
    return smp


def _open_vram_window(
    hist: WorkloadHistory, pod: str, last_tf: float, v_first: float, v_last: float, peak: float, n: int
) -> None:
    """The pod's sampler with its VRAM window open from its first VRAM sample, and the window's peak
    in the workload's VRAM histogram (what `add_samples` leaves after the same samples)."""
    smp = hist.samplers[pod] = _sampler(last_tf)
    smp.last_vram = unix_to_go(v_last)
    smp.window_end = unix_to_go(v_first) + VRAM_WINDOW
    smp.peak = peak
    hist.vram_samples += n
    hist.vram_first = min(hist.vram_first, unix_to_go(v_first))
    hist.vram.add(smp.peak, VRAM_SAMPLE_WEIGHT, smp.window_end)


def _add_tflops(pending: list[tuple[WorkloadHistory, list[tuple[float, float]]]]) -> None:
    """Each workload's TFLOPS samples of one load, added to its histogram at once, in order."""
    for hist, samples in pending:
        if samples:
            hist.samples += len(samples)
            hist.tf_first = min(hist.tf_first, samples[0][0])
            hist.tf.add_many(samples, TFLOPS_SAMPLE_WEIGHT)
