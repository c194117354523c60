"""Waste-hunting figures for the first screen: per pool what compaction would release now and how
fragmented its free capacity is, and a one-line cluster summary for the header.

Pure functions over the console's data (no I/O). Fragmentation is the share of a pool's free TFLOPS
that sits on GPUs which cannot host the pool's typical request (the median per-device request of
its workloads, TFLOPS and VRAM): free capacity nobody can use without moving workers, the figure
defrag exists to lower. A pool without workloads has no typical request, so no figure (None), and
a pool with no free capacity has nothing stranded (0 %).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import TYPE_CHECKING

from tftui.engine.state import ClusterState, Res
from tftui.ui.ops import would_release

if TYPE_CHECKING:
    from tftui.ui.data import ConsoleData

__all__ = ["PoolHunt", "cluster_summary", "fragmentation", "fragmentations", "pool_hunt", "typical_request"]


@dataclass(frozen=True, slots=True)
class PoolHunt:
    releasable: int | None  # nodes compaction releases (or would, when not due); None: no runtime
    fragmentation: float | None  # % of free TFLOPS that cannot host the typical request


def typical_request(state: ClusterState, pool: str) -> Res | None:
    """The median per-device request of the pool's workloads with workers (None: none)."""
    requests = [w.request for w in state.workloads.values() if w.pool == pool and w.workers]
    if not requests:
        return None
    return Res(median(r.tflops for r in requests), median(r.vram for r in requests))


def fragmentation(state: ClusterState, pool: str) -> float | None:
    """The share of `pool`'s free TFLOPS stranded on GPUs too small for its typical request."""
    if pool in state.pools:
        return fragmentations(state)[pool]
    return _fragmentation(state, pool)


def _fragmentation(state: ClusterState, pool: str) -> float | None:
    typical = typical_request(state, pool)
    if typical is None:
        return None
    free = stranded = 0.0
    for gpu in state.gpus.values():
        if gpu.pool != pool:
            continue
        left = gpu.available
        if left.tflops <= 0:
            continue
        free += left.tflops
        if left.tflops < typical.tflops or left.vram < typical.vram:
            stranded += left.tflops
    return stranded / free * 100.0 if free > 0 else 0.0


def fragmentations(state: ClusterState) -> dict[str, float | None]:
    """`fragmentation` of every pool, in one pass over the GPUs and kept with the state: the header
    and the pools view read it on every render, and a pass per pool over 40,000 GPUs cost the UI
    thread a second per refresh. The refresh thread computes it before the data is shown."""
    return state.derived("hunting-fragmentation", _all_fragmentations)


def _all_fragmentations(state: ClusterState) -> dict[str, float | None]:
    requests: dict[str, list[Res]] = {}
    for w in state.workloads.values():
        if w.workers and w.pool in state.pools:
            requests.setdefault(w.pool, []).append(w.request)
    typical = {
        pool: Res(median(r.tflops for r in rs), median(r.vram for r in rs)) for pool, rs in requests.items()
    }
    free = dict.fromkeys(typical, 0.0)
    stranded = dict.fromkeys(typical, 0.0)
    for gpu in state.gpus.values():
        pool = gpu.pool
        t = typical.get(pool) if pool is not None else None
        if t is None or pool is None:
            continue
        left = gpu.available
        if left.tflops <= 0:
            continue
        free[pool] += left.tflops
        if left.tflops < t.tflops or left.vram < t.vram:
            stranded[pool] += left.tflops
    return {
        pool: (stranded[pool] / free[pool] * 100.0 if free[pool] > 0 else 0.0) if pool in typical else None
        for pool in state.pools
    }


def pool_hunt(data: ConsoleData) -> dict[str, PoolHunt]:
    out: dict[str, PoolHunt] = {}
    for name in data.state.pools:
        view = data.ops.compaction.get(name)
        releasable = len(would_release(view.result)) if view is not None else None
        out[name] = PoolHunt(releasable, fragmentation(data.state, name))
    return out


def cluster_summary(data: ConsoleData, *, compact: bool = False) -> str:
    """`TFLOPS 47% allocated · 21% used · 3 nodes releasable`: allocation against measured use over
    every pool (use only over pools with samples; `used —` when none has any). `compact` (below 160
    columns, where the header also carries the waste figure): `TF 47% alloc · 21% used · 3 rel`."""
    cap = alloc = used = used_cap = 0.0
    for name, p in data.state.pools.items():
        cap += p.capacity.tflops
        alloc += p.allocated.tflops
        u = data.usage.pools.get(name)
        if u is not None and u.has_data:
            used += u.res.tflops
            used_cap += p.capacity.tflops
    if cap <= 0:
        return ""
    text = f"{'TF' if compact else 'TFLOPS'} {alloc / cap * 100:.0f}% {'alloc' if compact else 'allocated'}"
    text += f" · {used / used_cap * 100:.0f}% used" if used_cap > 0 else " · used —"
    releasable = sum(h.releasable or 0 for h in pool_hunt(data).values())
    if releasable and compact:
        text += f" · {releasable} rel"
    elif releasable:
        text += f" · {releasable} node{'s' if releasable != 1 else ''} releasable"
    return text
