"""The runtime (journal, actuator, loops) on the embedded cluster that acts.

The centrepiece is a simulated night on the demo: from 02:40 to 05:00 in the dev pool's timezone
(America/New_York), the runtime paces reconciles like upstream, defrag drains its candidates one pod
at a time and compaction releases what it emptied. The node counts before and after are printed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.test_sim_acting import check_consistent, objs_of
from tftui.engine.plan import (
    Action,
    AnnotatePool,
    DeleteGPUNodeClaim,
    EvictPod,
    LabelNode,
    LabelPod,
    Plan,
    rfc3339,
)
from tftui.engine.planning import plan_cluster
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.runtime.actuator import Actuator
from tftui.runtime.journal import Journal, JournalEntry
from tftui.runtime.loops import Runtime
from tftui.sources.sim.acting import PROVISIONER_DELAY, ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW

JSON = dict[str, Any]
MIN = timedelta(minutes=1)
NIGHT_START = datetime(2026, 12, 1, 7, 40, tzinfo=UTC)  # 02:40 EST, before the 03:00 defrag tick
NIGHT_END = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)  # 05:00 EST: the 2h campaign is over
WINDOW = (datetime(2026, 12, 1, 8, 0, tzinfo=UTC), NIGHT_END)
DEV = "demo-dev"


def dev_nodes(sim: ActingSimCluster) -> list[str]:
    return sorted(ClusterState.build(sim.snapshot()).pools[DEV].nodes)


def occurrences(sim: ActingSimCluster) -> Counter[str]:
    """Event reasons counted with their series (a repeat within 5 min is one event, count n)."""
    out: Counter[str] = Counter()
    for e in sim.events():
        out[e["reason"]] += (e.get("series") or {}).get("count", 1)
    return out


# -- journal -------------------------------------------------------------------------------------------


def test_journal_entries_are_validated_and_serialised() -> None:
    with pytest.raises(ValueError):
        JournalEntry(DEFAULT_NOW, "p", "nonsense", "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        JournalEntry(datetime(2026, 1, 1), "p", "event", "x")
    j = Journal(maxlen=3)
    seen: list[JournalEntry] = []
    unsubscribe = j.subscribe(seen.append)
    for i in range(5):
        j.record(DEFAULT_NOW + i * MIN, "demo-dev", "action", f"step {i}", ok=i != 2)
    unsubscribe()
    j.record(DEFAULT_NOW, "", "error", "after")
    assert [e.message for e in j.entries()] == ["step 3", "step 4", "after"]
    assert len(j) == 3 and j.total == 6 and len(seen) == 5
    assert [e.message for e in j.since(4)] == ["step 4", "after"] and j.since(6) == []
    assert [e.message for e in j.since(0)] == ["step 3", "step 4", "after"]
    lines = j.to_json_lines().splitlines()
    assert json.loads(lines[0]) == {
        "ts": "2026-11-30T12:03:00Z",
        "pool": "demo-dev",
        "kind": "action",
        "message": "step 3",
        "ok": True,
    }
    assert len(lines) == 3 and Journal().to_json_lines() == ""
    assert "FAILED" in str(JournalEntry(DEFAULT_NOW, "p", "error", "x", ok=False))


# -- actuator ------------------------------------------------------------------------------------------


def night_plan(sim: ActingSimCluster) -> tuple[ClusterState, Plan, EvictPod]:
    state = ClusterState.build(sim.snapshot())
    plan = plan_cluster(state, sim.now(), pools=[DEV], last_compaction={DEV: sim.now()})
    (evict,) = [a for a in plan.actions if isinstance(a, EvictPod)]
    return state, plan, evict


def test_refused_eviction_applies_evict_refused_instead() -> None:
    """D5: 429 → the step's remaining actions are dropped, the node goes on the evict-skip list."""
    sim = ActingSimCluster(now=WINDOW[0])
    state, plan, evict = night_plan(sim)
    worker = state.workers[f"{evict.namespace}/{evict.name}"]
    node = worker.node or ""
    pdb = next(
        p
        for p in state.pdbs
        if p["metadata"]["namespace"] == evict.namespace
        and p["spec"]["selector"]["matchLabels"][keys.WORKLOAD] == worker.workload
    )
    tighten = {"minAvailable": 99} if "minAvailable" in pdb["spec"] else {"maxUnavailable": 0}
    sim.patch("PodDisruptionBudget", pdb["metadata"]["name"], {"spec": tighten}, namespace=evict.namespace)
    journal = Journal()
    results = Actuator(sim, journal).execute(plan, state)
    by_action = {id(r.action): r for r in results}
    failed = by_action[id(evict)]
    assert (failed.status, failed.code, failed.pool) == ("failed", 429, DEV)
    after = plan.actions[plan.actions.index(evict) + 1 :]
    assert after and all(by_action[id(a)].status == "skipped" for a in after)
    assert all(r.ok for r in results[: plan.actions.index(evict)])
    assert occurrences(sim) == Counter(
        {"DefragStarted": 1, "DefragPodEvictFailed": 1, "DefragNodeEvictSkip": 1, "DefragAbortNode": 1}
    )
    labels = objs_of(sim, "Node")[node]["metadata"]["labels"]
    ann = objs_of(sim, "Node")[node]["metadata"]["annotations"]
    assert labels[keys.DEFRAG_EVICT_SKIP] == "true" and keys.DEFRAG_SOURCE not in labels
    assert (
        "Cannot evict pod" in ann[keys.DEFRAG_EVICT_SKIP_REASON] and ann[keys.DEFRAG_EVICT_SKIP_POOL] == DEV
    )
    pod = objs_of(sim, "Pod")[f"{evict.namespace}/{evict.name}"]
    assert keys.DEFRAG_EVICTED not in pod["metadata"].get("labels", {}) and not pod["metadata"].get(
        "deletionTimestamp"
    )
    errors = [e for e in journal.entries() if e.kind == "error"]
    assert len(errors) == 1 and "(429)" in errors[0].message and not errors[0].ok
    # the next step leaves the node alone
    res = Runtime(sim, clock=sim.clock).tick([DEV]).pools[DEV].defrag
    assert res is not None and any(s.node == node and s.reason == "evict-skip" for s in res.skipped)


