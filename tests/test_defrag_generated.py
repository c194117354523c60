"""Defrag on the demo cluster and on generated clusters: every planned eviction checked independently,
determinism, the skip codes, the engine's import purity and the lifetime of a state's defrag index."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.defrag_support import JSON, reasons
from tests.fixtures.engine_builders import HOUR
from tftui.engine.defrag import DefragConfig, plan_defrag, validate_defrag
from tftui.engine.fit import Request, reject_reason
from tftui.engine.plan import EvictPod, Plan
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects

# -- demo cluster and determinism ------------------------------------------------------------------

DEMO_NOW = datetime(2026, 12, 1, 8, 30, tzinfo=UTC)  # 03:30 EST, inside the 03:00 window


@pytest.fixture(scope="module")
def demo() -> ClusterState:
    return ClusterState.build(generate_objects())


def _pool_util(st_: ClusterState, node_name: str, pool_name: str) -> tuple[int, int]:
    gpus = [g for g in st_.gpus_of(node_name) if g.pool == pool_name and g.used_by in ("", "tensor-fusion")]
    used = sum(1 for g in gpus if g.allocated.tflops > 0 or g.allocated.vram > 0)
    return used, len(gpus)


def _check_eviction(st_: ClusterState, plan: Plan, pool_name: str) -> None:
    """Independent checks of any planned eviction (the properties of the brief)."""
    evs = [a for a in plan.actions if isinstance(a, EvictPod)]
    assert len(evs) <= 1
    res = plan.pools[pool_name].defrag
    assert res is not None
    if not evs:
        assert res.evict is None
        return
    assert res.evict is not None and res.state == "evict"
    w = st_.workers[f"{evs[0].namespace}/{evs[0].name}"]
    assert w.node == res.evict.node != res.evict.target
    # PDB coverage with enough budget for every pod on the node
    pods = [x for x in st_.workers.values() if x.node == w.node and not x.terminating]
    for pod in pods:
        labels = pod.obj["metadata"].get("labels") or {}
        cov = [
            p
            for p in st_.pdbs
            if p["metadata"].get("namespace") == pod.namespace
            and (ml := ((p.get("spec") or {}).get("selector") or {}).get("matchLabels"))
            and all(labels.get(k) == v for k, v in ml.items())
        ]
        assert cov, f"{pod.key} evicted without PDB"
        for p in cov:
            n = sum(
                1
                for x in pods
                if x.namespace == pod.namespace
                and all(
                    ((x.obj["metadata"].get("labels") or {}).get(k) == v)
                    for k, v in p["spec"]["selector"]["matchLabels"].items()
                )
            )
            assert p["status"]["disruptionsAllowed"] >= n
    # target: same pool, not empty, not less utilized, not cordoned/released/source, filters pass
    su, stot = _pool_util(st_, w.node or "", pool_name)
    tu, ttot = _pool_util(st_, res.evict.target, pool_name)
    assert tu > 0 and stot > 0 and tu / ttot >= su / stot
    tnode = st_.nodes[res.evict.target]
    assert tnode.pool == pool_name and not tnode.unschedulable
    tlabels = (tnode.node_obj or {}).get("metadata", {}).get("labels") or {}
    assert tlabels.get(keys.SHOULD_DELETE) != "true" and tlabels.get(keys.DEFRAG_SOURCE) != "true"
    req = Request.of_worker(w)
    fits = [
        g
        for g in st_.gpus_of(tnode.name)
        if g.pool == pool_name and reject_reason(g, g.available, req) is None
    ]
    assert len(fits) >= req.count


def test_demo_cluster_evicts_with_a_valid_target(demo: ClusterState) -> None:
    """The demo's `demo-dev` (America/New_York, `0 3 * * *`, no lastDefragTime) at 03:30 EST."""
    plan = plan_defrag(demo, "demo-dev", DEMO_NOW)
    res = plan.pools["demo-dev"].defrag
    assert res is not None and res.state == "evict"
    assert res.window == (datetime(2026, 12, 1, 8, tzinfo=UTC), datetime(2026, 12, 1, 10, tzinfo=UTC))
    assert len(res.candidates) >= 2
    assert all(c.utilization <= 40 for c in res.candidates)
    assert [c.utilization for c in res.candidates] == sorted(c.utilization for c in res.candidates)
    assert {"cordoned", "native-gpu-pod", "idle", "above-threshold"} <= {s.reason for s in res.skipped}
    assert reasons(plan) == ["DefragStarted", "DefragPodEvicted"]
    _check_eviction(demo, plan, "demo-dev")


def test_demo_other_pools_disabled_and_window(demo: ClusterState) -> None:
    """Pools without defrag are `disabled`; outside the window demo-dev is not-due with the next one."""
    assert plan_defrag(demo, "demo-inference", DEMO_NOW).pools["demo-inference"].defrag.state == "disabled"  # type: ignore[union-attr]
    res = plan_defrag(demo, "demo-dev", DEMO_NOW + 3 * HOUR).pools["demo-dev"].defrag
    assert res is not None and res.state == "not-due"
    assert res.window == (datetime(2026, 12, 2, 8, tzinfo=UTC), datetime(2026, 12, 2, 10, tzinfo=UTC))


