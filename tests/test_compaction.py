"""Node compaction (docs/behaviour.md C1–C8) against upstream's behaviour (cases 1–16).

Case fixture (as upstream's, tests/compaction_support.py): pool `pool-a`, one GPU per node of 100
TFLOPS / 80Gi used by tensor-fusion, GPUNodes Running and an hour old, no warm/min, period 5m. Where
docs/behaviour.md deviates from upstream the test docstring says so. Scenarios about the controller's
process state (pending claims, requeues, the pool controller deleting claims) belong to the runtime;
their tests here cover what the pure function decides. tftui's own rules: test_compaction_rules.py;
the demo and generated clusters: test_compaction_generated.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.compaction_support import POOL, SEC, cnode, cpool, events, kept, nodes3, released, result, run
from tests.fixtures.engine_builders import NOW, claim, worker
from tftui.engine.compaction import DEFAULT_PERIOD, compaction_note, compaction_period, is_due, manual_trigger
from tftui.engine.plan import AnnotatePool, DeleteGPUNodeClaim, Event, LabelNode, Skip, rfc3339
from tftui.model import keys


def compaction_event(node_name: str) -> Event:
    return Event(f"GPUPool/{POOL}", "Normal", "Compaction", compaction_note(node_name))


# -- upstream's cases 1–16, each stated in its test -----------------------------------------------


def test_1_autoselect_labels_every_idle_node() -> None:
    """Scenario 1. Adapted (C4): AutoSelect now also emits a `Compaction` event per release."""
    plan = run([cpool(), *nodes3()])
    assert released(plan) == ["node-1", "node-2", "node-3"]
    assert [r.action for r in result(plan).released] == ["label-should-delete"] * 3
    assert plan.actions == [
        a
        for n in ("node-1", "node-2", "node-3")
        for a in (LabelNode(n, {keys.SHOULD_DELETE: "true"}), compaction_event(n))
    ]
    assert not any(isinstance(a, DeleteGPUNodeClaim | AnnotatePool) for a in plan.actions)
    assert (
        events(plan)[0].message
        == "Node node-1 is empty and deletion won't impact warm-up capacity, try terminating it"
    )


def test_2_warm_limit_releases_exactly_one() -> None:
    """Scenario 2: warm 150/100Gi, available 300/240Gi → the first candidate (by name here) goes."""
    plan = run([cpool(warm=(150, "100Gi")), *nodes3()])
    assert released(plan) == ["node-1"]
    k = kept(plan)
    assert {n: s.reason for n, s in k.items()} == {"node-2": "warm-resources", "node-3": "warm-resources"}
    both = "available 200 TFLOPS − node 100 < warm 150; available 160Gi − node 80Gi < warm 100Gi"
    assert k["node-2"].detail == k["node-3"].detail == both


def test_3_worker_node_is_kept_and_its_usage_lowers_available() -> None:
    """Scenario 3: node-3's worker (30/10Gi) keeps it; available 270/230Gi lets exactly one go."""
    objs = [
        cpool(warm=(150, "100Gi")),
        *nodes3(),
        worker("w1", ["node-3-gpu-0"], node="node-3", pool=POOL, tflops=30, vram="10Gi"),
    ]
    plan = run(objs)
    assert released(plan) == ["node-1"]
    k = kept(plan)
    assert k["node-3"].reason == "has-workers"
    assert k["node-3"].detail == "1 TensorFusion worker(s): default/w1"
    assert k["node-2"].reason == "warm-resources"
    assert k["node-2"].detail == (
        "available 170 TFLOPS − node 100 < warm 150; available 150Gi − node 80Gi < warm 100Gi"
    )


def test_4_min_limit_blocks_everything() -> None:
    """Scenario 4: min 250 TFLOPS; 300 − 100 = 200 < 250."""
    plan = run([cpool(min_=(250, 0)), *nodes3()])
    assert released(plan) == []
    assert {s.reason for s in kept(plan).values()} == {"min-resources"}
    assert kept(plan)["node-1"].detail == "total 300 TFLOPS − node 100 < min 250"
    assert events(plan) == []


