"""Measured usage joined onto `ClusterState`: used TFLOPS and VRAM per GPU, node, pool, workload.

Kept apart from allocation so "no data" stays distinguishable from "idle" (design principle: missing
metrics never become a decision): every aggregate carries how many of its GPUs or workers reported.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from tftui.engine.state import ClusterState, GPUView, Res
from tftui.model.giveway import checkpoint, paced
from tftui.model.usage import GPUUsage, WorkerUsage

K = TypeVar("K")


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
        previous: tuple[ClusterState, UsageIndex] | None = None,
    ) -> UsageIndex:
        """Join the samples onto `state`. `previous` — the state and index of the last join, made
        from samples equal to these — makes it cost what changed: a GPU whose capacity is the
        same keeps its entry, a node or workload whose members kept theirs keeps its aggregate
        (the very same objects: the console's rows compare them by identity first); pools are
        summed again. The result equals a full build (same figures, same order). Entries are never
        changed after a build, so sharing them between two indexes is safe."""
        if previous is not None:
            return cls._update(state, gpu_usage, worker_usage, *previous)
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

    @classmethod
    def _update(
        cls,
        state: ClusterState,
        gpu_usage: Mapping[str, GPUUsage],
        worker_usage: Mapping[tuple[str, str], WorkerUsage],
        prev_state: ClusterState,
        prev: UsageIndex,
    ) -> UsageIndex:
        idx = cls()
        fresh: set[str] = set()  # GPUs whose entry is new
        old_gpus, old_used = prev_state.gpus, prev.gpus
        if _same_keys(state.gpus, old_gpus) and _same_keys(old_gpus, old_used):
            # the usual refresh: the same GPUs in the same order, a few views replaced (C-level
            # identity checks find them); every other entry is the last one, as the loop below keeps
            idx.gpus = dict(old_used)
            for name in _replaced(state.gpus, old_gpus):
                gpu = state.gpus[name]
                if old_gpus[name].capacity.tflops != gpu.capacity.tflops:
                    idx.gpus[name] = _gpu_used(gpu, gpu_usage.get(name))
                    fresh.add(name)
        gpus_left = () if idx.gpus else state.gpus.items()
        for name, gpu in gpus_left:
            was = old_gpus.get(name)
            u = old_used.get(name)
            if u is None or was is None or (was is not gpu and was.capacity.tflops != gpu.capacity.tflops):
                u = _gpu_used(gpu, gpu_usage.get(name))
                fresh.add(name)
            idx.gpus[name] = u
        checkpoint()
        for name, node in paced(state.nodes.items()):
            was_node = prev_state.nodes.get(name)
            was_gpus = None if was_node is None else node.gpus if was_node is node else was_node.gpus
            agg = _rolled_up(prev.nodes.get(name), was_gpus, node.gpus, fresh, idx.gpus)
            idx.nodes[name] = agg
            if node.pool in state.pools:
                pu = idx.pools.setdefault(node.pool, Used())
                pu.add(agg)
                pu.expected += agg.expected
        for pool in state.pools:
            idx.pools.setdefault(pool, Used())
        # a worker's entry is its own sample (by namespace and name: its key), so it is kept
        # whenever the worker was there last time
        old_workers = prev.workers
        new_workers: set[str] = set()
        same_workers = _same_keys(state.workers, old_workers)
        if same_workers:  # every worker was there last time: every entry is kept
            idx.workers = dict(old_workers)
        for key, worker in () if same_workers else state.workers.items():
            u = old_workers.get(key)
            if u is None:
                u = Used(expected=1)
                ws = worker_usage.get((worker.namespace, worker.name))
                if ws is not None:
                    u.set(ws.tflops, ws.memory_bytes)
                new_workers.add(key)
            idx.workers[key] = u
        workloads: Iterable[str] = state.workloads
        if not new_workers and _same_keys(state.workloads, prev_state.workloads):
            # a workload whose view is the last one has the same workers, none with a new entry:
            # `_rolled_up` would keep its sum; only the replaced views are looked at
            idx.workloads = dict(prev.workloads) if _same_keys(prev.workloads, state.workloads) else {}
            if idx.workloads:
                workloads = _replaced(state.workloads, prev_state.workloads)
        for key in workloads:
            wl = state.workloads[key]
            was_wl = prev_state.workloads.get(key)
            was_workers = None if was_wl is None else wl.workers if was_wl is wl else was_wl.workers
            idx.workloads[key] = _rolled_up(
                prev.workloads.get(key), was_workers, wl.workers, new_workers, idx.workers
            )
        return idx


def _same_keys(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    """The same keys in the same order (C-level comparisons; keys are usually the same strings)."""
    return len(a) == len(b) and all(map(operator.eq, a, b))


def _replaced(new: Mapping[str, object], old: Mapping[str, object]) -> list[str]:
    """The keys (of two mappings with the same keys in the same order) whose values are not the
    very same objects."""
    return list(itertools.compress(new, map(operator.is_not, new.values(), old.values())))


def _gpu_used(gpu: GPUView, sample: GPUUsage | None) -> Used:
    u = Used(expected=1)
    if sample is not None:
        pct = sample.compute_percent
        u.set(None if pct is None else pct / 100.0 * gpu.capacity.tflops, sample.memory_bytes)
    return u


def _rolled_up(
    agg: Used | None, was_members: object, members: Sequence[K], fresh: set[K], leaves: Mapping[K, Used]
) -> Used:
    """A node's (workload's) sum of its GPUs' (workers') usage: the last sum while it had the same
    members (`was_members`, None when it is new) and none of them has a new entry, else summed again."""
    if (
        agg is None
        or was_members is None
        or was_members != members
        or (fresh and not fresh.isdisjoint(members))
    ):
        agg = Used(expected=len(members))
        for m in members:
            agg.add(leaves[m])
    return agg
