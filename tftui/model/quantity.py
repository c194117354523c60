"""Kubernetes ``resource.Quantity`` parsing and canonical formatting, exact as in Go.

TensorFusion objects carry TFLOPS, VRAM and capacities as quantity strings ("312500m", "80Gi").
Summing them as floats drifts and printing them our own way confuses operators who compare
with ``kubectl``, so values are held as exact fractions and printed the way
``k8s.io/apimachinery/pkg/api/resource`` (quantity.go, suffix.go, amount.go) does.

Semantics kept from Go:

* Values finer than 1n are rounded away from zero to 1n ("if you want some resources, you
  should get some"); ``0.0000000001`` is ``1n``.
* The format is BinarySI for ``Ki..Ei``, DecimalExponent for ``e``/``E`` exponents, otherwise
  DecimalSI (``E`` alone is exa). A BinarySI value is capped at 2^63-1 in magnitude and turns
  DecimalSI when it lies strictly between -1 and 1.
* ``str()`` is ``CanonicalizeBytes``: the largest suffix that keeps the mantissa an integer.
  BinarySI values within (-1024, 1024) or not integral are written as DecimalSI.
* ``value()``/``milli_value()`` round away from zero (int64Amount's behaviour: ``-100m`` gives -1).

Deliberate differences (all on inputs no real object carries):

* Go's scanner accepts digit-less strings such as ``.``, ``+``, ``-``, ``Gi``, ``k`` and ``e3``
  as zero; its documented grammar (and the CRD OpenAPI pattern) requires a digit, and so do we.
* Each run of digits is bounded: at most 1000 before and 1000 after the decimal point and 3 in
  an exponent. Go accepts any length (and silently truncates exponents to int32); unbounded runs
  would let one hostile string stall the console.
* Go's ``String()`` returns the input verbatim when the fast parse path deems it canonical, so
  ``+3Mi``, ``007`` and ``1E3`` print unchanged there; we always print the canonical form
  (``3Mi``, ``7``, ``1e3``).
* Where Go has no suffix for a canonical exponent it drops the suffix and prints a wrong
  number (DecimalSI ``1000E`` prints as ``1``); we keep the largest suffix and widen the
  mantissa (``1000E``, and ``1024Ei`` for BinarySI sums beyond 2^70).
* ``value()`` rounds away from zero for every value; Go's inf.Dec path (only reached by values
  Go could not parse into an int64) rounds negative fractions towards +inf instead. Results are
  Python ints, where Go's int64 would overflow.
* ``parse_quantity`` reads any value, as Go does (``1e999`` is exact). The helpers that read an
  object's figures (``parse_bounded``, ``quantity_float``, ``quantity_value``, and the model's
  validation) refuse magnitudes above 2^63-1, Kubernetes' documented limit for any quantity: such
  a value is never a real capacity or request, and as a float it is infinite.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Final, Literal, TypeAlias, cast

__all__ = [
    "MAX_QUANTITY",
    "QUANTITY_PATTERN",
    "Quantity",
    "QuantityError",
    "QuantityFormat",
    "format_quantity",
    "parse_bounded",
    "parse_quantity",
    "quantity_float",
]

QuantityFormat: TypeAlias = Literal["BinarySI", "DecimalSI", "DecimalExponent"]

_FORMATS: Final[frozenset[str]] = frozenset({"BinarySI", "DecimalSI", "DecimalExponent"})

# Regex-crate compatible (pydantic uses it), so no lookarounds; the named groups are reused by
# the parser so pattern and parser cannot drift apart.
QUANTITY_PATTERN: Final[str] = (
    r"^(?P<sign>[+-]?)"
    r"(?P<num>[0-9]{1,1000}(?:\.[0-9]{0,1000})?|\.[0-9]{1,1000})"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE](?P<exp>[+-]?[0-9]{1,3}))?$"
)
_QUANTITY_RE: Final = re.compile(QUANTITY_PATTERN)

_NANO: Final = 10**9
_MAX_INT64: Final = 2**63 - 1
MAX_QUANTITY: Final = _MAX_INT64  # the largest magnitude an object's quantity may have

_BINARY_EXP: Final[dict[str, int]] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXP: Final[dict[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_SUFFIX: Final[dict[int, str]] = {exp: suffix for suffix, exp in _DECIMAL_EXP.items()}
_BINARY_SUFFIX: Final[tuple[str, ...]] = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_MAX_DECIMAL_EXP: Final = 18

# Loose split used only to explain a rejection.
_LOOSE_RE: Final = re.compile(r"([+-]?)([0-9]*(?:\.[0-9]*)?)(.*)", re.DOTALL)


class QuantityError(ValueError):
    """A string (or number) that Kubernetes would not accept as a resource quantity."""

    def __init__(self, raw: object, reason: str) -> None:
        super().__init__(f"invalid quantity {raw!r}: {reason}")
        self.raw = raw
        self.reason = reason


def _ceil_div_abs(numerator: int, denominator: int) -> int:
    """|numerator| / denominator rounded up, sign restored: Go's RoundUp (away from zero)."""
    q, r = divmod(abs(numerator), denominator)
    q += r != 0
    return -q if numerator < 0 else q


