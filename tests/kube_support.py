"""Helpers of the live adapter's tests (tests/test_kube*.py): the demo's objects, a `KubeCluster`
synced with the test API server (the fixture `kube`), and plain HTTP requests to that server.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kubeapi import KubeApiServer
from tftui.sources.kube import KubeCluster
from tftui.sources.sim.cluster import generate_objects

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


def pod(name: str, ns: str = "churn", node: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "churn"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
    }


def first(kind: str, pred: Callable[[dict[str, Any]], bool] = lambda o: True) -> dict[str, Any]:
    return next(o for o in DEMO if o["kind"] == kind and pred(o))
