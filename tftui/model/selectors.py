"""Kubernetes label selectors (`matchLabels` + `matchExpressions`), evaluated against a label map."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def selector_matches(selector: Any, labels: Mapping[str, str], *, empty_matches_all: bool) -> bool:
    """Whether `selector` selects an object with `labels`; a malformed selector selects nothing.

    `empty_matches_all`: the API server's policy/v1 meaning of `{}` (every pod); upstream defrag
    instead treats an empty selector as covering nothing, so callers choose.
    """
    if not isinstance(selector, dict):
        return False
    ml = selector.get("matchLabels") or {}
    exprs = selector.get("matchExpressions") or []
    if not ml and not exprs:
        return empty_matches_all
    if any(labels.get(k) != v for k, v in ml.items()):
        return False
    for e in exprs:
        if not isinstance(e, dict):
            return False
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if not isinstance(key, str):
            return False
        if op == "In":
            ok = key in labels and labels[key] in values
        elif op == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif op == "Exists":
            ok = key in labels
        elif op == "DoesNotExist":
            ok = key not in labels
        else:
            return False  # unknown operator: a parse error upstream; here it selects nothing
        if not ok:
            return False
    return True


def pdb_selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """Whether a PodDisruptionBudget with `selector` covers a pod with `labels` as the API server
    reads it: the disruption controller and the Eviction API alike (policy/v1: a missing selector
    selects nothing, `{}` every pod of the namespace; the eviction handler skipped `{}` until
    Kubernetes 1.29, 1.28.3 and 1.27.7, kubernetes#119732)."""
    return selector_matches(selector, labels, empty_matches_all=True)
