"""Kubernetes resource.Quantity semantics.

Rows marked "Go" were produced by k8s.io/apimachinery/pkg/api/resource (commit eed236ce) built
from source: ``ParseQuantity(s)`` then ``Format``, the inf.Dec value, ``Value()``, ``MilliValue()``
and ``NewDecimalQuantity(dec, Format).String()`` (CanonicalizeBytes without Go's habit of echoing
an input it deems canonical, see test_deliberate_differences_from_go).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Annotated

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import StringConstraints, TypeAdapter, ValidationError

from tftui.model.quantity import (
    QUANTITY_PATTERN,
    Quantity,
    QuantityError,
    format_quantity,
    parse_quantity,
    quantity_float,
)

GI = 2**30

# Go: (input, Format, canonical String(), exact value)
GO_PARSE = [
    ("312500m", "DecimalSI", "312500m", "312.5"),
    ("81559Mi", "BinarySI", "81559Mi", "85520809984"),
    ("1.5e3", "DecimalExponent", "1500", "1500"),  # exponent 3 → mantissa 1500, e0 has no suffix
    ("1k", "DecimalSI", "1k", "1000"),
    ("0.5Gi", "BinarySI", "512Mi", "536870912"),
    ("100m", "DecimalSI", "100m", "0.1"),
    ("1Gi", "BinarySI", "1Gi", "1073741824"),
    ("1024Mi", "BinarySI", "1Gi", "1073741824"),
    ("1500m", "DecimalSI", "1500m", "1.5"),
    ("0.1", "DecimalSI", "100m", "0.1"),
    ("1e3", "DecimalExponent", "1e3", "1000"),
    ("5.5", "DecimalSI", "5500m", "5.5"),
    ("-1k", "DecimalSI", "-1k", "-1000"),
    ("21474836480", "DecimalSI", "21474836480", "21474836480"),  # plain number stays DecimalSI
    ("1536Mi", "BinarySI", "1536Mi", "1610612736"),  # 1.5Gi is not an integer count of Gi
    ("1.5Gi", "BinarySI", "1536Mi", "1610612736"),
    ("0", "DecimalSI", "0", "0"),
    ("0Ki", "BinarySI", "0", "0"),
    ("1E", "DecimalSI", "1E", "1000000000000000000"),  # E alone is exa, not an exponent
    ("1E3", "DecimalExponent", "1e3", "1000"),
    ("1e-3", "DecimalExponent", "1e-3", "0.001"),
    ("1.5e-3", "DecimalExponent", "1500e-6", "0.0015"),
    ("1.3E+6", "DecimalExponent", "1300e3", "1300000"),
    ("0.5e0", "DecimalExponent", "500e-3", "0.5"),
    ("0.5e-9", "DecimalExponent", "1e-9", "0.000000001"),  # below 1n rounds up to 1n
    ("1e-10", "DecimalExponent", "1e-9", "0.000000001"),
    ("3.001n", "DecimalSI", "4n", "0.000000004"),
    ("0.0000000001", "DecimalSI", "1n", "0.000000001"),
    ("0.000000000001Ki", "DecimalSI", "2n", "0.000000002"),  # BinarySI below 1 turns DecimalSI
    ("-0.0001Ki", "DecimalSI", "-102400u", "-0.1024"),
    (".001Ki", "BinarySI", "1024m", "1.024"),  # BinarySI under 1024 prints as DecimalSI
    ("1.0001Ki", "BinarySI", "1024102400u", "1024.1024"),  # not an integer: DecimalSI
    ("0.00146484375Ki", "BinarySI", "1500m", "1.5"),
    ("100.035Ki", "BinarySI", "102435840m", "102435.84"),
    ("0.05Gi", "BinarySI", "53687091200m", "53687091.2"),
    ("9Ei", "BinarySI", "9223372036854775807", "9223372036854775807"),  # capped at 2^63-1
    ("9223372036854775807Ki", "BinarySI", "9223372036854775807", "9223372036854775807"),
    ("12E", "DecimalSI", "12E", "12000000000000000000"),  # DecimalSI is not capped
    ("10E", "DecimalSI", "10E", "10000000000000000000"),
    ("1.", "DecimalSI", "1", "1"),
    ("1.G", "DecimalSI", "1G", "1000000000"),
    (".5", "DecimalSI", "500m", "0.5"),
    ("+5", "DecimalSI", "5", "5"),
    ("-100m", "DecimalSI", "-100m", "-0.1"),
    ("1024", "DecimalSI", "1024", "1024"),
    ("8Ki", "BinarySI", "8Ki", "8192"),
    ("80Gi", "BinarySI", "80Gi", "85899345920"),
    ("1000000000", "DecimalSI", "1G", "1000000000"),
    ("1e9", "DecimalExponent", "1e9", "1000000000"),
    ("123456789n", "DecimalSI", "123456789n", "0.123456789"),
]

# Go: (input, Value(), MilliValue()); both round away from zero.
GO_SCALED = [
    ("100m", 1, 100),
    ("-100m", -1, -100),
    ("1500m", 2, 1500),
    ("-1500m", -2, -1500),
    ("312500m", 313, 312500),
    ("123456789n", 1, 124),
    ("1e-3", 1, 1),
    ("0.0000000001", 1, 1),
    ("0", 0, 0),
    ("1.0001Ki", 1025, 1024103),
    ("0.5Gi", 536870912, 536870912000),
    ("9Ei", 2**63 - 1, (2**63 - 1) * 1000),  # Go's MilliValue overflows int64 here; ours is exact
]


@pytest.mark.parametrize(("text", "fmt", "canonical", "exact"), GO_PARSE)
def test_parse_matches_go(text: str, fmt: str, canonical: str, exact: str) -> None:
    q = parse_quantity(text)
    assert q.as_fraction() == Fraction(Decimal(exact))
    assert q.format == fmt
    assert str(q) == canonical


@pytest.mark.parametrize(("text", "value", "milli"), GO_SCALED)
def test_value_and_milli_value_round_away_from_zero(text: str, value: int, milli: int) -> None:
    q = parse_quantity(text)
    assert q.value() == value
    assert q.milli_value() == milli


def test_issue_examples_are_exact() -> None:
    assert parse_quantity("312500m").as_fraction() == Fraction(625, 2)
    assert parse_quantity("81559Mi").as_fraction() == 81559 * 2**20
    assert parse_quantity("1.5e3").as_fraction() == 1500
    assert parse_quantity("1k").as_fraction() == 1000
    assert parse_quantity("0.5Gi").as_fraction() == 536870912
    assert parse_quantity("100m").value() == 1
    assert float(parse_quantity("312500m")) == 312.5


def test_binary_si_canonical_form() -> None:
    # A plain number is DecimalSI in Go and keeps its digits; shown as BinarySI it is 20Gi.
    assert str(parse_quantity("21474836480")) == "21474836480"
    assert format_quantity(21474836480, "BinarySI") == "20Gi"
    assert format_quantity(parse_quantity("21474836480").as_fraction(), "BinarySI") == "20Gi"
    assert format_quantity(81559 * 2**20, "BinarySI") == "81559Mi"
    assert format_quantity(1536 * 2**20, "BinarySI") == "1536Mi"
    assert format_quantity(1024, "BinarySI") == "1Ki"
    assert format_quantity(2**60, "BinarySI") == "1Ei"
    assert format_quantity(1536, "BinarySI") == "1536"  # ≥1024 but not a multiple: no suffix
    assert format_quantity(1000, "BinarySI") == "1k"  # below 1024: DecimalSI
    assert format_quantity(Fraction(3, 2), "BinarySI") == "1500m"
    assert format_quantity(Fraction(GI, 2), "BinarySI") == "512Mi"
    assert format_quantity(-(2**40), "BinarySI") == "-1Ti"


def test_decimal_canonical_forms() -> None:
    assert format_quantity(1500) == "1500"
    assert format_quantity(10**9) == "1G"
    assert format_quantity(Decimal("0.1")) == "100m"
    assert format_quantity(Decimal("-0.000001")) == "-1u"
    assert format_quantity(10**18 * 12) == "12E"
    assert format_quantity(1500, "DecimalExponent") == "1500"
    assert format_quantity(10**6, "DecimalExponent") == "1e6"
    assert format_quantity(Fraction(1, 10), "DecimalExponent") == "100e-3"
    for fmt in ("DecimalSI", "BinarySI", "DecimalExponent"):
        assert format_quantity(0, fmt) == "0"
    assert str(parse_quantity("-0")) == "0"


def test_finer_than_nano_rounds_away_from_zero() -> None:
    assert format_quantity(Fraction(1, 3)) == "333333334n"
    assert format_quantity(Fraction(-1, 3)) == "-333333334n"
    assert Quantity(Fraction(1, 10**12)).as_fraction() == Fraction(1, 10**9)


def test_deliberate_differences_from_go() -> None:
    # Go's String() echoes an input its fast path calls canonical ("+3Mi", "007", "1E3");
    # we always print CanonicalizeBytes.
    assert str(parse_quantity("+3Mi")) == "3Mi"
    assert str(parse_quantity("007")) == "7"
    assert str(parse_quantity("1E3")) == "1e3"
    # Go has no suffix past E and prints "1" for 1000E; we keep the value.
    assert str(parse_quantity("1000E")) == "1000E"
    assert format_quantity(2**70, "BinarySI") == "1024Ei"
    # Go reads digit-less strings as zero; they are not in its documented grammar.
    for text in (".", "+", "-", "-.", "Gi", "k", "e3", "E"):
        with pytest.raises(QuantityError):
            parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("12Gx", "unknown suffix 'Gx'"),
        ("--1", "expected a number"),
        ("", "empty string"),
        (" ", "whitespace is not allowed"),
        (" 1", "whitespace is not allowed"),
        ("1 ", "whitespace is not allowed"),
        ("1 Gi", "whitespace is not allowed"),
        ("1\n", "whitespace is not allowed"),
        ("1.2.3", "unknown suffix '.3'"),
        ("Gi", "expected a number"),
        ("0x10", "unknown suffix 'x10'"),
        ("1K", "unknown suffix 'K'"),  # only Ki; kilo is lower-case k
        ("1i", "unknown suffix 'i'"),
        ("0.1mi", "unknown suffix 'mi'"),
        ("1e", "exponent has no digits"),
        ("-3.01e-", "exponent has no digits"),
        ("1e1000", "exponent has more than 3 digits"),
        ("1" * 1001, "more than 1000 digits on one side of the decimal point"),
        ("1+1.0M", "unknown suffix '+1.0M'"),
        ("1.1.M", "unknown suffix '.M'"),
    ],
)
def test_rejects(text: str, reason: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert str(info.value) == f"invalid quantity {text!r}: {reason}"
    assert re.fullmatch(QUANTITY_PATTERN, text) is None


def test_error_message_shape() -> None:
    with pytest.raises(ValueError, match=r"^invalid quantity '12Gx': unknown suffix 'Gx'$"):
        parse_quantity("12Gx")


def test_digit_bounds_are_inclusive() -> None:
    assert parse_quantity("1" * 1000).as_fraction() == int("1" * 1000)
    assert parse_quantity("0." + "0" * 999 + "1").as_fraction() == Fraction(1, 10**9)
    assert parse_quantity("1e999").as_fraction() == 10**999
    assert parse_quantity("1e-999").as_fraction() == Fraction(1, 10**9)
    assert float(parse_quantity("1e999")) == math.inf
    assert float(parse_quantity("-1e999")) == -math.inf


def test_numbers_are_read_as_written() -> None:
    assert parse_quantity(8) == parse_quantity("8")
    assert parse_quantity(8).format == "DecimalSI"
    assert parse_quantity(0.1).as_fraction() == Fraction(1, 10)
    assert parse_quantity(1e22).as_fraction() == 10**22
    assert parse_quantity(1e22).format == "DecimalSI"
    assert parse_quantity(-2.5).as_fraction() == Fraction(-5, 2)
    for bad in (True, False, math.nan, math.inf, None, b"1"):
        with pytest.raises(QuantityError):
            parse_quantity(bad)  # type: ignore[arg-type]


def test_quantity_float_caches_and_keeps_types_apart() -> None:
    assert quantity_float("80Gi") == 80.0 * GI
    hits = quantity_float.cache_info().hits
    assert quantity_float("80Gi") == 80.0 * GI
    assert quantity_float.cache_info().hits == hits + 1
    assert quantity_float(1) == 1.0
    with pytest.raises(QuantityError):
        quantity_float(True)
    with pytest.raises(QuantityError):
        quantity_float("12Gx")


def test_equality_ordering_and_hash_use_the_value() -> None:
    gi = parse_quantity("1Gi")
    assert gi == parse_quantity("1073741824") == parse_quantity("1024Mi")
    assert hash(gi) == hash(parse_quantity("1073741824"))
    assert len({gi, parse_quantity("1073741824"), parse_quantity("1G")}) == 2
    assert parse_quantity("1G") < gi <= parse_quantity("1Gi") < parse_quantity("2G")
    assert gi > parse_quantity("1G") and gi >= parse_quantity("1073741824")
    assert sorted(parse_quantity(s) for s in ["1Gi", "500m", "-1", "1G"]) == [
        parse_quantity(s) for s in ["-1", "500m", "1G", "1Gi"]
    ]
    assert gi != "1Gi"
    assert gi != 1073741824


def test_add_and_sub_follow_go_format_rules() -> None:
    s = parse_quantity("1Gi") + parse_quantity("512Mi")
    assert (s.as_fraction(), s.format, str(s)) == (Fraction(3 * GI, 2), "BinarySI", "1536Mi")
    d = parse_quantity("1k") + parse_quantity("1Ki")
    assert (d.format, str(d)) == ("DecimalSI", "2024")
    # A zero left operand takes the right operand's format, as Go's Add/Sub do.
    z = parse_quantity("0") + parse_quantity("2Ki")
    assert (z.format, str(z)) == ("BinarySI", "2Ki")
    z = parse_quantity("0") - parse_quantity("2Ki")
    assert (z.format, str(z)) == ("BinarySI", "-2Ki")
    r = parse_quantity("1Gi") - parse_quantity("1Gi")
    assert (r.format, str(r)) == ("BinarySI", "0")
    total = parse_quantity("312500m") + parse_quantity("312500m") + parse_quantity("375m")
    assert total.as_fraction() == Fraction(625375, 1000)
    assert str(-parse_quantity("1500m")) == "-1500m"


def test_quantity_validates_its_fields() -> None:
    with pytest.raises(ValueError, match="unknown quantity format"):
        Quantity(Fraction(1), "Binary")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown quantity format"):
        format_quantity(1, "binarySI")
    with pytest.raises(TypeError):
        Quantity(1.5)  # type: ignore[arg-type]
    with pytest.raises(QuantityError):
        format_quantity(Decimal("NaN"))
    assert Quantity(3).as_fraction() == 3  # type: ignore[arg-type]
    assert repr(parse_quantity("1Gi")) == "Quantity('1Gi', BinarySI)"


# --- properties -------------------------------------------------------------------------------

_FORMATS = st.sampled_from(["BinarySI", "DecimalSI", "DecimalExponent"])
_NANOS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.integers(min_value=-(2**20), max_value=2**20).map(lambda n: n * 10**9),
    st.builds(
        lambda m, k: m * 1024**k * 10**9,
        st.integers(min_value=-5000, max_value=5000),
        st.integers(min_value=0, max_value=8),
    ),
    st.builds(
        lambda m, e: m * 10**e,
        st.integers(min_value=-999, max_value=999),
        st.integers(min_value=0, max_value=40),
    ),
)
_QUANTITIES = st.builds(lambda n, f: Quantity(Fraction(n, 10**9), f), _NANOS, _FORMATS)


@given(_QUANTITIES)
def test_canonical_string_round_trips(q: Quantity) -> None:
    text = str(q)
    assert re.fullmatch(QUANTITY_PATTERN, text)
    again = parse_quantity(text)
    if text.endswith("i") and abs(q.as_fraction()) > 2**63 - 1:
        # Parsing caps BinarySI at 2^63-1 in magnitude, as Go does; only sums get past it.
        assert again.as_fraction() == (2**63 - 1 if q.as_fraction() > 0 else 1 - 2**63)
        return
    assert again == q
    if q.format != "BinarySI":
        assert str(again) == text  # decimal canonical forms are fixed points
    # BinarySI "17000" (17000 is no multiple of 1024) re-parses as DecimalSI and prints "17k".
    assert str(parse_quantity(str(again))) == str(again)
    if text.endswith("i"):
        assert q.format == "BinarySI"


@given(st.integers(min_value=1, max_value=2**40), st.integers(min_value=0, max_value=6))
def test_binary_si_uses_largest_exact_suffix(mantissa: int, power: int) -> None:
    value = mantissa * 1024**power
    text = format_quantity(value, "BinarySI")
    if value < 1024:
        assert text == format_quantity(value, "DecimalSI")
        return
    steps = 0
    while value % 1024 == 0 and steps < 6:
        value //= 1024
        steps += 1
    assert text == f"{value}{['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'][steps]}"


_SIGNS = st.sampled_from(["", "", "+", "-", "--", "+-"])
_DIGITS = st.text(alphabet="0123456789", max_size=6)
_SUFFIXES = st.sampled_from(
    [
        *("", "n", "u", "m", "k", "K", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "i"),
        *("mi", "e", "E", "e3", "E-3", "e+12", "e-", "e0003", "e1.5", "x", " ", "\n", "Gx", ".", "ki"),
    ]
)
_QUANTITYISH = st.one_of(
    st.builds(
        lambda sign, a, dot, b, suffix: f"{sign}{a}{dot}{b}{suffix}",
        _SIGNS,
        _DIGITS,
        st.sampled_from(["", ".", ".."]),
        _DIGITS,
        _SUFFIXES,
    ),
    st.text(alphabet="0123456789.+-eEinumkKMGTPx \n", max_size=10),
)
_PYDANTIC = TypeAdapter(Annotated[str, StringConstraints(pattern=QUANTITY_PATTERN)])


def _accepted(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


@given(_QUANTITYISH)
@example("1\n")
@example("1E")
@example("1E+3")
@example("1e")
@example(".")
def test_pattern_accepts_exactly_what_the_parser_accepts(text: str) -> None:
    accepted = _accepted(text)
    assert (re.fullmatch(QUANTITY_PATTERN, text) is not None) == accepted
    # pydantic compiles the pattern with the Rust regex crate; it must agree too.
    try:
        _PYDANTIC.validate_python(text)
        pydantic_ok = True
    except ValidationError:
        pydantic_ok = False
    assert pydantic_ok == accepted


@given(_QUANTITYISH)
@example("99E")
def test_quantity_float_agrees_with_parse(text: str) -> None:
    if _accepted(text) and abs(parse_quantity(text).as_fraction()) > 2**63 - 1:
        with pytest.raises(QuantityError, match="out of range"):
            quantity_float(text)  # an object's figure beyond Kubernetes' limit
    elif _accepted(text):
        assert quantity_float(text) == float(parse_quantity(text))
        assert float(parse_quantity(text)) == float(parse_quantity(text).as_fraction())
    else:
        with pytest.raises(QuantityError):
            quantity_float(text)


@given(_QUANTITIES, _QUANTITIES)
def test_ordering_and_arithmetic_are_exact(a: Quantity, b: Quantity) -> None:
    assert (a < b) == (a.as_fraction() < b.as_fraction())
    assert (a == b) == (a.as_fraction() == b.as_fraction())
    assert (a + b).as_fraction() == a.as_fraction() + b.as_fraction()
    assert (a - b).as_fraction() == a.as_fraction() - b.as_fraction()
    assert (a + b).format == (b.format if a.as_fraction() == 0 else a.format)
