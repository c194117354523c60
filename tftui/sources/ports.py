"""The two ports every source implements (docs/architecture.md): cluster objects and metrics.

Front ends and the runtime depend on these protocols only, so the embedded simulator, a dump,
a live cluster and GreptimeDB are interchangeable.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from tftui.model.metrics import AlertResult, AlertRow, NoData, Step1
from tftui.model.usage import GPUUsage, WorkerUsage

if TYPE_CHECKING:
    from tftui.engine.plan import Action

__all__ = [
    "ActionError",
    "ClusterPort",
    "GPUUsage",
    "MetricsPort",
    "MetricsTable",
    "NoData",
    "NotLeader",
    "SourceError",
    "Step1Port",
    "WorkerUsage",
    "WritableClusterPort",
]

MetricsTable = Literal["tf_gpu_usage", "tf_worker_usage", "tf_node_metrics", "tf_worker_resources"]


class SourceError(RuntimeError):
    """A source could not deliver (unreachable, refused, malformed); the message is for the user."""


class ActionError(SourceError):
    """The cluster refused an action; `status` is the HTTP-like code (429 = PDB refusal, 404 = gone)."""

    def __init__(self, message: str, status: int = 500) -> None:
        super().__init__(message)
        self.status = status


class NotLeader(ActionError):
    """The write was abandoned: this replica is no longer the leader (its fence said no before an
    attempt, or its term ran out while one was in flight). Never retried."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 0)


class ClusterPort(Protocol):
    """A consistent snapshot of TensorFusion and core objects (Kubernetes JSON shape)."""

    def describe(self) -> str:
        """Where the objects come from, for the header: `demo`, `dump d.json`, a context name."""
        ...

    def snapshot(self) -> list[dict[str, Any]]:
        """All objects as `kubectl get -o json` items (apiVersion, kind, metadata, spec, status).

        An object that did not change since the last call is the very same dict, and a dict handed
        out is never mutated later (a change replaces it): consumers reuse what they derived from an
        object by its identity (`model.validated`, `engine.incremental`)."""
        ...


class MetricsPort(Protocol):
    """Usage and allocation history shaped like the GreptimeDB `tf_*` tables."""

    def latest_gpu_usage(self, now: datetime, lookback: timedelta = ...) -> dict[str, GPUUsage]:
        """GPU name → its most recent sample within `lookback` before `now` (absent = no data)."""
        ...

    def latest_worker_usage(
        self, now: datetime, lookback: timedelta = ...
    ) -> dict[tuple[str, str], WorkerUsage]:
        """(namespace, pod name) → most recent sample within `lookback` (absent = no data)."""
        ...

    def rows(self, table: MetricsTable, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        """Raw rows of `table` with `start <= ts < end`, ordered by ts, columns as in GreptimeDB."""
        ...


class WritableClusterPort(ClusterPort, Protocol):
    """A cluster that can carry out Plan actions (the embedded simulator; the live adapter later)."""

    def apply(self, action: Action) -> None:
        """Carry out one action idempotently; raise ActionError when the cluster refuses it."""
        ...

    def events(self) -> list[dict[str, Any]]:
        """Recorded events, oldest first (events.k8s.io/v1 shape: reason, note, type, regarding, eventTime)."""
        ...


class Step1Port(Protocol):
    """The step-1 and alert queries (M2, M8); implemented by the simulator and GreptimeDB sources."""

    def describe(self) -> str:
        """Where the metrics come from, for headers and errors (`demo`, `greptime host:4003/public`)."""
        ...

    def step1(
        self, window: timedelta, now: datetime, gpu_capacity: Mapping[str, tuple[float, float]]
    ) -> Step1:
        """The four reference-page aggregates over [now − window, now).

        `gpu_capacity` maps GPU name → (TFLOPS, VRAM bytes), used to derive TFLOPS from compute %
        and VRAM % from bytes where the tables lack them. Raises SourceError with a clear message.
        """
        ...

    def alert_rows(self, rule: str, now: datetime) -> list[AlertRow]:
        """Rows that fire `rule` (a name from ALERT_RULES) in its evaluation window ending at `now`.

        Raises NoData when the rule reads a table or column that is absent or never written.
        """
        ...

    def alert_history(self, rule: str, times: Sequence[datetime]) -> list[AlertResult]:
        """`alert_rows` at each of `times` (oldest first, one evaluation interval apart, the last is
        `now`), in a few queries for the whole span rather than one per instant.

        An instant whose window has nothing to read is a NoData in the list (when that is `now`,
        the earlier instants are not evaluated and carry the same NoData: the engine replays
        nothing then); NoData raised means the rule cannot be evaluated at all (table or column
        absent).
        """
        ...
