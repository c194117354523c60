"""What `y` (YAML) and `d` (describe) show for a selected row: the stored object, or tftui's view.

YAML is the object exactly as the source returned it (`ClusterState.snapshot`); describe is the
derived view the console computed from it (capacity, allocation, relations), so an operator can
tell "what the cluster says" from "what tftui made of it". Figures read as an operator writes them
(`vram: 640Gi`, `tflops: 1,320`; the exact value beside it when rounding hides it), followed by
what the engine decided for the object (compaction and defrag, for nodes and pools) and the events
and journal entries that name it, newest first.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import yaml

from tftui.engine.pending import explain, is_pending
from tftui.engine.state import ClusterState, Res
from tftui.ui.render.format import fmt_bytes

if TYPE_CHECKING:
    from tftui.ui.load.data import ConsoleData

LIST_PREVIEW = 12
"""Longer lists in a description show this many items and the count."""
EVENTS_SHOWN = 15
"""Events and journal entries a description lists (newest first)."""
_BYTES_FIELDS = ("vram", "ram_bytes", "disk_bytes", "memory_bytes")

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


def _tflops(x: float) -> str:
    return f"{x:,.3f}".rstrip("0").rstrip(".") + " TFLOPS"


def _bytes(x: float) -> str:
    short = fmt_bytes(x)
    if x < 1024:
        return f"{x:,.0f} bytes"
    return short if float(x).is_integer() and _exact(short, x) else f"{short} ({x:,.0f} bytes)"


def _exact(short: str, x: float) -> bool:
    units = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
    number, unit = short[:-2], short[-2:]
    try:
        return unit in units and float(number) * 1024 ** units[unit] == x
    except ValueError:
        return False


def _short(value: Any, field: str = "") -> Any:
    if isinstance(value, Res):
        return {"tflops": _tflops(value.tflops), "vram": _bytes(value.vram)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _short(getattr(value, f.name), f.name) for f in dataclasses.fields(value) if f.repr}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else list(value)
        shown = [_short(v) for v in items[:LIST_PREVIEW]]
        if len(items) > LIST_PREVIEW:
            shown.append(f"… {len(items) - LIST_PREVIEW} more ({len(items)} in all)")
        return shown
    if isinstance(value, dict):
        return {str(k): _short(v, str(k)) for k, v in list(value.items())[:LIST_PREVIEW]}
    if isinstance(value, float) and field in _BYTES_FIELDS:
        return _bytes(value)
    if isinstance(value, float) and "tflops" in field:
        return _tflops(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _decisions(data: ConsoleData, kind: str, key: str) -> dict[str, Any]:
    """What the engine decided for the object this refresh (nodes and pools)."""
    ops = data.ops
    out: dict[str, Any] = {}
    if kind == "GPUNode":
        node = data.state.nodes.get(key)
        pool = node.pool if node is not None else None
        comp = ops.compaction.get(pool or "")
        if comp is not None:
            for name, decision, detail in comp.decisions():
                if name == key:
                    out["compaction"] = f"{decision}: {detail}" if detail else decision
        defrag = ops.defrag.get(pool or "")
        if defrag is not None:
            for name, decision, util, detail in defrag.nodes():
                if name == key:
                    busy = f" ({util:.0f}% of GPUs busy)" if util is not None else ""
                    out["defrag"] = f"{decision}{busy}" + (f": {detail}" if detail else "")
    elif kind == "GPUPool":
        comp = ops.compaction.get(key)
        if comp is not None:
            released = [r.node for r in comp.result.released]
            out["compaction"] = (
                f"due ({comp.due_reason}), releases {', '.join(released) or 'nothing'}"
                if comp.due
                else f"not due; would release {len([k for k in comp.result.kept if k.reason == 'not-due'])}"
            )
        defrag = ops.defrag.get(key)
        if defrag is not None:
            out["defrag"] = defrag.state
    return out


def _events(data: ConsoleData, kind: str, key: str) -> list[str]:
    """Recorded events whose object is this one, then journal entries naming it; newest first."""
    name = key.rsplit("/", 1)[-1]
    refs = {f"{kind}/{key}", f"{kind}/{name}"}
    if kind == "GPUNode":
        refs.add(f"Node/{key}")
    out: list[str] = []
    for e in data.ops.events:
        if e.object in refs or (kind != "GPUPool" and name and name in e.note.replace(",", " ").split()):
            when = e.time.strftime("%m-%d %H:%M:%S") if e.time is not None else "—"
            out.append(f"{when} {e.type} {e.reason}: {e.note}")
    for j in data.ops.journal:
        if j.kind == "event":
            continue  # the recorded event itself is listed above
        if name and (
            name in j.message.split() or f"{name}:" in j.message or (j.pool == key and kind == "GPUPool")
        ):
            when = j.time.strftime("%m-%d %H:%M:%S") if j.time is not None else "—"
            out.append(f"{when} journal {j.kind}{'' if j.ok else ' (failed)'}: {j.message}")
    return out[:EVENTS_SHOWN]


def describe(source: ConsoleData | ClusterState, kind: str, key: str) -> str | None:
    """The derived view of the object as YAML-like text, why a Pending worker waits, and (given the
    console's data, not a bare state) its decisions and events; None when tftui has no view of it."""
    data = None if isinstance(source, ClusterState) else source
    state = source if isinstance(source, ClusterState) else source.state
    index = VIEW_OF_KIND.get(kind)
    view = getattr(state, index).get(key) if index is not None else None
    if view is None:
        return None
    body: dict[str, Any] = {"derived": _short(view)}
    if kind == "Pod" and is_pending(state, key):  # why it waits, and the moves that would admit it
        why = explain(state, key)
        if why is not None:
            body["pending"] = why.to_json()
    if data is None:
        return _dump(body)
    decisions = _decisions(data, kind, key)
    if decisions:
        body["decisions"] = decisions
    events = _events(data, kind, key)
    body["events"] = events or (
        "none recorded" if data.ops.events_enabled else f"{data.source} records no events (read-only source)"
    )
    return _dump(body)


def _dump(body: dict[str, Any]) -> str:
    return yaml.safe_dump(body, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100)
