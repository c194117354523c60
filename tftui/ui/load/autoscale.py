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
from tftui.engine.histogram import DecayingHistogram
from tftui.engine.state import ClusterState
from tftui.runtime.history import load_usage, rebuild_after, settled
from tftui.sources.ports import MetricsPort

__all__ = ["AutoscaleAnalysis", "AutoscaleLoader", "Histograms"]

MAX_WINDOW: Final = timedelta(days=30)
MIN_WINDOW: Final = timedelta(hours=2)


@dataclass(frozen=True, slots=True)
class Histograms:
    """Frozen copies of one workload's TFLOPS and VRAM histograms (read by the UI thread)."""

    tf: DecayingHistogram
    vram: DecayingHistogram


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


def _frozen(h: DecayingHistogram) -> DecayingHistogram:
    c = DecayingHistogram(h.options, h.half_life)
    c.ref, c.weights, c.total = h.ref, list(h.weights), h.total
    c.min_bucket, c.max_bucket = h.min_bucket, h.max_bucket
    return c


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
            frozen = {k: Histograms(_frozen(h.tf), _frozen(h.vram)) for k, h in astate.workloads.items()}
            return AutoscaleAnalysis(result, frozen, window, rows)
