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
