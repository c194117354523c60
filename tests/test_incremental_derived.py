"""Values derived once per state and carried from the state a refresh derived it from: each equals
what a fresh build gives after a change of what it is keyed on (a node's view or its GPUs' views)
and after a change it must not be keyed on, and unchanged nodes keep the very same values."""

from __future__ import annotations

import copy
import gc
import weakref
from datetime import timedelta
from typing import Any

import pytest

from tests.test_refresh_reuse import Objects, full_build
from tftui.engine import compaction, incremental, planning
from tftui.engine import usage as usage_module
from tftui.engine.defragindex import _pool_gpus, gpu_utilization
from tftui.engine.state import ClusterState
from tftui.engine.usage import UsageIndex
from tftui.model import keys
from tftui.runtime.whatif import SimConfig, parse_policy, simulate
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.ui.load.data import StateReader, load
from tftui.ui.load.ops import build_ops, compaction_capacity


def utilizations(state: ClusterState) -> dict[tuple[str, str], tuple[int, int]]:
    return {
        (pool, node.name): gpu_utilization(state, node, pool)
        for pool in state.pools
        for node in state.nodes_of(pool)
    }


def pool_gpus(state: ClusterState) -> dict[tuple[str, str], list[str]]:
    return {
        (pool, node.name): [g.name for g in _pool_gpus(state, node, pool)]
        for pool in state.pools
        for node in state.nodes_of(pool)
    }


def is_worker(o: dict[str, Any]) -> bool:
    return (
        o["kind"] == "Pod"
        and (o["metadata"].get("labels") or {}).get(keys.COMPONENT) == keys.COMPONENT_WORKER
    )


def test_per_node_defrag_figures_follow_the_nodes_that_changed_and_only_those() -> None:
    objs = generate_objects(5, 30, DEFAULT_NOW)
    cluster = Objects(objs)
    reader = StateReader()
    _, first = reader.read(cluster)
    before, before_gpus = utilizations(first), pool_gpus(first)

    # what the values are keyed on: a GPU whose only worker ends is no longer in use on its node
    state = first
    by_gpu: dict[str, list[int]] = {}
    for i, o in enumerate(objs):
        w = state.workers.get(f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}")
        if is_worker(o) and w is not None:
            for g in w.gpu_ids:
                by_gpu.setdefault(g, []).append(i)
    gpu, (pod,) = next((g, pods) for g, pods in by_gpu.items() if len(pods) == 1)
    node = state.gpus[gpu].node
    objs[pod] = ended = copy.deepcopy(objs[pod])
    ended["status"]["phase"] = "Succeeded"
    _, second = reader.read(cluster)
    assert second is not first and second.nodes[node or ""] is not first.nodes[node or ""]
    after = utilizations(second)
    fresh = full_build(objs)
    assert after == utilizations(fresh) and pool_gpus(second) == pool_gpus(fresh)
    changed = [k for k in after if k[1] == node]
    assert changed and any(after[k] != before[k] for k in changed)  # a kept value would be stale
    assert pool_gpus(second) == before_gpus
    # every other node's value is the one computed on the first state (the same list object)
    pool = changed[0][0]
    kept = [n for n in second.nodes_of(pool) if n.name != node]
    first_lists = {n.name: _pool_gpus(first, first.nodes[n.name], pool) for n in kept}
    assert kept and all(_pool_gpus(second, n, pool) is first_lists[n.name] for n in kept)

    # what they must not be keyed on: a workload object's annotation changes no node
    wl = next(i for i, o in enumerate(objs) if o["kind"] == "TensorFusionWorkload")
    objs[wl] = noted = copy.deepcopy(objs[wl])
    noted["metadata"].setdefault("annotations", {})["note"] = "x"
    _, third = reader.read(cluster)
    assert third is not second
    assert utilizations(third) == utilizations(full_build(objs)) == after
    assert all(_pool_gpus(third, n, pool) is _pool_gpus(second, n, pool) for n in second.nodes_of(pool))


