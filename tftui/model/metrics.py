"""Step-1 figures (measure allocation against usage) and alert rows, as the metrics ports return them.

Both metrics sources (GreptimeDB over SQL, the embedded simulator in Python) return these types, so
the diagnosis, alerts and reports are computed once in the engine and "same data → same report" is
checkable. Window aggregates only; raw rows never leave the source.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

#: The 15 built-in alert rules of upstream-model §5, in upstream order. `alert_rows` answers each
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
    tflops_allocated_pct: float
    vram_allocated_pct: float
    samples: int


@dataclass(frozen=True, slots=True)
class GPUUsageSummary:
    """Reference page query 2 (tf_gpu_usage): average compute %, VRAM peak of one GPU.

    `vram_peak_pct` is `max(memory_percentage)`, or — when that column is missing or zero, as
    upstream's hypervisor writes it today — `max(memory_bytes)` ÷ the GPU's capacity (behaviour M3).
    """

    node: str
    uuid: str
    compute_used_pct: float
    vram_peak_pct: float | None
    vram_peak_bytes: float
    samples: int


@dataclass(frozen=True, slots=True)
class WorkloadRequest:
    """Reference page query 3 (tf_worker_resources): average request per worker per device."""

    namespace: str
    workload: str
    tflops_request: float
    vram_request_bytes: float
    gpu_count: float
    workers: int  # distinct worker pods seen in the window
    samples: int


@dataclass(frozen=True, slots=True)
class WorkloadUsage:
    """Reference page query 4 (tf_worker_usage): measured use of a workload's workers.

    `compute_tflops` is written as 0 upstream, so TFLOPS are derived: compute_percentage / 100 ×
    the GPU's capacity TFLOPS, per worker device, then averaged (`tflops_avg`, per worker) and
    maximised (`tflops_peak`, the busiest worker-minute).
    """

    namespace: str
    workload: str
    tflops_avg: float
    tflops_peak: float
    vram_peak_bytes: float
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
        nodes=tuple(sorted(nodes, key=lambda n: (n.tflops_allocated_pct, n.node, n.pool))),
        gpus=tuple(sorted(gpus, key=lambda g: (g.compute_used_pct, g.node, g.uuid))),
        workload_requests=tuple(sorted(requests, key=lambda r: (r.namespace, r.workload))),
        workload_usage=tuple(sorted(usage, key=lambda u: (u.namespace, u.workload))),
        missing=tuple(sorted(missing)),
    )
