"""VPA's exponential decaying histogram (docs/behaviour.md A3), ported bucket for bucket.

The recommender's numbers (to match upstream's) depend on the exact bucket edges, the epsilon that
decides "empty", the clamp in `subtract`, end-of-bucket percentiles and the reference-time shift, so
this is a literal port rather than a generic quantile sketch. Times are float seconds since Go's zero
time (0001-01-01 UTC) so `Time.Round(halfLife)` rounds to the same instants as the controller.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import accumulate

from tftui.model.usage import BucketLayout

GO_ZERO = datetime(1, 1, 1, tzinfo=UTC)
_UNIX_FROM_GO_ZERO = 62135596800.0  # seconds from 0001-01-01 to 1970-01-01
MAX_DECAY_EXPONENT = 100  # VPA: shift the reference when a sample is 100 half-lives past it
RATIO = 1.05
EPSILON = 1e-4  # 0.001 × 0.1, as VPA's histogram options


def go_seconds(t: datetime) -> float:
    """Seconds since Go's zero time: the clock the histogram's reference lives on."""
    return t.timestamp() + _UNIX_FROM_GO_ZERO


def unix_to_go(ts: float) -> float:
    return ts + _UNIX_FROM_GO_ZERO


@dataclass(frozen=True, slots=True)
class Options:
    """Exponential bucket layout: start(n) = first·(ratioⁿ − 1)/(ratio − 1)."""

    max_value: float
    first: float
    ratio: float = RATIO
    epsilon: float = EPSILON
    num_buckets: int = field(init=False)
    _starts: tuple[float, ...] = field(init=False, repr=False)
    _log_ratio: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = math.ceil(math.log(self.max_value * (self.ratio - 1) / self.first + 1) / math.log(self.ratio)) + 1
        object.__setattr__(self, "num_buckets", n)
        object.__setattr__(
            self, "_starts", tuple(self.first * (self.ratio**b - 1) / (self.ratio - 1) for b in range(n))
        )
        object.__setattr__(self, "_log_ratio", math.log(self.ratio))

    def find_bucket(self, value: float) -> int:
        if value < self.first:
            return 0
        b = int(math.log(value * (self.ratio - 1) / self.first + 1) / self._log_ratio)
        return b if b < self.num_buckets else self.num_buckets - 1

    def bucket_start(self, b: int) -> float:
        return self._starts[b]

    def layout(self) -> BucketLayout:
        """The bucket maths as plain numbers, for a store that computes bucket indexes in SQL."""
        return BucketLayout(self.first, self.ratio - 1, self._log_ratio, self.num_buckets - 1)


TFLOPS_OPTIONS = Options(max_value=10000.0, first=0.1)
VRAM_OPTIONS = Options(max_value=1e12, first=1e7)


class DecayingHistogram:
    """VPA `DecayingHistogram`: weight w at time t counts w·2^((t − ref)/halfLife).

    The weights are stored for the span of buckets ever written (`_w[i]` is bucket `_base + i`;
    every other bucket is 0.0): a workload's usage occupies a few of the 176 buckets, and at 5,000
    nodes the whole lists were 110 MiB of the console's and the daemon's autoscale state. Every
    value, and every operation on it, is the full list's: a bucket outside the span reads 0.0.
    """

    __slots__ = ("_base", "_w", "half_life", "max_bucket", "min_bucket", "options", "ref", "total")

    def __init__(self, options: Options, half_life: float) -> None:
        if not half_life > 0:
            raise ValueError("half-life must be positive")
        self.options = options
        self.half_life = half_life  # seconds
        self.ref = 0.0  # Go zero time
        self._w: list[float] = []
        self._base = 0
        self.total = 0.0
        self.min_bucket = options.num_buckets - 1
        self.max_bucket = 0

    # -- storage ------------------------------------------------------------------------------

    @property
    def weights(self) -> list[float]:
        """Every bucket's weight (a new full-length list; the stored span is shared by nothing)."""
        n, base, w = self.options.num_buckets, self._base, self._w
        return [0.0] * base + w + [0.0] * (n - base - len(w)) if w else [0.0] * n

    @weights.setter
    def weights(self, values: list[float]) -> None:
        if len(values) != self.options.num_buckets:
            raise ValueError(f"{len(values)} weights for {self.options.num_buckets} buckets")
        self._w, self._base = list(values), 0

    def weight(self, b: int) -> float:
        i = b - self._base
        return self._w[i] if 0 <= i < len(self._w) else 0.0

    def span(self, lo: int, hi: int) -> list[float]:
        """The weights of buckets lo..hi − 1 (`weights[lo:hi]`, without the full list)."""
        base, w = self._base, self._w
        if lo >= hi:
            return []
        if base <= lo and hi <= base + len(w):
            return w[lo - base : hi - base]
        return [self.weight(b) for b in range(lo, hi)]

    def set_span(self, lo: int, values: Sequence[float]) -> None:
        """Buckets lo, lo + 1, … set to `values` (the others as they were)."""
        if not values:
            return
        self._cover(lo)
        self._cover(lo + len(values) - 1)
        i = lo - self._base
        self._w[i : i + len(values)] = values

    def _cover(self, b: int) -> None:
        """Widen the stored span to bucket `b` (new buckets 0.0)."""
        w, base = self._w, self._base
        if not w:
            self._w, self._base = [0.0], b
        elif b < base:
            self._w, self._base = [0.0] * (base - b) + w, b
        elif b >= base + len(w):
            self._w = w + [0.0] * (b - base - len(w) + 1)

    # -- decay --------------------------------------------------------------------------------

    def _factor(self, t: float) -> float:
        if t > self.ref + MAX_DECAY_EXPONENT * self.half_life:
            self._shift(t)
        return 2.0 ** ((t - self.ref) / self.half_life)

    def _shift(self, t: float) -> None:
        hl = self.half_life
        # Go's Time.Round: halfway values round up (away from zero for positive durations)
        new_ref = math.floor(t / hl + 0.5) * hl
        exponent = round((self.ref - new_ref) / hl)
        self._scale(2.0**exponent)
        self.ref = new_ref

    def _scale(self, factor: float) -> None:
        if self.total == 0.0 and not any(self._w):
            # nothing to scale (a new histogram moving its reference to its first sample, twice per
            # workload in a history load): 0·factor is 0, and the bounds walk to the ends
            self.total *= factor
            self.min_bucket, self.max_bucket = self.options.num_buckets - 1, 0
            return
        # the buckets outside the span are 0.0, and 0.0 · factor is 0.0 (factor = 2^k is finite)
        self._w = [w * factor for w in self._w]
        self.total *= factor
        self._update_min_max()

    def _update_min_max(self) -> None:
        eps, last = self.options.epsilon, self.options.num_buckets - 1
        w, base = self._w, self._base
        n = len(w)
        lo, hi = self.min_bucket, self.max_bucket
        # as the full list's walk: stop at a weight that is not < eps (NaN included)
        while (w[lo - base] if 0 <= lo - base < n else 0.0) < eps and lo < last:
            lo += 1
        while (w[hi - base] if 0 <= hi - base < n else 0.0) < eps and hi > 0:
            hi -= 1
        self.min_bucket, self.max_bucket = lo, hi

    # -- samples ------------------------------------------------------------------------------

    def add(self, value: float, weight: float, t: float) -> None:
        self._add_raw(self.options.find_bucket(value), weight * self._factor(t))

    def _add_raw(self, b: int, weight: float) -> None:
        i = b - self._base
        if not 0 <= i < len(self._w):
            self._cover(b)
            i = b - self._base
        w = self._w
        w[i] += weight
        self.total += weight
        eps = self.options.epsilon
        if b < self.min_bucket and w[i] >= eps:
            self.min_bucket = b
        if b > self.max_bucket and w[i] >= eps:
            self.max_bucket = b

    def add_weights(self, weights: Mapping[int, float]) -> None:
        """Add pre-decayed weights per bucket (relative to the current `ref`): a history window
        aggregated by the metrics store, the same as adding its samples one by one."""
        for b, x in weights.items():
            self._add_raw(b, x)

    def subtract(self, value: float, weight: float, t: float) -> None:
        weight *= self._factor(t)
        b = self.options.find_bucket(value)
        i = b - self._base
        inside = 0 <= i < len(self._w)
        held = self._w[i] if inside else 0.0
        clamped = held < weight + self.options.epsilon
        if clamped:
            weight = held  # VPA's clamp: the whole bucket goes
        if inside:
            self._w[i] -= weight
        elif not clamped:  # a negative or NaN weight taken from a bucket never written
            self._cover(b)
            self._w[b - self._base] -= weight
        # else: the bucket is 0.0 and stays 0.0 (0.0 − 0.0), nothing to store
        self.total -= weight
        self._update_min_max()

    def add_many(self, samples: Iterable[tuple[float, float]], weight: float) -> None:
        """`add` for (t, value) pairs in time order; the hot path of history loads (a non-empty
        list, or any iterable of pairs: an empty one leaves `total` + 0.0 behind)."""
        if isinstance(samples, list) and not samples:
            return
        opts = self.options
        first, ratio1, log_ratio, last = opts.first, opts.ratio - 1, opts._log_ratio, opts.num_buckets - 1
        hl = self.half_life
        limit = self.ref + MAX_DECAY_EXPONENT * hl
        w, base = self._w, self._base
        n = len(w)
        log, pow2 = math.log, (2.0).__pow__
        total = 0.0
        lo, hi = self.min_bucket, self.max_bucket
        ref = self.ref
        eps = opts.epsilon
        prev_t = math.nan
        x = 0.0
        for t, value in samples:
            if t != prev_t:
                prev_t = t
                if t > limit:
                    self.total += total
                    total = 0.0
                    self.min_bucket, self.max_bucket = lo, hi
                    self._shift(t)
                    w, base = self._w, self._base
                    n = len(w)
                    lo, hi, ref = self.min_bucket, self.max_bucket, self.ref
                    limit = ref + MAX_DECAY_EXPONENT * hl
                x = weight * pow2((t - ref) / hl)
            if value < first:
                b = 0
            else:
                b = int(log(value * ratio1 / first + 1) / log_ratio)
                if b > last:
                    b = last
            i = b - base
            if not 0 <= i < n:
                self._cover(b)
                w, base = self._w, self._base
                n = len(w)
                i = b - base
            w[i] += x
            total += x
            if w[i] >= eps:
                if b < lo:
                    lo = b
                if b > hi:
                    hi = b
        self.total += total
        self.min_bucket, self.max_bucket = lo, hi

    # -- queries ------------------------------------------------------------------------------

    def is_empty(self) -> bool:
        return self.weight(self.min_bucket) < self.options.epsilon

    def percentile(self, p: float) -> float:
        """End of the first bucket whose running sum reaches p·total (start of the last bucket)."""
        if self.is_empty():
            return 0.0
        threshold = p * self.total
        partial = 0.0
        b = self.min_bucket
        at = self.weight
        while b < self.max_bucket:
            partial += at(b)
            if partial >= threshold:
                break
            b += 1
        if b < self.options.num_buckets - 1:
            return self.options.bucket_start(b + 1)
        return self.options.bucket_start(b)

    def percentiles(self, ps: tuple[float, float, float]) -> tuple[float, float, float]:
        """`percentile` of each of `ps`, the same values, from one pass over the buckets: the running
        sums `percentile` walks (the same additions, in the same order, from 0.0) accumulated in C,
        and each threshold's first bucket whose running sum reaches it found by bisection (the
        weights are never negative, so the running sums never decrease)."""
        if self.is_empty():
            return 0.0, 0.0, 0.0
        total = self.total
        if total != total:  # a NaN weight: the running sums are not ordered, walk them instead
            return self._percentiles_walk(ps)
        lo, top = self.min_bucket, self.max_bucket
        # sums[i] is the running sum after bucket lo + i - 1 (sums[0] the 0.0 it starts from)
        sums = list(accumulate(self.span(lo, top), initial=0.0)) if lo < top else [0.0]
        n = len(sums)
        end = top if lo < top else lo  # where the walk ends when a threshold is not reached
        last = self.options.num_buckets - 1
        start = self.options.bucket_start
        out = []
        for p in ps:
            threshold = p * total
            if threshold != threshold:  # NaN: never reached, as in `percentile`
                b = end
            else:
                i = bisect_left(sums, threshold, 1)
                b = lo + i - 1 if i < n else end
            out.append(start(b + 1) if b < last else start(b))
        return out[0], out[1], out[2]

    def _percentiles_walk(self, ps: tuple[float, float, float]) -> tuple[float, float, float]:
        """`percentiles` as one walk over the buckets (the same running sums, compared with each
        threshold as `percentile` compares): whatever the weights hold."""
        if self.is_empty():
            return 0.0, 0.0, 0.0
        total = self.total
        thresholds = [p * total for p in ps]
        found = [-1, -1, -1]
        # the thresholds smallest first: a running sum that reaches one has reached every smaller
        # one, so each bucket is compared with the smallest threshold not yet reached only
        # (a NaN threshold is never reached, as in `percentile`: left out, and the walk goes on)
        order = sorted((i for i in range(3) if thresholds[i] == thresholds[i]), key=thresholds.__getitem__)
        n = len(order)
        j = 0
        pending = thresholds[order[0]] if n else math.nan
        partial = 0.0
        b = self.min_bucket
        at = self.weight
        top = self.max_bucket
        while b < top:
            partial += at(b)
            if partial >= pending:
                while j < n and partial >= thresholds[order[j]]:
                    found[order[j]] = b
                    j += 1
                if j == 3:
                    break
                pending = thresholds[order[j]] if j < n else math.nan
            b += 1
        last = self.options.num_buckets - 1
        start = self.options.bucket_start
        # not reached: where `percentile`'s walk ends (max_bucket, or min_bucket if that is past it)
        out = [start(x + 1) if x < last else start(x) for x in (f if f >= 0 else b for f in found)]
        return out[0], out[1], out[2]
