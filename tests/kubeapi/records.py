"""Small records the test API server's store and its HTTP handler share: the API's `Status`
errors, injected faults, the server-side timeline's entries (`Change`, `Served`: `server.py`'s
docstring says what the timeline is for), request counts, and the identity of the request a handler
thread is serving. Kept in a module of their own so neither side imports the other for them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

JSON = dict[str, Any]


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: JSON | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> JSON:
        out: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            out["details"] = self.details
        return out


@dataclass(slots=True)
class Fault:
    """One injected fault: `status` (e.g. 500, 429, 409) answers instead of the server; `delay`
    sleeps first (then serves normally unless `status` is set); `drop` cuts a watch after `after`
    events. `method`/`path` (substring) restrict which request consumes it."""

    status: int | None = None
    delay: float = 0.0
    drop: bool = False
    after: int = 0
    method: str | None = None
    path: str = ""
    message: str = "injected fault"
    lose_answer: bool = False  # apply the request, then hold the connection `hold` s and cut it
    hold: float = 0.0
    sticky: bool = False  # answers every matching request until `clear_faults()`

    def matches(self, method: str, path: str, watch: bool) -> bool:
        if self.drop and not watch:
            return False
        return (self.method is None or self.method == method) and self.path in path


@dataclass(frozen=True, slots=True)
class Change:
    """One change the server applied (see the module docstring: the server-side timeline)."""

    seq: int
    at: float  # time.monotonic() when applied
    who: str  # identity of the request that caused it ("" = seed, timers, the test)
    request: str  # "METHOD path" of that request ("" when none)
    kind: str
    namespace: str
    name: str
    uid: str
    type: str  # ADDED, MODIFIED, DELETED
    holder: str = ""  # Lease: spec.holderIdentity after the change
    terminating: bool = False  # deletionTimestamp set after the change


@dataclass(frozen=True, slots=True)
class Served:
    """One write request (not GET) and the status it was answered with (0: the answer was lost)."""

    at: float
    who: str
    method: str
    path: str
    code: int


_request = threading.local()  # the request a handler thread is serving: .who, .line


_REASONS = {
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


@dataclass(slots=True)
class _Stats:
    requests: dict[str, int] = field(default_factory=dict)  # "METHOD path" → count

    def hit(self, method: str, path: str) -> None:
        key = f"{method} {path}"
        self.requests[key] = self.requests.get(key, 0) + 1


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
