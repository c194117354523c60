"""What-if policies: a placement mode per SchedulingConfigTemplate, defrag and autoscale switches,
`+unblock`; parsed from `--policy` text and applied to a copy of the objects before a run. Apart from
the driver (`runtime.whatif`) because the CLI and the console parse policies without running one."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from tftui.model import keys
from tftui.model.selectors import selector_matches

JSON = dict[str, Any]
MODES: Final = ("CompactFirst", "LowLoadFirst", "NodeCompactGPULowLoad")
DEFAULT_DEFRAG: Final[JSON] = {
    "enabled": True,
    "schedule": "0 3 * * *",
    "timezone": "UTC",
    "maxDuration": "2h",
    "utilizationThresholdPercent": 40,
}


@dataclass(frozen=True, slots=True)
class Policy:
    """What to change before simulating: None keeps what the objects say."""

    name: str
    placement: str | None = None  # every SchedulingConfigTemplate's spec.placement.mode
    defrag: bool | None = None  # True: enable (a 03:00 UTC, 2 h campaign where none is set)
    threshold: float | None = None  # defrag utilizationThresholdPercent (None: as configured)
    autoscale: bool = False  # autoSetResources on every workload, and the autoscale loop on
    unblock: bool = False  # lift the blockers an operator controls (see `unblock`)


PRESETS: Final[dict[str, tuple[str, ...]]] = {
    "modes": tuple(f"{m}+{d}" for d in ("defrag", "nodefrag") for m in MODES),
    "autoscale": tuple(f"{m}+defrag{a}" for a in ("", "+autoscale") for m in MODES),
    "all": tuple(f"{m}+{d}{a}" for a in ("", "+autoscale") for d in ("defrag", "nodefrag") for m in MODES),
    # one change per step, as the reference page takes them: defrag as configured, then CompactFirst
    # placement, then an 80 % defrag threshold, then the operator-controlled blockers lifted
    "ladder": (
        "configured+defrag",
        "CompactFirst+defrag",
        "CompactFirst+defrag=80",
        "CompactFirst+defrag=80+unblock",
    ),
}


def parse_policy(text: str) -> Policy:
    """`configured` or a mode, then `+defrag[=PCT]`/`+nodefrag`/`+autoscale`/`+unblock` (e.g.
    `CompactFirst+defrag`); `defrag=PCT` also sets the utilization threshold under which nodes are
    drained; `unblock` lifts cordons, do-not-disrupt and PDB blocks first (`unblock()`)."""
    parts = [p.strip() for p in text.split("+")]
    head, flags = parts[0], parts[1:]
    placement: str | None
    if head.lower() == "configured":
        placement = None
    else:
        match = [m for m in MODES if m.lower() == head.lower()]
        if not match:
            raise ValueError(f"policy {text!r}: unknown placement mode {head!r} (one of {', '.join(MODES)})")
        placement = match[0]
    defrag: bool | None = None
    threshold: float | None = None
    autoscale = unblock_ = False
    for f in flags:
        if f.lower().startswith("defrag="):
            defrag = True
            try:
                threshold = float(f.split("=", 1)[1])
            except ValueError:
                threshold = -1.0
            if not 0 <= threshold <= 100:
                raise ValueError(f"policy {text!r}: defrag threshold must be a percentage 0-100")
        elif f.lower() == "defrag":
            defrag = True
        elif f.lower() == "nodefrag":
            defrag = False
        elif f.lower() == "autoscale":
            autoscale = True
        elif f.lower() == "unblock":
            unblock_ = True
        else:
            raise ValueError(
                f"policy {text!r}: unknown option {f!r} (defrag, defrag=PCT, nodefrag, autoscale, unblock)"
            )
    return Policy(text, placement, defrag, threshold, autoscale, unblock_)


def apply_policy(objects: Iterable[JSON], policy: Policy) -> list[JSON]:
    """`objects` with the policy's settings written in; only the objects it changes are copied (the
    simulated cluster copies on write, so the others are shared, never modified)."""
    out: list[JSON] = []
    for original in unblock(objects) if policy.unblock else objects:
        kind = original.get("kind")
        if (
            (kind == "SchedulingConfigTemplate" and policy.placement is not None)
            or (kind == "GPUPool" and policy.defrag is not None)
            or (kind == "TensorFusionWorkload" and policy.autoscale)
        ):
            obj = copy.deepcopy(original)
            spec = obj.setdefault("spec", {})
            if kind == "SchedulingConfigTemplate":
                spec.setdefault("placement", {})["mode"] = policy.placement
            elif kind == "GPUPool":
                nc = spec.setdefault("nodeManagerConfig", {}).setdefault("nodeCompaction", {})
                current = nc.get("defrag")
                if policy.defrag:
                    nc["defrag"] = {**DEFAULT_DEFRAG, **(current or {}), "enabled": True}
                    if policy.threshold is not None:
                        nc["defrag"]["utilizationThresholdPercent"] = policy.threshold
                elif current is not None:
                    nc["defrag"] = {**current, "enabled": False}
            else:
                asc = spec.setdefault("autoScalingConfig", {})
                asc["autoSetResources"] = {**(asc.get("autoSetResources") or {}), "enable": True}
            out.append(obj)
        else:
            out.append(original)
    return out


def _allows_none(pdb: JSON) -> bool:
    """A PDB that lets no pod go: its status says so, or (no status yet) `maxUnavailable: 0`."""
    status = pdb.get("status") or {}
    if "disruptionsAllowed" in status:
        return bool(status.get("disruptionsAllowed") == 0)
    return (pdb.get("spec") or {}).get("maxUnavailable") in (0, "0", "0%")


def unblock(objects: Iterable[JSON]) -> list[JSON]:
    """`objects` without the blockers an operator controls, to price them (`+unblock`): nodes
    uncordoned; `do-not-disrupt` cleared on Nodes and GPUNodes; PDBs that allow no disruption set to
    `maxUnavailable: 1`; a `maxUnavailable: 1` PDB (`<workload>-whatif-pdb`) for every workload
    whose workers no PDB covers (defrag requires one). Pods using GPUs outside TensorFusion stay:
    they are not the operator's to move. Only changed objects are copied."""
    objs = list(objects)
    selectors: dict[str, list[Any]] = {}  # namespace → its PDBs' selectors (a PDB covers its namespace only)
    for o in objs:
        if o.get("kind") == "PodDisruptionBudget":
            ns = (o.get("metadata") or {}).get("namespace") or ""
            selectors.setdefault(ns, []).append((o.get("spec") or {}).get("selector"))
    uncovered: dict[tuple[str, str], None] = {}
    for o in objs:
        meta = o.get("metadata") or {}
        labels = meta.get("labels") or {}
        if o.get("kind") != "Pod" or labels.get(keys.COMPONENT) != keys.COMPONENT_WORKER:
            continue
        ns, wl = meta.get("namespace") or "", labels.get(keys.WORKLOAD)
        if not wl or any(
            selector_matches(sel, labels, empty_matches_all=False) for sel in selectors.get(ns, ())
        ):
            continue
        uncovered[(ns, wl)] = None
    out: list[JSON] = []
    for o in objs:
        kind = o.get("kind")
        meta = o.get("metadata") or {}
        labels = meta.get("labels") or {}
        cordoned = kind == "Node" and bool((o.get("spec") or {}).get("unschedulable"))
        dnd = kind in ("Node", "GPUNode") and keys.DO_NOT_DISRUPT in labels
        if cordoned or dnd:
            o = copy.deepcopy(o)
            o.get("spec", {}).pop("unschedulable", None)
            o["metadata"].get("labels", {}).pop(keys.DO_NOT_DISRUPT, None)
        elif kind == "PodDisruptionBudget" and _allows_none(o):
            o = copy.deepcopy(o)
            spec = o.setdefault("spec", {})
            spec.pop("minAvailable", None)
            spec["maxUnavailable"] = 1
            o.pop("status", None)  # the simulated disruption controller recomputes it
        out.append(o)
    for ns, wl in uncovered:
        out.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": f"{wl}-whatif-pdb", "namespace": ns},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {keys.WORKLOAD: wl}}},
            }
        )
    return out
