"""Waste-hunting figures for the first screen: per pool what compaction would release now and how
fragmented its free capacity is, and a one-line cluster summary for the header.

Pure functions over the console's data (no I/O). The fragmentation figure itself is computed from
the state by `load.fragmentation` (the refresh worker fills it before the data is shown); this
module only puts it next to the compaction figure per pool and words the header line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tftui.ui.load.fragmentation import fragmentation
from tftui.ui.load.ops import would_release

if TYPE_CHECKING:
    from tftui.ui.load.data import ConsoleData

__all__ = ["PoolHunt", "cluster_summary", "pool_hunt"]


@dataclass(frozen=True, slots=True)
class PoolHunt:
    releasable: int | None  # nodes compaction releases (or would, when not due); None: no runtime
    fragmentation: float | None  # % of free TFLOPS that cannot host the typical request


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
