"""Timing helper shared by the benchmark scripts (not a benchmark itself: bench/run.py skips `_*`)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best(fn: Callable[[], object], repeat: int) -> float:
    """Best wall time of `repeat` calls: the least disturbed run on a shared 2-core machine."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)
