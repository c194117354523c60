"""The in-process test API server's own semantics (tests/kubeapi), as the live adapter relies on
them: pagination, finalizers and eviction grace, CRD pruning, defaults and schema checks, discovery,
leases and events, and the Eviction subresource's PodDisruptionBudget checks.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.kube_support import first, pod, request
from tests.kubeapi import KubeApiServer
from tests.kubeapi.schema import schema_errors
from tests.waiting import eventually

# -- lists and deletes ---------------------------------------------------------------------------


def test_server_pagination_tokens(server: KubeApiServer) -> None:
    _, page = request(server, "GET", "/api/v1/pods?limit=7")
    assert len(page["items"]) == 7 and page["metadata"]["remainingItemCount"] > 0
    token, rv = page["metadata"]["continue"], page["metadata"]["resourceVersion"]
    request(server, "POST", "/api/v1/namespaces/churn/pods", pod("not-in-this-list"))
    names = [p["metadata"]["name"] for p in page["items"]]
    while token:
        _, page = request(server, "GET", f"/api/v1/pods?limit=50&continue={token}")
        assert page["metadata"]["resourceVersion"] == rv  # one snapshot for every page
        names += [p["metadata"]["name"] for p in page["items"]]
        token = page["metadata"].get("continue")
    assert "not-in-this-list" not in names and len(names) == len(server.objects("Pod")) - 1
    assert len(set(names)) == len(names)
    status, err = request(server, "GET", "/api/v1/pods?continue=%21%21")
    assert status == 400 and err["reason"] == "BadRequest"
    _, page = request(server, "GET", "/api/v1/pods?limit=1")
    server.compact()
    status, err = request(server, "GET", f"/api/v1/pods?limit=1&continue={page['metadata']['continue']}")
    assert status == 410 and err["reason"] == "Expired"


def test_server_finalizers_and_eviction_grace(tmp_path: Path) -> None:
    with KubeApiServer(finalizers=True) as srv:
        held = {**pod("held"), "metadata": {**pod("held")["metadata"], "finalizers": ["example.com/f"]}}
        request(srv, "POST", "/api/v1/namespaces/churn/pods", held)
        status, body = request(srv, "DELETE", "/api/v1/namespaces/churn/pods/held")
        assert status == 200 and body["metadata"]["deletionTimestamp"]
        kept = srv.get("Pod", "held", "churn")
        assert kept is not None and kept["metadata"]["deletionTimestamp"]
        request(srv, "PATCH", "/api/v1/namespaces/churn/pods/held", {"metadata": {"labels": {"a": "b"}}},
                "application/merge-patch+json")  # fmt: skip
        assert srv.get("Pod", "held", "churn") is not None  # still held by its finalizer
        request(srv, "PATCH", "/api/v1/namespaces/churn/pods/held", {"metadata": {"finalizers": None}},
                "application/merge-patch+json")  # fmt: skip
        assert srv.get("Pod", "held", "churn") is None

        srv.eviction_grace = 0.3
        request(srv, "POST", "/api/v1/namespaces/churn/pods", pod("evicted"))
        ev = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "evicted"}}
        status, _ = request(srv, "POST", "/api/v1/namespaces/churn/pods/evicted/eviction", ev)
        assert status == 201
        terminating = srv.get("Pod", "evicted", "churn")
        assert terminating is not None and terminating["metadata"]["deletionGracePeriodSeconds"] == 1
        assert terminating["metadata"]["deletionTimestamp"]
        status, _ = request(srv, "POST", "/api/v1/namespaces/churn/pods/evicted/eviction", ev)
        assert status == 201  # evicting a terminating pod is a no-op success
        eventually(lambda: srv.get("Pod", "evicted", "churn") is None, timeout=5)


# -- the server's CRD semantics -------------------------------------------------------------------------


def test_crd_pruning_defaults_and_status_subresource(server: KubeApiServer) -> None:
    pool = {
        "apiVersion": "tensor-fusion.ai/v1",
        "kind": "GPUPool",
        "metadata": {"name": "p"},
        "spec": {
            "bogus": 1,
            "capacityConfig": {"oversubscription": {}},
            "nodeManagerConfig": {"nodeCompaction": {}},
        },
        "status": {"phase": "Running"},
    }
    status, obj = request(server, "POST", "/apis/tensor-fusion.ai/v1/gpupools", pool)
    assert status == 201, obj
    assert "bogus" not in obj["spec"] and "status" not in obj  # pruned; status ignored on create
    assert obj["spec"]["capacityConfig"]["oversubscription"]["tflopsOversellRatio"] == 500
    assert obj["spec"]["nodeManagerConfig"]["nodeCompaction"]["period"] == "5m"
    mp = "application/merge-patch+json"
    _, obj = request(
        server,
        "PATCH",
        "/apis/tensor-fusion.ai/v1/gpupools/p",
        {"status": {"phase": "X"}, "metadata": {"labels": {"a": "b"}}},
        mp,
    )
    assert "status" not in obj and obj["metadata"]["labels"] == {"a": "b"}
    full = {
        "phase": "Running",
        "componentStatus": {},
        "readyNodes": 1,
        "notReadyNodes": 0,
        **{f: "10" for f in ("availableTFlops", "totalTFlops", "virtualTFlops")},
        **{f: "1Gi" for f in ("availableVRAM", "totalVRAM", "virtualVRAM")},
    }
    _, obj = request(
        server,
        "PATCH",
        "/apis/tensor-fusion.ai/v1/gpupools/p/status",
        {"status": full, "metadata": {"labels": {"a": "c"}}},
        mp,
    )
    assert obj["status"]["phase"] == "Running" and obj["metadata"]["labels"] == {"a": "b"}
    stale = dict(obj, metadata={**obj["metadata"], "resourceVersion": "1"})
    status, err = request(server, "PUT", "/apis/tensor-fusion.ai/v1/gpupools/p", stale)
    assert status == 409 and "the object has been modified" in err["message"]


def test_discovery_selectors_and_410(server: KubeApiServer) -> None:
    _, apis = request(server, "GET", "/apis")
    assert "tensor-fusion.ai" in {g["name"] for g in apis["groups"]}
    _, res = request(server, "GET", "/apis/tensor-fusion.ai/v1")
    scopes = {r["name"]: r["namespaced"] for r in res["resources"]}
    assert scopes["gpupools"] is False and scopes["tensorfusionworkloads"] is True and "gpus/status" in scopes
    node = first("Pod", lambda o: bool(o["spec"].get("nodeName")))["spec"]["nodeName"]
    _, pods = request(server, "GET", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node}")
    assert pods["items"] and all(p["spec"]["nodeName"] == node for p in pods["items"])
    assert "kind" not in pods["items"][0]  # as the real API: list items carry no kind
    _, sel = request(server, "GET", "/api/v1/pods?labelSelector=tensor-fusion.ai/component%3Dworker")
    assert sel["items"] and len(sel["items"]) < len(server.objects("Pod"))
    server.compact()
    with urllib.request.urlopen(server.url + "/api/v1/nodes?watch=1&resourceVersion=2", timeout=5) as resp:
        line = json.loads(resp.readline())
    assert line["type"] == "ERROR" and line["object"]["code"] == 410


def test_leases_and_events_are_served(server: KubeApiServer) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "tftui-leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    path = "/apis/coordination.k8s.io/v1/namespaces/tftui/leases"
    status, created = request(server, "POST", path, lease)
    assert status == 201 and created["metadata"]["namespace"] == "tftui"
    status, _ = request(server, "POST", path, lease)
    assert status == 409
    mine = dict(created, spec={"holderIdentity": "b", "leaseDurationSeconds": 15})
    status, updated = request(server, "PUT", f"{path}/tftui-leader", mine)
    assert status == 200 and updated["spec"]["holderIdentity"] == "b"
    status, err = request(server, "PUT", f"{path}/tftui-leader", mine)  # stale resourceVersion
    assert status == 409 and err["reason"] == "Conflict"
    _, lst = request(server, "GET", "/apis/events.k8s.io/v1/events")
    assert lst["kind"] == "EventList" and lst["items"] == []


@pytest.mark.parametrize(
    ("pod_status", "pdb_status", "code", "charged"),
    [
        ({"phase": "Succeeded"}, {"disruptionsAllowed": 0}, None, False),  # a finished pod: no PDB check
        ({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]},
         {"disruptionsAllowed": 0, "desiredHealthy": 1, "currentHealthy": 1}, None, False),  # unready
        ({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
         {"disruptionsAllowed": 1, "observedGeneration": 1}, 429, False),  # the PDB's status lags (gen 2)
        ({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
         {"disruptionsAllowed": -1, "observedGeneration": 2}, 403, False),
        ({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
         {"disruptionsAllowed": 1, "observedGeneration": 2}, None, True),
    ],
)  # fmt: skip
def test_the_eviction_handler_checks_a_pdb_as_kubernetes_does(
    server: KubeApiServer,
    pod_status: dict[str, Any],
    pdb_status: dict[str, Any],
    code: int | None,
    charged: bool,
) -> None:
    """The stand-in's Eviction subresource, against Kubernetes' eviction handler: which pods skip
    the PDB check, when a budget is charged, and which refusals carry which status code."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ev", "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c"}]},
        "status": pod_status,
    }
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b", "namespace": "ev", "generation": 2},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "minAvailable": 1},
        "status": pdb_status,
    }
    server.seed([pod, pdb])
    status, _ = request(server, "POST", "/api/v1/namespaces/ev/pods/p/eviction",
                        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "ev"}})  # fmt: skip
    assert (status if status >= 400 else None) == code
    assert (server.get("Pod", "p", "ev") is None) == (code is None)
    left = (server.get("PodDisruptionBudget", "b", "ev") or {})["status"]
    assert left.get("disruptionsAllowed") == pdb_status["disruptionsAllowed"] - (1 if charged else 0)
    assert ("p" in (left.get("disruptedPods") or {})) == charged


