"""The 15 built-in alert rules (docs/behaviour.md M5, M8) and the state machine that decides what fires.

Upstream runs each rule's SQL every `evaluationInterval` over a look-back of the same length; every
returned row is a candidate, identified by a fingerprint of its labels (alertname, severity,
job=tensor-fusion, instance). A candidate fires once it has been seen in `consecutiveCount`
consecutive evaluations; a miss before that drops it silently; a firing alert that is absent from an
evaluation resolves (`internal/config/rules.go`, `internal/alert/evaluator.go`).

The queries themselves belong to the metrics sources (`Step1Port.alert_history`); this module holds the
rules as data, renders their Go templates, and replays evaluations. Pure: no clock, no I/O of its own
(the port passed to `evaluate_history` does the reading).

Differences from upstream, on purpose:

- A rule whose query has nothing to read (`NoData`: a table or column absent or never written, e.g.
  `compute_throttled_cnt`) is reported as `no-data`, never as healthy (behaviour M5). Like an
  upstream query error, such an evaluation neither advances nor resolves anything.
- Two rows with the same fingerprint in one evaluation count once (upstream increments the counter
  per row, so duplicates fire early).
- Numbers in rendered text are rounded to two decimals (Go prints float64 in full).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Literal, Protocol, runtime_checkable

from tftui.model.giveway import checkpoint, paced
from tftui.model.metrics import ALERT_RULES, AlertResult, AlertRow, NoData

JOB = "tensor-fusion"  # upstream constants.TensorFusionSystemName, the `job` label of every alert
RUNBOOK = "https://tensor-fusion.ai/guide/troubleshooting/handbook"
NO_VALUE = "<no value>"  # what Go's text/template prints for a missing map key

RuleState = Literal["firing", "pending", "ok", "no-data", "not-evaluated"]
TransitionKind = Literal["fired", "resolved"]


@dataclass(frozen=True, slots=True)
class AlertRule:
    """One rule as shipped in the chart's `dynamicConfig.alertRules` (values.yaml 1003-1258)."""

    name: str
    severity: str
    interval: timedelta  # evaluationInterval, also the query's look-back window
    consecutive: int  # consecutiveCount
    threshold: float
    instance: str  # alertTargetInstance template
    summary: str
    description: str
    runbook_url: str | None = None

    @property
    def for_duration(self) -> timedelta:
        """How long a condition must hold before it fires (≈ consecutive × interval)."""
        return self.interval * self.consecutive


_S = timedelta(seconds=1)
_M = timedelta(minutes=1)

_NODE_TF_DESC = "Node {{ .node }} in Pool {{ .pool }} has available TFlops below {{ .Threshold }}%"
_NODE_VRAM_SUMMARY = "Node available VRAM below threshold, remaining {{ .vram_available }}% for {{ .node }}"
_NODE_VRAM_DESC = "Node {{ .node }} in Pool {{ .pool }} has available VRAM below {{ .Threshold }}%"
_POOL_TF_SUMMARY = "Pool available TFlops below threshold, remaining {{ .tflops_available }}%"
_POOL_TF_DESC = "Pool {{ .pool }} has available TFlops below {{ .Threshold }}%"

