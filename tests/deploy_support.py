"""Rendering and validation for the deploy tests (deploy/: the daemon's image and Helm chart).

The chart is rendered by Helm's own Go engine (helm-python-sdk bundles the Helm v4 SDK as a shared
library; no `helm` binary is reachable offline) exactly as `helm install` would: values checked
against values.schema.json, templates executed, then every manifest validated in strict mode
(unknown fields are errors) against the Kubernetes OpenAPI schemas bundled by kubernetes-validate,
for the oldest Kubernetes the chart supports and the newest the package knows. The ServiceMonitor
is a CRD: it is validated against the JSON schema of cloudcoil's prometheus-operator models, which
are generated from the prometheus-operator CRD schemas, made strict the same way. The value sets
the tests render are here too.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
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
from dockerfile_parse import DockerfileParser  # noqa: E402, F401  (test_deploy_image.py's, checked above)

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