def test_writes_are_checked_against_the_crd_schema(server: KubeApiServer) -> None:
    """A write whose result breaks the CRD's schema is refused with 422 Invalid naming each field,
    as a real API server does; a value the write did not change is not held against it (validation
    ratcheting), so an object stored before a schema change still takes other patches."""
    gpu = first("GPU")
    name = gpu["metadata"]["name"]
    path = f"/apis/tensor-fusion.ai/v1/gpus/{name}/status"
    mp = "application/merge-patch+json"
    bad = {"status": {"capacity": {"tflops": "lots"}, "phase": "Burning"}}
    status, err = request(server, "PATCH", path, bad, mp)
    assert status == 422 and err["reason"] == "Invalid", err
    fields = {c["field"] for c in err["details"]["causes"]}
    assert fields == {"status.capacity.tflops", "status.phase"}, err
    assert f'GPU.tensor-fusion.ai "{name}" is invalid: [' in err["message"]
    assert server.get("GPU", name)["status"] == gpu["status"]  # type: ignore[index]  # nothing written
    status, err = request(server, "PATCH", path, {"status": {"usedBy": 7}}, mp)
    assert status == 422 and "status.usedBy: Invalid value: 7 is not of type 'string'" in err["message"]
    # stored with a value the schema refuses (seeded, as a cluster may hold from an older schema)
    server.seed([{**gpu, "status": {**gpu["status"], "phase": "Burning"}}])
    status, obj = request(server, "PATCH", path, {"status": {"message": "ok"}}, mp)
    assert status == 200 and obj["status"]["phase"] == "Burning" and obj["status"]["message"] == "ok", obj
    status, err = request(server, "PATCH", path, {"status": {"phase": "Melting"}}, mp)
    assert status == 422 and "status.phase" in err["message"]  # a changed value is checked


def test_the_demo_holds_only_what_an_api_server_would_store(server: KubeApiServer) -> None:
    """Every custom resource of the demo (seeded as a cluster holds it) passes its CRD's schema, as
    a real API server checks what TensorFusion writes: conditions whole, a percent workload with its
    zero `tflops`, a pool status with its `componentStatus` (each was missing before)."""
    kinds = {rt.kind: rt for rt in server.types if rt.schema is not None}
    checked = 0
    for obj in server.objects():
        rt = kinds.get(obj["kind"])
        if rt is not None and rt.schema is not None:
            assert list(schema_errors(rt.schema, obj)) == [], (obj["kind"], obj["metadata"]["name"])
            checked += 1
    assert checked >= 40 and {"GPU", "GPUNode", "GPUPool", "TensorFusionWorkload"} <= {
        o["kind"] for o in server.objects() if o["kind"] in kinds
    }
