"""Measured usage samples, shared by the metrics sources and the engine (which must not import sources)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


@dataclass(frozen=True, slots=True)
class GPUUsage:
    """Latest measured use of one GPU device (tf_gpu_usage); None where the row's value is NULL."""

    gpu: str
    node: str
    compute_percent: float | None  # 0-100 of the whole device
    memory_bytes: float | None
    ts: datetime


@dataclass(frozen=True, slots=True)
class WorkerUsage:
    """Latest measured use of one worker pod, summed over its devices (tf_worker_usage).

    `compute_percent` is per device as the hypervisor reports it (0-100 of one GPU), averaged over
    the worker's devices; `tflops` is the used TFLOPS summed over devices. A figure is None unless
    every device reported it (and, for TFLOPS, is a GPU of known capacity): a part sum is no sample.
    """

    namespace: str
    pod: str
    workload: str
    compute_percent: float | None
    tflops: float | None
    memory_bytes: float | None  # summed over devices
    ts: datetime


#: One worker's `tf_worker_usage` at an instant, from a writer that leaves `compute_tflops` at 0
#: (the simulator): (namespace, workload, pod name, its GPUs, compute % of one device or None,
#: memory bytes per device or None). Each of its GPUs is one row of the table.
WorkerSample = tuple[str, str, str, Sequence[str], float | None, int | None]
#: The samples of one instant, in row order: (time, its workers' samples).
SampleInstant = tuple[datetime, list[WorkerSample]]


@dataclass(frozen=True, slots=True)
class BucketLayout:
    """An exponential histogram's bucket maths, as the SQL needs it: index(v) = 0 if v < first,
    else floor(ln(v·ratio1/first + 1) / log_ratio), clamped to `last` (by the reader)."""

    first: float
    ratio1: float  # ratio − 1, as the engine computes it (the same float, so the same index)
    log_ratio: float
    last: int


@dataclass(frozen=True, slots=True)
class HistogramQuery:
    """What a metrics store needs to pre-aggregate a usage history for the autoscaler (A12).

    Each `tf_worker_usage` row is a TFLOPS sample (`compute_tflops`, or `compute_percentage` / 100 ×
    the GPU's TFLOPS from `gpu_tflops` when the writer left it 0) of weight 2^((t − ref_unix)/half-life),
    where the half-life is the workload's (`half_lives`, else `default_half_life`).
    """

    start: datetime
    end: datetime
    ref_unix: float  # seconds since 1970, a whole number
    tflops: BucketLayout
    default_half_life: float  # seconds
    half_lives: tuple[tuple[str, str, float], ...]  # (namespace, workload, seconds) ≠ default
    gpu_tflops: tuple[tuple[str, float], ...]  # (GPU name, TFLOPS capacity)
    vram_window: float = 86400.0  # seconds: one VRAM peak per pod and window (`VramWindow`)


@dataclass(frozen=True, slots=True)
class PodBucket:
    """One (worker pod, TFLOPS bucket) group of a history window, aggregated in the store.

    `bucket` = −1 holds the pod's rows without a TFLOPS sample (negative, NULL, or compute % on a GPU
    of unknown capacity). `weight` = Σ 2^((t − ref_unix)/half-life) over the group's rows; times are
    seconds since 1970. The VRAM figures are over the group's rows with a `memory_bytes` value:
    `vram_count` of them, the first and last time and the peak (None when there is none).
    """

    namespace: str
    workload: str
    pod: str
    bucket: int
    weight: float
    count: int
    first: float
    last: float
    peak_memory: float | None
    vram_count: int = 0
    vram_first: float | None = None
    vram_last: float | None = None


@dataclass(frozen=True, slots=True)
class VramWindow:
    """One pod's VRAM peak window of a history window, aggregated in the store (A12, long windows).

    A pod (`pod_name`, else the `worker` tag, within its namespace) opens its first window at its
    first row with a `memory_bytes` value in the history window; window `index` k covers
    [that time + k·`vram_window`, + (k+1)·`vram_window`). Over the window's rows with a finite memory
    value: their `count`, the `peak`, the first and last time (seconds since 1970).
    """

    namespace: str
    workload: str
    pod: str
    index: int
    peak: float
    count: int
    first: float
    last: float