def test_other_errors_stop_only_that_pools_actions() -> None:
    sim = ActingSimCluster()
    state = ClusterState.build(sim.snapshot())
    sim.apply(DeleteGPUNodeClaim(state.nodes["dev-4090-03"].claim or ""))
    sim.advance(PROVISIONER_DELAY["Karpenter"])  # the node is gone; `state` still has it
    plan = Plan(DEFAULT_NOW)
    plan.pool(DEV)
    plan.pool("demo-training")
    plan.actions = [
        AnnotatePool(DEV, {"a": "1"}),
        LabelNode("dev-4090-03", {"b": "1"}),
        AnnotatePool("demo-training", {"c": "1"}),
        AnnotatePool(DEV, {"d": "1"}),
    ]
    journal = Journal()
    results = Actuator(sim, journal).execute(plan, state)
    assert [(r.pool, r.status, r.code) for r in results] == [
        (DEV, "applied", None),
        (DEV, "failed", 404),
        ("demo-training", "applied", None),
        (DEV, "skipped", None),
    ]
    pools = objs_of(sim, "GPUPool")
    assert (
        pools[DEV]["metadata"]["annotations"].get("a") == "1"
        and "d" not in pools[DEV]["metadata"]["annotations"]
    )
    assert pools["demo-training"]["metadata"]["annotations"]["c"] == "1"
    assert any("skipped 1 remaining action" in e.message for e in journal.entries())


def test_pod_gone_counts_as_done() -> None:
    """Upstream: an eviction of a pod that no longer exists is a success; its markers went with it."""
    sim = ActingSimCluster()
    plan = Plan(DEFAULT_NOW)
    plan.pool(DEV)
    plan.actions = [EvictPod("research", "gone"), LabelPod("research", "gone", {"x": "1"})]
    results = Actuator(sim, Journal()).execute(plan)
    assert [(r.status, r.note) for r in results] == [("applied", "already gone"), ("applied", "already gone")]


