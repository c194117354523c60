"""The cached demo's autoscale history, aggregated once and kept with it (`democache`).

`tftui plan --demo` aggregates a window of the simulator's usage per (worker pod, TFLOPS bucket)
for the autoscaler (`SimMetrics.usage_histogram_arrays`): at 5,000 nodes, indexing the objects and
the numpy passes over a day of 30,000 workers cost about 1.4 of its CPU seconds. The answer is a
pure function of the demo's objects, the simulator's seed and clock and the query, so once
computed it is kept in the demo cache under a name derived from all of them — the cached demo's
own name (`democache.demo_key`: the generator's arguments, every file of the installed tftui and
the interpreter), the seed, the clock, the query's every field, numpy's version and the machine's
architecture (numpy's vectorised logarithms may differ in the last bit between them) — and read
back instead, as the
demo is: checked against its digest, written whole then renamed, and anything unexpected means
computing it as without the cache. The simulator itself is then only built for a query whose
answer is not kept, or for any other read (`rows`, the latest samples), by the first such read.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from tftui.model.usage import HistogramQuery, PodBucketArrays
from tftui.sources.ports import GPUUsage, MetricsTable, WorkerUsage
from tftui.sources.sim import democache

if TYPE_CHECKING:  # imported where it is built: a kept answer needs neither it nor its aggregates
    from tftui.sources.sim.usage import SimMetrics

__all__ = ["KeptUsage"]

SUFFIX: Final = ".usage"
_FIELDS: Final = ("pod", "bucket", "weight", "count", "first", "last", "peak_memory")
_DTYPES: Final = {"pod": "<i8", "bucket": "<i8", "count": "<i8"}  # the others float64 ("<f8")


class KeptUsage:
    """`SimMetrics(objects, seed=seed, now=now)` whose autoscale history aggregates are kept with
    the cached demo `demo_key` names; `objects` must be that demo's objects, unchanged."""

    def __init__(self, objects: list[dict[str, Any]], *, demo_key: str, seed: int, now: datetime) -> None:
        self._objects = objects
        self._demo_key = demo_key
        self._seed = seed
        self._now = now
        self._metrics: SimMetrics | None = None

    def metrics(self) -> SimMetrics:
        """The simulator over the objects, built by the first read that needs it."""
        if self._metrics is None:
            from tftui.sources.sim.usage import SimMetrics

            self._metrics = SimMetrics(self._objects, seed=self._seed, now=self._now)
        return self._metrics

    def usage_histogram_arrays(self, q: HistogramQuery) -> PodBucketArrays:
        """`SimMetrics.usage_histogram_arrays(q)`, from the cache when it holds the answer."""
        name = self._name(q)
        arrays = _decode(democache.load(name, SUFFIX))
        if arrays is None:
            arrays = self.metrics().usage_histogram_arrays(q)
            democache.keep(name, SUFFIX, _encode(arrays))
        return arrays

    def latest_gpu_usage(self, now: datetime, lookback: timedelta | None = None) -> dict[str, GPUUsage]:
        """`SimMetrics.latest_gpu_usage` (None: its default lookback)."""
        m = self.metrics()
        return m.latest_gpu_usage(now) if lookback is None else m.latest_gpu_usage(now, lookback)

    def latest_worker_usage(
        self, now: datetime, lookback: timedelta | None = None
    ) -> dict[tuple[str, str], WorkerUsage]:
        """`SimMetrics.latest_worker_usage` (None: its default lookback)."""
        m = self.metrics()
        return m.latest_worker_usage(now) if lookback is None else m.latest_worker_usage(now, lookback)

    def rows(self, table: MetricsTable, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        return self.metrics().rows(table, start, end)

    def _name(self, q: HistogramQuery) -> str:
        return democache.derived_name(self._demo_key, self._seed, self._now, repr(q))


def _encode(a: PodBucketArrays) -> dict[str, Any]:
    out: dict[str, Any] = {"pods": [tuple(p) for p in a.pods]}
    for f in _FIELDS:
        col = np.ascontiguousarray(getattr(a, f), dtype=_DTYPES.get(f, "<f8"))
        out[f] = col.tobytes()
    return out


def _decode(value: object) -> PodBucketArrays | None:
    """The kept arrays, or None for anything but what `_encode` writes."""
    if not isinstance(value, dict) or not isinstance(value.get("pods"), list):
        return None
    pods: list[tuple[str, str, str]] = []
    for p in value["pods"]:
        if not (isinstance(p, tuple) and len(p) == 3 and all(isinstance(x, str) for x in p)):
            return None
        pods.append((p[0], p[1], p[2]))
    cols: dict[str, Any] = {}
    for f in _FIELDS:
        raw = value.get(f)
        if not isinstance(raw, bytes) or len(raw) % 8:
            return None
        cols[f] = np.frombuffer(raw, dtype=_DTYPES.get(f, "<f8")).astype(
            np.int64 if f in _DTYPES else np.float64
        )
    n = len(cols["pod"])
    if any(len(c) != n for c in cols.values()):
        return None
    if n and not 0 <= int(cols["pod"].min()) <= int(cols["pod"].max()) < len(pods):
        return None
    return PodBucketArrays(pods=pods, **cols)
