"""`tftui doctor`: can tftui work here? Connectivity, CRDs, permissions, the metrics store.

Each check prints one line, `ok` or `MISSING: …` with what is missing and how to fix it. The
permissions a role needs are derived from the code paths: the reads of `tftui.sources.kube.KINDS`,
the console's writes, and the Plan actions (`ACTION_PERMISSIONS`, one entry per member of the
`Action` union). `deploy/rbac/*.yaml` grant exactly these (a test holds them together), and the
doctor asks the API server about each one with a SelfSubjectAccessReview.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Final

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error

from tftui.engine.plan import (
    AnnotateNode,
    AnnotatePod,
    AnnotatePool,
    DeleteGPUNodeClaim,
    Event,
    EvictPod,
    LabelNode,
    LabelPod,
    PatchPoolStatus,
    PatchWorkloadAutoscale,
    PatchWorkloadStatus,
)
from tftui.model.redact import dsn_secrets, scrub
from tftui.sources.kube import KubeCluster
from tftui.sources.kubebase import KINDS, TF_GROUP, TF_VERSION
from tftui.sources.kubebase import error_line as _one_line
from tftui.sources.ports import SourceError

__all__ = [
    "ACTION_PERMISSIONS",
    "CONSOLE_ONLY_ACTIONS",
    "ROLES",
    "Check",
    "Permission",
    "role_permissions",
    "run_doctor",
]

ROLES: Final = ("console", "console-write", "daemon")
ROLE_FILES: Final = {
    "console": "console.yaml",
    "console-write": "console-write.yaml",
    "daemon": "daemon.yaml",
}
"""Each role's ClusterRole; the daemon's namespaced rules are in `NAMESPACED_FILES`."""
NAMESPACED_FILES: Final = {"leases": "daemon-lease.yaml", "secrets": "daemon-external-scaler.yaml"}
READ_VERBS: Final = ("get", "list", "watch")
METRICS_TABLES: Final = (
    "tf_node_metrics",
    "tf_gpu_usage",
    "tf_worker_resources",
    "tf_worker_usage",
    "tf_system_metrics",
)


@dataclass(frozen=True, slots=True, order=True)
class Permission:
    """One verb on one resource (`resource` may be `plural/subresource`), as RBAC spells it."""

    group: str
    resource: str
    verb: str
    namespace: str = field(default="", compare=False)  # checked in this namespace ("" = cluster-wide)

    def describe(self) -> str:
        res = self.resource if not self.group else f"{self.resource}.{self.group}"
        return f"{self.verb} {res}" + (f" in namespace {self.namespace}" if self.namespace else "")

    def rule(self) -> str:
        """The (Cluster)Role rule granting it, in YAML flow style."""
        return f'{{apiGroups: ["{self.group}"], resources: ["{self.resource}"], verbs: ["{self.verb}"]}}'


def _perm(group: str, resource: str, *verbs: str) -> list[Permission]:
    return [Permission(group, resource, v) for v in verbs]


ACTION_PERMISSIONS: Final[Mapping[type, tuple[Permission, ...]]] = {
    LabelNode: (Permission("", "nodes", "patch"),),
    AnnotateNode: (Permission("", "nodes", "patch"),),
    LabelPod: (Permission("", "pods", "patch"),),
    AnnotatePod: (Permission("", "pods", "patch"),),
    AnnotatePool: (Permission(TF_GROUP, "gpupools", "patch"),),
    PatchPoolStatus: (Permission(TF_GROUP, "gpupools/status", "patch"),),
    PatchWorkloadStatus: (Permission(TF_GROUP, "tensorfusionworkloads/status", "patch"),),
    PatchWorkloadAutoscale: (Permission(TF_GROUP, "tensorfusionworkloads", "patch"),),
    DeleteGPUNodeClaim: (Permission(TF_GROUP, "gpunodeclaims", "delete"),),
    EvictPod: (Permission("", "pods/eviction", "create"),),
    Event: tuple(_perm("events.k8s.io", "events", "create", "patch")),  # patch: a repeat bumps `series`
}
"""What `KubeCluster.apply` needs for each Plan action kind."""

CONSOLE_WRITES: Final = (
    Permission(TF_GROUP, "gpupools", "patch"),  # the manual-compaction annotation (C5)
    Permission(TF_GROUP, "schedulingconfigtemplates", "patch"),  # the placement mode (P4)
    *ACTION_PERMISSIONS[PatchWorkloadAutoscale],  # the autoscale toggle (A1)
)
CONSOLE_ONLY_ACTIONS: Final = (PatchWorkloadAutoscale,)
"""Plan actions only a person takes from the console; the daemon never needs their permissions."""
DAEMON_EXTRA: Final = (
    # leader election (get, create, update) and the Lease in the daemon's cache (list, watch)
    *_perm("coordination.k8s.io", "leases", "get", "list", "watch", "create", "update"),
)
"""Namespaced: checked in the lease namespace (`--lease-namespace`)."""
SECRET_READ: Final = (Permission("", "secrets", "get"),)
"""`KubeCluster.read_secret`: an external scaler's `apiKeySecretRef` (the daemon's autoscale loop
with `--external-scaler`). `get` only, and only in the namespaces of workloads that use one — a
Secret is read by name, in the workload's own namespace, never listed or watched."""


