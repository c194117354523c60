"""The shortcuts the what-if simulator takes for speed give exactly what the full computation gives:
the incremental status pass, the Pending-worker pools read from the scheduler's queue, and the
per-state pool GPU lists placement starts from."""

from __future__ import annotations

import contextlib
import json
import random
from datetime import timedelta
from typing import Any

from tftui.engine.plan import AnnotatePod, DeleteGPUNodeClaim, EvictPod, LabelPod, PatchWorkloadStatus
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.runtime.whatif import WhatIfCluster
from tftui.sources.ports import ActionError
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects


def _canonical(objs: list[dict[str, Any]]) -> str:
    return json.dumps(
        sorted(objs, key=lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])),
        sort_keys=True,
    )


def _workers(snap: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        o
        for o in snap
        if o["kind"] == "Pod"
        and (o["metadata"].get("labels") or {}).get(keys.COMPONENT) == keys.COMPONENT_WORKER
        and not o["metadata"].get("deletionTimestamp")
    ]


def test_incremental_status_pass_equals_a_full_one_after_every_step() -> None:
    sim = ActingSimCluster(seed=3, nodes=40, now=DEFAULT_NOW)
    rng = random.Random(1)
    evicted = claims_deleted = 0
    for _ in range(30):
        snap = sim.snapshot()
        workers = _workers(snap)
        for _ in range(rng.randrange(1, 5)):
            p = rng.choice(workers)
            try:
                sim.apply(EvictPod(p["metadata"]["namespace"], p["metadata"]["name"]))
                evicted += 1
            except ActionError:
                pass  # a PDB refused it
        claims = [
            o for o in snap if o["kind"] == "GPUNodeClaim" and not o["metadata"].get("deletionTimestamp")
        ]
        if claims and rng.random() < 0.2:
            sim.apply(DeleteGPUNodeClaim(rng.choice(claims)["metadata"]["name"]))
            claims_deleted += 1
        sim.advance(timedelta(seconds=rng.choice([5, 25, 40, 200, 700])))
        incremental = _canonical(sim.snapshot())
        sim.recompute_statuses()
        assert _canonical(sim.snapshot()) == incremental
    assert evicted > 20 and claims_deleted > 0  # the run did change pods and nodes


def test_incremental_status_pass_follows_workload_churn_and_pod_labels() -> None:
    """Workloads coming, going and scaled (their PDBs' expected pods change), defrag markers on
    pods (labels PDBs may select on) and resized requests: the incremental pass equals a full one."""
    sim = WhatIfCluster(generate_objects(5, 40, DEFAULT_NOW), DEFAULT_NOW, seed=5)
    rng = random.Random(2)
    state = sim.state()
    templates = [
        (wv.obj, state.workers[wv.workers[0]].obj)
        for wv in state.workloads.values()
        if wv.obj is not None and wv.workers
    ]
    changed = {"added": 0, "removed": 0, "labelled": 0, "resized": 0, "scaled": 0}
    for step in range(25):
        for i in range(rng.randrange(0, 3)):
            wl, pod = rng.choice(templates)
            sim.add_workload(wl, pod, f"{wl['metadata']['name'][:30]}-s{step}-{i}")
            changed["added"] += 1
        sim.schedule()
        snap = sim.snapshot()
        wls = [o for o in snap if o["kind"] == "TensorFusionWorkload"]
        changed["removed"] += sim.remove_workloads(
            (o["metadata"]["namespace"], o["metadata"]["name"]) for o in rng.sample(wls, 2)
        )
        wl = rng.choice([o for o in sim.snapshot() if o["kind"] == "TensorFusionWorkload"])
        replicas = (wl["spec"].get("replicas") or 1) + 1  # its PDB expects one more pod
        sim.patch(
            "TensorFusionWorkload",
            wl["metadata"]["name"],
            {"spec": {"replicas": replicas}},
            wl["metadata"]["namespace"],
        )
        changed["scaled"] += 1
        for p in rng.sample(_workers(sim.snapshot()), 3):
            ns, name = p["metadata"]["namespace"], p["metadata"]["name"]
            sim.apply(LabelPod(ns, name, {keys.DEFRAG_EVICTED: keys.TRUE}))
            sim.apply(AnnotatePod(ns, name, {keys.TFLOPS_REQUEST: "1"}))
            changed["labelled"] += 1
            changed["resized"] += 1
        sim.advance(timedelta(seconds=rng.choice([5, 25, 40, 200])))
        incremental = _canonical(sim.snapshot())
        sim.recompute_statuses()
        assert _canonical(sim.snapshot()) == incremental
    assert all(n > 10 for n in changed.values()), changed


def test_pending_pools_are_the_pools_of_the_states_pending_workers() -> None:
    sim = WhatIfCluster(generate_objects(7, 40, DEFAULT_NOW), DEFAULT_NOW, seed=7)
    state = sim.state()
    tpl_key = sorted(k for k, w in state.workloads.items() if w.obj is not None and w.workers)[0]
    wv = state.workloads[tpl_key]
    pod = state.workers[wv.workers[0]].obj
    assert wv.obj is not None
    for i in range(60):  # more than fit: some stay Pending
        sim.add_workload(wv.obj, pod, f"big-{i:03d}")
    sim.schedule()
    state = sim.state()
    expected: dict[str, set[str]] = {}
    for w in state.workers.values():
        if w.phase == "Pending" and not w.node and not w.terminating:
            message = ((w.obj.get("status") or {}).get("conditions") or [{}])[0].get("message", "")
            if "quota exceeded" not in message:  # those wait for quota, not for a node
                expected.setdefault(w.pool or "", set()).add(w.isolation)
    assert expected  # the check is not vacuous
    assert sim.pending_pools() == expected


