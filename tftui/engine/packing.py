"""A compact, mutable model of one pool's nodes, GPUs and pods, for placing thousands of tasks fast.

`engine.placement.place` answers one question over an immutable `ClusterState`; a trace replay asks
it ten thousand times while the pool changes after every answer, and the defrag-to-admit search
asks it for hypothetical states. `Packing` keeps what those answers depend on — per node its free
CPU, memory and pod slots, its worker count, and per GPU its capacity and free TFLOPS and VRAM —
and updates only the node a bind or unbind touched.

`place_mode` is the TensorFusion scheduler's choice exactly as `placement.place` makes it (a test
checks every choice of a replay against it): the GPU filters, maxWorkerPerNode, cordon and
kube-scheduler's node fit (`engine.nodefit`), the node score as the floor of the mean node-level GPU
score (Pending GPUs a quarter) and the GPU choice by GPU-level score, ties by name. Node scores do
not depend on the request, so they are kept per mode in a sorted list and a placement walks it
best first to the first node that passes the filters. `place_kube` is kube-scheduler's default for
pods that are not TensorFusion workers (NodeResourcesFit LeastAllocated plus
NodeResourcesBalancedAllocation over CPU and memory, ties by name).

Units are the caller's: a `ClusterState` gives TFLOPS and VRAM bytes (`from_state`); a trace gives
milli-GPUs (capacity 1000 for both). Pure: no I/O, no clock.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tftui.engine.fit import Mode, Request, gpu_level_score, node_level_score, reject_reason
from tftui.engine.nodefit import NodeFit, PodRes, affinity_ok, node_fit, pod_requests
from tftui.engine.placement import DEFAULT_MAX_WORKER_PER_NODE
from tftui.engine.state import ClusterState, GPUView, Res

INF = math.inf
FEW = 64  # candidate nodes below which a placement sorts them instead of walking the ranking


@dataclass(slots=True)
class PGPU:
    name: str
    cap_t: float
    cap_v: float
    free_t: float
    free_v: float
    model: str = ""
    ok: bool = True  # Running, used by TensorFusion, in the pool: may be chosen at all
    pending: bool = False  # phase Pending: its node-level score counts a quarter
    view: GPUView | None = None  # from a ClusterState: the filter chain runs on it


@dataclass(slots=True)
class PNode:
    name: str
    idx: int
    model: str
    cpu: float  # free milli-CPU (INF: not limited)
    mem: float  # free memory, caller's unit (INF: not limited)
    pods: float  # free pod slots (INF: not limited)
    cpu_alloc: float  # allocatable (INF: not limited), for kube-scheduler's scores
    mem_alloc: float
    gpus: list[PGPU]
    workers: int = 0
    unschedulable: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    version: int = 0
    max_t: float = INF  # the largest free TFLOPS and VRAM of one usable GPU (quick rejection)
    max_v: float = INF


@dataclass(frozen=True, slots=True)
class PTask:
    """What one pod asks for. GPU takes per device: `tflops` or `pct` (percent of the GPU's TFLOPS,
    truncated as upstream), and `vram`; `count` 0 for a pod without GPUs."""

    key: str
    cpu: float = 0.0
    mem: float = 0.0
    count: int = 0
    tflops: float = 0.0
    vram: float = 0.0
    pct: float | None = None
    models: frozenset[str] | None = None  # accepted GPU models (None: any)
    request: Request | None = None  # from a ClusterState: the exact filter chain
    pod: PodRes | None = None  # node selector and affinity (from a ClusterState)

    def take(self, g: PGPU) -> tuple[float, float]:
        if self.request is not None:
            r = self.request.take(Res(g.cap_t, g.cap_v))
            return r.tflops, r.vram
        t = float(math.trunc(self.pct * g.cap_t / 100)) if self.pct is not None else self.tflops
        return t, self.vram


@dataclass(slots=True)
class PPod:
    """A pod bound in the packing: where, and whether it may be moved (None) or why not."""

    task: PTask
    node: int
    gpus: tuple[int, ...]  # positions in the node's `gpus`
    taken: tuple[tuple[float, float], ...] = ()  # (TFLOPS, VRAM) booked on each of them
    blocked: str | None = None
    pdb: str | None = None  # the one PDB covering it (its budget is in `Packing.budgets`)


class Budgets(dict[str, int]):
    """PDB → disruptions it still allows; `epoch` counts every change, so searches that keep answers
    per node while the budgets are the same can tell (whoever writes them, however)."""

    __slots__ = ("epoch",)

    def __init__(self) -> None:
        super().__init__()
        self.epoch = 0

    def __setitem__(self, key: str, value: int) -> None:
        self.epoch += 1
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self.epoch += 1
        super().__delitem__(key)

    def update(self, *args: Any, **kw: int) -> None:
        self.epoch += 1
        super().update(*args, **kw)

    def pop(self, key: str, *default: Any) -> Any:
        self.epoch += 1
        return super().pop(key, *default)

    def setdefault(self, key: str, default: int = 0) -> int:
        self.epoch += 1
        return super().setdefault(key, default)

    def clear(self) -> None:
        self.epoch += 1
        super().clear()

    def popitem(self) -> tuple[str, int]:
        self.epoch += 1
        return super().popitem()

    def __ior__(self, other: Any) -> Budgets:  # type: ignore[override,misc]
        self.update(other)
        return self


class Packing:
    """Nodes (in a fixed order), bound pods, and per-mode node rankings."""

    def __init__(self, nodes: Iterable[PNode], max_workers: int = DEFAULT_MAX_WORKER_PER_NODE) -> None:
        self.nodes: list[PNode] = list(nodes)
        for i, n in enumerate(self.nodes):
            n.idx = i
            _maxima(n)
        self.max_workers = max_workers
        self.pods: dict[str, PPod] = {}
        self.on_node: list[dict[str, None]] = [{} for _ in self.nodes]  # node → its pods' keys
        self.budgets = Budgets()  # PDB → disruptions it still allows
        self.changed: set[int] = set(range(len(self.nodes)))  # nodes changed since a consumer looked
        self.version = 0
        self.freed = 0  # unbinds so far: a packing that only gained pods has no more room anywhere
        self._rank = {n.name: r for r, n in enumerate(sorted(self.nodes, key=lambda n: n.name))}
        self._scores: dict[Mode, list[int]] = {}
        self._maxima: tuple[int, tuple[float, float, float, float]] = (-1, (INF, INF, INF, INF))
        self._sorted: dict[Mode, list[tuple[int, int, int]]] = {}
        # the quick-rejection figures of every node as arrays, so a placement finds the few nodes
        # that could take a task without walking all of them (kept by `_touch`)
        self._free = np.array(
            [(n.max_t, n.max_v, n.cpu, n.mem, n.pods) for n in self.nodes], dtype=np.float64
        ).reshape(len(self.nodes), 5)
        self._alloc = np.array([(n.cpu_alloc, n.mem_alloc) for n in self.nodes], dtype=np.float64).reshape(
            len(self.nodes), 2
        )
        self._ranks = np.array([self._rank[n.name] for n in self.nodes], dtype=np.int64)

    # -- state ----------------------------------------------------------------------------------

    def bind(self, key: str, task: PTask, node: int, gpus: tuple[int, ...], **kw: Any) -> None:
        n = self.nodes[node]
        taken = []
        for p in gpus:
            g = n.gpus[p]
            t, v = task.take(g)
            g.free_t -= t
            g.free_v -= v
            taken.append((t, v))
        n.cpu -= task.cpu
        n.mem -= task.mem
        n.pods -= 1
        if task.count:
            n.workers += 1
        self.pods[key] = PPod(task, node, gpus, tuple(taken), **kw)
        self.on_node[node][key] = None
        self._touch(node)

    def restore(self, key: str, pod: PPod) -> None:
        """Put back a pod `unbind` returned, with exactly what it had booked."""
        n = self.nodes[pod.node]
        for p, (t, v) in zip(pod.gpus, pod.taken, strict=True):
            g = n.gpus[p]
            g.free_t -= t
            g.free_v -= v
        n.cpu -= pod.task.cpu
        n.mem -= pod.task.mem
        n.pods -= 1
        if pod.task.count:
            n.workers += 1
        self.pods[key] = pod
        self.on_node[pod.node][key] = None
        self._touch(pod.node)

    def unbind(self, key: str) -> PPod:
        pod = self.pods.pop(key)
        self.freed += 1
        del self.on_node[pod.node][key]
        n = self.nodes[pod.node]
        for p, (t, v) in zip(pod.gpus, pod.taken, strict=True):
            g = n.gpus[p]
            g.free_t += t
            g.free_v += v
        n.cpu += pod.task.cpu
        n.mem += pod.task.mem
        n.pods += 1
        if pod.task.count:
            n.workers -= 1
        self._touch(pod.node)
        return pod

    def maxima(self) -> tuple[float, float, float, float]:
        """The largest free GPU TFLOPS, VRAM, node CPU and memory in the pool (per version)."""
        if self._maxima[0] != self.version:
            if not self.nodes:
                self._maxima = (self.version, (-INF, -INF, -INF, -INF))
            else:
                t, v, c, m = self._free[:, :4].max(axis=0).tolist()
                self._maxima = (self.version, (t, v, c, m))
        return self._maxima[1]

    def pods_on(self, i: int) -> list[tuple[str, PPod]]:
        return [(k, self.pods[k]) for k in self.on_node[i]]

    def _touch(self, i: int) -> None:
        n = self.nodes[i]
        _maxima(n)
        self._free[i] = (n.max_t, n.max_v, n.cpu, n.mem, n.pods)
        n.version += 1
        self.version += 1
        self.changed.add(i)
        for mode, scores in self._scores.items():
            old = (-scores[i], self._rank[n.name], i)
            lst = self._sorted[mode]
            del lst[bisect.bisect_left(lst, old)]
            scores[i] = self.node_score(mode, n)
            bisect.insort(lst, (-scores[i], self._rank[n.name], i))

    # -- the TensorFusion scheduler -------------------------------------------------------------

    @staticmethod
    def node_score(mode: Mode, n: PNode) -> int:
        """Floor of the mean node-level score over every GPU of the node (Pending: a quarter)."""
        if not n.gpus:
            return 0
        total = 0
        for g in n.gpus:
            s = node_level_score(mode, Res(g.cap_t, g.cap_v), Res(g.free_t, g.free_v))
            total += s // 4 if g.pending else s
        return total // len(n.gpus)

    def ranking(self, mode: Mode) -> list[tuple[int, int, int]]:
        """(−score, name rank, node) best first."""
        got = self._sorted.get(mode)
        if got is None:
            scores = [self.node_score(mode, n) for n in self.nodes]
            self._scores[mode] = scores
            got = self._sorted[mode] = sorted(
                (-s, self._rank[n.name], n.idx) for s, n in zip(scores, self.nodes, strict=True)
            )
        return got

    def gpu_fits(self, task: PTask, g: PGPU) -> bool:
        if task.request is not None:
            assert g.view is not None
            return reject_reason(g.view, Res(g.free_t, g.free_v), task.request) is None
        if not g.ok or (task.models is not None and g.model not in task.models):
            return False
        t, v = task.take(g)
        return g.free_t >= t and g.free_v >= v

    def gpu_fits_free(self, task: PTask, g: PGPU) -> bool:
        """Whether `task` would pass the GPU's filters were the GPU entirely free."""
        ft, fv = g.free_t, g.free_v
        g.free_t, g.free_v = g.cap_t, g.cap_v
        try:
            return self.gpu_fits(task, g)
        finally:
            g.free_t, g.free_v = ft, fv

    def node_refusal(self, task: PTask, n: PNode) -> str | None:
        """Why kube-scheduler or the plugin's node filters refuse `n` (None: they pass)."""
        if task.count and self.max_workers > 0 and n.workers >= self.max_workers:
            return "max-workers"
        if n.unschedulable:
            return "unschedulable"
        pod = task.pod
        if pod is not None and (pod.node_selector or pod.affinity) and not affinity_ok(pod, n.labels):
            return "node-affinity"
        if n.pods < 1:
            return "pods"
        if task.cpu > n.cpu + 1e-9:
            return "cpu"
        if task.mem > n.mem + 0.5:
            return "memory"
        return None

    def fitting_gpus(self, task: PTask, n: PNode) -> list[int] | None:
        """Positions of the node's GPUs that pass the filters, if at least `count` do and the node
        passes its filters; else None."""
        if not task.count:
            return [] if self.node_refusal(task, n) is None else None
        got = [p for p, g in enumerate(n.gpus) if self.gpu_fits(task, g)]
        if len(got) < task.count or self.node_refusal(task, n) is not None:
            return None
        return got

    def pick_gpus(self, mode: Mode, task: PTask, n: PNode, fitting: list[int]) -> tuple[int, ...]:
        def key(p: int) -> tuple[int, str]:
            g = n.gpus[p]
            return -gpu_level_score(mode, Res(g.cap_t, g.cap_v), Res(g.free_t, g.free_v)), g.name

        return tuple(sorted(fitting, key=key)[: task.count])

    def place_mode(
        self, task: PTask, mode: Mode, exclude: Collection[int] = ()
    ) -> tuple[int, tuple[int, ...]] | None:
        """Where the TensorFusion scheduler in `mode` puts `task` (node, GPU positions), or None."""
        if not task.count:
            return self.place_kube(task, exclude)
        # a request in absolute figures fits no node whose best GPU is smaller: skip those fast
        need_t, need_v = (task.tflops, task.vram) if task.pct is None else (0.0, task.vram)
        top = self.maxima()
        if need_t > top[0] or need_v > top[1] or task.cpu > top[2] or task.mem > top[3]:
            return None  # no node has that much anywhere
        nodes = self.nodes
        ranking = self.ranking(mode)
        f = self._free
        near = np.flatnonzero((f[:, 0] >= need_t) & (f[:, 1] >= need_v) & (f[:, 2] >= task.cpu)).tolist()
        if len(near) <= FEW:  # the few candidates in ranking order, not the whole ranking walked
            scores, rank = self._scores[mode], self._rank
            walk: Iterable[tuple[int, int, int]] = sorted((-scores[i], rank[nodes[i].name], i) for i in near)
        else:
            walk = ranking
        for _, _, i in walk:
            n = nodes[i]
            if n.max_t < need_t or n.max_v < need_v or n.cpu < task.cpu or i in exclude:
                continue
            fitting = self.fitting_gpus(task, n)
            if fitting is not None:
                return i, self.pick_gpus(mode, task, n, fitting)
        return None

    # -- kube-scheduler's default, for pods without GPUs -----------------------------------------

    def place_kube(self, task: PTask, exclude: Collection[int] = ()) -> tuple[int, tuple[int, ...]] | None:
        """LeastAllocated + BalancedAllocation over CPU and memory (integer maths as kube-scheduler),
        the highest sum first, ties by name: over every node at once (`_place_kube_walk` is the same
        per node, used where the pod has node selectors or affinity)."""
        pod = task.pod
        if not self.nodes or (pod is not None and (pod.node_selector or pod.affinity)):
            return self._place_kube_walk(task, exclude)
        f = self._free
        cordoned = np.fromiter((n.unschedulable for n in self.nodes), dtype=bool, count=len(self.nodes))
        ok = (f[:, 4] >= 1) & (f[:, 2] + 1e-9 >= task.cpu) & (f[:, 3] + 0.5 >= task.mem) & ~cordoned
        if exclude:
            ok[np.fromiter(exclude, dtype=np.int64)] = False
        idx = np.flatnonzero(ok)
        if not idx.size:
            return None
        least = np.zeros(idx.size)
        fracs = []
        with np.errstate(invalid="ignore", divide="ignore"):
            for col, want in ((2, task.cpu), (3, task.mem)):
                free, alloc = f[idx, col], self._alloc[idx, col - 2]
                open_ = (alloc == INF) | (alloc <= 0)
                used = alloc - free + want
                least += np.where(open_, 100.0, np.floor_divide((alloc - used) * 100, alloc))
                fracs.append(np.where(open_, 0.0, np.minimum(1.0, used / alloc)))
        score = np.floor_divide(least, 2) + np.trunc((1 - np.abs(fracs[0] - fracs[1]) / 2) * 100)
        top = idx[score == score.max()]
        return int(top[np.argmin(self._ranks[top])]), ()

    def _place_kube_walk(
        self, task: PTask, exclude: Collection[int] = ()
    ) -> tuple[int, tuple[int, ...]] | None:
        best: tuple[int, int, int] | None = None
        for n in self.nodes:
            if n.idx in exclude or self.node_refusal(task, n) is not None:
                continue
            fracs = []
            least = 0
            for free, alloc, want in ((n.cpu, n.cpu_alloc, task.cpu), (n.mem, n.mem_alloc, task.mem)):
                if alloc == INF or alloc <= 0:
                    least += 100
                    fracs.append(0.0)
                    continue
                used = alloc - free + want
                least += int((alloc - used) * 100 // alloc)
                fracs.append(min(1.0, used / alloc))
            score = least // 2 + int((1 - abs(fracs[0] - fracs[1]) / 2) * 100)
            key = (-score, self._rank[n.name], n.idx)
            if best is None or key < best:
                best = key
        return None if best is None else (best[2], ())

    # -- building -------------------------------------------------------------------------------

    @classmethod
    def from_state(cls, state: ClusterState, pool: str, fit: NodeFit | None = None) -> Packing:
        """The pool's nodes as the scheduler sees them now (TFLOPS and VRAM bytes), with every
        worker bound. Blockers and PDBs are filled in by the caller (`engine.admit`)."""
        room = fit or node_fit(state)
        nodes: list[PNode] = []
        positions: dict[str, tuple[int, int]] = {}
        for nv in sorted(state.nodes_of(pool), key=lambda n: n.name):
            gpus = []
            for g in sorted(state.gpus_of(nv.name), key=lambda g: g.name):
                av = g.available
                gpus.append(
                    PGPU(g.name, g.capacity.tflops, g.capacity.vram, av.tflops, av.vram, g.model,
                         g.pool == pool, g.phase == "Pending", g)
                )  # fmt: skip
            cpu, mem, pods = room.free(nv.name)
            r = room.rooms.get(nv.name)
            labels = r.labels if r is not None else {}
            node = PNode(
                nv.name,
                len(nodes),
                "",
                INF if cpu is None else cpu,
                INF if mem is None else mem,
                INF if pods is None else pods,
                INF if r is None or r.cpu is None else r.cpu,
                INF if r is None or r.memory is None else r.memory,
                gpus,
                workers=len(nv.workers),
                unschedulable=nv.unschedulable,
                labels=labels,
            )
            for p, pg in enumerate(gpus):
                positions[pg.name] = (node.idx, p)
            nodes.append(node)
        pk = cls(nodes)
        for key in sorted(k for n in nodes for k in state.nodes[n.name].workers):
            w = state.workers[key]
            placed = [positions[g] for g in w.gpu_ids if g in positions]
            if not placed or w.terminating:
                continue
            task = task_of_worker(w)
            at = placed[0][0]
            # already booked in the GPUs' and nodes' figures: record without subtracting again
            each = (w.request.tflops, w.request.vram)
            pk.pods[key] = PPod(task, at, tuple(p for _, p in placed), tuple(each for _ in placed))
            pk.on_node[at][key] = None
        pk.changed = set(range(len(nodes)))
        return pk


def _maxima(n: PNode) -> None:
    usable = [g for g in n.gpus if g.ok]
    n.max_t = max((g.free_t for g in usable), default=-INF)
    n.max_v = max((g.free_v for g in usable), default=-INF)


def task_of_worker(w: Any) -> PTask:
    """The `PTask` of a `WorkerView` (its request and its pod's node-fit requests)."""
    req = Request.of_worker(w)
    pod = pod_requests(w.obj)
    return PTask(w.key, pod.cpu, pod.memory, req.count, req.tflops or 0.0, req.vram, req.compute_percent,
                 None, req, pod)  # fmt: skip
