"""What one refresh produces for the console, and the blocking function that produces it.

`load` runs in a thread worker (it reads the ports, validates and indexes the snapshot), so the UI
thread only ever receives a finished, immutable `ConsoleData` and renders it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tftui.engine.state import ClusterState
from tftui.engine.usage import UsageIndex
from tftui.model.dump import validate_items
from tftui.model.usage import GPUUsage, WorkerUsage
from tftui.sources.ports import ClusterPort, MetricsPort


@dataclass(frozen=True, slots=True)
class ConsoleData:
    """One consistent picture: allocation (state), measured use (usage) and how fresh it is."""

    source: str
    state: ClusterState
    usage: UsageIndex
    refreshed_at: datetime
    metrics_error: str | None = None  # metrics failed: allocation only
    metrics_enabled: bool = True  # False: no metrics source configured at all


class ClusterLoadError(Exception):
    """The cluster snapshot could not be read or validated; the message is for the header."""

    def __init__(self, message: str, source: str | None = None) -> None:
        super().__init__(message)
        self.source = source  # what `describe()` said, if it got that far


def describe_error(exc: BaseException) -> str:
    """One line for the status bar: sources raise user-ready messages, anything else gets its type."""
    text = " ".join(str(exc).split())
    if isinstance(exc, RuntimeError | ValueError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load(cluster: ClusterPort, metrics: MetricsPort | None, now: datetime) -> ConsoleData:
    """Read, validate and index one snapshot, then join the latest usage onto it.

    Cluster problems raise `ClusterLoadError` (the caller keeps the last good state). Metrics
    problems never fail the refresh: allocation still renders and `metrics_error` says why used
    figures are missing.
    """
    source: str | None = None
    try:
        source = cluster.describe()
        objects: list[dict[str, Any]] = cluster.snapshot()
        state = ClusterState.build(validate_items(objects, source))
    except Exception as exc:
        raise ClusterLoadError(describe_error(exc), source) from exc
    metrics_error: str | None = None
    gpu_usage: dict[str, GPUUsage] = {}
    worker_usage: dict[tuple[str, str], WorkerUsage] = {}
    if metrics is not None:
        try:
            gpu_usage = metrics.latest_gpu_usage(now)
            worker_usage = metrics.latest_worker_usage(now)
        except Exception as exc:
            metrics_error = describe_error(exc)
            gpu_usage, worker_usage = {}, {}
    usage = UsageIndex.build(state, gpu_usage, worker_usage)
    return ConsoleData(
        source=source,
        state=state,
        usage=usage,
        refreshed_at=now,
        metrics_error=metrics_error,
        metrics_enabled=metrics is not None,
    )
