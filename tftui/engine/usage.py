"""Measured usage joined onto `ClusterState`: used TFLOPS and VRAM per GPU, node, pool, workload.

Kept apart from allocation so "no data" stays distinguishable from "idle" (design principle: missing
metrics never become a decision): every aggregate carries how many of its GPUs or workers reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tftui.engine.state import ClusterState, Res
from tftui.model.usage import GPUUsage, WorkerUsage


@dataclass(slots=True)
class Used:
    """Used resources of one object, and the coverage of the samples behind it.

    TFLOPS and VRAM are covered separately: a sample with a NULL figure reports the other one only,
    and `res` sums only what was reported (a missing figure is never added as 0).
    """

    res: Res = field(default_factory=Res)
    reporting: int = 0  # GPUs or workers with a sample (of either figure)
    expected: int = 0  # GPUs or workers that should have one
    tflops_reporting: int = 0
    vram_reporting: int = 0

    @property
    def has_data(self) -> bool:
        return self.reporting > 0

    @property
    def has_tflops(self) -> bool:
        return self.tflops_reporting > 0

    @property
    def has_vram(self) -> bool:
        return self.vram_reporting > 0

    def set(self, tflops: float | None, vram: float | None) -> None:
        """One object's own sample (a GPU's or a worker's)."""
        self.res = Res(tflops or 0.0, vram or 0.0)
        self.tflops_reporting = int(tflops is not None)
        self.vram_reporting = int(vram is not None)
        self.reporting = int(tflops is not None or vram is not None)

    def add(self, other: Used) -> None:
        """Sum a part (GPU of a node, node of a pool, worker of a workload) into this aggregate."""
        self.res.add(other.res)
        self.reporting += other.reporting
        self.tflops_reporting += other.tflops_reporting
        self.vram_reporting += other.vram_reporting

    @property
    def complete(self) -> bool:
        return self.reporting == self.expected


@dataclass(slots=True)
class UsageIndex:
    gpus: dict[str, Used] = field(default_factory=dict)
    nodes: dict[str, Used] = field(default_factory=dict)
    pools: dict[str, Used] = field(default_factory=dict)
    workers: dict[str, Used] = field(default_factory=dict)
    workloads: dict[str, Used] = field(default_factory=dict)

    @classmethod
    def empty(cls) -> UsageIndex:
        return cls()

    @classmethod
    def build(
        cls,
        state: ClusterState,
        gpu_usage: Mapping[str, GPUUsage],
        worker_usage: Mapping[tuple[str, str], WorkerUsage],
    ) -> UsageIndex:
        idx = cls()
        for name, gpu in state.gpus.items():
            u = Used(expected=1)
            sample = gpu_usage.get(name)
            if sample is not None:
                pct = sample.compute_percent
                u.set(None if pct is None else pct / 100.0 * gpu.capacity.tflops, sample.memory_bytes)
            idx.gpus[name] = u
        for name, node in state.nodes.items():
            agg = Used(expected=len(node.gpus))
            for g in node.gpus:
                agg.add(idx.gpus[g])
            idx.nodes[name] = agg
            if node.pool in state.pools:
                pu = idx.pools.setdefault(node.pool, Used())
                pu.add(agg)
                pu.expected += agg.expected
        for pool in state.pools:
            idx.pools.setdefault(pool, Used())
        for key, worker in state.workers.items():
            u = Used(expected=1)
            ws = worker_usage.get((worker.namespace, worker.name))
            if ws is not None:
                u.set(ws.tflops, ws.memory_bytes)
            idx.workers[key] = u
        for key, wl in state.workloads.items():
            agg = Used(expected=len(wl.workers))
            for w in wl.workers:
                agg.add(idx.workers[w])
            idx.workloads[key] = agg
        return idx
