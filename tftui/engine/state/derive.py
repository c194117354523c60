"""The per-view arithmetic both builds share: percent workloads' TFLOPS, partition and pool sums,
virtual capacity, compaction sums and Go's integer rounding.

The full build (`cluster`) and the incremental build (`engine.incremental`) call the very same
functions, which is what keeps their results equal; kept apart so neither build imports the other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tftui.engine.state.views import (
    DEFAULT_TFLOPS_OVERSELL,
    DEFAULT_VRAM_EXPAND_DISK,
    DEFAULT_VRAM_EXPAND_MEM,
    GPUView,
    NodeView,
    PartitionUse,
    PoolView,
    Res,
    StateWarning,
    WorkerView,
    WorkloadView,
)
from tftui.model.quantity import QuantityError, quantity_float


def unset_quantity(value: Any) -> bool:
    """Absent, empty or zero: Go's zero `resource.Quantity` is written as `"0"`, so a field upstream
    always writes reads `"0"` where it is not set. Anything unreadable counts as set."""
    if value is None or value == "" or (type(value) is int and value == 0):
        return True
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return False
    try:
        return quantity_float(value) == 0
    except QuantityError:
        return False


def _model_tflops(model: Any) -> float | None:
    """FP16 TFLOPS of a GPU model by (short or family) name from the public table, if known."""
    if not isinstance(model, str) or not model:
        return None
    from tftui.model.gpuinfo import lookup  # the table loads lazily, on the first percent workload

    info = lookup(model)
    return info.tflops if info else None


def convert_percent(view: WorkloadView, capacity: float | None, fallback: float | None) -> None:
    """A compute-percent workload's TFLOPS: of its first worker's GPU (`capacity`), else of its
    `gpuModel` in the GPU table (`fallback`), else left at 0 (unknown until a worker runs)."""
    req_pct, lim_pct = view.percent
    cap = capacity if capacity is not None else fallback
    if cap is None:
        return
    if req_pct is not None:
        view.request = Res(percent_tflops(req_pct, cap), view.request.vram)
    if lim_pct is not None:
        view.limit = Res(percent_tflops(lim_pct, cap), view.limit.vram)


def percent_tflops(percent: float, capacity_tflops: float) -> float:
    """A compute percent of a GPU as whole TFLOPS (the controller truncates)."""
    return float(math.trunc(percent * capacity_tflops / 100.0))


def add_partition(gpu: GPUView, worker: WorkerView) -> None:
    """Record a partitioned worker on its GPU, with the slot the GPU's status gives its pod."""
    if not worker.partition:
        return
    entry = (((gpu.obj.get("status") or {}).get("allocatedPartitions") or {}).get(worker.uid)) or {}
    start, end, group = (
        entry.get("allocatedSlotStart"),
        entry.get("allocatedSlotEnd"),
        entry.get("isolationGroupId"),
    )
    slot = (start, end) if isinstance(start, int) and isinstance(end, int) and end > start else None
    gpu.partitions.append(
        PartitionUse(worker.key, worker.partition, slot, group if isinstance(group, int) else None)
    )


def add_node_to_pool(pool: PoolView, node: NodeView) -> None:
    """Add a node's figures to its pool's sums (full and incremental builds alike)."""
    pool.capacity.add(node.capacity)
    pool.allocated.add(node.allocated)
    pool.limits.add(node.limits)
    pool.virtual.add(node.virtual)
    pool.gpu_count += len(node.gpus)
    pool.worker_count += len(node.workers)


def virtual_capacity(node: NodeView, pool: PoolView | None) -> Res:
    """A node's virtual capacity under its pool's oversubscription (CRD defaults without a pool)."""
    oversell = pool.tflops_oversell if pool else DEFAULT_TFLOPS_OVERSELL
    mem = pool.vram_expand_mem if pool else DEFAULT_VRAM_EXPAND_MEM
    disk = pool.vram_expand_disk if pool else DEFAULT_VRAM_EXPAND_DISK
    return Res(
        node.capacity.tflops * oversell / 100.0,
        # upstream truncates each expansion term to whole bytes (node_capacity.go)
        node.capacity.vram + (node.ram_bytes * mem) // 100 + (node.disk_bytes * disk) // 100,
    )


def add_compaction_sums(per_node: dict[str, list[int]], gpu: GPUView) -> None:
    """Add a GPU to its node's `compaction_sums` entry if upstream's capacity view counts it."""
    if gpu.used_by != "tensor-fusion" or gpu.node is None:
        return
    if gpu.obj["metadata"].get("deletionTimestamp"):
        return
    avail, cap = gpu.available, gpu.capacity
    acc = per_node.setdefault(gpu.node, [0, 0, 0, 0])
    acc[0] += go_value(avail.tflops)
    acc[1] += go_value(avail.vram)
    acc[2] += go_value(cap.tflops)
    acc[3] += go_value(cap.vram)


def go_value(x: float) -> int:
    """`Quantity.Value()` of a derived float figure: rounds away from zero, ignoring float noise.

    Figures are sums of exact quantities kept as floats; 99.99999999999 is the exact integer 100
    and must not round up to 101.
    """
    if x == int(x):
        return int(x)
    r = round(x)
    if abs(x - r) <= 1e-9 * max(1.0, abs(x)):
        return int(r)
    return int(math.copysign(math.ceil(abs(x)), x))


def _uses_native_gpu(spec: dict[str, Any], names: tuple[str, ...]) -> bool:
    """Whether a container asks for a device-plugin GPU resource (`names`, from the ProviderConfigs)."""
    for c in spec.get("containers") or ():
        res = c.get("resources") or {}
        for section in (res.get("limits") or {}, res.get("requests") or {}):
            for name in names:
                value = section.get(name)
                if value not in (None, "0", 0):
                    return True
    return False


def blocked_pools_of(
    warnings: list[StateWarning],
    pools: Mapping[str, PoolView],
    nodes: Mapping[str, NodeView],
    gpus: Mapping[str, GPUView],
    workers: Mapping[str, WorkerView],
    workloads: Mapping[str, WorkloadView],
) -> dict[str, StateWarning]:
    """Pool → the first blocking warning on one of its objects (`ClusterState.blocked_pools`)."""
    out: dict[str, StateWarning] = {}
    for w in warnings:
        if not w.blocking:
            continue
        kind, _, name = w.ref.partition(" ")
        pool: str | None = None
        if kind == "GPUPool":
            pool = name
        elif kind in ("GPUNode", "Node"):
            nv = nodes.get(name)
            pool = nv.pool if nv else None
        elif kind == "GPU":
            gv = gpus.get(name)
            pool = gv.pool if gv else None
        elif kind == "Pod":
            wk = workers.get(name)
            node = nodes.get(wk.node) if wk is not None and wk.node else None
            pool = (wk.pool if wk else None) or (node.pool if node else None)
        elif kind == "TensorFusionWorkload":
            wv = workloads.get(name)
            pool = wv.pool if wv else None
        if pool is not None and pool in pools:
            out.setdefault(pool, w)
    return out
