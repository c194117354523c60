"""Feeding the autoscaler's histograms from the metrics store (docs/behaviour.md A12).

A first (history) load asks the store to aggregate per (worker pod, TFLOPS bucket) when it can
(`GreptimeMetrics.usage_histograms`): a few rows per pod instead of one per sample, plus one per
pod and day (`vram_windows`) when the window is longer than a day. Incremental loads, and stores
without those queries, read raw rows; the what-if simulator's usage hands the same
rows as columns (`usage_columns`: its generated profiles) or per-worker tuples (`usage_samples`).
All give the same histograms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any, Protocol, cast

from tftui.engine.autoscale import DEFAULT_PERIOD, AutoscaleState, effective_config
from tftui.engine.autoscale_columns import WorkerColumns, add_worker_columns
from tftui.engine.autoscale_long import add_long_history
from tftui.engine.state import ClusterState
from tftui.model.gcpause import without_gc
from tftui.model.giveway import checkpoint
from tftui.model.usage import HistogramQuery, PodBucket, PodBucketArrays, SampleInstant

__all__ = [
    "CATCH_UP",
    "MAX_AUTOSCALE_HISTORY",
    "RAW_CHUNK",
    "autoscale_window",
    "load_usage",
    "rebuild_after",
    "settled",
]

MAX_AUTOSCALE_HISTORY = timedelta(days=30)  # a bound on the first load, whatever the config says
RAW_CHUNK = timedelta(minutes=2)  # raw rows read at once: 120,000 at 5,000 nodes
CATCH_UP = timedelta(hours=1)
"""The longest gap read row by row after a pause (the store down, the view closed): an hour at
5,000 nodes is 3.6 million rows, tens of CPU seconds; past it the histograms are rebuilt from the
store's aggregates over the window, as a restart rebuilds them (`rebuild_after`)."""


def rebuild_after(window: timedelta, interval: timedelta = timedelta(0)) -> timedelta:
    """The gap since the last load past which a load rebuilds instead of reading the gap's rows:
    `CATCH_UP` (never less than two loop intervals, so a long configured interval keeps loading
    incrementally), at most the history window."""
    return min(window, max(CATCH_UP, 2 * interval))


def autoscale_window(state: ClusterState) -> timedelta:
    """How far back the first load reads: the longest `historyDataPeriod` (at least 2 h, at most 30 d).

    Here rather than in `runtime.loops` (which re-exports it): `tftui plan` needs it without the
    daemon's loops and their HTTP client."""
    window = DEFAULT_PERIOD
    for wv in state.workloads.values():
        cfg = effective_config(state, wv)
        window = max(window, min(cfg.history, MAX_AUTOSCALE_HISTORY))
    return window


def settled(metrics: object, now: datetime) -> datetime:
    """Up to when a usage load reads at `now`: rows may reach a store after their timestamp
    (`INGEST_LAG`, GreptimeDB's pipeline), and a load marks everything before its end as read; the
    simulator's rows are complete at once."""
    lag = getattr(metrics, "INGEST_LAG", None)
    return now - lag if isinstance(lag, timedelta) else now


_GroupsInto = Callable[[HistogramQuery, Callable[[Iterator[PodBucket]], int]], int]


def _groups_into(metrics: object) -> _GroupsInto | None:
    """The store's aggregated history groups handed to a consumer: streamed off the wire where the
    store can (`usage_histograms_into`), else its whole list (`usage_histograms`); None: neither."""
    into = getattr(metrics, "usage_histograms_into", None)
    if callable(into):
        return cast(_GroupsInto, into)
    aggregate = getattr(metrics, "usage_histograms", None)
    if not callable(aggregate):
        return None
    return lambda q, consume: consume(iter(aggregate(q)))


class _Rows(Protocol):
    def rows(self, table: Any, start: datetime, end: datetime) -> Iterator[dict[str, Any]]: ...


@without_gc  # every branch builds objects per row or group beside the process's whole state
def load_usage(
    metrics: _Rows,
    astate: AutoscaleState,
    start: datetime,
    end: datetime,
    loaded: Callable[[datetime], None] | None = None,
) -> int:
    """Add `tf_worker_usage` in [start, end) to `astate` (configured first); returns rows covered.

    Raw rows are read `RAW_CHUNK` at a time, each chunk materialised before any of it is applied
    (a store failing mid-read must not leave half a chunk in the histograms; the aggregated answer
    arrives whole or not at all), and `loaded(t)` is told after each: rows before t are in. So the
    rows held stay bounded however long the gap (a store down for an hour at 5,000 nodes: millions).
    """
    query: HistogramQuery | None = astate.history_query(start, end)
    columns = getattr(metrics, "usage_histogram_arrays", None)
    if query is not None and callable(columns):  # the same groups as columns (the simulator)
        arrays: PodBucketArrays = columns(query)
        checkpoint()
        return astate.add_pod_bucket_arrays(query, arrays)
    groups_into = _groups_into(metrics)  # the engine applies the groups once the last is in
    if query is not None and groups_into is not None:
        q = query
        return groups_into(q, lambda groups: astate.add_pod_buckets(q, groups))
    windows = getattr(metrics, "vram_windows", None)
    if query is None and groups_into is not None and callable(windows):
        # a first load longer than one VRAM window: the same aggregates plus each pod's daily peaks
        long = astate.history_query(start, end, long=True)
        if long is not None:
            peaks = windows(long)  # whole before any group is applied: nothing is half-applied
            return groups_into(long, lambda groups: add_long_history(astate, long, groups, peaks))
    columns_of = getattr(metrics, "usage_columns", None)
    cols: WorkerColumns | None = columns_of(start, end) if callable(columns_of) else None
    if cols is not None:  # the same samples as columns (the what-if simulator's generated usage)
        return add_worker_columns(astate, cols)
    samples = getattr(metrics, "usage_samples", None)
    if callable(samples):  # the rows as per-worker tuples (the what-if simulator's usage)
        instants: list[SampleInstant] = samples(start, end)
        return astate.add_worker_samples(instants)
    n = 0
    t = start
    while t < end:
        upto = min(t + RAW_CHUNK, end)
        n += astate.add_samples(list(metrics.rows("tf_worker_usage", t, upto)))
        if loaded is not None:
            loaded(upto)
        t = upto
    return n
