"""What one refresh produces for the console, and the blocking functions that produce it.

`load` runs in a thread worker (it reads the ports, validates and indexes the snapshot), so the UI
thread only ever receives a finished, immutable `ConsoleData` and renders it. A `StateReader` kept
between refreshes makes a refresh cost what changed: objects seen before are not validated again
and the next `ClusterState` is derived from the previous one (`engine.incremental`). The first
refresh is split in two (`load_state`, then `load_rest`), so the pools view is drawn as soon as the
state is built while metrics and the operation screens are still loading (`pending`).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, cast

from tftui.engine import incremental
from tftui.engine.state import ClusterState, StateWarning
from tftui.engine.usage import UsageIndex
from tftui.model.gcpause import gc_paused
from tftui.model.giveway import checkpoint
from tftui.model.redact import scrub
from tftui.model.usage import GPUUsage, WorkerUsage
from tftui.model.validated import ValidationCache
from tftui.sources.ports import ClusterPort, MetricsPort, Step1Port
from tftui.ui.load.fragmentation import fragmentations
from tftui.ui.load.ops import ConsoleRuntime, OpsData, build_ops, event_rows, journal_rows


class LateSamples(NamedTuple):
    """The store has not answered the read of its latest samples asked at `asked_at` (one refresh's
    wait, `ui.load.latest`): the samples shown are those read for the refresh at `shown_at` (None:
    none read yet)."""

    asked_at: datetime
    shown_at: datetime | None


@dataclass(frozen=True, slots=True, weakref_slot=True)  # prebuilt tables name it weakly
class ConsoleData:
    """One consistent picture: allocation (state), measured use (usage) and how fresh it is."""

    source: str
    state: ClusterState
    usage: UsageIndex
    refreshed_at: datetime
    metrics_error: str | None = None  # metrics failed: allocation only (names the store)
    metrics_late: LateSamples | None = None  # the store is slow: older samples shown (or none)
    metrics_enabled: bool = True  # False: no metrics source configured at all
    metrics_source: str | None = None  # the store's `describe()`, when it has one
    ops: OpsData = field(default_factory=OpsData)  # engine plan per pool, events, journal
    pending: tuple[str, ...] = ()  # what is still loading ("metrics", "operations"): first screen
    problems: tuple[StateWarning, ...] = ()  # objects kept as stored although our schema refuses them

    @property
    def warnings(self) -> list[StateWarning]:
        """The state's warnings, then the objects kept as stored (`StateReader.problems`)."""
        return [*self.state.warnings, *self.problems] if self.problems else self.state.warnings


class ClusterLoadError(Exception):
    """The cluster snapshot could not be read or validated; the message is for the header."""

    def __init__(self, message: str, source: str | None = None) -> None:
        super().__init__(message)
        self.source = source  # what `describe()` said, if it got that far