def test_values_are_carried_past_states_that_did_not_compute_them_and_no_state_is_kept() -> None:
    """The simulators replace a state at every change and compute these values only on the states
    a reconcile reads: a value is carried with the node and GPU views it was computed on (not with
    its state, which is held weakly), through states that did not compute it, and re-used for the
    nodes that did not change since."""
    objs = generate_objects(6, 12, DEFAULT_NOW)
    state = ClusterState.build(list(objs))  # the very dicts (the next states share their views)
    utilizations(state)
    computed = {(p, n.name): _pool_gpus(state, n, p) for p in state.pools for n in state.nodes_of(p)}
    states = [weakref.ref(state)]
    touched = set()
    for _ in range(2):  # two changes, each ending one worker: two states that compute nothing
        i = next(i for i, o in enumerate(objs) if is_worker(o) and o["status"].get("phase") != "Succeeded")
        objs[i] = changed = copy.deepcopy(objs[i])
        changed["status"]["phase"] = "Succeeded"
        touched.add(changed["spec"]["nodeName"])
        state = incremental.update_state(state, list(objs))
        states.append(weakref.ref(state))
    gc.collect()
    assert [s() is None for s in states] == [True, True, False]  # no chain of states stays alive
    assert utilizations(state) == utilizations(full_build(objs))
    kept = [(p, n) for p in state.pools for n in state.nodes_of(p) if n.name not in touched]
    assert kept and all(_pool_gpus(state, n, p) is computed[(p, n.name)] for p, n in kept)


def test_released_nodes_are_found_once_per_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """The capacity figures of every pool leave out the same released nodes: looked for once per
    state, not once per pool (each pool scanned every node), and a newly released node counts."""
    objs = generate_objects(7, 40, DEFAULT_NOW)
    state = full_build(objs)
    calls = {"n": 0}
    detail = compaction._released_detail

    def counting(st: ClusterState, node: Any) -> str | None:
        calls["n"] += 1
        return detail(st, node)

    monkeypatch.setattr(compaction, "_released_detail", counting)
    ops = build_ops(state, DEFAULT_NOW)
    assert len(state.pools) >= 3
    assert calls["n"] <= 2 * len(state.nodes)  # the engine's own scan of pool nodes, plus one pass
    i = next(i for i, o in enumerate(objs) if o["kind"] == "Node")
    name = objs[i]["metadata"]["name"]
    objs[i] = marked = copy.deepcopy(objs[i])
    marked["metadata"].setdefault("labels", {})[keys.SHOULD_DELETE] = keys.TRUE
    later = full_build(objs)
    pool = later.nodes[name].pool or ""
    figures = compaction_capacity(later, pool, [])
    assert figures != compaction_capacity(state, pool, [])
    assert figures[0].total == ops.compaction[pool].before.total - _totals(state, pool, name)
    monkeypatch.undo()
    assert build_ops(later, DEFAULT_NOW) == build_ops(ClusterState.build(later.snapshot), DEFAULT_NOW)


def _totals(state: ClusterState, pool: str, node: str) -> Any:
    from tftui.engine.state import Res

    t = state.compaction_sums.get(pool, {}).get(node)
    return Res(float(t[2]), float(t[3])) if t else Res()


