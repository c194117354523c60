"""deploy/helm: the daemon's Helm chart, rendered for every value set as `helm install` would
(tests/deploy_support.py): valid manifests that reference each other, the defaults, each value set,
bad values refused with the field named, and validators that reject what a cluster would reject.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.deploy_support import (
    CHART,
    NAMESPACE,
    SELECTOR,
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


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[Doc]]:
    return request.param, render(VALUE_SETS[request.param])


# --- every value set: valid manifests that hang together ------------------------------------------


def test_every_manifest_is_valid_kubernetes(rendered: tuple[str, list[Doc]]) -> None:
    name, docs = rendered
    assert docs, name
    for doc in docs:
        validate(doc)


def test_manifests_reference_each_other(rendered: tuple[str, list[Doc]]) -> None:
    _, docs = rendered
    objs = by_kind([d for d in docs if d["metadata"].get("namespace") in (None, NAMESPACE)])
    for d in docs:
        if d["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            if d["metadata"]["name"].endswith("-external-scaler"):  # in the workloads' namespaces
                assert d["kind"] in ("Role", "RoleBinding"), d["metadata"]
                continue
            assert d["metadata"]["namespace"] == NAMESPACE, d["metadata"]
    (dep,) = (d for d in docs if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]
    assert dep["spec"]["selector"]["matchLabels"] == SELECTOR
    assert SELECTOR.items() <= pod["metadata"]["labels"].items()
    sa = pod["spec"]["serviceAccountName"]
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs}
    for d in docs:
        if d["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            assert d["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]
            role_kind = "ClusterRole" if d["kind"] == "ClusterRoleBinding" else "Role"
            ns = d["metadata"].get("namespace")
            assert d["roleRef"]["kind"] == role_kind and (role_kind, ns, d["roleRef"]["name"]) in roles
    svc = objs[("Service", dep["metadata"]["name"])]
    assert svc["spec"]["selector"] == SELECTOR
    ports = {p["name"]: p for p in pod["spec"]["containers"][0]["ports"]}
    assert [p["targetPort"] for p in svc["spec"]["ports"]] == ["http-metrics"] and "http-metrics" in ports
    for d in docs:
        if d["kind"] in ("PodDisruptionBudget", "ServiceMonitor"):
            assert d["spec"]["selector"]["matchLabels"] == SELECTOR
        if d["kind"] == "ServiceMonitor":
            assert [e["port"] for e in d["spec"]["endpoints"]] == [svc["spec"]["ports"][0]["name"]]
    for e in pod["spec"]["containers"][0]["env"]:
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref and ("Secret", ref["name"]) in objs:  # the chart's own Secret holds the key it names
            assert ref["key"] in objs[("Secret", ref["name"])]["stringData"]


# --- the defaults -----------------------------------------------------------------------------------


def test_container_args_are_what_the_daemon_accepts(rendered: tuple[str, list[Doc]]) -> None:
    """The chart's args, after the image's ENTRYPOINT, parse with tftui's own CLI, flags and values."""
    from tftui.cli import build_parser
    from tftui.model.duration import parse_duration
    from tftui.runtime.ops import parse_listen

    name, docs = rendered
    c = container(docs)
    args = build_parser().parse_args(["--daemon", *c["args"]])  # an unknown flag exits with 2
    assert args.daemon and args.command is None, name
    parse_listen(args.listen)
    for value in (args.lease_duration, args.renew_deadline, args.retry_period):
        assert parse_duration(value).total_seconds() > 0, (name, value)
    assert parse_duration(args.renew_deadline) < parse_duration(args.lease_duration), name