def test_dry_run_actuator_applies_nothing() -> None:
    sim = ActingSimCluster(now=WINDOW[0])
    _, plan, _ = night_plan(sim)
    before, generation = json.dumps(sim.snapshot()), sim.generation
    journal = Journal()
    results = Actuator(sim, journal, dry_run=True).execute(plan)
    assert {r.status for r in results} == {"dry-run"} and len(results) == len(plan.actions)
    assert sim.generation == generation and json.dumps(sim.snapshot()) == before and sim.events() == []
    assert all(e.message.startswith("dry-run: ") for e in journal.entries())
    assert any(e.kind == "event" for e in journal.entries())


# -- loops -----------------------------------------------------------------------------------------------


def test_tick_compacts_once_per_period_and_paces_pools() -> None:
    sim = ActingSimCluster()
    rt = Runtime(sim, clock=sim.clock)
    plan = rt.tick()
    assert rt.last_compaction == dict.fromkeys(
        ("demo-dev", "demo-inference", "demo-isolation", "demo-training"), DEFAULT_NOW
    )
    released = [r.node for r in plan.pools[DEV].compaction.released]  # type: ignore[union-attr]
    assert released == ["dev-4090-03", "dev-4090-04"]
    assert rt.next_reconcile == {
        "demo-dev": DEFAULT_NOW + 5 * MIN,
        "demo-inference": DEFAULT_NOW + 10 * MIN,
        "demo-isolation": DEFAULT_NOW + 10 * MIN,
        "demo-training": DEFAULT_NOW + 30 * MIN,
    }
    assert any(
        e.kind == "compaction" and e.message.startswith("release dev-4090-03") for e in rt.journal.entries()
    )
    sim.advance(MIN)
    assert rt.due_pools() == [] and rt.tick_due() is None and rt.next_due() == DEFAULT_NOW + 5 * MIN
    again = rt.tick()
    assert not any(isinstance(a, DeleteGPUNodeClaim) for a in again.actions)
    assert all(not pp.compaction.due for pp in again.pools.values())  # type: ignore[union-attr]
    with pytest.raises(KeyError):
        rt.tick(["no-such-pool"])


def test_manual_compaction_on_the_demo() -> None:
    """C5: the confirm dialog's preview has no side effects; the key stamps the annotation and runs
    the forced round at once; dev-4090-03/-04 (Karpenter) are gone a minute later."""
    sim = ActingSimCluster()
    rt = Runtime(sim, clock=sim.clock)
    generation = sim.generation
    preview = rt.preview_manual_compaction(DEV)
    assert [r.node for r in preview.pools[DEV].compaction.released] == ["dev-4090-03", "dev-4090-04"]  # type: ignore[union-attr]
    assert sim.generation == generation and len(rt.journal) == 0 and rt.last_compaction == {}
    plan = rt.manual_compaction(DEV)
    assert plan.actions[0] == AnnotatePool(DEV, {keys.MANUAL_COMPACTION: rfc3339(DEFAULT_NOW)})
    assert [a for a in plan.actions[1:] if isinstance(a, DeleteGPUNodeClaim)] == [
        a for a in preview.actions if isinstance(a, DeleteGPUNodeClaim)
    ]
    assert all(r.ok for r in rt.last_results) and rt.last_compaction[DEV] == DEFAULT_NOW
    pool = objs_of(sim, "GPUPool")[DEV]
    assert pool["metadata"]["annotations"][keys.MANUAL_COMPACTION] == "2026-11-30T12:00:00Z"
    assert occurrences(sim)["Compaction"] == 2
    assert {"dev-4090-03", "dev-4090-04"} <= set(dev_nodes(sim))  # being deleted
    sim.advance(PROVISIONER_DELAY["Karpenter"])
    assert not {"dev-4090-03", "dev-4090-04"} & set(dev_nodes(sim))
    assert len(dev_nodes(sim)) == 18
    messages = [e.message for e in rt.journal.entries()]
    assert messages[0] == "manual compaction: running the round now"
    assert any(m.startswith("release dev-4090-04") for m in messages)
    check_consistent(sim)


