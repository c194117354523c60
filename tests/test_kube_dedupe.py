"""The watch cache stores objects as `model.dedupe` makes them, listed or watched: managedFields and
the last-applied annotation dropped, equal parts shared between objects, everything else as served."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from tests.kubeapi import KubeApiServer
from tests.waiting import eventually
from tftui.sources.kube import KubeCluster

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MANAGED = [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "dedupe",
            "labels": {"app": "dedupe"},
            "annotations": {LAST_APPLIED: json.dumps({"metadata": {"name": name}}), "keep": "me"},
            "managedFields": MANAGED,
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"},
    }


def cached(kube: KubeCluster, name: str) -> dict[str, Any] | None:
    return next((o for o in kube.cached("Pod") if o["metadata"]["name"] == name), None)


def served(server: KubeApiServer, name: str) -> dict[str, Any]:
    return next(o for o in server.objects("Pod") if o["metadata"]["name"] == name)


def without_dropped(obj: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(obj))
    out["metadata"].pop("managedFields", None)
    out["metadata"].get("annotations", {}).pop(LAST_APPLIED, None)
    return out


def test_listed_and_watched_objects_are_trimmed_and_share_equal_parts(
    kubeconfig: Path, server: KubeApiServer
) -> None:
    server.seed([pod("listed-a"), pod("listed-b")])
    assert served(server, "listed-a")["metadata"]["managedFields"] == MANAGED  # the server keeps them
    kube = KubeCluster(kubeconfig=str(kubeconfig), backoff=0.01, max_backoff=0.05)
    try:
        kube.wait_synced(10)
        a, b = cached(kube, "listed-a"), cached(kube, "listed-b")
        assert a is not None and b is not None
        assert a == without_dropped(served(server, "listed-a"))
        assert a["metadata"]["annotations"] == {"keep": "me"} and "managedFields" not in a["metadata"]
        assert a["spec"] is b["spec"] and a["metadata"]["labels"] is b["metadata"]["labels"]

        body = json.dumps(pod("watched")).encode()
        req = urllib.request.Request(
            server.url + "/api/v1/namespaces/dedupe/pods",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 201
        eventually(lambda: cached(kube, "watched") is not None)
        w = cached(kube, "watched")
        assert w is not None
        assert w == without_dropped(served(server, "watched"))
        assert "managedFields" not in w["metadata"] and LAST_APPLIED not in w["metadata"]["annotations"]
        assert w["metadata"]["labels"] is a["metadata"]["labels"]  # shared with the listed ones
    finally:
        kube.close()