def test_gpus_in_pool_is_the_pools_gpus_sorted_by_name() -> None:
    state = ClusterState.build(generate_objects(7, 40, DEFAULT_NOW))
    assert state.pools
    for pool in [*state.pools, "no-such-pool"]:
        expected = sorted((g for g in state.gpus.values() if g.pool == pool), key=lambda g: g.name)
        assert [g.name for g in state.gpus_in_pool(pool)] == [g.name for g in expected]


def test_incremental_status_pass_follows_workload_status_and_replica_changes() -> None:
    """Status-only workload patches (the autoscaler's, every tick) and pod annotation patches leave
    the PDBs alone; a replica change or an eviction re-counts them: after every step the
    incremental pass equals a full one."""
    sim = ActingSimCluster(seed=3, nodes=40, now=DEFAULT_NOW)
    rng = random.Random(2)
    snap = sim.snapshot()
    wls = [o for o in snap if o["kind"] == "TensorFusionWorkload"]
    pdb_expected = {
        o["metadata"]["name"]: (o.get("status") or {}).get("expectedPods")
        for o in snap
        if o["kind"] == "PodDisruptionBudget"
    }
    moved = 0
    for step in range(25):
        for _ in range(rng.randrange(3, 12)):
            wl = rng.choice(wls)["metadata"]
            cond = {"type": "ResourceUpdate", "status": "True", "reason": "R", "message": f"tick {step}"}
            sim.apply(PatchWorkloadStatus(wl["namespace"], wl["name"], {"conditions": [cond]}))
        for p in rng.sample(_workers(sim.snapshot()), 4):  # requests resized: no PDB reads them
            meta = p["metadata"]
            sim.apply(
                AnnotatePod(meta["namespace"], meta["name"], {keys.TFLOPS_REQUEST: str(rng.randrange(1, 9))})
            )
        if step % 2 == 1:  # a pod leaving: its PDBs count one healthy pod less
            p = rng.choice(_workers(sim.snapshot()))
            with contextlib.suppress(ActionError):  # a PDB may refuse it
                sim.apply(EvictPod(p["metadata"]["namespace"], p["metadata"]["name"]))
        if step % 3 == 0:
            wl = rng.choice(wls)["metadata"]
            sim.patch(
                "TensorFusionWorkload",
                wl["name"],
                {"spec": {"replicas": rng.randrange(1, 6)}},
                wl["namespace"],
            )
        sim.advance(timedelta(seconds=rng.choice([5, 40, 200])))
        incremental = _canonical(sim.snapshot())
        sim.recompute_statuses()
        full = sim.snapshot()
        assert _canonical(full) == incremental
        moved += any(
            (o.get("status") or {}).get("expectedPods") != pdb_expected.get(o["metadata"]["name"])
            for o in full
            if o["kind"] == "PodDisruptionBudget"
        )
    assert moved  # a replica change did reach a PDB's count


def test_a_pod_relabelled_out_of_its_pdbs_selector_is_recounted() -> None:
    """A label patch on a live pod (the same pod, new labels) moves it out of its PDB's selector:
    the incremental pass re-counts that PDB as a full pass does."""
    sim = ActingSimCluster(seed=3, nodes=40, now=DEFAULT_NOW)
    sim.recompute_statuses()
    snap = sim.snapshot()  # a full pass: the next one is incremental
    pdbs = [o for o in snap if o["kind"] == "PodDisruptionBudget"]
    for pdb in pdbs:
        ml = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        ns = pdb["metadata"]["namespace"]
        pods = [
            p
            for p in _workers(snap)
            if p["metadata"]["namespace"] == ns
            and ml
            and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in ml.items())
        ]
        if pods and (pdb.get("status") or {}).get("expectedPods"):
            break
    else:
        raise AssertionError("no PDB selecting a worker")
    key, value = next(iter(ml.items()))
    before = pdb["status"]["currentHealthy"]
    sim.apply(LabelPod(ns, pods[0]["metadata"]["name"], {key: value + "-elsewhere"}))
    incremental = sim.snapshot()
    got = next(
        o for o in incremental if o["kind"] == "PodDisruptionBudget" and o["metadata"] == pdb["metadata"]
    )
    assert got["status"]["currentHealthy"] == before - 1
    sim.recompute_statuses()
    assert _canonical(sim.snapshot()) == _canonical(incremental)


def test_recompute_statuses_is_a_full_pass_even_with_a_released_node_pending() -> None:
    """`recompute_statuses` is the reference the tests compare with: with a released node's GPUs as
    the only pending change (the status pass's shortcut), it still recomputes every status. A GPU's
    capacity changed in place (as no write does) is seen only by a full pass."""
    sim = ActingSimCluster(seed=3, nodes=40, now=DEFAULT_NOW)
    sim.recompute_statuses()
    snap = sim.snapshot()  # a full pass: the next ones may take the shortcut
    claim = next(o for o in snap if o["kind"] == "GPUNodeClaim")
    sim.apply(DeleteGPUNodeClaim(claim["metadata"]["name"]))
    sim.advance(timedelta(minutes=10))  # the node and its GPUs go
    key = next(k for k, o in sim._objs.items() if k[0] == "GPU" and o["status"].get("runningApps"))
    before = sim._objs[key]["status"]["available"]["tflops"]
    sim._objs[key]["status"]["capacity"]["tflops"] = "2000"
    sim.recompute_statuses()
    got = next(o for o in sim.snapshot() if o["kind"] == "GPU" and o["metadata"]["name"] == key[2])
    assert got["status"]["available"]["tflops"] != before
