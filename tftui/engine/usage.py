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
    """Used resources of one object, and the coverage of the samples behind it."""

    res: Res = field(default_factory=Res)
    reporting: int = 0  # GPUs or workers with a sample
    expected: int = 0  # GPUs or workers that should have one

    @property
    def has_data(self) -> bool:
        return self.reporting > 0

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
                u.res = Res(sample.compute_percent / 100.0 * gpu.capacity.tflops, sample.memory_bytes)
                u.reporting = 1
            idx.gpus[name] = u
        for name, node in state.nodes.items():
            agg = Used(expected=len(node.gpus))
            for g in node.gpus:
                gu = idx.gpus[g]
                if gu.has_data:
                    agg.res.add(gu.res)
                    agg.reporting += 1
            idx.nodes[name] = agg
            if node.pool in state.pools:
                pu = idx.pools.setdefault(node.pool, Used())
                pu.res.add(agg.res)
                pu.reporting += agg.reporting
                pu.expected += agg.expected
        for pool in state.pools:
            idx.pools.setdefault(pool, Used())
        for key, worker in state.workers.items():
            u = Used(expected=1)
            ws = worker_usage.get((worker.namespace, worker.name))
            if ws is not None:
                u.res = Res(ws.tflops, ws.memory_bytes)
                u.reporting = 1
            idx.workers[key] = u
        for key, wl in state.workloads.items():
            agg = Used(expected=len(wl.workers))
            for w in wl.workers:
                wu = idx.workers[w]
                if wu.has_data:
                    agg.res.add(wu.res)
                    agg.reporting += 1
            idx.workloads[key] = agg
        return idx
