"""`DecayingHistogram` keeps only the span of buckets written: every operation must give what the
full list gives, bit for bit (a histogram whose span is set to every bucket runs the full list)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tftui.engine.histogram import TFLOPS_OPTIONS, VRAM_OPTIONS, DecayingHistogram

T0 = 6.4e10  # go seconds, around 2026
HALF_LIFE = 3600.0

values = st.one_of(
    st.floats(min_value=0.0, max_value=2e4, allow_nan=False),
    st.sampled_from([0.0, 0.05, 0.1, 3.0, 97.5, 9999.0, 1e9]),
)
times = st.floats(min_value=0.0, max_value=400 * HALF_LIFE, allow_nan=False)  # shifts included
weights = st.one_of(
    st.floats(min_value=0.0, max_value=5.0), st.floats(min_value=-5.0, max_value=5.0), st.just(math.nan)
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), values, weights, times),
        st.tuples(st.just("subtract"), values, weights, times),
        st.tuples(st.just("many"), st.lists(st.tuples(times, values), max_size=8), weights),
        st.tuples(st.just("raw"), st.dictionaries(st.integers(0, 175), weights, max_size=4)),
    ),
    max_size=25,
)


def _apply(h: DecayingHistogram, step: tuple[Any, ...]) -> None:
    kind = step[0]
    if kind == "add":
        h.add(step[1], step[2], T0 + step[3])
    elif kind == "subtract":
        h.subtract(step[1], step[2], T0 + step[3])
    elif kind == "many":
        h.add_many(sorted((T0 + t, v) for t, v in step[1]), step[2])
    else:
        h.add_weights({b: x for b, x in step[1].items() if b < h.options.num_buckets})


def _seen(h: DecayingHistogram) -> tuple[Any, ...]:
    ps = (0.5, 0.9, 0.95)
    signs = [math.copysign(1.0, w) for w in h.weights]
    return (h.weights, signs, h.total, h.ref, h.min_bucket, h.max_bucket, h.is_empty(), h.percentiles(ps))


@settings(max_examples=300, deadline=None)
@given(steps=steps, vram=st.booleans())
def test_the_stored_span_gives_what_the_full_list_gives(steps: list[tuple[Any, ...]], vram: bool) -> None:
    options = VRAM_OPTIONS if vram else TFLOPS_OPTIONS
    spans, full = DecayingHistogram(options, HALF_LIFE), DecayingHistogram(options, HALF_LIFE)
    full.weights = [0.0] * options.num_buckets  # every bucket stored: the full list's arithmetic
    for step in steps:
        _apply(spans, step)
        _apply(full, step)
        assert repr(_seen(spans)) == repr(_seen(full))  # NaN weights compare by their text
    assert len(spans._w) <= options.num_buckets


def test_only_the_buckets_written_are_stored() -> None:
    h = DecayingHistogram(TFLOPS_OPTIONS, HALF_LIFE)
    assert h._w == [] and h.weights == [0.0] * TFLOPS_OPTIONS.num_buckets and h.is_empty()
    h.add_many([(T0, 10.0), (T0 + 60, 12.0), (T0 + 120, 11.0)], 1.0)
    lo, hi = TFLOPS_OPTIONS.find_bucket(10.0), TFLOPS_OPTIONS.find_bucket(12.0)
    assert (h._base, len(h._w)) == (lo, hi - lo + 1)
    assert h.span(0, TFLOPS_OPTIONS.num_buckets) == h.weights
    assert h.span(lo, hi + 1) == h._w and h.weight(0) == 0.0 == h.weight(TFLOPS_OPTIONS.num_buckets - 1)
    h.subtract(500.0, 1.0, T0 + 180)  # a bucket never written: nothing stored, nothing changes
    assert (h._base, len(h._w)) == (lo, hi - lo + 1)
    h.set_span(2, [0.5])
    assert h._base == 2 and h.weight(2) == 0.5 and h.weights[2] == 0.5
