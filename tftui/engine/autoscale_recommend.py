"""The per-workload recommendation: confidence (A5), targets, held decreases, and the merge of the
percentile, cron and external recommenders into one `WorkloadRecommendation` per workload.

What `engine.autoscale.plan_autoscale` turns into actions and what the console shows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tftui.engine import autoscale_checks
from tftui.engine.autoscale_config import (
    CONTROLLER_TZ,
    MIN_SAMPLE_SPACING,
    AutoConfig,
    Reason,
    Resources,
    _original,
    effective_autoscaling,
    effective_config,
    tf,
    vr,
)
from tftui.engine.autoscale_cron import CronRule, CronRuleError, active_cron_rule, cron_recommend
from tftui.engine.autoscale_external import (
    ExternalAnswer,
    ExternalScalerConfig,
    _external_wait,
    external_recommend,
    shown_url,
)
from tftui.engine.autoscale_recommenders import (
    Estimates,
    Partial,
    estimate,
    max_allowed,
    merge,
    percentile_recommend_memo,
)
from tftui.engine.autoscale_usage import AutoscaleState, WorkloadHistory
from tftui.engine.histogram import go_seconds
from tftui.engine.plan import rfc3339
from tftui.engine.state import ClusterState, WorkloadView
from tftui.model import keys
from tftui.model.duration import format_duration
from tftui.model.gcpause import without_gc
from tftui.model.giveway import paced
from tftui.model.jsontext import dumps_indented

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
        return dumps_indented(self.to_json()) + "\n"


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
    cfg = effective_config(state, wv)
    out = _evaluate(state, wv, hist, now, tz, asc, cfg, external)
    if cfg.enable and not cfg.target_valid and out.reason != "invalid-config":
        out.reason, out.would_apply = "invalid-target", False
        out.detail = f"{keys.AUTOSCALE_TARGET} {cfg.target_raw!r}: must be all, compute or vram"
    if cfg.ignored:  # said with every recommendation: the defaults decide instead of what was written
        out.detail = "; ".join((out.detail, *cfg.ignored)) if out.detail else "; ".join(cfg.ignored)
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
    current = Resources.parse_shared(status["recommendation"]) if status.get("recommendation") else original
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
    # the per-worker cap (`max_allowed`, a walk over the workload's workers and GPUs) only matters
    # to a recommender raising a request above `current` (`process`): computed for those only
    allowed: tuple[int, int] | None = None
    capped = False

    def cap() -> tuple[int, int] | None:
        nonlocal allowed, capped
        if not capped:
            allowed, capped = max_allowed(state, wv), True
        return allowed

    results: list[Partial] = []
    pct: Partial | None = None
    if has_data:
        assert hist is not None
        out.estimates = estimate(hist, cfg)
        pct = percentile_recommend_memo(out.estimates, cfg, wv.qos, current, original, None, measured)
        if pct is not None and not pct.has_applied and _raises(pct.resources, current):
            # the uncapped answer raises a request: the same call with the cap (a memo hit)
            pct = percentile_recommend_memo(out.estimates, cfg, wv.qos, current, original, cap(), measured)
        if pct is not None:
            results.append(pct)
    try:
        active = active_cron_rule(asc.get("cronScalingRules") or (), now, tz)
    except CronRuleError as exc:
        out.reason, out.detail = "invalid-config", str(exc)
        return out
    status_rule = status.get("activeCronScalingRule")
    # without an active rule the cron recommender caps nothing (it reverts to the spec, or is silent)
    cron_part = cron_recommend(active, status_rule, original, current, cap() if active is not None else None)
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
            ext_part = external_recommend(external, current, cap())
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


def _raises(rec: Resources, current: Resources) -> bool:
    """Whether `rec` raises a request above `current`: the only case `process` caps."""
    return rec.tf_req > current.tf_req or rec.vram_req > current.vram_req


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
    for key in paced(sorted(state.workloads), 64):
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
