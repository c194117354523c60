"""deploy/rbac and the chart's RBAC: the chart grants what the plain manifests grant, verb by verb
and scope by scope (with and without the external scaler), its rules read from deploy/rbac through
links, and no RBAC at all with an existing ServiceAccount."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy_support import (
    CHART,
    NAMESPACE,
    RBAC,
    RELEASE,
    VALUE_SETS,
    Doc,
    by_kind,
    container,
    env,
    helm_python,
    notes,
    render,
    validate,
)


def _rules(path: Path, kind: str) -> list[Any]:
    (doc,) = (d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == kind)
    return list(doc["rules"])


def _is_lease_rule(rule: Mapping[str, Any]) -> bool:
    return "coordination.k8s.io" in rule["apiGroups"]


Grant = tuple[str, str, str, str, str]
"""(namespace or "*" for cluster-wide, apiGroup, resource, verb, resourceName or "*")."""


def grants(docs: list[Doc], subject: Mapping[str, str]) -> set[Grant]:
    """Every verb on every resource the bindings of `docs` give `subject`, expanded rule by rule."""
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}
    out: set[Grant] = set()
    for b in docs:
        if b["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        subj = {k: b["subjects"][0].get(k) for k in ("kind", "name", "namespace")}
        assert len(b["subjects"]) == 1 and subj == dict(subject), b["subjects"]
        ns = b["metadata"].get("namespace", "") if b["kind"] == "RoleBinding" else ""
        ref = b["roleRef"]
        role = roles[(ref["kind"], ns if ref["kind"] == "Role" else "", ref["name"])]
        for rule in role["rules"]:
            assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, rule
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for v in rule["verbs"]:
                        for n in rule.get("resourceNames") or ["*"]:
                            out.add((ns or "*", g, r, v, n))
    return out


def plain(*files: str) -> list[Doc]:
    return [d for f in files for d in yaml.safe_load_all((RBAC / f).read_text()) if d]


PLAIN_DAEMON = ("daemon.yaml", "daemon-binding.yaml", "daemon-lease.yaml")


def test_chart_and_plain_manifests_grant_the_same_verbs() -> None:
    """Rendered chart vs `kubectl apply -f deploy/rbac/daemon*.yaml`, verb by verb and scope by scope:
    identical without the external scaler and with it (plain: its Role applied per namespace)."""
    chart_sa = {"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}
    plain_sa = {"kind": "ServiceAccount", "name": "tftui-daemon", "namespace": NAMESPACE}
    assert plain("daemon-binding.yaml")[0]["metadata"]["namespace"] == NAMESPACE
    chart = grants(render(), chart_sa)
    manifests = grants(plain(*PLAIN_DAEMON), plain_sa)
    assert chart == manifests
    assert ("*", "", "pods/eviction", "create", "*") in chart  # the comparison sees real rules
    # nothing namespaced is granted cluster-wide: the Lease only in the release namespace, no Secret
    assert {g for g in chart if g[2] in ("leases", "secrets")} == {
        (NAMESPACE, "coordination.k8s.io", "leases", v, "*")
        for v in ("get", "list", "watch", "create", "update")
    }
    # with the external scaler: `get` on Secrets in each listed namespace, nothing else changes
    scaler = plain("daemon-external-scaler.yaml")
    (ns,) = {d["metadata"]["namespace"] for d in scaler}
    on = grants(render({"externalScaler": {"enabled": True, "secretNamespaces": [ns]}}), chart_sa)
    assert on == grants(plain(*PLAIN_DAEMON) + scaler, plain_sa)
    assert on - chart == {(ns, "", "secrets", "get", "*")}
    named = render({"externalScaler": {"enabled": True, "secretNamespaces": [ns], "secretNames": ["k"]}})
    assert grants(named, chart_sa) - chart == {(ns, "", "secrets", "get", "k")}
    for d in scaler:
        validate(d)


def test_external_scaler_is_off_by_default_and_needs_enabling_for_secret_access() -> None:
    docs = render()
    assert "--external-scaler" not in container(docs)["args"]
    assert not [d for d in docs if "secrets" in json.dumps(d.get("rules", []))]
    docs = render(VALUE_SETS["external-scaler"])
    assert container(docs)["args"][-1] == "--external-scaler"
    assert sorted(
        (d["kind"], d["metadata"]["namespace"])
        for d in docs
        if d["metadata"]["name"].endswith("-external-scaler")
    ) == [("Role", "ml-serving"), ("Role", "web"), ("RoleBinding", "ml-serving"), ("RoleBinding", "web")]
    assert "API-key Secrets readable in ml-serving, web" in notes(VALUE_SETS["external-scaler"])
    assert "External scalers: off (no external call, no Secret access)" in notes()
    with pytest.raises(helm_python.HelmRenderError, match=re.escape("set externalScaler.enabled=true")):
        render({"externalScaler": {"enabled": False, "secretNamespaces": ["ml"], "secretNames": []}})


def test_chart_lease_role_is_deploy_rbac_daemon_lease_yaml() -> None:
    objs = by_kind(render())
    rules = objs[("Role", "tftui-lease")]["rules"]
    assert rules == _rules(RBAC / "daemon-lease.yaml", "Role")
    assert rules == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "list", "watch", "create", "update"],
        }
    ]
    plain = by_kind([d for d in yaml.safe_load_all((RBAC / "daemon-lease.yaml").read_text())])
    binding = plain[("RoleBinding", "tftui-daemon-lease")]
    assert binding["roleRef"]["name"] == "tftui-daemon-lease"
    sa, _ = yaml.safe_load_all((RBAC / "daemon-binding.yaml").read_text())
    assert binding["subjects"][0]["name"] == sa["metadata"]["name"]
    assert binding["metadata"]["namespace"] == sa["metadata"]["namespace"]
    for d in plain.values():
        validate(d)


def test_chart_reads_the_cluster_role_from_deploy_rbac() -> None:
    """files/ holds links, not copies: the chart and deploy/rbac can never drift apart."""
    for name, target in (
        ("daemon-clusterrole.yaml", "daemon.yaml"),
        ("daemon-external-scaler.yaml", "daemon-external-scaler.yaml"),
    ):
        link = CHART / "files" / name
        assert link.is_symlink() and link.resolve() == (RBAC / target).resolve()


def test_no_rbac_and_an_existing_service_account() -> None:
    docs = render(VALUE_SETS["scheduling-and-own-sa"])
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"}
    (dep,) = (d for d in docs if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "tftui-daemon"
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert pod["affinity"]["podAntiAffinity"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["imagePullSecrets"] == [{"name": "pull"}]
    c = container(docs)
    assert c["image"] == "registry.example/tftui:0.2.0" and c["imagePullPolicy"] == "Always"
    assert c["args"][1:5] == [
        "--lease-name=tftui-leader",
        "--lease-duration=30s",
        "--renew-deadline=20s",
        "--retry-period=4s",
    ]
    assert c["args"][-1] == "--retry-period=3s"
    assert env(c)["TZ"] == "UTC"
    meta = dep["spec"]["template"]["metadata"]
    assert meta["annotations"] == {"example.com/owner": "gpu-ops"}  # no scrape hints, no DSN checksum
    assert meta["labels"]["team"] == "gpu-ops"
    (pdb,) = (d for d in docs if d["kind"] == "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == "50%"
