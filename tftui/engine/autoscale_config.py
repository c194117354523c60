"""Autoscaling's vocabulary and inputs: the reasons and constants, the TFLOPS/VRAM quantities a
workload's resources are read and written in, its effective configuration (the workload's spec
merged with the matching pool rules) and the resources it runs with now.

The bottom of the autoscale modules: every other one reads these, none of them is read here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from fractions import Fraction
from functools import lru_cache
from typing import Any, Final, Literal
from zoneinfo import ZoneInfo

from tftui.engine import autoscale_checks
from tftui.engine.memo import ByIdentity
from tftui.engine.state import ClusterState, WorkerView, WorkloadView
from tftui.model import keys
from tftui.model.duration import DurationError, format_duration, parse_duration
from tftui.model.giveway import paced
from tftui.model.numbers import finite_float_problem
from tftui.model.quantity import Quantity, QuantityError, parse_bounded

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

    @classmethod
    def parse_shared(cls, res: Mapping[str, Any] | None) -> Resources:
        """`parse(res)`, reused while `res` is the very same dict (`ByIdentity`): the autoscale loop
        parses each workload's `spec.resources` and `status.recommendation` again only after they
        changed."""
        return _RESOURCES_OF(res)

    def is_zero(self) -> bool:
        return all(x.amount == 0 for x in (self.tf_req, self.tf_lim, self.vram_req, self.vram_lim))

    def to_json(self) -> dict[str, Any]:
        """Upstream's JSON (compute is a struct, so Go still writes `"compute":"0"`)."""
        return {
            "requests": {"tflops": str(self.tf_req), "compute": "0", "vram": str(self.vram_req)},
            "limits": {"tflops": str(self.tf_lim), "compute": "0", "vram": str(self.vram_lim)},
        }


_RESOURCES_OF: ByIdentity[Mapping[str, Any] | None, Resources] = ByIdentity(Resources.parse, 1 << 17)


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
    parsed = _parsed_duration(value)
    return default if parsed is None else parsed


def _parsed_duration(value: Any) -> timedelta | None:
    """A Go duration's value, or None (not a non-empty string, or not a duration)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_duration(value)
    except DurationError:
        return None


_DURATIONS: Final = (
    ("historyDataPeriod", DEFAULT_PERIOD),
    ("initialDelayPeriod", DEFAULT_DELAY),
    ("interval", DEFAULT_INTERVAL),
)
_FLOATS: Final = (
    "lowerBoundComputePercentile", "targetComputePercentile", "upperBoundComputePercentile",
    "lowerBoundVRAMPercentile", "targetVRAMPercentile", "upperBoundVRAMPercentile", "marginFraction",
    "updateThreshold", "minVRAMResourcesRatio", "maxVRAMResourcesRatio", "minComputeResourcesRatio",
    "maxComputeResourcesRatio",
)  # fmt: skip


def _ignored(asr: Mapping[str, Any]) -> tuple[str, ...]:
    """The values that do not parse, each with the default used instead (as upstream, silently
    there; said here: `historyDataPeriod: 7d` is not a Go duration, and 2h of history is not what
    its author meant). NaN and infinities are config errors (`autoscale_checks`), not notes."""
    notes: list[str] = []
    for name, default in _DURATIONS:
        value = asr.get(name)
        if value is not None and value != "" and _parsed_duration(value) is None:
            notes.append(
                f"{name} {value!r} is not a duration (e.g. 72h, 30m): {format_duration(default)} used"
            )
    for name in _FLOATS:
        value = asr.get(name)
        if value is None or value == "" or finite_float_problem(value) is not None:
            continue
        if math.isnan(_go_float(value, math.nan)):
            notes.append(f"{name} {value!r} is not a number: the default used")
    return tuple(notes)


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
    ignored: tuple[str, ...] = ()  # values that did not parse, and the default used (A3)

    @classmethod
    def parse(cls, asr: Mapping[str, Any] | None) -> AutoConfig:
        """The config of one `autoSetResources` map; memoised by its scalar items (every autoscale
        tick parses every workload's config several times, and nearly all of them are equal)."""
        if not isinstance(asr, Mapping):  # no config: the defaults, one shared (frozen) instance
            return _NO_CONFIG if cls is AutoConfig else cls()
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
            ignored=_ignored(asr),
        )


_NO_CONFIG: Final = AutoConfig()


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


def effective_autoscaling(state: ClusterState, wv: WorkloadView) -> Mapping[str, Any]:
    """The workload's `autoScalingConfig` after upstream's admission order (`_effective`), computed
    once per state and workload view: a plan asks four times per workload (window, histograms,
    recommendation, external scaler), 18,000 workloads at 5,000 nodes. Shared: read it, never change it.
    """
    cache = _effective_cache(state)
    hit = cache.get(wv.key)
    if hit is not None and hit[0] is wv:
        return hit[1]
    carried = autoscale_checks.carried(state, "effective-autoscaling")
    if carried is not None and wv.key in carried[1]:  # a refresh that did not change this workload
        hit = carried[0].get(wv.key)
        if hit is not None and hit[0] is wv:
            cache[wv.key] = hit
            return hit[1]
    names, objs = _effective_inputs(state, wv)
    memo = _EFFECTIVE.get(wv.key)
    if memo is not None and autoscale_checks.same_inputs(memo[0], memo[1], names, objs):
        asc: Mapping[str, Any] = memo[2]
    else:
        asc = _effective(state, wv)
        if len(_EFFECTIVE) >= _EFFECTIVE_MAX:
            _EFFECTIVE.clear()
        _EFFECTIVE[wv.key] = (names, objs, asc)
    cache[wv.key] = (wv, asc)
    return asc


