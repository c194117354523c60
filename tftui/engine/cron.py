"""Cron schedules with robfig/cron v3 semantics, evaluated in an IANA timezone.

Defrag windows (docs/behaviour.md D1, D2, K4) are computed by the controller with robfig/cron v3, so the
same expression must fire at the same instants here. `croniter` is close but not the same, which is
why this is a port rather than a wrapper:

- croniter accepts what robfig rejects (`L`, `W`, `#`, `H`, day-of-week `7`, a seconds field,
  `@daily`), so a schedule tftui calls valid could be one the controller refuses;
- on a spring-forward day croniter moves a tick inside the DST gap to the first valid time (`30 2`
  fires at 03:00 in America/New_York); robfig skips it ("jobs scheduled during daylight-savings
  leap-ahead transitions will not be run");
- on a fall-back day robfig fires a tick in the repeated hour twice (it steps hours in absolute
  time); so does this port;
- an impossible date (`0 0 30 2 *`) makes croniter raise after a long search and robfig return the
  zero time; here `validate` rejects it up front.

The day rule is robfig's: when day-of-month or day-of-week starts with `*` or `?` (and has no step
> 1), both must match (AND); otherwise either may (OR). All arithmetic is on integer UNIX seconds, so
results do not depend on the host's timezone.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final
from zoneinfo import ZoneInfo

__all__ = ["CronError", "Schedule", "parse"]

_STAR: Final = 1 << 63  # robfig's starBit: the field was written `*` or `?`
_MONTH_NAMES: Final = {
    m: i
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
_DOW_NAMES: Final = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_MAX_DAYS: Final = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # Feb 29 exists in leap years
_INT: Final = re.compile(r"[+-]?[0-9]+")
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


class CronError(ValueError):
    """An expression robfig's 5-field parser would reject (message as robfig words it)."""


@dataclass(frozen=True, slots=True)
class _Bounds:
    lo: int
    hi: int
    names: dict[str, int] | None = None


_MINUTES: Final = _Bounds(0, 59)
_HOURS: Final = _Bounds(0, 23)
_DOM: Final = _Bounds(1, 31)
_MONTHS: Final = _Bounds(1, 12, _MONTH_NAMES)
_DOW: Final = _Bounds(0, 6, _DOW_NAMES)


