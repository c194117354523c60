"""deploy/: the daemon's image definition and Helm chart.

The chart is rendered by Helm's own Go engine (helm-python-sdk bundles the Helm v4 SDK as a shared
library; no `helm` binary is reachable offline) exactly as `helm install` would: values checked
against values.schema.json, templates executed, then every manifest validated in strict mode
(unknown fields are errors) against the Kubernetes OpenAPI schemas bundled by kubernetes-validate,
for the oldest Kubernetes the chart supports and the newest the package knows. The ServiceMonitor
is a CRD: it is validated against the JSON schema of cloudcoil's prometheus-operator models, which
are generated from the prometheus-operator CRD schemas, made strict the same way.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

for _module in (
    "helm_python",
    "kubernetes_validate",
    "cloudcoil.models.prometheus_operator",
    "dockerfile_parse",
):
    if importlib.util.find_spec(_module) is None:  # never skip: the deploy checks are part of the suite
        raise ImportError(
            f"{_module} is missing: the deploy tests need the `test` extra of pyproject.toml "
            "(helm-python-sdk, kubernetes-validate, cloudcoil-models-prometheus-operator, dockerfile-parse); "
            "run `make install`"
        )

import helm_python  # noqa: E402
import kubernetes_validate  # noqa: E402
from dockerfile_parse import DockerfileParser  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
CHART = DEPLOY / "helm" / "tftui"
RBAC = DEPLOY / "rbac"
RELEASE = "tftui"
NAMESPACE = "tensor-fusion-sys"
KUBE_VERSIONS = ("1.25.0", kubernetes_validate.latest_version())  # Chart.yaml kubeVersion floor, newest
SELECTOR = {
    "app.kubernetes.io/name": "tftui",
    "app.kubernetes.io/instance": RELEASE,
    "app.kubernetes.io/component": "daemon",
}

Doc = dict[str, Any]


# --- rendering and validation ---------------------------------------------------------------------


def render(values: Mapping[str, Any] | None = None, release: str = RELEASE) -> list[Doc]:
    """The chart's manifests for `values`, as `helm install` would send them (NOTES.txt aside)."""
    with helm_python.Chart.load(CHART) as chart:
        chart.validate_schema(dict(values or {}))
        out = chart.render(dict(values or {}), name=release, namespace=NAMESPACE, is_install=True)
    docs: list[Doc] = []
    for path, text in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def notes(values: Mapping[str, Any] | None = None) -> str:
    with helm_python.Chart.load(CHART) as chart:
        out = chart.render(dict(values or {}), name=RELEASE, namespace=NAMESPACE, is_install=True)
    return next(text for path, text in out.items() if path.endswith("NOTES.txt"))