def test_the_runtime_state_is_reused_while_nothing_changed_and_equals_a_full_build_after() -> None:
    sim = ActingSimCluster()
    rt = Runtime(sim, clock=sim.clock)
    first = rt.state()
    assert rt.state() is first  # the very same objects: not even an incremental pass
    rt.manual_compaction(DEV)  # releases two nodes: claims deleted, nodes draining
    sim.advance(PROVISIONER_DELAY["Karpenter"])
    after = rt.state()
    assert after is not first and after == ClusterState.build(sim.snapshot())
    assert not {"dev-4090-03", "dev-4090-04"} & set(after.nodes)
    assert after.nodes.keys() < first.nodes.keys()


def test_manual_compaction_on_a_live_cluster_only_writes_the_annotation() -> None:
    sim = ActingSimCluster()
    rt = Runtime(sim, clock=sim.clock, embedded=False)
    plan = rt.manual_compaction(DEV)
    assert plan.actions == [AnnotatePool(DEV, {keys.MANUAL_COMPACTION: rfc3339(DEFAULT_NOW)})]
    assert not any(c["metadata"].get("deletionTimestamp") for c in objs_of(sim, "GPUNodeClaim").values())


class PlainPort:
    """A writable cluster without a clock of its own (like a live cluster)."""

    def __init__(self, inner: ActingSimCluster) -> None:
        self.inner = inner

    def describe(self) -> str:
        return "plain"

    def snapshot(self) -> list[JSON]:
        return self.inner.snapshot()

    def apply(self, action: Action) -> None:
        self.inner.apply(action)

    def events(self) -> list[JSON]:
        return self.inner.events()


def test_run_for_needs_a_simulated_cluster() -> None:
    sim = ActingSimCluster()
    rt = Runtime(PlainPort(sim), clock=sim.clock)
    assert rt.embedded is False
    with pytest.raises(TypeError):
        rt.run_for(MIN)


# -- the night -------------------------------------------------------------------------------------------


@dataclass
class Night:
    sim: ActingSimCluster
    runtime: Runtime
    plans: list[Plan]
    before: list[str]
    after: list[str]
    evictions: list[tuple[datetime, str, set[str]]] = field(default_factory=list)  # when, pod, pods then


def run_night(
    *,
    mode: str | None = None,
    dry_run: bool = False,
    start: datetime = NIGHT_START,
    end: datetime = NIGHT_END,
) -> Night:
    sim = ActingSimCluster(now=start)
    if mode is not None:  # the reference page's step 3 before step 5
        sim.patch("SchedulingConfigTemplate", "dev-spread", {"spec": {"placement": {"mode": mode}}})
    before = dev_nodes(sim)
    evictions: list[tuple[datetime, str, set[str]]] = []
    original: Callable[[Action], None] = sim.apply

    def recording_apply(action: Action) -> None:
        if isinstance(action, EvictPod):
            pods = set(objs_of(sim, "Pod"))
            evictions.append((sim.now(), f"{action.namespace}/{action.name}", pods))
        original(action)

    setattr(sim, "apply", recording_apply)  # noqa: B010 - instrument this one instance
    rt = Runtime(sim, clock=sim.clock, dry_run=dry_run)
    plans = rt.run_for(end - start)
    return Night(sim, rt, plans, before, dev_nodes(sim), evictions)


def _evicted_nodes(sim: ActingSimCluster) -> set[str]:
    return {
        e["note"].split(" on node ")[1].split()[0] for e in sim.events() if e["reason"] == "DefragPodEvicted"
    }


def _released_nodes(sim: ActingSimCluster) -> set[str]:
    return {e["note"].split()[1] for e in sim.events() if e["reason"] == "Compaction"}


