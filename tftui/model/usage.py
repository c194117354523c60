"""Measured usage samples, shared by the metrics sources and the engine (which must not import sources)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class GPUUsage:
    """Latest measured use of one GPU device (tf_gpu_usage)."""

    gpu: str
    node: str
    compute_percent: float  # 0-100 of the whole device
    memory_bytes: float
    ts: datetime


@dataclass(frozen=True, slots=True)
class WorkerUsage:
    """Latest measured use of one worker pod, summed over its devices (tf_worker_usage).

    `compute_percent` is per device as the hypervisor reports it (0-100 of one GPU), averaged over
    the worker's devices; `tflops` is the used TFLOPS summed over devices.
    """

    namespace: str
    pod: str
    workload: str
    compute_percent: float
    tflops: float
    memory_bytes: float  # summed over devices
    ts: datetime


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
    """What a metrics store needs to pre-aggregate a usage history for the autoscaler (issue 5).

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


@dataclass(frozen=True, slots=True)
class PodBucket:
    """One (worker pod, TFLOPS bucket) group of a history window, aggregated in the store.

    `bucket` = −1 holds the pod's rows with a negative TFLOPS value (no TFLOPS sample, VRAM only).
    `weight` = Σ 2^((t − ref_unix)/half-life) over the group's rows; times are seconds since 1970.
    """

    namespace: str
    workload: str
    pod: str
    bucket: int
    weight: float
    count: int
    first: float
    last: float
    peak_memory: float
