"""The resource types the test API server serves, and the API server's CRD semantics.

Built-ins served: v1 nodes, pods (status subresource, `eviction`), secrets, configmaps (namespaces
are implicit); policy/v1 poddisruptionbudgets; events.k8s.io/v1 events; coordination.k8s.io/v1
leases.
The TensorFusion CRDs are served from `tests/data/crds/` with the API server's CRD semantics: status
subresource, structural pruning of unknown fields (`x-kubernetes-preserve-unknown-fields` respected)
and schema `default`s wherever the schema declares them (applied, as upstream, only inside objects
that are present).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.kubeapi.records import JSON

CRD_DIR = Path(__file__).resolve().parent.parent / "data" / "crds"


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status: bool  # has a status subresource
    schema: JSON | None = None  # openAPIV3Schema (CRDs only)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def builtin(self) -> bool:
        return self.schema is None

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


BUILTINS = (
    ResourceType("", "v1", "nodes", "Node", False, True),
    ResourceType("", "v1", "pods", "Pod", True, True),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, True),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, False),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, False),
    ResourceType("", "v1", "secrets", "Secret", True, False),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, False),
)


def load_crds(directory: Path = CRD_DIR) -> list[ResourceType]:
    """Every served version of every CRD file, with its schema and scope."""
    files = sorted(directory.glob("*.yaml"))
    return list(_load_crds(tuple((path, path.stat().st_mtime_ns) for path in files)))


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader (the PyYAML wheels ship it; the same documents as `safe_load`, 7× faster)."""


@functools.cache
def _load_crds(files: tuple[tuple[Path, int], ...]) -> tuple[ResourceType, ...]:
    """Parsed once per process (and again only if a file changed): the pure-Python YAML parser took
    about a CPU-second over the CRDs, and every test server needs them. The schemas are shared by
    every server: they are only read (`prune`, and `apply_defaults` copies each default it sets)."""
    out = []
    for path, _ in files:
        crd = yaml.load(path.read_text(), Loader=_YAML_LOADER)
        spec = crd["spec"]
        for ver in spec["versions"]:
            if not ver.get("served", True):
                continue
            out.append(
                ResourceType(
                    spec["group"],
                    ver["name"],
                    spec["names"]["plural"],
                    spec["names"]["kind"],
                    spec["scope"] == "Namespaced",
                    "status" in (ver.get("subresources") or {}),
                    (ver.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"},
                )
            )
    return tuple(out)


# -- CRD semantics -----------------------------------------------------------------------------------


def prune(value: Any, schema: Mapping[str, Any]) -> Any:
    """Structural pruning: drop object fields the schema does not name (unless preserved)."""
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            props = schema.get("properties")
            if props:
                for k in list(value):
                    if k in props:
                        value[k] = prune(value[k], props[k])
            return value
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        if props is not None:
            for k in list(value):
                if k not in props:
                    del value[k]
                else:
                    value[k] = prune(value[k], props[k])
        elif isinstance(addl, dict):
            for k in value:
                value[k] = prune(value[k], addl)
        elif schema.get("type") == "object" and addl is not True:
            value.clear()
        return value
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(v, schema["items"]) for v in value]
    return value


def crd_shape(rt: ResourceType, obj: JSON) -> None:
    """A custom resource as the API server stores it, in place: pruned, defaulted, its own
    apiVersion and kind (built-ins are left as they are)."""
    if rt.schema is None:
        return
    meta = obj.get("metadata")
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    body = prune(body, rt.schema)
    apply_defaults(body, rt.schema)
    obj.clear()
    obj.update({"apiVersion": rt.api_version, "kind": rt.kind, "metadata": meta, **body})


def apply_defaults(value: Any, schema: Mapping[str, Any]) -> None:
    """Schema `default`s for absent properties of objects that exist (the API server's order)."""
    if isinstance(value, dict):
        for k, sub in (schema.get("properties") or {}).items():
            if k not in value and "default" in sub:
                value[k] = copy.deepcopy(sub["default"])
            if k in value:
                apply_defaults(value[k], sub)
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            for v in value.values():
                apply_defaults(v, addl)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for v in value:
            apply_defaults(v, schema["items"])