def _check_night(night: Night) -> None:
    sim, rt = night.sim, night.runtime
    assert sim.now() == NIGHT_END
    # one pod per step, and only after the previously evicted pod is gone (D5)
    assert all(sum(isinstance(a, EvictPod) for a in p.actions) <= 1 for p in night.plans)
    assert night.evictions
    for (_, previous, _), (_, _, pods_then) in zip(night.evictions, night.evictions[1:], strict=False):
        assert previous not in pods_then
    assert all(WINDOW[0] <= t < WINDOW[1] for t, _, _ in night.evictions)
    seen = occurrences(sim)
    assert seen["DefragStarted"] >= 1 and seen["DefragPodEvicted"] == len(night.evictions)
    assert seen["Compaction"] >= 1
    assert seen["DefragBlockedByEvictedPod"] <= len(night.evictions)  # D7: once per wait, not per loop
    # compaction released at least one node that defrag emptied
    assert _evicted_nodes(sim) & _released_nodes(sim)
    assert len(night.after) < len(night.before)
    lines = rt.journal.entries()
    assert any(e.kind == "defrag" and e.message.startswith("evict ") for e in lines)
    assert any(e.kind == "compaction" and e.message.startswith("release ") for e in lines)
    assert any(e.kind == "event" and "DefragPodEvicted" in e.message for e in lines)
    assert not [e for e in lines if not e.ok]
    st = check_consistent(sim)
    assert all(w.node for w in st.workers.values())  # every replacement found a place


def _report(night: Night, label: str, capsys: pytest.CaptureFixture[str]) -> None:
    released = sorted(set(night.before) - set(night.after))
    with capsys.disabled():
        print(
            f"\n[{label}] dev pool nodes {len(night.before)} → {len(night.after)}; "
            f"{len(night.evictions)} pods evicted one at a time from {sorted(_evicted_nodes(night.sim))}; "
            f"released {released}; {len(night.plans)} reconciles"
        )


def test_a_night_on_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo as generated: the dev pool schedules LowLoadFirst, so replacements spread back onto
    the emptiest nodes, often the node just drained, so few drained nodes stay empty."""
    night = run_night()
    _report(night, "demo, LowLoadFirst", capsys)
    _check_night(night)
    assert {"dev-4090-03", "dev-4090-04"} <= set(night.before) - set(night.after)


def test_a_night_after_switching_to_compact_first(capsys: pytest.CaptureFixture[str]) -> None:
    """The reference page's order: CompactFirst (step 3), then defrag (step 5) — every drained node
    is released and the pool shrinks by half."""
    night = run_night(mode="CompactFirst")
    _report(night, "demo, CompactFirst", capsys)
    _check_night(night)
    assert len(night.after) <= len(night.before) // 2
    assert _evicted_nodes(night.sim) <= _released_nodes(night.sim)


def test_dry_run_night_applies_nothing() -> None:
    start = WINDOW[0] - 2 * MIN
    untouched = json.dumps(ActingSimCluster(now=start).snapshot())
    night = run_night(dry_run=True, start=start, end=WINDOW[0] + 5 * MIN)
    assert json.dumps(night.sim.snapshot()) == untouched and night.sim.generation == 0
    assert night.sim.events() == [] and night.evictions == []
    lines = [e.message for e in night.runtime.journal.entries()]
    assert sum(m.startswith("dry-run: evict Pod") for m in lines) == 1  # the same plan is not re-journaled
    assert sum(m.startswith("evict ") for m in lines) == 1
    assert any(m.startswith("dry-run: delete GPUNodeClaim") for m in lines)


def test_same_seed_same_journal() -> None:
    a = run_night(start=WINDOW[0] - 5 * MIN, end=WINDOW[0] + 20 * MIN)
    b = run_night(start=WINDOW[0] - 5 * MIN, end=WINDOW[0] + 20 * MIN)
    assert a.runtime.journal.to_json_lines() == b.runtime.journal.to_json_lines()
    assert json.dumps(a.sim.events()) == json.dumps(b.sim.events())
    assert a.runtime.journal.total > 20
