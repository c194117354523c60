"""Label, field and PodDisruptionBudget selectors, and JSON merge patches, as the API server applies
them: pure functions of their arguments, shared by the store and the Eviction API (`deletion.py`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# -- selectors ----------------------------------------------------------------------------------------

_SET_RE = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_selector(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def label_match(selector: str, labels: Mapping[str, str]) -> bool:
    for req in _split_selector(selector):
        m = _SET_RE.match(req)
        if m:
            key, op, vals = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if (op == "in") != (labels.get(key) in vals):
                return False
        elif "!=" in req:
            k, v = req.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in req:
            k, v = req.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif req.startswith("!"):
            if req[1:].strip() in labels:
                return False
        elif req not in labels:
            return False
    return True


def _field(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def field_match(selector: str, obj: Mapping[str, Any]) -> bool:
    for req in _split_selector(selector):
        if "!=" in req:
            k, v = req.split("!=", 1)
            if _field(obj, k.strip()) == v.strip():
                return False
        else:
            k, v = req.replace("==", "=").split("=", 1)
            if _field(obj, k.strip()) != v.strip():
                return False
    return True


def pdb_selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """Whether the Eviction subresource counts this PDB for a pod with `labels` (metav1.LabelSelector,
    as `LabelSelectorAsSelector`): a missing selector selects nothing, an empty one `{}` every pod of
    the namespace, as the disruption controller reads it. (Until Kubernetes 1.29, 1.28.3 and 1.27.7
    the eviction handler skipped an empty selector too, so a drain ignored such a budget:
    kubernetes#119731, fixed by kubernetes#119732.)"""
    if not isinstance(selector, dict):
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, vals = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if (
            (op == "In" and labels.get(key) not in vals)
            or (op == "NotIn" and labels.get(key) in vals)
            or (op == "Exists" and key not in labels)
            or (op == "DoesNotExist" and key in labels)
        ):
            return False
    return True