def _atoi(expr: str) -> int:
    """Go's `mustParseInt` (strconv.Atoi, then no negatives)."""
    if not _INT.fullmatch(expr):
        raise CronError(f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": invalid syntax')
    num = int(expr)
    if num < 0:
        raise CronError(f"negative number ({num}) not allowed: {expr}")
    return num


def _int_or_name(expr: str, b: _Bounds) -> int:
    if b.names is not None and expr.lower() in b.names:
        return b.names[expr.lower()]
    return _atoi(expr)


def _range(expr: str, b: _Bounds) -> int:
    """robfig `getRange`: one comma-separated element to a bit set."""
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    single = len(low_high) == 1
    extra = 0
    if low_high[0] in ("*", "?"):
        start, end, extra = b.lo, b.hi, _STAR  # robfig ignores anything after "*-"
    else:
        start = _int_or_name(low_high[0], b)
        if len(low_high) == 1:
            end = start
        elif len(low_high) == 2:
            end = _int_or_name(low_high[1], b)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _atoi(range_and_step[1])
        if single:  # "N/step" means "N-max/step"
            end = b.hi
        if step > 1:
            extra = 0
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < b.lo:
        raise CronError(f"beginning of range ({start}) below minimum ({b.lo}): {expr}")
    if end > b.hi:
        raise CronError(f"end of range ({end}) above maximum ({b.hi}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")
    bits = 0
    for v in range(start, end + 1, step):
        bits |= 1 << v
    return bits | extra


def _field(field: str, b: _Bounds) -> int:
    bits = 0
    for expr in (e for e in field.split(",") if e):  # Go's FieldsFunc drops empty elements
        bits |= _range(expr, b)
    return bits


def _go_fields(fields: list[str]) -> str:
    return "[" + " ".join(fields) + "]"


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed 5-field schedule bound to a timezone; `next_after` is robfig's `Next`."""

    expr: str
    tz: ZoneInfo
    minute: int
    hour: int
    dom: int
    month: int
    dow: int

    def never_fires(self) -> str | None:
        """Why no instant can ever match (e.g. `0 0 30 2 *`), or None.

        robfig searches five years and then returns the zero time; upstream then computes windows
        from year 1 (D1 makes it invalid). A static check keeps that out of the engine.
        """
        for name, bits in (
            ("minute", self.minute),
            ("hour", self.hour),
            ("day of month", self.dom),
            ("month", self.month),
            ("day of week", self.dow),
        ):
            if bits & ~_STAR == 0:
                return f"no {name} matches"
        if (self.dom & _STAR or self.dow & _STAR) and not any(
            self.month >> m & 1 and self.dom >> d & 1
            for m in range(1, 13)
            for d in range(1, _MAX_DAYS[m - 1] + 1)
        ):
            return "no month has a matching day of month"
        return None

    # -- robfig SpecSchedule.Next --------------------------------------------------------------

    def _local(self, ts: int) -> datetime:
        return datetime.fromtimestamp(ts, self.tz)

    def _offset(self, ts: int) -> int:
        off = self._local(ts).utcoffset()
        return int(off.total_seconds()) if off is not None else 0

    def _date(self, y: int, mo: int, d: int, h: int, mi: int, s: int) -> int:
        """Go's `time.Date` in this zone: normalises overflow; gap and fold resolved as Go does."""
        y += (mo - 1) // 12
        mo = (mo - 1) % 12 + 1
        wall = calendar.timegm((y, mo, 1, 0, 0, 0)) + (d - 1) * 86400 + h * 3600 + mi * 60 + s
        off = self._offset(wall)
        off2 = self._offset(wall - off)
        return wall - (off2 if off2 != off else off)

    def _day_matches(self, t: datetime) -> bool:
        dom = self.dom >> t.day & 1
        dow = self.dow >> ((t.weekday() + 1) % 7) & 1
        if self.dom & _STAR or self.dow & _STAR:
            return bool(dom and dow)
        return bool(dom or dow)

    def _next_ts(self, after: int) -> int | None:
        """First tick strictly after UNIX second `after` (robfig `Next`), None past five years."""
        ts = after + 1
        added = False
        year_limit = self._local(ts).year + 5
        while True:  # robfig's WRAP label
            t = self._local(ts)
            if t.year > year_limit:
                return None
            wrapped = False
            while not self.month >> t.month & 1:
                if not added:
                    added = True
                    ts = self._date(t.year, t.month, 1, 0, 0, 0)
                    t = self._local(ts)
                ts = self._date(t.year, t.month + 1, t.day, t.hour, t.minute, t.second)
                t = self._local(ts)
                if t.month == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not self._day_matches(t):
                if not added:
                    added = True
                    ts = self._date(t.year, t.month, t.day, 0, 0, 0)
                    t = self._local(ts)
                ts = self._date(t.year, t.month, t.day + 1, t.hour, t.minute, t.second)
                t = self._local(ts)
                if t.hour != 0:  # DST moved midnight: snap back to it
                    ts += (24 - t.hour) * 3600 if t.hour > 12 else -t.hour * 3600
                    t = self._local(ts)
                if t.day == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not self.hour >> t.hour & 1:
                if not added:
                    added = True
                    ts = self._date(t.year, t.month, t.day, t.hour, 0, 0)
                ts += 3600  # absolute hours: a repeated hour is visited twice, a skipped one never
                t = self._local(ts)
                if t.hour == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not self.minute >> t.minute & 1:
                if not added:
                    added = True
                    ts -= ts % 60
                ts += 60
                t = self._local(ts)
                if t.minute == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            if t.second != 0:  # the seconds field is always "0": jump to the next minute, then WRAP
                added = True
                ts += 60 - t.second
                continue
            return ts

    def next_after(self, t: datetime) -> datetime | None:
        """First tick strictly after `t` (UTC), or None if none within five years (robfig) — or
        none that `datetime` can hold (`t` near year 1 or 9999: a time the model refuses anyway)."""
        after = _floor_seconds(t)
        try:
            ts = self._next_ts(after)
            return None if ts is None else datetime.fromtimestamp(ts, UTC)
        except (OverflowError, OSError, ValueError):
            return None

    def latest_at_or_before(self, t: datetime, not_before: datetime) -> datetime | None:
        """The latest tick in [`not_before`, `t`], or None.

        Binary search over `next_after`, which is monotone: O(log span) evaluations instead of
        stepping through every tick (a `* * * * *` schedule with a long window has thousands).
        """
        _floor_seconds(t)  # naive times are a caller's bug, not out of range
        try:
            return self._latest(t, not_before)
        except (OverflowError, OSError, ValueError):  # beyond what `datetime` holds: see next_after
            return None

    def _latest(self, t: datetime, not_before: datetime) -> datetime | None:
        hi = _floor_seconds(t)
        lo = -(-int((not_before - _EPOCH).total_seconds() * 1_000_000) // 1_000_000)  # ceil seconds
        first = self._next_ts(lo - 1)
        if first is None or first > hi:
            return None
        # invariant: a tick ≥ lo exists at or before hi; find the largest s with next(s-1) ≤ hi
        a, b = lo, hi
        while a < b:
            mid = (a + b + 1) // 2
            nxt = self._next_ts(mid - 1)
            if nxt is not None and nxt <= hi:
                a = mid
            else:
                b = mid - 1
        found = self._next_ts(a - 1)
        return None if found is None else datetime.fromtimestamp(found, UTC)


def _floor_seconds(t: datetime) -> int:
    if t.tzinfo is None:
        raise ValueError("naive datetime: cron times must be timezone-aware")
    delta = t - _EPOCH
    return delta.days * 86400 + delta.seconds


def parse(expr: str, tz: ZoneInfo) -> Schedule:
    """robfig's parser with options Minute|Hour|Dom|Month|Dow (no seconds, no descriptors).

    The caller strips `TZ=`/`CRON_TZ=`; the timezone is passed separately, as upstream builds
    `CRON_TZ=<tz> <schedule>` and hands it to this parser.
    """
    if not expr:
        raise CronError("empty spec string")
    if expr.startswith("@"):
        raise CronError(f"parser does not accept descriptors: {expr}")
    fields = expr.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: {_go_fields(fields)}")
    return Schedule(
        expr=expr,
        tz=tz,
        minute=_field(fields[0], _MINUTES),
        hour=_field(fields[1], _HOURS),
        dom=_field(fields[2], _DOM),
        month=_field(fields[3], _MONTHS),
        dow=_field(fields[4], _DOW),
    )