def test_5_vram_only_violation() -> None:
    """Scenario 5: warm 0 TFLOPS / 200Gi; 240Gi − 80Gi = 160Gi < 200Gi (both resources count)."""
    plan = run([cpool(warm=(0, "200Gi")), *nodes3()])
    assert released(plan) == []
    assert kept(plan)["node-1"].detail == "available 240Gi − node 80Gi < warm 200Gi"


@pytest.mark.parametrize(
    ("age", "released_"),
    [(timedelta(minutes=2), False), (timedelta(minutes=5), True), (timedelta(minutes=5, seconds=1), True)],
)
def test_6_age_rule(age: timedelta, released_: bool) -> None:
    """Scenario 6: < 5 min is kept; exactly 5 min is eligible (upstream: "after now − 5 min")."""
    plan = run([cpool(), *cnode("node-1", created=NOW - age)])
    assert (released(plan) == ["node-1"]) is released_
    if not released_:
        assert kept(plan)["node-1"].reason == "too-young"
        assert kept(plan)["node-1"].detail == "created 2m0s ago (< 5m0s)"


def test_7_do_not_disrupt_on_gpunode_or_node() -> None:
    """Scenario 7. Adapted (C2): the label on the Kubernetes Node only now also keeps the node."""
    objs = [
        cpool(),
        *cnode("node-1", do_not_disrupt=True),
        *cnode("node-2", node_labels={keys.DO_NOT_DISRUPT: "true"}),
        *cnode("node-3", node_labels={keys.DO_NOT_DISRUPT: "false"}),
    ]
    plan = run(objs)
    assert released(plan) == ["node-3"]
    k = kept(plan)
    assert (k["node-1"].reason, k["node-1"].detail) == (
        "do-not-disrupt",
        "tensor-fusion.ai/do-not-disrupt=true on the GPUNode",
    )
    assert (k["node-2"].reason, k["node-2"].detail) == (
        "do-not-disrupt",
        "tensor-fusion.ai/do-not-disrupt=true on the Kubernetes Node",
    )


def test_8_phase_not_running() -> None:
    """Scenario 8."""
    plan = run([cpool(), *cnode("node-1", phase="Pending")])
    assert released(plan) == []
    assert (kept(plan)["node-1"].reason, kept(plan)["node-1"].detail) == (
        "not-running",
        "GPUNode phase Pending",
    )


def test_9_zero_capacity_never_released() -> None:
    """Scenario 9 (also: a GPUNode without status totals counts as zero, as Go's zero Quantity)."""
    bare = cnode("node-2")
    del bare[1]["status"]["totalTFlops"], bare[1]["status"]["totalVRAM"]
    plan = run([cpool(), *cnode("node-1", totals=("0", "80Gi")), *bare])
    assert released(plan) == []
    assert {s.reason for s in kept(plan).values()} == {"zero-capacity"}
    assert kept(plan)["node-1"].detail == "status.totalTFlops 0, status.totalVRAM 80Gi"
    assert kept(plan)["node-2"].detail == "status.totalTFlops 0, status.totalVRAM 0Gi"


def test_10_provisioned_without_claim_label_is_kept_and_not_consumed() -> None:
    """Scenario 10: no node-provisioner label → kept (`no-claim`), capacity not consumed, no event.

    With warm 100 of 200 available, node-b goes only because node-a (more expensive, so first) was
    not consumed. A label naming a missing claim is treated the same.
    """
    objs = [
        cpool(mode="Provisioned", warm=(100, 0)),
        *cnode("node-a", cost=9.0),
        *cnode("node-b", cost=1.0, claim="claim-b"),
        *cnode("node-c", cost=0.5, claim="claim-gone"),
        claim("claim-b", "node-b", POOL),
    ]
    plan = run(objs)
    assert released(plan) == ["node-b"]
    k = kept(plan)
    assert (k["node-a"].reason, k["node-a"].detail) == (
        "no-claim",
        "no tensor-fusion.ai/node-provisioner label",
    )
    assert (k["node-c"].reason, k["node-c"].detail) == ("no-claim", "GPUNodeClaim claim-gone not found")
    assert [e.message for e in events(plan)] == [compaction_note("node-b")]


