"""Finite numbers in configuration fields that upstream reads with Go's `strconv.ParseFloat`.

ParseFloat accepts `NaN`, `Inf` and `1e999` (as +Inf): a percentile or ratio that is not a finite
number makes every figure computed from it NaN. Both the model (a dump) and the autoscaler (a live
object) refuse such values; anything that is not a number at all is left to upstream's rule (the
default is used).
"""

from __future__ import annotations

import math
from typing import Any, Final

__all__ = ["MAX_FINITE", "finite_float_problem"]

MAX_FINITE: Final = 1.7976931348623157e308
"""The largest float: `-MAX_FINITE <= x <= MAX_FINITE` is false for NaN and ±Infinity (a writer's
division by zero in a metrics row), and cheaper per row than `math.isfinite`."""


def finite_float_problem(value: Any) -> str | None:
    """Why `value` (a number, or text ParseFloat reads) is not a finite number; None if it is or if
    it is not a number at all."""
    if value is None:  # the common case: a field not set (the autoscaler asks for 12 per workload)
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None
    number: float
    if isinstance(value, float):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return None if math.isfinite(number) else f"must be a finite number, got {value!r}"
