"""Indented JSON text, byte for byte what `json.dumps(data, indent=2, ensure_ascii=False)` writes,
encoded by pydantic-core's serializer (Rust) instead of the standard library's.

With `indent`, the standard library encodes in Python (its C encoder only does compact output):
the 5,000-node demo's plan, report and recommendations (17–44 MB of text) cost 1.5–2.7 CPU-s
there against 0.2–0.5 s in pydantic-core, already a dependency (the model validates with it).

The two agree on indentation, separators, string escapes (C0 controls as `\\u00XX`, the rest
kept as UTF-8), integers of any size and floats, except one case: a float
of magnitude under 1e-4, which Python writes `1e-05` / `2.5e-07` and pydantic-core `0.00001` /
`2.5e-7`. Such a number token (`0.0000…` or a single-digit negative exponent) is searched for
in pydantic-core's text and, if one occurs, the standard library encodes the data instead. Any
value pydantic-core refuses (a lone surrogate) takes that path too, so the result is always the
standard library's text — with one deliberate difference: a NaN or ±Infinity is written `null`,
as JavaScript's `JSON.stringify` does (JSON has no such numbers; the standard library's `NaN`
tokens make a document `jq` and other strict readers refuse). Nothing tftui computes should be
non-finite; this keeps a slip from producing a document nobody can read.

For plain JSON data only (dicts with string keys, lists, tuples, str, int, float, bool, None), as
the commands build it: pydantic-core would also serialize what `json.dumps` refuses (a datetime,
a dataclass) and spells a `None` key `"None"` where `json.dumps` writes `"null"`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from pydantic_core import PydanticSerializationError, to_json

__all__ = ["dumps_indented", "finite_tree", "sorted_tree"]

# a number token only pydantic-core writes, for a float below 1e-4 (Python: `1e-05`, `2.5e-07`):
# with `indent` every number ends its line, after `": ` (a member) or the indentation (an element).
# The literal parts are searched first (fast), then the candidate's line is checked; anything
# alike inside a string only costs the slower path.
_CANDIDATES: Final = (
    re.compile(rb"e-[0-9](?:,|\n|\Z)"),
    re.compile(rb"0\.0000[0-9]"),
)  # each: a literal first
_TOKEN: Final = re.compile(rb'(?:^ *|": )-?(?:[0-9](?:\.[0-9]+)?e-[0-9]|0\.0000[0-9]+),?$')


def _divergent(raw: bytes) -> bool:
    for candidate in _CANDIDATES:
        for m in candidate.finditer(raw):
            start = raw.rfind(b"\n", 0, m.start()) + 1
            end = raw.find(b"\n", m.start())
            if _TOKEN.search(raw[start : end if end >= 0 else len(raw)]) is not None:
                return True
    return False


def dumps_indented(data: Any) -> str:
    """`json.dumps(data, indent=2, ensure_ascii=False)`, the same text (see the module docstring)."""
    try:
        raw = to_json(data, indent=2, inf_nan_mode="null")
    except (PydanticSerializationError, ValueError, TypeError):
        raw = None
    if raw is None or _divergent(raw):
        return json.dumps(finite_tree(data), indent=2, ensure_ascii=False)
    return raw.decode("utf-8")


def finite_tree(data: Any) -> Any:
    """`data` with every NaN and ±Infinity replaced by None (what `dumps_indented` writes as `null`);
    dicts, lists and tuples rebuilt only where one occurs below them."""
    cls = type(data)
    if cls is float:
        return data if math.isfinite(data) else None
    if cls is dict:
        out = {k: finite_tree(v) for k, v in data.items()}
        return data if all(out[k] is v for k, v in data.items()) else out
    if cls is list or cls is tuple:
        items = [finite_tree(v) for v in data]
        return data if all(a is b for a, b in zip(items, data, strict=True)) else items
    return data


def sorted_tree(data: Any) -> Any:
    """`data` with every dict's keys in sorted order (what `sort_keys=True` would write); lists and
    tuples become lists, other values are shared."""
    cls = type(data)
    if cls is dict:
        return {k: sorted_tree(data[k]) for k in sorted(data)}
    if cls is list or cls is tuple:
        return [sorted_tree(v) for v in data]
    return data