def _strict(schema: Any) -> Any:
    """Forbid unknown fields in every object schema that lists its properties (kubectl's strict
    field validation; pydantic's schemas allow them)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@cache
def servicemonitor_model() -> Any:
    """The ServiceMonitor model, imported on first use (the module takes seconds to import)."""
    return importlib.import_module("cloudcoil.models.prometheus_operator.v1").ServiceMonitor


@cache
def servicemonitor_validator() -> jsonschema.protocols.Validator:
    schema = _strict(servicemonitor_model().model_json_schema(by_alias=True))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate(doc: Doc) -> None:
    """Raise with the object and the failing field when `doc` is not a valid object of its kind."""
    what = f"{doc.get('kind')} {doc.get('metadata', {}).get('name')}"
    if doc.get("apiVersion") == "monitoring.coreos.com/v1":
        assert doc["kind"] == "ServiceMonitor", what
        errors = sorted(servicemonitor_validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
        if errors:
            e = errors[0]
            path = ".".join(str(p) for p in e.absolute_path)
            raise AssertionError(f"{what}: {path}: {e.message}")
        servicemonitor_model().model_validate(doc)  # the model's own types and enums too
        return
    for version in KUBE_VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            raise AssertionError(f"{what} (Kubernetes {version}): {path}: {e.message}") from e
        except kubernetes_validate.SchemaNotFoundError as e:
            raise AssertionError(f"{what}: no schema for {doc.get('apiVersion')} in {version}") from e


def by_kind(docs: list[Doc]) -> dict[tuple[str, str], Doc]:
    out: dict[tuple[str, str], Doc] = {}
    for d in docs:
        key = (d["kind"], d["metadata"]["name"])
        assert key not in out, f"{key} rendered twice"
        out[key] = d
    return out


def container(docs: list[Doc]) -> Doc:
    (dep,) = (d for d in docs if d["kind"] == "Deployment")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return c


def env(c: Doc) -> dict[str, Any]:
    return {e["name"]: e.get("valueFrom", e.get("value")) for e in c["env"]}


VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "dry-run": {
        "dryRun": True,
        "managedPools": ["training", "inference"],
        "metricsOptional": True,
        "metricsDsn": {"existingSecret": ""},
    },
    "existing-secret": {"metricsDsn": {"existingSecret": "greptime-dsn", "key": "uri"}},
    "dsn-value": {"metricsDsn": {"value": "postgresql://tftui:pw@greptime:4003/public"}},
    "one-replica": {"replicaCount": 1},
    "three-replicas": {"replicaCount": 3},
    "service-monitor": {"serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus"}}},
    "external-scaler": {"externalScaler": {"enabled": True, "secretNamespaces": ["ml-serving", "web"]}},
    "external-scaler-named": {
        "externalScaler": {"enabled": True, "secretNamespaces": ["ml-serving"], "secretNames": ["scaler-key"]}
    },
    "scheduling-and-own-sa": {
        "image": {"repository": "registry.example/tftui", "tag": "0.2.0", "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "pull"}],
        "serviceAccount": {"create": False, "name": "tftui-daemon"},
        "rbac": {"create": False},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ops", "effect": "NoSchedule"}],
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": SELECTOR},
                        },
                    }
                ]
            }
        },
        "priorityClassName": "system-cluster-critical",
        "extraArgs": ["--retry-period=3s"],
        "extraEnv": [{"name": "TZ", "value": "UTC"}],
        "leaderElection": {
            "leaseName": "tftui-leader",
            "leaseDuration": "30s",
            "renewDeadline": "20s",
            "retryPeriod": "4s",
        },
        "podDisruptionBudget": {"enabled": True, "maxUnavailable": "50%"},
        "prometheusScrape": False,
        "podAnnotations": {"example.com/owner": "gpu-ops"},
        "podLabels": {"team": "gpu-ops"},
    },
}


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


# --- RBAC: the chart grants what deploy/rbac grants --------------------------------------------------


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


# --- the image ----------------------------------------------------------------------------------------


def _stages() -> list[list[dict[str, Any]]]:
    parser = DockerfileParser(str(DEPLOY / "Dockerfile"))
    stages: list[list[dict[str, Any]]] = []
    for ins in parser.structure:
        if ins["instruction"] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(ins)
    return stages


def _args(stage: list[dict[str, Any]], instruction: str) -> list[str]:
    return [i["value"] for i in stage if i["instruction"] == instruction]


def test_dockerfile_final_stage_is_slim_non_root_and_runs_the_daemon() -> None:
    parser = DockerfileParser(str(DEPLOY / "Dockerfile"))
    assert parser.is_multistage
    build, final = _stages()
    # both stages on the slim Python 3.11 image (the ARG default)
    assert all(re.fullmatch(r"python:3\.11-slim(-\w+)?", img) for img in parser.parent_images), (
        parser.parent_images
    )
    assert re.search(r"\bAS build\b", build[0]["value"])
    assert "pip wheel" in " ".join(_args(build, "RUN")) and "[test]" not in " ".join(_args(build, "RUN"))

    (user,) = _args(final, "USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, f"USER {user}: must be a numeric non-root uid"
    assert not gid or (gid.isdigit() and int(gid) != 0), f"USER {user}: group must be numeric and non-root"
    assert [json.loads(v) for v in _args(final, "ENTRYPOINT")] == [["tftui", "--daemon"]]
    assert _args(final, "EXPOSE") == ["8080"]
    assert not _args(final, "HEALTHCHECK") and not _args(final, "CMD")
    run = " ".join(_args(final, "RUN"))
    assert not re.search(r"apt-get|apk |gcc|build-essential|\[test\]", run), run
    assert "--no-index" in run  # installs only the wheels the build stage made
    assert any("--from=build" in v for v in _args(final, "COPY"))
    # read-only root: no bytecode written at run time, HOME and the working directory in /tmp
    env_lines = " ".join(_args(final, "ENV"))
    assert "PYTHONDONTWRITEBYTECODE=1" in env_lines and "HOME=/tmp" in env_lines
    assert _args(final, "WORKDIR") == ["/tmp"]
    # USER comes after every RUN: nothing runs as root once the user is set, and nothing after it
    last_run = max(i["startline"] for i in final if i["instruction"] == "RUN")
    assert next(i["startline"] for i in final if i["instruction"] == "USER") > last_run


def test_dockerignore_lets_in_exactly_what_the_build_copies() -> None:
    lines = [ln for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln and not ln.startswith("#")]
    assert lines[0] == "*"
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    build, _ = _stages()
    copied = {src.rstrip("/") for v in _args(build, "COPY") for src in v.split()[:-1]}
    assert copied == allowed
    for path in copied:
        assert (ROOT / path).exists(), path
