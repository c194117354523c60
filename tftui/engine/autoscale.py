"""Workload autoscaling: usage histograms → percentile/cron recommendation → safe in-place resize.

A port of upstream's autoscaler (sampling, histograms, percentile and cron recommenders, merge,
apply, status, pool rules) with the decisions A1–A12 of docs/behaviour.md. Pure: no I/O and no
clock; the caller feeds `tf_worker_usage` rows into an `AutoscaleState` (once for history, then
incrementally) and asks `recommend(state, now)`.

Deviations from upstream, each deliberate:

- A2: every workload with data gets a recommendation (upstream: only `enable=true` ones, because the
  loader is registered only then); only enabled workloads produce actions.
- A1: a missing or empty `targetResource` means `all` (upstream: "" = recommend without applying);
  an invalid target is a Warning event and no change (upstream copies it unvalidated and applies
  nothing, silently); the target is compared case-insensitively.
- A4: a VRAM daily peak is added **and** removed with the weight at its window's end (VPA's
  rule). Upstream removes at the window end but adds at the sample time, which empties whole buckets
  and, on long-running workloads, the entire VRAM histogram.
- A4: per-worker sampler state is keyed by pod name (`pod_name`, falling back to `worker`).
- A4: `interval` ≤ 0 and `historyDataPeriod` ≤ 0 are config errors (`invalid-config`), not a
  crash or NaN weights.
- A4: the untargeted resource is left at its current value in the applied recommendation, the
  status and the threshold test, so `compute`/`vram` targets converge instead of retrying forever.
- A5: no data, or history shorter than `initialDelayPeriod` → the recommendation is provisional and
  a decrease from it is never applied (upstream: LowConfidence by workload age, nothing at all).
  Judged per resource on *real* samples only: a row with NULL compute (or compute % on a GPU of
  unknown capacity) is no TFLOPS sample and NULL memory no VRAM sample (upstream reads them as 0
  and scales down to the ratio floor); a decrease needs `min_samples` real samples spanning the
  delay, and a resource with no sample at all keeps its current request.
- A6: the scale-up cap skips workers without an allocation instead of failing the whole tick;
  limits are still not capped (upstream).
- A8: cron rules from a matching pool rule are appended only if no rule of the same name exists (the
  workload spec usually already holds the webhook's merged copy; appending again would make two
  identical active rules, an error upstream).
- A9: one `ResourceScaledUp/Down` event per workload (on `TensorFusionWorkload/<ns>/<name>`), not per
  worker; the invalid-target Warning uses our own reason `InvalidAutoscaleTarget`.
- Compute-percent workers (no `tflops-*` annotations) never get TFLOPS annotations.
- Rows without `compute_tflops` (the simulator, percent-isolated workers) count
  `compute_percentage` × the GPU's TFLOPS capacity. A multi-GPU worker's rows (one per GPU) are
  separate TFLOPS samples (requests are per device) and share one VRAM peak (the max over its GPUs).
- A new VRAM window starts with peak = the opening sample (A4): a day's samples leave weight in
  the bucket of their peak only.
- Upstream's LowConfidence by workload *age* is replaced by A5's history-length test; the
  percentile and cron recommenders otherwise run as upstream, on the same `current`
  (`status.recommendation`, else `spec.resources`). `interval` is validated only: the caller owns
  the loop. Status patches carry `status.conditions` as a one-element `ResourceUpdate` list.
- The external scaler (A11): the HTTP call is the caller's (`sources.external_scaler`); this module
  says whom to ask (`external_requests`: enabled workloads past the scaler's own initialDelayPeriod,
  with upstream's request body) and merges the parsed answers (`ExternalAnswer`) as the third
  recommender, as upstream's merge does. An answer that failed (timeout, non-2xx, malformed) aborts
  that workload's recommendation for the tick (upstream: "the first error aborts") with reason
  `external-error` naming the scaler and why; nothing is applied from it. A workload without an
  answer this tick (only the daemon's autoscale loop calls out) is recommended without it and says
  so in `external`. A scaler whose
  `url` is not http(s) or whose `apiKeySecretRef` names another namespace than the workload's is
  refused (`invalid-config`, a Warning `ExternalScalerRefused` naming the field): it is never asked
  and its Secret never read, so a workload cannot make the daemon send another namespace's token.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from tftui.engine import autoscale_checks, cron
from tftui.engine.histogram import (
    TFLOPS_OPTIONS,
    VRAM_OPTIONS,
    DecayingHistogram,
    go_seconds,
    unix_to_go,
)
from tftui.engine.plan import Action, AnnotatePod, Event, PatchWorkloadStatus, Plan, rfc3339
from tftui.engine.state import ClusterState, WorkerView, WorkloadView, parse_time
from tftui.model import keys
from tftui.model.duration import DurationError, format_duration, parse_duration
from tftui.model.gcpause import without_gc
from tftui.model.plaintext import visible
from tftui.model.quantity import Quantity, QuantityError, parse_bounded
from tftui.model.usage import HistogramQuery, PodBucket
from tftui.model.zones import load_zone

Reason = Literal[
    "no-data",
    "invalid-config",
    "invalid-target",
    "disabled",
    "provisional",
    "below-threshold",
    "no-change",
    "scale-down-locked",
    "capped",
    "applied",
    "external-error",
]

TFLOPS_SAMPLE_WEIGHT = 0.1  # upstream metrics_sampler.go
VRAM_SAMPLE_WEIGHT = 1.0
VRAM_WINDOW = 86400.0  # seconds: one daily peak per worker
MAX_ESTIMATE = 1e14
DEFAULT_PERIOD = timedelta(hours=2)
DEFAULT_DELAY = timedelta(minutes=30)
DEFAULT_INTERVAL = timedelta(seconds=30)
MIN_SAMPLE_SPACING = timedelta(minutes=5)  # min_samples: one real sample per 5 min of initialDelayPeriod
TARGETS = ("all", "compute", "vram")
CONTROLLER_TZ = ZoneInfo("UTC")  # the controller container's local zone, where cron rules run (A3)


# -- quantities ----------------------------------------------------------------------------------


@lru_cache(maxsize=65536)
def tf(n: int | Fraction) -> Quantity:
    """A TFLOPS quantity (DecimalSI); memoised, as recommendations repeat the same few values."""
    return Quantity(Fraction(n), "DecimalSI")


@lru_cache(maxsize=65536)
def vr(n: int | Fraction) -> Quantity:
    """A VRAM quantity in bytes (BinarySI)."""
    return Quantity(Fraction(n), "BinarySI")


ZERO_TF, ZERO_VR = tf(0), vr(0)
MIN_TF, MIN_VR = tf(1), vr(1024**3)


def _q(value: Any, fmt: Literal["DecimalSI", "BinarySI"]) -> Quantity:
    """A spec/annotation quantity; absent or invalid is zero (upstream's zero Quantity).

    Invalid or out-of-range values never get this far for a decision: `autoscale_checks` makes
    such a workload `invalid-config` first."""
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return _q_cached(value, fmt)
    return tf(0) if fmt == "DecimalSI" else vr(0)


@lru_cache(maxsize=65536, typed=True)
def _q_cached(value: str | int | float, fmt: Literal["DecimalSI", "BinarySI"]) -> Quantity:
    if value == "":
        return tf(0) if fmt == "DecimalSI" else vr(0)
    try:
        return parse_bounded(value)
    except (QuantityError, TypeError, ValueError):
        return tf(0) if fmt == "DecimalSI" else vr(0)


@dataclass(frozen=True, slots=True)
class Resources:
    """Requests and limits of TFLOPS and VRAM; equality is numeric (upstream `Resources.Equal`)."""

    tf_req: Quantity = ZERO_TF
    tf_lim: Quantity = ZERO_TF
    vram_req: Quantity = ZERO_VR
    vram_lim: Quantity = ZERO_VR

    @classmethod
    def parse(cls, res: Mapping[str, Any] | None) -> Resources:
        res = res if isinstance(res, Mapping) else {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        req, lim = (req if isinstance(req, Mapping) else {}), (lim if isinstance(lim, Mapping) else {})
        return cls(
            _q(req.get("tflops"), "DecimalSI"),
            _q(lim.get("tflops"), "DecimalSI"),
            _q(req.get("vram"), "BinarySI"),
            _q(lim.get("vram"), "BinarySI"),
        )

    def is_zero(self) -> bool:
        return all(x.amount == 0 for x in (self.tf_req, self.tf_lim, self.vram_req, self.vram_lim))

    def to_json(self) -> dict[str, Any]:
        """Upstream's JSON (compute is a struct, so Go still writes `"compute":"0"`)."""
        return {
            "requests": {"tflops": str(self.tf_req), "compute": "0", "vram": str(self.vram_req)},
            "limits": {"tflops": str(self.tf_lim), "compute": "0", "vram": str(self.vram_lim)},
        }


# -- configuration -------------------------------------------------------------------------------


def _go_float(value: Any, default: float) -> float:
    """`strconv.ParseFloat` or the default, silently (as upstream, A3); never NaN or infinite (those
    make the workload `invalid-config` before any decision, see `autoscale_checks`)."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else default
    if not isinstance(value, str) or not value or value != value.strip() or "_" in value:
        return default
    try:
        number = float(value)
    except ValueError:
        return default
    return number if math.isfinite(number) else default


def _duration(value: Any, default: timedelta) -> timedelta:
    if not isinstance(value, str) or not value:
        return default
    try:
        return parse_duration(value)
    except DurationError:
        return default


_PARSED: dict[tuple[Any, ...], AutoConfig] = {}


@dataclass(frozen=True, slots=True)
class AutoConfig:
    """`autoSetResources` with upstream's code defaults (A3), plus A1/A4 validation results."""

    present: bool = False
    enable: bool = False
    target: str = "all"  # normalised; "" never (A1)
    target_raw: str = ""
    target_valid: bool = True
    tf_lower: float = 0.5
    tf_target: float = 0.95
    tf_upper: float = 0.99
    vram_lower: float = 0.5
    vram_target: float = 0.98
    vram_upper: float = 0.99
    margin: float = 0.15
    threshold: float = 0.1
    history: timedelta = DEFAULT_PERIOD
    min_vram: float = 0.2
    max_vram: float = 5.0
    min_compute: float = 0.1
    max_compute: float = 10.0
    initial_delay: timedelta = DEFAULT_DELAY
    interval: timedelta = DEFAULT_INTERVAL
    errors: tuple[str, ...] = ()

    @classmethod
    def parse(cls, asr: Mapping[str, Any] | None) -> AutoConfig:
        """The config of one `autoSetResources` map; memoised by its scalar items (every autoscale
        tick parses every workload's config several times, and nearly all of them are equal)."""
        if not isinstance(asr, Mapping):
            return cls()
        try:  # the value's type is part of the key: `enable: true` and `enable: 1` differ
            key = tuple(sorted((k, type(v), v) for k, v in asr.items()))
            hit = _PARSED.get(key)
        except TypeError:  # a nested or unhashable value: no memo
            return cls._parse(asr)
        if hit is None:
            if len(_PARSED) >= 4096:
                _PARSED.clear()
            hit = _PARSED[key] = cls._parse(asr)
        return hit

    @classmethod
    def _parse(cls, asr: Mapping[str, Any]) -> AutoConfig:
        raw_target = asr.get("targetResource")
        target_raw = raw_target if isinstance(raw_target, str) else ""
        target = target_raw.strip().lower() or "all"
        errors: list[str] = []
        history = _duration(asr.get("historyDataPeriod"), DEFAULT_PERIOD)
        if history <= timedelta(0):
            errors.append(f"historyDataPeriod must be positive, got {asr.get('historyDataPeriod')!r}")
        interval = _duration(asr.get("interval"), DEFAULT_INTERVAL)
        if interval <= timedelta(0):
            errors.append(f"interval must be positive, got {asr.get('interval')!r}")
        d = cls()
        return cls(
            present=True,
            enable=asr.get("enable") is True,
            target=target,
            target_raw=target_raw,
            target_valid=target in TARGETS,
            tf_lower=_go_float(asr.get("lowerBoundComputePercentile"), d.tf_lower),
            tf_target=_go_float(asr.get("targetComputePercentile"), d.tf_target),
            tf_upper=_go_float(asr.get("upperBoundComputePercentile"), d.tf_upper),
            vram_lower=_go_float(asr.get("lowerBoundVRAMPercentile"), d.vram_lower),
            vram_target=_go_float(asr.get("targetVRAMPercentile"), d.vram_target),
            vram_upper=_go_float(asr.get("upperBoundVRAMPercentile"), d.vram_upper),
            margin=_go_float(asr.get("marginFraction"), d.margin),
            threshold=_go_float(asr.get("updateThreshold"), d.threshold),
            history=history,
            min_vram=_go_float(asr.get("minVRAMResourcesRatio"), d.min_vram),
            max_vram=_go_float(asr.get("maxVRAMResourcesRatio"), d.max_vram),
            min_compute=_go_float(asr.get("minComputeResourcesRatio"), d.min_compute),
            max_compute=_go_float(asr.get("maxComputeResourcesRatio"), d.max_compute),
            initial_delay=_duration(asr.get("initialDelayPeriod"), DEFAULT_DELAY),
            interval=interval,
            errors=tuple(errors),
        )


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool | None:
    """Kubernetes LabelSelector semantics; None for an invalid selector (upstream skips the rule)."""
    if selector is None:
        return False  # a nil selector matches nothing (metav1.LabelSelectorAsSelector)
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            if not values:
                return None
            if labels.get(key) not in values:
                return False
        elif op == "NotIn":
            if not values:
                return None
            if key in labels and labels[key] in values:
                return False
        elif op == "Exists":
            if key not in labels:
                return False
        elif op == "DoesNotExist":
            if key in labels:
                return False
        else:
            return None
    return True


def _merge_asr(base: dict[str, Any], over: Mapping[str, Any], *, pool_rule: bool) -> None:
    """Field merge of autoSetResources; a pool rule overwrites with non-empty strings and `true` only."""
    for k, v in over.items():
        if pool_rule and (v is False or v == "" or v is None):
            continue
        base[k] = v


def effective_autoscaling(state: ClusterState, wv: WorkloadView) -> dict[str, Any]:
    """The workload's `autoScalingConfig` after upstream's admission order (A1).

    WorkloadProfile base → the workload's own spec → autoscale pod annotations → first matching pool
    rule. On a real cluster the workload spec already holds the webhook's merge, so re-applying the
    annotations and the pool rule is idempotent; for workloads without an object (local-GPU mode) this
    is the only source. A workload whose inputs are malformed (`autoscale_checks.problems`) has no
    autoscaling at all: {} (the autoscaler reports it `invalid-config`).
    """
    if autoscale_checks.problems(state, wv.key):
        return {}
    workers = sorted((state.workers[k] for k in wv.workers if k in state.workers), key=lambda w: w.name)
    first: WorkerView | None = workers[0] if workers else None
    pod_ann: Mapping[str, str] = (first.obj.get("metadata", {}).get("annotations") or {}) if first else {}
    pod_labels: Mapping[str, str] = (first.obj.get("metadata", {}).get("labels") or {}) if first else {}
    spec = (wv.obj or {}).get("spec") or {}
    asc: dict[str, Any] = {}
    profile_name = pod_ann.get(keys.WORKLOAD_PROFILE) or spec.get("workloadProfile")
    if isinstance(profile_name, str) and profile_name:
        prof = state.profiles.get(f"{wv.namespace}/{profile_name}")
        pasc = ((prof or {}).get("spec") or {}).get("autoScalingConfig") or {}
        asc = json.loads(json.dumps(pasc))
    own = spec.get("autoScalingConfig") or {}
    if own.get("autoSetResources") is not None:
        merged = dict(asc.get("autoSetResources") or {})
        merged.update(own["autoSetResources"])
        asc["autoSetResources"] = merged
    for k in ("cronScalingRules", "externalScaler"):
        if own.get(k) is not None:
            asc[k] = own[k]
    if pod_ann.get(keys.AUTOSCALE) == keys.TRUE:
        asr = dict(asc.get("autoSetResources") or {})
        asr["enable"] = True
        asr["targetResource"] = pod_ann.get(keys.AUTOSCALE_TARGET, "all")
        asc["autoSetResources"] = asr
    pool = state.pools.get(wv.pool) if wv.pool else None
    tpl = state.templates.get(pool.template) if pool and pool.template else None
    labels = pod_labels or ((wv.obj or {}).get("metadata", {}).get("labels") or {})
    for rule in ((tpl or {}).get("spec") or {}).get("verticalScalingRules") or ():
        rule_asc = rule.get("autoScaling")
        if rule_asc is None or not label_selector_matches(rule.get("selector"), labels):
            continue
        if rule_asc.get("autoSetResources") is not None:
            asr = dict(asc.get("autoSetResources") or {})
            _merge_asr(asr, rule_asc["autoSetResources"], pool_rule=True)
            asc["autoSetResources"] = asr
        names = {r.get("name") for r in asc.get("cronScalingRules") or ()}
        extra = [r for r in rule_asc.get("cronScalingRules") or () if r.get("name") not in names]
        if extra:
            asc["cronScalingRules"] = [*(asc.get("cronScalingRules") or ()), *extra]
        if rule_asc.get("externalScaler") is not None:
            asc["externalScaler"] = rule_asc["externalScaler"]
        break
    return asc


# -- usage state ---------------------------------------------------------------------------------


class _Sampler:
    """Per-worker sampler state (A4, keyed by pod): last timestamps and the open VRAM window."""

    __slots__ = ("last_tf", "last_vram", "peak", "window_end")

    def __init__(self) -> None:
        self.last_tf = -math.inf
        self.last_vram = -math.inf
        self.window_end = -math.inf
        self.peak = 0.0


class WorkloadHistory:
    """The workload-level aggregator: one TFLOPS and one VRAM histogram over all its workers.

    Only real samples count: a row whose TFLOPS cannot be known (NULL, or compute % on a GPU of
    unknown capacity) adds no TFLOPS sample, a row with NULL memory no VRAM sample, and neither
    moves `first` (so NULL rows never make the history look long enough to act on).
    """

    __slots__ = ("period", "samplers", "samples", "tf", "tf_first", "vram", "vram_first", "vram_samples")

    def __init__(self, period: timedelta) -> None:
        hl = period.total_seconds() / 2
        self.period = period
        self.tf = DecayingHistogram(TFLOPS_OPTIONS, hl)
        self.vram = DecayingHistogram(VRAM_OPTIONS, hl)
        self.samplers: dict[str, _Sampler] = {}
        self.tf_first = math.inf  # go seconds of the first TFLOPS sample
        self.vram_first = math.inf  # ... of the first VRAM sample
        self.samples = 0  # TFLOPS samples
        self.vram_samples = 0

    @property
    def first(self) -> float:
        """Go seconds of the first real sample (inf: none)."""
        return min(self.tf_first, self.vram_first)

    def is_empty(self) -> bool:
        return self.tf.is_empty() and self.vram.is_empty()

    def add_vram(self, s: _Sampler, t: float, mem: float) -> None:
        """Daily peak per worker, added and removed at the window's end (the A4 fix)."""
        if t < s.last_vram:
            return
        s.last_vram = t
        self.vram_samples += 1
        if t < self.vram_first:
            self.vram_first = t
        if t < s.window_end:
            if mem > s.peak:
                self.vram.subtract(s.peak, VRAM_SAMPLE_WEIGHT, s.window_end)
                self.vram.add(mem, VRAM_SAMPLE_WEIGHT, s.window_end)
                s.peak = mem
            return
        if s.window_end == -math.inf:
            s.window_end = t
        s.window_end += (math.floor((t - s.window_end) / VRAM_WINDOW) + 1) * VRAM_WINDOW
        s.peak = mem
        self.vram.add(mem, VRAM_SAMPLE_WEIGHT, s.window_end)


class AutoscaleState:
    """Histograms per workload, fed from `tf_worker_usage` rows; rebuildable from the TSDB alone.

    Call `configure(state)` before loading so half-lives and GPU capacities are known; then
    `add_samples` once with the history window and again with each new interval's rows.
    """

    def __init__(self) -> None:
        self.workloads: dict[str, WorkloadHistory] = {}
        self.periods: dict[str, timedelta] = {}
        self.gpu_tflops: dict[str, float] = {}

    def configure(self, state: ClusterState) -> None:
        """Adopt the cluster's GPU capacities and each workload's `historyDataPeriod`.

        A changed period replaces the workload's histograms (as upstream); per-worker samplers of
        pods that no longer exist are pruned by pod name (A4).
        """
        self.gpu_tflops = {name: g.capacity.tflops for name, g in state.gpus.items()}
        for key, wv in state.workloads.items():
            cfg = AutoConfig.parse(effective_autoscaling(state, wv).get("autoSetResources"))
            period = cfg.history if cfg.history > timedelta(0) else DEFAULT_PERIOD
            self.periods[key] = period
            hist = self.workloads.get(key)
            if hist is not None:
                if hist.period != period:
                    self.workloads[key] = WorkloadHistory(period)
                else:
                    live = {state.workers[w].name for w in wv.workers if w in state.workers}
                    for pod in [p for p in hist.samplers if p not in live]:
                        del hist.samplers[pod]

    @without_gc
    def add_samples(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Feed rows in ts order (a history load or an incremental one); returns rows read.

        TFLOPS is `compute_tflops`, or `compute_percentage` × the GPU's capacity when the writer
        leaves TFLOPS at zero (the simulator and percent-isolated workers). TFLOPS samples are
        buffered per workload and added in one pass per histogram: this loop is the load's hot path.
        Missing is not zero: NULL compute (or compute % on a GPU of unknown capacity) is no TFLOPS
        sample and NULL memory no VRAM sample (`usage_histograms` in the store does the same).
        """
        pending: list[tuple[WorkloadHistory, list[tuple[float, float]]]] = []
        by_wl: dict[str, list[tuple[float, float]]] = {}
        cache: dict[tuple[str, str], tuple[list[tuple[float, float]], _Sampler, WorkloadHistory]] = {}
        caps = self.gpu_tflops
        last_ts: object = None
        t = 0.0
        n = 0
        for r in rows:
            n += 1
            ts = r["ts"]
            if ts is not last_ts:
                last_ts = ts
                t = go_seconds(ts) if isinstance(ts, datetime) else unix_to_go(float(ts) / 1000.0)
            ck = (r["namespace"], r.get("pod_name") or r.get("worker") or "")
            ent = cache.get(ck)
            if ent is None:
                ent = cache[ck] = self._entry(r["namespace"], r["workload"], ck[1], by_wl, pending)
            buf, smp, hist = ent
            tfl = r.get("compute_tflops")
            if not tfl and (pct := r.get("compute_percentage")) is not None:
                cap = caps.get(r.get("uuid") or "")
                tfl = pct / 100.0 * cap if cap else None  # no capacity: no sample, not 0
            elif not tfl and "compute_percentage" in r:
                tfl = None  # both NULL (or 0 and NULL): nothing measured
            if tfl is not None and t >= smp.last_tf and tfl >= 0:
                smp.last_tf = t
                buf.append((t, tfl))
            mem = r.get("memory_bytes")
            if mem is not None and t >= smp.last_vram:
                if mem > smp.peak or t >= smp.window_end:
                    hist.add_vram(smp, t, float(mem))
                else:
                    smp.last_vram = t
                    hist.vram_samples += 1
        for hist, samples in pending:
            if samples:
                hist.samples += len(samples)
                hist.tf_first = min(hist.tf_first, samples[0][0])
                hist.tf.add_many(samples, TFLOPS_SAMPLE_WEIGHT)
        return n

    def history_query(self, start: datetime, end: datetime) -> HistogramQuery | None:
        """The pre-aggregation a metrics store can do for a first (history) load, or None.

        None means "read raw rows instead": some worker already has sampler state (an incremental
        load must honour its last timestamps and open VRAM window), the window is longer than one
        VRAM peak window (each pod's windows are anchored at its own first sample), or longer than
        50 half-lives of some workload (its reference time would move mid-window).
        """
        span = (end - start).total_seconds()
        if span <= 0 or span > VRAM_WINDOW or any(h.samplers for h in self.workloads.values()):
            return None
        default = DEFAULT_PERIOD.total_seconds() / 2
        periods = {**self.periods, **{k: h.period for k, h in self.workloads.items()}}
        half_lives = {k: p.total_seconds() / 2 for k, p in periods.items()}
        if span > 50 * min((default, *half_lives.values())):
            return None
        end_s = math.floor(end.timestamp())
        return HistogramQuery(
            start=start,
            end=end,
            ref_unix=float(end_s),
            tflops=TFLOPS_OPTIONS.layout(),
            default_half_life=default,
            half_lives=tuple(
                sorted(
                    (k.partition("/")[0], k.partition("/")[2], hl)
                    for k, hl in half_lives.items()
                    if hl != default
                )
            ),
            gpu_tflops=tuple(sorted(self.gpu_tflops.items())),
        )

    def add_pod_buckets(self, query: HistogramQuery, groups: Iterable[PodBucket]) -> int:
        """Apply a history window the store aggregated per (pod, TFLOPS bucket); returns rows covered.

        The result equals `add_samples` over the same rows: TFLOPS weights are rescaled from
        `ref_unix` to each histogram's reference (moved first, as the first sample would move it);
        each new pod's VRAM window opens at its first sample with the window's peak, added at the
        window's end (the add/subtract pairs of `add_vram` net out to exactly that).
        """
        wl: dict[str, list[Any]] = {}  # key → [bucket weights, tf samples, first tf t]
        # (wkey, pod) → [first, last tf, VRAM samples, first VRAM t, last VRAM t, VRAM peak]
        pods: dict[tuple[str, str], list[Any]] = {}
        last = query.tflops.last
        n = 0
        for g in groups:
            n += g.count
            wkey = f"{g.namespace}/{g.workload}"
            a = wl.get(wkey)
            if a is None:
                a = wl[wkey] = [{}, 0, math.inf]
            p = pods.get((wkey, g.pod))
            if p is None:
                p = pods[(wkey, g.pod)] = [g.first, -math.inf, 0, math.inf, -math.inf, None]
            p[0] = min(p[0], g.first)
            if g.vram_count and g.peak_memory is not None:
                p[2] += g.vram_count
                p[3] = min(p[3], g.vram_first if g.vram_first is not None else g.first)
                p[4] = max(p[4], g.vram_last if g.vram_last is not None else g.last)
                p[5] = g.peak_memory if p[5] is None else max(p[5], g.peak_memory)
            if g.bucket >= 0:
                b = min(g.bucket, last)
                a[0][b] = a[0].get(b, 0.0) + g.weight
                a[1] += g.count
                a[2] = min(a[2], g.first)
                p[1] = max(p[1], g.last)
        ref_go = unix_to_go(query.ref_unix)
        for wkey, (weights, count, tf_first) in wl.items():
            hist = self.workloads.get(wkey)
            if hist is None:
                hist = self.workloads[wkey] = WorkloadHistory(self.periods.get(wkey, DEFAULT_PERIOD))
            if count:
                hist.samples += count
                hist.tf_first = min(hist.tf_first, unix_to_go(tf_first))
                tfh = hist.tf
                tfh._factor(unix_to_go(tf_first))  # moves the reference as the first sample would
                scale = TFLOPS_SAMPLE_WEIGHT * 2.0 ** ((ref_go - tfh.ref) / tfh.half_life)
                tfh.add_weights({b: w * scale for b, w in weights.items()})
        # in the order add_samples opens the VRAM windows: by first VRAM sample (then first row)
        for (wkey, pod), (_first, last_tf, v_n, v_first, v_last, peak) in sorted(
            pods.items(), key=lambda kv: (kv[1][3], kv[1][0])
        ):
            hist = self.workloads[wkey]
            smp = hist.samplers[pod] = _Sampler()
            smp.last_tf = unix_to_go(last_tf) if last_tf > -math.inf else -math.inf
            if not v_n or peak is None:
                continue  # no VRAM sample: no window opened, as add_samples leaves it
            smp.last_vram = unix_to_go(v_last)
            smp.window_end = unix_to_go(v_first) + VRAM_WINDOW
            smp.peak = float(peak)
            hist.vram_samples += v_n
            hist.vram_first = min(hist.vram_first, unix_to_go(v_first))
            hist.vram.add(smp.peak, VRAM_SAMPLE_WEIGHT, smp.window_end)
        return n

    def _entry(
        self,
        ns: str,
        workload: str,
        pod: str,
        by_wl: dict[str, list[tuple[float, float]]],
        pending: list[tuple[WorkloadHistory, list[tuple[float, float]]]],
    ) -> tuple[list[tuple[float, float]], _Sampler, WorkloadHistory]:
        wkey = f"{ns}/{workload}"
        hist = self.workloads.get(wkey)
        if hist is None:
            hist = self.workloads[wkey] = WorkloadHistory(self.periods.get(wkey, DEFAULT_PERIOD))
        buf = by_wl.get(wkey)
        if buf is None:
            buf = by_wl[wkey] = []
            pending.append((hist, buf))
        smp = hist.samplers.get(pod)
        if smp is None:
            smp = hist.samplers[pod] = _Sampler()
        return buf, smp, hist


# -- recommenders --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Estimates:
    """Bucket-end usage percentiles and the margin-added integer estimates (A3)."""

    tf_usage: tuple[float, float, float]  # lower, target, upper
    vram_usage: tuple[float, float, float]
    tf: tuple[int, int, int]
    vram: tuple[int, int, int]


def _estimate(p: float, margin: float) -> int:
    p = min(max(p, 0.0), MAX_ESTIMATE)
    return int(p + p * margin)


def estimate(hist: WorkloadHistory, cfg: AutoConfig) -> Estimates:
    tu = tuple(hist.tf.percentile(p) for p in (cfg.tf_lower, cfg.tf_target, cfg.tf_upper))
    vu = tuple(hist.vram.percentile(p) for p in (cfg.vram_lower, cfg.vram_target, cfg.vram_upper))
    return Estimates(
        (tu[0], tu[1], tu[2]),
        (vu[0], vu[1], vu[2]),
        (_estimate(tu[0], cfg.margin), _estimate(tu[1], cfg.margin), _estimate(tu[2], cfg.margin)),
        (_estimate(vu[0], cfg.margin), _estimate(vu[1], cfg.margin), _estimate(vu[2], cfg.margin)),
    )


@dataclass(frozen=True, slots=True)
class Partial:
    """One recommender's result (upstream `RecommendResult`) and the condition it upserts."""

    resources: Resources
    has_applied: bool
    locking: bool = False
    condition: tuple[str, str] | None = None  # (reason, message)
    capped: bool = False


def _scale(
    name: str,
    est: tuple[int, int, int],
    qos: str,
    cur: tuple[Quantity, Quantity],
    orig: tuple[Quantity, Quantity],
    ratios: tuple[float, float],
) -> tuple[Quantity, Quantity, str]:
    """`handleResourceScaling` (A3): QoS pick → floor → ratio clamp → compute-limit floor."""
    mk, floor = (tf, MIN_TF) if name == "Compute" else (vr, MIN_VR)
    lower, target, upper = est
    request = mk(upper if qos == "critical" else target if qos == "high" else lower)
    limit = mk(upper)
    request, limit = max(request, floor), max(limit, floor)
    lo_r, hi_r = ratios

    def clamp(x: Quantity, o: Quantity) -> Quantity:
        lo, hi = int(float(o) * lo_r), int(float(o) * hi_r)
        if lo != 0 and x.amount < lo:
            return mk(lo)
        if hi != 0 and x.amount > hi:
            return mk(hi)
        return x

    request, limit = clamp(request, orig[0]), clamp(limit, orig[1])
    if name == "Compute" and limit < orig[1]:
        limit = mk(int(float(orig[1])))
    if request == cur[0] and limit == cur[1]:
        return cur[0], cur[1], ""
    return request, limit, f"{name} scaled: request {cur[0]} -> {request}, limit {cur[1]} -> {limit}"


def process(rec: Resources, current: Resources, allowed: tuple[int, int] | None) -> tuple[Resources, str]:
    """The recommendation processor (A6): cap increasing requests at the per-worker maximum."""
    if (rec.tf_req <= current.tf_req and rec.vram_req <= current.vram_req) or allowed is None:
        return rec, ""
    msgs: list[str] = []
    tf_req, vram_req = rec.tf_req, rec.vram_req
    if tf_req > current.tf_req and tf_req.amount > allowed[0]:
        tf_req = tf(allowed[0])
        msgs.append(f"TFlops request set to max allowed: ({tf_req})")
    if vram_req > current.vram_req and vram_req.amount > allowed[1]:
        vram_req = vr(allowed[1])
        msgs.append(f"VRAM request set to max allowed: ({vram_req})")
    return Resources(tf_req, rec.tf_lim, vram_req, rec.vram_lim), ", ".join(msgs)


def percentile_recommend(
    est: Estimates,
    cfg: AutoConfig,
    qos: str,
    current: Resources,
    original: Resources,
    allowed: tuple[int, int] | None,
    measured: tuple[bool, bool] = (True, True),
) -> Partial | None:
    """The percentile recommender (A3) from estimates; None = nothing to recommend.

    `measured` says which of (TFLOPS, VRAM) has any real sample: an unmeasured resource keeps its
    current values (upstream would scale an empty histogram's 0 down to the floor or the ratio
    clamp — a decision made from missing data)."""
    tr, tl, tmsg = current.tf_req, current.tf_lim, ""
    if measured[0]:
        tr, tl, tmsg = _scale(
            "Compute",
            est.tf,
            qos,
            (current.tf_req, current.tf_lim),
            (original.tf_req, original.tf_lim),
            (cfg.min_compute, cfg.max_compute),
        )
    vq, vl, vmsg = current.vram_req, current.vram_lim, ""
    if measured[1]:
        vq, vl, vmsg = _scale(
            "VRAM",
            est.vram,
            qos,
            (current.vram_req, current.vram_lim),
            (original.vram_req, original.vram_lim),
            (cfg.min_vram, cfg.max_vram),
        )
    rec = Resources(tr, tl, vq, vl)
    if not rec.is_zero():
        within: list[str] = []
        should = False
        for name, cur, new, mk, known in (
            ("Compute", current.tf_req, tr, tf, measured[0]),
            ("VRAM", current.vram_req, vq, vr, measured[1]),
        ):
            if cur.amount == 0 or new.amount == 0 or not known:
                continue
            diff = abs(cur.value() - new.value())
            thr = int(cur.value() * cfg.threshold)
            if diff > thr:
                should = True
            else:
                within.append(f"{name} change ({diff}) within threshold ({mk(thr)}), ")
        if not should and within:
            return Partial(
                rec, True, condition=("InsideUpdateThreshold", "".join(within) + "no update performed")
            )
    if rec.is_zero():
        return None
    rec, pmsg = process(rec, current, allowed)
    message = ", ".join(m for m in (tmsg, vmsg) if m)
    if pmsg:
        message += ", " + pmsg
    applied = rec == current
    return Partial(rec, applied, condition=None if applied else ("Updated", message), capped=bool(pmsg))


class CronRuleError(ValueError):
    """A cron rule problem that aborts the tick upstream (A3)."""


@dataclass(frozen=True, slots=True)
class CronRule:
    name: str
    start: str
    end: str
    desired: Resources
    raw: Mapping[str, Any]


def _split_tz(expr: str, default: ZoneInfo) -> tuple[str, ZoneInfo]:
    """robfig's `CRON_TZ=<zone> ` / `TZ=<zone> ` prefix."""
    if expr.startswith(("TZ=", "CRON_TZ=")):
        sp = expr.find(" ")
        if sp < 0:
            raise CronRuleError(f"provided bad location {expr}: missing schedule")
        zone = expr[expr.index("=") + 1 : sp]
        try:
            return expr[sp:].strip(), load_zone(zone)
        except ValueError:
            raise CronRuleError(f"provided bad location {zone}") from None
    return expr, default


def active_cron_rule(rules: Iterable[Mapping[str, Any]], now: datetime, tz: ZoneInfo) -> CronRule | None:
    """The one rule whose window [start firing, next end firing) holds `now` (A3, A7)."""
    active: list[CronRule] = []
    for r in rules:
        if not (r.get("enable") is True and r.get("name") and r.get("start") and r.get("end")):
            continue
        start, end = str(r["start"]), str(r["end"])
        if start == end:
            raise CronRuleError("start and end can not same")
        try:
            s_expr, s_tz = _split_tz(start, tz)
            e_expr, e_tz = _split_tz(end, tz)
            start_schedule = cron.parse(s_expr, s_tz)
            next_start = start_schedule.next_after(now)
            # Fall back repeats an hour and the start fires again in it: that repeat is not a new
            # window (upstream's rule leaves the rule inactive through the first occurrence).
            wall_now = now.astimezone(s_tz).replace(tzinfo=None)
            while next_start is not None and next_start.astimezone(s_tz).replace(tzinfo=None) <= wall_now:
                next_start = start_schedule.next_after(next_start)
            next_end = cron.parse(e_expr, e_tz).next_after(now)
        except cron.CronError as exc:
            raise CronRuleError(f"failed to parse cron rule {r['name']!r}: {exc}") from None
        if next_end is not None and (next_start is None or next_end <= next_start):
            active.append(CronRule(str(r["name"]), start, end, Resources.parse(r.get("desiredResources")), r))
    if len(active) > 1:
        raise CronRuleError("only one active cron scaling rule is permitted at any given time")
    return active[0] if active else None


def cron_recommend(
    active: CronRule | None,
    status_rule: Mapping[str, Any] | None,
    original: Resources,
    current: Resources,
    allowed: tuple[int, int] | None,
) -> Partial | None:
    """The cron recommender (A3): desired resources while a rule is active, the spec after it ends."""
    if active is None and status_rule is None:
        return None
    if active is None:
        assert status_rule is not None
        msg = f'Cron scaling rule "{status_rule.get("name", "")}" is inactive'
        return Partial(original, False, True, ("RuleInactive", msg))
    prev = Resources.parse(status_rule.get("desiredResources")) if status_rule is not None else None
    if prev is None or prev != active.desired:
        rec, pmsg = process(active.desired, current, allowed)
        msg = f'Cron scaling rule "{active.name}" is active' + (f", {pmsg}" if pmsg else "")
        return Partial(rec, False, True, ("RuleActive", msg), capped=bool(pmsg))
    return Partial(active.desired, True, True)


def merge(results: Iterable[Partial], current: Resources) -> Resources | None:
    """`GetRecommendation` (A3): larger request wins per resource; locking results veto; zero-fill."""
    rs = list(results)
    tq, tl, vq, vl = ZERO_TF, ZERO_TF, ZERO_VR, ZERO_VR
    mt, mv = ZERO_TF, ZERO_VR
    for r in rs:
        x = r.resources
        if not r.has_applied:
            if x.tf_req > tq:
                tq, tl = x.tf_req, x.tf_lim
            if x.vram_req > vq:
                vq, vl = x.vram_req, x.vram_lim
        if r.locking:
            mt, mv = max(mt, x.tf_req), max(mv, x.vram_req)
    rec = Resources(tq, tl, vq, vl)
    if rec.is_zero() or tq < mt or vq < mv:
        return None
    if tq.amount == 0 or tl.amount == 0:
        tq, tl = current.tf_req, current.tf_lim
    if vq.amount == 0 or vl.amount == 0:
        vq, vl = current.vram_req, current.vram_lim
    return Resources(tq, tl, vq, vl)


def max_allowed(state: ClusterState, wv: WorkloadView) -> tuple[int, int] | None:
    """Per-worker request ceiling (A6): min over its GPUs of (free + own share) / own workers.

    Workers without GPUs are skipped (A6; upstream fails the tick), no workers → no cap.
    """
    per_gpu: dict[str, list[WorkerView]] = {}
    for key in wv.workers:
        w = state.workers.get(key)
        if w is None or w.terminating:
            continue
        for g in w.gpu_ids:
            if g in state.gpus:
                per_gpu.setdefault(g, []).append(w)
    if not per_gpu:
        return None
    best: tuple[int, int] | None = None
    for g, ws in per_gpu.items():
        gv = state.gpus[g]
        avail = gv.available
        own_tf = sum(w.request.tflops for w in ws)
        own_v = sum(w.request.vram for w in ws)
        t = int(avail.tflops + own_tf) // len(ws)
        v = int(avail.vram + own_v) // len(ws)
        best = (t, v) if best is None else (min(best[0], t), min(best[1], v))
    return best


# -- external scaler (A11) ----------------------------------------------------------------------


EXTERNAL_SCHEMES = ("http", "https")
"""The only URL schemes an external scaler may use (never file:, ftp:, data: …)."""


def external_url_error(url: str) -> str:
    """Why `url` may not be called ("" when it may): an http(s) URL with a host, nothing else."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        return f"invalid URL ({exc})"
    if parts.scheme.lower() not in EXTERNAL_SCHEMES:
        scheme = f"{parts.scheme}:" if parts.scheme else "(none)"
        return f"scheme {scheme} is not allowed (only http and https)"
    if not parts.hostname:
        return "the URL names no host"
    return ""


def shown_url(url: str) -> str:
    """The URL for messages: any `user:password@` part replaced by `***@`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


@dataclass(frozen=True, slots=True)
class ExternalScalerConfig:
    """`autoScalingConfig.externalScaler`; `interval` is unused (as upstream).

    `error` names the field that makes the scaler unusable (a non-http(s) `url`, an
    `apiKeySecretRef` in another namespace than the workload's): such a scaler is never called and
    its Secret never read, whatever the rest of the configuration says."""

    enable: bool = False
    url: str = ""
    secret: tuple[str, str] | None = None  # apiKeySecretRef (namespace, name)
    initial_delay: timedelta = DEFAULT_DELAY
    error: str = ""

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None, namespace: str) -> ExternalScalerConfig:
        if not raw:
            return cls()
        ref = raw.get("apiKeySecretRef") or None
        secret = None
        error = ""
        if isinstance(ref, Mapping) and ref.get("name"):
            secret = (str(ref.get("namespace") or namespace), str(ref["name"]))
            if secret[0] != namespace:
                error = (
                    f"externalScaler.apiKeySecretRef.namespace: {secret[0]!r} is not the workload's "
                    f"namespace {namespace!r} (the Secret must be in the workload's own namespace)"
                )
        url = str(raw.get("url") or "")
        if url and not error:
            why = external_url_error(url)
            if why:
                error = f"externalScaler.url: {shown_url(url)}: {why}"
        return cls(
            enable=raw.get("enable") is True,
            url=url,
            secret=secret,
            initial_delay=_duration(raw.get("initialDelayPeriod"), DEFAULT_DELAY),
            error=error,
        )


@dataclass(frozen=True, slots=True)
class ExternalRequest:
    """One call to make this tick: `POST url` with `body` (A11), bearer key from `secret` if set."""

    workload: str
    url: str
    body: Mapping[str, Any]
    secret: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class ExternalAnswer:
    """A parsed scaler response, or `error` (why there is none: timeout, status, bad JSON)."""

    need_up: bool = False
    need_down: bool = False
    reason: str = ""
    resources: Resources = field(default_factory=Resources)
    error: str | None = None


def _external_wait(wv: WorkloadView, ext: ExternalScalerConfig, now: datetime) -> str:
    """Why the scaler is not asked yet (its own initial delay by workload age), or ""."""
    created = parse_time(((wv.obj or {}).get("metadata") or {}).get("creationTimestamp"))
    if created is None or now - created >= ext.initial_delay:
        return ""
    return (
        f"Workload created {format_duration(now - created)} ago, less than InitialDelayPeriod "
        f"{format_duration(ext.initial_delay)}, no update performed"
    )


def _current(state: ClusterState, wv: WorkloadView) -> Resources:
    status = (wv.obj or {}).get("status") or {}
    return Resources.parse(status["recommendation"]) if status.get("recommendation") else _original(state, wv)


def external_requests(state: ClusterState, now: datetime) -> list[ExternalRequest]:
    """The external-scaler calls of this tick: enabled workloads whose scaler is enabled and past its
    initial delay, with upstream's body (`currentResources` = current as the percentile recommender
    sees it)."""
    out: list[ExternalRequest] = []
    for key in sorted(state.workloads):
        wv = state.workloads[key]
        asc = effective_autoscaling(state, wv)
        if not AutoConfig.parse(asc.get("autoSetResources")).enable:
            continue
        ext = ExternalScalerConfig.parse(asc.get("externalScaler"), wv.namespace)
        if not ext.enable or not ext.url or ext.error or _external_wait(wv, ext, now):
            continue
        body = {
            "workloadName": wv.name,
            "namespace": wv.namespace,
            "currentResources": _current(state, wv).to_json(),
        }
        out.append(ExternalRequest(key, ext.url, body, ext.secret))
    return out


def external_recommend(
    ans: ExternalAnswer, current: Resources, allowed: tuple[int, int] | None
) -> Partial | None:
    """The external recommender's result from a good answer (A11); no ratio clamp or floor."""
    if not ans.need_up and not ans.need_down:
        return Partial(current, True, condition=("NoScalingNeeded", ans.reason))
    if ans.resources.is_zero():
        return None
    rec, pmsg = process(ans.resources, current, allowed)
    if rec == current:
        return Partial(rec, True)
    msg = f"External scaler recommendation: {ans.reason}" + (f", {pmsg}" if pmsg else "")
    return Partial(rec, False, condition=(ans.reason or "Updated", msg), capped=bool(pmsg))


# -- per-workload result -------------------------------------------------------------------------


@dataclass(slots=True)
class WorkloadRecommendation:
    """What the autoscaler thinks of one workload, and whether (and why not) it would act."""

    key: str
    enabled: bool
    target: str
    qos: str
    reason: Reason
    detail: str = ""
    current: Resources = field(default_factory=Resources)
    original: Resources = field(default_factory=Resources)
    estimates: Estimates | None = None
    recommendation: Resources | None = None
    provisional: bool = False
    history: timedelta = timedelta(0)
    samples: int = 0  # real TFLOPS samples
    vram_samples: int = 0  # real VRAM samples
    cron_rule: CronRule | None = None
    cron_changed: bool = False
    condition: tuple[str, str] | None = None
    would_apply: bool = False
    external: str = ""  # the external scaler's part: "" = none configured
    broken: bool = False  # its inputs are malformed (named in `detail`): a Warning event, no action

    def to_json(self) -> dict[str, Any]:
        est = self.estimates
        out: dict[str, Any] = {
            "workload": self.key,
            "enabled": self.enabled,
            "target": self.target,
            "qos": self.qos,
            "current": self.current.to_json(),
            "usage": None
            if est is None
            else {
                "tflops": {
                    k: round(v, 3) for k, v in zip(("lower", "target", "upper"), est.tf_usage, strict=True)
                },
                "vram": {
                    k: round(v) for k, v in zip(("lower", "target", "upper"), est.vram_usage, strict=True)
                },
            },
            "bounds": None
            if est is None
            else {
                "tflops": dict(zip(("lower", "target", "upper"), (str(tf(x)) for x in est.tf), strict=True)),
                "vram": dict(zip(("lower", "target", "upper"), (str(vr(x)) for x in est.vram), strict=True)),
            },
            "recommendation": self.recommendation.to_json() if self.recommendation else None,
            "provisional": self.provisional,
            "history": format_duration(self.history),
            "samples": self.samples,
            "vramSamples": self.vram_samples,
            "cronRule": self.cron_rule.name if self.cron_rule else None,
            "condition": {"reason": self.condition[0], "message": self.condition[1]}
            if self.condition
            else None,
            "wouldApply": self.would_apply,
            "reason": self.reason,
            "detail": self.detail,
        }
        if self.external:
            out["external"] = self.external
        return out


@dataclass(slots=True)
class AutoscaleResult:
    now: datetime
    workloads: dict[str, WorkloadRecommendation] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "now": rfc3339(self.now),
            "workloads": [self.workloads[k].to_json() for k in sorted(self.workloads)],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"


def _original(state: ClusterState, wv: WorkloadView) -> Resources:
    """The workload's own resources (spec, else its first worker's annotations). A compute percent
    counts as the TFLOPS it is of its GPU (tftui deviation: upstream reads the absent TFLOPS as 0)."""
    if wv.obj is not None:
        res = Resources.parse((wv.obj.get("spec") or {}).get("resources"))
        req_pct, lim_pct = wv.percent
        if req_pct is not None:
            res = replace(res, tf_req=tf(int(wv.request.tflops)))
        if lim_pct is not None:
            res = replace(res, tf_lim=tf(int(wv.limit.tflops)))
        return res
    for key in sorted(wv.workers):
        w = state.workers.get(key)
        if w is not None:
            ann = w.obj.get("metadata", {}).get("annotations") or {}
            return Resources(
                _q(ann.get(keys.TFLOPS_REQUEST), "DecimalSI")
                if ann.get(keys.TFLOPS_REQUEST) or w.percent is None
                else tf(int(w.request.tflops)),
                _q(ann.get(keys.TFLOPS_LIMIT), "DecimalSI")
                if ann.get(keys.TFLOPS_LIMIT) or not ann.get(keys.COMPUTE_PERCENT_LIMIT)
                else tf(int(w.limit.tflops)),
                _q(ann.get(keys.VRAM_REQUEST), "BinarySI"),
                _q(ann.get(keys.VRAM_LIMIT), "BinarySI"),
            )
    return Resources()


def _targeted(rec: Resources, current: Resources, target: str) -> Resources:
    """A4: the untargeted resource keeps its current values."""
    if target == "compute":
        return Resources(rec.tf_req, rec.tf_lim, current.vram_req, current.vram_lim)
    if target == "vram":
        return Resources(current.tf_req, current.tf_lim, rec.vram_req, rec.vram_lim)
    return rec


def _hold_decreases(
    rec: Resources, current: Resources, data: Resources | None, hold: tuple[bool, bool] = (True, True)
) -> Resources:
    """A5: a decrease that comes from provisional usage data (`data`) is held at current, per resource
    (`hold`: TFLOPS, VRAM — the resources whose real samples are not yet enough).

    Cron results are not usage data, so a rule ending still reverts to the spec.
    """
    tq, tl, vq, vl = rec.tf_req, rec.tf_lim, rec.vram_req, rec.vram_lim
    if hold[0] and data is not None and tq < current.tf_req and (tq, tl) == (data.tf_req, data.tf_lim):
        tq, tl = current.tf_req, current.tf_lim
    if hold[1] and data is not None and vq < current.vram_req and (vq, vl) == (data.vram_req, data.vram_lim):
        vq, vl = current.vram_req, current.vram_lim
    return Resources(tq, tl, vq, vl)


def min_samples(cfg: AutoConfig) -> int:
    """Real samples a resource needs before its request may be lowered (A5).

    One per `MIN_SAMPLE_SPACING` of `initialDelayPeriod` (30m → 6), at least one: the history
    must be long enough *and* actually measured, so a feed of NULL rows never looks like a quiet
    workload. The writer's default is one row per worker-GPU per minute, so a healthy feed has
    several times this many.
    """
    return max(1, math.ceil(cfg.initial_delay / MIN_SAMPLE_SPACING))


def _confidence(hist: WorkloadHistory | None, cfg: AutoConfig, now: datetime) -> tuple[list[str], list[str]]:
    """Per resource (TFLOPS, VRAM): why a decrease from its samples is not allowed yet ("" = allowed)."""
    need = min_samples(cfg)
    why: list[str] = []
    for label, n, first in (
        ("TFLOPS", hist.samples if hist else 0, hist.tf_first if hist else math.inf),
        ("VRAM", hist.vram_samples if hist else 0, hist.vram_first if hist else math.inf),
    ):
        span = timedelta(seconds=max(0.0, go_seconds(now) - first)) if n else timedelta(0)
        if n < need:
            why.append(f"{label} {n} real samples < {need} (NULL or unattributable rows are not samples)")
        elif span < cfg.initial_delay:
            why.append(
                f"history {format_duration(span)} < initialDelayPeriod {format_duration(cfg.initial_delay)}"
            )
        else:
            why.append("")
    return why[:1], why[1:]


def recommend_workload(
    state: ClusterState,
    wv: WorkloadView,
    hist: WorkloadHistory | None,
    now: datetime,
    tz: ZoneInfo = CONTROLLER_TZ,
    external: ExternalAnswer | None = None,
) -> WorkloadRecommendation:
    """One workload's recommendation; an enabled workload with an invalid target never acts (A1).

    `external` is this tick's answer of the workload's external scaler (None: not asked)."""
    asc = effective_autoscaling(state, wv)
    cfg = AutoConfig.parse(asc.get("autoSetResources"))
    out = _evaluate(state, wv, hist, now, tz, asc, cfg, external)
    if cfg.enable and not cfg.target_valid and out.reason != "invalid-config":
        out.reason, out.would_apply = "invalid-target", False
        out.detail = f"{keys.AUTOSCALE_TARGET} {cfg.target_raw!r}: must be all, compute or vram"
    return out


def _evaluate(
    state: ClusterState,
    wv: WorkloadView,
    hist: WorkloadHistory | None,
    now: datetime,
    tz: ZoneInfo,
    asc: Mapping[str, Any],
    cfg: AutoConfig,
    external: ExternalAnswer | None = None,
) -> WorkloadRecommendation:
    status = (wv.obj or {}).get("status") or {}
    original = _original(state, wv)
    current = Resources.parse(status["recommendation"]) if status.get("recommendation") else original
    out = WorkloadRecommendation(
        key=wv.key,
        enabled=cfg.enable,
        target=cfg.target if cfg.target_valid else cfg.target_raw,
        qos=wv.qos,
        reason="no-data",
        current=current,
        original=original,
    )
    broken = autoscale_checks.problems(state, wv.key)
    if broken or cfg.errors:
        out.reason, out.detail, out.broken = "invalid-config", "; ".join(broken or cfg.errors), bool(broken)
        return out
    measured = (
        hist is not None and hist.samples > 0 and not hist.tf.is_empty(),
        hist is not None and hist.vram_samples > 0 and not hist.vram.is_empty(),
    )
    has_data = measured[0] or measured[1]
    if hist is not None and has_data:
        out.samples, out.vram_samples = hist.samples, hist.vram_samples
        out.history = timedelta(seconds=max(0.0, go_seconds(now) - hist.first))
    (tf_wait,), (vram_wait,) = _confidence(hist, cfg, now)
    waits = {"all": (tf_wait, vram_wait), "compute": (tf_wait,), "vram": (vram_wait,)}
    out.provisional = not has_data or any(waits.get(cfg.target, (tf_wait, vram_wait)))
    allowed = max_allowed(state, wv)
    results: list[Partial] = []
    pct: Partial | None = None
    if has_data:
        assert hist is not None
        out.estimates = estimate(hist, cfg)
        pct = percentile_recommend(out.estimates, cfg, wv.qos, current, original, allowed, measured)
        if pct is not None:
            results.append(pct)
    try:
        active = active_cron_rule(asc.get("cronScalingRules") or (), now, tz)
    except CronRuleError as exc:
        out.reason, out.detail = "invalid-config", str(exc)
        return out
    cron_part = cron_recommend(active, status.get("activeCronScalingRule"), original, current, allowed)
    out.cron_rule = active
    if cron_part is not None:
        results.append(cron_part)
        out.cron_changed = cron_part.condition is not None
    ext = ExternalScalerConfig.parse(asc.get("externalScaler"), wv.namespace)
    if ext.enable and cfg.enable:
        wait = _external_wait(wv, ext, now)
        if ext.error:  # a scaler that could leak a Secret or read a file: refused, nothing applied
            out.reason, out.detail = "invalid-config", f"external scaler refused: {ext.error}"
            out.external = f"refused: {ext.error}"
            return out
        if wait:
            out.external = f"waiting: {wait}"
        elif external is None:
            out.external = (
                f"not asked ({shown_url(ext.url) or 'no url'}): only the daemon's autoscale loop calls "
                "it (with --external-scaler, never in dry-run)"
            )
        elif external.error is not None:
            out.reason = "external-error"
            out.detail = f"external scaler {shown_url(ext.url)}: {external.error}; no change this tick"
            out.external = f"error: {external.error}"
            return out
        else:
            ext_part = external_recommend(external, current, allowed)
            flags = "up" if external.need_up else "down" if external.need_down else "none"
            out.external = f"answered: scale {flags}" + (f" ({external.reason})" if external.reason else "")
            if ext_part is not None:
                results.append(ext_part)
    out.condition = next(
        (r.condition for r in results if r.condition and r.condition[0] != "RuleActive"), None
    )
    if out.condition is None:
        out.condition = next((r.condition for r in results if r.condition), None)
    if not results:
        out.reason = "no-data" if not has_data else "no-change"
        return out
    merged = merge(results, current)
    if merged is None:
        if cron_part is not None and any(not r.has_applied for r in results):
            out.reason = "scale-down-locked"
        elif pct is not None and pct.condition and pct.condition[0] == "InsideUpdateThreshold":
            out.reason = "below-threshold"
        else:
            out.reason = "no-change"
        return out
    final = _targeted(merged, current, cfg.target) if cfg.target_valid else merged
    out.recommendation = final
    held = _hold_decreases(
        final, current, pct.resources if pct is not None else None, (bool(tf_wait), bool(vram_wait))
    )
    if held == current:
        out.reason = "provisional" if final != current else "no-change"
        if out.reason == "provisional":
            out.detail = "; ".join(dict.fromkeys(w for w in (tf_wait, vram_wait) if w))
        return out
    out.recommendation = held
    if not cfg.enable:
        out.reason = "disabled"
        return out
    out.would_apply = True
    out.reason = "capped" if any(r.capped for r in results) else "applied"
    return out


@without_gc
def recommend(
    state: ClusterState,
    astate: AutoscaleState,
    now: datetime,
    tz: ZoneInfo = CONTROLLER_TZ,
    external: Mapping[str, ExternalAnswer] | None = None,
) -> AutoscaleResult:
    """A recommendation for every workload (A2); `tz` is the controller's zone for cron rules;
    `external` holds this tick's external-scaler answers by workload key."""
    res = AutoscaleResult(now)
    ext = external or {}
    for key in sorted(state.workloads):
        wv = state.workloads[key]
        try:
            res.workloads[key] = recommend_workload(
                state, wv, astate.workloads.get(key), now, tz, ext.get(key)
            )
        except Exception as exc:  # one workload's surprise never stops the others (reported, no action)
            res.workloads[key] = WorkloadRecommendation(
                key=key, enabled=False, target="", qos=wv.qos, reason="invalid-config", broken=True,
                detail=f"TensorFusionWorkload {key}: cannot evaluate autoscaling: {type(exc).__name__}: {exc}",
            )  # fmt: skip
    return res


# -- actions -------------------------------------------------------------------------------------


@dataclass(slots=True)
class AutoscalePlan:
    """Pod annotation patches and events (in `plan`) plus workload status patches (`status`).

    `actions()` is the order to apply them in: the pods first, then the status that records them,
    then the events.
    """

    plan: Plan
    status: list[PatchWorkloadStatus] = field(default_factory=list)
    result: AutoscaleResult | None = None

    def to_json(self) -> dict[str, Any]:
        out = self.plan.to_json()
        out["workloadStatus"] = [s.to_json() for s in self.status]
        return out

    def actions(self) -> list[Action]:
        """Every action: pod patches, status patches, then events (what the runtime applies)."""
        pods = [a for a in self.plan.actions if not isinstance(a, Event)]
        events = [a for a in self.plan.actions if isinstance(a, Event)]
        return [*pods, *self.status, *events]


def _worker_q(ann: Mapping[str, str], key: str) -> Quantity | None:
    raw = ann.get(key)
    if not raw:
        return None
    try:
        return parse_bounded(raw)
    except QuantityError:
        return None


def plan_autoscale(
    state: ClusterState,
    astate: AutoscaleState,
    now: datetime,
    tz: ZoneInfo = CONTROLLER_TZ,
    external: Mapping[str, ExternalAnswer] | None = None,
) -> AutoscalePlan:
    """A6: annotate non-dedicated workers in place, patch status, emit upstream's events."""
    result = recommend(state, astate, now, tz, external)
    out = AutoscalePlan(Plan(now), result=result)
    for key, rec in result.workloads.items():
        wv = state.workloads[key]
        obj = f"TensorFusionWorkload/{key}"
        if rec.enabled and rec.reason == "invalid-target":
            out.plan.actions.append(Event(obj, "Warning", "InvalidAutoscaleTarget", rec.detail))
            continue
        if rec.enabled and rec.external.startswith("refused: "):
            out.plan.actions.append(Event(obj, "Warning", "ExternalScalerRefused", rec.detail))
            continue
        if rec.reason == "invalid-config" and (rec.enabled or rec.broken):
            # a config the autoscaler cannot use: say so on the object (upstream: a log line only)
            out.plan.actions.append(Event(obj, "Warning", "AutoscaleConfigInvalid", rec.detail))
            continue
        if not rec.enabled:
            continue
        fields: dict[str, Any] = {}
        if rec.condition is not None:
            fields["conditions"] = [
                {
                    "type": "ResourceUpdate",
                    "status": "True",
                    "reason": rec.condition[0],
                    "message": rec.condition[1],
                }
            ]
        if rec.would_apply and rec.recommendation is not None:
            new, cur = rec.recommendation, rec.current
            applied = 0
            for wkey in sorted(wv.workers):
                w = state.workers.get(wkey)
                if w is None or w.terminating:
                    continue
                ann = w.obj.get("metadata", {}).get("annotations") or {}
                if ann.get(keys.DEDICATED_GPU) == keys.TRUE:
                    continue
                patch: dict[str, str | None] = {}
                pairs: list[tuple[str, Quantity]] = []
                if rec.target in ("all", "compute") and (
                    ann.get(keys.TFLOPS_REQUEST) or not ann.get(keys.COMPUTE_PERCENT_REQUEST)
                ):
                    pairs += [(keys.TFLOPS_REQUEST, new.tf_req), (keys.TFLOPS_LIMIT, new.tf_lim)]
                if rec.target in ("all", "vram"):
                    pairs += [(keys.VRAM_REQUEST, new.vram_req), (keys.VRAM_LIMIT, new.vram_lim)]
                for k, q in pairs:
                    if _worker_q(ann, k) != q:
                        patch[k] = str(q)
                applied += 1
                if patch:
                    out.plan.actions.append(AnnotatePod(w.namespace, w.name, patch))
            up = new.tf_req > cur.tf_req or new.vram_req > cur.vram_req
            out.plan.actions.append(
                Event(
                    obj,
                    "Normal",
                    "ResourceScaledUp" if up else "ResourceScaledDown",
                    f"Resources scaled {'up' if up else 'down'}: Compute {cur.tf_req}->{new.tf_req}, "
                    f"VRAM {cur.vram_req}->{new.vram_req}",
                )
            )
            fields["recommendation"] = new.to_json()
            fields["appliedRecommendedReplicas"] = applied
        if rec.cron_changed or (rec.would_apply and rec.cron_rule is not None):
            fields["activeCronScalingRule"] = dict(rec.cron_rule.raw) if rec.cron_rule else None
        if fields:
            out.status.append(PatchWorkloadStatus(wv.namespace, wv.name, fields))
    return out


__all__ = [
    "AutoConfig",
    "AutoscalePlan",
    "AutoscaleResult",
    "AutoscaleState",
    "CronRuleError",
    "Estimates",
    "ExternalAnswer",
    "ExternalRequest",
    "ExternalScalerConfig",
    "PatchWorkloadStatus",
    "Resources",
    "WorkloadRecommendation",
    "active_cron_rule",
    "cron_recommend",
    "effective_autoscaling",
    "estimate",
    "external_recommend",
    "external_requests",
    "external_url_error",
    "max_allowed",
    "merge",
    "percentile_recommend",
    "plan_autoscale",
    "process",
    "recommend",
    "shown_url",
]


def gi(q: Quantity | float) -> str:
    """VRAM bytes as Gi for people (`--json` keeps the exact quantity)."""
    n = float(q)
    return f"{n / 2**30:.1f}Gi" if n % 2**30 else f"{int(n) // 2**30}Gi"


def _rq(r: Resources, which: str) -> str:
    return f"{r.tf_req}/{r.tf_lim}" if which == "tf" else f"{gi(r.vram_req)}/{gi(r.vram_lim)}"


def render_text(result: AutoscaleResult) -> str:
    """`tftui recommend` as text: one block per workload, requests → recommendation and why."""
    lines = [f"autoscale recommendations at {rfc3339(result.now)} ({len(result.workloads)} workloads)"]
    for key in sorted(result.workloads):
        w = result.workloads[key]
        state = "on" if w.enabled else "off"
        lines.append("")
        lines.append(
            f"{visible(key)}  autoscale {state}, target {visible(str(w.target))}, qos {visible(str(w.qos))}, "
            f"history {format_duration(w.history)}{' (provisional)' if w.provisional else ''}"
        )
        est = w.estimates
        for which, label in (("tf", "TFLOPS"), ("vram", "VRAM")):
            cur = _rq(w.current, which)
            rec = _rq(w.recommendation, which) if w.recommendation else "-"
            if est is None or not (w.samples if which == "tf" else w.vram_samples):
                used = "no data"
            elif which == "tf":
                used = f"lower/target/upper {est.tf_usage[0]:.1f}/{est.tf_usage[1]:.1f}/{est.tf_usage[2]:.1f}"
            else:
                used = "lower/target/upper " + "/".join(gi(x) for x in est.vram_usage)
            lines.append(f"  {label:<6} req/lim {cur:<22} used {used:<44} -> {rec}")
        verdict = "would apply" if w.would_apply else "not applied"
        lines.append(f"  {verdict}: {visible(w.reason)}{(' - ' + visible(w.detail)) if w.detail else ''}")
        if w.condition:
            lines.append(f"  condition {visible(w.condition[0])}: {visible(w.condition[1])}")
        if w.external:
            lines.append(f"  external scaler: {visible(str(w.external))}")
    return "\n".join(lines) + "\n"
