"""Go ``time.ParseDuration`` / ``Duration.String`` semantics.

Expected nanosecond counts and strings marked "Go" come from Go 1.19's time package; timedelta
keeps microseconds, dropping the rest toward zero.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tftui.model.duration import DurationError, format_duration, parse_duration

# Go: (input, nanoseconds, Duration.String())
GO_DURATIONS = [
    ("0", 0, "0s"),
    ("-0", 0, "0s"),
    ("+0", 0, "0s"),
    ("1h30m", 5_400_000_000_000, "1h30m0s"),
    ("1.5h", 5_400_000_000_000, "1h30m0s"),
    ("300ms", 300_000_000, "300ms"),
    ("-1m", -60_000_000_000, "-1m0s"),
    ("2h45m30.5s", 9_930_500_000_000, "2h45m30.5s"),
    ("1µs", 1_000, "1µs"),  # U+00B5 micro sign
    ("1μs", 1_000, "1µs"),  # U+03BC Greek mu
    ("1us", 1_000, "1µs"),
    ("1500ns", 1_500, "1.5µs"),
    ("-1500ns", -1_500, "-1.5µs"),
    ("999ns", 999, "999ns"),
    (".5s", 500_000_000, "500ms"),
    ("1.s", 1_000_000_000, "1s"),
    ("1h1h", 7_200_000_000_000, "2h0m0s"),  # units may repeat
    ("3m.5s", 180_500_000_000, "3m0.5s"),
    ("0.1h", 360_000_000_000, "6m0s"),
    ("1.0000015s", 1_000_001_500, "1.0000015s"),
    ("9223372036854775807ns", 2**63 - 1, "2562047h47m16.854775807s"),
    ("-9223372036854775808ns", -(2**63), "-2562047h47m16.854775808s"),
    ("2562047h47m16.854775807s", 2**63 - 1, "2562047h47m16.854775807s"),
]


def _micros(nanos: int) -> timedelta:
    return timedelta(microseconds=abs(nanos) // 1000 * (1 if nanos >= 0 else -1))


@pytest.mark.parametrize(("text", "nanos", "go_string"), GO_DURATIONS)
def test_parse_matches_go(text: str, nanos: int, go_string: str) -> None:
    assert parse_duration(text) == _micros(nanos)
    if nanos % 1000 == 0:
        assert format_duration(parse_duration(text)) == go_string


def test_common_values() -> None:
    assert parse_duration("1h30m") == timedelta(hours=1, minutes=30)
    assert parse_duration("1.5h") == timedelta(hours=1, minutes=30)
    assert parse_duration("300ms") == timedelta(milliseconds=300)
    assert parse_duration("-1m") == timedelta(minutes=-1)
    assert parse_duration("2h45m30.5s") == timedelta(hours=2, minutes=45, seconds=30.5)
    assert parse_duration("-1h30m") == -timedelta(hours=1, minutes=30)  # the sign covers it all


def test_sub_microsecond_parts_truncate_toward_zero() -> None:
    assert parse_duration("1999ns") == timedelta(microseconds=1)
    assert parse_duration("-1999ns") == timedelta(microseconds=-1)
    assert parse_duration("999ns") == timedelta(0)
    assert parse_duration("1.0000019s") == timedelta(seconds=1, microseconds=1)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty string"),
        ("1d", 'unknown unit "d"'),
        ("1", "missing unit"),
        ("00", "missing unit"),
        ("1 h", 'unknown unit " h"'),
        (" 1h", "expected a number at ' 1h'"),
        ("h", "expected a number at 'h'"),
        ("1h h", 'unknown unit "h h"'),
        (".s", "a number needs digits"),
        ("+", "expected a number"),
        ("-", "expected a number"),
        ("--1s", "expected a number at '-1s'"),
        ("1e3s", 'unknown unit "e"'),
        ("1H", 'unknown unit "H"'),
        ("1hh", 'unknown unit "hh"'),
        ("1.5.5s", "missing unit"),
        ("9223372036854775808ns", "out of range"),
        ("2562047h47m16.854775808s", "out of range"),
        ("99999999999999999999s", "out of range"),
    ],
)
def test_rejects_like_go(text: str, reason: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    assert str(info.value) == f"invalid duration {text!r}: {reason}"


def test_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"""^invalid duration '1d': unknown unit "d"$"""):
        parse_duration("1d")


@pytest.mark.parametrize(
    ("td", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(hours=1, minutes=30), "1h30m0s"),
        (timedelta(minutes=5), "5m0s"),
        (timedelta(seconds=1.5), "1.5s"),
        (timedelta(milliseconds=300), "300ms"),
        (timedelta(microseconds=1500), "1.5ms"),
        (timedelta(microseconds=1), "1µs"),
        (timedelta(hours=1), "1h0m0s"),
        (timedelta(hours=1, milliseconds=500), "1h0m0.5s"),
        (timedelta(minutes=-1), "-1m0s"),
        (timedelta(microseconds=-1), "-1µs"),
        (timedelta(days=1, microseconds=1), "24h0m0.000001s"),  # no days: they vary in length
        (timedelta(days=200_000), "4800000h0m0s"),  # beyond Go's range; still printable
    ],
)
def test_format_like_go(td: timedelta, text: str) -> None:
    assert format_duration(td) == text


def test_beyond_go_range_does_not_parse_back() -> None:
    with pytest.raises(DurationError, match="out of range"):
        parse_duration(format_duration(timedelta(days=200_000)))


_GO_MIN_US = -((2**63) // 1000)  # timedelta µs whose ns count still fits in int64
_GO_MAX_US = (2**63 - 1) // 1000


@given(st.integers(min_value=_GO_MIN_US, max_value=_GO_MAX_US).map(lambda us: timedelta(microseconds=us)))
def test_format_then_parse_round_trips(td: timedelta) -> None:
    assert parse_duration(format_duration(td)) == td


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_nanosecond_counts_parse_exactly(nanos: int) -> None:
    text = f"{nanos}ns"
    assert parse_duration(text) == _micros(nanos)


@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10_000), st.sampled_from(["h", "m", "s", "ms", "us", "µs"])
        ),
        min_size=1,
        max_size=5,
    )
)
def test_components_add_up(parts: list[tuple[int, str]]) -> None:
    scale = {"h": 3_600_000_000, "m": 60_000_000, "s": 1_000_000, "ms": 1_000, "us": 1, "µs": 1}
    text = "".join(f"{n}{unit}" for n, unit in parts)
    assert parse_duration(text) == timedelta(microseconds=sum(n * scale[unit] for n, unit in parts))
