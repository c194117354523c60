"""Step-1 figures (measure allocation against usage) and alert rows, as the metrics ports return them.

Both metrics sources (GreptimeDB over SQL, the embedded simulator in Python) return these types, so
the diagnosis, alerts and reports are computed once in the engine and "same data → same report" is
checkable. Window aggregates only; raw rows never leave the source.

A figure is None when no row of its group carried a value for it (every value NULL, or — for
TFLOPS derived from compute % — no row on a GPU of known capacity): a missing sample is never 0.
`samples` still counts every row, since rows prove the object existed over the window.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

#: The 15 built-in alert rules of TensorFusion's chart (M5), in upstream order. `alert_rows` answers each
#: with the rows (dicts keyed by the upstream query's output columns) that would fire.
ALERT_RULES: tuple[str, ...] = (
    "WorkerTFlopsThrottled",
    "WorkerVRAMSwitchCountIncreasing",
    "WorkerAllocationFailed",
    "GPUVRAMFull",
    "GPUTFlopsFull",
    "GPUTemperatureHigh",
    "NodeTFlopsAllocationCritical",
    "NodeTFlopsAllocationWarning",
    "PoolTotalTFlopsAllocationCritical",
    "PoolTotalTFlopsAllocationWarning",
    "NodeVRAMAllocationCritical",
    "NodeVRAMAllocationWarning",
    "PoolVRAMAllocationWarning",
    "EmptyGPU",
    "IdleGPU",
)


class NoData(Exception):
    """A query had nothing to read (table or column absent, never written): not the same as healthy."""


@dataclass(frozen=True, slots=True)
class NodeAllocation:
    """Reference page query 1: average allocation % of one node over the window (tf_node_metrics)."""

    node: str
    pool: str
    tflops_allocated_pct: float | None  # None: every row NULL
    vram_allocated_pct: float | None
    samples: int


@dataclass(frozen=True, slots=True)
class GPUUsageSummary:
    """Reference page query 2 (tf_gpu_usage): average compute %, VRAM peak of one GPU.

    `vram_peak_pct` is `max(memory_percentage)`, or — when that column is missing or zero, as
    upstream's hypervisor writes it today — `max(memory_bytes)` ÷ the GPU's capacity (behaviour M3).
    """

    node: str
    uuid: str
    compute_used_pct: float | None  # None: compute_percentage NULL in every row
    vram_peak_pct: float | None
    vram_peak_bytes: float | None  # None: memory_bytes NULL in every row
    samples: int


@dataclass(frozen=True, slots=True)
class WorkloadRequest:
    """Reference page query 3 (tf_worker_resources): average request per worker per device."""

    namespace: str
    workload: str
    tflops_request: float | None  # None: every row NULL
    vram_request_bytes: float | None
    gpu_count: float | None
    workers: int  # distinct worker pods seen in the window
    samples: int


@dataclass(frozen=True, slots=True)
class WorkloadUsage:
    """Reference page query 4 (tf_worker_usage): measured use of a workload's workers.

    `compute_tflops` is written as 0 upstream, so TFLOPS are derived: compute_percentage / 100 ×
    the GPU's capacity TFLOPS, per worker device, then averaged (`tflops_avg`, per worker) and
    maximised (`tflops_peak`, the busiest worker-minute). Rows with a NULL compute % or on a GPU
    of unknown capacity (a uuid that matches no GPU) are no TFLOPS sample; rows with NULL
    `memory_bytes` no VRAM sample.
    """

    namespace: str
    workload: str
    tflops_avg: float | None
    tflops_peak: float | None
    vram_peak_bytes: float | None
    samples: int


@dataclass(frozen=True, slots=True)
class Step1:
    """The four reference-page queries over one window ending at `now`."""

    now: datetime
    window: timedelta
    nodes: tuple[NodeAllocation, ...] = ()
    gpus: tuple[GPUUsageSummary, ...] = ()
    workload_requests: tuple[WorkloadRequest, ...] = ()
    workload_usage: tuple[WorkloadUsage, ...] = ()
    missing: tuple[str, ...] = field(default=())  # tables/columns that had no data (named)


AlertRow = dict[str, Any]
#: One evaluation of a rule: the rows that would fire, or NoData when its window had nothing to read.
AlertResult = list[AlertRow] | NoData


def history_by_step(
    alert_rows: Callable[[str, datetime], list[AlertRow]], rule: str, times: Sequence[datetime]
) -> list[AlertResult]:
    """`alert_history` made of one `alert_rows` call per instant (the simulator, test doubles).

    The last instant (`now`) is evaluated first: with NoData there the engine replays nothing (the
    rule is `no-data`), so the earlier instants are not queried and carry that same NoData.
    """
    if not times:
        return []

    def one(t: datetime) -> AlertResult:
        try:
            return alert_rows(rule, t)
        except NoData as exc:
            return exc

    last = one(times[-1])
    if isinstance(last, NoData):
        return [last] * len(times)
    return [one(t) for t in times[:-1]] + [last]


def assemble_step1(
    now: datetime,
    window: timedelta,
    nodes: list[NodeAllocation],
    gpus: list[GPUUsageSummary],
    requests: list[WorkloadRequest],
    usage: list[WorkloadUsage],
    missing: set[str],
) -> Step1:
    """One Step1 from the four query results, in the canonical order both sources must share.

    A table that produced no row is named in `missing`, so an empty table never reads as "no waste".
    """
    for name, part in (
        ("tf_node_metrics", nodes),
        ("tf_gpu_usage", gpus),
        ("tf_worker_resources", requests),
        ("tf_worker_usage", usage),
    ):
        if not part:
            missing.add(name)
    return Step1(
        now=now,
        window=window,
        nodes=tuple(sorted(nodes, key=lambda n: (*_nulls_last(n.tflops_allocated_pct), n.node, n.pool))),
        gpus=tuple(sorted(gpus, key=lambda g: (*_nulls_last(g.compute_used_pct), g.node, g.uuid))),
        workload_requests=tuple(sorted(requests, key=lambda r: (r.namespace, r.workload))),
        workload_usage=tuple(sorted(usage, key=lambda u: (u.namespace, u.workload))),
        missing=tuple(sorted(missing)),
    )


def add_usage_group(
    a: list[Any],
    cap: float,
    pct_sum: float | None,
    pct_n: int,
    pct_max: float | None,
    mem_max: float | None,
    rows: int,
    direct: tuple[float, int, float | None] | None = None,
) -> None:
    """Add one (workload, GPU) group to a workload's [Σ TFLOPS, n, peak TFLOPS, peak bytes, rows].

    `direct` is (Σ, count, max) of `compute_tflops` where the writer filled it in (non-zero in
    the window); otherwise TFLOPS are compute % × `cap`. Shared by both sources' step-1 query 4 so
    they treat a missing sample alike: compute % NULL, or a GPU without capacity (`cap` ≤ 0), adds
    no TFLOPS sample; NULL bytes add no VRAM sample.
    """
    if direct is not None:
        total, n, peak = direct
        if n:
            a[0] += total
            a[1] += n
            if peak is not None:
                a[2] = peak if a[2] is None else max(a[2], peak)
    elif cap > 0 and pct_n and pct_sum is not None:
        a[0] += pct_sum / 100.0 * cap
        a[1] += pct_n
        if pct_max is not None:
            peak = pct_max / 100.0 * cap
            a[2] = peak if a[2] is None else max(a[2], peak)
    if mem_max is not None:
        a[3] = mem_max if a[3] is None else max(a[3], mem_max)
    a[4] += rows


def _nulls_last(x: float | None) -> tuple[bool, float]:
    return (x is None, 0.0 if x is None else x)
