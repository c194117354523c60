"""How few nodes could a pool's current workers fit on? A provable lower bound, per resource and LP.

The what-if simulator divides a policy's active nodes by this bound, so "1.10×" means the policy
keeps at most 10 % more nodes than *any* placement could (the true optimum lies in between).

**Model.** A pool has nodes `i` (the ones it has at that time, each usable once) with GPUs; a node's
capacity is `c_i = (Σ GPU TFLOPS, Σ GPU VRAM, GPU count)`. A worker asks, per device, for TFLOPS
`t` and VRAM `v` on `count` distinct GPUs (upstream charges the request to every GPU it names). The
demand vector is `D = (Σ t·count, Σ v·count, B)` where `B` counts *exclusive* device slots: the
larger of the number of slots whose `t` exceeds half the largest GPU's TFLOPS and the number whose
`v` exceeds half the largest GPU's VRAM. Two slots of one such class can never share a GPU (their
sum exceeds every GPU's capacity in that resource), so any feasible placement uses at least `B`
distinct GPUs. Every feasible GPU-level placement onto a node set `S`
therefore satisfies `Σ_{i∈S} c_ik ≥ D_k` for k = TFLOPS, VRAM, GPUs (GPU-level constraints — a slot
fits inside one GPU, count distinct GPUs — only add restrictions, so dropping them relaxes).

**Per-resource bound.** For each resource, the smallest `n` such that the `n` largest nodes by that
resource cover its demand: any cover with fewer nodes would have less capacity than the largest ones.

**LP bound.** The LP relaxation `min Σ y_i  s.t.  Σ y_i c_ik ≥ D_k (all k),  0 ≤ y_i ≤ 1` has every
feasible node set as a 0/1 point, so its optimum is ≤ the optimum node count. Rather than solve it,
we evaluate its Lagrangian dual: for any `λ ≥ 0`,

    L(λ) = λ·D − Σ_i max(0, λ·c_i − 1)

is ≤ Σ y_i for every feasible `y` (because `y_i ≥ y_i·λ·c_i − y_i·max(0, λ·c_i − 1)`, `y_i ≤ 1`, and
`Σ y_i λ·c_i ≥ λ·D`). Any `λ` we try is therefore a valid bound; we maximise over a fixed grid of
directions `w` (weights on the simplex over the demand-normalised resources, 1/10 steps) and, on each
ray `λ = s·w`, exactly over `s` — `L` is concave and piecewise-linear in `s`, so its maximum is at a
breakpoint `s = 1/(w·c_j)`. The axis directions reproduce the per-resource bounds, so the LP bound
is never weaker; mixed directions catch pools where no single resource binds but together they do.
The node bound is `⌈max L − 1e-9⌉`.

**Configured bound.** Compaction never releases a node that would leave the pool with less than its
`capacityConfig.warmResources` available or `minResources` in total (TFLOPS and VRAM). Demanding
`max(min, D + warm)` instead of `D` gives the fewest nodes the pool's *own configuration* allows —
the fair yardstick for a policy (`pool_bound(..., configured=True)`, the default); the pure packing
bound is `configured=False`. If a resource's demand exceeds the whole pool's capacity, the
workers cannot all fit: the bound is the pool's node count and `fits` is False.

Pure: numbers in, numbers out; `pool_bound` only reads a `ClusterState`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tftui.engine.state import ClusterState
from tftui.model.quantity import QuantityError, quantity_float

__all__ = ["RESOURCES", "Bound", "Item", "NodeCap", "lower_bound", "pool_bound", "pool_demand"]

RESOURCES = ("tflops", "vram", "gpus")
_GRID = 10  # simplex grid resolution of the dual directions
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class NodeCap:
    """A node's GPUs: TFLOPS and VRAM (bytes) of each device."""

    gpus: tuple[tuple[float, float], ...]

    @property
    def vector(self) -> tuple[float, float, float]:
        return (sum(g[0] for g in self.gpus), sum(g[1] for g in self.gpus), float(len(self.gpus)))


@dataclass(slots=True)
class Item:
    """A worker: per-device TFLOPS and VRAM, on `count` distinct GPUs. Not frozen: one is made per
    worker for every state the what-if samples, and a frozen one costs 2.5 times as much to make."""

    tflops: float
    vram: float
    count: int = 1


@dataclass(frozen=True, slots=True)
class Bound:
    """Lower bounds on the nodes needed; `nodes` is the best (max) of them."""

    per_resource: dict[str, int]
    lp: int
    nodes: int
    demand: tuple[float, float, float]
    fits: bool  # False: the demand exceeds the capacity of every node together

    def ratio(self, active: int) -> float | None:
        """active ÷ bound (None when nothing needs a node)."""
        return active / self.nodes if self.nodes > 0 else None


def _greedy(caps: Sequence[float], demand: float) -> int | None:
    """Fewest of the largest `caps` covering `demand` (None: all of them do not)."""
    if demand <= _EPS:
        return 0
    total = 0.0
    for n, c in enumerate(sorted(caps, reverse=True), start=1):
        total += c
        if total >= demand - _EPS * max(1.0, demand):
            return n
    return None


