"""The latest samples of a metrics store over the network, read beside the console's refresh.

A refresh joins the store's latest GPU and worker samples onto the cluster state it read. A slow
store (overloaded, far away, up to its query limit of 30 s) used to hold every refresh that long:
new pods, nodes and writes stayed off the screen while it answered. Now a refresh waits for the
read at most `LATEST_WAIT` seconds; past that it shows the new state with the samples read last
(said in the header) and the read goes on in its own thread. The next refresh takes its answer,
or waits on it again: one read at a time, never a pile of them.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime

from tftui.engine.state import ClusterState
from tftui.sources.ports import MetricsPort
from tftui.ui.load.data import LateSamples, LatestUsage, latest_usage

__all__ = ["LATEST_WAIT", "LatestReader"]

LATEST_WAIT = 2.0  # seconds a refresh waits for the latest samples before showing the last ones


class LatestReader:
    """One store's latest samples, read in a daemon thread (an exit never waits on a hung read)."""

    def __init__(self, wait: float = LATEST_WAIT) -> None:
        self.wait = wait
        self._lock = threading.Lock()
        self._metrics: MetricsPort | None = None
        self._pending: Future[LatestUsage] | None = None
        self._pending_at: datetime | None = None
        self._last: tuple[LatestUsage, datetime] | None = None  # the last answer and its `now`

    def read(self, metrics: MetricsPort, state: ClusterState, now: datetime) -> LatestUsage:
        """The latest samples at `now`, or — when the store has not answered within `wait` — the
        last ones read, with a `note` saying so (no samples yet: none, and the note)."""
        with self._lock:
            if metrics is not self._metrics:  # another store (`:ctx`): nothing of the old one
                self._metrics, self._pending, self._last = metrics, None, None
            fut = self._pending
            if fut is None:
                fut = self._pending = self._start(metrics, state, now)
                self._pending_at = now
            asked_at = self._pending_at
        try:
            got = fut.result(timeout=self.wait)
        except FutureTimeout:
            return self._late(asked_at, now)
        with self._lock:
            if self._pending is fut:
                self._pending = None
                if asked_at is not None:
                    self._last = (got, asked_at)
        return got

    def _start(self, metrics: MetricsPort, state: ClusterState, now: datetime) -> Future[LatestUsage]:
        fut: Future[LatestUsage] = Future()

        def run() -> None:
            try:
                fut.set_result(latest_usage(metrics, state, now))  # never raises: errors are `error`
            except BaseException as exc:  # handed to the waiting refresh
                fut.set_exception(exc)

        threading.Thread(target=run, name="tftui-latest", daemon=True).start()
        return fut

    def _late(self, asked_at: datetime | None, now: datetime) -> LatestUsage:
        with self._lock:
            last = self._last
        late = LateSamples(asked_at or now, last[1] if last is not None else None)
        if last is None:
            return LatestUsage({}, {}, None, late)
        return last[0]._replace(late=late)
