"""The live adapter (`tftui.sources.kube`) against the in-process API server, through the real client:
the first sync, the watch, the kinds it caches and the reads it makes. Its writes are in
tests/test_kube_actions.py, the test server's own semantics in tests/test_kube_server.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.kube_support import DEMO, cache_matches_server, pod, request
from tests.kube_support import kube as kube  # the fixture
from tests.kubeapi import Fault, KubeApiServer, write_kubeconfig
from tests.kubeapi.server import CRD_DIR
from tests.waiting import eventually
from tftui.engine.plan import Event
from tftui.engine.planning import plan_cluster
from tftui.engine.state import ClusterState
from tftui.model.dump import load, validate_items
from tftui.sources.kube import KubeCluster
from tftui.sources.ports import SourceError
from tftui.sources.sim.cluster import DEFAULT_NOW

ROOT = Path(__file__).resolve().parent.parent
NOW = DEFAULT_NOW + timedelta(hours=15)  # 03:00 next day: inside the demo's defrag window


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


# -- the kinds the adapter caches, and its reads -----------------------------------------------


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