RULES: tuple[AlertRule, ...] = (
    AlertRule(
        "WorkerTFlopsThrottled", "P1", 15 * _S, 3, 0, "{{ .worker }}-{{ .uuid }}",
        "Worker TFlops Throttled",
        "Worker {{ .worker }} from Node {{ .node }} is using more than {{ .Threshold }}% of its TFlops limit",
        RUNBOOK,
    ),
    AlertRule(
        "WorkerVRAMSwitchCountIncreasing", "P1", 2 * _M, 1, 0, "{{ .worker }}-{{ .uuid }}",
        "Worker VRAM Switch Count Increasing",
        "Worker {{ .worker }} from Node {{ .node }} has switched VRAM {{ .switch_increase }} times in last 2 minutes, GPU may be too hot",
        RUNBOOK,
    ),
    AlertRule(
        "WorkerAllocationFailed", "P1", 30 * _S, 1, 0, "{{ .pool }}",
        "Worker allocation failed for GPU Pool {{ .pool }}",
        "Worker allocation failed, {{ .failure_increase }} times in last 30 seconds for GPU Pool {{ .pool }}",
        RUNBOOK,
    ),
    AlertRule(
        "GPUVRAMFull", "P1", 30 * _S, 2, 97, "{{ .uuid }}",
        "GPU VRAM Full, used {{ .memory_used }}% on {{ .node }} {{ .uuid }}",
        "GPU {{ .uuid }} on Node {{ .node }} in Pool {{ .pool }} has VRAM usage above {{ .Threshold }}% for 2 consecutive 30s, average usage: {{ .memory_used }}%",
    ),
    AlertRule(
        "GPUTFlopsFull", "P1", 30 * _S, 4, 97, "{{ .uuid }}",
        "GPU TFlops Full, used {{ .compute_used }}% on {{ .node }} {{ .uuid }}",
        "GPU {{ .uuid }} on Node {{ .node }} in Pool {{ .pool }} has TFlops usage above {{ .Threshold }}% for 4 consecutive 30s, average usage: {{ .compute_used }}%",
    ),
    AlertRule(
        "GPUTemperatureHigh", "P1", 30 * _S, 3, 90, "{{ .uuid }}",
        "GPU Temperature High, {{ .avg_temperature }}°C on {{ .node }} {{ .uuid }}",
        "GPU {{ .uuid }} from Node {{ .node }} has temperature above {{ .Threshold }}°C, Average temperature: {{ .avg_temperature }}, GPU Pool: {{ .pool }}",
        RUNBOOK,
    ),
    AlertRule(
        "NodeTFlopsAllocationCritical", "P0", _M, 2, 5, "{{ .node }}",
        "Available TFlops below threshold, remaining {{ .tflops_available }}% for {{ .node }}",
        _NODE_TF_DESC,
    ),
    AlertRule(
        "NodeTFlopsAllocationWarning", "P1", _M, 2, 10, "{{ .node }}",
        "Node available TFlops below threshold, remaining {{ .tflops_available }}% for {{ .node }}",
        _NODE_TF_DESC,
    ),
    AlertRule(
        "PoolTotalTFlopsAllocationCritical", "P0", _M, 2, 5, "{{ .pool }}", _POOL_TF_SUMMARY, _POOL_TF_DESC
    ),
    AlertRule(
        "PoolTotalTFlopsAllocationWarning", "P1", _M, 2, 10, "{{ .pool }}", _POOL_TF_SUMMARY, _POOL_TF_DESC
    ),
    AlertRule("NodeVRAMAllocationCritical", "P1", _M, 2, 5, "{{ .node }}", _NODE_VRAM_SUMMARY, _NODE_VRAM_DESC),
    AlertRule("NodeVRAMAllocationWarning", "P1", _M, 2, 10, "{{ .node }}", _NODE_VRAM_SUMMARY, _NODE_VRAM_DESC),
    AlertRule(
        "PoolVRAMAllocationWarning", "P1", _M, 2, 10, "{{ .pool }}",
        "Pool available VRAM below threshold, remaining {{ .vram_available }}% for {{ .pool }}",
        "Pool {{ .pool }} has available VRAM below {{ .Threshold }}%",
    ),
    AlertRule(
        "EmptyGPU", "P2", 5 * _M, 2, 0, "{{ .node }}",
        "Empty GPU without any workload, Node {{ .node }}",
        "GPU Node {{ .node }} has no workload running, should be decommissioned",
    ),
    AlertRule(
        "IdleGPU", "P2", 10 * _M, 3, 5, "{{ .uuid }}",
        "Idle GPU found: {{ .uuid }} on Node {{ .node }}",
        "GPU {{ .uuid }} on Node {{ .node }} in Pool {{ .pool }} has been idle for 3 consecutive 10m, compute: {{ .compute }}, vram: {{ .vram }}",
    ),
)  # fmt: skip

RULES_BY_NAME: dict[str, AlertRule] = {r.name: r for r in RULES}
assert tuple(RULES_BY_NAME) == ALERT_RULES, "RULES must follow model.metrics.ALERT_RULES"

# -- templates -----------------------------------------------------------------------------------

_FIELD = re.compile(r"\{\{-?\s*\.([A-Za-z_][A-Za-z0-9_]*)\s*-?\}\}")


def format_value(value: Any) -> str:
    """A row value as alert text: integers plain, other numbers to two decimals, None as Go's `<no value>`."""
    if value is None:
        return NO_VALUE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float | Decimal):
        x = float(value)
        if math.isnan(x) or math.isinf(x):
            return str(x)
        if x == int(x) and abs(x) < 1e15:
            return str(int(x))
        text = f"{x:.2f}".rstrip("0").rstrip(".")
        return "0" if text == "-0" else text
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


