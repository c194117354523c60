"""The decision journal: every decision, action, event and error of the runtime, with its reason.

Both front ends show it (the console's journal view, the daemon's JSON log), so it is plain data:
frozen entries in a bounded, thread-safe buffer (the console reads from its UI thread while the
runtime appends from a worker). `total` counts every entry ever appended, so a reader can fetch only
what is new with `since(seen)` even after old entries fell off the front.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

from tftui.engine.plan import DefragResult, rfc3339

__all__ = ["DEFAULT_MAXLEN", "Journal", "JournalEntry", "JournalKind", "defrag_line"]

JournalKind = Literal["compaction", "defrag", "action", "event", "error"]
_KINDS: frozenset[str] = frozenset(get_args(JournalKind))
DEFAULT_MAXLEN = 10_000


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One line: when (the runtime's clock), which pool ("" for the whole cluster), what, and whether it went well."""

    ts: datetime
    pool: str
    kind: JournalKind
    message: str
    ok: bool = True

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"journal kind must be one of {sorted(_KINDS)}, got {self.kind!r}")
        if self.ts.tzinfo is None:
            raise ValueError("naive datetime: journal times must be timezone-aware")

    def to_json(self) -> dict[str, Any]:
        return {
            "ts": rfc3339(self.ts),
            "pool": self.pool,
            "kind": self.kind,
            "message": self.message,
            "ok": self.ok,
        }

    def __str__(self) -> str:
        mark = "" if self.ok else " FAILED"
        return f"{rfc3339(self.ts)} {self.pool or '-'} {self.kind}{mark}: {self.message}"


class Journal:
    """Bounded, append-only, thread-safe; oldest entries drop off first."""

    def __init__(self, maxlen: int = DEFAULT_MAXLEN) -> None:
        if maxlen < 1:
            raise ValueError("maxlen must be at least 1")
        self._entries: deque[JournalEntry] = deque(maxlen=maxlen)
        self._total = 0
        self._lock = threading.Lock()
        self._subscribers: list[Callable[[JournalEntry], None]] = []

    def append(self, entry: JournalEntry) -> None:
        with self._lock:
            self._entries.append(entry)
            self._total += 1
            subscribers = list(self._subscribers)
        for fn in subscribers:
            fn(entry)

    def record(
        self, ts: datetime, pool: str, kind: JournalKind, message: str, ok: bool = True
    ) -> JournalEntry:
        """Build and append an entry; returns it."""
        entry = JournalEntry(ts, pool, kind, message, ok)
        self.append(entry)
        return entry

    def entries(self) -> list[JournalEntry]:
        """What the buffer holds, oldest first."""
        with self._lock:
            return list(self._entries)

    @property
    def total(self) -> int:
        """Entries ever appended (including those that fell off the front)."""
        with self._lock:
            return self._total

    def since(self, seen: int) -> list[JournalEntry]:
        """Entries appended after the first `seen` ones (as many as are still held)."""
        with self._lock:
            new = self._total - seen
            if new <= 0:
                return []
            return list(self._entries)[-min(new, len(self._entries)) :]

    def subscribe(self, fn: Callable[[JournalEntry], None]) -> Callable[[], None]:
        """Call `fn` with every new entry (on the appending thread); returns the unsubscribe function."""
        with self._lock:
            self._subscribers.append(fn)

        def unsubscribe() -> None:
            with self._lock:
                if fn in self._subscribers:
                    self._subscribers.remove(fn)

        return unsubscribe

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def to_json_lines(self) -> str:
        """One JSON object per line (keys in a fixed order), newline-terminated; empty journal → ""."""
        return "".join(json.dumps(e.to_json(), ensure_ascii=False) + "\n" for e in self.entries())


def defrag_line(res: DefragResult | None, now: datetime) -> str | None:
    """The defrag step's outcome and why, in one line (None: defrag is off for the pool)."""
    if res is None or res.state == "disabled":
        return None
    window = f"{rfc3339(res.window[0])}–{rfc3339(res.window[1])}" if res.window else ""
    if res.state == "invalid":
        return "configuration invalid; defrag is off until it is fixed (see the DefragConfigInvalid event)"
    if res.state == "not-due":
        return f"not due; next window {window}" if window else "not due; the schedule fires no more"
    if res.state == "skip-missed":
        return f"window missed; lastDefragTime moved to now (next window {window or 'none'})"
    if res.state == "blocked":
        if res.skipped:
            return f"paused: {res.skipped[-1].detail}"
        return "paused: the last evicted pod is still terminating or waiting for its replacement"
    if res.state == "evict" and res.evict is not None:
        ev = res.evict
        util = next((c.utilization for c in res.candidates if c.node == ev.node), None)
        at = f" (utilization {util:.0f}%)" if util is not None else ""
        return f"evict {ev.pod} from {ev.node}{at}; it fits on {ev.target} in the simulation"
    if res.window is not None and now >= res.window[1]:
        return f"campaign {window} is over; lastDefragTime advanced"
    counts: dict[str, int] = {}
    for s in res.skipped:
        counts[s.reason] = counts.get(s.reason, 0) + 1
    skipped = ", ".join(f"{r} {n}" for r, n in sorted(counts.items()))
    return f"idle: {len(res.candidates)} candidate(s), none can be drained now" + (
        f"; skipped: {skipped}" if skipped else ""
    )
