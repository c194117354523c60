"""GPU isolation modes as TensorFusion records them: pool rules, GPU status, hardware capabilities.

Four modes: `shared` (whole-GPU time slicing: a shared worker takes a whole idle GPU), `soft`
(the default: rate-limited slices), `hard` (dedicated SMs) and `partitioned` (hardware partitions
such as MIG). Where each applies:

- the pool picks a node's mode from the node's Kubernetes labels: `isolationModeRules` in order,
  first match wins, else `defaultIsolationMode`, else `soft` (what the hypervisor on that node then
  runs and reports);
- the hypervisor reports it per GPU in `status.isolationMode`, and which policy it runs in
  `status.isolationPolicy`: `Static` (also when empty: one mode per node) or `Dynamic` (each GPU
  takes the mode of its first allocation: `status.activeIsolationMode`, empty while idle;
  `status.dynamicIsolationConflict` marks a GPU that recovery found holding two modes);
- the `tensor-fusion.ai/virtualization-capabilities` annotation (JSON) says which modes the
  hardware supports; when it is absent every mode is assumed to be.

Parsing only; the placement filter that applies these is `engine.isolation`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tftui.model import keys
from tftui.model.selectors import selector_matches

SHARED, SOFT, HARD, PARTITIONED = "shared", "soft", "hard", "partitioned"
MODES = (SHARED, SOFT, HARD, PARTITIONED)
STATIC, DYNAMIC = "Static", "Dynamic"
CAPABILITIES = f"{keys.DOMAIN}/virtualization-capabilities"


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the annotation says the GPU supports (only present when the annotation parses)."""

    partitioning: bool = False
    soft: bool = False
    hard: bool = False

    def supports(self, mode: str) -> bool:
        """Shared (and an unset mode) needs no virtualization support; unknown modes are refused."""
        if mode in ("", SHARED):
            return True
        return {SOFT: self.soft, HARD: self.hard, PARTITIONED: self.partitioning}.get(mode, False)


@dataclass(frozen=True, slots=True)
class GPUIsolation:
    """A GPU's isolation facts from its object."""

    mode: str = ""  # status.isolationMode ("" when the object does not say)
    policy: str = STATIC
    active: str = ""  # Dynamic only
    conflict: bool = False
    capabilities: Capabilities | None = None

    @property
    def dynamic(self) -> bool:
        return self.policy == DYNAMIC

    def shown(self) -> str:
        """The mode a person should see: a Dynamic GPU's lock (or `dynamic` while idle)."""
        if self.dynamic:
            return "conflict" if self.conflict else (self.active or "dynamic")
        return self.mode or "-"


def capabilities(annotations: Mapping[str, str] | None) -> Capabilities | None:
    """The capabilities annotation, or None when absent or not a JSON object (as the controller)."""
    raw = (annotations or {}).get(CAPABILITIES)
    if not raw:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    return Capabilities(
        doc.get("SupportsPartitioning") is True,
        doc.get("SupportsSoftIsolation") is True,
        doc.get("SupportsHardIsolation") is True,
    )


_DEFAULT = GPUIsolation()


def gpu_isolation(gpu: Mapping[str, Any]) -> GPUIsolation:
    """Read a GPU object's isolation fields."""
    status = gpu.get("status") or {}
    caps = capabilities((gpu.get("metadata") or {}).get("annotations"))
    mode = status.get("isolationMode") or ""
    policy = DYNAMIC if status.get("isolationPolicy") == DYNAMIC else STATIC
    active = status.get("activeIsolationMode") or ""
    conflict = status.get("dynamicIsolationConflict") is True
    if not mode and policy == STATIC and caps is None:
        return _DEFAULT
    return GPUIsolation(mode, policy, active, conflict, caps)


def node_mode(node_labels: Mapping[str, str], node_manager_config: Mapping[str, Any] | None) -> str:
    """The isolation mode the pool's rules give a node with these labels (first matching rule, else
    `defaultIsolationMode`, else soft). A malformed rule selects nothing."""
    nmc = node_manager_config or {}
    for rule in nmc.get("isolationModeRules") or ():
        if not isinstance(rule, Mapping):
            continue
        sel = rule.get("selector")
        if selector_matches(sel if sel is not None else {}, node_labels, empty_matches_all=True):
            return str(rule.get("mode") or SOFT)
    return str(nmc.get("defaultIsolationMode") or SOFT)