def test_a_join_with_the_same_keys_looks_only_at_replaced_workloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The usual refresh (same GPUs, workers and workloads, a few views replaced): the join sums
    again only the workloads whose view was replaced, and equals a full join."""
    objs = generate_objects(8, 20, DEFAULT_NOW)
    cluster = Objects(objs)
    reader = StateReader()
    first = load(cluster, None, DEFAULT_NOW, reader=reader)
    i = next(i for i, o in enumerate(objs) if is_worker(o))
    objs[i] = noted = copy.deepcopy(objs[i])
    noted["metadata"]["annotations"]["note"] = "x"  # the same worker, a new view
    calls = {"n": 0}
    rolled = usage_module._rolled_up

    def counting(*args: Any) -> Any:
        calls["n"] += 1
        return rolled(*args)

    monkeypatch.setattr(usage_module, "_rolled_up", counting)
    second = load(cluster, None, DEFAULT_NOW + timedelta(seconds=1), reader=reader)
    assert list(second.state.workers) == list(first.state.workers)
    replaced = [k for k, v in second.state.workloads.items() if first.state.workloads.get(k) is not v]
    assert (
        calls["n"]
        <= len(second.state.nodes) + len(replaced)
        < len(second.state.nodes) + len(second.state.workloads)
    )
    full = UsageIndex.build(second.state, {}, {})
    for name in ("gpus", "nodes", "pools", "workers", "workloads"):
        assert list(getattr(second.usage, name)) == list(getattr(full, name)), name
        assert getattr(second.usage, name) == getattr(full, name), name
    assert all(second.usage.workers[k] is first.usage.workers[k] for k in second.state.workers)
    # a GPU whose capacity changed, same keys: a new entry for it, equal to a full join
    g = next(i for i, o in enumerate(objs) if o["kind"] == "GPU")
    objs[g] = bigger = copy.deepcopy(objs[g])
    bigger["status"]["capacity"]["tflops"] = "999"
    third = load(cluster, None, DEFAULT_NOW + timedelta(seconds=2), reader=reader)
    gname = bigger["metadata"]["name"]
    assert third.usage.gpus[gname] is not second.usage.gpus[gname]
    assert third.usage == UsageIndex.build(third.state, {}, {})


def test_plans_over_carried_values_equal_plans_over_fresh_states(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every compaction round and defrag step of a churny what-if run (evictions, arrivals,
    departures, releases), planned on the state the run derived (its per-node values carried from
    earlier states), equals the one planned on a state built afresh from the same objects."""
    defrag, compact = planning.plan_defrag, planning.plan_compaction
    seen = {"defrag": 0, "judged re-used": 0, "compaction": 0, "kept re-used": 0}

    def defrag_checked(state: ClusterState, pool: str, now: Any) -> Any:
        got = defrag(state, pool, now)
        assert got == defrag(ClusterState.build(list(state.snapshot.objects)), pool, now)
        seen["defrag"] += 1
        seen["judged re-used"] += state._node_basis(f"defrag-judged/{pool}") is not None
        return got

    def compaction_checked(state: ClusterState, pool: str, now: Any, **kw: Any) -> Any:
        got = compact(state, pool, now, **kw)
        assert got == compact(ClusterState.build(list(state.snapshot.objects)), pool, now, **kw)
        seen["compaction"] += 1
        seen["kept re-used"] += state._node_basis(f"compaction-keep/{pool}") is not None
        return got

    monkeypatch.setattr(planning, "plan_defrag", defrag_checked)
    monkeypatch.setattr(planning, "plan_compaction", compaction_checked)
    cfg = SimConfig(duration=timedelta(days=1), churn=0.5, seed=11)
    objects = generate_objects(7, 60, DEFAULT_NOW)
    res = simulate(objects, parse_policy("LowLoadFirst+defrag=60"), DEFAULT_NOW, cfg)
    assert res.evictions > 5 and res.arrivals > 5 and res.departures > 5 and res.releases > 0
    assert seen["defrag"] > 500 and seen["judged re-used"] > 100  # (judged only while a campaign runs)
    assert seen["compaction"] > 500 and seen["kept re-used"] > 100


def test_a_node_whose_kubernetes_node_changed_is_judged_again_though_its_gpus_did_not() -> None:
    """A value is re-used only while the node's own view is the same, not only its GPUs': a label
    put on the Kubernetes Node (here do-not-disrupt) makes a new node view over the same GPU views."""
    objs = generate_objects(6, 12, DEFAULT_NOW)
    state = ClusterState.build(list(objs))
    pool = sorted(state.pools)[0]
    scan = compaction._scan(state, state.pools[pool], {})
    name = next(n for n, keep in scan.keep.items() if keep is None or keep.reason != "do-not-disrupt")
    i = next(i for i, o in enumerate(objs) if o["kind"] == "Node" and o["metadata"]["name"] == name)
    objs[i] = labelled = copy.deepcopy(objs[i])
    labelled["metadata"].setdefault("labels", {})[keys.DO_NOT_DISRUPT] = keys.TRUE
    after = incremental.update_state(state, list(objs))
    assert all(after.gpus[g] is state.gpus[g] for g in after.nodes[name].gpus)  # the GPUs did not change
    keep = compaction._scan(after, after.pools[pool], {}).keep[name]
    assert keep is not None and keep.reason == "do-not-disrupt"
    assert keep == compaction._scan(ClusterState.build(list(objs)), after.pools[pool], {}).keep[name]
