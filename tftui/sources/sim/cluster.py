"""The embedded demo cluster: a deterministic, self-consistent TensorFusion installation.

`generate_objects()` returns plain dicts shaped like `kubectl get <kinds> -A -o json` items, so the
rest of tftui reads the demo exactly as it reads a live cluster or a dump. Layout (default 40 nodes):

- pool `demo-inference` (AutoSelect): H100 8-GPU and L40S 4-GPU nodes, NodeCompactGPULowLoad;
- pool `demo-training` (Provisioned): A100 8-GPU nodes with one GPUNodeClaim each, CompactFirst;
- pool `demo-dev` (Karpenter): RTX 4090 4-GPU nodes, LowLoadFirst, defrag enabled and visibly
  fragmented (most nodes use one GPU of four);
- pool `demo-isolation` (AutoSelect, `sources/sim/isolation.py`): three A100 80GB PCIe nodes with hard
  and shared isolation, a MIG-partitioned node, a quota; with the NVIDIA ProviderConfig and the
  chart's config ConfigMap. It comes on top of `nodes` and is built from its own random stream.

Status fields are not invented: workers are placed first (never over-allocating a GPU, never
exceeding a node's virtual capacity with limits), then every GPU, GPUNode, GPUPool, cluster, workload
and PDB status is summed from those placements with upstream's arithmetic. Everything time-related is
relative to `now`. All randomness comes from one `random.Random(seed)`, consumed in a fixed order.
"""

from __future__ import annotations

import gc
from datetime import datetime
from typing import Any, Final

from tftui.model.quantity import parse_quantity
from tftui.sources.sim import democache
from tftui.sources.sim.demo_build import _Builder
from tftui.sources.sim.demo_emit import _Emitter
from tftui.sources.sim.demo_layout import (
    CLUSTER_NAME,
    DEFAULT_NOW,
    JSON,
    as_utc,
    capacity_status,
    format_bytes,
    format_tflops,
)
from tftui.sources.sim.isolation import isolation_pool

# The names importers know from this module (tests, bench); the generator's parts live in demo_*.py.
__all__ = [
    "DEFAULT_NOW",
    "SimCluster",
    "as_utc",
    "capacity_status",
    "format_bytes",
    "format_tflops",
    "generate_objects",
]


def generate_objects(
    seed: int = 7,
    nodes: int = 40,
    now: datetime | None = None,
    *,
    gpus_per_node: int | None = None,
    workers: int | None = None,
    isolation: bool = True,
) -> list[dict[str, Any]]:
    """Build the demo installation: same arguments → byte-identical JSON.

    `gpus_per_node` overrides every node kind's GPU count; `workers` sets the number of worker pods
    (default: what the layout holds at demo density, ~250 for 40 nodes). Fewer are produced only if
    the GPUs cannot hold them without over-allocation. Neither applies to the isolation pool (three
    nodes, 13 workers), added unless `isolation` is False.
    """
    b = _Builder(seed, nodes, now or DEFAULT_NOW, gpus_per_node, workers)
    # Hundreds of thousands of small dicts, none cyclic: the cyclic collector would rescan the growing
    # heap over and over (more than half the run time at 5000 nodes), so pause it while building.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        b.build_nodes()
        b.place_all()
        objects = _Emitter(b).emit()
        if isolation:
            _add_isolation_pool(objects, b)
        return objects
    finally:
        if was_enabled:
            gc.enable()


def _add_isolation_pool(objects: list[JSON], b: _Builder) -> None:
    """Append the isolation pool and fold it into the TensorFusionCluster's spec and status."""
    iso = isolation_pool(b.rng_seed, b.now, CLUSTER_NAME, b.cluster_uid)
    cluster = objects[0]
    cluster["spec"]["gpuPools"].append(iso.pool_entry)
    status = cluster["status"]
    totals = {"nodes": status["totalNodes"], "gpus": status["totalGPUs"]}
    for key, field in (("total_t", "totalTFlops"), ("avail_t", "availableTFlops"),
                       ("virt_t", "virtualTFlops"), ("vavail_t", "virtualAvailableTFlops")):  # fmt: skip
        totals[key] = parse_quantity(status[field]).milli_value()
    for key, field in (("total_v", "totalVRAM"), ("avail_v", "availableVRAM"),
                       ("virt_v", "virtualVRAM"), ("vavail_v", "virtualAvailableVRAM")):  # fmt: skip
        totals[key] = parse_quantity(status[field]).value()
    for key, v in iso.sums.items():
        if key in totals:
            totals[key] += v
    status.update(capacity_status(totals))
    status["totalNodes"], status["totalGPUs"] = totals["nodes"], totals["gpus"]
    status["totalPools"] += 1
    status["readyGPUPools"] = [*status["readyGPUPools"], f"{CLUSTER_NAME}-{iso.pool_entry['name']}"]
    for kind in (
        "SchedulingConfigTemplate",
        "GPUPool",
        "ProviderConfig",
        "ConfigMap",
        "Node",
        "GPUNode",
        "GPU",
        "TensorFusionWorkload",
        "Pod",
        "PodDisruptionBudget",
        "GPUResourceQuota",
    ):
        objects.extend(iso.by_kind.get(kind, ()))


class SimCluster:
    """`ClusterPort` over the generated demo objects (built once, at construction).

    `generated` tells a one-shot command that the objects are the generator's own, of the model's
    types by construction (the test suite validates the generator's output): it may index them
    without validating them again, which at 5,000 nodes was a fifth of `plan`'s run.
    """

    generated: Final = True

    def __init__(
        self,
        seed: int = 7,
        nodes: int = 40,
        now: datetime | None = None,
        *,
        gpus_per_node: int | None = None,
        workers: int | None = None,
    ) -> None:
        self.seed = seed
        self.now = as_utc(now or DEFAULT_NOW).replace(microsecond=0)
        #: the cache's name for these objects (None: not cached), which what is derived from them
        #: alone may be kept under (`usagecache`)
        self.demo_key = democache.demo_key(
            seed=seed, nodes=nodes, now=self.now, gpus_per_node=gpus_per_node, workers=workers
        )
        self._objects = democache.cached_as(
            self.demo_key,
            lambda: generate_objects(seed, nodes, self.now, gpus_per_node=gpus_per_node, workers=workers),
        )

    def describe(self) -> str:
        """Always `demo`: the header shows the embedded cluster."""
        return "demo"

    def snapshot(self) -> list[dict[str, Any]]:
        """The objects (a new list; the dicts are shared, so treat them as read-only)."""
        return list(self._objects)