def _to_nanos(amount: Fraction) -> int:
    """The amount in units of 1n, rounding finer values away from zero like ParseQuantity."""
    if _NANO % amount.denominator == 0:
        return amount.numerator * (_NANO // amount.denominator)
    return _ceil_div_abs(amount.numerator * _NANO, amount.denominator)


def _digits(n: int) -> str:
    """Decimal digits of a non-negative int; Decimal sidesteps Python's 4300-digit str() limit."""
    return str(n) if n.bit_length() < 14_000 else str(Decimal(n))


@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """An exact resource quantity plus the format Kubernetes would print it in.

    ``amount`` is normalised to a multiple of 1n (rounded away from zero), the finest value a
    Kubernetes quantity can hold. Equality, hashing and ordering use the amount only, as Go's
    ``Cmp`` does: ``1Gi == 1073741824``.
    """

    amount: Fraction
    format: QuantityFormat = "DecimalSI"

    def __post_init__(self) -> None:
        raw: object = self.amount
        if isinstance(raw, bool) or not isinstance(raw, int | Fraction | Decimal):
            raise TypeError(f"Quantity amount must be int, Fraction or Decimal, not {type(raw).__name__}")
        if isinstance(raw, Decimal) and not raw.is_finite():
            raise QuantityError(raw, "not a finite number")
        if self.format not in _FORMATS:
            raise ValueError(f"unknown quantity format {self.format!r}")
        amount = Fraction(raw)
        if _NANO % amount.denominator:
            amount = Fraction(_to_nanos(amount), _NANO)
        object.__setattr__(self, "amount", amount)

    def as_fraction(self) -> Fraction:
        """The exact value; use it for sums that must not drift."""
        return self.amount

    def _nanos(self) -> int:
        return self.amount.numerator * (_NANO // self.amount.denominator)

    def value(self) -> int:
        """Go's ``Value()``: the integer value, fractions rounded away from zero (``100m`` → 1)."""
        return _ceil_div_abs(self._nanos(), _NANO)

    def milli_value(self) -> int:
        """Go's ``MilliValue()``: the value in thousandths, rounded away from zero."""
        return _ceil_div_abs(self._nanos(), _NANO // 1000)

    def __float__(self) -> float:
        try:
            return self.amount.numerator / self.amount.denominator
        except OverflowError:
            # Go's AsApproximateFloat64 saturates to ±Inf too.
            return math.inf if self.amount > 0 else -math.inf

    def __str__(self) -> str:
        return _canonical(self._nanos(), self.format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r}, {self.format})"

    def __hash__(self) -> int:
        return hash(self.amount)

    # Comparisons cross-multiply the two amounts' numerators and (positive) denominators: what
    # Fraction's own comparison computes, without its generic dispatch (a 5,000-node plan compares
    # quantities about half a million times).
    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            a, b = self.amount, other.amount
            return a.numerator == b.numerator and a.denominator == b.denominator
        return NotImplemented

    def __lt__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            a, b = self.amount, other.amount
            return a.numerator * b.denominator < b.numerator * a.denominator
        return NotImplemented

    def __le__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            a, b = self.amount, other.amount
            return a.numerator * b.denominator <= b.numerator * a.denominator
        return NotImplemented

    def __gt__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            a, b = self.amount, other.amount
            return a.numerator * b.denominator > b.numerator * a.denominator
        return NotImplemented

    def __ge__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            a, b = self.amount, other.amount
            return a.numerator * b.denominator >= b.numerator * a.denominator
        return NotImplemented

    def __add__(self, other: Quantity) -> Quantity:
        """Go's ``Add``: keeps the left format, unless the left side is zero (then the right's)."""
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other.format if self.amount == 0 else self.format
        return Quantity(self.amount + other.amount, fmt)

    def __sub__(self, other: Quantity) -> Quantity:
        """Go's ``Sub``: format chosen as in ``__add__``."""
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other.format if self.amount == 0 else self.format
        return Quantity(self.amount - other.amount, fmt)

    def __neg__(self) -> Quantity:
        return Quantity(-self.amount, self.format)


@lru_cache(maxsize=16384)
def _canonical(nanos: int, fmt: QuantityFormat) -> str:
    """``CanonicalizeBytes`` for a value held as a count of nano-units. Memoised: a plan's
    recommendations print the same few hundred quantities 300,000 times at 5,000 nodes."""
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    magnitude = abs(nanos)
    if fmt == "BinarySI":
        if magnitude >= 1024 * _NANO and magnitude % _NANO == 0:
            whole = magnitude // _NANO
            trailing_zero_bits = (whole & -whole).bit_length() - 1
            times = min(trailing_zero_bits // 10, len(_BINARY_SUFFIX) - 1)
            return f"{sign}{_digits(whole >> (10 * times))}{_BINARY_SUFFIX[times]}"
        # Go: "This avoids rounding and hopefully confusion, too" / "Don't lose precision".
        fmt = "DecimalSI"
    digits = _digits(magnitude)
    mantissa = digits.rstrip("0")
    exponent = len(digits) - len(mantissa) - 9
    # Lower the exponent to a multiple of 3 so it maps onto an SI suffix.
    pad = exponent % 3
    mantissa += "0" * pad
    exponent -= pad
    if fmt == "DecimalExponent":
        return f"{sign}{mantissa}" if exponent == 0 else f"{sign}{mantissa}e{exponent}"
    if exponent > _MAX_DECIMAL_EXP:
        mantissa += "0" * (exponent - _MAX_DECIMAL_EXP)
        exponent = _MAX_DECIMAL_EXP
    return f"{sign}{mantissa}{_DECIMAL_SUFFIX[exponent]}"


def _explain(raw: str) -> str:
    """Why ``raw`` does not match QUANTITY_PATTERN, for the error message."""
    if not raw:
        return "empty string"
    if any(c.isspace() for c in raw):
        return "whitespace is not allowed"
    loose = _LOOSE_RE.fullmatch(raw)
    assert loose is not None  # the pattern matches every string
    num, suffix = loose.group(2), loose.group(3)
    int_part, _, frac = num.partition(".")
    if not int_part and not frac:
        return "expected a number"
    if len(int_part) > 1000 or len(frac) > 1000:
        return "more than 1000 digits on one side of the decimal point"
    if re.fullmatch(r"[eE][+-]?[0-9]+", suffix):
        return "exponent has more than 3 digits"
    if re.fullmatch(r"[eE][+-]?", suffix):
        return "exponent has no digits"
    return f"unknown suffix {suffix!r}"


@lru_cache(maxsize=65536)
def _parse_str(raw: str) -> Quantity:
    # memoised (a Quantity is immutable): the autoscaler and the checks re-read the same few
    # annotation strings of every worker at every run; errors are raised again, never cached
    match = _QUANTITY_RE.fullmatch(raw)
    if match is None:
        raise QuantityError(raw, _explain(raw))
    int_part, _, frac = match["num"].partition(".")
    mantissa = int(int_part + frac)
    if match["sign"] == "-":
        mantissa = -mantissa
    suffix = match["suffix"] or ""
    scale = -len(frac)
    fmt: QuantityFormat
    if suffix in _BINARY_EXP:
        fmt = "BinarySI"
        mantissa <<= _BINARY_EXP[suffix]
    elif suffix in _DECIMAL_EXP:
        fmt = "DecimalSI"
        scale += _DECIMAL_EXP[suffix]
    else:
        fmt = "DecimalExponent"
        scale += int(match["exp"])
    # mantissa * 10**scale in nano-units, rounded away from zero below 1n.
    shift = scale + 9
    nanos = mantissa * 10**shift if shift >= 0 else _ceil_div_abs(mantissa, 10**-shift)
    if fmt == "BinarySI":
        if abs(nanos) > _MAX_INT64 * _NANO:
            nanos = _MAX_INT64 * _NANO if nanos > 0 else -_MAX_INT64 * _NANO
        elif 0 < abs(nanos) < _NANO:
            fmt = "DecimalSI"
    return Quantity(Fraction(nanos, _NANO), fmt)


def parse_quantity(s: str | int | float) -> Quantity:
    """Parse like Go's ``resource.ParseQuantity``; numbers are read as their decimal spelling.

    Ints and floats arrive when YAML/JSON carries an unquoted number (``nvidia.com/gpu: 1``);
    Kubernetes reads those as the digits written, so ``0.1`` is exactly one tenth (DecimalSI),
    not the nearest binary float.
    """
    if isinstance(s, str):
        return _parse_str(s)
    if isinstance(s, bool):
        raise QuantityError(s, "a boolean is not a quantity")
    if isinstance(s, int):
        return Quantity(Fraction(s), "DecimalSI")
    if isinstance(s, float):
        if not math.isfinite(s):
            raise QuantityError(s, "not a finite number")
        return _parse_str(format(Decimal(repr(s)), "f"))
    raise QuantityError(s, f"expected str, int or float, not {type(s).__name__}")


def parse_bounded(s: str | int | float) -> Quantity:
    """``parse_quantity`` for an object's figure: also refuses magnitudes above 2^63-1.

    Memoised for the plain types (a Quantity is immutable; errors are raised again, never cached):
    the autoscaler's checks read every worker's quantity annotations, the same few strings, at
    every plan (200,000 reads at 5,000 nodes, each comparing Fractions)."""
    if type(s) in _PLAIN:
        return _parse_bounded_memo(s)
    return _parse_bounded(s)


_PLAIN: Final = frozenset({str, int, float})


@lru_cache(maxsize=65536, typed=True)
def _parse_bounded_memo(s: str | int | float) -> Quantity:
    return _parse_bounded(s)


def _parse_bounded(s: str | int | float) -> Quantity:
    q = parse_quantity(s)
    if abs(q.amount) > _MAX_INT64:
        raise QuantityError(s, "out of range (more than 2^63-1 in magnitude)")
    return q


@lru_cache(maxsize=65536, typed=True)
def quantity_float(s: str | int | float) -> float:
    """``float(parse_bounded(s))``, memoised: object indexes see the same few strings 100k times.

    ``typed=True`` keeps ``True`` (rejected) from hitting a cached ``1``.
    """
    return float(parse_bounded(s))


@lru_cache(maxsize=65536, typed=True)
def quantity_value(s: str | int | float) -> int:
    """``parse_bounded(s).value()`` (Go's ``Value()``, rounded up), memoised like ``quantity_float``."""
    return parse_bounded(s).value()


def format_quantity(value: int | Fraction | Decimal, fmt: str = "DecimalSI") -> str:
    """Canonical Kubernetes spelling of ``value`` in ``fmt`` (``21474836480`` as BinarySI is ``20Gi``).

    Values finer than 1n are first rounded away from zero to 1n, as parsing would.
    """
    if fmt not in _FORMATS:
        raise ValueError(f"unknown quantity format {fmt!r}")
    if isinstance(value, bool) or not isinstance(value, int | Fraction | Decimal):
        raise TypeError(f"expected int, Fraction or Decimal, not {type(value).__name__}")
    if isinstance(value, Decimal) and not value.is_finite():
        raise QuantityError(value, "not a finite number")
    return str(Quantity(Fraction(value), cast(QuantityFormat, fmt)))