def test_default_release_objects() -> None:
    assert sorted(by_kind(render())) == [
        ("ClusterRole", "tftui"),
        ("ClusterRoleBinding", "tftui"),
        ("Deployment", "tftui"),
        ("PodDisruptionBudget", "tftui"),
        ("Role", "tftui-lease"),
        ("RoleBinding", "tftui-lease"),
        ("Service", "tftui"),
        ("ServiceAccount", "tftui"),
    ]
    assert sorted(by_kind(render(release="ops"))) == [
        ("ClusterRole", "ops-tftui"),
        ("ClusterRoleBinding", "ops-tftui"),
        ("Deployment", "ops-tftui"),
        ("PodDisruptionBudget", "ops-tftui"),
        ("Role", "ops-tftui-lease"),
        ("RoleBinding", "ops-tftui-lease"),
        ("Service", "ops-tftui"),
        ("ServiceAccount", "ops-tftui"),
    ]


def test_default_deployment() -> None:
    docs = render()
    (dep,) = (d for d in docs if d["kind"] == "Deployment")
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    c = container(docs)
    assert c["image"] == "tftui:0.1.0"  # appVersion
    assert "command" not in c  # the image's ENTRYPOINT is `tftui --daemon`
    assert c["args"] == [
        "--listen=0.0.0.0:8080",
        "--lease-name=tftui",
        "--lease-duration=15s",
        "--renew-deadline=10s",
        "--retry-period=2s",
        "--log-level=info",
    ]
    assert env(c) == {
        "POD_NAME": {"fieldRef": {"fieldPath": "metadata.name"}},
        "POD_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "TFTUI_METRICS_DSN": {"secretKeyRef": {"name": "tftui-metrics", "key": "dsn"}},
    }
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}
    assert c["ports"] == [{"name": "http-metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    # the read-only root filesystem leaves /tmp, and only /tmp, writable
    assert c["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    assert dep["spec"]["template"]["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8080",
        "prometheus.io/path": "/metrics",
    }
    for key in ("nodeSelector", "tolerations", "affinity", "imagePullSecrets", "priorityClassName"):
        assert key not in pod


def test_notes_tell_how_to_find_the_leader_and_the_secret() -> None:
    text = notes()
    assert "kubectl -n tensor-fusion-sys get lease tftui" in text
    assert "create secret generic tftui-metrics --from-literal=dsn=" in text
    assert "DRY RUN" in notes({"dryRun": True}) and "DRY RUN" not in text


# --- value sets ---------------------------------------------------------------------------------------


def test_dry_run_pools_and_optional_metrics() -> None:
    docs = render(VALUE_SETS["dry-run"])
    c = container(docs)
    assert c["args"][-3:] == ["--pools=training,inference", "--dry-run", "--metrics-optional"]
    assert "TFTUI_METRICS_DSN" not in env(c)
    assert not [d for d in docs if d["kind"] == "Secret"]


def test_existing_secret() -> None:
    docs = render(VALUE_SETS["existing-secret"])
    assert env(container(docs))["TFTUI_METRICS_DSN"] == {
        "secretKeyRef": {"name": "greptime-dsn", "key": "uri"}
    }
    assert not [d for d in docs if d["kind"] == "Secret"]


def test_dsn_value_creates_the_secret() -> None:
    docs = render(VALUE_SETS["dsn-value"])
    (secret,) = (d for d in docs if d["kind"] == "Secret")
    assert secret["metadata"]["name"] == "tftui-metrics-dsn"
    assert secret["stringData"] == {"dsn": "postgresql://tftui:pw@greptime:4003/public"}
    ref = env(container(docs))["TFTUI_METRICS_DSN"]["secretKeyRef"]
    assert ref == {"name": "tftui-metrics-dsn", "key": "dsn"}
    (dep,) = (d for d in docs if d["kind"] == "Deployment")
    a = render({"metricsDsn": {"value": "postgresql://a@g:4003/public"}})
    (dep_a,) = (d for d in a if d["kind"] == "Deployment")
    checksum = "checksum/metrics-dsn"  # a new DSN rolls the pods
    assert (
        dep["spec"]["template"]["metadata"]["annotations"][checksum]
        != (dep_a["spec"]["template"]["metadata"]["annotations"][checksum])
    )


@pytest.mark.parametrize(("replicas", "pdb"), [(1, False), (2, True), (3, True)])
def test_pdb_only_with_more_than_one_replica(replicas: int, pdb: bool) -> None:
    docs = render({"replicaCount": replicas})
    (dep,) = (d for d in docs if d["kind"] == "Deployment")
    assert dep["spec"]["replicas"] == replicas
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert bool(pdbs) == pdb
    if pdb:
        assert pdbs[0]["spec"]["maxUnavailable"] == 1


def test_service_monitor_off_by_default_and_on_when_asked() -> None:
    assert not [d for d in render() if d["kind"] == "ServiceMonitor"]
    (sm,) = (d for d in render(VALUE_SETS["service-monitor"]) if d["kind"] == "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus"
    assert sm["spec"]["endpoints"] == [
        {"port": "http-metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}
    ]
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}


# --- bad values are refused with the field named --------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCount": "two"}, "/replicaCount"),
        ({"replicaCount": 0}, "/replicaCount"),
        ({"managedPools": ["a,b"]}, "/managedPools/0"),
        ({"leaderElection": {"leaseDuration": "15"}}, "/leaderElection/leaseDuration"),
        ({"dryrun": True}, "additional properties 'dryrun' not allowed"),
        ({"podSecurityContext": {"runAsUser": 0}}, "/podSecurityContext/runAsUser"),
        (
            {"securityContext": {"allowPrivilegeEscalation": True}},
            "/securityContext/allowPrivilegeEscalation",
        ),
        ({"logLevel": "verbose"}, "/logLevel"),
        ({"externalScaler": {"enabled": "yes"}}, "/externalScaler"),
        (
            {"externalScaler": {"enabled": True, "secretNamespaces": ["Bad_NS"], "secretNames": []}},
            "/externalScaler/secretNamespaces/0",
        ),
    ],
)
def test_schema_refuses_bad_values(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm_python.HelmValuesError, match=re.escape(message)):
        render(values)


def test_no_metrics_dsn_needs_metrics_optional() -> None:
    with pytest.raises(
        helm_python.HelmRenderError, match=re.escape("tftui: no metrics DSN: set metricsDsn.existingSecret")
    ):
        render({"metricsDsn": {"existingSecret": ""}})


def test_helm_lint_finds_nothing_above_info() -> None:
    result = helm_python.lint(CHART, strict=True)
    assert result["errors"] == []
    assert [m for m in result["messages"] if m["severity"] > 1] == []  # 1 = INFO (e.g. "icon is recommended")


# --- the validators reject what a cluster would reject --------------------------------------------


def _mutations() -> Iterator[tuple[str, Doc, str]]:
    docs = by_kind(render(VALUE_SETS["service-monitor"]))
    dep = copy.deepcopy(docs[("Deployment", "tftui")])
    dep["spec"]["replica"] = 2
    yield "unknown field", dep, "replica"
    dep = copy.deepcopy(docs[("Deployment", "tftui")])
    dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "8080"
    yield "wrong type", dep, "containerPort"
    role = copy.deepcopy(docs[("ClusterRole", "tftui")])
    del role["rules"][0]["verbs"]
    yield "missing required field", role, "verbs"
    sm = copy.deepcopy(docs[("ServiceMonitor", "tftui")])
    sm["spec"]["endpoints"][0]["portName"] = "x"
    yield "ServiceMonitor unknown field", sm, "portName"
    sm = copy.deepcopy(docs[("ServiceMonitor", "tftui")])
    sm["spec"]["endpoints"][0]["scheme"] = "ftp"
    yield "ServiceMonitor bad enum", sm, "scheme"
    sm = copy.deepcopy(docs[("ServiceMonitor", "tftui")])
    del sm["spec"]["selector"]
    yield "ServiceMonitor missing selector", sm, "selector"


MUTATIONS = list(_mutations())


@pytest.mark.parametrize(("case", "doc", "field"), MUTATIONS, ids=[case for case, _, _ in MUTATIONS])
def test_validators_catch_broken_manifests(case: str, doc: Doc, field: str) -> None:
    with pytest.raises(AssertionError) as info:
        validate(doc)
    assert field in str(info.value), (case, str(info.value))