def describe_error(exc: BaseException) -> str:
    """One line for the status bar: sources raise user-ready messages, anything else gets its type.
    Masked (`redact.scrub`): an error the sources did not word may quote a DSN or a token."""
    text = scrub(" ".join(str(exc).split()))
    if isinstance(exc, RuntimeError | ValueError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


PROBE_TIMEOUT = 3.0
"""Seconds the connection probe of a live cluster may take."""


def connection_error(cluster: object) -> str | None:
    """Why a live cluster's API server cannot be reached right now, or None (also for other sources).

    `KubeCluster` serves snapshots from its watch cache, which keeps answering while the API server is
    gone; the console asks the server for its version (one small GET per refresh) so a lost connection
    shows as "disconnected" with the last good state, and the next good probe recovers.
    """
    kube = sys.modules.get("tftui.sources.kube")  # not loaded: the source cannot be a KubeCluster
    if kube is None or not isinstance(cluster, kube.KubeCluster):
        return None
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        resp: Any = client.VersionApi(cluster.api).get_code(
            _preload_content=False, _request_timeout=PROBE_TIMEOUT
        )
        resp.release_conn()
    except ApiException as exc:
        return f"API server answered {exc.status} {exc.reason or ''}".strip()
    except (HTTPError, OSError) as exc:
        text = " ".join(str(exc).split())
        return text.rsplit(": ", 1)[-1] if text else type(exc).__name__
    return None


def step1_port(metrics: object) -> Step1Port | None:
    """The port that answers step 1 and the alerts for `metrics`, or None.

    Duck-typed like `Step1Port` (the protocol is not runtime-checkable): the metrics port itself
    when it has `describe`, `step1`, `alert_rows` and `alert_history` (`GreptimeMetrics`);
    `SimStep1` over a `SimMetrics` (the demo); None for any other `MetricsPort`.
    """
    if metrics is None:
        return None
    if all(
        callable(getattr(metrics, name, None))
        for name in ("describe", "step1", "alert_rows", "alert_history")
    ):
        return cast(Step1Port, metrics)
    from tftui.sources.sim.usage import SimMetrics

    if isinstance(metrics, SimMetrics):
        from tftui.sources.sim.step1 import SimStep1

        return SimStep1(metrics)
    return None


def store_name(metrics: object) -> str | None:
    """What to call the metrics store in messages: its `describe()` (or the demo's); None if unknown."""
    describe = getattr(metrics, "describe", None)
    if callable(describe):
        try:
            return str(describe())
        except Exception:  # a broken describe must not hide the real error
            return None
    port = step1_port(metrics)
    return port.describe() if port is not None else None


def store_label(name: str) -> str:
    """A store's `describe()` without its notes: `greptime host:port/db (time column ts)` →
    `greptime host:port/db`."""
    return name.split(" (")[0].strip()


def metrics_error_text(metrics: object, exc: BaseException) -> str:
    """One line for the status bar, naming the store unless the message already does.

    `GreptimeMetrics` errors start `metrics store host:port/db: …`; its `describe()` is
    `greptime host:port/db (time column ts)`: the address alone counts as naming it.
    """
    text = describe_error(exc)
    name = store_name(metrics)
    if not name:
        return text
    where = store_label(name)
    address = where.split()[-1] if where else ""
    if (where and where in text) or (address and address in text):
        return text
    return f"{name}: {text}"


def cluster_events(cluster: ClusterPort) -> list[dict[str, Any]] | None:
    """The events a writable source recorded (oldest first), or None when it records none."""
    events = getattr(cluster, "events", None)
    if not callable(events):
        return None
    return list(events())


def runtime_last_compaction(runtime: ConsoleRuntime | None) -> Mapping[str, datetime]:
    """When the runtime last ran each pool's compaction round (empty: never, or no runtime)."""
    last = getattr(runtime, "last_compaction", None) if runtime is not None else None
    if callable(last):
        last = last()
    return dict(last) if isinstance(last, Mapping) else {}


FREEZE_AFTER = 20_000
"""Objects (new in one refresh, or in the first) above which the state is frozen out of the GC."""


class StateReader:
    """Reads and builds the cluster's state, keeping what the next refresh can reuse.

    One per console (refreshes run one at a time). `validated` is the number of objects pydantic
    validated in the last read (none when nothing changed). A source with a `validated_snapshot`
    (a dump, validated and grouped by kind when it was opened) hands one that needs nothing more.
    Any other source is a live cluster (or the demo): an object our schema refuses is kept as the
    API server stored it, as the daemon sees it, and listed in `problems` (`ValidationCache`'s
    `lenient`), so one such object does not stop every refresh.
    """

    def __init__(self) -> None:
        self.cache = ValidationCache(lenient=True)
        self.problems: tuple[StateWarning, ...] = ()
        """The last read's objects kept as stored although our schema refuses them (none for a dump)."""
        self.previous: ClusterState | None = None
        self.validated = 0
        self.unchanged = False
        """The last read found the very same objects as the one before: it returned its state."""
        self._usage: tuple[object, ...] = ()  # (state, GPU samples, worker samples, index) of the last join
        self._ops: tuple[tuple[object, ...], OpsData] | None = None  # what the last ops were built from

    def usage(
        self,
        state: ClusterState,
        gpu_usage: Mapping[str, GPUUsage],
        worker_usage: Mapping[tuple[str, str], WorkerUsage],
    ) -> UsageIndex:
        """`UsageIndex.build`: re-used when the state is the last one and the samples are equal,
        derived from the last one when only the state changed (no metrics, or no new scrape)."""
        last = self._usage
        same = bool(last) and last[1] == gpu_usage and last[2] == worker_usage
        if same and last[0] is state:
            return cast(UsageIndex, last[3])
        previous = (cast(ClusterState, last[0]), cast(UsageIndex, last[3])) if same else None
        usage = UsageIndex.build(state, gpu_usage, worker_usage, previous)
        self._usage = (state, gpu_usage, worker_usage, usage)
        return usage

    def ops(self, inputs: tuple[object, ...], build: Callable[[], OpsData]) -> OpsData:
        """`build()`, re-used when `inputs` (the state first, compared by identity) are the last ones."""
        last = self._ops
        if last is not None and last[0][0] is inputs[0] and last[0][1:] == inputs[1:]:
            return last[1]
        ops = build()
        if ops.plan_error is None:
            self._ops = (inputs, ops)
        return ops

    def read(self, cluster: ClusterPort) -> tuple[str, ClusterState]:
        """(source description, state); raises `ClusterLoadError` and then keeps what it had."""
        source: str | None = None
        try:
            source = cluster.describe()
            held = getattr(cluster, "validated_snapshot", None)
            objects: list[dict[str, Any]] = held().objects if callable(held) else cluster.snapshot()
            with gc_paused():
                problems: list[tuple[str, str]] = []
                if callable(held):  # a dump: validated and grouped by kind when it was opened
                    snap, validated = held(), 0
                else:
                    snap, validated = self.cache.validate(objects, source), self.cache.validated
                    problems = self.cache.problems()
                checkpoint()
                previous = self.previous
                # the very same objects as last time (C-level identity checks): the same state
                self.unchanged = previous is not None and snap.same_objects(previous.snapshot)
                if previous is None:
                    state = ClusterState.build(snap)
                else:
                    state = previous if self.unchanged else incremental.update_state(previous, snap)
                if (previous is None or validated > FREEZE_AFTER) and len(objects) > FREEZE_AFTER:
                    # a big build (the first, a relist): its millions of long-lived dicts and views
                    # would make every later full collection rescan them (seconds at 5,000 nodes);
                    # frozen, the collector skips them. They are still freed by reference counting
                    # when replaced. Frozen before the collector is back on: all of them are young,
                    # and the first allocation after `gc.enable()` would start a collection of the
                    # youngest generation that scans every one (about a CPU-second at 5,000 nodes).
                    gc.freeze()
        except Exception as exc:
            raise ClusterLoadError(describe_error(exc), source) from exc
        self.validated = validated
        self.problems = _kept_as_stored(problems, state)
        self.previous = state
        return source, state


def _kept_as_stored(problems: list[tuple[str, str]], state: ClusterState) -> tuple[StateWarning, ...]:
    """A warning per object kept as stored (object, "field: why"), less those the engine already
    warns about at the same field (a quantity it cannot read is its own blocking warning)."""
    if not problems:
        return ()
    said = {(w.ref, w.message.split(": ", 1)[0]) for w in state.warnings}
    return tuple(
        StateWarning(ref, f"{why} (kept as stored: the console shows what the daemon acts on)")
        for ref, why in sorted(problems)
        if (ref, why.split(": ", 1)[0]) not in said
    )


def load(
    cluster: ClusterPort,
    metrics: MetricsPort | None,
    now: datetime,
    runtime: ConsoleRuntime | None = None,
    reader: StateReader | None = None,
) -> ConsoleData:
    """Read, validate and index one snapshot, then join the latest usage onto it.

    Cluster problems raise `ClusterLoadError` (the caller keeps the last good state). Metrics
    problems never fail the refresh: allocation still renders and `metrics_error` says why used
    figures are missing. The engine's plan, the recorded events and the runtime journal are read
    here too; a failure there only blanks the operation screens (`ops.plan_error`). `reader`
    (kept between refreshes) makes the read cost what changed; without one every object is
    validated and indexed again.
    """
    with gc_paused():  # a refresh makes no cyclic garbage; collections would rescan the state
        reader = reader or StateReader()
        first = load_state(cluster, metrics, now, reader, usage=False)
        return load_rest(first, cluster, metrics, runtime, reader)


def load_state(
    cluster: ClusterPort,
    metrics: MetricsPort | None,
    now: datetime,
    reader: StateReader | None = None,
    *,
    usage: bool = True,
) -> ConsoleData:
    """The cluster's state alone, metrics and operations `pending` (no usage joined yet; with
    `usage` false not even an empty index: `load_rest` builds the real one right after)."""
    reader = reader or StateReader()
    source, state = reader.read(cluster)
    return ConsoleData(
        source=source,
        state=state,
        problems=reader.problems,
        usage=UsageIndex.build(state, {}, {}) if usage else UsageIndex.empty(),
        refreshed_at=now,
        metrics_enabled=metrics is not None,
        metrics_source=store_name(metrics) if metrics is not None else None,
        pending=("metrics", "operations") if metrics is not None else ("operations",),
    )


class LatestUsage(NamedTuple):
    """The latest samples a refresh joins onto its state, or why there are none (`error`); `late`
    when they are older ones because the store is slow to answer."""

    gpus: dict[str, GPUUsage]
    workers: dict[tuple[str, str], WorkerUsage]
    error: str | None = None
    late: LateSamples | None = None


def latest_usage(metrics: MetricsPort | None, state: ClusterState, now: datetime) -> LatestUsage:
    """The metrics' latest GPU and worker samples at `now`; a failure is `error`, never raised."""
    if metrics is None:
        return LatestUsage({}, {})
    share_capacity(metrics, state)
    try:
        return LatestUsage(metrics.latest_gpu_usage(now), metrics.latest_worker_usage(now))
    except Exception as exc:
        return LatestUsage({}, {}, metrics_error_text(metrics, exc))


def load_rest(
    first: ConsoleData,
    cluster: ClusterPort,
    metrics: MetricsPort | None,
    runtime: ConsoleRuntime | None = None,
    reader: StateReader | None = None,
    latest: LatestUsage | None = None,
) -> ConsoleData:
    """`first` (from `load_state`) completed with the latest usage (read here unless `latest` was
    read already) and the operation screens; `reader` (the one that read `first`) re-uses the last
    usage join and operations when their inputs did not change."""
    state, now, source = first.state, first.refreshed_at, first.source
    gpu_usage, worker_usage, metrics_error, late = latest or latest_usage(metrics, state, now)
    reader = reader or StateReader()
    checkpoint()
    usage = reader.usage(state, gpu_usage, worker_usage)
    checkpoint()
    fragmentations(state)  # here, not on the UI thread: the header and the pools view read it
    checkpoint()
    ops = load_ops(cluster, state, now, runtime, reader)
    checkpoint()
    return ConsoleData(
        source=source,
        state=state,
        usage=usage,
        refreshed_at=now,
        metrics_error=metrics_error,
        metrics_late=late,
        metrics_enabled=metrics is not None,
        metrics_source=store_name(metrics) if metrics is not None else None,
        ops=ops,
        problems=first.problems,
    )


def share_capacity(metrics: MetricsPort, state: ClusterState) -> None:
    """Hand the GPU capacities to a store that derives used TFLOPS from compute % with them.

    `GreptimeMetrics.gpu_capacity` (GPU name → (TFLOPS, VRAM bytes)) is what its
    `latest_worker_usage` multiplies compute % by: without it every worker reads 0 TFLOPS.
    """
    if isinstance(getattr(metrics, "gpu_capacity", None), Mapping):
        capacity = {name: (g.capacity.tflops, g.capacity.vram) for name, g in state.gpus.items()}
        setattr(metrics, "gpu_capacity", capacity)  # noqa: B010 - a duck-typed port attribute


def load_ops(
    cluster: ClusterPort,
    state: ClusterState,
    now: datetime,
    runtime: ConsoleRuntime | None,
    reader: StateReader | None = None,
) -> OpsData:
    """The operation screens' data; never raises (an engine or source bug becomes `plan_error`).
    With `reader`, the last plan is re-used when the state, the instant, the last compaction runs,
    the events and the journal are the same (the engine's plan is a pure function of them)."""
    try:
        raw_events = cluster_events(cluster)
        events = event_rows(raw_events or [])
        journal = journal_rows(runtime.journal.entries()) if runtime is not None else ()
        last = runtime_last_compaction(runtime)
        enabled = (raw_events is not None, runtime is not None)

        def build() -> OpsData:
            return build_ops(
                state,
                now,
                last_compaction=last,
                events=events,
                journal=journal,
                events_enabled=enabled[0],
                journal_enabled=enabled[1],
            )

        if reader is None:
            return build()
        return reader.ops((state, now, last, events, journal, enabled), build)
    except Exception as exc:
        return OpsData(plan_error=describe_error(exc))
