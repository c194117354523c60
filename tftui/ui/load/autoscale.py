"""The console's autoscale loader: the engine's recommendation for every workload, off the UI thread.

`AutoscaleLoader.load` is the blocking part (run by the app in a thread worker, once per refresh, like
the other analyses): it feeds `tf_worker_usage` into the engine's `AutoscaleState` — the whole
autoscale window the first time, then only the rows since the previous load, as the runtime does —
and asks `engine.autoscale.recommend`, exactly as `tftui recommend` does. The result carries frozen
copies of the histograms, so the UI thread reads them while the next load updates the live ones.
Separate from `render.autoscaleview`, which only formats that result, so the loaders never import a
builder.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from tftui.engine.autoscale import (
    AutoConfig,
    AutoscaleResult,
    AutoscaleState,
    effective_autoscaling,
    recommend,
)
from tftui.engine.histogram import DecayingHistogram, Options
from tftui.engine.state import ClusterState
from tftui.runtime.history import load_usage, rebuild_after, settled
from tftui.sources.ports import MetricsPort

__all__ = ["AutoscaleAnalysis", "AutoscaleLoader", "Histograms"]

MAX_WINDOW: Final = timedelta(days=30)
MIN_WINDOW: Final = timedelta(hours=2)


@dataclass(frozen=True, slots=True)
class Occupied:
    """A histogram's occupied buckets (`min_bucket`..`max_bucket`) and the figures its readers use.

    Every reader of a histogram (its percentiles, `is_empty`, the detail's distribution) looks at
    those buckets only, so `histogram()` answers exactly as the copied one, from a fraction of its
    memory: a workload's usage occupies a few of the 176 buckets, and a whole copy per workload was
    50 MiB at 5,000 nodes (35,832 histograms), as much as the live histograms themselves."""

    options: Options
    half_life: float
    ref: float
    total: float
    min_bucket: int
    max_bucket: int
    span: tuple[float, ...]  # weights[min_bucket : max_bucket + 1]; () when min_bucket > max_bucket

    @classmethod
    def of(cls, h: DecayingHistogram) -> Occupied:
        lo, hi = h.min_bucket, h.max_bucket
        span = tuple(h.span(lo, hi + 1)) if lo <= hi else ()
        return cls(h.options, h.half_life, h.ref, h.total, lo, hi, span)

    def histogram(self) -> DecayingHistogram:
        """A histogram with these buckets (every other one empty), for the readers."""
        h = DecayingHistogram(self.options, self.half_life)
        h.ref, h.total = self.ref, self.total
        h.min_bucket, h.max_bucket = self.min_bucket, self.max_bucket
        if self.span:
            h.set_span(self.min_bucket, self.span)
        return h


@dataclass(frozen=True, slots=True)
class Histograms:
    """Copies of one workload's TFLOPS and VRAM histograms (read by the UI thread while the next
    load updates the live ones), kept as their occupied buckets."""

    tf_copy: Occupied
    vram_copy: Occupied

    @classmethod
    def of(cls, tf: DecayingHistogram, vram: DecayingHistogram) -> Histograms:
        return cls(Occupied.of(tf), Occupied.of(vram))

    @property
    def tf(self) -> DecayingHistogram:
        return self.tf_copy.histogram()

    @property
    def vram(self) -> DecayingHistogram:
        return self.vram_copy.histogram()


@dataclass(frozen=True, slots=True)
class AutoscaleAnalysis:
    """The engine's recommendations at the refresh, and the histograms they came from."""

    result: AutoscaleResult
    histograms: Mapping[str, Histograms]
    window: timedelta
    rows: int  # rows read by this load (all of the window the first time, then the new ones)


def _window(state: ClusterState) -> timedelta:
    """The longest `historyDataPeriod` (at least 2 h, at most 30 d): what the runtime loads first."""
    window = MIN_WINDOW
    for wv in state.workloads.values():
        cfg = AutoConfig.parse(effective_autoscaling(state, wv).get("autoSetResources"))
        window = max(window, min(cfg.history, MAX_WINDOW))
    return window


class AutoscaleLoader:
    """The console's usage histograms, kept between refreshes and fed incrementally."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a cancelled worker's thread may still be running
        self.state = AutoscaleState()
        self.loaded_until: datetime | None = None
        self.window = timedelta(0)

    def _loaded(self, t: datetime) -> None:
        self.loaded_until = t

    def load(self, metrics: MetricsPort, state: ClusterState, now: datetime) -> AutoscaleAnalysis:
        """Read the rows not yet loaded and recommend; a failed read raises, and the next load goes
        on from what was read before it (a fresh state's failed first load starts again)."""
        with self._lock:
            window = _window(state)
            upto = settled(metrics, now)  # rows a late writer may still add are read next time
            last = self.loaded_until
            if last is None or window > self.window or upto < last or upto - last > rebuild_after(window):
                self.state, self.window, start = AutoscaleState(), window, upto - window
                self.loaded_until = None
            else:
                start = last
            astate = self.state
            astate.configure(state)
            # the first load aggregated where the rows are, later ones the new rows in chunks (each
            # materialised first: a store failing mid-read keeps the chunks already in, and says so)
            rows = load_usage(metrics, astate, start, upto, self._loaded) if start < upto else 0
            self.loaded_until = upto
            result = recommend(state, astate, now)
            frozen = {k: Histograms.of(h.tf, h.vram) for k, h in astate.workloads.items()}
            return AutoscaleAnalysis(result, frozen, window, rows)
