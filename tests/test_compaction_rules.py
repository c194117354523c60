"""Node compaction: tftui's rules beyond upstream's cases (docs/behaviour.md C1–C8) — release order,
workers and nodes already going, quantities, the manual trigger, and `now`'s time zone."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tests.compaction_support import POOL, SEC, cnode, cpool, events, kept, nodes3, released, result, run
from tests.fixtures.engine_builders import H100, NOW, build, worker
from tftui.engine.compaction import (
    is_due,
    manual_trigger,
    parse_rfc3339,
    plan_compaction,
    plan_manual_compaction,
)
from tftui.engine.plan import AnnotatePool, Skip
from tftui.model import keys

# -- tftui rules beyond the scenarios ------------------------------------------------------------


def test_c1_most_expensive_first_then_name() -> None:
    """C1: costPerHour, else the GPU model price × GPUs, else 0; ties by name. Warm lets two go."""
    objs = [
        cpool(warm=(200, 0)),
        *cnode("a-cheap", cost=1.0),
        *cnode("b-priced-by-model"),  # 1 GPU × 5.0 from `prices`
        *cnode("c-free", model=H100[0]),  # no cost, no price for its model → 0
        *cnode("d-dear", cost=10.0),
        *cnode("e-free", model=H100[0]),
    ]
    plan = run(objs, prices={"NVIDIA A100-SXM4-80GB": 5.0})
    assert released(plan) == ["d-dear", "b-priced-by-model", "a-cheap"]
    assert [k.node for k in result(plan).kept] == ["c-free", "e-free"]
    # without prices the model-priced node drops to 0 and sorts by name among the free ones
    assert released(run(objs)) == ["d-dear", "a-cheap", "b-priced-by-model"]


def test_c2_should_delete_node_is_not_subtracted_twice() -> None:
    """C2 fix of upstream's double subtraction: a `should-delete` node's GPUs leave the figures once.

    Upstream would subtract it again and release only one new node; tftui releases two.
    """
    objs = [
        cpool(warm=(100, 0)),
        *cnode("node-0", node_labels={keys.SHOULD_DELETE: "true"}),
        *nodes3(),
    ]
    plan = run(objs)
    assert released(plan) == ["node-1", "node-2"]
    assert kept(plan)["node-0"] == Skip(
        "node-0", "already-released", "Node labelled tensor-fusion.ai/should-delete=true"
    )
    assert kept(plan)["node-3"].detail == "available 100 TFLOPS − node 100 < warm 100"


def test_c2_terminating_and_finished_workers_do_not_hold_a_node() -> None:
    """C2: only non-terminating workers keep a node (ended pods are not workers at all).

    node-2 is busy so the pool has slack for the terminating worker's booking (next test).
    """
    busy = [*cnode("node-2"), worker("w-busy", ["node-2-gpu-0"], node="node-2", pool=POOL)]
    for w in (
        worker("w-term", ["node-1-gpu-0"], node="node-1", pool=POOL, deleting=True),
        worker("w-done", ["node-1-gpu-0"], node="node-1", pool=POOL, phase="Succeeded"),
    ):
        plan = run([cpool(), *cnode("node-1"), *busy, w])
        assert released(plan) == ["node-1"]
        assert kept(plan)["node-2"].reason == "has-workers"


def test_terminating_worker_still_books_capacity() -> None:
    """Upstream arithmetic (C3): available − node *total*. A released node whose GPU is still
    booked by a terminating worker (90 of 100 available) costs the pool 100, so with no warm set the
    next empty node fails 90 − 100 < 0. Pessimistic, never releases too much; kept as upstream."""
    objs = [
        cpool(),
        *cnode("node-1", cost=2.0),
        *cnode("node-2", cost=1.0),
        worker("w-term", ["node-1-gpu-0"], node="node-1", pool=POOL, deleting=True),
    ]
    plan = run(objs)
    assert released(plan) == ["node-1"]
    assert kept(plan)["node-2"].detail == (
        "available 90 TFLOPS − node 100 < warm 0; available 79Gi − node 80Gi < warm 0Gi"
    )


def test_min_and_warm_details_are_combined() -> None:
    plan = run([cpool(warm=(250, 0), min_=(250, "200Gi")), *nodes3()])
    assert kept(plan)["node-1"] == Skip(
        "node-1",
        "warm-resources",
        "available 300 TFLOPS − node 100 < warm 250; total 300 TFLOPS − node 100 < min 250; "
        "total 240Gi − node 80Gi < min 200Gi",
    )
    assert released(plan) == []


def test_invalid_warm_quantity_releases_nothing() -> None:
    """Only dumps can carry it (the API server validates quantities); reading it as 0 would release."""
    st_ = build([cpool(), *cnode("node-1")])
    st_.pools[POOL].obj["spec"]["capacityConfig"] = {"warmResources": {"tflops": "lots"}}
    plan = plan_compaction(st_, POOL, NOW)
    assert released(plan) == []
    assert kept(plan)["node-1"].reason == "config-invalid"
    assert [e.reason for e in events(plan)] == ["CompactionConfigInvalid"]
    assert "capacityConfig.warmResources.tflops 'lots': invalid quantity" in events(plan)[0].message


def test_fractional_quantities_round_up_like_value() -> None:
    """`.Value()` rounds up: 100.5 TFLOPS GPUs count 101 each, the node total "201" is 201."""
    objs = [cpool(warm=(1, 0)), *cnode("node-1", tflops="100500m", gpus=2, totals=("201", "160Gi"))]
    objs += cnode("node-2", tflops="100500m", gpus=2, totals=("201", "160Gi"))
    plan = run(objs)
    # pool available 4 × 101 = 404; 404 − 201 = 203 ≥ 1; then 203 − 201 = 2 ≥ 1
    assert released(plan) == ["node-1", "node-2"]


def test_unknown_pool_raises() -> None:
    with pytest.raises(KeyError):
        plan_compaction(build([cpool()]), "nope", NOW)


@pytest.mark.parametrize(
    ("stamp", "ok"),
    [
        ("2026-11-30T12:00:00Z", True),
        ("2026-11-30T13:00:01+01:00", True),
        ("2026-11-30T06:59:58-05:00", True),
        ("2026-11-30T11:59:58.5Z", True),
        ("2026-11-30T11:59:57Z", True),  # exactly now − 3 s: inside the closed window
        ("2026-11-30T11:59:56.999999999Z", False),
        ("2026-11-30T12:00:03Z", True),
        ("2026-11-30T12:00:03.000001Z", False),
    ],
)
def test_manual_trigger_window(stamp: str, ok: bool) -> None:
    assert manual_trigger(cpool(annotations={keys.MANUAL_COMPACTION: stamp}), NOW) == (ok, None)


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-11-30 12:00:00Z",
        "2026-11-30T12:00:00",
        "2026-11-30t12:00:00z",
        "2026-11-30",
        "2026-11-31T12:00:00Z",
    ],
)
def test_manual_trigger_rejects_non_rfc3339(stamp: str) -> None:
    ok, err = manual_trigger(cpool(annotations={keys.MANUAL_COMPACTION: stamp}), NOW)
    assert ok is False and err is not None and "not an RFC 3339 timestamp" in err
    with pytest.raises(ValueError):
        parse_rfc3339(stamp)


def test_manual_compaction_key_stamps_now_and_forces_the_round() -> None:
    st_ = build([cpool(), *nodes3()])
    plan, stamp = plan_manual_compaction(st_, POOL, NOW)
    assert stamp == AnnotatePool(POOL, {keys.MANUAL_COMPACTION: "2026-11-30T12:00:00Z"})
    assert result(plan).due is True and released(plan) == ["node-1", "node-2", "node-3"]
    assert stamp not in plan.actions
    # written on the pool, the stamp makes the next loop due inside the period
    obj = cpool(annotations={k: v for k, v in stamp.annotations.items() if v is not None})
    assert is_due(obj, NOW + SEC, NOW - timedelta(minutes=1)) == (True, "manual-trigger")


def test_naive_now_is_rejected() -> None:
    """Engine times are aware; a naive `now` is a programming error, not a silent UTC guess."""
    with pytest.raises((TypeError, ValueError)):
        run([cpool(), *cnode("node-1")], now=datetime(2026, 11, 30, 12), last_run=NOW)


def test_aware_now_in_other_zone_is_equivalent() -> None:
    other = NOW.astimezone(timezone(timedelta(hours=-5)))
    assert run([cpool(), *nodes3()], now=other).dumps() == run([cpool(), *nodes3()]).dumps()
