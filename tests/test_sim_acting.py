"""The embedded cluster that acts (`ActingSimCluster`): every action kind, the Eviction API with PDBs,
replacements placed by the pool's placement mode, node removal after the provisioner's delay, the
cluster autoscaler, events, the clock, copy-on-write snapshots and status consistency.

`check_consistent` recomputes every derived status independently — GPU, GPUNode, GPUPool and cluster
figures from `ClusterState` (which reads only pods and capacities), PDB health from the pods — and
compares them with what the simulator reports; tests call it after every interesting step.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from tftui.engine.fit import Request, node_level_score, reject_reason
from tftui.engine.plan import (
    AnnotateNode,
    AnnotatePod,
    AnnotatePool,
    DeleteGPUNodeClaim,
    Event,
    EvictPod,
    LabelNode,
    LabelPod,
    PatchPoolStatus,
)
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.model.dump import validate_items
from tftui.model.quantity import quantity_float
from tftui.sources.ports import ActionError, WritableClusterPort
from tftui.sources.sim.acting import (
    AUTOSCALER_DELAY,
    EVICTION_GRACE,
    PROVISIONER_DELAY,
    READY_AFTER,
    ActingSimCluster,
)
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.sources.sim.usage import SimMetrics

JSON = dict[str, Any]
SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)


# -- helpers -----------------------------------------------------------------------------------------


def objs_of(sim: ActingSimCluster, kind: str) -> dict[str, JSON]:
    """`ns/name` (or `name`) → object of one kind in the current snapshot."""
    out = {}
    for o in sim.snapshot():
        if o["kind"] == kind:
            m = o["metadata"]
            out[f"{m['namespace']}/{m['name']}" if m.get("namespace") else m["name"]] = o
    return out


def pod(sim: ActingSimCluster, ns: str, name: str) -> JSON | None:
    return objs_of(sim, "Pod").get(f"{ns}/{name}")


def workers_of(sim: ActingSimCluster, ns: str, workload: str) -> list[JSON]:
    return [
        p
        for p in objs_of(sim, "Pod").values()
        if p["metadata"]["namespace"] == ns and p["metadata"].get("labels", {}).get(keys.WORKLOAD) == workload
    ]


def ready(p: JSON) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))


def approx(value: str, expected: float) -> bool:
    return math.isclose(quantity_float(value), expected, rel_tol=1e-9, abs_tol=1e-3)


def check_consistent(sim: ActingSimCluster) -> ClusterState:
    """Every reported status equals its independent recomputation; returns the state."""
    snap = sim.snapshot()
    validate_items(snap, "acting-sim")
    st = ClusterState.build(snap)
    assert not [w for w in st.warnings if "over-allocated" in w.message]
    for g in st.gpus.values():
        status = g.obj["status"]
        assert approx(status["available"]["tflops"], g.available.tflops), g.name
        assert approx(status["available"]["vram"], g.available.vram), g.name
        apps = {f"{a['namespace']}/{p['name']}" for a in status["runningApps"] for p in a["pods"]}
        assert apps == set(g.workers), g.name
    for n in st.nodes.values():
        status = n.obj["status"]
        assert approx(status["totalTFlops"], n.capacity.tflops) and approx(
            status["totalVRAM"], n.capacity.vram
        )
        assert approx(status["availableTFlops"], n.available.tflops), n.name
        assert approx(status["availableVRAM"], n.available.vram), n.name
        assert approx(status["virtualAvailableTFlops"], n.virtual_available.tflops), n.name
        assert approx(status["virtualAvailableVRAM"], n.virtual_available.vram), n.name
        assert status["totalGPUPods"] == len(n.workers) and status["totalGPUs"] == len(n.gpus)
    totals = Counter[str]()
    for p in st.pools.values():
        status = p.obj["status"]
        assert status["totalNodes"] == len(p.nodes) == status["readyNodes"], p.name
        assert status["totalGPUs"] == p.gpu_count and status["runningAppsCnt"] == p.worker_count, p.name
        assert approx(status["totalTFlops"], p.capacity.tflops) and approx(
            status["availableVRAM"], p.available.vram
        )
        assert approx(status["availableTFlops"], p.available.tflops), p.name
        totals.update(nodes=len(p.nodes), gpus=p.gpu_count)
    cluster = st.clusters[0]["status"]
    assert (cluster["totalNodes"], cluster["totalGPUs"]) == (totals["nodes"], totals["gpus"])
    for wl in st.workloads.values():
        if wl.obj is None:
            continue
        active = [w for w in st.workers_of_workload(wl.key) if not w.terminating]
        assert wl.obj["status"]["workerCount"] == len(active), wl.key
        assert wl.obj["status"]["readyWorkers"] == sum(ready(w.obj) for w in active), wl.key
    pods = [o for o in snap if o["kind"] == "Pod"]
    for pdb in st.pdbs:
        ns, sel = pdb["metadata"]["namespace"], pdb["spec"]["selector"]["matchLabels"]
        matched = [
            p
            for p in pods
            if p["metadata"]["namespace"] == ns
            and all(p["metadata"]["labels"].get(k) == v for k, v in sel.items())
        ]
        healthy = sum(
            1
            for p in matched
            if not p["metadata"].get("deletionTimestamp") and p["status"]["phase"] == "Running" and ready(p)
        )
        expected = st.workloads[f"{ns}/{sel[keys.WORKLOAD]}"].replicas
        assert expected is not None
        spec = pdb["spec"]
        desired = (
            spec["minAvailable"] if "minAvailable" in spec else max(0, expected - spec["maxUnavailable"])
        )
        status = pdb["status"]
        assert (status["currentHealthy"], status["expectedPods"], status["desiredHealthy"]) == (
            healthy,
            expected,
            desired,
        ), pdb["metadata"]["name"]
        assert status["disruptionsAllowed"] == max(0, healthy - desired)
    return st


def pdb_of(sim: ActingSimCluster, ns: str, workload: str) -> JSON:
    return objs_of(sim, "PodDisruptionBudget")[f"{ns}/{workload}-pdb"]


@pytest.fixture
def sim() -> ActingSimCluster:
    return ActingSimCluster()


# -- the port and the clock ----------------------------------------------------------------------------


def test_port_shape_and_clock(sim: ActingSimCluster) -> None:
    port: WritableClusterPort = sim
    assert port.describe() == "demo"
    assert json.dumps(port.snapshot()) == json.dumps(generate_objects())  # untouched = the demo
    assert port.events() == []
    assert sim.now() == DEFAULT_NOW == sim.clock() and sim.elapsed() == timedelta(0)
    sim.advance(90 * SEC)
    assert sim.clock() == DEFAULT_NOW + 90 * SEC and sim.elapsed() == 90 * SEC
    sim.advance_to(DEFAULT_NOW)  # never backwards
    assert sim.now() == DEFAULT_NOW + 90 * SEC
    with pytest.raises(ValueError):
        sim.advance(-SEC)
    later = ActingSimCluster(now=DEFAULT_NOW + timedelta(hours=3))
    assert later.now() == DEFAULT_NOW + timedelta(hours=3)
    check_consistent(sim)


def test_recomputed_statuses_equal_the_generated_ones(sim: ActingSimCluster) -> None:
    """The first recomputation after a change reproduces every generated status byte for byte."""
    before = generate_objects()
    sim.apply(LabelNode("dev-4090-05", {"team": "ml"}))
    after = sim.snapshot()
    changed = [f"{a['kind']}/{a['metadata']['name']}" for a, b in zip(before, after, strict=True) if a != b]
    assert changed == ["Node/dev-4090-05"]


def test_snapshots_are_copy_on_write(sim: ActingSimCluster) -> None:
    first = sim.snapshot()
    frozen = json.dumps(first)
    st = ClusterState.build(first)
    victim = next(w for w in st.workers.values() if w.pool == "demo-dev" and w.node == "dev-4090-01")
    sim.apply(LabelNode("dev-4090-01", {"x": "1"}))
    sim.apply(EvictPod(victim.namespace, victim.name))
    sim.apply(DeleteGPUNodeClaim(st.nodes["dev-4090-03"].claim or ""))
    sim.advance(5 * MIN)
    assert json.dumps(first) == frozen
    assert sim.snapshot() is not sim.snapshot()


# -- patches ---------------------------------------------------------------------------------------------


def test_labels_and_annotations_are_json_merge_patches(sim: ActingSimCluster) -> None:
    p = next(iter(objs_of(sim, "Pod").values()))
    ns, name = p["metadata"]["namespace"], p["metadata"]["name"]
    sim.apply(LabelNode("dev-4090-01", {"a": "1", "b": "2"}))
    sim.apply(LabelNode("dev-4090-01", {"a": None, "b": "3"}))
    sim.apply(AnnotateNode("dev-4090-01", {"note": "x"}))
    sim.apply(LabelPod(ns, name, {"l": "v"}))
    sim.apply(AnnotatePod(ns, name, {"n": "v", keys.QOS: None}))
    sim.apply(AnnotatePool("demo-dev", {keys.MANUAL_COMPACTION: "2026-11-30T12:00:00Z"}))
    node = objs_of(sim, "Node")["dev-4090-01"]
    assert "a" not in node["metadata"]["labels"] and node["metadata"]["labels"]["b"] == "3"
    assert node["metadata"]["annotations"]["note"] == "x"
    got = pod(sim, ns, name)
    assert got is not None and got["metadata"]["labels"]["l"] == "v"
    assert got["metadata"]["annotations"]["n"] == "v" and keys.QOS not in got["metadata"]["annotations"]
    assert objs_of(sim, "GPUPool")["demo-dev"]["metadata"]["annotations"][keys.MANUAL_COMPACTION]
    generation = sim.generation
    sim.apply(LabelNode("dev-4090-01", {"b": "3", "a": None}))  # no-op: nothing changes
    assert sim.generation == generation


@pytest.mark.parametrize(
    "action",
    [
        LabelNode("no-such-node", {"a": "1"}),
        AnnotateNode("no-such-node", {"a": "1"}),
        LabelPod("research", "no-such-pod", {"a": "1"}),
        AnnotatePod("research", "no-such-pod", {"a": "1"}),
        AnnotatePool("no-such-pool", {"a": "1"}),
        PatchPoolStatus("no-such-pool", {"a": "1"}),
        DeleteGPUNodeClaim("no-such-claim"),
        EvictPod("research", "no-such-pod"),
    ],
    ids=lambda a: a.kind,
)
def test_unknown_objects_are_404(sim: ActingSimCluster, action: Any) -> None:
    with pytest.raises(ActionError) as err:
        sim.apply(action)
    assert err.value.status == 404 and "not found" in str(err.value)


def test_patch_pool_status_merges(sim: ActingSimCluster) -> None:
    before = objs_of(sim, "GPUPool")["demo-dev"]["status"]
    sim.apply(
        PatchPoolStatus("demo-dev", {"lastDefragTime": "2026-11-30T08:00:00Z", "extra": {"a": 1, "b": 2}})
    )
    sim.apply(PatchPoolStatus("demo-dev", {"extra": {"a": None}}))
    after = objs_of(sim, "GPUPool")["demo-dev"]["status"]
    assert after["lastDefragTime"] == "2026-11-30T08:00:00Z" and after["extra"] == {"b": 2}
    assert {k: v for k, v in after.items() if k not in ("lastDefragTime", "extra")} == before
    check_consistent(sim)


def test_events_are_recorded_with_series(sim: ActingSimCluster) -> None:
    ev = Event("GPUPool/demo-dev", "Normal", "Compaction", "Node dev-4090-03 is empty")
    sim.apply(ev)
    sim.advance(MIN)
    sim.apply(ev)
    sim.apply(Event("GPUPool/demo-dev", "Warning", "DefragAbortNode", "node x: eviction aborted"))
    (first, second) = sim.events()
    assert first["regarding"] == {"kind": "GPUPool", "name": "demo-dev"}
    assert (first["reason"], first["note"], first["type"]) == ("Compaction", ev.message, "Normal")
    assert first["eventTime"] == "2026-11-30T12:00:00.000000Z"
    assert first["series"] == {"count": 2, "lastObservedTime": "2026-11-30T12:01:00.000000Z"}
    assert second["type"] == "Warning" and "series" not in second
    sim.advance(6 * MIN)  # beyond the 5-minute series window: a new event
    sim.apply(ev)
    assert len(sim.events()) == 3 and "series" not in sim.events()[-1]


# -- the Eviction API, replacements and the scheduler -------------------------------------------------------


def test_eviction_refused_by_pdb_is_429(sim: ActingSimCluster) -> None:
    """gemma2-27b-chat: one replica, minAvailable 1 → disruptionsAllowed 0."""
    (p,) = workers_of(sim, "ml-serving", "gemma2-27b-chat")
    assert pdb_of(sim, "ml-serving", "gemma2-27b-chat")["status"]["disruptionsAllowed"] == 0
    with pytest.raises(ActionError) as err:
        sim.apply(EvictPod("ml-serving", p["metadata"]["name"]))
    assert err.value.status == 429
    assert str(err.value).endswith("Cannot evict pod as it would violate the pod's disruption budget.")
    assert pod(sim, "ml-serving", p["metadata"]["name"]) == p  # untouched


def test_eviction_spends_the_budget_then_replaces_the_pod(sim: ActingSimCluster) -> None:
    """e5-large-embed: two replicas, maxUnavailable 1: one eviction passes, the second is refused
    until the replacement is Ready; the evicted pod is gone after its 30 s grace period."""
    a, b = sorted(workers_of(sim, "recsys", "e5-large-embed"), key=lambda p: p["metadata"]["name"])
    assert pdb_of(sim, "recsys", "e5-large-embed")["status"]["disruptionsAllowed"] == 1
    sim.apply(EvictPod("recsys", a["metadata"]["name"]))
    evicted = pod(sim, "recsys", a["metadata"]["name"])
    assert evicted is not None and evicted["metadata"]["deletionTimestamp"] == "2026-11-30T12:00:30Z"
    assert pdb_of(sim, "recsys", "e5-large-embed")["status"]["disruptionsAllowed"] == 0
    with pytest.raises(ActionError) as err:
        sim.apply(EvictPod("recsys", b["metadata"]["name"]))
    assert err.value.status == 429
    sim.apply(EvictPod("recsys", a["metadata"]["name"]))  # evicting a terminating pod again is fine
    pods = workers_of(sim, "recsys", "e5-large-embed")
    (new,) = [p for p in pods if p["metadata"]["name"] not in (a["metadata"]["name"], b["metadata"]["name"])]
    name = new["metadata"]["name"]
    assert name.startswith("e5-large-embed-tf-worker-") and len(name) == len("e5-large-embed-tf-worker-") + 5
    assert new["spec"]["nodeName"] and new["metadata"]["annotations"][keys.GPU_IDS]
    assert new["metadata"]["ownerReferences"] == a["metadata"]["ownerReferences"]
    same = {k: v for k, v in a["metadata"]["annotations"].items() if k != keys.GPU_IDS}
    assert {k: v for k, v in new["metadata"]["annotations"].items() if k != keys.GPU_IDS} == same
    assert new["metadata"]["creationTimestamp"] == "2026-11-30T12:00:00Z" and not ready(new)
    check_consistent(sim)
    sim.advance(READY_AFTER)
    replacement = pod(sim, "recsys", name)
    assert replacement is not None and ready(replacement)
    assert pod(sim, "recsys", a["metadata"]["name"]) is not None  # still terminating
    assert pdb_of(sim, "recsys", "e5-large-embed")["status"]["disruptionsAllowed"] == 1
    sim.advance(EVICTION_GRACE - READY_AFTER)
    assert pod(sim, "recsys", a["metadata"]["name"]) is None
    assert len(workers_of(sim, "recsys", "e5-large-embed")) == 2
    check_consistent(sim)


def test_two_pdbs_are_a_500() -> None:
    objs = generate_objects()
    extra = copy.deepcopy(next(o for o in objs if o["kind"] == "PodDisruptionBudget"))
    extra["metadata"]["name"] += "-twin"
    sim = ActingSimCluster(objects=[*objs, extra])
    ns, wl = extra["metadata"]["namespace"], extra["spec"]["selector"]["matchLabels"][keys.WORKLOAD]
    victim = workers_of(sim, ns, wl)[0]
    with pytest.raises(ActionError) as err:
        sim.apply(EvictPod(ns, victim["metadata"]["name"]))
    assert err.value.status == 500 and "more than one PodDisruptionBudget" in str(err.value)


def _dev_victim(st: ClusterState) -> tuple[str, str, str]:
    """A single-GPU, soft-isolation dev worker on dev-4090-01 whose eviction the PDBs allow."""
    for w in sorted(st.workers.values(), key=lambda w: w.key):
        ann = w.obj["metadata"]["annotations"]
        if w.node == "dev-4090-01" and w.gpu_count == 1 and ann.get(keys.ISOLATION) == "soft":
            return w.namespace, w.name, w.key
    raise AssertionError("no dev victim")


def _packing_score(st: ClusterState, node: str) -> int:
    """The scheduler's node score in the packing modes (mean of the GPUs' CompactFirst scores)."""
    gpus = st.gpus_of(node)
    return sum(node_level_score("CompactFirst", g.capacity, g.available) for g in gpus) // len(gpus)


@pytest.mark.parametrize("mode", ["CompactFirst", "LowLoadFirst", "NodeCompactGPULowLoad"])
def test_replacement_is_placed_by_the_pool_mode(mode: str) -> None:
    sim = ActingSimCluster()
    sim.patch("SchedulingConfigTemplate", "dev-spread", {"spec": {"placement": {"mode": mode}}})
    st = ClusterState.build(sim.snapshot())
    ns, name, key = _dev_victim(st)
    req = Request.of_worker(st.workers[key])
    sim.apply(EvictPod(ns, name))
    (new,) = [
        p
        for p in workers_of(sim, ns, st.workers[key].workload or "")
        if p["metadata"]["name"] not in {w.name for w in st.workers.values()}
    ]
    node, gpu = new["spec"]["nodeName"], new["metadata"]["annotations"][keys.GPU_IDS]
    # nodes where the worker fits, scored as the scheduler's modes define "busy" and "empty"
    fits = {
        n.name
        for n in st.nodes_of("demo-dev")
        if not n.unschedulable and any(reject_reason(g, g.available, req) is None for g in st.gpus_of(n.name))
    }
    assert node in fits
    if mode == "LowLoadFirst":  # the emptiest node: an idle one, ties by name
        assert node == "dev-4090-03" and not st.nodes["dev-4090-03"].workers
    else:  # packing: the node the CompactFirst node score ranks first, never an empty one
        assert st.nodes[node].workers
        assert _packing_score(st, node) == max(_packing_score(st, n) for n in fits)
        free = [g for g in st.gpus_of(node) if reject_reason(g, g.available, req) is None]
        pick = (max if mode == "CompactFirst" else min)(
            free,
            key=lambda g: (
                g.allocated.vram * 0.7 / g.capacity.vram + g.allocated.tflops * 0.3 / g.capacity.tflops
            ),
        )
        assert gpu == pick.name
    check_consistent(sim)


def test_nothing_fits_stays_pending_until_room_appears(sim: ActingSimCluster) -> None:
    st = ClusterState.build(sim.snapshot())
    ns, name, key = _dev_victim(st)
    for n in st.nodes_of("demo-dev"):
        sim.patch("Node", n.name, {"spec": {"unschedulable": True}})
    sim.apply(EvictPod(ns, name))
    sim.advance(2 * MIN)  # the evicted pod is gone, its GPUs are free, but every node is cordoned
    assert pod(sim, ns, name) is None
    (new,) = [p for p in workers_of(sim, ns, st.workers[key].workload or "") if not p["spec"].get("nodeName")]
    assert new["status"]["phase"] == "Pending"
    (cond,) = new["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("PodScheduled", "False", "Unschedulable")
    assert "unschedulable" in cond["message"]
    after = check_consistent(sim)
    assert after.workers[f"{ns}/{new['metadata']['name']}"].node is None
    sim.patch("Node", "dev-4090-05", {"spec": {"unschedulable": None}})
    bound = pod(sim, ns, new["metadata"]["name"])
    assert bound is not None and bound["spec"]["nodeName"] == "dev-4090-05"
    check_consistent(sim)


# -- node removal ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node", "pool", "mode"),
    [("dev-4090-03", "demo-dev", "Karpenter"), ("train-a100-02", "demo-training", "Provisioned")],
)
def test_claim_deletion_removes_the_node_after_the_provisioner_delay(
    sim: ActingSimCluster, node: str, pool: str, mode: str
) -> None:
    st = ClusterState.build(sim.snapshot())
    claim = st.nodes[node].claim or ""
    gpus = set(st.nodes[node].gpus)
    pool_before = objs_of(sim, "GPUPool")[pool]["status"]
    sim.apply(DeleteGPUNodeClaim(claim))
    sim.apply(DeleteGPUNodeClaim(claim))  # idempotent
    assert objs_of(sim, "GPUNodeClaim")[claim]["metadata"]["deletionTimestamp"] == "2026-11-30T12:00:00Z"
    assert objs_of(sim, "Node")[node]["spec"]["unschedulable"] is True
    sim.advance(PROVISIONER_DELAY[mode] - SEC)
    assert node in objs_of(sim, "GPUNode")
    sim.advance(SEC)
    assert node not in objs_of(sim, "GPUNode") and node not in objs_of(sim, "Node")
    assert claim not in objs_of(sim, "GPUNodeClaim") and not gpus & set(objs_of(sim, "GPU"))
    pool_after = objs_of(sim, "GPUPool")[pool]["status"]
    assert pool_after["totalNodes"] == pool_before["totalNodes"] - 1
    assert pool_after["totalGPUs"] == pool_before["totalGPUs"] - len(gpus)
    check_consistent(sim)


def test_busy_node_removed_with_its_workers_replaced(sim: ActingSimCluster) -> None:
    st = ClusterState.build(sim.snapshot())
    victims = {st.workers[w].name for w in st.nodes["dev-4090-05"].workers}
    sim.apply(DeleteGPUNodeClaim(st.nodes["dev-4090-05"].claim or ""))
    sim.advance(PROVISIONER_DELAY["Karpenter"])
    after = check_consistent(sim)
    assert "dev-4090-05" not in after.nodes and not victims & {w.name for w in after.workers.values()}
    assert len(after.workers) == len(st.workers)  # every lost worker has a replacement
    assert all(w.node != "dev-4090-05" for w in after.workers.values())


def test_autoscaler_removes_should_delete_nodes_once_empty(sim: ActingSimCluster) -> None:
    sim.apply(LabelNode("inf-l40s-06", {keys.SHOULD_DELETE: keys.TRUE}))  # empty AutoSelect node
    sim.apply(LabelNode("inf-l40s-01", {keys.SHOULD_DELETE: keys.TRUE}))  # still has workers
    sim.advance(AUTOSCALER_DELAY - SEC)
    assert {"inf-l40s-06", "inf-l40s-01"} <= set(objs_of(sim, "GPUNode"))
    sim.advance(SEC)
    assert "inf-l40s-06" not in objs_of(sim, "GPUNode") and "inf-l40s-06" not in objs_of(sim, "Node")
    sim.advance(3 * AUTOSCALER_DELAY)
    assert "inf-l40s-01" in objs_of(sim, "GPUNode")  # the autoscaler does not drain
    assert objs_of(sim, "GPUPool")["demo-inference"]["status"]["totalNodes"] == 13
    check_consistent(sim)


# -- determinism and metrics -------------------------------------------------------------------------------------


def _script(sim: ActingSimCluster) -> str:
    st = ClusterState.build(sim.snapshot())
    for w in sorted(st.workers.values(), key=lambda w: w.key)[::7]:
        with contextlib.suppress(ActionError):  # some budgets refuse: part of the script
            sim.apply(EvictPod(w.namespace, w.name))
        sim.advance(17 * SEC)
    sim.apply(DeleteGPUNodeClaim(st.nodes["dev-4090-04"].claim or ""))
    sim.advance(10 * MIN)
    return json.dumps([sim.snapshot(), sim.events()], sort_keys=True)


def test_same_seed_same_outcome() -> None:
    assert _script(ActingSimCluster(seed=7)) == _script(ActingSimCluster(seed=7))


def test_statuses_stay_consistent_through_many_evictions(sim: ActingSimCluster) -> None:
    _script(sim)
    st = check_consistent(sim)
    assert "dev-4090-04" not in st.nodes
    assert sum(1 for w in st.workers.values() if w.node is None) <= 3  # a few may not fit anywhere


def test_sim_metrics_rebuild_serves_replacements(sim: ActingSimCluster) -> None:
    (a, _) = sorted(workers_of(sim, "recsys", "e5-large-embed"), key=lambda p: p["metadata"]["name"])
    sim.apply(EvictPod("recsys", a["metadata"]["name"]))
    sim.advance(3 * MIN)
    metrics = SimMetrics(sim.snapshot(), sim.seed, now=sim.now())
    usage = metrics.latest_worker_usage(sim.now())
    names = {p["metadata"]["name"] for p in workers_of(sim, "recsys", "e5-large-embed")}
    assert a["metadata"]["name"] not in names
    assert {n for (ns, n) in usage if ns == "recsys"} >= names


def test_a_batch_runs_one_scheduler_pass_at_its_end(
    sim: ActingSimCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Actions applied inside `batch()` (an autoscale tick's patches) leave Pending workers to one
    scheduler pass when the batch ends; outside a batch every action is followed by one."""
    passes = 0
    real = ActingSimCluster._schedule_pending

    def counted(self: ActingSimCluster) -> None:
        nonlocal passes
        passes += 1
        real(self)

    monkeypatch.setattr(ActingSimCluster, "_schedule_pending", counted)
    pods = [o for o in sim.snapshot() if o["kind"] == "Pod"][:3]
    with sim.batch():
        for i, pod in enumerate(pods):
            sim.apply(AnnotatePod(pod["metadata"]["namespace"], pod["metadata"]["name"], {"x/batch": str(i)}))
        assert passes == 0
        with sim.batch():  # nested: still one pass, at the outer end
            sim.apply(
                AnnotatePod(pods[0]["metadata"]["namespace"], pods[0]["metadata"]["name"], {"x/b": "1"})
            )
        assert passes == 0
    assert passes == 1
    sim.apply(AnnotatePod(pods[0]["metadata"]["namespace"], pods[0]["metadata"]["name"], {"x/b": "2"}))
    assert passes == 2
    got = {
        o["metadata"]["name"]: o["metadata"].get("annotations") or {}
        for o in sim.snapshot()
        if o["kind"] == "Pod"
    }
    assert [got[p["metadata"]["name"]].get("x/batch") for p in pods] == ["0", "1", "2"]
