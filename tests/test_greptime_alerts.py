"""GreptimeMetrics' alert rules on both metrics stores: each rule on crafted rows (the same rows and
expected alerts as tests/test_sim_step1.py), and the batched replay of `evaluate_history` against the
per-step queries, the simulator's rules and GreptimeDB's reading of times and bounds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.alert_oracle import PerStepAlerts
from tests.greptime_support import VARIANTS, _keyed, _metrics, _same, held, make_db
from tests.pg import (
    CAPACITY,
    EXPECTED_ALERTS,
    GI,
    NOW,
    DictRows,
    alert_rows_data,
    full_rows,
    rounded,
)
from tests.stores import MetricsStore
from tftui.engine.alerts import RULES, evaluate_history, evaluation_times, render
from tftui.model.metrics import ALERT_RULES, AlertResult, NoData, history_by_step
from tftui.sources.greptime import GreptimeMetrics
from tftui.sources.sim.step1 import SimStep1


@dataclasses.dataclass
class Alerts:
    metrics: GreptimeMetrics
    store: MetricsStore
    col: str

    def expected(self, rule: str) -> list[dict[str, Any]] | str:
        """EXPECTED_ALERTS, or the NoData text where the layout lacks the rule's counter column."""
        col = {
            "WorkerTFlopsThrottled": "compute_throttled_cnt",
            "WorkerVRAMSwitchCountIncreasing": "vram_resumed_cnt",
        }
        if rule in col and not self.store.has(self.col, "tf_worker_usage", col[rule]):
            return f"{rule}: column tf_worker_usage.{col[rule]} does not exist (never written)"
        return EXPECTED_ALERTS[rule]


@pytest.fixture(scope="module", params=VARIANTS)
def alerts(request: pytest.FixtureRequest, store: MetricsStore) -> Iterator[Alerts]:
    col = request.param
    with _metrics(make_db(store, f"alerts_{col}", col, alert_rows_data())) as metrics:
        yield Alerts(metrics, store, col)


# -- alerts ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", ALERT_RULES)
def test_alert_rules_fire_on_crafted_rows_only(alerts: Alerts, rule: str) -> None:
    expected = alerts.expected(rule)
    if isinstance(expected, str):
        with pytest.raises(NoData) as info:
            alerts.metrics.alert_rows(rule, NOW)
        assert str(info.value) == expected
    else:
        assert rounded(alerts.metrics.alert_rows(rule, NOW)) == expected


def test_alerts_empty_window_is_no_data(alerts: Alerts) -> None:
    rule = "WorkerTFlopsThrottled"
    if isinstance(alerts.expected(rule), str):  # no counter column: the engine-side GPU rule instead
        rule = "GPUTFlopsFull"
    with pytest.raises(NoData, match="no rows in tf_"):
        alerts.metrics.alert_rows(rule, NOW + timedelta(seconds=60))
    expected = [] if rule == "WorkerTFlopsThrottled" else EXPECTED_ALERTS[rule]
    assert rounded(alerts.metrics.alert_rows(rule, NOW + timedelta(seconds=10))) == expected


# -- batched alert replay ---------------------------------------------------------------------------------

REPLAY_SPAN = timedelta(minutes=20)