def _directions(k: int) -> list[tuple[float, ...]]:
    """Points of the simplex over k coordinates with 1/_GRID steps (k ≤ 3)."""
    out: list[tuple[float, ...]] = []
    if k == 1:
        return [(1.0,)]
    for a in range(_GRID + 1):
        if k == 2:
            out.append((a / _GRID, 1 - a / _GRID))
            continue
        for b in range(_GRID + 1 - a):
            out.append((a / _GRID, b / _GRID, (_GRID - a - b) / _GRID))
    return [w for w in out if any(x > 0 for x in w)]


def _ray_max(a: Sequence[tuple[float, int]], demand: float) -> float:
    """max over s ≥ 0 of s·demand − Σ max(0, s·a_i − 1), `a` as (value, multiplicity) with distinct
    values sorted descending, all > 0: the maximum is at a breakpoint s = 1/a_j."""
    best, prefix, j = 0.0, 0.0, 0
    for aj, m in a:
        best = max(best, (demand - prefix) / aj + j)
        prefix += aj * m
        j += m
    return best


def lower_bound(
    nodes: Sequence[NodeCap],
    items: Iterable[Item],
    *,
    headroom: tuple[float, float] = (0.0, 0.0),
    floor: tuple[float, float] = (0.0, 0.0),
) -> Bound:
    """The node-count lower bound for placing `items` on a subset of `nodes` (see module docstring).

    `headroom` (TFLOPS, VRAM) must stay available beyond the items and `floor` is the least total
    capacity (a pool's warm and min resources)."""
    items = list(items)
    max_t = max((g[0] for n in nodes for g in n.gpus), default=0.0)
    max_v = max((g[1] for n in nodes for g in n.gpus), default=0.0)
    dt = sum(i.tflops * i.count for i in items)
    dv = sum(i.vram * i.count for i in items)
    dt, dv = max(floor[0], dt + headroom[0]), max(floor[1], dv + headroom[1])
    excl = max(
        sum(i.count for i in items if i.tflops > max_t / 2),
        sum(i.count for i in items if i.vram > max_v / 2),
    )
    demand = (dt, dv, float(excl))
    vecs = [n.vector for n in nodes]
    per: dict[str, int] = {}
    fits = True
    for k, name in enumerate(RESOURCES):
        n = _greedy([v[k] for v in vecs], demand[k])
        if n is None:
            fits = False
            n = len(nodes)
        per[name] = n
    if not fits:
        return Bound(per, len(nodes), len(nodes), demand, False)
    active = [k for k in range(len(RESOURCES)) if demand[k] > _EPS]
    lp = 0
    if active:
        # normalise each resource by its demand, so the dual grid weighs them evenly
        shapes = Counter(tuple(v[k] / demand[k] for k in active) for v in vecs)  # nodes alike: once
        best = 0.0
        for w in _directions(len(active)):
            values: Counter[float] = Counter()
            for c, m in shapes.items():
                x = sum(wk * xk for wk, xk in zip(w, c, strict=True))
                if x > 0:
                    values[x] += m
            if values:
                best = max(best, _ray_max(sorted(values.items(), reverse=True), sum(w)))
        lp = max(0, math.ceil(best - 1e-9))
    nodes_needed = max(lp, *per.values())
    return Bound(per, lp, nodes_needed, demand, True)


def pool_demand(state: ClusterState, pool: str) -> list[Item]:
    """The pool's workers that need a place: not terminating, not finished (Pending ones included)."""
    return list(state.derived("lowerbound-demand", _demands).get(pool, ()))


def _demands(state: ClusterState) -> dict[str | None, list[Item]]:
    """Every pool's `pool_demand`, in worker order, from one pass over the workers (read-only)."""
    out: dict[str | None, list[Item]] = {}
    for w in state.workers.values():
        if w.terminating or w.phase in ("Succeeded", "Failed"):
            continue
        out.setdefault(w.pool, []).append(Item(w.request.tflops, w.request.vram, max(1, w.gpu_count)))
    return out


def _quantity(res: Any, field: str) -> float:
    """A capacityConfig quantity as a float; an invalid one counts as 0 (compaction reports it)."""
    raw = res.get(field) if isinstance(res, dict) else None
    if raw is None:
        return 0.0
    try:
        return quantity_float(str(raw))
    except (QuantityError, ValueError):
        return 0.0


def pool_bound(state: ClusterState, pool: str, *, configured: bool = True) -> Bound:
    """`lower_bound` over the pool's nodes of this snapshot and its workers; `configured` adds the
    pool's warm headroom and min floor (see the module docstring)."""
    pv = state.pools[pool]
    caps = [
        NodeCap(tuple((state.gpus[g].capacity.tflops, state.gpus[g].capacity.vram) for g in nv.gpus))
        for nv in (state.nodes[n] for n in pv.nodes)
    ]
    headroom = floor = (0.0, 0.0)
    if configured:
        cc = (pv.obj.get("spec") or {}).get("capacityConfig") or {}
        warm, low = cc.get("warmResources") or {}, cc.get("minResources") or {}
        headroom = (_quantity(warm, "tflops"), _quantity(warm, "vram"))
        floor = (_quantity(low, "tflops"), _quantity(low, "vram"))
    return lower_bound(caps, pool_demand(state, pool), headroom=headroom, floor=floor)
