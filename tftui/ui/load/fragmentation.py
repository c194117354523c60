"""How fragmented each pool's free capacity is: the share of its free TFLOPS that sits on GPUs which
cannot host the pool's typical request (the median per-device request of its workloads, TFLOPS and
VRAM): free capacity nobody can use without moving workers, the figure defrag exists to lower. A
pool without workloads has no typical request, so no figure (None), and a pool with no free
capacity has nothing stranded (0 %).

Pure functions of the state (no I/O), kept with the loaders because the refresh worker computes
them (`data.load`) so the UI thread only reads the result; `render.hunting` shows it.
"""

from __future__ import annotations

from statistics import median

from tftui.engine.state import ClusterState, Res
from tftui.model.giveway import paced

__all__ = ["fragmentation", "fragmentations", "typical_request"]


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
    for w in paced(state.workloads.values()):
        if w.workers and w.pool in state.pools:
            requests.setdefault(w.pool, []).append(w.request)
    typical = {
        pool: Res(median(r.tflops for r in rs), median(r.vram for r in rs)) for pool, rs in requests.items()
    }
    free = dict.fromkeys(typical, 0.0)
    stranded = dict.fromkeys(typical, 0.0)
    for gpu in paced(state.gpus.values()):
        pool = gpu.pool
        t = typical.get(pool) if pool is not None else None
        if t is None or pool is None:
            continue
        cap, used = gpu.capacity, gpu.allocated  # `available` without a `Res` per GPU (40,000)
        left = cap.tflops - used.tflops
        if left <= 0:
            continue
        free[pool] += left
        if left < t.tflops or cap.vram - used.vram < t.vram:
            stranded[pool] += left
    return {
        pool: (stranded[pool] / free[pool] * 100.0 if free[pool] > 0 else 0.0) if pool in typical else None
        for pool in state.pools
    }
