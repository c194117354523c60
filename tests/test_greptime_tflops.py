"""Step-1 query 4 tells a written `compute_tflops` from its max and sum, as `max(abs(…)) > 0` did.

The query dropped its ninth aggregate (`max(abs(compute_tflops))`, see `_fetch_usage`); these tests
pin that the answer is the same: as a pure function against the old expression over value lists
chosen at its edges, and on both stores for groups whose TFLOPS are zero, negative or NULL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta

import pytest

from tests.pg import A100_1, A100_3, CAPACITY, H100_5, H100_6, NOW, UNKNOWN_GPU, step1_rows
from tests.stores import MetricsStore
from tftui.sources.greptime import GreptimeMetrics
from tftui.sources.greptime.step1 import tflops_written

TINY = 5e-324  # the smallest subnormal: a sum of values ≤ 0 must not round it away


def _sql_max(values: Sequence[float]) -> float | None:
    """SQL `max` of float values: NULLs ignored, NaN above every number (PostgreSQL and DataFusion)."""
    if not values:
        return None
    return math.nan if any(math.isnan(v) for v in values) else max(values)


def _old_rule(values: Sequence[float | None]) -> bool:
    """What the query answered before: `max(abs(compute_tflops)) > 0` (NULL → 0)."""
    peak = _sql_max([abs(v) for v in values if v is not None])
    return peak is not None and peak > 0


@pytest.mark.parametrize(
    "values",
    [
        [], [None], [None, None], [0.0], [0.0, 0.0, None], [-0.0], [-0.0, 0.0], [5.0], [0.0, 3.5],
        [0.0, -2.0], [-2.0, -3.0], [-TINY], [0.0, -TINY, None], [-TINY, -TINY], [1e308, 1e308],
        [-1e308, -1e308, 0.0], [math.inf], [-math.inf, 0.0], [math.inf, -math.inf], [math.nan],
        [0.0, math.nan], [-1.0, math.nan], [None, math.nan, 2.0],
    ],
)  # fmt: skip
def test_written_from_max_and_sum_is_the_old_max_abs_rule(values: list[float | None]) -> None:
    present = [v for v in values if v is not None]
    total = sum(present) if present else None  # SQL `sum`: float additions, NULL when no value
    assert tflops_written(_sql_max(present), total) is _old_rule(values)


def test_negative_and_null_tflops_on_both_stores(store: MetricsStore) -> None:
    """Zero with negatives (max 0, sum < 0) and negatives alone are written; NULL and 0 are not."""
    data = step1_rows()  # every compute_tflops 0.0
    tflops: dict[str, dict[float, float | None]] = {
        A100_1: {4.0: 0.0, 8.0: -2.0},
        H100_5: {39.0: -5.0, 100.0: -5.0},
        H100_6: {39.0: None},
    }
    for r in data["tf_worker_usage"]:
        if r["uuid"] in tflops:
            r["compute_tflops"] = tflops[r["uuid"]][r["compute_percentage"]]
    store.create("tflops_signs", "ts")
    store.load("tflops_signs", data, "ts")
    with GreptimeMetrics(store.dsn("tflops_signs"), connect_timeout=3) as metrics:
        got = metrics.step1(timedelta(hours=1), NOW, CAPACITY)
    use = {(u.namespace, u.workload): (u.tflops_avg, u.tflops_peak) for u in got.workload_usage}
    a100 = CAPACITY[A100_3][0]
    # A100_1 written (0 and −2); A100_3 all 0: derived, 2 % of its capacity
    assert use[("ml-serving", "llama3-8b-infer")] == (
        pytest.approx((0.0 - 2.0 + 0.02 * a100) / 3),
        pytest.approx(0.02 * a100),
    )
    # H100_5 written (−5, the row in the window); H100_6 NULL: derived, 39 % of 989
    h100 = CAPACITY[H100_6][0]
    assert use[("ml-serving", "qwen2-72b-infer")] == (
        pytest.approx((-5.0 + 0.39 * h100) / 2),
        pytest.approx(0.39 * h100),
    )
    # 0.0 on a GPU of unknown capacity: not written, so nothing to derive from
    assert use[("research", "llama3-8b-infer")] == (None, None)
    assert f"capacity of {UNKNOWN_GPU}" in got.missing