def test_determinism() -> None:
    """Same objects and now → byte-identical plans, independent of object order."""
    objs = generate_objects()
    a = plan_defrag(ClusterState.build(objs), "demo-dev", DEMO_NOW).dumps()
    b = plan_defrag(ClusterState.build(copy.deepcopy(objs)), "demo-dev", DEMO_NOW).dumps()
    c = plan_defrag(ClusterState.build(list(reversed(copy.deepcopy(objs)))), "demo-dev", DEMO_NOW).dumps()
    assert a == b == c


def test_engine_imports_stay_pure() -> None:
    """engine/ must not import sources, ui or runtime."""
    import tftui.engine.cron as c
    import tftui.engine.defrag as d

    for mod in (c, d):
        src = Path(mod.__file__ or "").read_text(encoding="utf-8")
        for banned in ("tftui.sources", "tftui.ui", "tftui.runtime"):
            assert banned not in src


# -- properties on generated clusters --------------------------------------------------------------

POOLS = ("demo-dev", "demo-inference", "demo-training", "demo-isolation")


def _patched(
    objs: Sequence[JSON], pool_name: str, threshold: int, tz: str, width: str, drop_pdb: float, seed: int
) -> list[JSON]:
    out = []
    rnd = seed
    for o in objs:
        if o["kind"] == "GPUPool" and o["metadata"]["name"] == pool_name:
            o = copy.deepcopy(o)
            nc = o["spec"].setdefault("nodeManagerConfig", {}).setdefault("nodeCompaction", {})
            nc["defrag"] = {
                "enabled": True,
                "schedule": "0 3 * * *",
                "timezone": tz,
                "maxDuration": width,
                "utilizationThresholdPercent": threshold,
            }
        elif o["kind"] == "PodDisruptionBudget":
            rnd = (rnd * 1103515245 + 12345) % 2**31
            if rnd / 2**31 < drop_pdb:
                continue
        out.append(o)
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    nodes=st.integers(6, 30),
    pool_name=st.sampled_from(POOLS),
    threshold=st.integers(0, 100),
    tz=st.sampled_from(["UTC", "America/New_York", "Asia/Shanghai"]),
    width=st.sampled_from(["30m", "2h", "5h"]),
    drop_pdb=st.sampled_from([0.0, 0.3]),
    frac=st.floats(0, 0.999),
)
def test_properties_on_generated_clusters(
    seed: int, nodes: int, pool_name: str, threshold: int, tz: str, width: str, drop_pdb: float, frac: float
) -> None:
    """Never evicts an uncovered pod, never targets an empty or less utilized node, at most one
    EvictPod, the target passes the filters; plans are deterministic."""
    objs = _patched(generate_objects(seed, nodes), pool_name, threshold, tz, width, drop_pdb, seed)
    st_ = ClusterState.build(objs)
    cfg = validate_defrag(st_.pools[pool_name].obj)
    assert isinstance(cfg, DefragConfig)
    tick = cfg.schedule.next_after(DEFAULT_NOW)
    assert tick is not None
    now = tick + cfg.max_duration * frac
    plan = plan_defrag(st_, pool_name, now)
    res = plan.pools[pool_name].defrag
    assert res is not None and res.state in ("evict", "idle")
    _check_eviction(st_, plan, pool_name)
    assert all(c.utilization <= threshold for c in res.candidates)
    assert plan.dumps() == plan_defrag(ClusterState.build(objs), pool_name, now).dumps()


def test_skip_reason_codes_are_known() -> None:
    """Every skip reason is one of the documented codes."""
    known = {
        "do-not-disrupt", "cordoned", "evict-skip", "not-running", "idle", "above-threshold", "native-gpu-pod",
        "no-workers", "fresh-worker", "missing-pdb", "unmovable", "pdb-blocked",
    }  # fmt: skip
    res = plan_defrag(ClusterState.build(generate_objects()), "demo-dev", DEMO_NOW).pools["demo-dev"].defrag
    assert res is not None and {s.reason for s in res.skipped} <= known


def test_a_state_and_its_defrag_index_are_freed_without_the_cycle_collector() -> None:
    """The index a state keeps (`derived`) refers to it weakly: long what-if runs pause the cyclic
    GC, and a cycle per state kept every superseded state alive until the run's end."""
    import gc
    import weakref

    from tftui.model.gcpause import gc_paused

    state = ClusterState.build(generate_objects())
    plan_defrag(state, "demo-dev", DEMO_NOW)  # derives the index ("defrag")
    assert "defrag" in state._derived
    ref = weakref.ref(state)
    with gc_paused():
        del state
        assert ref() is None  # freed by reference counting alone
    gc.collect()
