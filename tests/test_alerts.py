"""The 15 built-in alert rules as data, their templates, and the consecutive-count state machine.

Expected values are upstream's (chart values.yaml alertRules, M5), the fingerprints
were computed with Go's `hash/fnv` exactly as `internal/config/rules.go` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from tftui.engine.alerts import (
    NO_VALUE,
    RULES,
    RULES_BY_NAME,
    RUNBOOK,
    AlertEvaluator,
    evaluate_history,
    evaluation_times,
    fingerprint,
    format_value,
    render,
)
from tftui.model.metrics import ALERT_RULES, AlertResult, AlertRow, NoData, history_by_step

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
M = timedelta(minutes=1)
GPU = "gpu-3e8a1f52-6b1d-4c2e-9f0a-7d1c00000001"
UID = "0b6f7c7e-1111-4c1a-9d1e-000000000001"

# name, severity, interval, consecutive, threshold, for ≈ (the chart's alertRules)
TABLE = [
    ("WorkerTFlopsThrottled", "P1", 15 * S, 3, 0, 45 * S),
    ("WorkerVRAMSwitchCountIncreasing", "P1", 2 * M, 1, 0, 2 * M),
    ("WorkerAllocationFailed", "P1", 30 * S, 1, 0, 30 * S),
    ("GPUVRAMFull", "P1", 30 * S, 2, 97, M),
    ("GPUTFlopsFull", "P1", 30 * S, 4, 97, 2 * M),
    ("GPUTemperatureHigh", "P1", 30 * S, 3, 90, 90 * S),
    ("NodeTFlopsAllocationCritical", "P0", M, 2, 5, 2 * M),
    ("NodeTFlopsAllocationWarning", "P1", M, 2, 10, 2 * M),
    ("PoolTotalTFlopsAllocationCritical", "P0", M, 2, 5, 2 * M),
    ("PoolTotalTFlopsAllocationWarning", "P1", M, 2, 10, 2 * M),
    ("NodeVRAMAllocationCritical", "P1", M, 2, 5, 2 * M),
    ("NodeVRAMAllocationWarning", "P1", M, 2, 10, 2 * M),
    ("PoolVRAMAllocationWarning", "P1", M, 2, 10, 2 * M),
    ("EmptyGPU", "P2", 5 * M, 2, 0, 10 * M),
    ("IdleGPU", "P2", 10 * M, 3, 5, 30 * M),
]


def test_rules_follow_the_upstream_table_in_order() -> None:
    assert tuple(r.name for r in RULES) == ALERT_RULES
    got = [(r.name, r.severity, r.interval, r.consecutive, r.threshold, r.for_duration) for r in RULES]
    assert got == TABLE
    assert {r.name for r in RULES if r.runbook_url == RUNBOOK} == {
        "WorkerTFlopsThrottled",
        "WorkerVRAMSwitchCountIncreasing",
        "WorkerAllocationFailed",
        "GPUTemperatureHigh",
    }
    assert all(r.runbook_url in (None, RUNBOOK) for r in RULES)


NODE_ROW = {"node": "gpu-a100-1", "pool": "demo-shared"}
GPU_ROW = {**NODE_ROW, "uuid": GPU}
WORKER_ROW = {"workload": "llama3-8b-infer", "worker": UID, "uuid": GPU, "node": "gpu-a100-1"}

# rule → (row, instance, summary, description)
RENDERED: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "WorkerTFlopsThrottled": (
        {**WORKER_ROW, "throttled_increase": 3},
        f"{UID}-{GPU}",
        "Worker TFlops Throttled",
        f"Worker {UID} from Node gpu-a100-1 is using more than 0% of its TFlops limit",
    ),
    "WorkerVRAMSwitchCountIncreasing": (
        {**WORKER_ROW, "switch_increase": 2},
        f"{UID}-{GPU}",
        "Worker VRAM Switch Count Increasing",
        f"Worker {UID} from Node gpu-a100-1 has switched VRAM 2 times in last 2 minutes, GPU may be too hot",
    ),
    "WorkerAllocationFailed": (
        {"pool": "demo-shared", "failure_increase": 4},
        "demo-shared",
        "Worker allocation failed for GPU Pool demo-shared",
        "Worker allocation failed, 4 times in last 30 seconds for GPU Pool demo-shared",
    ),
    "GPUVRAMFull": (
        {**GPU_ROW, "memory_used": 98.12345},
        GPU,
        f"GPU VRAM Full, used 98.12% on gpu-a100-1 {GPU}",
        f"GPU {GPU} on Node gpu-a100-1 in Pool demo-shared has VRAM usage above 97% for 2 consecutive 30s, "
        "average usage: 98.12%",
    ),
    "GPUTFlopsFull": (
        {**GPU_ROW, "compute_used": 99.5},
        GPU,
        f"GPU TFlops Full, used 99.5% on gpu-a100-1 {GPU}",
        f"GPU {GPU} on Node gpu-a100-1 in Pool demo-shared has TFlops usage above 97% for 4 consecutive 30s, "
        "average usage: 99.5%",
    ),
    "GPUTemperatureHigh": (
        {**GPU_ROW, "avg_temperature": 91.0},
        GPU,
        f"GPU Temperature High, 91°C on gpu-a100-1 {GPU}",
        f"GPU {GPU} from Node gpu-a100-1 has temperature above 90°C, Average temperature: 91, GPU Pool: demo-shared",
    ),
    "NodeTFlopsAllocationCritical": (
        {**NODE_ROW, "tflops_available": 4.25},
        "gpu-a100-1",
        "Available TFlops below threshold, remaining 4.25% for gpu-a100-1",
        "Node gpu-a100-1 in Pool demo-shared has available TFlops below 5%",
    ),
    "NodeTFlopsAllocationWarning": (
        {**NODE_ROW, "tflops_available": 8.65},
        "gpu-a100-1",
        "Node available TFlops below threshold, remaining 8.65% for gpu-a100-1",
        "Node gpu-a100-1 in Pool demo-shared has available TFlops below 10%",
    ),
    "PoolTotalTFlopsAllocationCritical": (
        {"pool": "demo-shared", "tflops_available": 3.0},
        "demo-shared",
        "Pool available TFlops below threshold, remaining 3%",
        "Pool demo-shared has available TFlops below 5%",
    ),
    "PoolTotalTFlopsAllocationWarning": (
        {"pool": "demo-shared", "tflops_available": 9.999},
        "demo-shared",
        "Pool available TFlops below threshold, remaining 10%",
        "Pool demo-shared has available TFlops below 10%",
    ),
    "NodeVRAMAllocationCritical": (
        {**NODE_ROW, "vram_available": 2.5},
        "gpu-a100-1",
        "Node available VRAM below threshold, remaining 2.5% for gpu-a100-1",
        "Node gpu-a100-1 in Pool demo-shared has available VRAM below 5%",
    ),
    "NodeVRAMAllocationWarning": (
        {**NODE_ROW, "vram_available": 7.0},
        "gpu-a100-1",
        "Node available VRAM below threshold, remaining 7% for gpu-a100-1",
        "Node gpu-a100-1 in Pool demo-shared has available VRAM below 10%",
    ),
    "PoolVRAMAllocationWarning": (
        {"pool": "demo-shared", "vram_available": Decimal("6.50")},
        "demo-shared",
        "Pool available VRAM below threshold, remaining 6.5% for demo-shared",
        "Pool demo-shared has available VRAM below 10%",
    ),
    "EmptyGPU": (
        {"node": "gpu-a100-2"},
        "gpu-a100-2",
        "Empty GPU without any workload, Node gpu-a100-2",
        "GPU Node gpu-a100-2 has no workload running, should be decommissioned",
    ),
    "IdleGPU": (
        {**GPU_ROW, "compute": 0.25, "vram": 0.0},
        GPU,
        f"Idle GPU found: {GPU} on Node gpu-a100-1",
        f"GPU {GPU} on Node gpu-a100-1 in Pool demo-shared has been idle for 3 consecutive 10m, compute: 0.25, vram: 0",
    ),
}


@pytest.mark.parametrize("name", ALERT_RULES)
def test_every_rule_renders_its_templates(name: str) -> None:
    rule = RULES_BY_NAME[name]
    row, instance, summary, description = RENDERED[name]
    ev = AlertEvaluator()
    for i in range(rule.consecutive):
        ev.observe(name, NOW + rule.interval * i, [row])
    (alert,) = ev.alerts()
    assert (alert.instance, alert.summary, alert.description) == (instance, summary, description)
    assert alert.runbook_url == rule.runbook_url
    assert alert.fingerprint == fingerprint(rule, instance)


def test_numbers_and_missing_columns_render_sensibly() -> None:
    assert [format_value(v) for v in (97.53333333, 5.0, 3, Decimal("1.50"), -0.001, None, True, "x")] == [
        "97.53",
        "5",
        "3",
        "1.5",
        "0",
        NO_VALUE,
        "true",
        "x",
    ]
    assert render("a {{ .x }} b {{.y}} c {{ .missing }}", {"x": 1.234, "y": "z"}) == "a 1.23 b z c <no value>"


def test_fingerprint_is_upstreams_fnv64a_of_the_sorted_labels() -> None:
    # computed with Go: fnv.New64a over label+value in sorted label order, fmt "%x"
    assert fingerprint(RULES_BY_NAME["IdleGPU"], GPU) == "7e7eb80d65a7b230"
    assert fingerprint(RULES_BY_NAME["WorkerTFlopsThrottled"], f"{UID}-{GPU}") == "25b6cf0f9f513153"


def row(instance: str) -> AlertRow:
    return {"workload": "w", "worker": instance, "uuid": "g", "node": "n", "throttled_increase": 1}


def kinds(transitions: list[Any]) -> list[tuple[str, str]]:
    return [(t.kind, t.alert.instance) for t in transitions]


def test_fires_after_consecutive_count_a_miss_before_resets_and_absence_resolves() -> None:
    ev = AlertEvaluator()
    name = "WorkerTFlopsThrottled"  # 15s × 3
    t = [NOW + 15 * S * i for i in range(10)]
    assert ev.observe(name, t[0], [row("a")]) == []
    assert ev.observe(name, t[1], [row("a")]) == []
    assert ev.status(name).state == "pending" and ev.status(name).pending == 1
    assert ev.observe(name, t[2], []) == []  # a miss before the count: dropped silently
    assert ev.status(name).state == "ok"
    assert ev.observe(name, t[3], [row("a")]) == []
    assert ev.observe(name, t[4], [row("a")]) == []
    fired = ev.observe(name, t[5], [row("a"), row("b")])
    assert kinds(fired) == [("fired", "a-g")]
    (alert,) = ev.alerts()
    assert (alert.starts_at, alert.fired_at, alert.count) == (t[3], t[5], 3)
    assert ev.observe(name, t[6], [row("a")]) == []  # still firing: no new transition; b dropped
    assert ev.status(name).state == "firing" and ev.status(name).pending == 0
    resolved = ev.observe(name, t[7], [row("b")])
    assert kinds(resolved) == [("resolved", "a-g")]
    assert ev.alerts() == [] and ev.status(name).pending == 1


def test_consecutive_count_one_fires_at_once_and_duplicate_rows_count_once() -> None:
    ev = AlertEvaluator()
    assert kinds(ev.observe("WorkerAllocationFailed", NOW, [{"pool": "p", "failure_increase": 2}])) == [
        ("fired", "p")
    ]
    ev2 = AlertEvaluator()
    ev2.observe("EmptyGPU", NOW, [{"node": "n"}, {"node": "n"}])  # upstream would count 2 and fire
    assert ev2.status("EmptyGPU").state == "pending"


def test_no_data_is_not_ok_and_leaves_the_state_alone() -> None:
    ev = AlertEvaluator()
    name = "WorkerTFlopsThrottled"
    assert ev.status(name).state == "not-evaluated"
    ev.observe(name, NOW, NoData("column tf_worker_usage.compute_throttled_cnt does not exist"))
    st = ev.status(name)
    assert (st.state, st.detail) == ("no-data", "column tf_worker_usage.compute_throttled_cnt does not exist")
    ev.observe(name, NOW + 15 * S, [row("a")])
    ev.observe(name, NOW + 30 * S, [row("a")])
    ev.observe(name, NOW + 45 * S, NoData("gap"))  # neither a hit nor a miss
    assert ev.status(name).pending == 1
    assert kinds(ev.observe(name, NOW + 60 * S, [row("a")])) == [("fired", "a-g")]
    ev.observe(name, NOW + 75 * S, NoData("gap"))
    assert ev.status(name).state == "no-data" and ev.status(name).firing == 1  # not resolved by no data
    ev.observe(name, NOW + 90 * S, [])
    assert ev.status(name).state == "ok"


class FakePort:
    """`alert_history` from a function of (rule, time); records every instant asked and every call."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[str, datetime]] = []
        self.histories: list[str] = []

    def alert_history(self, rule: str, times: Sequence[datetime]) -> list[AlertResult]:
        self.histories.append(rule)
        return history_by_step(self.alert_rows, rule, times)

    def alert_rows(self, rule: str, now: datetime) -> list[AlertRow]:
        self.calls.append((rule, now))
        result = self.answer(rule, now)
        if isinstance(result, NoData):
            raise result
        return list(result)


