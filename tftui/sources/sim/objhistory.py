"""The simulator's answer to `ObjectHistoryQuery`: one node's or GPU's samples, not every GPU's.

The same samples `SimMetrics.rows` emits for the object (`tf_gpu_usage` of its GPUs, computed from
the workers on them; `tf_node_metrics` of the node), generated only for that object and bucketed
as the store's aggregate does (`sources.greptime.objhistory`): the row path streamed a day of every
GPU of the cluster to keep one object's.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from datetime import datetime
from typing import Protocol
from zoneinfo import ZoneInfo

from tftui.model.usage import ObjectHistoryQuery, ObjectSeries, bucket_means
from tftui.sources.sim.entities import _Gpu, _Node, _pct, _Worker

__all__ = ["object_series"]


class _Samples(Protocol):
    """What of `SimMetrics` this needs (its sample functions, so the values are the rows' values)."""

    gpus: list[_Gpu]
    nodes: list[_Node]

    def _grid(self, start: datetime, end: datetime) -> Iterator[int]: ...
    def _hours(self, t: int) -> dict[ZoneInfo, float]: ...
    def _worker_sample(self, w: _Worker, t: int, hours: dict[ZoneInfo, float]) -> tuple[float, int]: ...
    def _gpu_sample(
        self, g: _Gpu, t: int, hours: dict[ZoneInfo, float], workers: dict[str, tuple[float, int]]
    ) -> tuple[float, int]: ...


def object_series(m: _Samples, q: ObjectHistoryQuery) -> ObjectSeries:
    gpus = [g for g in m.gpus if (g.name if q.kind == "GPU" else g.node) == q.name]
    node = next((n for n in m.nodes if n.name == q.name), None) if q.kind != "GPU" else None
    caps = dict(q.gpu_tflops)
    origin = q.start.timestamp()
    used: list[tuple[int, float, int]] = []
    alloc: list[tuple[int, float, int]] = []
    rows = 0
    for t in m._grid(q.start, q.end):
        i = q.index(t - origin)
        live = [g for g in gpus if g.created <= t]
        if live:
            hours = m._hours(t)
            workers = {
                w.uid: m._worker_sample(w, t, hours) for g in live for w in g.workers if w.created <= t
            }
            total = weight = 0.0
            known = True
            for g in live:
                pct, _mem = m._gpu_sample(g, t, hours, workers)
                cap = caps.get(g.name, 0.0)
                if cap <= 0:
                    known = False
                else:
                    total += pct * cap
                    weight += cap
            rows += len(live)
            if known and weight > 0:
                used.append((i, total / weight, 1))
        if node is not None and node.created <= t:
            k = bisect.bisect_right(node.alloc_times, t)
            alloc_t = node.alloc_t[k - 1] if k else 0.0
            alloc.append((i, _pct(alloc_t, node.total_t), 1))
            rows += 1
    n = q.buckets
    return ObjectSeries(used=bucket_means(n, used), allocated=bucket_means(n, alloc), rows=rows)
