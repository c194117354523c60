"""Go ``time.ParseDuration`` / ``Duration.String`` for timedeltas.

TensorFusion specs and controller flags spell intervals the Go way ("1h30m", "300ms", "1.5h");
reading them with a home-grown grammar would accept what the controller rejects (``1d``, ``1 h``)
or print values (``0:05:00``) operators cannot paste back into a manifest.

Parsing follows Go 1.19+ step for step, including its float64 arithmetic for fractions and its
2^63-1 ns range, so the nanosecond count is the one Go computes. ``timedelta`` only resolves
microseconds: the remaining nanoseconds are dropped, rounding toward zero (``1500ns`` → 1µs,
``-1500ns`` → -1µs). ``format_duration`` prints any timedelta, even beyond Go's ±292 years, which
``parse_duration`` then rejects as out of range.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

__all__ = ["DurationError", "format_duration", "parse_duration"]

_NS_PER_US: Final = 1_000
_UNITS: Final[dict[str, int]] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_LIMIT: Final = 1 << 63  # Go's uint64 accumulator bound; +2^63 itself only as a negative duration
_DIGITS: Final = frozenset("0123456789")


class DurationError(ValueError):
    """A string Go's ``time.ParseDuration`` would reject."""

    def __init__(self, raw: str, reason: str) -> None:
        super().__init__(f"invalid duration {raw!r}: {reason}")
        self.raw = raw
        self.reason = reason


def _leading_int(s: str, pos: int, raw: str) -> tuple[int, int]:
    """Go's ``leadingInt``: digits from ``pos`` as an int, failing past 2^63."""
    x = 0
    while pos < len(s) and s[pos] in _DIGITS:
        if x > _LIMIT // 10:
            raise DurationError(raw, "out of range")
        x = x * 10 + ord(s[pos]) - 48
        if x > _LIMIT:
            raise DurationError(raw, "out of range")
        pos += 1
    return x, pos


def _leading_fraction(s: str, pos: int) -> tuple[int, float, int]:
    """Go's ``leadingFraction``: digits past ~19 are ignored, not an error."""
    x, scale, overflow = 0, 1.0, False
    while pos < len(s) and s[pos] in _DIGITS:
        if not overflow:
            y = x * 10 + ord(s[pos]) - 48
            if x > (_LIMIT - 1) // 10 or y > _LIMIT:
                overflow = True
            else:
                x, scale = y, scale * 10
        pos += 1
    return x, scale, pos


def _parse_nanos(raw: str) -> int:
    s = raw
    neg = False
    if s[:1] in ("-", "+"):
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise DurationError(raw, "empty string" if not raw else "expected a number")
    total = 0
    pos = 0
    while pos < len(s):
        if not (s[pos] == "." or s[pos] in _DIGITS):
            raise DurationError(raw, f"expected a number at {s[pos:]!r}")
        start = pos
        whole, pos = _leading_int(s, pos, raw)
        has_int = pos != start
        frac, scale, has_frac = 0, 1.0, False
        if pos < len(s) and s[pos] == ".":
            frac_start = pos + 1
            frac, scale, pos = _leading_fraction(s, frac_start)
            has_frac = pos != frac_start
        if not has_int and not has_frac:
            raise DurationError(raw, "a number needs digits")
        unit_start = pos
        while pos < len(s) and s[pos] != "." and s[pos] not in _DIGITS:
            pos += 1
        unit_name = s[unit_start:pos]
        if not unit_name:
            raise DurationError(raw, "missing unit")
        unit = _UNITS.get(unit_name)
        if unit is None:
            raise DurationError(raw, f'unknown unit "{unit_name}"')
        if whole > _LIMIT // unit:
            raise DurationError(raw, "out of range")
        value = whole * unit
        if frac:
            # Go does this in float64 ("needed to be nanosecond accurate for fractions of
            # hours"); Python floats are the same IEEE doubles, so the truncation matches.
            value += int(float(frac) * (float(unit) / scale))
            if value > _LIMIT:
                raise DurationError(raw, "out of range")
        total += value
        if total > _LIMIT:
            raise DurationError(raw, "out of range")
    if neg:
        return -total
    if total > _LIMIT - 1:
        raise DurationError(raw, "out of range")
    return total


def parse_duration(s: str) -> timedelta:
    """Parse a Go duration ("1h30m", "1.5h", "-300ms", "0"); nanoseconds truncate toward zero."""
    nanos = _parse_nanos(s)
    micros = abs(nanos) // _NS_PER_US
    return timedelta(microseconds=-micros if nanos < 0 else micros)


def _frac(value: int, prec: int) -> tuple[str, int]:
    """Go's ``fmtFrac``: ".ddd" of the low ``prec`` digits without trailing zeros, and the rest."""
    rest, low = divmod(value, 10**prec)
    digits = f"{low:0{prec}d}".rstrip("0")
    return (f".{digits}" if digits else ""), rest


def _format_nanos(nanos: int) -> str:
    """Go's ``Duration.String`` for a nanosecond count."""
    sign = "-" if nanos < 0 else ""
    u = abs(nanos)
    if u == 0:
        return "0s"
    if u < 1_000_000_000:
        # Below a second Go switches unit: "1.5µs", "300ms".
        if u < 1_000:
            return f"{sign}{u}ns"
        prec, unit = (3, "µs") if u < 1_000_000 else (6, "ms")
        frac, whole = _frac(u, prec)
        return f"{sign}{whole}{frac}{unit}"
    frac, seconds = _frac(u, 9)
    minutes, seconds = divmod(seconds, 60)
    if not minutes:
        return f"{sign}{seconds}{frac}s"
    hours, minutes = divmod(minutes, 60)
    if not hours:
        return f"{sign}{minutes}m{seconds}{frac}s"
    return f"{sign}{hours}h{minutes}m{seconds}{frac}s"


def format_duration(td: timedelta) -> str:
    """Go's ``Duration.String`` ("1h30m0s", "5m0s", "1.5s", "300ms", "0s")."""
    return _format_nanos((td // timedelta(microseconds=1)) * _NS_PER_US)
