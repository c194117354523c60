"""24 h of allocated and used TFLOPS for one node or one GPU, bucketed for sparklines.

Used is `tf_gpu_usage.compute_percentage` weighted by each GPU's TFLOPS capacity (a node's share of
its compute in use). Allocated is `tf_node_metrics.allocated_tflops_percent` for a node; the store
keeps no per-GPU allocation series, so a GPU has only today's allocation (`allocated_now`). A
minute counts only when every row of it carries the figure (a NULL would make a part look like a
dip); a bucket without rows is None (no data, not idle). The means decide nothing.

The store computes the buckets where it can (`ObjectHistoryQuery`, answered by GreptimeDB's
`object_history` and the simulator's): a day of every GPU's rows streamed into Python cost ≈ 5 CPU-s
per node on a 2,000-node cluster. The row path here is the reference the aggregates are tested against.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tftui.model.usage import ObjectHistoryQuery, ObjectSeries, bucket_means
from tftui.sources.ports import MetricsPort
from tftui.ui.load.data import ConsoleData

__all__ = ["ObjectHistory", "compute_object_history", "rows_object_history", "subject"]

CANCEL_CHECK_ROWS = 5_000


def subject(kind: str, name: str) -> str:
    """The analysis subject of an object's history (`GPUNode:inf-h100-01`)."""
    return f"{kind}:{name}"


@dataclass(frozen=True, slots=True)
class ObjectHistory:
    kind: str  # "GPUNode" or "GPU"
    name: str
    start: datetime
    end: datetime
    bucket: timedelta
    allocated: tuple[float | None, ...]  # % of TFLOPS capacity; all None for a GPU (no series)
    used: tuple[float | None, ...]  # % of TFLOPS capacity
    allocated_now: float | None  # the snapshot's allocation %
    rows: int

    @property
    def has_data(self) -> bool:
        return self.rows > 0


def _stream(metrics: MetricsPort, table: Any, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
    source: Iterator[dict[str, Any]] = metrics.rows(table, start, end)
    try:
        yield from source
    finally:
        close = getattr(source, "close", None)
        if callable(close):  # a generator: stop the store's cursor early (cancel)
            close()


def rows_object_history(
    metrics: MetricsPort, q: ObjectHistoryQuery, cancelled: Callable[[], bool] = lambda: False
) -> ObjectSeries | None:
    """`q` answered from the port's raw rows (the reference the store-side aggregates must equal;
    a port without `object_history` is read this way); None when cancelled."""
    field = "uuid" if q.kind == "GPU" else "node"
    caps = dict(q.gpu_tflops)
    used: dict[datetime, list[Any]] = {}  # ts → [Σ pct × cap, Σ cap] (None: a row lacked it)
    rows = 0
    for i, r in enumerate(_stream(metrics, "tf_gpu_usage", q.start, q.end)):
        if i % CANCEL_CHECK_ROWS == 0 and cancelled():
            return None
        if r.get(field) != q.name:
            continue
        rows += 1
        acc = used.setdefault(r["ts"], [0.0, 0.0])
        pct, cap = r.get("compute_percentage"), caps.get(str(r.get("uuid") or ""), 0.0)
        if pct is None or cap <= 0 or acc[0] is None:
            acc[0] = None
        else:
            acc[0] += float(pct) * cap
            acc[1] += cap
    allocated: dict[datetime, list[Any]] = {}  # ts → [Σ %, rows] (None: a row lacked it)
    if q.kind != "GPU":
        for i, r in enumerate(_stream(metrics, "tf_node_metrics", q.start, q.end)):
            if i % CANCEL_CHECK_ROWS == 0 and cancelled():
                return None
            if r.get("node") != q.name:
                continue
            rows += 1
            acc = allocated.setdefault(r["ts"], [0.0, 0])
            pct = r.get("allocated_tflops_percent")
            acc[0] = None if pct is None or acc[0] is None else acc[0] + float(pct)
            acc[1] += 1
    n = q.buckets

    def parts(minutes: dict[datetime, float | None]) -> Iterator[tuple[int, float, int]]:
        for ts, value in minutes.items():
            if value is not None:
                yield q.index((ts - q.start).total_seconds()), value, 1

    used_pct = {ts: (a[0] / a[1] if a[0] is not None and a[1] > 0 else None) for ts, a in used.items()}
    alloc_pct = {ts: (a[0] / a[1] if a[0] is not None else None) for ts, a in allocated.items()}
    return ObjectSeries(
        used=bucket_means(n, parts(used_pct)), allocated=bucket_means(n, parts(alloc_pct)), rows=rows
    )


def compute_object_history(
    metrics: MetricsPort,
    data: ConsoleData,
    of: str,
    *,
    span: timedelta,
    bucket: timedelta,
    cancelled: Callable[[], bool] = lambda: False,
) -> ObjectHistory | None:
    """The history of `of` (`subject(kind, name)`); None when cancelled.

    Asked of the store as one aggregate when it has one (`object_history`: GreptimeDB, the
    simulator), else read from its raw rows (`rows_object_history`)."""
    kind, _, name = of.partition(":")
    st = data.state
    end = data.refreshed_at
    view = st.nodes.get(name) if kind == "GPUNode" else st.gpus.get(name)
    gpus = [name] if kind == "GPU" else list(st.nodes[name].gpus) if name in st.nodes else []
    q = ObjectHistoryQuery(
        kind=kind,
        name=name,
        start=end - span,
        end=end,
        bucket=bucket,
        gpu_tflops=tuple((g, st.gpus[g].capacity.tflops) for g in sorted(gpus) if g in st.gpus),
    )
    aggregate = getattr(metrics, "object_history", None)
    series: ObjectSeries | None = (
        aggregate(q) if callable(aggregate) else rows_object_history(metrics, q, cancelled)
    )
    if series is None or cancelled():
        return None
    now = (
        view.allocated.tflops / view.capacity.tflops * 100.0
        if view is not None and view.capacity.tflops > 0
        else None
    )
    return ObjectHistory(
        kind=kind,
        name=name,
        start=q.start,
        end=end,
        bucket=bucket,
        allocated=series.allocated,
        used=series.used,
        allocated_now=now,
        rows=series.rows,
    )