def replay_rows(offset: timedelta = timedelta(0)) -> dict[str, list[dict[str, Any]]]:
    """25 minutes before NOW (+ `offset`) shaped to corner the batched replay.

    Samples fall exactly on window edges (every 15/30 s against 15/30/60 s…10 min windows), plus
    off-grid ones; every table has a gap (windows with no rows: NoData between evaluations); values
    sit on thresholds (allocation 95 % = 5 % left, not < 5; compute 97 %, temperature 90 °C,
    compute 1 % for IdleGPU: not above/below); the throttle counter is 0 for a while (sentinel
    NoData per window); g1 reports from two pools and n1 from two pools (duplicate fingerprints in
    one evaluation); a tf_worker_usage row has a NULL node; n3 never has a worker (EmptyGPU); n4's
    one worker reports every 10 min on the grid, so some 5 min windows see it only on their edge.
    """
    end = NOW + offset

    def at(seconds: float) -> datetime:
        return end - timedelta(seconds=seconds)

    def gap(seconds: float, lo: float, hi: float) -> bool:
        return lo <= seconds <= hi

    nm: list[dict[str, Any]] = []
    for i in range(0, 25 * 60 + 1, 30):
        if gap(i, 9 * 60 + 10, 12 * 60 - 10):
            continue
        k = i // 30
        nm += [
            {"node": "n1", "pool": "p1", "allocated_tflops_percent": 94.0 if k % 2 else 96.0,
             "allocated_vram_percent": 95.0, "ts": at(i)},
            {"node": "n2", "pool": "p1", "allocated_tflops_percent": 91.0 if i > 600 else 85.0,
             "allocated_vram_percent": 99.5 if 300 <= i <= 480 else 60.0, "ts": at(i)},
            {"node": "n3", "pool": "p2", "allocated_tflops_percent": 50.0, "allocated_vram_percent": 50.0,
             "ts": at(i)},
            {"node": "n4", "pool": "p2", "allocated_tflops_percent": 50.0, "allocated_vram_percent": 50.0,
             "ts": at(i)},
        ]  # fmt: skip
        if k % 5 == 0:
            nm.append({"node": "n1", "pool": "p2", "allocated_tflops_percent": 99.0,
                       "allocated_vram_percent": 92.0, "ts": at(i + 7.5)})  # fmt: skip
    gu: list[dict[str, Any]] = []
    for i in range(0, 25 * 60 + 1, 15):
        if gap(i, 4 * 60 + 5, 6 * 60 - 5):
            continue
        k = i // 15
        hot = 97.0 if k % 3 == 0 else 99.0
        gu += [
            {"node": "n1", "pool": "p1", "uuid": "g1", "compute_percentage": hot, "memory_percentage": hot,
             "memory_bytes": 70 * GI, "temperature": 90.0 if k % 2 else 91.0, "ts": at(i)},
            {"node": "n2", "pool": "p1", "uuid": "g2", "compute_percentage": 20.0, "memory_percentage": 97.0,
             "memory_bytes": 8 * GI, "temperature": 60.0, "ts": at(i)},
            {"node": "n3", "pool": "p2", "uuid": "g3", "compute_percentage": 0.5 if i < 900 else 3.0,
             "memory_percentage": 2.0, "memory_bytes": GI, "temperature": 40.0, "ts": at(i)},
            {"node": "n3", "pool": "p2", "uuid": "g4", "compute_percentage": 1.0, "memory_percentage": 0.0,
             "memory_bytes": 0, "temperature": 40.0, "ts": at(i)},
        ]  # fmt: skip
        if k % 4 == 1:
            gu.append({"node": "n1", "pool": "p9", "uuid": "g1", "compute_percentage": 98.0,
                       "memory_percentage": 98.0, "memory_bytes": 70 * GI, "temperature": 95.0,
                       "ts": at(i + 3.25)})  # fmt: skip
    wu: list[dict[str, Any]] = []
    for i in range(0, 25 * 60 + 1, 15):
        if gap(i, 7 * 60 + 5, 8 * 60 - 5):
            continue
        k = i // 15
        throttled = 0 if i < 3 * 60 else (25 * 60 - i) // 45  # restarted 3 min ago
        wu += [
            {"workload": "wl", "worker": "A", "pod_name": "pod-A", "namespace": "ns", "pool": "p1", "node": "n1",
             "uuid": "g1", "compute_percentage": 10.0, "memory_bytes": GI, "memory_percentage": 10.0,
             "compute_tflops": 0.0, "compute_throttled_cnt": throttled, "vram_resumed_cnt": k // 7,
             "ts": at(i)},
            {"workload": "wl", "worker": "B", "pod_name": "pod-B", "namespace": "ns", "pool": "p1",
             "node": "n2" if i < 20 * 60 else None, "uuid": "g2", "compute_percentage": 10.0,
             "memory_bytes": GI, "memory_percentage": 10.0, "compute_tflops": 0.0,
             "compute_throttled_cnt": 0, "vram_resumed_cnt": 0, "ts": at(i)},
        ]  # fmt: skip
    wu += [
        {"workload": "wl", "worker": "C", "pod_name": "pod-C", "namespace": "ns", "pool": "p2", "node": "n4",
         "uuid": "g5", "compute_percentage": 10.0, "memory_bytes": GI, "memory_percentage": 10.0,
         "compute_tflops": 0.0, "compute_throttled_cnt": 0, "vram_resumed_cnt": 0, "ts": at(i)}
        for i in range(0, 25 * 60 + 1, 600)
    ]  # fmt: skip
    sm = [
        {"pool": "p1", "total_allocation_fail_cnt": i // 100, "ts": at(i)}
        for i in range(0, 25 * 60 + 1, 20)
        if not gap(i, 2 * 60 + 5, 3 * 60 - 5)
    ]
    return {
        "tf_node_metrics": full_rows("tf_node_metrics", nm),
        "tf_gpu_usage": full_rows("tf_gpu_usage", gu),
        "tf_worker_usage": full_rows("tf_worker_usage", wu),
        "tf_system_metrics": full_rows("tf_system_metrics", sm),
    }


OFFSETS = {"ts": timedelta(0), "greptime_timestamp": timedelta(milliseconds=123)}


@dataclasses.dataclass
class Replay:
    metrics: GreptimeMetrics
    offset: timedelta
    store: MetricsStore
    col: str

    def __iter__(self) -> Iterator[Any]:
        return iter((self.metrics, self.offset))

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        """The rows as the store holds them (without the columns its layout lacks)."""
        return held(self.store, self.col, replay_rows(self.offset))


@pytest.fixture(scope="module", params=VARIANTS)
def replay(request: pytest.FixtureRequest, store: MetricsStore) -> Iterator[Replay]:
    """`replay_rows` in each variant; the second one off the whole second (`now` and rows .123 s)."""
    col = request.param
    with _metrics(make_db(store, f"replay_{col}", col, replay_rows(OFFSETS[col]))) as metrics:
        yield Replay(metrics, OFFSETS[col], store, col)


def _results(results: list[AlertResult]) -> list[Any]:
    return [("NoData", str(r)) if isinstance(r, NoData) else rounded(r) for r in results]


def test_batched_replay_equals_the_per_step_queries(replay: Replay) -> None:
    metrics, offset = replay
    oracle = PerStepAlerts(metrics)
    gaps = firing = duplicates = 0
    for now in (NOW + offset, NOW + offset - timedelta(minutes=3, seconds=15)):
        grid = {rule.name: evaluation_times(rule, now, REPLAY_SPAN) for rule in RULES}
        together = metrics.alert_histories(grid)  # rules of one table and interval share queries
        for rule in RULES:
            times = grid[rule.name]
            if isinstance(together[rule.name], NoData):  # a column the layout lacks: nothing to replay
                with pytest.raises(NoData):
                    metrics.alert_history(rule.name, times)
                continue
            got = metrics.alert_history(rule.name, times)  # the rule alone
            expected = [r for t in times for r in history_by_step(oracle.alert_rows, rule.name, [t])]
            if isinstance(expected[-1], NoData):  # not evaluable now: the replay is skipped
                expected = [expected[-1]] * len(times)
            assert _results(got) == _results(expected), (rule.name, now)
            assert _results(_listed(together[rule.name])) == _results(expected), (rule.name, now)
            gaps += sum(isinstance(r, NoData) for r in got[:-1])
            for r in got:
                if not isinstance(r, NoData):
                    firing += len(r)
                    duplicates += len(r) - len({render(rule.instance, x) for x in r})
    assert gaps > 20 and firing > 200 and duplicates > 10  # the data does corner the replay


def test_batched_replay_gives_the_same_alerts(replay: Replay) -> None:
    metrics, offset = replay
    now = NOW + offset
    batched = evaluate_history(metrics, RULES, now=now, span=REPLAY_SPAN)
    per_step = evaluate_history(PerStepAlerts(metrics), RULES, now=now, span=REPLAY_SPAN)
    sim = evaluate_history(SimStep1(DictRows(replay.rows())), RULES, now=now, span=REPLAY_SPAN)
    _same(batched, per_step)
    _same(batched, sim)
    states = {s.rule: s.state for s in batched.statuses}
    assert states["WorkerTFlopsThrottled"] == "no-data"  # counter 0 all through the last window
    assert {a.rule for a in batched.firing} >= {
        "GPUTFlopsFull", "GPUVRAMFull", "GPUTemperatureHigh", "NodeTFlopsAllocationWarning", "EmptyGPU",
    }  # fmt: skip
    assert any(t.kind == "resolved" for t in batched.transitions)
    assert len(batched.transitions) > 5


def test_batched_replay_costs_a_few_queries_per_rule(replay: Replay) -> None:
    metrics, offset = replay
    calls: list[str] = []
    run = metrics._run

    def counted(query: Any, params: Any, doing: str, table: str) -> Any:
        calls.append(doing)
        return run(query, params, doing, table)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(metrics, "_run", counted)
        for span in (timedelta(minutes=5), REPLAY_SPAN):
            calls.clear()
            evaluate_history(metrics, RULES, now=NOW + offset, span=span)
            # per family (table × interval): a probe of the last window, counts per step, one rows
            # query per set of group keys (EmptyGPU: + busy nodes); only the probe when no data now
            counters = replay.store.has(replay.col, "tf_worker_usage", "compute_throttled_cnt")
            families = {  # without the counter columns (line protocol) those rules read nothing
                "worker_usage@15s": 1
                if counters
                else 0,  # WorkerTFlopsThrottled: counter 0 in the last window
                "worker_usage@2m": 3 if counters else 0,
                "system_metrics@30s": 3,
                "gpu_usage@30s": 3,  # GPUVRAMFull, GPUTFlopsFull, GPUTemperatureHigh: one rows query
                "node_metrics@1m": 4,  # 7 rules: one rows query per node, one per pool
                "node_metrics@5m": 4,  # EmptyGPU
                "gpu_usage@10m": 3,  # IdleGPU
            }
            assert len(calls) == sum(families.values()), span
    oracle = PerStepAlerts(metrics)
    evaluate_history(oracle, RULES, now=NOW + offset, span=REPLAY_SPAN)
    assert oracle.queries > 500  # what the replay used to cost over 20 min (× 3 per hour)


def _either(result: list[AlertResult] | NoData) -> Any:
    """A rule's results, or the reason it has none at all (its table or column is absent)."""
    return ("absent", str(result)) if isinstance(result, NoData) else _results(result)


def _listed(result: list[AlertResult] | NoData) -> list[AlertResult]:
    """A rule's results from `alert_histories`: a list (NoData as a whole means an absent table)."""
    assert not isinstance(result, NoData), result
    return result


def test_rules_asked_together_get_their_own_rows(alerts: Alerts, replay: Replay) -> None:
    """One instant each: rules of one table with other intervals, keys or filters are not mixed up."""
    got = alerts.metrics.alert_histories({rule: [NOW] for rule in ALERT_RULES})
    for rule in ALERT_RULES:
        expected = alerts.expected(rule)
        if isinstance(expected, str):
            assert isinstance(got[rule], NoData) and str(got[rule]) == expected
        else:
            assert _results(_listed(got[rule])) == [expected], rule
    metrics, offset = replay
    for back in (0, 5 * 60, 10 * 60):
        now = NOW + offset - timedelta(seconds=back)
        together = metrics.alert_histories({rule: [now] for rule in ALERT_RULES})
        for rule in ALERT_RULES:
            alone = metrics.alert_histories({rule: [now]})[rule]
            assert _either(together[rule]) == _either(alone), (rule, back)
    # 5 min ago the 30 s GPU windows fall in the data's gap, IdleGPU's 10 min window does not
    gap = metrics.alert_histories(
        {r: [NOW + offset - timedelta(minutes=5)] for r in ("GPUTFlopsFull", "IdleGPU")}
    )
    assert isinstance(_listed(gap["GPUTFlopsFull"])[0], NoData)
    assert not isinstance(_listed(gap["IdleGPU"])[0], NoData)


def test_batched_replay_rejects_times_off_the_grid(alerts: Alerts) -> None:
    with pytest.raises(ValueError, match="must be 0:00:30 apart"):
        alerts.metrics.alert_history("GPUVRAMFull", [NOW - timedelta(seconds=20), NOW])
    assert alerts.metrics.alert_history("GPUVRAMFull", []) == []


# -- GreptimeDB's reading of the SQL ----------------------------------------------------------------


def test_all_fifteen_rules_together_through_evaluate_history(alerts: Alerts) -> None:
    """The whole replay (every family at once, as `tftui report` runs it) gets a result for every rule."""
    history = evaluate_history(alerts.metrics, RULES, now=NOW, span=timedelta(minutes=2))
    states = {s.rule: s.state for s in history.statuses}
    assert list(states) == list(ALERT_RULES)
    for rule in ALERT_RULES:
        expected = alerts.expected(rule)
        if isinstance(expected, str):
            assert states[rule] == "no-data", rule
        else:
            assert states[rule] != "no-data", rule
            last = alerts.metrics.alert_history(
                rule, evaluation_times(RULES[ALERT_RULES.index(rule)], NOW, timedelta(minutes=2))
            )[-1]
            assert not isinstance(last, NoData) and rounded(last) == expected, rule
    seen = {a.rule for a in (*history.firing, *history.pending)}
    assert seen >= {
        "WorkerAllocationFailed",
        "NodeTFlopsAllocationCritical",
        "PoolVRAMAllocationWarning",
        "EmptyGPU",
    }


def test_now_and_bounds_are_read_at_whole_milliseconds(replay: Replay) -> None:
    """A `now` with microseconds reads what the store reads: the windows of `now` floored to the millisecond."""
    metrics, offset = replay
    extra = timedelta(microseconds=456)
    now = NOW + offset + extra
    oracle = SimStep1(DictRows({**replay.rows(), "tf_worker_resources": []}))
    for rule in RULES:
        times = evaluation_times(rule, now, REPLAY_SPAN)
        got = metrics.alert_histories({rule.name: times})[rule.name]
        if isinstance(got, NoData):
            continue
        expected = oracle.alert_history(rule.name, [t - extra for t in times])
        if isinstance(expected[-1], NoData):  # not evaluable now: the replay is skipped
            expected = [expected[-1]] * len(times)
        assert _results(got) == _results(expected), rule.name
    step1 = metrics.step1(timedelta(minutes=20), now, CAPACITY)
    _same(_keyed(dataclasses.replace(step1, now=now - extra)),
          _keyed(oracle.step1(timedelta(minutes=20), now - extra, CAPACITY)))  # fmt: skip
