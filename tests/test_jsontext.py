"""`dumps_indented` writes what `json.dumps(indent=2, ensure_ascii=False)` writes, byte for byte,
including the floats pydantic-core spells differently and the values it refuses — except that a
NaN or ±Infinity is `null` (JSON has no such numbers)."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tftui.model import jsontext
from tftui.model.jsontext import dumps_indented, finite_tree, sorted_tree


def _ref(data: Any) -> str:
    return json.dumps(finite_tree(data), indent=2, ensure_ascii=False, allow_nan=False)


def test_non_finite_numbers_are_null_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    data = {"nan": math.nan, "inf": [math.inf, (-math.inf, 1.5)], "tiny": 1e-05, "ok": 2.0}
    expected = '{\n  "nan": null,\n  "inf": [\n    null,\n    [\n      null,\n      1.5\n    ]\n  ],\n  "tiny": 1e-05,\n  "ok": 2.0\n}'
    assert dumps_indented(data) == expected  # the standard library's path (1e-05)
    del data["tiny"]
    monkeypatch.setattr(jsontext.json, "dumps", None)  # pydantic-core's path alone
    assert json.loads(dumps_indented(data)) == {"nan": None, "inf": [None, [None, 1.5]], "ok": 2.0}
    same = {"a": [1.0, "x"]}
    assert finite_tree(same) is same  # nothing to replace: nothing rebuilt


def test_tricky_values_match_the_standard_library() -> None:
    values: list[Any] = [
        1e-05, 2.5e-07, 9.99e-05, 1e-4, 1.5e-5, 1e-10, 5e-324, 1e16, 1e15, 1e22, 1.7976931348623157e308,
        -0.0, 0.1, math.nan, math.inf, -math.inf, 2**70, -(2**64), True, None, "",
        "é\x00\x1f\x7f\x85\u2028\"\\\n\t", "\ud800 lone surrogate", "e-5 and 0.00001 inside a string",
        {"b": [1, {}], "a": [], "c": {"x": (1, 2.5e-6)}}, [], {},
    ]  # fmt: skip
    for v in values:
        assert dumps_indented(v) == _ref(v), repr(v)
    assert dumps_indented(values) == _ref(values)


def test_random_floats_of_every_magnitude() -> None:
    rng = random.Random(3)
    floats = [rng.choice((1, -1)) * rng.random() * 10.0 ** rng.uniform(-330, 308) for _ in range(8000)]
    floats += [round(f, rng.randrange(7)) for f in floats[:2000]]
    big = [f for f in floats if f == 0.0 or abs(f) >= 1e-4]  # the fast path's share
    assert dumps_indented(big) == _ref(big)
    assert dumps_indented(floats) == _ref(floats)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=50, deadline=None)
@given(_json)
def test_any_json_data(data: Any) -> None:
    assert dumps_indented(data) == _ref(data)
    assert dumps_indented(sorted_tree(data)) == json.dumps(
        finite_tree(data), indent=2, ensure_ascii=False, sort_keys=True
    )


def test_names_and_uuids_that_look_like_exponents_keep_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    data = {
        "workload": "speech/asr-prototype-2",
        "gpu": "gpu-0032fe4d-758e-4b77",
        "share": 0.00012,
        "n": [1e-10],
    }
    expected = _ref(data)
    monkeypatch.setattr(jsontext.json, "dumps", None)  # the slow path would fail
    assert dumps_indented(data) == expected
