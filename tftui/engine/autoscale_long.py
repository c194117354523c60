"""A first (history) load longer than one VRAM window, from the store's aggregates (A12).

`historyDataPeriod` may be up to 30 days; read as raw rows, a week of one-minute samples is ten
thousand rows per worker (60,000 workers at 5,000 nodes: hundreds of millions, far past memory and
the query limit). The store answers two aggregates instead: per (worker, TFLOPS bucket) the decay
weights (`PodBucket`, as for a short window) and per (pod, VRAM window) the peak (`VramWindow`).
The histograms then hold what `AutoscaleState.add_samples` leaves after the same rows, up to float
rounding: each pod's VRAM windows are replayed in the order they open, through the histogram's own
reference shifts, and the TFLOPS reference moves in the steps dense samples would move it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from tftui.engine.autoscale_config import DEFAULT_PERIOD, TFLOPS_SAMPLE_WEIGHT, VRAM_SAMPLE_WEIGHT
from tftui.engine.autoscale_usage import AutoscaleState, TflopsSums, WorkloadHistory, _Sampler
from tftui.engine.histogram import MAX_DECAY_EXPONENT, DecayingHistogram, unix_to_go
from tftui.model.usage import HistogramQuery, PodBucket, VramWindow

__all__ = ["STALE", "add_long_history"]

STALE = 900
"""Half-lives between a workload's last TFLOPS sample and the window's end past which its samples
are not loaded: older than that, the store's weights are clamped (PostgreSQL raises on underflow)."""


def add_long_history(
    astate: AutoscaleState, query: HistogramQuery, groups: Iterable[PodBucket], windows: Iterable[VramWindow]
) -> int:
    """Apply a history window of any length from its TFLOPS groups (their VRAM fields unused) and its
    VRAM peak windows; returns the rows covered (Σ of the groups' counts)."""
    sums = TflopsSums(query.tflops.last)
    last_tf: dict[tuple[str, str], float] = {}  # (workload key, pod) → its last TFLOPS sample
    for g in groups:
        pk = (sums.add(g), g.pod)
        seen = last_tf.setdefault(pk, -math.inf)
        if g.bucket >= 0:
            last_tf[pk] = max(seen, g.last)
    ref_go = unix_to_go(query.ref_unix)
    for wkey, (weights, count, tf_first, tf_last) in sums.workloads.items():
        hist = _history(astate, wkey)
        if count and _add_decayed(hist.tf, weights, ref_go, unix_to_go(tf_first), unix_to_go(tf_last)):
            hist.samples += count
            hist.tf_first = min(hist.tf_first, unix_to_go(tf_first))
    for (wkey, pod), lt in last_tf.items():
        smp = astate.workloads[wkey].samplers[pod] = _Sampler()
        smp.last_tf = unix_to_go(lt) if lt > -math.inf else -math.inf
    _replay_vram(astate, windows, query.vram_window)
    return sums.rows


def _history(astate: AutoscaleState, wkey: str) -> WorkloadHistory:
    hist = astate.workloads.get(wkey)
    if hist is None:
        hist = astate.workloads[wkey] = WorkloadHistory(astate.periods.get(wkey, DEFAULT_PERIOD))
    return hist


def _add_decayed(
    h: DecayingHistogram, weights: dict[int, float], ref_go: float, first: float, last: float
) -> bool:
    """Weights decayed to `ref_go` (the store's reference), added to `h` after moving its reference
    as samples every few minutes from `first` to `last` would: to the first, then in steps of
    `MAX_DECAY_EXPONENT` half-lives while the last is past the limit. False (nothing added) when
    the last sample is more than `STALE` half-lives before `ref_go`: the store weighs such samples
    2^-1000 at least (`GreptimeMetrics.usage_histograms`), so their weights carry no shape."""
    h._factor(first)  # the first sample's move
    hl = h.half_life
    span = MAX_DECAY_EXPONENT * hl
    if last > h.ref + span:
        steps = math.ceil((last - h.ref) / span) - 1
        h._shift(h.ref + steps * span)
    exp = (ref_go - h.ref) / hl
    if exp > STALE:
        return False
    # the store's weights may be subnormal: scale by the exponent's whole part exactly (ldexp)
    whole = math.floor(exp)
    frac = TFLOPS_SAMPLE_WEIGHT * 2.0 ** (exp - whole)
    h.add_weights({b: math.ldexp(w, whole) * frac for b, w in weights.items()})
    return True


def _replay_vram(astate: AutoscaleState, windows: Iterable[VramWindow], length: float) -> None:
    """Each pod's window peaks added at their window's end, in the order the windows open (as
    `add_vram` adds them row by row); the pod's sampler keeps its last window open."""
    by_pod: dict[tuple[str, str], list[VramWindow]] = {}
    for w in windows:
        by_pod.setdefault((w.namespace, w.pod), []).append(w)
    opened: list[tuple[float, int, float, float, WorkloadHistory]] = []  # first t, order, peak, end
    for ws in by_pod.values():
        ws.sort(key=lambda w: w.index)
        anchor = ws[0].first  # window 0 opens at the pod's first VRAM sample
        wkey = f"{ws[0].namespace}/{ws[0].workload}"
        hist = _history(astate, wkey)
        smp = hist.samplers.get(ws[0].pod)
        if smp is None:
            smp = hist.samplers[ws[0].pod] = _Sampler()
        go_anchor = unix_to_go(anchor)
        hist.vram_first = min(hist.vram_first, go_anchor)
        for w in ws:
            hist.vram_samples += w.count
            end = go_anchor + (w.index + 1) * length
            opened.append((w.first, len(opened), w.peak, end, hist))
        top = ws[-1]
        smp.last_vram = unix_to_go(max(w.last for w in ws))
        smp.window_end = go_anchor + (top.index + 1) * length
        smp.peak = top.peak
    opened.sort(key=lambda o: (o[0], o[1]))
    for _first, _i, peak, end, hist in opened:
        hist.vram.add(peak, VRAM_SAMPLE_WEIGHT, end)
