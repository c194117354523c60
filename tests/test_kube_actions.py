"""The live adapter's writes against the in-process API server: every action reaching the API,
retries and conflicts, evictions and their PodDisruptionBudgets, and `settle` waiting for what a
write changed.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.kube_support import cache_matches_server, first, request
from tests.kube_support import kube as kube  # the fixture
from tests.kubeapi import Fault, KubeApiServer
from tests.waiting import eventually
from tftui.engine.plan import (
    AnnotateNode,
    AnnotatePod,
    DeleteGPUNodeClaim,
    Event,
    EvictPod,
    LabelNode,
    LabelPod,
    PatchPoolStatus,
    PatchWorkloadAutoscale,
)
from tftui.sources.kube import KubeCluster
from tftui.sources.ports import ActionError

# -- actions ---------------------------------------------------------------------------------------------


def test_every_action_reaches_the_api(kube: KubeCluster, server: KubeApiServer) -> None:
    node = first("Node")["metadata"]["name"]
    p = first("Pod")["metadata"]
    pool = first("GPUPool")["metadata"]["name"]
    claim = first("GPUNodeClaim")["metadata"]["name"]
    template = first("SchedulingConfigTemplate")["metadata"]["name"]
    kube.apply(LabelNode(node, {"tensor-fusion.ai/x": "1"}))
    kube.apply(AnnotateNode(node, {"tensor-fusion.ai/y": "2"}))
    kube.apply(LabelPod(p["namespace"], p["name"], {"l": "v"}))
    kube.apply(AnnotatePod(p["namespace"], p["name"], {"a": "v"}))
    kube.annotate_pool(pool, {"tensor-fusion.ai/manual-compaction": "2026-11-30T12:00:00Z"})
    kube.apply(PatchPoolStatus(pool, {"lastCompactionTime": "2026-11-30T12:00:00Z"}))
    kube.apply(DeleteGPUNodeClaim(claim))
    kube.patch_template_mode(template, "LowLoadFirst")
    wl = first(
        "TensorFusionWorkload",
        lambda o: bool(
            ((o["spec"].get("autoScalingConfig") or {}).get("autoSetResources") or {}).get("enable")
        ),
    )
    wl_ns, wl_name = wl["metadata"]["namespace"], wl["metadata"]["name"]
    kube.apply(PatchWorkloadAutoscale(wl_ns, wl_name, False))  # the console's toggle
    for _ in range(3):
        kube.apply(Event(f"GPUPool/{pool}", "Normal", "Compaction", "released 1 node"))
    n = server.get("Node", node)
    assert n and n["metadata"]["labels"]["tensor-fusion.ai/x"] == "1"
    assert n["metadata"]["annotations"]["tensor-fusion.ai/y"] == "2"
    po = server.get("Pod", p["name"], p["namespace"])
    assert po and po["metadata"]["labels"]["l"] == "v" and po["metadata"]["annotations"]["a"] == "v"
    gp = server.get("GPUPool", pool)
    assert gp and gp["metadata"]["annotations"]["tensor-fusion.ai/manual-compaction"]
    assert gp["status"]["lastCompactionTime"] == "2026-11-30T12:00:00Z"
    assert server.get("GPUNodeClaim", claim) is None
    tpl = server.get("SchedulingConfigTemplate", template)
    assert tpl and tpl["spec"]["placement"]["mode"] == "LowLoadFirst"
    toggled = server.get("TensorFusionWorkload", wl_name, wl_ns)
    assert toggled is not None
    asr = toggled["spec"]["autoScalingConfig"]["autoSetResources"]
    assert asr == {**wl["spec"]["autoScalingConfig"]["autoSetResources"], "enable": False}  # the rest kept
    eventually(lambda: cache_matches_server(kube, server))
    # events() reads the watched cache: the third series bump may arrive a moment after the call
    eventually(lambda: [e.get("series", {}).get("count") for e in kube.events()] == [3])
    (ev,) = kube.events()
    assert ev["regarding"]["name"] == pool and ev["series"]["count"] == 3 and ev["reason"] == "Compaction"


def patches(server: KubeApiServer, path: str) -> int:
    return server.stats.requests.get(f"PATCH {path}", 0)


def test_5xx_and_429_are_retried_and_applied_once(kube: KubeCluster, server: KubeApiServer) -> None:
    node = first("Node")["metadata"]["name"]
    path = f"/api/v1/nodes/{node}"
    server.inject(Fault(status=500, method="PATCH", path=path), Fault(status=429, method="PATCH", path=path))
    server.inject(Fault(status=503, method="PATCH", path=path))
    before = server.resource_version
    kube.apply(LabelNode(node, {"k": "v"}))
    assert patches(server, path) == 4
    assert server.resource_version == before + 1  # one write
    n = server.get("Node", node)
    assert n and n["metadata"]["labels"]["k"] == "v"


def test_409_rereads_then_retries(kube: KubeCluster, server: KubeApiServer) -> None:
    pool = first("GPUPool")["metadata"]["name"]
    path = f"/apis/tensor-fusion.ai/v1/gpupools/{pool}"
    server.inject(Fault(status=409, method="PATCH", path=path))
    kube.annotate_pool(pool, {"a": "b"})
    assert server.stats.requests.get(f"GET {path}") == 1
    assert patches(server, path) == 2


def test_409_whose_object_is_gone_on_reread_is_an_action_error(
    kube: KubeCluster, server: KubeApiServer
) -> None:
    """A conflict, then the re-read finds the pod gone (evicted meanwhile): ActionError 404 (the
    actuator counts a pod marker on a gone pod as done), never a raw client exception."""
    p = first("Pod", lambda o: bool(o["spec"].get("nodeName")))
    ns, name = p["metadata"]["namespace"], p["metadata"]["name"]
    path = f"/api/v1/namespaces/{ns}/pods/{name}"
    server.inject(Fault(status=409, method="PATCH", path=path), Fault(status=404, method="GET", path=path))
    with pytest.raises(ActionError) as err:
        kube.apply(LabelPod(ns, name, {"a": "b"}))
    assert err.value.status == 404 and err.value.args[0].startswith(f"patch pod {ns}/{name}: ")
    server.inject(Fault(status=409, method="PATCH", path=path), Fault(status=503, method="GET", path=path))
    kube.apply(LabelPod(ns, name, {"a": "b"}))  # a failing re-read is retried like the write
    assert (server.get("Pod", name, ns) or {})["metadata"]["labels"]["a"] == "b"


def test_validation_error_is_reported_once_and_not_retried(kube: KubeCluster, server: KubeApiServer) -> None:
    node = first("Node")["metadata"]["name"]
    with pytest.raises(ActionError) as err:
        kube.apply(LabelNode(node, {"k": "not a valid value!"}))
    assert err.value.status == 422 and "Invalid value" in str(err.value)
    assert patches(server, f"/api/v1/nodes/{node}") == 1


def test_lost_answer_does_not_create_an_event_twice(kube: KubeCluster, server: KubeApiServer) -> None:
    kube.request_timeout = 0.3
    server.inject(Fault(delay=0.6, method="POST", path="/events"))
    kube.apply(Event("GPUPool/demo-dev", "Warning", "DefragBlocked", "pdb"))
    eventually(
        lambda: server.stats.requests.get("POST /apis/events.k8s.io/v1/namespaces/default/events") == 2
    )
    time.sleep(0.5)
    assert len(server.objects("Event")) == 1


def covered_running_pod(server: KubeApiServer) -> tuple[dict[str, Any], dict[str, Any]]:
    """The demo's first PDB and a Running pod it covers (an eviction of it is checked and charged)."""
    pdb = first("PodDisruptionBudget")
    ns = pdb["metadata"]["namespace"]
    labels = pdb["spec"]["selector"].get("matchLabels") or {}
    running = next(
        o for o in server.objects("Pod")
        if o["metadata"].get("namespace") == ns
        and all(o["metadata"].get("labels", {}).get(k) == v for k, v in labels.items())
        and o.get("status", {}).get("phase") == "Running"
    )  # fmt: skip
    return pdb, running


