"""Policies of one what-if comparison run in parallel processes, with progress for long runs.

The runs are seeded and independent, so two processes must give exactly the results of one after
another; progress reports each policy's simulated fraction and how many are done.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tftui.runtime.sweep import in_processes, stderr_progress
from tftui.runtime.whatif import SimConfig, compare, parse_policy
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects

OBJECTS = generate_objects(7, 12, DEFAULT_NOW)
POLICIES = [
    parse_policy(p) for p in ("CompactFirst+defrag", "LowLoadFirst+nodefrag", "CompactFirst+defrag+autoscale")
]


def test_parallel_comparison_equals_the_sequential_one() -> None:
    cfg = SimConfig(duration=timedelta(hours=6), churn=0.5)
    seen: list[tuple[list[float], int]] = []
    parallel = compare(
        OBJECTS, POLICIES, DEFAULT_NOW, cfg, workers=2, progress=lambda v, d: seen.append((list(v), d))
    )
    sequential = compare(OBJECTS, POLICIES, DEFAULT_NOW, cfg, workers=1)
    assert [r.policy for r in parallel] == [p.name for p in POLICIES]
    for a, b in zip(parallel, sequential, strict=True):
        assert a.summary() == b.summary()
        assert [p.to_json() for p in a.plans] == [p.to_json() for p in b.plans]
    assert seen and seen[-1] == ([1.0] * len(POLICIES), len(POLICIES))
    assert [d for _v, d in seen] == sorted(d for _v, d in seen)  # done only grows


def test_sequential_progress_reports_simulated_time_within_a_run() -> None:
    cfg = SimConfig(duration=timedelta(hours=4), churn=0.0, sample=timedelta(hours=1))
    seen: list[list[float]] = []
    compare(OBJECTS, POLICIES[:1], DEFAULT_NOW, cfg, progress=lambda v, _d: seen.append(list(v)))
    partial = [v[0] for v in seen if 0.0 < v[0] < 1.0]
    assert partial == sorted(partial) and len(partial) >= 3  # one per sample: 1 h, 2 h, 3 h of 4 h


def _square(i: int, report: Any) -> int:
    report(0.5)
    return i * i


def test_in_processes_keeps_the_order_and_runs_in_other_processes() -> None:
    import os

    pids = in_processes(lambda i, _r: os.getpid(), 4, workers=2)
    assert os.getpid() not in pids
    assert in_processes(_square, 7, workers=3) == [i * i for i in range(7)]
    assert in_processes(_square, 3, workers=1) == [0, 1, 4]


def test_stderr_progress_only_for_a_long_run(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = stderr_progress("simulate: 2 policies", "7d", after=3600)
    quiet([0.5, 0.2], 0)
    quiet([1.0, 1.0], 2)
    assert capsys.readouterr().err == ""
    loud = stderr_progress("simulate: 2 policies", "7d", after=0, every=0)
    loud([0.5, 0.25], 0)
    loud([1.0, 1.0], 2)
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "simulate: 2 policies: 38% of 7d simulated (mean of 2), 0/2 done",
        "simulate: 2 policies: 100% of 7d simulated (mean of 2), 2/2 done",
    ]
