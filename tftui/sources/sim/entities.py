"""The demo's indexed entities (one record per GPU, worker and node), how their fields are read from
the objects, and the sampling constants.

`SimMetrics` (usage.py) builds these records from the cluster's objects and samples them one row at
a time; `SimColumns` (columns.py) reads the same records into numpy columns for the aggregate
queries. Both sides need them, so they live here, below both: the per-sample path imports the array
path, never the reverse.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Protocol
from zoneinfo import ZoneInfo

from tftui.model.gpuinfo import GPUInfo, lookup
from tftui.model.quantity import quantity_float
from tftui.sources.sim.scenarios import ProfileParams

GPU_DRIVER_OVERHEAD_BYTES: Final = 320 * (1 << 20)
WORKER_MEMORY_CAP: Final = 0.98  # of the VRAM limit: workers stay under it


_TDP: Final = (("H100", 700.0, 70.0), ("H200", 700.0, 70.0), ("A100", 400.0, 55.0), ("L40S", 350.0, 35.0),
               ("4090", 450.0, 25.0))  # fmt: skip


def _pct(part: float, whole: float) -> float:
    """A percentage as the simulated rows carry it (3 decimals; 0 of nothing)."""
    return round(part / whole * 100.0, 3) if whole > 0 else 0.0


def _tdp(model: str) -> tuple[float, float]:
    for key, tdp, idle in _TDP:
        if key in model:
            return tdp, idle
    return 300.0, 30.0


@functools.cache
def _model(name: str) -> GPUInfo | None:
    return lookup(name)


def _q(value: Any, default: float = 0.0) -> float:
    """A quantity as float; unparsable or missing → `default` (a dump may hold anything)."""
    if value is None:
        return default
    parsed = _parse(str(value))
    return default if parsed is None else parsed


@functools.lru_cache(maxsize=65536)
def _parse(value: str) -> float | None:
    """Cached: a cluster repeats the same few dozen quantity strings tens of thousands of times."""
    try:
        return quantity_float(value)
    except ValueError:
        return None


def _created(obj: dict[str, Any]) -> int:
    raw = (obj.get("metadata") or {}).get("creationTimestamp")
    if not raw:
        return 0
    return int(datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp())


def _pricing(pool: dict[str, Any]) -> dict[str, tuple[float, float, float]]:
    """qos → ($ per TFLOPS·s, $ per GiB·s, limitsOverRequests) from the pool's qosConfig."""
    out: dict[str, tuple[float, float, float]] = {}
    for item in ((pool.get("spec") or {}).get("qosConfig") or {}).get("pricing") or []:
        req = item.get("requests") or {}
        try:
            per_t = float(str(req.get("perFP16TFlopsPerHour", "0")).lstrip("$")) / 3600.0
            per_g = float(str(req.get("perGBOfVRAMPerHour", "0")).lstrip("$")) / 3600.0
            ratio = float(str(item.get("limitsOverRequests", "1")))
        except ValueError:
            continue
        out[str(item.get("qos", ""))] = (per_t, per_g, ratio)
    return out


@dataclass(slots=True)
class _Gpu:
    name: str
    model: str  # status.gpuModel
    node: str
    pool: str
    cap_t: float  # TFLOPS
    cap_v: int  # bytes
    native: bool
    created: int
    key: int
    tz: ZoneInfo
    tdp: float
    idle_w: float
    price_per_hour: float
    workers: list[_Worker] = field(default_factory=list)


@dataclass(slots=True)
class _Worker:
    uid: str
    name: str
    namespace: str
    workload: str
    pool: str
    node: str
    qos: str
    gpus: list[_Gpu]
    gpu_count: int
    req_t: float
    lim_t: float
    req_v: float
    lim_v: float
    book_t: float  # what the allocator books per device: a shared worker its GPU, a partition its template
    book_v: float
    created: int
    ready: bool
    params: ProfileParams
    key: int
    tz: ZoneInfo
    cost_per_second: float


@dataclass(slots=True)
class _Node:
    name: str
    pool: str
    phase: str
    created: int
    total_t: float
    total_v: float
    virt_t: float
    virt_v: float
    gpu_count: int
    price_per_hour: float
    alloc_times: list[int] = field(default_factory=list)  # worker creation times, sorted
    alloc_t: list[float] = field(default_factory=list)  # cumulative requested TFLOPS
    alloc_v: list[float] = field(default_factory=list)  # cumulative requested bytes


class SampleIndex(Protocol):
    """What the array path reads from a `SimMetrics`: its records and its sample grid (epoch seconds)."""

    workers: list[_Worker]
    gpus: list[_Gpu]
    nodes: list[_Node]
    tzs: set[ZoneInfo]
    start: int
    end: int
    step: int
