"""FGD (fragmentation gradient descent): the reference policy of the trace what-if.

As Weng et al. describe it ("Beware of Fragmentation", USENIX ATC '23); written from that
description. A node's unallocated GPU capacity is a *fragment* for a task class when that class
cannot use it: all of it when the class cannot be placed on the node at all (too little free CPU,
memory or GPU, or a GPU model it does not accept); otherwise the free share of the GPUs it cannot
use — for a sharing class, each GPU whose free share is below the class's share; for a whole-GPU
class, every partially used GPU; for a class without GPUs, all of it (it can use none). A node's fragmentation is the sum over the workload's classes of
class weight × fragment. FGD puts each task on the node and GPU(s) where the fragmentation grows
least (ties: the first node in the packing's order, then the lowest GPU), and refuses only when no node
fits.

The classes are the distinct task shapes (CPU, memory, GPU count, share, models) of the trace itself,
most frequent first, until they cover `popularity` of the tasks (default all of them); a class's
weight is its task count.
Fragments are kept in integer milli-GPUs × weights, so equal states compare exactly equal.

FGD is a yardstick for the placement modes, not a mode tftui writes into a cluster. It scores every
node for every task, so the fragment growth of each (node, task shape) is cached until the node
changes, and the stale entries of one task are computed together with numpy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tftui.engine.packing import Packing, PTask

POPULARITY = 1.0
FULL = 1000  # milli-GPUs of one GPU
_BIG = np.int64(1 << 62)
_UNLIMITED = 1 << 50

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class TaskClass:
    """One task shape of the workload and how many of the trace's tasks have it."""

    cpu: int
    mem: int
    count: int  # GPUs
    milli: int  # share of each GPU, 1..1000 (0 for CPU-only)
    models: frozenset[str] | None
    weight: int


Shape = tuple[int, int, int, int, frozenset[str] | None]


def workload_classes(shapes: Iterable[Shape], popularity: float = POPULARITY) -> tuple[TaskClass, ...]:
    """The most frequent shapes until they cover `popularity` of all (ties: the smaller shape)."""
    counts = Counter(shapes)
    total = sum(counts.values())
    out: list[TaskClass] = []
    covered = 0
    for shape, n in sorted(counts.items(), key=lambda kv: (-kv[1], _sort_key(kv[0]))):
        out.append(TaskClass(*shape, weight=n))
        covered += n
        if covered >= popularity * total:
            break
    return tuple(out)


def _sort_key(s: Shape) -> tuple[int, int, int, int, tuple[str, ...]]:
    return (s[0], s[1], s[2], s[3], tuple(sorted(s[4] or ())))


def fragment(cpu: float, mem: float, model: str, gpus: Sequence[int], c: TaskClass) -> int:
    """The fragment (milli-GPUs) of a node with this free CPU, memory and GPU shares, for class `c`:
    the reference definition (`FGD` computes the same, vectorised)."""
    total = sum(gpus)
    fits = cpu >= c.cpu and mem >= c.mem and (c.count == 0 or c.models is None or model in c.models)
    if not fits or c.count == 0:  # a task without GPUs cannot use any of them
        return total
    if c.count == 1:  # a GPU below the share is a fragment (all of them when none has it)
        return sum(g for g in gpus if g < c.milli)
    if sum(1 for g in gpus if g >= FULL) < c.count:
        return total
    return sum(g for g in gpus if g < FULL)


def fragmentation(
    cpu: float, mem: float, model: str, gpus: Sequence[int], classes: Sequence[TaskClass]
) -> int:
    """Σ weight × fragment over the classes: a node's fragmentation for the workload."""
    return sum(c.weight * fragment(cpu, mem, model, gpus, c) for c in classes)


