"""RBAC roles (`deploy/rbac/`) and `tftui doctor` against the in-process API server and PostgreSQL."""

from __future__ import annotations

import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kubeapi import KubeApiServer, write_kubeconfig
from tests.stores import MetricsStore
from tftui.cli import main
from tftui.doctor import (
    ACTION_PERMISSIONS,
    CONSOLE_ONLY_ACTIONS,
    NAMESPACED_FILES,
    ROLE_FILES,
    ROLES,
    Permission,
    role_permissions,
)
from tftui.engine.plan import Action

ROOT = Path(__file__).resolve().parent.parent
RBAC = ROOT / "deploy" / "rbac"


def _expand(rules: list[dict[str, Any]]) -> set[Permission]:
    out: set[Permission] = set()
    for rule in rules:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule  # no resourceNames, nonResourceURLs
        for value in (*rule["apiGroups"], *rule["resources"], *rule["verbs"]):
            assert "*" not in value, rule
        for g in rule["apiGroups"]:
            for r in rule["resources"]:
                for v in rule["verbs"]:
                    out.add(Permission(g, r, v))
    return out


def cluster_granted(role: str) -> set[Permission]:
    """The (group, resource, verb) triples the role's ClusterRole YAML grants."""
    docs = list(yaml.safe_load_all((RBAC / ROLE_FILES[role]).read_text()))
    assert len(docs) == 1 and docs[0]["kind"] == "ClusterRole"
    assert docs[0]["metadata"]["name"] == f"tftui-{role}"
    return _expand(docs[0]["rules"])


def namespaced_granted(file: str) -> set[Permission]:
    """What the Role of a daemon-*.yaml example grants (in its namespace)."""
    (role,) = [d for d in yaml.safe_load_all((RBAC / file).read_text()) if d["kind"] == "Role"]
    return _expand(role["rules"])


def granted(role: str) -> set[Permission]:
    """Everything the role's manifests grant without the external scaler: its ClusterRole, and for
    the daemon the Lease Role of daemon-lease.yaml."""
    out = cluster_granted(role)
    if role == "daemon":
        out |= namespaced_granted(NAMESPACED_FILES["leases"])
    return out


def policy(perms: set[Permission]) -> Any:
    def allowed(attrs: Mapping[str, str]) -> bool:
        res = attrs.get("resource", "")
        if attrs.get("subresource"):
            res += "/" + attrs["subresource"]
        return Permission(attrs.get("group", ""), res, attrs.get("verb", "")) in perms

    return allowed


@pytest.mark.parametrize("role", ROLES)
def test_role_grants_exactly_what_the_code_uses(role: str) -> None:
    assert granted(role) == set(role_permissions(role))


def test_nothing_namespaced_is_granted_cluster_wide() -> None:
    """Leases and Secrets only in Roles: the Lease in the daemon's namespace, Secrets only where an
    external scaler's API key lives (and only with --external-scaler)."""
    for role in ROLES:
        assert not {p for p in cluster_granted(role) if p.resource in ("leases", "secrets")}, role
    assert Permission("", "secrets", "get") not in set(role_permissions("daemon"))
    with_scaler = role_permissions("daemon", "tf-sys", ["ml", "web"])
    assert Permission("", "secrets", "get") in with_scaler
    assert namespaced_granted(NAMESPACED_FILES["secrets"]) == {Permission("", "secrets", "get")}


def test_every_plan_action_has_its_permissions() -> None:
    kinds = set(typing.get_args(Action))
    assert kinds == set(ACTION_PERMISSIONS)
    daemon = set(role_permissions("daemon"))
    write = set(role_permissions("console-write"))
    for kind, perms in ACTION_PERMISSIONS.items():
        assert set(perms) <= (write if kind in CONSOLE_ONLY_ACTIONS else daemon)


def test_roles_nest_and_console_writes_only_three_things() -> None:
    console, write, daemon = (set(role_permissions(r)) for r in ROLES)
    assert {p.verb for p in console} == {"get", "list", "watch"}
    assert write - console == {
        Permission("tensor-fusion.ai", "gpupools", "patch"),
        Permission("tensor-fusion.ai", "schedulingconfigtemplates", "patch"),
        Permission("tensor-fusion.ai", "tensorfusionworkloads", "patch"),
    }
    assert console < write and console < daemon
    assert Permission("tensor-fusion.ai", "schedulingconfigtemplates", "patch") not in daemon
    # the autoscale toggle is a person's decision: the daemon cannot flip it
    assert Permission("tensor-fusion.ai", "tensorfusionworkloads", "patch") not in daemon