def test_eviction_respects_the_pdb(kube: KubeCluster, server: KubeApiServer) -> None:
    pdb, running = covered_running_pod(server)
    ns = pdb["metadata"]["namespace"]
    name = running["metadata"]["name"]
    pdb_path = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{pdb['metadata']['name']}/status"
    request(server, "PATCH", pdb_path, {"status": {"disruptionsAllowed": 0}}, "application/merge-patch+json")
    with pytest.raises(ActionError) as err:
        kube.apply(EvictPod(ns, name))
    assert err.value.status == 429 and "disruption budget" in str(err.value)
    assert server.stats.requests.get(f"POST /api/v1/namespaces/{ns}/pods/{name}/eviction") == 1
    request(server, "PATCH", pdb_path, {"status": {"disruptionsAllowed": 1}}, "application/merge-patch+json")
    kube.apply(EvictPod(ns, name))
    assert server.get("Pod", name, ns) is None
    assert (server.get("PodDisruptionBudget", pdb["metadata"]["name"], ns) or {})["status"][
        "disruptionsAllowed"
    ] == 0
    with pytest.raises(ActionError) as gone:
        kube.apply(EvictPod(ns, name))
    assert gone.value.status == 404


def test_lost_eviction_answer_evicts_once(kube: KubeCluster, server: KubeApiServer) -> None:
    pdb = first("PodDisruptionBudget")
    ns, pdb_name = pdb["metadata"]["namespace"], pdb["metadata"]["name"]
    labels = pdb["spec"]["selector"].get("matchLabels") or {}
    name = next(
        o["metadata"]["name"] for o in server.objects("Pod")
        if o["metadata"].get("namespace") == ns and o.get("status", {}).get("phase") == "Running"
        and all(o["metadata"].get("labels", {}).get(k) == v for k, v in labels.items())
    )  # fmt: skip
    pdb_path = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{pdb_name}/status"
    request(server, "PATCH", pdb_path, {"status": {"disruptionsAllowed": 5}}, "application/merge-patch+json")
    kube.request_timeout = 0.3
    server.inject(Fault(delay=0.6, method="POST", path="/eviction"))
    kube.apply(EvictPod(ns, name))  # the first answer is lost; the retry (or its 404) succeeds
    eventually(lambda: server.stats.requests.get(f"POST /api/v1/namespaces/{ns}/pods/{name}/eviction") == 2)
    time.sleep(0.5)
    assert server.get("Pod", name, ns) is None
    assert (server.get("PodDisruptionBudget", pdb_name, ns) or {})["status"]["disruptionsAllowed"] == 4