def test_11_provisioned_with_claim_deletes_it_and_marks_the_pool() -> None:
    """Scenario 11: delete claim-1, Normal `Compaction` event with the exact note, `last-sync` once.

    The pool controller's deletion, TerminateNode and the pending-deletion gate are the runtime's;
    the next round sees the deleting claim as already released (see test_14).
    """
    objs = [cpool(mode="Provisioned"), *cnode("node-1", claim="claim-1"), claim("claim-1", "node-1", POOL)]
    plan = run(objs)
    assert [r.action for r in result(plan).released] == ["delete-gpunodeclaim claim-1"]
    assert plan.actions == [
        DeleteGPUNodeClaim("claim-1"),
        compaction_event("node-1"),
        AnnotatePool(POOL, {keys.LAST_SYNC: "2026-11-30T12:00:00Z"}),
    ]


def test_12_karpenter_warm_keeps_one_claim() -> None:
    """Scenario 12: two Karpenter nodes; warm such that one node is enough → one claim deleted."""
    objs = [
        cpool(mode="Karpenter", warm=(100, "80Gi")),
        *cnode("node-1", claim="claim-1"),
        *cnode("node-2", claim="claim-2"),
        claim("claim-1", "node-1", POOL),
        claim("claim-2", "node-2", POOL),
    ]
    plan = run(objs)
    assert released(plan) == ["node-1"]
    deletes = [a for a in plan.actions if isinstance(a, DeleteGPUNodeClaim)]
    annotations = [a for a in plan.actions if isinstance(a, AnnotatePool)]
    assert deletes == [DeleteGPUNodeClaim("claim-1")]
    assert len(annotations) == 1
    assert kept(plan)["node-2"].reason == "warm-resources"


def test_13_interval_gate_and_manual_trigger() -> None:
    """Scenario 13. Adapted (C5): a stamp more than 3 s in the future is ignored (upstream obeys it)."""
    base = cpool()
    last = NOW - timedelta(minutes=1)

    def due(stamp: str | None) -> tuple[bool, str]:
        obj = cpool(annotations={keys.MANUAL_COMPACTION: stamp} if stamp else None)
        return is_due(obj, NOW, last)

    assert is_due(base, NOW, last) == (False, "not-due")
    assert due(rfc3339(NOW - SEC)) == (True, "manual-trigger")
    assert due(rfc3339(NOW - 10 * SEC)) == (False, "not-due")
    assert due("yesterday") == (False, "not-due")
    assert manual_trigger(cpool(annotations={keys.MANUAL_COMPACTION: "yesterday"}), NOW) == (
        False,
        'metadata.annotations["tensor-fusion.ai/manual-compaction"] "yesterday": not an RFC 3339 timestamp',
    )
    assert due(rfc3339(NOW + 2 * SEC)) == (True, "manual-trigger")
    assert due(rfc3339(NOW + 10 * SEC)) == (False, "not-due")
    # the period elapsed: the annotation is not consulted at all
    assert is_due(base, NOW, NOW - timedelta(minutes=5)) == (True, "period-elapsed")
    assert is_due(base, NOW, None) == (True, "first-run")

    plan = run([base, *nodes3()], last_run=last)
    assert result(plan).due is False
    assert released(plan) == [] and plan.actions == []
    assert kept(plan)["node-1"] == Skip(
        "node-1", "not-due", "would be released; next round at 2026-11-30T12:04:00Z"
    )
    forced = run([base, *nodes3()], last_run=last, force=True)
    assert result(forced).due is True and released(forced) == ["node-1", "node-2", "node-3"]


