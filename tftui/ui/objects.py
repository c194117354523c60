"""What `y` (YAML) and `d` (describe) show for a selected row: the stored object, or tftui's view.

YAML is the object exactly as the source returned it (`ClusterState.snapshot`); describe is the
derived view the console computed from it (capacity, allocation, relations), so an operator can
tell "what the cluster says" from "what tftui made of it".
"""

from __future__ import annotations

import dataclasses
from typing import Any

import yaml

from tftui.engine.pending import explain, is_pending
from tftui.engine.state import ClusterState

LIST_PREVIEW = 12
"""Longer lists in a description show this many items and the count."""

VIEW_OF_KIND = {
    "GPUPool": "pools",
    "GPUNode": "nodes",
    "GPU": "gpus",
    "TensorFusionWorkload": "workloads",
    "Pod": "workers",
}
"""Kind → the `ClusterState` index holding its derived view."""


def find_object(state: ClusterState, kind: str, key: str) -> dict[str, Any] | None:
    """The stored object of `kind` keyed `key`: `namespace/name` for a namespaced object, else the
    name itself (which a dump may spell with a `/` of its own: it is not split then)."""
    namespace, _, name = key.partition("/")
    for obj in state.snapshot.kind(kind):
        meta = obj.get("metadata") or {}
        if meta.get("namespace"):
            if meta.get("namespace") == namespace and meta.get("name") == name:
                return obj
        elif meta.get("name") == key:
            return obj
    return None


def object_yaml(obj: dict[str, Any]) -> str:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, allow_unicode=True)


def _short(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _short(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else list(value)
        shown = [_short(v) for v in items[:LIST_PREVIEW]]
        if len(items) > LIST_PREVIEW:
            shown.append(f"… {len(items) - LIST_PREVIEW} more ({len(items)} in all)")
        return shown
    if isinstance(value, dict):
        return {str(k): _short(v) for k, v in list(value.items())[:LIST_PREVIEW]}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def describe(state: ClusterState, kind: str, key: str) -> str | None:
    """The derived view of the object as YAML-like text, or None when tftui has none."""
    index = VIEW_OF_KIND.get(kind)
    view = getattr(state, index).get(key) if index is not None else None
    if view is None:
        return None
    body = _short(view)
    if kind == "Pod" and is_pending(state, key):  # why it waits, and the moves that would admit it
        why = explain(state, key)
        if why is not None:
            body["pending"] = why.to_json()
    return yaml.safe_dump(body, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100)