def test_daemon_binding_example() -> None:
    docs = list(yaml.safe_load_all((RBAC / "daemon-binding.yaml").read_text()))
    sa, binding = docs
    assert sa["kind"] == "ServiceAccount" and binding["kind"] == "ClusterRoleBinding"
    assert binding["roleRef"]["name"] == "tftui-daemon"
    assert binding["subjects"][0]["name"] == sa["metadata"]["name"]
    assert binding["subjects"][0]["namespace"] == sa["metadata"]["namespace"]


@pytest.fixture
def server() -> Iterator[KubeApiServer]:
    srv = KubeApiServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def kubeconfig(server: KubeApiServer, tmp_path: Path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", server.url)


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["doctor", *args])
    return code, capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("role", ROLES)
def test_doctor_passes_with_the_role_granted(
    server: KubeApiServer, kubeconfig: Path, capsys: pytest.CaptureFixture[str], role: str
) -> None:
    server.access = policy(granted(role))
    code, lines = doctor(capsys, "--kubeconfig", str(kubeconfig), "--role", role)
    assert code == 0, lines
    assert lines[0].startswith("connectivity: ok (v1.31.0-tftui-test at http://127.0.0.1:")
    assert lines[1] == "CRDs: ok (10 tensor-fusion.ai/v1 kinds)"
    assert len([ln for ln in lines if ln.startswith("permission ")]) == len(role_permissions(role))
    assert all(ln.endswith(": ok") for ln in lines if ln.startswith("permission "))
    assert lines[-1] == "metrics store: skipped: no --metrics-dsn and no TFTUI_METRICS_DSN"


