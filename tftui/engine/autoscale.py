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
  the loop. Status patches carry `status.conditions` whole, the `ResourceUpdate` condition set
  as `meta.SetStatusCondition` does (with its `lastTransitionTime`, which the CRD requires); an
  external scaler's reason that the CRD's pattern refuses becomes `Updated` (upstream sends it, and
  the API server refuses the patch).
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

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from tftui.engine.autoscale_config import (
    CONTROLLER_TZ,
    AutoConfig,
    Resources,
    effective_autoscaling,
    effective_config,
)
from tftui.engine.autoscale_config import DEFAULT_PERIOD as DEFAULT_PERIOD
from tftui.engine.autoscale_config import tf as tf
from tftui.engine.autoscale_config import vr as vr
from tftui.engine.autoscale_cron import CronRuleError, active_cron_rule, cron_recommend
from tftui.engine.autoscale_external import (
    ExternalAnswer,
    ExternalRequest,
    ExternalScalerConfig,
    external_recommend,
    external_requests,
    external_url_error,
    shown_url,
)
from tftui.engine.autoscale_recommend import AutoscaleResult, WorkloadRecommendation, recommend
from tftui.engine.autoscale_recommenders import (
    Estimates,
    estimate,
    max_allowed,
    merge,
    percentile_recommend,
    process,
)
from tftui.engine.autoscale_recommenders import Partial as Partial
from tftui.engine.autoscale_usage import AutoscaleState
from tftui.engine.autoscale_usage import WorkloadHistory as WorkloadHistory
from tftui.engine.histogram import TFLOPS_OPTIONS as TFLOPS_OPTIONS
from tftui.engine.plan import Action, AnnotatePod, Event, PatchWorkloadStatus, Plan, rfc3339
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.model.duration import format_duration
from tftui.model.plaintext import visible
from tftui.model.quantity import Quantity, QuantityError, parse_bounded

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


#: metav1.Condition's `reason` as the CRD's schema takes it (the API server refuses anything else).
_REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
_MAX_REASON, _MAX_MESSAGE = 1024, 32768


def _stored_conditions(workload: Mapping[str, Any] | None) -> Any:
    status = (workload or {}).get("status")
    return status.get("conditions") if isinstance(status, Mapping) else None


def with_resource_update(
    workload: Mapping[str, Any] | None, reason: str, message: str, now: datetime
) -> list[dict[str, Any]]:
    """The workload's `status.conditions` with its `ResourceUpdate` condition set as upstream's
    `meta.SetStatusCondition` sets it: the other conditions kept (a merge patch replaces the whole
    list), `lastTransitionTime` kept unless the status changes, and every field the CRD requires.
    A reason the schema would refuse (an external scaler's free text) becomes `Updated`, its text
    kept in the message: upstream sends it as it is, and the API server refuses the whole patch."""
    if not _REASON.fullmatch(reason) or len(reason) > _MAX_REASON:
        message = f"{reason}: {message}" if message else reason
        reason = "Updated"
    message = message[:_MAX_MESSAGE]
    existing = _stored_conditions(workload)
    kept = [dict(c) for c in existing if isinstance(c, Mapping)] if isinstance(existing, list) else []
    for cond in kept:
        if cond.get("type") == "ResourceUpdate":
            if cond.get("status") != "True" or not cond.get("lastTransitionTime"):
                cond["lastTransitionTime"] = rfc3339(now)
            cond.update(status="True", reason=reason, message=message)
            return kept
    new = {"type": "ResourceUpdate", "status": "True", "lastTransitionTime": rfc3339(now)}
    return [*kept, {**new, "reason": reason, "message": message}]


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
            conditions = with_resource_update(wv.obj, *rec.condition, now)
            if conditions != _stored_conditions(wv.obj):
                # only a change is written (upstream too): the list is written whole, and a copy
                # read before another condition changed would put that one back
                fields["conditions"] = conditions
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
    "effective_config",
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
