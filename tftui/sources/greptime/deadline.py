"""A limit on how long the metrics store may take to answer, enforced from both ends.

The server's own limit: each connection sets `statement_timeout` (PostgreSQL; GreptimeDB on its
PostgreSQL port since v0.10, which cancels the statement with "Canceling statement due to statement
timeout"; an older GreptimeDB answers the SET with a warning and enforces nothing). A statement that
waits on a locked table or an overloaded store then fails with a clear error.

The client's limit (`Deadline`): a server that does not answer at all (its process wedged, a network
path that drops packets silently) enforces nothing, and libpq waits on the socket without a limit of
its own, so a daemon tick or `tftui report` would hang for good. When one exchange outlives the
server's limit by `GRACE`, the connection's socket is shut down: the wait ends at once with the
driver's `OperationalError` and the pool discards the broken connection. TCP keepalives
(`keepalive_kwargs`) end a connection whose peer vanished while it sat idle in the pool.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time
from types import TracebackType
from typing import Any, Final

import psycopg

__all__ = ["GRACE", "QUERY_TIMEOUT", "Deadline", "keepalive_kwargs", "server_timed_out"]

QUERY_TIMEOUT: Final = 30.0
"""Seconds one query may run (`--metrics-timeout`): Grafana's default for a data source query."""
GRACE: Final = 5.0
"""Seconds past the server's limit before the client gives up on a server that does not answer."""

_TIMEOUT_STATES: Final = frozenset({"57014", "57000"})  # PostgreSQL's query_canceled; GreptimeDB's Cancelled
_TIMEOUT_TEXTS: Final = ("statement timeout", "stream timeout")


def keepalive_kwargs(timeout: float) -> dict[str, Any]:
    """libpq's TCP settings: probe an idle connection after 10 s, drop it after three unanswered
    probes, and drop one whose sent data stays unacknowledged for `timeout` (ignored on Unix sockets)."""
    return {
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": max(1000, round(timeout * 1000)),
    }


def server_timed_out(exc: BaseException) -> bool:
    """Whether the server cancelled the statement at its `statement_timeout`."""
    if not isinstance(exc, psycopg.Error):
        return False
    if exc.sqlstate in _TIMEOUT_STATES:
        return True
    text = str(exc).lower()
    return any(t in text for t in _TIMEOUT_TEXTS)


class Deadline:
    """`with Deadline(conn, seconds):` shuts `conn`'s socket down once the block has run `seconds`
    without progress (`alive()`, which a stream of rows calls per row: a stream that keeps coming is
    the server's to end, at its own limit); `fired` then says the driver's error came from here.
    One watchdog thread serves every deadline: entering one starts no thread."""

    def __init__(self, conn: psycopg.Connection[Any], seconds: float) -> None:
        self._conn = conn
        self._seconds = seconds
        self._lock = threading.Lock()
        self._done = False
        self._last = time.monotonic()
        self.fired = False

    def __enter__(self) -> Deadline:
        self._last = time.monotonic()
        _WATCHDOG.watch(self, self._last + self._seconds)
        return self

    def alive(self) -> None:
        """The server is still answering: the limit counts from now."""
        self._last = time.monotonic()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with self._lock:  # after this, the watchdog finds `_done` and leaves the connection alone
            self._done = True

    def expired(self, now: float) -> float | None:
        """Called by the watchdog at the due time: cut the connection, or the next due time when
        rows came meanwhile; None when nothing is left to watch."""
        with self._lock:
            if self._done:
                return None
            quiet = now - self._last
            if quiet < self._seconds:
                return self._last + self._seconds
            self._shut()
            return None

    def cut(self) -> None:
        """Cut the connection now, if the block still runs (a process that is stopping)."""
        with self._lock:
            if not self._done:
                self._shut()

    def _shut(self) -> None:
        self.fired = True
        try:
            fd = self._conn.pgconn.socket
            # shut down a duplicate: the shutdown acts on the connection, the driver keeps its fd
            with socket.socket(fileno=os.dup(fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except (OSError, psycopg.Error):
            pass  # already closed: the driver's own error says so


class _Watchdog:
    """A heap of (due time, deadline) and one daemon thread, started on first use, that calls each
    deadline when it is due. A finished deadline stays in the heap until its due time (a few dozen
    bytes each) and is then dropped."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Deadline]] = []
        self._count = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, deadline: Deadline, due: float) -> None:
        with self._cond:
            heapq.heappush(self._heap, (due, next(self._count), deadline))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tftui-metrics-deadline", daemon=True)
                self._thread.start()
            elif self._heap[0][2] is deadline:
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._cond.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                _, _, deadline = heapq.heappop(self._heap)
            again = deadline.expired(time.monotonic())
            if again is not None:
                with self._cond:
                    heapq.heappush(self._heap, (again, next(self._count), deadline))


_WATCHDOG: Final = _Watchdog()