def test_doctor_names_the_missing_rule(
    server: KubeApiServer, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.access = policy(granted("console"))  # read-only binding, console with actions wanted
    code, lines = doctor(capsys, "--kubeconfig", str(kubeconfig))
    assert code == 1
    missing = [ln for ln in lines if "MISSING" in ln]
    assert missing == [
        "permission patch gpupools.tensor-fusion.ai: MISSING: not allowed; add to the ClusterRole bound "
        "to you (deploy/rbac/console-write.yaml has it): "
        '{apiGroups: ["tensor-fusion.ai"], resources: ["gpupools"], verbs: ["patch"]}',
        "permission patch schedulingconfigtemplates.tensor-fusion.ai: MISSING: not allowed; add to the "
        "ClusterRole bound to you (deploy/rbac/console-write.yaml has it): "
        '{apiGroups: ["tensor-fusion.ai"], resources: ["schedulingconfigtemplates"], verbs: ["patch"]}',
        "permission patch tensorfusionworkloads.tensor-fusion.ai: MISSING: not allowed; add to the "
        "ClusterRole bound to you (deploy/rbac/console-write.yaml has it): "
        '{apiGroups: ["tensor-fusion.ai"], resources: ["tensorfusionworkloads"], verbs: ["patch"]}',
    ]


def test_doctor_daemon_subresources(
    server: KubeApiServer, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.access = policy(granted("daemon") - {Permission("", "pods/eviction", "create")})
    code, lines = doctor(capsys, "--kubeconfig", str(kubeconfig), "--role", "daemon")
    assert code == 1
    assert [ln.split(":")[0] for ln in lines if "MISSING" in ln] == ["permission create pods/eviction"]
    assert 'resources: ["pods/eviction"], verbs: ["create"]' in "\n".join(lines)


def test_doctor_missing_crds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crds = tmp_path / "crds"
    crds.mkdir()
    with KubeApiServer(crd_dir=crds) as srv:
        cfg = write_kubeconfig(tmp_path / "kubeconfig", srv.url)
        code, lines = doctor(capsys, "--kubeconfig", str(cfg), "--role", "console")
    assert code == 1
    assert lines[1].startswith(
        "CRDs: MISSING: tensorfusionclusters.tensor-fusion.ai, gpupools.tensor-fusion.ai"
    )
    assert "install the TensorFusion CRDs" in lines[1]


def test_doctor_unreachable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    srv = KubeApiServer().start()
    url = srv.url
    srv.stop()
    cfg = write_kubeconfig(tmp_path / "kubeconfig", url)
    code, lines = doctor(capsys, "--kubeconfig", str(cfg), "--metrics-dsn", "host=127.0.0.1 port=1 dbname=x")
    assert code == 1
    assert lines[0].startswith(
        f"connectivity: MISSING: cannot reach the API server of context kubeapi-test ({url})"
    )
    assert lines[1] == "CRDs: skipped: no connection to the API server"
    assert lines[2] == "permissions: skipped: no connection to the API server"
    assert lines[3].startswith("metrics store: MISSING: ") and "check --metrics-dsn" in lines[3]


def test_doctor_bad_kubeconfig(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = doctor(capsys, "--kubeconfig", str(tmp_path / "nope"))
    assert code == 1
    assert lines[0].startswith("connectivity: MISSING: no usable kubeconfig")


def test_doctor_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["doctor", "--role", "admin"])
    assert exc.value.code == 2


def test_doctor_metrics_tables(
    server: KubeApiServer, kubeconfig: Path, store: MetricsStore, capsys: pytest.CaptureFixture[str]
) -> None:
    store.create("doctor_tables", "ts", tables=("tf_node_metrics", "tf_gpu_usage"))
    code, lines = doctor(capsys, "--kubeconfig", str(kubeconfig), "--metrics-dsn", store.dsn("doctor_tables"))
    assert code == 1
    tail = lines[lines.index("metrics store: ok (2 tf_* tables)") :]
    assert tail[1:3] == ["metrics table tf_node_metrics: ok", "metrics table tf_gpu_usage: ok"]
    assert tail[3] == (
        "metrics table tf_worker_resources: MISSING: table tf_worker_resources not in the metrics "
        "database: it is written by the TensorFusion controller (vector sidecar of the operator pod)"
    )
    assert len([ln for ln in tail if "MISSING" in ln]) == 3


def test_doctor_checks_the_daemon_lease_in_its_namespace(
    server: KubeApiServer, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The daemon's Lease rules are asked in the lease namespace (a Role there is enough)."""
    cluster_wide = policy(granted("daemon") - {p for p in granted("daemon") if p.resource == "leases"})

    def allowed(attrs: Mapping[str, str]) -> bool:
        if attrs.get("resource") == "leases":
            return attrs.get("namespace") == "tf-sys" and attrs.get("verb") in READ_AND_ELECT
        return bool(cluster_wide(attrs))

    server.access = allowed
    code, lines = doctor(
        capsys, "--kubeconfig", str(kubeconfig), "--role", "daemon", "--lease-namespace", "tf-sys"
    )
    assert code == 0, lines
    assert "permission watch leases.coordination.k8s.io in namespace tf-sys: ok" in lines
    code, lines = doctor(
        capsys, "--kubeconfig", str(kubeconfig), "--role", "daemon", "--lease-namespace", "other"
    )
    assert code == 1
    assert sorted(ln.split(":")[0] for ln in lines if "MISSING" in ln) == sorted(
        f"permission {v} leases.coordination.k8s.io in namespace other" for v in READ_AND_ELECT
    )


READ_AND_ELECT = ("get", "list", "watch", "create", "update")


def test_doctor_checks_external_scaler_secrets_per_namespace(
    server: KubeApiServer, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster_wide = policy(cluster_granted("daemon"))

    def allowed(attrs: Mapping[str, str]) -> bool:
        if attrs.get("resource") == "leases":
            return attrs.get("namespace") == "default"
        if attrs.get("resource") == "secrets":
            return attrs.get("namespace") == "ml" and attrs.get("verb") == "get"
        return bool(cluster_wide(attrs))

    server.access = allowed
    code, lines = doctor(capsys, "--kubeconfig", str(kubeconfig), "--role", "daemon")
    assert code == 0, lines
    assert not [ln for ln in lines if "secrets" in ln]  # without the external scaler: never asked
    code, lines = doctor(
        capsys, "--kubeconfig", str(kubeconfig), "--role", "daemon", "--secret-namespaces", "ml,web"
    )
    assert code == 1
    assert "permission get secrets in namespace ml: ok" in lines
    assert [ln for ln in lines if "MISSING" in ln] == [
        "permission get secrets in namespace web: MISSING: not allowed; add to a Role bound to you in "
        "namespace web (deploy/rbac/daemon-external-scaler.yaml has it): "
        '{apiGroups: [""], resources: ["secrets"], verbs: ["get"]}'
    ]