def test_settle_waits_for_the_cache_to_show_a_write(kube: KubeCluster, server: KubeApiServer) -> None:
    pod = next(p for p in server.objects("Pod") if p["metadata"]["namespace"] == "research")
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    kube.apply(LabelPod(ns, name, {"team": "x"}))
    assert kube.settle(5)
    cached = next(p for p in kube.snapshot() if p["kind"] == "Pod" and p["metadata"]["name"] == name)
    assert cached["metadata"]["labels"]["team"] == "x"
    kube.apply(EvictPod(ns, name))
    assert kube.settle(5)
    assert not [p for p in kube.snapshot() if p["kind"] == "Pod" and p["metadata"]["name"] == name]


def test_a_pdb_with_an_empty_selector_covers_every_pod_of_its_namespace(
    kube: KubeCluster, server: KubeApiServer
) -> None:
    """As the API server's eviction handler since kubernetes#119732 (1.29, 1.28.3, 1.27.7): `{}`
    selects every pod of its namespace. Beside the pod's own PDB the eviction is refused (more than
    one PDB); alone, its budget is checked and charged, and tftui waits for that charge."""
    pdb, pod = covered_running_pod(server)
    ns, name = pdb["metadata"]["namespace"], pod["metadata"]["name"]
    everything = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "everything", "namespace": ns},
        "spec": {"selector": {}, "minAvailable": 0},
        "status": {"disruptionsAllowed": 0, "observedGeneration": 1},
    }
    server.seed([everything])
    with pytest.raises(ActionError) as err:
        kube.apply(EvictPod(ns, name))
    assert err.value.status == 500 and "more than one PodDisruptionBudget" in str(err.value)
    evictions = server.stats.requests.get(f"POST /api/v1/namespaces/{ns}/pods/{name}/eviction")
    assert evictions == 1  # refused for as long as both PDBs stay: not retried as a passing 5xx
    assert server.get("Pod", name, ns) is not None

    base = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
    request(server, "DELETE", f"{base}/{pdb['metadata']['name']}")
    assert kube.settle(5)
    with pytest.raises(ActionError) as err:
        kube.apply(EvictPod(ns, name))
    assert err.value.status == 429  # its budget alone, spent
    request(server, "PATCH", f"{base}/everything/status", {"status": {"disruptionsAllowed": 1}},
            "application/merge-patch+json")  # fmt: skip
    assert kube.settle(5)
    charged = kube._budget_charged(ns, name)
    assert charged is not None and charged[0] == "everything"  # what settle() waits for after the eviction
    kube.apply(EvictPod(ns, name))
    assert server.get("Pod", name, ns) is None
    assert (server.get("PodDisruptionBudget", "everything", ns) or {})["status"]["disruptionsAllowed"] == 0


