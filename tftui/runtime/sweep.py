"""Policy × seed sweeps of the arrivals protocol, in parallel processes or on a Dask cluster.

Each (policy, seed) run is independent and CPU-bound, so the runs of one sweep go to a
`ProcessPoolExecutor` (or, with a scheduler address, to a Dask cluster through `distributed`);
results come back in the order the runs were asked for, so a sweep gives the same output however
it was executed. `summarize` folds the seeds of each policy: the mean allocation at each arrived %
and the mean failed tasks.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

from tftui.engine.arrivals import ArrivalResult, Node, Task, parse_trace_policy, run_arrivals


@dataclass(frozen=True, slots=True)
class Run:
    policy: str
    seed: int
    inflate: float = 1.3
    order: str = "shuffle"


def _one(nodes: Sequence[Node], tasks: Sequence[Task], run: Run) -> ArrivalResult:
    return run_arrivals(
        nodes, tasks, parse_trace_policy(run.policy), seed=run.seed, inflate=run.inflate, order=run.order
    )


def _batch(args: tuple[Sequence[Node], Sequence[Task], Run]) -> ArrivalResult:
    return _one(*args)


def sweep(
    nodes: Sequence[Node],
    tasks: Sequence[Task],
    runs: Sequence[Run],
    *,
    workers: int | None = None,
    dask: str | None = None,
) -> list[ArrivalResult]:
    """Every run, in parallel; results in the order of `runs`. `dask`: a scheduler address
    (`tcp://host:8786`) or a `distributed.Client`; `workers` 1 runs in this process."""
    if dask is not None:
        return _on_dask(nodes, tasks, runs, dask)
    n = workers or min(len(runs), os.cpu_count() or 1)
    if n <= 1 or len(runs) <= 1:
        return [_one(nodes, tasks, r) for r in runs]
    with ProcessPoolExecutor(max_workers=n) as pool:
        return list(pool.map(_batch, [(nodes, tasks, r) for r in runs]))


def _on_dask(
    nodes: Sequence[Node], tasks: Sequence[Task], runs: Sequence[Run], address: Any
) -> list[ArrivalResult]:
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - the extra is part of the test install
        raise RuntimeError("--dask needs the dask extra: pip install 'tftui[dask]'") from None
    client = address if isinstance(address, Client) else Client(address)
    try:
        nodes_f, tasks_f = client.scatter([list(nodes), list(tasks)], broadcast=True)
        futures = [client.submit(_one, nodes_f, tasks_f, r, pure=False) for r in runs]
        return list(client.gather(futures))
    finally:
        if client is not address:
            client.close()


T = TypeVar("T")
Progress = Callable[[Sequence[float], int], None]  # (each job's progress 0-1, jobs done)

# what the forked workers of `in_processes` run: set before the pool forks, inherited, never pickled
_JOB: Callable[[int, Callable[[float], None]], Any] | None = None
_PROGRESS: Any = None  # a shared array of floats, one per job


def _run_job(i: int) -> Any:
    assert _JOB is not None and _PROGRESS is not None
    progress = _PROGRESS

    def report(x: float) -> None:
        progress[i] = x

    return _JOB(i, report)


def in_processes(
    job: Callable[[int, Callable[[float], None]], T],
    count: int,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
    every: float = 5.0,
) -> list[T]:
    """`[job(i, report) for i in range(count)]`, in forked worker processes; results in order.

    `job` reports its own progress (0-1) through `report`; `progress` is called every `every`
    seconds with all of them and how many jobs are done. The job and its inputs reach the workers by
    fork (a cluster's objects and a closure need no pickling); only results travel back. One
    worker (or one job, or a platform without fork) runs them here, in order."""
    global _JOB, _PROGRESS
    n = min(workers or os.cpu_count() or 1, count)
    if n <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        values = [0.0] * count
        done: list[T] = []
        for i in range(count):

            def report(x: float, i: int = i) -> None:
                values[i] = x
                if progress is not None:
                    progress(values, len(done))

            done.append(job(i, report))
            values[i] = 1.0
            if progress is not None:
                progress(values, len(done))
        return done
    ctx = multiprocessing.get_context("fork")
    shared = ctx.Array("d", count, lock=False)
    _JOB, _PROGRESS = job, shared
    try:
        with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
            futures: list[Future[T]] = [pool.submit(_run_job, i) for i in range(count)]
            pending = set(futures)
            while pending:
                _done, pending = wait(pending, timeout=every, return_when=FIRST_COMPLETED)
                if progress is not None:
                    finished = count - len(pending)
                    values = [1.0 if f.done() else float(shared[i]) for i, f in enumerate(futures)]
                    progress(values, finished)
            return [f.result() for f in futures]
    finally:
        _JOB = _PROGRESS = None


def stderr_progress(label: str, total: str, *, after: float = 10.0, every: float = 10.0) -> Progress:
    """A `Progress` printing `label: 40% of 7d simulated (mean of 12), 3/12 done` on stderr: only for
    a run longer than `after` seconds, at most every `every` seconds, and the last line when done."""
    started = time.monotonic()
    last = [-math.inf]

    def show(values: Sequence[float], done: int) -> None:
        now = time.monotonic()
        final = done == len(values) and last[0] > -math.inf
        if not final and (now - started < after or now - last[0] < every):
            return
        last[0] = now
        mean = sum(values) / len(values) if values else 1.0
        print(f"{label}: {mean:.0%} of {total} simulated (mean of {len(values)}), {done}/{len(values)} done",
              file=sys.stderr, flush=True)  # fmt: skip

    return show


@dataclass(slots=True)
class PolicySummary:
    policy: str
    seeds: list[int]
    curve: dict[int, float]  # arrived % → mean allocation % over the seeds that reach it
    failed: float
    moves: float
    cpu_seconds: float
    runs: list[ArrivalResult]
    preempted: float = 0.0  # evicted by preemption and not placed again, mean per run

    def at(self, pct: int) -> float | None:
        return self.curve.get(pct)

    def to_json(self) -> dict[str, Any]:
        return {
            "seeds": self.seeds,
            "allocated_pct_at": {str(x): _r(self.curve.get(x)) for x in (100, 130)},
            "curve": [[x, round(v, 3)] for x, v in self.curve.items()],
            "failed_tasks": round(self.failed, 1),
            "moves": round(self.moves, 1),
            "preempted_tasks": round(self.preempted, 1),
            "cpu_seconds": round(self.cpu_seconds, 2),
            "per_seed": {str(r.seed): r.to_json() for r in self.runs},
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def summarize(results: Sequence[ArrivalResult]) -> list[PolicySummary]:
    """One summary per policy, in the order policies first appear."""
    by: dict[str, list[ArrivalResult]] = {}
    for r in results:
        by.setdefault(r.policy, []).append(r)
    out = []
    for policy, runs in by.items():
        curves = [r.curve() for r in runs]
        xs = sorted({x for c in curves for x in c})
        curve = {}
        for x in xs:
            vals = [c[x] for c in curves if x in c]
            curve[x] = sum(vals) / len(vals)
        k = len(runs)
        out.append(
            PolicySummary(
                policy,
                [r.seed for r in runs],
                curve,
                sum(r.failed for r in runs) / k,
                sum(r.moves for r in runs) / k,
                sum(r.cpu_seconds for r in runs),
                runs,
                sum(r.preempted for r in runs) / k,
            )
        )
    return out
