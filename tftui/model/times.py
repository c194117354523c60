"""The span of times tftui accepts in an object: 1970-01-01 up to (not including) 9000-01-01 UTC.

Kubernetes times are RFC 3339 and may name any year from 1 to 9999. The engine adds durations
to them (campaign widths, marker TTLs) and searches cron schedules years ahead, so a time at
either end of that range overflows Python's `datetime` (and means nothing for a GPU cluster).
Out-of-range times are refused where objects are read: the model rejects them in a dump with
the object and field named, and the engine treats them like any unreadable time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

__all__ = ["TIME_MAX", "TIME_MIN", "time_problem", "within_range"]

TIME_MIN: Final = datetime(1970, 1, 1, tzinfo=UTC)
TIME_MAX: Final = datetime(9000, 1, 1, tzinfo=UTC)  # exclusive


def within_range(dt: datetime) -> bool:
    """Whether an aware `dt` lies in [TIME_MIN, TIME_MAX)."""
    try:
        return TIME_MIN <= dt < TIME_MAX
    except OverflowError:  # year 1 with a positive offset is before year 1 in UTC
        return False


def time_problem(value: object) -> str | None:
    """Why `value` is not a usable object time (None: it is, or it is empty/absent)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return f"expected an RFC 3339 time, got {type(value).__name__}"
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return f"not an RFC 3339 time: {value[:40]!r}"
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)  # read as UTC, as the engine does
    if not within_range(dt):
        return f"{value!r} is out of range (years 1970 to 8999)"
    return None