def _reads() -> list[Permission]:
    out = [p for k in KINDS for p in _perm(k.group, k.plural, *READ_VERBS)]
    out += _perm("events.k8s.io", "events", *READ_VERBS)  # `KubeCluster.events`
    return out


def role_permissions(
    role: str, lease_namespace: str = "", secret_namespaces: Iterable[str] = ()
) -> list[Permission]:
    """Every permission `role` needs, sorted, without duplicates: the daemon's Lease ones checked in
    `lease_namespace`, its Secret `get` in each of `secret_namespaces` (the external scaler's; none
    without it). Equal permissions in different namespaces compare equal (the doctor asks each)."""
    return sorted(set(_checks(role, lease_namespace, secret_namespaces)))


def _checks(role: str, lease_namespace: str, secret_namespaces: Iterable[str]) -> list[Permission]:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r} (one of {', '.join(ROLES)})")
    perms = set(_reads())
    extra: list[Permission] = []
    if role == "console-write":
        perms.update(CONSOLE_WRITES)
    elif role == "daemon":
        perms.update(p for k, ps in ACTION_PERMISSIONS.items() if k not in CONSOLE_ONLY_ACTIONS for p in ps)
        extra += [replace(p, namespace=lease_namespace) for p in DAEMON_EXTRA]
        extra += [replace(p, namespace=ns) for ns in sorted(set(secret_namespaces)) for p in SECRET_READ]
    return sorted(perms) + extra


def fix_hint(role: str, perm: Permission) -> str:
    """Where the missing rule lives: the role's ClusterRole, or the namespaced Role's file."""
    if perm.namespace and perm.resource in NAMESPACED_FILES:
        return (
            f"add to a Role bound to you in namespace {perm.namespace} "
            f"(deploy/rbac/{NAMESPACED_FILES[perm.resource]} has it):"
        )
    return f"add to the ClusterRole bound to you (deploy/rbac/{ROLE_FILES[role]} has it):"


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str  # on success: what was found; on failure: what is missing and how to fix it
    skipped: bool = False

    def line(self) -> str:
        if self.skipped:
            return f"{self.name}: skipped: {self.detail}"
        if self.ok:
            return f"{self.name}: ok" + (f" ({self.detail})" if self.detail else "")
        return f"{self.name}: MISSING: {self.detail}"


def _connect(context: str | None, kubeconfig: str | None) -> tuple[KubeCluster | None, Check]:
    try:
        kube = KubeCluster(context, kubeconfig, start=False, retries=0, request_timeout=5.0)
    except SourceError as exc:
        return None, Check(
            "connectivity", False, f"{exc}: pass --kubeconfig FILE / --context NAME, or set KUBECONFIG"
        )
    try:
        resp: Any = client.VersionApi(kube.api).get_code(_preload_content=False, _request_timeout=5.0)
        version = str(json.loads(resp.data).get("gitVersion") or "unknown version")
        resp.release_conn()
    except (ApiException, Urllib3Error, OSError, ValueError) as exc:
        kube.close()
        return None, Check(
            "connectivity",
            False,
            f"cannot reach the API server of context {kube.describe()} ({kube.api.configuration.host}): "
            f"{_one_line(exc)}; check the network path, the server address and the credentials",
        )
    return kube, Check("connectivity", True, f"{version} at {kube.api.configuration.host}")


def _crds(kube: KubeCluster) -> Check:
    wanted = [k.plural for k in KINDS if k.group == TF_GROUP and not k.optional]
    optional = [k.plural for k in KINDS if k.group == TF_GROUP and k.optional]
    try:
        resources = client.CustomObjectsApi(kube.api).get_api_resources(
            TF_GROUP, TF_VERSION, _request_timeout=5.0
        )
        have = {r.name for r in resources.resources or []}
    except ApiException as exc:
        if exc.status != 404:
            return Check("CRDs", False, f"cannot discover {TF_GROUP}/{TF_VERSION}: {_one_line(exc)}")
        have = set()
    except (Urllib3Error, OSError, ValueError) as exc:
        return Check("CRDs", False, f"cannot discover {TF_GROUP}/{TF_VERSION}: {_one_line(exc)}")
    missing = [p for p in wanted if p not in have]
    if missing:
        names = ", ".join(f"{p}.{TF_GROUP}" for p in missing)
        return Check(
            "CRDs",
            False,
            f"{names} not served at {TF_GROUP}/{TF_VERSION}: install the TensorFusion CRDs "
            "(the tensor-fusion Helm chart, or kubectl apply -f its crds/)",
        )
    absent = [p for p in optional if p not in have]
    note = f" ({', '.join(absent)} not installed: none of those, an older TensorFusion)" if absent else ""
    return Check(
        "CRDs", True, f"{len(wanted) + len(optional) - len(absent)} {TF_GROUP}/{TF_VERSION} kinds{note}"
    )