class FGD:
    """Places tasks on a `Packing` in milli-GPUs (every GPU's capacity 1000) by least fragmentation
    growth. The packing is the truth; this keeps numpy copies of the nodes it last saw."""

    def __init__(self, packing: Packing, classes: Sequence[TaskClass]) -> None:
        if not classes:
            raise ValueError("FGD needs at least one task class")
        self.pk = packing
        nodes = packing.nodes
        self.k = max([len(n.gpus) for n in nodes] + [1])
        n = len(nodes)
        models = sorted({n.model for n in nodes})
        self.model_index = {m: i for i, m in enumerate(models)}
        self.mi = np.array([self.model_index[n.model] for n in nodes], dtype=np.int64)
        self.has = np.zeros((n, self.k), dtype=bool)
        for i, node in enumerate(nodes):
            self.has[i, : len(node.gpus)] = True
        self.g = np.zeros((n, self.k), dtype=np.int64)
        self.cpu = np.zeros(n, dtype=np.int64)
        self.mem = np.zeros(n, dtype=np.int64)
        self.pods = np.zeros(n, dtype=np.int64)
        self.ver = np.full(n, -1, dtype=np.int64)
        self.cur = np.zeros(n, dtype=np.int64)  # each node's fragmentation now
        self.classes = tuple(classes)
        self.C = np.array([c.cpu for c in classes], dtype=np.int64)
        self.R = np.array([c.mem for c in classes], dtype=np.int64)
        self.NG = np.array([c.count for c in classes], dtype=np.int64)
        self.D = np.array([c.milli if c.count == 1 else FULL for c in classes], dtype=np.int64)
        self.W = np.array([c.weight for c in classes], dtype=np.int64)
        self.sharing = self.NG == 1
        self.whole = self.NG > 1
        self.gpu_class = self.NG > 0
        # accept[model, class]: the class may use that model (CPU-only classes: any node)
        self.accept = np.array(
            [[c.count == 0 or c.models is None or m in c.models for c in classes] for m in models], dtype=bool
        ).reshape(len(models), len(classes))
        self._cache: dict[tuple[object, ...], tuple[I64, I64, I64]] = {}
        self._sync()

    # -- keeping up with the packing -------------------------------------------------------------

    def _sync(self) -> None:
        changed = self.pk.changed
        if not changed:
            return
        idx = np.fromiter(changed, dtype=np.int64, count=len(changed))
        changed.clear()
        for i in idx.tolist():
            node = self.pk.nodes[i]
            for p, g in enumerate(node.gpus):
                if g.cap_t != FULL:
                    raise ValueError(f"FGD works in milli-GPUs: GPU {g.name} has capacity {g.cap_t}")
                self.g[i, p] = round(g.free_t)
            self.cpu[i] = _clip(node.cpu)
            self.mem[i] = _clip(node.mem)
            self.pods[i] = _clip(node.pods)
            self.ver[i] = node.version
        self.cur[idx] = self._frag(self.g[idx], self.cpu[idx], self.mem[idx], self.pods[idx], self.mi[idx])

    def _base(self, cpu: I64, mem: I64, pods: I64, mi: I64) -> npt.NDArray[np.bool_]:
        """[B, M]: the class may be placed on the node as far as CPU, memory, pods and model go."""
        return (cpu[:, None] >= self.C) & (mem[:, None] >= self.R) & (pods[:, None] >= 1) & self.accept[mi]

    def _frag(self, g: I64, cpu: I64, mem: I64, pods: I64, mi: I64) -> I64:
        """Fragmentation of B node states (free shares g [B, K])."""
        total = g.sum(axis=1)
        ok = self._base(cpu, mem, pods, mi)
        full = (g >= FULL).sum(axis=1)
        below = (g[:, :, None] < self.D) * g[:, :, None]  # [B, K, M]
        part = below.sum(axis=1)  # sharing: GPUs below the share; whole: partially used GPUs
        ok &= ~self.whole | (full[:, None] >= self.NG)
        ok &= self.gpu_class  # a task without GPUs cannot use any of them
        f = np.where(ok, part, total[:, None])
        return (f * self.W).sum(axis=1)

    # -- choosing --------------------------------------------------------------------------------

    def _deltas(self, task: PTask, idx: I64) -> tuple[I64, I64]:
        """For nodes `idx`: the least fragmentation growth of placing `task` and the GPU position
        that gives it (−1: whole-GPU or CPU-only; the delta is `_BIG` where the task does not fit)."""
        g, cpu, mem, pods, mi = self.g[idx], self.cpu[idx], self.mem[idx], self.pods[idx], self.mi[idx]
        c, r = int(task.cpu), int(task.mem)
        fits = (cpu >= c) & (mem >= r) & (pods >= 1)
        if task.count and task.models is not None:
            allowed = np.array([m in task.models for m in self.model_index], dtype=bool)
            fits &= allowed[mi]
        cpu2, mem2, pods2 = cpu - c, mem - r, pods - 1
        total = g.sum(axis=1)
        cur = self.cur[idx]
        choice = np.full(len(idx), -1, dtype=np.int64)
        if task.count == 1:
            d = int(task.tflops)
            opt = (g >= d) & self.has[idx] & fits[:, None]  # [B, K]
            below = (g[:, :, None] < self.D) * g[:, :, None]  # [B, K, M]
            part = below.sum(axis=1)  # [B, M]
            g2 = g - d  # the option's GPU after the placement
            below2 = (g2[:, :, None] < self.D) * g2[:, :, None]
            part2 = part[:, None, :] - below + below2  # [B, K, M]
            full = (g >= FULL).sum(axis=1)
            full2 = full[:, None] - (g >= FULL) + (g2 >= FULL)  # [B, K]
            base = self._base(cpu2, mem2, pods2, mi)  # [B, M] after the placement
            ok = base[:, None, :] & (~self.whole | (full2[:, :, None] >= self.NG)) & self.gpu_class
            f = np.where(ok, part2, (total - d)[:, None, None])
            new = (f * self.W).sum(axis=2)  # [B, K]
            delta = np.where(opt, new - cur[:, None], _BIG)
            choice = delta.argmin(axis=1)
            best = delta[np.arange(len(idx)), choice]
            return best, np.where(best < _BIG, choice, -1)
        if task.count > 1:
            full_mask = g >= FULL
            fits &= full_mask.sum(axis=1) >= task.count
            g2 = g.copy()
            # the lowest fully free GPUs are taken (all free ones are alike)
            taken = np.cumsum(full_mask, axis=1) <= task.count
            g2[full_mask & taken] = 0
        else:
            g2 = g
        new = self._frag(g2, cpu2, mem2, pods2, mi)
        return np.where(fits, new - cur, _BIG), choice

    def place(self, task: PTask, exclude: Collection[int] = ()) -> tuple[int, tuple[int, ...]] | None:
        """The node and GPU positions FGD picks for `task`, or None when no node fits."""
        self._sync()
        key = (int(task.cpu), int(task.mem), task.count, int(task.tflops), task.models)
        cached = self._cache.get(key)
        n = len(self.pk.nodes)
        if cached is None:
            cached = self._cache[key] = (
                np.full(n, -2, dtype=np.int64),
                np.zeros(n, dtype=np.int64),
                np.zeros(n, dtype=np.int64),
            )
        stamp, delta, choice = cached
        stale = np.nonzero(stamp != self.ver)[0]
        if stale.size:
            delta[stale], choice[stale] = self._deltas(task, stale)
            stamp[stale] = self.ver[stale]
        d = delta
        if exclude:
            d = delta.copy()
            d[list(exclude)] = _BIG
        i = int(d.argmin())
        if d[i] >= _BIG:
            return None
        if task.count == 1:
            return i, (int(choice[i]),)
        if task.count > 1:
            node = self.pk.nodes[i]
            free = [p for p, g in enumerate(node.gpus) if g.free_t >= FULL]
            return i, tuple(free[: task.count])
        return i, ()


def _clip(x: float) -> int:
    return _UNLIMITED if x > _UNLIMITED else int(x)
