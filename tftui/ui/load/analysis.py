"""The console's slow metrics work: the waste diagnosis, the alert replay and a workload's history.

Each is a blocking function of (ports, one refresh's `ConsoleData`) that the app runs in a thread
worker and caches per refresh (`TfTuiApp.request_analysis`); screens only render the finished,
immutable `Analysis`. The decisions come from the engine: `report.assemble` (and through it
`waste.diagnose`) for findings and totals, `alerts.evaluate_history` for rule states. The only
arithmetic here is the workload history's bucketing for its sparklines (means and maxima of the
port's rows), which decides nothing.

Which `Step1Port` answers: the metrics port itself when it implements the step-1 and alert
queries (`GreptimeMetrics`), else `SimStep1` over the simulator's `SimMetrics` (the demo). Any other
`MetricsPort` has no step-1 queries, and the waste and alerts views say so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from tftui.engine.alerts import RULES, AlertHistory, evaluate_history, evaluation_times
from tftui.engine.report import ALERT_SPAN, Report, assemble
from tftui.engine.state import ClusterState
from tftui.sources.ports import MetricsPort, Step1Port
from tftui.ui.load.autoscale import AutoscaleAnalysis, AutoscaleLoader
from tftui.ui.load.data import ConsoleData, metrics_error_text, step1_port, store_name
from tftui.ui.load.objhistory import ObjectHistory, compute_object_history

WASTE_WINDOW: Final = timedelta(days=1)
"""Window of the waste diagnosis (the reference page's `'1d'::INTERVAL`)."""
HISTORY_SPAN: Final = timedelta(hours=24)
"""How far back a workload's sparklines reach."""
HISTORY_BUCKET: Final = timedelta(minutes=15)
"""One sparkline point: the mean of the per-minute workload totals in it."""
HISTORY_CACHED: Final = 8
"""Workload histories kept (the waste and alerts analyses are always kept)."""
CANCEL_CHECK_ROWS: Final = 5_000

AnalysisKind = Literal["waste", "alerts", "history", "autoscale", "objhistory"]
WASTE: Final[AnalysisKind] = "waste"
ALERTS: Final[AnalysisKind] = "alerts"
HISTORY: Final[AnalysisKind] = "history"
AUTOSCALE: Final[AnalysisKind] = "autoscale"
OBJHISTORY: Final[AnalysisKind] = "objhistory"
"""A node's or a GPU's 24 h allocated and used TFLOPS (`objhistory`; subject `Kind:name`)."""
"""The engine's autoscale recommendations for every workload (`load.autoscale.AutoscaleLoader`)."""
AnalysisKey = tuple[AnalysisKind, str]
"""(kind, subject): the subject is the workload key for a history, else empty."""


class NoStep1Error(Exception):
    """The metrics port cannot answer the step-1 and alert queries."""


class Cancelled(Exception):
    """The worker was cancelled (the console is closing or a newer request superseded it)."""


# -- helpers -------------------------------------------------------------------------------------


def gpu_capacity(state: ClusterState) -> dict[str, tuple[float, float]]:
    """GPU name → (TFLOPS, VRAM bytes): what the step-1 queries and the history need."""
    return {name: (g.capacity.tflops, g.capacity.vram) for name, g in state.gpus.items()}


# -- results -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WasteAnalysis:
    """The step-1 report without alerts: findings by wasted GPU-hours, totals, per-pool waste, rows."""

    report: Report


@dataclass(frozen=True, slots=True)
class AlertsAnalysis:
    """Every rule replayed over `history.span` up to `history.now`."""

    history: AlertHistory
    first: Mapping[str, datetime]
    """Per rule, its first replayed evaluation: an alert seen there may have started earlier."""

    def open_start(self, rule: str, starts_at: datetime) -> bool:
        first = self.first.get(rule)
        return first is not None and starts_at <= first


@dataclass(frozen=True, slots=True)
class WorkloadHistory:
    """One workload's `tf_worker_usage` rows over [start, end), bucketed for sparklines.

    Bucket values are workload totals (Σ over its workers' devices), the mean of the per-minute
    totals in the bucket; None where the bucket has no rows (no data, not idle). A minute's total
    is only known when every row of it has the figure (NULL, or TFLOPS on a GPU of unknown
    capacity, would make a part sum look like a dip), so an all-NULL stretch is a gap. The per-device
    figures are over every row of the span, as the diagnosis computes them (TFLOPS = compute % ×
    the GPU's capacity; `compute_tflops` is written as 0 upstream).
    """

    namespace: str
    name: str
    start: datetime
    end: datetime
    bucket: timedelta
    tflops: tuple[float | None, ...]
    vram: tuple[float | None, ...]
    tflops_avg: float | None
    tflops_peak: float | None
    vram_avg: float | None
    vram_peak: float | None
    rows: int
    workers: int
    unknown_gpus: tuple[str, ...] = ()  # devices without a known capacity (TFLOPS not derived)

    @property
    def has_data(self) -> bool:
        return self.rows > 0


AnalysisValue = WasteAnalysis | AlertsAnalysis | WorkloadHistory | AutoscaleAnalysis | ObjectHistory


@dataclass(frozen=True, slots=True)
class Analysis:
    """The outcome of one analysis for one refresh (`seq`); `value` may be an older good one."""

    kind: AnalysisKind
    subject: str
    seq: int  # the refresh it was computed for
    now: datetime  # that refresh's time, the analysis' `now`
    source: str  # the metrics store that answered
    value: AnalysisValue | None
    value_now: datetime | None  # when `value` was computed for (older than `now` after an error)
    error: str | None
    seconds: float

    @property
    def key(self) -> AnalysisKey:
        return (self.kind, self.subject)

    @property
    def stale(self) -> bool:
        """An error this time; `value` is from an earlier refresh."""
        return self.error is not None and self.value is not None

    def keeping(self, previous: Analysis | None) -> Analysis:
        """After an error, keep showing `previous`'s value (marked stale by `error`)."""
        if self.error is None or previous is None or previous.value is None:
            return self
        return replace(self, value=previous.value, value_now=previous.value_now)


# -- computations --------------------------------------------------------------------------------


def compute_waste(port: Step1Port, data: ConsoleData, window: timedelta = WASTE_WINDOW) -> WasteAnalysis:
    """Step 1 over `window` ending at the refresh, diagnosed against its cluster state."""
    step1 = port.step1(window, data.refreshed_at, gpu_capacity(data.state))
    report = assemble(step1, data.state, None, source=port.describe(), cluster=data.source)
    return WasteAnalysis(report)


def compute_alerts(port: Step1Port, now: datetime, span: timedelta = ALERT_SPAN) -> AlertsAnalysis:
    """Every built-in rule replayed over `span` up to `now` (as `tftui report` does)."""
    history = evaluate_history(port, RULES, now=now, span=span)
    first = {rule.name: evaluation_times(rule, now, span)[0] for rule in RULES}
    return AlertsAnalysis(history, first)


def compute_history(
    metrics: MetricsPort,
    data: ConsoleData,
    workload: str,
    *,
    span: timedelta = HISTORY_SPAN,
    bucket: timedelta = HISTORY_BUCKET,
    cancelled: Callable[[], bool] = lambda: False,
) -> WorkloadHistory:
    """`workload`'s ("namespace/name") rows of `tf_worker_usage` over the span, per minute summed.

    Read through the port's `workload_rows` where it has one (the store filters by the workload's
    tags); another port's rows are streamed and filtered here. TFLOPS follow the data per GPU as
    step 1 does: `compute_tflops` where it is written (non-zero in the span), else compute % × the
    GPU's capacity; a NULL is no sample, never 0.
    """
    wl = data.state.workloads.get(workload)
    namespace, _, name = workload.partition("/")
    if wl is not None:
        namespace, name = wl.namespace, wl.name
    end = data.refreshed_at
    start = end - span
    n_buckets = max(1, -(-span // bucket))
    capacity = gpu_capacity(data.state)
    of_workload = getattr(metrics, "workload_rows", None)
    source: Iterator[dict[str, Any]] = (
        of_workload(namespace, name, start, end)
        if callable(of_workload)
        else metrics.rows("tf_worker_usage", start, end)
    )
    mine: list[dict[str, Any]] = []
    try:
        for i, r in enumerate(source):
            if i % CANCEL_CHECK_ROWS == 0 and cancelled():
                raise Cancelled
            if r.get("workload") == name and r.get("namespace") == namespace:
                mine.append(r)
    finally:
        close = getattr(source, "close", None)
        if callable(close):  # a generator: stop the store's cursor early (cancel)
            close()

    written = {str(r.get("uuid") or "") for r in mine if r.get("compute_tflops")}  # non-zero
    minutes: dict[datetime, list[Any]] = {}  # ts → [Σ TFLOPS, Σ bytes] (None: a row lacked it)
    tflops, vram = _Figure(), _Figure()
    workers: set[str] = set()
    unknown: set[str] = set()
    for r in mine:
        workers.add(str(r.get("worker") or r.get("pod_name") or ""))
        acc = minutes.setdefault(r["ts"], [0.0, 0.0])
        pct, mem = r.get("compute_percentage"), r.get("memory_bytes")
        uuid = str(r.get("uuid") or "")
        tf: float | None = None
        if uuid in written:
            direct = r.get("compute_tflops")
            tf = None if direct is None else float(direct)
        elif pct is not None:
            cap = capacity.get(uuid, (0.0, 0.0))[0]
            if cap > 0:
                tf = float(pct) / 100.0 * cap
            else:
                unknown.add(uuid)
        tflops.add(acc, 0, tf)
        vram.add(acc, 1, None if mem is None else float(mem))

    sums = [[0.0, 0, 0.0, 0] for _ in range(n_buckets)]  # Σ TFLOPS, minutes, Σ bytes, minutes
    for ts, (tf, vb) in minutes.items():
        index = min(n_buckets - 1, max(0, int((ts - start) // bucket)))
        if tf is not None:
            sums[index][0] += tf
            sums[index][1] += 1
        if vb is not None:
            sums[index][2] += vb
            sums[index][3] += 1
    return WorkloadHistory(
        namespace=namespace,
        name=name,
        start=start,
        end=end,
        bucket=bucket,
        tflops=tuple(s[0] / s[1] if s[1] else None for s in sums),
        vram=tuple(s[2] / s[3] if s[3] else None for s in sums),
        tflops_avg=tflops.mean(),
        tflops_peak=tflops.peak,
        vram_avg=vram.mean(),
        vram_peak=vram.peak,
        rows=len(mine),
        workers=len(workers - {""}),
        unknown_gpus=tuple(sorted(unknown)),
    )


class _Figure:
    """One figure of a workload's rows: sum, samples and peak, and each minute's sum (`add`)."""

    __slots__ = ("n", "peak", "total")

    def __init__(self) -> None:
        self.total = 0.0
        self.n = 0
        self.peak: float | None = None

    def add(self, minute: list[Any], at: int, value: float | None) -> None:
        """A row's value; None is no sample, and leaves its minute's sum unknown (never 0)."""
        if value is None:
            minute[at] = None
            return
        if minute[at] is not None:
            minute[at] += value
        self.total += value
        self.n += 1
        self.peak = value if self.peak is None or value > self.peak else self.peak

    def mean(self) -> float | None:
        return self.total / self.n if self.n else None


@dataclass(frozen=True, slots=True)
class AnalysisSettings:
    """Windows of the analyses (the snapshot tests shorten the waste window to keep them fast)."""

    waste_window: timedelta = WASTE_WINDOW
    alert_span: timedelta = ALERT_SPAN
    history_span: timedelta = HISTORY_SPAN
    history_bucket: timedelta = HISTORY_BUCKET


def run_analysis(
    key: AnalysisKey,
    metrics: MetricsPort | None,
    data: ConsoleData,
    seq: int,
    settings: AnalysisSettings = AnalysisSettings(),
    cancelled: Callable[[], bool] = lambda: False,
    autoscale: AutoscaleLoader | None = None,
) -> Analysis:
    """Compute one analysis; never raises except `Cancelled` (errors become `Analysis.error`)."""
    kind, subject = key
    started = time.perf_counter()
    value: AnalysisValue | None = None
    error: str | None = None
    source = (store_name(metrics) if metrics is not None else None) or "the metrics source"
    try:
        if metrics is None:
            raise NoStep1Error("no metrics source configured (give --metrics-dsn or set TFTUI_METRICS_DSN)")
        if kind == AUTOSCALE:
            loader = autoscale if autoscale is not None else AutoscaleLoader()
            value = loader.load(metrics, data.state, data.refreshed_at)
            if cancelled():
                raise Cancelled
        elif kind == OBJHISTORY:
            found = compute_object_history(
                metrics,
                data,
                subject,
                span=settings.history_span,
                bucket=settings.history_bucket,
                cancelled=cancelled,
            )
            if found is None:
                raise Cancelled
            value = found
        elif kind == HISTORY:
            value = compute_history(
                metrics,
                data,
                subject,
                span=settings.history_span,
                bucket=settings.history_bucket,
                cancelled=cancelled,
            )
        else:
            port = step1_port(metrics)
            if port is None:
                raise NoStep1Error(f"{source} does not answer the step-1 and alert queries")
            source = port.describe()
            if kind == WASTE:
                value = compute_waste(port, data, settings.waste_window)
            else:
                value = compute_alerts(port, data.refreshed_at, settings.alert_span)
            source = port.describe()  # GreptimeDB names its time column once it has looked
    except Cancelled:
        raise
    except NoStep1Error as exc:
        error = str(exc)
    except Exception as exc:
        error = metrics_error_text(metrics, exc)
    return Analysis(
        kind=kind,
        subject=subject,
        seq=seq,
        now=data.refreshed_at,
        source=source,
        value=value,
        value_now=data.refreshed_at if value is not None else None,
        error=error,
        seconds=time.perf_counter() - started,
    )