def test_settle_does_not_wait_for_a_budget_an_unready_pod_leaves_alone(
    kube: KubeCluster, server: KubeApiServer
) -> None:
    """The eviction of an unready pod whose PDB has its desired healthy pods charges nothing: settle
    has no PDB change to wait for, and returns as soon as the pod is gone."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ev", "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]},
    }
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b", "namespace": "ev"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "minAvailable": 1},
        "status": {"disruptionsAllowed": 0, "desiredHealthy": 1, "currentHealthy": 1},
    }
    server.seed([pod, pdb])
    eventually(lambda: any(o["metadata"]["name"] == "p" for o in kube.cached("Pod")))
    kube.apply(EvictPod("ev", "p"))
    assert kube.settle(5)  # False after 5 s had it waited for a change of the PDB, which never comes


def test_a_budget_charge_that_never_comes_is_waited_for_once(
    kube: KubeCluster, server: KubeApiServer
) -> None:
    """The cache shows the pod Ready, the API server has seen it turn unready and evicts it without
    charging its PDB: the PDB never changes. The first settle waits for it and times out; the next
    ones do not wait for it again (a daemon tick would otherwise stall on it every time)."""
    pdb, pod = covered_running_pod(server)
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    pdb_path = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{pdb['metadata']['name']}/status"
    request(server, "PATCH", pdb_path, {"status": {"desiredHealthy": 1, "currentHealthy": 1}},
            "application/merge-patch+json")  # fmt: skip
    assert kube.settle(5)
    eventually(
        lambda: any(
            (o.get("status") or {}).get("desiredHealthy") == 1
            and o["metadata"]["name"] == pdb["metadata"]["name"]
            for o in kube.cached("PodDisruptionBudget")
        )
    )
    server.inject(Fault(delay=3.0, method="GET", path="/pods"))  # the pod watch lags from here on
    watches = server.stats.requests.get("GET /api/v1/pods?watch", 0)
    server.drop_watches()
    eventually(lambda: server.stats.requests.get("GET /api/v1/pods?watch", 0) > watches)
    unready = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    request(
        server,
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/{name}/status",
        unready,
        "application/merge-patch+json",
    )
    before = (server.get("PodDisruptionBudget", pdb["metadata"]["name"], ns) or {})["metadata"][
        "resourceVersion"
    ]
    kube.apply(EvictPod(ns, name))  # the cache still shows the pod Ready
    assert (server.get("PodDisruptionBudget", pdb["metadata"]["name"], ns) or {})["metadata"][
        "resourceVersion"
    ] == before  # not charged
    assert not kube.settle(1)  # waited for the charge, which never came
    eventually(lambda: not any(o["metadata"]["name"] == name for o in kube.cached("Pod")))  # the pod's delete
    assert kube.settle(1)  # nothing left to wait for


def test_settle_waits_for_the_budget_an_eviction_spent(kube: KubeCluster, server: KubeApiServer) -> None:
    """The API server charges the PDB of an evicted Running, Ready pod; that change arrives on another
    watch than the pod's deletion, and settle waits for both, so the next decision never counts the
    spent disruption as still allowed. The PDB watch is made to lag 1.5 s behind the pod's."""
    pdb, pod = covered_running_pod(server)
    ns, pdb_name = pdb["metadata"]["namespace"], pdb["metadata"]["name"]
    allowed = int(server.get("PodDisruptionBudget", pdb_name, ns)["status"]["disruptionsAllowed"])  # type: ignore[index]
    assert allowed >= 1
    watches = server.stats.requests.get("GET /apis/policy/v1/poddisruptionbudgets?watch", 0)
    server.inject(Fault(delay=1.5, method="GET", path="/poddisruptionbudgets"))
    server.drop_watches()
    eventually(
        lambda: server.stats.requests.get("GET /apis/policy/v1/poddisruptionbudgets?watch", 0) > watches
    )
    kube.apply(EvictPod(ns, pod["metadata"]["name"]))
    assert kube.settle(5)
    cached = next(
        o for o in kube.snapshot() if o["kind"] == "PodDisruptionBudget" and o["metadata"]["name"] == pdb_name
    )
    assert cached["status"]["disruptionsAllowed"] == allowed - 1