def test_14_deleting_claim_counts_as_released_and_is_not_subtracted_again() -> None:
    """Scenario 14 (pending claim) is a runtime gate; the pure function's part is a claim in deletion.

    Its node is `already-released` and its GPUs leave the pool figures once: warm 100 with node-1
    gone still lets node-2 go (200 − 100 ≥ 100).
    """
    deleting = claim("claim-1", "node-1", POOL)
    deleting["metadata"]["deletionTimestamp"] = "2026-11-30T11:58:00Z"
    objs = [
        cpool(mode="Provisioned", warm=(100, 0)),
        *cnode("node-1", claim="claim-1"),
        *cnode("node-2", claim="claim-2"),
        *cnode("node-3", claim="claim-3"),
        deleting,
        claim("claim-2", "node-2", POOL),
        claim("claim-3", "node-3", POOL),
    ]
    plan = run(objs)
    assert released(plan) == ["node-2"]
    k = kept(plan)
    assert (k["node-1"].reason, k["node-1"].detail) == (
        "already-released",
        "GPUNodeClaim claim-1 is being deleted (since 2026-11-30T11:58:00Z)",
    )
    assert k["node-3"].detail == "available 100 TFLOPS − node 100 < warm 100"


@pytest.mark.parametrize(
    ("period", "expected", "error"),
    [
        (None, DEFAULT_PERIOD, None),
        ("", DEFAULT_PERIOD, None),
        ("30m", timedelta(minutes=30), None),
        ("1h30m", timedelta(minutes=90), None),
        ("abc", DEFAULT_PERIOD, "nodeCompaction.period \"abc\": invalid duration 'abc'"),
        ("0s", DEFAULT_PERIOD, 'nodeCompaction.period "0s": must be positive; using 5m'),
        ("-1m", DEFAULT_PERIOD, 'nodeCompaction.period "-1m": must be positive; using 5m'),
        ("1d", DEFAULT_PERIOD, "nodeCompaction.period \"1d\": invalid duration '1d'"),
    ],
)
def test_15_period_parsing(period: str | None, expected: timedelta, error: str | None) -> None:
    """Scenario 15. Adapted (C5): unset → 5m (upstream code: 1m); invalid or ≤ 0 → 5m + error."""
    got, err = compaction_period(cpool(period=period))
    assert got == expected
    if error is None:
        assert err is None
    else:
        assert err is not None and err.startswith(error)


def test_15_invalid_period_warns_and_still_runs_on_5m() -> None:
    """An invalid period is a Warning `CompactionConfigInvalid`; the round runs on 5m."""
    obj = cpool(period="abc")
    plan = run([obj, *cnode("node-1")])
    warning = events(plan)[0]
    assert (warning.type, warning.reason, warning.object) == (
        "Warning",
        "CompactionConfigInvalid",
        f"GPUPool/{POOL}",
    )
    assert warning.message.startswith('nodeCompaction.period "abc": invalid duration')
    assert released(plan) == ["node-1"]
    assert is_due(obj, NOW, NOW - timedelta(minutes=5)) == (True, "period-elapsed")
    assert is_due(obj, NOW, NOW - timedelta(minutes=4)) == (False, "not-due")
    # the warning belongs to due rounds only (once per period, not once per loop)
    assert run([obj, *cnode("node-1")], last_run=NOW - timedelta(minutes=4)).actions == []


def test_16_empty_used_by_is_excluded_from_pool_figures() -> None:
    """Scenario 16: node-c's GPU (usedBy "") adds nothing; with it counted, two nodes would go."""
    objs = [cpool(warm=(100, 0)), *cnode("node-a"), *cnode("node-b"), *cnode("node-c", used_by="")]
    plan = run(objs)
    assert released(plan) == ["node-a"]
    assert kept(plan)["node-b"].detail == "available 100 TFLOPS − node 100 < warm 100"