@functools.lru_cache(maxsize=256)
def _parts(template: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """`template` split once into its leading text and (field, text after it) pairs: the replay
    renders every rule's templates for every row of every evaluation (a regex pass each was most
    of its cost at thousands of nodes)."""
    bits = _FIELD.split(template)  # text, field, text, field, ..., text
    return bits[0], tuple(zip(bits[1::2], bits[2::2], strict=True))


def render(template: str, row: Mapping[str, Any]) -> str:
    """Substitute `{{ .field }}` from `row` (the query's columns plus `Threshold`), as text/template does."""
    head, fields_ = _parts(template)
    if not fields_:
        return head
    out = [head]
    for name, text in fields_:
        out.append(format_value(row.get(name)))
        out.append(text)
    return "".join(out)


def fingerprint(rule: AlertRule, instance: str) -> str:
    """Upstream's fingerprint: FNV-1a 64 over the sorted labels' names and values, as hex."""
    return _fingerprint(rule.name, rule.severity, instance)


@functools.lru_cache(maxsize=1 << 16)
def _fingerprint(name: str, severity: str, instance: str) -> str:
    # the same instances come back at every evaluation of a replay: hash each once
    labels = {"alertname": name, "severity": severity, "job": JOB, "instance": instance}
    h = 0xCBF29CE484222325
    for name in sorted(labels):
        for byte in (name + labels[name]).encode():
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


# -- evaluation ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Alert:
    """One candidate or firing alert of a rule, rendered from the latest row that produced it."""

    rule: str
    severity: str
    instance: str
    fingerprint: str
    summary: str
    description: str
    runbook_url: str | None
    starts_at: datetime  # first evaluation of the current consecutive run
    fired_at: datetime | None  # evaluation at which the run reached consecutiveCount
    count: int  # consecutive evaluations seen so far
    row: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def firing(self) -> bool:
        return self.fired_at is not None


@dataclass(frozen=True, slots=True)
class Transition:
    """An alert that started firing, or a firing one that resolved, at `at`."""

    kind: TransitionKind
    at: datetime
    alert: Alert


@dataclass(frozen=True, slots=True)
class RuleStatus:
    """Where one rule stands after the last evaluation it received."""

    rule: str
    severity: str
    state: RuleState
    firing: int
    pending: int
    last_evaluated: datetime | None
    detail: str = ""  # the NoData reason


@dataclass(slots=True)
class _RuleTrack:
    alerts: dict[str, Alert] = field(default_factory=dict)
    last: datetime | None = None
    no_data: str | None = None  # reason of the last evaluation when it had no data


def _same_row(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equal values of equal types (1, 1.0 and True render differently, and so may 0.0 and -0.0)."""
    if a.keys() != b.keys():
        return False
    for k, x in a.items():
        y = b[k]
        if type(x) is not type(y) or x != y:
            return False
        if type(x) is float and math.copysign(1.0, x) != math.copysign(1.0, y):
            return False
    return True


class AlertEvaluator:
    """Upstream's per-rule consecutive-count state machine, fed one evaluation result at a time."""

    def __init__(self, rules: Sequence[AlertRule] = RULES) -> None:
        self.rules: dict[str, AlertRule] = {r.name: r for r in rules}
        self._tracks: dict[str, _RuleTrack] = {r.name: _RuleTrack() for r in rules}

    def observe(self, rule_name: str, now: datetime, result: Sequence[AlertRow] | NoData) -> list[Transition]:
        """Apply one evaluation of `rule_name` at `now`; return the alerts that fired or resolved."""
        rule = self.rules[rule_name]
        track = self._tracks[rule_name]
        track.last = now
        if isinstance(result, NoData):
            track.no_data = str(result) or "no data"
            return []
        track.no_data = None
        seen: dict[str, Alert] = {}
        out: list[Transition] = []
        for raw in result:
            row = {**raw, "Threshold": rule.threshold}
            instance = render(rule.instance, row)
            fp = fingerprint(rule, instance)
            if fp in seen:
                continue
            prev = track.alerts.get(fp)
            count = (prev.count if prev else 0) + 1
            fired_at = prev.fired_at if prev else None
            if fired_at is None and count >= rule.consecutive:
                fired_at = now
            if prev is not None and _same_row(prev.row, raw):  # the same row renders the same texts
                summary, description = prev.summary, prev.description
            else:
                summary, description = render(rule.summary, row), render(rule.description, row)
            alert = Alert(
                rule=rule.name,
                severity=rule.severity,
                instance=instance,
                fingerprint=fp,
                summary=summary,
                description=description,
                runbook_url=rule.runbook_url,
                starts_at=prev.starts_at if prev else now,
                fired_at=fired_at,
                count=count,
                row=dict(raw),
            )
            seen[fp] = alert
            if fired_at == now and (prev is None or prev.fired_at is None):
                out.append(Transition("fired", now, alert))
        for fp, prev in track.alerts.items():
            if fp not in seen and prev.firing:
                out.append(Transition("resolved", now, prev))
        track.alerts = seen
        return out

    def status(self, rule_name: str) -> RuleStatus:
        rule = self.rules[rule_name]
        track = self._tracks[rule_name]
        firing = sum(1 for a in track.alerts.values() if a.firing)
        pending = len(track.alerts) - firing
        state: RuleState
        if track.last is None:
            state = "not-evaluated"
        elif track.no_data is not None:
            state = "no-data"
        elif firing:
            state = "firing"
        elif pending:
            state = "pending"
        else:
            state = "ok"
        return RuleStatus(rule.name, rule.severity, state, firing, pending, track.last, track.no_data or "")

    def statuses(self) -> list[RuleStatus]:
        return [self.status(name) for name in self.rules]

    def alerts(self, *, firing_only: bool = True) -> list[Alert]:
        """Current alerts in rule order, then by instance."""
        out: list[Alert] = []
        for name in self.rules:
            items = sorted(self._tracks[name].alerts.values(), key=lambda a: a.instance)
            out.extend(a for a in items if a.firing or not firing_only)
        return out


class AlertRowSource(Protocol):
    """What `evaluate_history` reads: `Step1Port.alert_history` (engine code never imports sources)."""

    def alert_history(self, rule: str, times: Sequence[datetime]) -> list[AlertResult]: ...


@runtime_checkable
class AlertBatchSource(Protocol):
    """A source that answers several rules at once (`GreptimeMetrics`: rules reading the same table
    share their queries). Per rule: one result per instant, or NoData when it cannot be evaluated at all.
    """

    def alert_histories(
        self, grid: Mapping[str, Sequence[datetime]]
    ) -> dict[str, list[AlertResult] | NoData]: ...


@dataclass(frozen=True, slots=True)
class AlertHistory:
    """Outcome of replaying every rule over `span` up to `now`."""

    now: datetime
    span: timedelta
    statuses: tuple[RuleStatus, ...]
    firing: tuple[Alert, ...]
    pending: tuple[Alert, ...]
    transitions: tuple[Transition, ...]  # fired/resolved within the span, in time order

    def status(self, rule: str) -> RuleStatus | None:
        return next((s for s in self.statuses if s.rule == rule), None)


def evaluation_times(rule: AlertRule, now: datetime, span: timedelta) -> list[datetime]:
    """Evaluation instants of `rule` in (now − span, now], oldest first, on the rule's interval grid.

    At least `consecutive` evaluations are replayed even when `span` is shorter, so "firing now" is
    always decidable.
    """
    steps = max(int(span / rule.interval), rule.consecutive - 1)
    return [now - rule.interval * k for k in range(steps, -1, -1)]


def evaluate_history(
    port: AlertRowSource, rules: Sequence[AlertRule] = RULES, *, now: datetime, span: timedelta
) -> AlertHistory:
    """Replay each rule's evaluations at its interval over `span` to decide what fires at `now`.

    Each rule's evaluations come from one `alert_history` call (the sources answer it with a few
    queries for the whole span, not one per instant), or all rules' from one `alert_histories`
    call when the port has it. A rule with no data at `now` is reported as `no-data` without
    replaying its history (its column is absent or the store stopped receiving).
    """
    ev = AlertEvaluator(rules)
    transitions: list[Transition] = []
    grid = {rule.name: evaluation_times(rule, now, span) for rule in rules}
    batch = port.alert_histories(grid) if isinstance(port, AlertBatchSource) else None
    for rule in rules:
        checkpoint()
        times = grid[rule.name]
        try:
            results = batch[rule.name] if batch is not None else port.alert_history(rule.name, times)
        except NoData as exc:
            results = exc
        if isinstance(results, NoData):
            ev.observe(rule.name, now, results)
            continue
        if len(results) != len(times):
            raise ValueError(f"{rule.name}: {len(results)} evaluation results for {len(times)} instants")
        if isinstance(results[-1], NoData):
            ev.observe(rule.name, now, results[-1])
            continue
        for t, result in paced(zip(times, results, strict=True), 1):
            transitions.extend(ev.observe(rule.name, t, result))
    checkpoint()
    transitions.sort(key=lambda tr: (tr.at, tr.alert.rule, tr.alert.instance, tr.kind))
    checkpoint()
    return AlertHistory(
        now=now,
        span=span,
        statuses=tuple(ev.statuses()),
        firing=tuple(ev.alerts()),
        pending=tuple(a for a in ev.alerts(firing_only=False) if not a.firing),
        transitions=tuple(transitions),
    )
