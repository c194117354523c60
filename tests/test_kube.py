"""The live adapter (`tftui.sources.kube`) against the in-process API server, through the real client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.kubeapi import Fault, KubeApiServer, write_kubeconfig
from tests.kubeapi.schema import schema_errors
from tests.kubeapi.server import CRD_DIR
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
from tftui.engine.planning import plan_cluster
from tftui.engine.state import ClusterState
from tftui.model.dump import load, validate_items
from tftui.sources.kube import KubeCluster
from tftui.sources.ports import ActionError, SourceError
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects

ROOT = Path(__file__).resolve().parent.parent
NOW = DEFAULT_NOW + timedelta(hours=15)  # 03:00 next day: inside the demo's defrag window
DEMO = generate_objects()


@pytest.fixture
def kube(kubeconfig: Path) -> Iterator[KubeCluster]:
    k = KubeCluster(kubeconfig=str(kubeconfig), backoff=0.01, max_backoff=0.05)
    k.wait_synced(10)
    try:
        yield k
    finally:
        k.close()


def cache_matches_server(kube: KubeCluster, server: KubeApiServer) -> bool:
    def index(objs: list[dict[str, Any]]) -> dict[tuple[str, str, str], str]:
        return {
            (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["metadata"][
                "resourceVersion"
            ]
            for o in objs
            if o["kind"] not in ("Event", "Lease")
        }

    return index(kube.snapshot()) == index(server.objects())


def request(
    server: KubeApiServer, method: str, path: str, body: Any = None, ctype: str = "application/json"
) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server.url + path, data=data, method=method, headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def strip_server_fields(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for o in objs:
        o = json.loads(json.dumps(o))
        o["metadata"].pop("resourceVersion", None)
        out.append(o)
    return sorted(out, key=lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]))


# -- sync --------------------------------------------------------------------------------------------


def test_initial_sync_equals_the_seeded_demo(kube: KubeCluster, server: KubeApiServer) -> None:
    assert kube.describe() == "kubeapi-test"
    snap = kube.snapshot()
    assert all(o.get("apiVersion") and o.get("kind") for o in snap)
    live = strip_server_fields(validate_items(snap).objects)
    demo = strip_server_fields(validate_items(DEMO).objects)
    assert [(o["kind"], o["metadata"]["name"]) for o in live] == [
        (o["kind"], o["metadata"]["name"]) for o in demo
    ]
    # identical, except CRD schema defaults the API server fills in (four fields of the pools/cluster)
    differ = {(a["kind"], a["metadata"]["name"]) for a, b in zip(live, demo, strict=True) if a != b}
    assert differ == {
        ("GPUPool", "demo-dev"),
        ("GPUPool", "demo-inference"),
        ("GPUPool", "demo-isolation"),
        ("GPUPool", "demo-training"),
        ("TensorFusionCluster", "demo"),
    }
    pool = next(o for o in live if o["kind"] == "GPUPool")
    assert pool["spec"]["nodeManagerConfig"]["nodeCompaction"]["defrag"]["sourceNodeMarkerTTL"] == "30m"
    assert live == strip_server_fields(validate_items(server.objects()).objects)


def test_plan_from_the_live_cache_equals_the_plan_from_a_dump(kube: KubeCluster, tmp_path: Path) -> None:
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": DEMO}))
    from_dump = plan_cluster(ClusterState.build(load(dump)), NOW)
    live = plan_cluster(ClusterState.build(validate_items(kube.snapshot())), NOW)
    assert live.dumps() == from_dump.dumps()
    assert from_dump.actions  # the comparison is not vacuous


def test_cli_plan_against_the_server(kubeconfig: Path, tmp_path: Path) -> None:
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": DEMO}))
    env = {**os.environ, "TFTUI_METRICS_DSN": ""}
    now = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")

    def run(*src: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tftui", "plan", *src, "--now", now, "--json"],
            capture_output=True, text=True, env=env, cwd=ROOT, timeout=60,
        )  # fmt: skip

    live, offline = run("--kubeconfig", str(kubeconfig)), run("--from", str(dump))
    assert live.returncode == 0, live.stderr
    assert live.stdout == offline.stdout and json.loads(live.stdout)["actions"]


def test_unreachable_cluster_is_one_clear_source_error(tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:9")  # discard port: refused
    k = KubeCluster(kubeconfig=str(kc), request_timeout=2)
    try:
        with pytest.raises(SourceError) as err:
            k.wait_synced(5)
        assert "\n" not in str(err.value) and "kubeapi-test" in str(err.value)
    finally:
        k.close()
    with pytest.raises(SourceError, match="no usable kubeconfig"):
        KubeCluster(kubeconfig=str(tmp_path / "missing"), in_cluster=False)


# -- watch ---------------------------------------------------------------------------------------------


def pod(name: str, ns: str = "churn", node: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "churn"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
    }


def test_churn_with_dropped_watches_and_410_ends_identical_to_a_list(
    kube: KubeCluster, server: KubeApiServer
) -> None:
    n = 1000
    for i in range(n):
        status, _ = request(server, "POST", "/api/v1/namespaces/churn/pods", pod(f"p{i:04d}"))
        assert status == 201
        if i % 3 == 0 and i >= 3:
            status, _ = request(server, "DELETE", f"/api/v1/namespaces/churn/pods/p{i - 3:04d}")
            assert status == 200
        if i == n // 3:
            server.drop_watches()  # resume from the last resourceVersion
        if i == 2 * n // 3:
            server.compact()  # history gone: the resumed watch gets 410 and relists
            server.drop_watches()
    eventually(lambda: cache_matches_server(kube, server))
    assert kube.relists >= 1
    pods = {
        o["metadata"]["name"]
        for o in kube.snapshot()
        if o["kind"] == "Pod" and o["metadata"]["namespace"] == "churn"
    }
    assert len(pods) == n - len(range(3, n, 3))


def test_bookmarks_advance_the_resource_version(kube: KubeCluster, server: KubeApiServer) -> None:
    request(server, "POST", "/api/v1/namespaces/churn/pods", pod("bm"))  # a Pod change; Nodes see none
    head = server.resource_version
    eventually(lambda: int(kube._rv["Node"]) >= head, timeout=5)


def test_watch_faults_are_recovered(kube: KubeCluster, server: KubeApiServer) -> None:
    server.inject(Fault(drop=True, path="/pods"), Fault(status=500, method="GET", path="/pods"))
    server.drop_watches()
    request(server, "POST", "/api/v1/namespaces/churn/pods", pod("after-faults"))
    eventually(lambda: cache_matches_server(kube, server))
    assert server.pending_faults() == 0


def test_paged_initial_list_equals_a_fresh_list(kubeconfig: Path, server: KubeApiServer) -> None:
    for i in range(120):
        server.seed([pod(f"pg{i:03d}")])
    k = KubeCluster(kubeconfig=str(kubeconfig), backoff=0.01, max_backoff=0.05, page_size=25)
    try:
        k.wait_synced(10)
        assert cache_matches_server(k, server)
        pods = len(server.objects("Pod"))
        assert pods > 100
        pages = [n for key, n in server.stats.requests.items() if key == "GET /api/v1/pods"]
        assert pages == [-(-pods // 25)]  # ceil: every page asked for, one list
        request(server, "POST", "/api/v1/namespaces/churn/pods", pod("after-paged-list"))
        eventually(lambda: cache_matches_server(k, server))  # watched from the pages' resourceVersion
        assert k.relists == 0
    finally:
        k.close()


def test_continue_expiring_mid_list_relists_to_a_consistent_cache(
    kubeconfig: Path, server: KubeApiServer
) -> None:
    """Between the first and second page of Pods: writes land and history is compacted, so the
    continue token answers 410; the adapter lists again from the start (not a mix of two snapshots)."""
    fired: list[str] = []

    def between_pages(plural: str) -> None:
        if plural != "pods" or fired:
            return
        fired.append(plural)
        request(server, "POST", "/api/v1/namespaces/churn/pods", pod("mid-list"))
        victim = next(o for o in server.objects("Pod") if o["metadata"]["name"] > "z")  # a later page's
        request(server, "DELETE", f"/api/v1/namespaces/{victim['metadata']['namespace']}/pods/"
                f"{victim['metadata']['name']}")  # fmt: skip
        server.compact()

    for i in range(60):
        server.seed([pod(f"zz{i:03d}", ns="zz")])
    server.on_continue = between_pages
    k = KubeCluster(kubeconfig=str(kubeconfig), backoff=0.01, max_backoff=0.05, page_size=20)
    try:
        k.wait_synced(10)
        assert fired == ["pods"]
        assert cache_matches_server(k, server)
        names = {o["metadata"]["name"] for o in k.snapshot() if o["kind"] == "Pod"}
        assert "mid-list" in names
        first_pages = server.stats.requests["GET /api/v1/pods"]
        assert first_pages > -(-len(server.objects("Pod")) // 20)  # listed again from the start
    finally:
        k.close()


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


# -- actions ---------------------------------------------------------------------------------------------


def first(kind: str, pred: Callable[[dict[str, Any]], bool] = lambda o: True) -> dict[str, Any]:
    return next(o for o in DEMO if o["kind"] == kind and pred(o))


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


def test_missing_crd_fails_fast_naming_the_resource(tmp_path: Path) -> None:
    crds = tmp_path / "crds"
    crds.mkdir()
    for f in CRD_DIR.glob("*.yaml"):
        if "gpunodeclaims" not in f.name:
            (crds / f.name).write_text(f.read_text())
    with KubeApiServer(crd_dir=crds) as srv:
        k = KubeCluster(kubeconfig=str(write_kubeconfig(tmp_path / "kc", srv.url)), backoff=0.01)
        try:
            t = time.monotonic()
            with pytest.raises(SourceError, match=r"cannot list gpunodeclaims: 404"):
                k.wait_synced(20)
            assert time.monotonic() - t < 5
        finally:
            k.close()


def test_optional_crds_not_served_count_as_none(tmp_path: Path) -> None:
    """A TensorFusion release without the ProviderConfig and GPUResourceQuota CRDs: the console
    still opens (those kinds are synced and empty), and doctor says they are not installed."""
    crds = tmp_path / "crds"
    crds.mkdir()
    for f in CRD_DIR.glob("*.yaml"):
        if "providerconfigs" not in f.name and "gpuresourcequotas" not in f.name:
            (crds / f.name).write_text(f.read_text())
    with KubeApiServer(crd_dir=crds) as srv:
        srv.seed(o for o in DEMO if o["kind"] not in ("ProviderConfig", "GPUResourceQuota"))
        k = KubeCluster(kubeconfig=str(write_kubeconfig(tmp_path / "kc", srv.url)), backoff=0.01)
        try:
            k.wait_synced(10)
            kinds = {o["kind"] for o in k.snapshot()}
            assert "GPUPool" in kinds and not kinds & {"ProviderConfig", "GPUResourceQuota"}
        finally:
            k.close()


def test_provider_configs_quotas_and_the_config_map_are_watched(
    kube: KubeCluster, server: KubeApiServer
) -> None:
    """The new kinds follow the server like the others; only TensorFusion's config ConfigMap is
    cached (label `tensor-fusion.ai/component=config`), not every ConfigMap of the cluster."""
    for ns, name, labels in (
        ("tf", "tf-config", {"tensor-fusion.ai/component": "config"}),
        ("app", "other", {}),
    ):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, "labels": labels},
                "data": {"scheduler-config.yaml": "profiles: []\n"}}  # fmt: skip
        assert request(server, "POST", f"/api/v1/namespaces/{ns}/configmaps", body)[0] == 201
    quota = {"apiVersion": "tensor-fusion.ai/v1", "kind": "GPUResourceQuota",
             "metadata": {"name": "q", "namespace": "research"},
             "spec": {"total": {"requests": {"tflops": "10", "vram": "1Gi"}}}}  # fmt: skip
    path = "/apis/tensor-fusion.ai/v1/namespaces/research/gpuresourcequotas"
    assert request(server, "POST", path, quota)[0] == 201
    prov = {"apiVersion": "tensor-fusion.ai/v1", "kind": "ProviderConfig", "metadata": {"name": "amd-provider"},
            "spec": {"vendor": "AMD", "images": {"middleware": "x"}, "inUseResourceNames": ["amd.com/gpu"]}}  # fmt: skip
    assert request(server, "POST", "/apis/tensor-fusion.ai/v1/providerconfigs", prov)[0] == 201

    def seen() -> bool:
        names = {(o["kind"], o["metadata"]["name"]) for o in kube.snapshot()}
        return {
            ("ConfigMap", "tf-config"),
            ("GPUResourceQuota", "q"),
            ("ProviderConfig", "amd-provider"),
        } <= names

    eventually(seen)
    names = {(o["kind"], o["metadata"]["name"]) for o in kube.snapshot()}
    assert ("ConfigMap", "other") not in names
    st = ClusterState.build(validate_items(kube.snapshot()))
    assert "research" in st.quotas and "AMD" in st.providers.vendors
    assert [c["metadata"]["name"] for c in st.config_maps if c["metadata"]["namespace"] == "tf"] == [
        "tf-config"
    ]


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


def test_the_lease_and_tftui_events_are_cached_with_selectors(
    server: KubeApiServer, kubeconfig: Path
) -> None:
    """Only tftui's Events (reportingController, in `default`) and the named Lease are watched; both
    survive dropped watches and 410 like the other kinds."""

    def lease(name: str, ns: str, holder: str) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"holderIdentity": holder},
        }

    def event(name: str, controller: str) -> dict[str, Any]:
        return {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": "default"},
            "eventTime": "2026-12-01T08:00:00.000000Z",
            "reportingController": controller,
            "reason": "Test",
            "type": "Normal",
        }

    server.seed([lease("tftui", "tf-sys", "a"), lease("node-1", "kube-node-lease", "node-1")])
    server.seed([event("mine", "tensor-fusion.ai/tftui"), event("theirs", "kubelet")])
    k = KubeCluster(kubeconfig=str(kubeconfig), backoff=0.01, max_backoff=0.05, lease=("tf-sys", "tftui"))
    try:
        k.wait_synced(10)
        assert (k.lease() or {}).get("spec") == {"holderIdentity": "a"}
        assert [e["metadata"]["name"] for e in k.events()] == ["mine"]
        assert {o["kind"] for o in k.snapshot()}.isdisjoint({"Event", "Lease"})  # not in ClusterState
        server.compact()
        server.drop_watches()  # resume (410 and a relist when the rv was compacted away)
        server.seed([lease("tftui", "tf-sys", "b"), lease("other", "tf-sys", "x")])
        eventually(lambda: (k.lease() or {}).get("spec", {}).get("holderIdentity") == "b")
        assert [o["metadata"]["name"] for o in k.cached("Lease")] == ["tftui"]
        k.apply(Event("GPUPool/demo-dev", "Normal", "Test2", "hello"))
        assert k.settle(5)  # read-your-writes: the new event is in the cache when settle returns
        assert {e["reason"] for e in k.events()} == {"Test", "Test2"}
    finally:
        k.close()


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


def test_read_secret_gets_by_name_retries_and_reports_one_line(
    kube: KubeCluster, server: KubeApiServer
) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "k", "namespace": "ml"},
        "data": {"token": "czNjcmV0", "bin": "/w=="},  # "s3cret", b"\xff"
    }
    server.seed([secret])
    server.inject(Fault(status=500, method="GET", path="/secrets/k"))
    assert kube.read_secret("ml", "k") == {"token": b"s3cret", "bin": b"\xff"}
    assert server.stats.requests["GET /api/v1/namespaces/ml/secrets/k"] == 2  # the 500 was retried
    with pytest.raises(SourceError, match=r"^Secret not found$"):
        kube.read_secret("other", "k")
    server.seed([{**secret, "data": {"token": "not base64!"}}])
    with pytest.raises(SourceError, match=r"^Secret data unreadable: "):
        kube.read_secret("ml", "k")
    assert not [k for k in server.stats.requests if k.endswith("/secrets")]  # never listed


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