def _access(kube: KubeCluster, perm: Permission) -> tuple[bool | None, str]:
    """(allowed, reason); allowed None when the review itself failed."""
    resource, _, sub = perm.resource.partition("/")
    attrs: dict[str, Any] = {"group": perm.group, "resource": resource, "verb": perm.verb}
    if sub:
        attrs["subresource"] = sub
    if perm.namespace:
        attrs["namespace"] = perm.namespace
    body: Any = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attrs},
    }
    try:
        resp: Any = client.AuthorizationV1Api(kube.api).create_self_subject_access_review(
            body, _preload_content=False, _request_timeout=5.0
        )
        doc = json.loads(resp.data)
        resp.release_conn()
    except (ApiException, Urllib3Error, OSError, ValueError) as exc:
        return None, _one_line(exc)
    status = doc.get("status") or {}
    return bool(status.get("allowed")), str(status.get("reason") or "")


def _permissions(
    kube: KubeCluster, role: str, lease_namespace: str, secret_namespaces: Iterable[str] = ()
) -> list[Check]:
    checks: list[Check] = []
    perms = _checks(role, lease_namespace, secret_namespaces)
    with ThreadPoolExecutor(max_workers=8) as pool:  # one review per request: ask in parallel
        answers = list(pool.map(lambda p: _access(kube, p), perms))
    for perm, (allowed, reason) in zip(perms, answers, strict=True):
        name = f"permission {perm.describe()}"
        if allowed is None:
            checks.append(
                Check(name, False, f"cannot ask the API server (SelfSubjectAccessReview): {reason}")
            )
        elif allowed:
            checks.append(Check(name, True, ""))
        else:
            checks.append(Check(name, False, f"not allowed; {fix_hint(role, perm)} {perm.rule()}"))
    return checks


def _metrics(dsn: str | None) -> list[Check]:
    if not dsn:
        return [Check("metrics store", True, "no --metrics-dsn and no TFTUI_METRICS_DSN", skipped=True)]
    try:
        from tftui.sources.greptime import GreptimeMetrics

        found = GreptimeMetrics(dsn, connect_timeout=5).tables()
    except SourceError as exc:
        return [
            Check(
                "metrics store",
                False,
                f"{exc}; check --metrics-dsn (host, port 4003 for GreptimeDB's PostgreSQL protocol, "
                "database, user, password)",
            )
        ]
    checks = [Check("metrics store", True, f"{len(found)} tf_* tables")]
    from tftui.sources.greptime import _WRITER

    for name in METRICS_TABLES:
        if name in found:
            checks.append(Check(f"metrics table {name}", True, ""))
        else:
            writer = _WRITER.get(name, "TensorFusion")
            checks.append(
                Check(
                    f"metrics table {name}",
                    False,
                    f"table {name} not in the metrics database: it is written by {writer}",
                )
            )
    return checks


def run_doctor(
    *,
    context: str | None = None,
    kubeconfig: str | None = None,
    metrics_dsn: str | None = None,
    role: str = "console-write",
    lease_namespace: str = "default",
    secret_namespaces: Iterable[str] = (),
    out: Callable[[str], None] = print,
) -> int:
    """Run every check, print one line each through `out`; 0 when all pass, else 1."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r} (one of {', '.join(ROLES)})")
    checks: list[Check] = []
    secrets = dsn_secrets(metrics_dsn) if metrics_dsn else []

    def emit(new: Iterable[Check]) -> None:
        for c in new:
            checks.append(c)
            out(scrub(c.line(), *secrets))  # a server URL with user:password@, a DSN's password

    kube, conn = _connect(context, kubeconfig)
    emit([conn])
    if kube is None:
        emit([Check("CRDs", False, "no connection to the API server", skipped=True)])
        emit([Check("permissions", False, "no connection to the API server", skipped=True)])
    else:
        try:
            emit([_crds(kube)])
            emit(_permissions(kube, role, lease_namespace, secret_namespaces))
        finally:
            kube.close()
    emit(_metrics(metrics_dsn))
    return 0 if all(c.ok for c in checks) else 1
