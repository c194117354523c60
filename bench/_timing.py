"""Helpers shared by the benchmark scripts (not a benchmark itself: bench/run.py skips `_*`).

Line protocol: a script reports each figure on its own line as

    RATIO <name> <value> <goal> <direction>

`name` has no spaces; `value` is a number; `goal` a number or `-` (reported, no goal); `direction`
is `<=` (met when value ≤ goal), `>=` (met when value ≥ goal) or `-`. bench/run.py collects these
lines from every script and prints them as one table. `ratio()` writes such a line.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

DIRECTIONS = ("<=", ">=", "-")


def best(fn: Callable[[], object], repeat: int) -> float:
    """Best wall time of `repeat` calls: the least disturbed run on a shared 2-core machine."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def ratio(name: str, value: float, goal: float | None = None, direction: str = "<=") -> None:
    """Print one `RATIO` line (goal None: reported without a goal)."""
    if " " in name or not name:
        raise ValueError(f"ratio name must be one word, got {name!r}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if goal is None:
        print(f"RATIO {name} {value:.4g} - -", flush=True)
    else:
        print(f"RATIO {name} {value:.4g} {goal:g} {direction}", flush=True)


@dataclass(frozen=True, slots=True)
class Ratio:
    """One parsed `RATIO` line."""

    name: str
    value: float
    goal: float | None
    direction: str

    @property
    def met(self) -> bool | None:
        if self.goal is None or self.direction == "-":
            return None
        return self.value <= self.goal if self.direction == "<=" else self.value >= self.goal


def parse_ratio(line: str) -> Ratio | None:
    """The `Ratio` of a protocol line; None for any other line (or a malformed one)."""
    parts = line.split()
    if len(parts) != 5 or parts[0] != "RATIO" or parts[4] not in DIRECTIONS:
        return None
    try:
        value = float(parts[2])
        goal = None if parts[3] == "-" else float(parts[3])
    except ValueError:
        return None
    return Ratio(parts[1], value, goal, parts[4] if goal is not None else "-")