def test_evaluation_times_cover_the_span_and_at_least_the_consecutive_count() -> None:
    idle = RULES_BY_NAME["IdleGPU"]
    times = evaluation_times(idle, NOW, timedelta(hours=1))
    assert times[0] == NOW - timedelta(hours=1) and times[-1] == NOW and len(times) == 7
    assert evaluation_times(idle, NOW, timedelta(minutes=5)) == [NOW - 20 * M, NOW - 10 * M, NOW]


def test_history_decides_firing_pending_resolved_and_no_data() -> None:
    def answer(rule: str, t: datetime) -> list[AlertRow] | NoData:
        if rule == "WorkerTFlopsThrottled":
            return NoData("compute_throttled_cnt is never written")
        if rule == "IdleGPU" and t >= NOW - 20 * M:
            return [{"node": "n1", "pool": "p", "uuid": "g1", "compute": 0.1, "vram": 0.0}]
        if rule == "EmptyGPU" and t == NOW:  # seen once: pending
            return [{"node": "n2"}]
        if rule == "NodeVRAMAllocationWarning" and NOW - 30 * M <= t <= NOW - 10 * M:
            return [{"node": "n3", "pool": "p", "vram_available": 4.0}]
        return []

    port = FakePort(answer)
    h = evaluate_history(port, now=NOW, span=timedelta(hours=1))
    states = {s.rule: s.state for s in h.statuses}
    assert states["WorkerTFlopsThrottled"] == "no-data"
    assert states["IdleGPU"] == "firing"
    assert states["EmptyGPU"] == "pending"
    assert states["NodeVRAMAllocationWarning"] == "ok"
    assert states["GPUTFlopsFull"] == "ok"
    assert [c for c in port.calls if c[0] == "WorkerTFlopsThrottled"] == [("WorkerTFlopsThrottled", NOW)]
    assert len([c for c in port.calls if c[0] == "GPUTFlopsFull"]) == 121  # every 30 s over 1 h, `now` once
    assert port.histories == list(ALERT_RULES)  # one batched call per rule
    (idle,) = h.firing
    assert (idle.instance, idle.starts_at, idle.fired_at) == ("g1", NOW - 20 * M, NOW)
    assert [a.instance for a in h.pending] == ["n2"]
    assert [(t.kind, t.alert.rule, t.at) for t in h.transitions] == [
        ("fired", "NodeVRAMAllocationWarning", NOW - 29 * M),
        ("resolved", "NodeVRAMAllocationWarning", NOW - 9 * M),
        ("fired", "IdleGPU", NOW),
    ]
    assert h.status("IdleGPU") is not None and h.status("nope") is None
