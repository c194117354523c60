"""24 h of allocated and used TFLOPS for one node or one GPU, bucketed for sparklines.

Used is `tf_gpu_usage.compute_percentage` weighted by each GPU's TFLOPS capacity (a node's share of
its compute in use). Allocated is `tf_node_metrics.allocated_tflops_percent` for a node; the store
keeps no per-GPU allocation series, so a GPU has only today's allocation (`allocated_now`). A
minute counts only when every row of it carries the figure (a NULL would make a part look like a
dip); a bucket without rows is None (no data, not idle). The means decide nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tftui.sources.ports import MetricsPort
from tftui.ui.load.data import ConsoleData

__all__ = ["ObjectHistory", "compute_object_history", "subject"]

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


def _means(
    minutes: dict[datetime, float | None], start: datetime, bucket: timedelta, n: int
) -> tuple[float | None, ...]:
    sums = [[0.0, 0] for _ in range(n)]
    for ts, value in minutes.items():
        if value is None:
            continue
        i = min(n - 1, max(0, int((ts - start) // bucket)))
        sums[i][0] += value
        sums[i][1] += 1
    return tuple(s[0] / s[1] if s[1] else None for s in sums)


def compute_object_history(
    metrics: MetricsPort,
    data: ConsoleData,
    of: str,
    *,
    span: timedelta,
    bucket: timedelta,
    cancelled: Callable[[], bool] = lambda: False,
) -> ObjectHistory | None:
    """The history of `of` (`subject(kind, name)`); None when cancelled."""
    kind, _, name = of.partition(":")
    st = data.state
    end = data.refreshed_at
    start = end - span
    n = max(1, -(-span // bucket))
    caps = {g: v.capacity.tflops for g, v in st.gpus.items()}
    field = "uuid" if kind == "GPU" else "node"
    used: dict[datetime, list[Any]] = {}  # ts → [Σ pct × cap, Σ cap] (None: a row lacked it)
    rows = 0
    for i, r in enumerate(_stream(metrics, "tf_gpu_usage", start, end)):
        if i % CANCEL_CHECK_ROWS == 0 and cancelled():
            return None
        if r.get(field) != name:
            continue
        rows += 1
        acc = used.setdefault(r["ts"], [0.0, 0.0])
        pct, cap = r.get("compute_percentage"), caps.get(str(r.get("uuid") or ""), 0.0)
        if pct is None or cap <= 0 or acc[0] is None:
            acc[0] = None
        else:
            acc[0] += float(pct) * cap
            acc[1] += cap
    allocated: dict[datetime, float | None] = {}
    if kind == "GPUNode":
        for i, r in enumerate(_stream(metrics, "tf_node_metrics", start, end)):
            if i % CANCEL_CHECK_ROWS == 0 and cancelled():
                return None
            if r.get("node") != name:
                continue
            rows += 1
            pct = r.get("allocated_tflops_percent")
            allocated[r["ts"]] = None if pct is None else float(pct)
    view = st.nodes.get(name) if kind == "GPUNode" else st.gpus.get(name)
    now = (
        view.allocated.tflops / view.capacity.tflops * 100.0
        if view is not None and view.capacity.tflops > 0
        else None
    )
    used_pct = {ts: (a[0] / a[1] if a[0] is not None and a[1] > 0 else None) for ts, a in used.items()}
    return ObjectHistory(
        kind=kind,
        name=name,
        start=start,
        end=end,
        bucket=bucket,
        allocated=_means(allocated, start, bucket, n),
        used=_means(used_pct, start, bucket, n),
        allocated_now=now,
        rows=rows,
    )