def effective_autoscaling_all(state: ClusterState) -> int:
    """`effective_autoscaling` of every workload of `state`, kept in it; how many could not be
    derived (left to whoever reads them, which then meets the same error). A state derived from
    a basis takes the basis's configuration of every workload it did not change in one pass (a
    lookup per workload through `effective_autoscaling` cost ~3 µs each: 0.12 s a refresh at
    5,000 nodes, for ~600 changed workloads of 37,000)."""
    cache = _effective_cache(state)
    workloads = state.workloads
    if not workloads.keys() - cache.keys():
        return 0  # derived already (a view's build after the refresh's)
    carried = autoscale_checks.carried(state, "effective-autoscaling")
    if carried is not None:
        before, same = carried
        cache.update({k: hit for k in same & before.keys() if (hit := before[k])[0] is workloads[k]})
    failed = 0
    for key in paced(list(workloads.keys() - cache.keys()), 32):  # ≈ 0.13 ms a workload
        try:
            effective_autoscaling(state, workloads[key])
        except Exception:  # one bad object never stops the others
            failed += 1
    return failed


def enabled_all(state: ClusterState) -> Mapping[str, bool]:
    """Workload key → whether its effective configuration enables autoscaling, for every workload
    whose configuration could be derived (`effective_autoscaling_all`; the others are left out:
    `effective_config` meets their error), kept in the state. The console's workloads view reads
    it for each of its rows on every refresh: taken from the basis for the unchanged workloads,
    where a lookup through `effective_config` per workload cost ~3 µs (37,000 of them)."""
    return state.derived("autoscaling-enabled", _enabled_all)


def _enabled_all(state: ClusterState) -> dict[str, bool]:
    effective_autoscaling_all(state)
    cache = _effective_cache(state)
    workloads = state.workloads
    out: dict[str, bool] = {}
    carried = autoscale_checks.carried(state, "autoscaling-enabled")
    if carried is not None:  # the basis's answers, less the workloads changed or gone (in C)
        before, same = carried
        out = dict(before)
        for key in before.keys() - same:
            del out[key]
    for key in workloads.keys() - out.keys():
        hit = cache.get(key)
        if hit is not None and hit[0] is workloads[key]:
            out[key] = _CONFIG_OF(hit[1]).enable
    return out


def effective_config(state: ClusterState, wv: WorkloadView) -> AutoConfig:
    """`AutoConfig.parse` of the workload's effective `autoSetResources`, parsed once per effective
    config (which is reused while its inputs stay the same dicts, and never changed)."""
    return _CONFIG_OF(effective_autoscaling(state, wv))


def _parse_config(asc: Mapping[str, Any]) -> AutoConfig:
    return AutoConfig.parse(asc.get("autoSetResources"))


#: workload key → (names, objects, config) of the last `_effective`: the objects of a
#: `ClusterState` are never changed in place, so a workload whose inputs are the very same dicts as
#: last time (and the same names and problems) has the same configuration, and the autoscale loop
#: merges again only the workloads whose object, first worker, profile or pool template changed.
_EFFECTIVE: dict[str, tuple[tuple[object, ...], tuple[object, ...], Mapping[str, Any]]] = {}
_EFFECTIVE_MAX = 1 << 17
#: effective config → its parse, while it is the very same mapping (`effective_autoscaling` hands
#: out the same one while the workload's inputs stay the same dicts, and it is never changed)
_CONFIG_OF: ByIdentity[Mapping[str, Any], AutoConfig] = ByIdentity(_parse_config, _EFFECTIVE_MAX)


def _effective_inputs(state: ClusterState, wv: WorkloadView) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """What `_effective` reads: names and problems (compared by value) and the parts of the
    objects it reads (by identity: the workload's spec and metadata, its first worker's metadata,
    the profile, the pool's template)."""
    first: WorkerView | None = None
    for k in wv.workers:
        w = state.workers.get(k)
        if w is not None and (first is None or w.name < first.name):
            first = w  # the first by name, as `_effective`'s stable sort
    pod_ann: Mapping[str, Any] = (first.obj.get("metadata", {}).get("annotations") or {}) if first else {}
    spec = (wv.obj or {}).get("spec") or {}
    profile_name = pod_ann.get(keys.WORKLOAD_PROFILE) or spec.get("workloadProfile")
    prof = (
        state.profiles.get(f"{wv.namespace}/{profile_name}")
        if isinstance(profile_name, str) and profile_name
        else None
    )
    pool = state.pools.get(wv.pool) if wv.pool else None
    template = pool.template if pool else None
    tpl = state.templates.get(template) if template else None
    names = (wv.namespace, wv.pool, template, tuple(autoscale_checks.problems(state, wv.key)))
    obj = wv.obj or {}  # the parts `_effective` reads: a write shares the parts it does not change
    first_meta = first.obj.get("metadata") if first is not None else None
    return names, (obj.get("spec"), obj.get("metadata"), first_meta, prof, tpl)


def _effective_cache(state: ClusterState) -> dict[str, tuple[WorkloadView, Mapping[str, Any]]]:
    """The state's workload key → (its view, its effective configuration), filled as they are asked."""
    return state.derived("effective-autoscaling", _no_cache)


def _no_cache(_state: ClusterState) -> dict[str, tuple[WorkloadView, Mapping[str, Any]]]:
    return {}


def _effective(state: ClusterState, wv: WorkloadView) -> dict[str, Any]:
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


def _original(state: ClusterState, wv: WorkloadView) -> Resources:
    """The workload's own resources (spec, else its first worker's annotations). A compute percent
    counts as the TFLOPS it is of its GPU (tftui deviation: upstream reads the absent TFLOPS as 0)."""
    if wv.obj is not None:
        res = Resources.parse_shared((wv.obj.get("spec") or {}).get("resources"))
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
