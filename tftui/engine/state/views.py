"""The views a `ClusterState` is made of (pools, nodes, GPUs, workers, workloads, their `Res` sums
and warnings) and the CRD defaults they are derived with.

Plain dataclasses with no build logic: most of the engine and every screen reads them, so they sit
below both the full build (`cluster`) and the incremental one (`engine.incremental`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tftui.model.isolation import GPUIsolation
from tftui.model.times import within_range

DEFAULT_PLACEMENT_MODE = "NodeCompactGPULowLoad"
DEFAULT_PROVISIONING_MODE = "AutoSelect"
# CRD defaults of GPUPool.spec.capacityConfig.oversubscription (S2)
DEFAULT_TFLOPS_OVERSELL = 500
DEFAULT_VRAM_EXPAND_MEM = 50
DEFAULT_VRAM_EXPAND_DISK = 70
ENDED_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(slots=True)
class Res:
    """A TFLOPS and VRAM (bytes) pair; the unit every capacity figure is kept in."""

    tflops: float = 0.0
    vram: float = 0.0

    def __add__(self, other: Res) -> Res:
        return Res(self.tflops + other.tflops, self.vram + other.vram)

    def __sub__(self, other: Res) -> Res:
        return Res(self.tflops - other.tflops, self.vram - other.vram)

    def add(self, other: Res, times: float = 1.0) -> None:
        """In-place accumulate; the build loop uses it to avoid allocating per step."""
        self.tflops += other.tflops * times
        self.vram += other.vram * times

    def copy(self) -> Res:
        return Res(self.tflops, self.vram)


@dataclass(frozen=True, slots=True)
class StateWarning:
    """An inconsistency found while indexing (object kept, problem shown in the header).

    `blocking`: a figure the engine needs could not be read (an invalid or out-of-range quantity);
    the pool the object belongs to is not acted on while it stays (`blocked_pools`).
    """

    ref: str  # "Kind namespace/name" or "Kind name"
    message: str
    blocking: bool = False

    def __str__(self) -> str:
        return f"{self.ref}: {self.message}"


@dataclass(frozen=True, slots=True)
class PartitionUse:
    """A hardware partition a worker holds on a GPU; where it sits comes from the GPU's
    `status.allocatedPartitions` entry for the pod (None: not recorded yet)."""

    worker: str  # "ns/name"
    template: str  # the pod's `partition-id`, as written
    slot: tuple[int, int] | None = None  # MIG slots [start, end)
    group: int | None = None  # Ascend vGroup


_NO_ISOLATION = GPUIsolation()


@dataclass(slots=True)
class GPUView:
    name: str
    node: str | None
    pool: str | None
    model: str
    vendor: str
    phase: str
    used_by: str
    index: int | None
    capacity: Res
    allocated: Res = field(default_factory=Res)
    workers: list[str] = field(default_factory=list)  # worker keys "ns/name"
    obj: dict[str, Any] = field(default_factory=dict, repr=False)
    isolation: GPUIsolation = _NO_ISOLATION
    partitions: list[PartitionUse] = field(default_factory=list)  # in worker order

    @property
    def available(self) -> Res:
        return self.capacity - self.allocated


@dataclass(slots=True)
class NodeView:
    """A GPUNode with its Kubernetes Node (same name) and derived figures."""

    name: str
    pool: str | None
    phase: str
    manage_mode: str
    cost_per_hour: float | None
    created: datetime | None
    do_not_disrupt: bool
    unschedulable: bool
    claim: str | None  # GPUNodeClaim named by the node-provisioner label
    gpus: list[str] = field(default_factory=list)
    workers: list[str] = field(default_factory=list)
    native_gpu_pods: list[str] = field(default_factory=list)  # pods using GPUs outside TensorFusion
    capacity: Res = field(default_factory=Res)
    allocated: Res = field(default_factory=Res)
    limits: Res = field(default_factory=Res)  # Σ worker limits, once per worker (S1)
    virtual: Res = field(default_factory=Res)
    ram_bytes: float = 0.0
    disk_bytes: float = 0.0
    obj: dict[str, Any] = field(default_factory=dict, repr=False)
    node_obj: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def available(self) -> Res:
        return self.capacity - self.allocated

    @property
    def virtual_available(self) -> Res:
        return self.virtual - self.limits


@dataclass(slots=True)
class WorkerView:
    """A TensorFusion worker pod: the unit that holds GPU allocations."""

    key: str  # "namespace/name"
    namespace: str
    name: str
    uid: str
    workload: str | None
    pool: str | None
    node: str | None
    phase: str
    qos: str
    gpu_ids: list[str]
    gpu_count: int
    request: Res  # per device
    limit: Res  # per device
    created: datetime | None
    terminating: bool
    obj: dict[str, Any] = field(default_factory=dict, repr=False)
    isolation: str = "soft"  # annotation `isolation` (soft when unset)
    partition: str = ""  # annotation `partition-id` of a partitioned worker
    percent: float | None = None  # compute-percent request (per device) instead of TFLOPS

    @property
    def allocated(self) -> Res:
        """Total booked across devices (request × devices)."""
        return Res(self.request.tflops * self.gpu_count, self.request.vram * self.gpu_count)


@dataclass(slots=True)
class WorkloadView:
    key: str  # "namespace/name"
    namespace: str
    name: str
    pool: str | None
    replicas: int | None
    gpu_count: int
    qos: str
    request: Res  # per worker per device, from spec
    limit: Res
    workers: list[str] = field(default_factory=list)
    allocated: Res = field(default_factory=Res)
    autoscale: bool = False
    obj: dict[str, Any] | None = field(default=None, repr=False)  # None: workers without a workload object
    # compute percent of a GPU (request, limit) instead of TFLOPS: `request`/`limit` hold it converted
    # with the capacity of the first worker's GPU (see `convert_percent`)
    percent: tuple[float | None, float | None] = (None, None)


@dataclass(slots=True)
class PoolView:
    name: str
    cluster: str | None
    provisioning_mode: str
    placement_mode: str
    template: str | None
    tflops_oversell: int
    vram_expand_mem: int
    vram_expand_disk: int
    nodes: list[str] = field(default_factory=list)
    gpu_count: int = 0
    worker_count: int = 0
    capacity: Res = field(default_factory=Res)
    allocated: Res = field(default_factory=Res)
    limits: Res = field(default_factory=Res)
    virtual: Res = field(default_factory=Res)
    obj: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def available(self) -> Res:
        return self.capacity - self.allocated

    @property
    def virtual_available(self) -> Res:
        return self.virtual - self.limits


def _ref(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns}/{meta.get('name')}" if ns else f"{obj.get('kind')} {meta.get('name')}"


OVER_ALLOCATED = "over-allocated: worker requests exceed capacity"
"""The warning of a GPU whose workers' requests exceed its capacity (an autoscaled worker can)."""


def over_allocated(gpu: GPUView) -> bool:
    avail = gpu.available
    return avail.tflops < -1e-6 or avail.vram < -0.5


def over_allocated_gpus(warnings: list[StateWarning], gpus: dict[str, GPUView]) -> set[str] | None:
    """The GPUs `warnings` says are over-allocated, or None if any warning is of another kind (or
    names no GPU of `gpus`): a state whose only warnings are these can be derived incrementally,
    which recomputes them (the full build writes them last, in GPU order)."""
    out: set[str] = set()
    for w in warnings:
        name = w.ref[4:] if w.ref.startswith("GPU ") else ""
        gv = gpus.get(name)
        if w.message != OVER_ALLOCATED or w.blocking or gv is None or _ref(gv.obj) != w.ref:
            return None
        out.add(name)
    return out


def parse_time(value: Any) -> datetime | None:
    """RFC3339 timestamp → aware datetime; None for absent, unparsable or out-of-range values
    (`model.times`: arithmetic on year 1 or 9999 would overflow)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt if within_range(dt) else None


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
