"""IANA time zones named by objects (defrag `timezone`, cron `CRON_TZ=`), loaded without surprises.

`ZoneInfo(name)` raises more than `ZoneInfoNotFoundError` for names an object can carry: a
directory of the zone database (`America`) is an IsADirectoryError, a path (`../x`, `/etc/x`) a
ValueError, a NUL an OSError. Every caller wants one answer — a zone, or "not a time zone" — so
`load_zone` turns all of them into ValueError.
"""

from __future__ import annotations

from functools import lru_cache
from zoneinfo import ZoneInfo

__all__ = ["load_zone"]


@lru_cache(maxsize=512)
def load_zone(name: str) -> ZoneInfo:
    """The zone `name`; ValueError (one line) when it is not an IANA zone."""
    if not isinstance(name, str) or not name or len(name) > 255:
        raise ValueError(f"unknown time zone {str(name)[:60]!r}")
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError, UnicodeError):  # ZoneInfoNotFoundError is a KeyError
        raise ValueError(f"unknown time zone {name[:60]!r}") from None