@dataclass(frozen=True, slots=True)
class PodBucketArrays:
    """The same groups as a list of `PodBucket`s, as columns (numpy arrays, one entry per group in
    the store's order), for a source that has them as arrays already (the simulator): 180,000
    groups at 5,000 nodes, whose objects and per-group loop cost seconds.

    `pods[pod[i]]` is group i's (namespace, workload, pod name), every entry distinct; its VRAM
    figures are the group's own rows (`vram_count` = `count`, `vram_first`/`vram_last` =
    `first`/`last`, `peak_memory` never None), as in every group the simulator makes.
    """

    pods: list[tuple[str, str, str]]
    pod: Any  # int64: index into `pods`
    bucket: Any  # int64
    weight: Any  # float64
    count: Any  # int64
    first: Any  # float64
    last: Any  # float64
    peak_memory: Any  # float64

    def groups(self) -> list[PodBucket]:
        """The same groups as `PodBucket`s."""
        out: list[PodBucket] = []
        for p, b, w, n, f, la, peak in zip(
            self.pod.tolist(), self.bucket.tolist(), self.weight.tolist(), self.count.tolist(),
            self.first.tolist(), self.last.tolist(), self.peak_memory.tolist(), strict=True,
        ):  # fmt: skip
            ns, wl, pod = self.pods[p]
            out.append(
                PodBucket(namespace=ns, workload=wl, pod=pod, bucket=b, weight=w, count=n, first=f,
                          last=la, peak_memory=peak, vram_count=n, vram_first=f, vram_last=la)
            )  # fmt: skip
        return out


@dataclass(frozen=True, slots=True)
class ObjectHistoryQuery:
    """A node's or a GPU's allocated and used TFLOPS over [start, end), bucketed (console sparklines).

    Used: per sample time, Σ compute % × TFLOPS capacity / Σ capacity over the object's
    `tf_gpu_usage` rows (a node's share of its compute in use) — unknown for that time when a row
    lacks compute % or its GPU is not in `gpu_tflops`. Allocated (nodes only): per sample time the
    mean `tf_node_metrics.allocated_tflops_percent`, unknown when a row lacks it. A bucket is the mean
    of its known sample times; without any it is None (no data, never 0).
    """

    kind: str  # "GPUNode" or "GPU"
    name: str
    start: datetime
    end: datetime
    bucket: timedelta
    gpu_tflops: tuple[tuple[str, float], ...]  # GPU name → TFLOPS capacity (the object's GPUs)

    @property
    def buckets(self) -> int:
        return max(1, -(-(self.end - self.start) // self.bucket))

    def index(self, seconds_from_start: float) -> int:
        """The bucket of a sample time (clamped: the last bucket may be shorter)."""
        return min(self.buckets - 1, max(0, int(seconds_from_start // self.bucket.total_seconds())))


@dataclass(frozen=True, slots=True)
class ObjectSeries:
    """`ObjectHistoryQuery`'s answer: the mean per bucket (None: no known sample time in it)."""

    used: tuple[float | None, ...]
    allocated: tuple[float | None, ...]  # all None for a GPU (no per-GPU allocation series)
    rows: int  # the object's rows in the window (both tables)


def bucket_means(n: int, parts: Iterable[tuple[int, float, int]]) -> tuple[float | None, ...]:
    """Means per bucket from (bucket, Σ of known sample-time values, their count) parts."""
    sums = [0.0] * n
    counts = [0] * n
    for i, total, count in parts:
        i = min(n - 1, max(0, i))
        sums[i] += total
        counts[i] += count
    return tuple(s / c if c else None for s, c in zip(sums, counts, strict=True))
