"""Demo objects whose text fields carry markup and terminal escape payloads (the hostile cluster).

Identifiers are renamed in the serialized objects, so every reference (labels, owner references,
pod names built from workload names, GPU ids) stays consistent and the cluster still makes sense:
the console and the CLI must show the payloads literally, as plain text with controls escaped.
"""

from __future__ import annotations

import json
from typing import Any

from tftui.model.plaintext import visible
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects

TITLE = "\x1b]0;pwned\x07"
"""OSC 0: sets the terminal (tmux pane) title."""
CLIPBOARD = "\x1b]52;c;ZXZpbA==\x07"
"""OSC 52: writes the clipboard."""
CSI8 = "\x9b31m"
"""The 8-bit CSI: red text on terminals that read C1 controls."""
CLOSE = "[/]"
BOLD = "[bold red]x[/]"
LINK = "[link=file:///etc/passwd]x[/link]"

# identifier renames: old → new (old strings are unique enough in the demo to rename by text)
POOL = "dev" + CLOSE + "\x1b[2J"
NODE = "n" + BOLD + "\x1b]0;t\x07"
WORKLOAD = "wl" + LINK[:6] + "\x9b"  # `wl[link=\x9b`: an unclosed tag, then an 8-bit CSI
MODEL = "H100" + CLOSE
NAMESPACE = "ml[b]" + TITLE
"""The isolation pool's namespace with a GPUResourceQuota (no `/`: namespaces never have one)."""
MODE = "Mode" + CLOSE
PHASE = "Pending" + TITLE + CLIPBOARD
GPU_PHASE = "Failed" + CSI8
MESSAGE = "msg" + BOLD + TITLE
ANNOTATION = LINK + CLIPBOARD
EVENT_NOTE = "event " + LINK + TITLE
EVENT_REASON = "Reason" + CLOSE
COST = "1" + BOLD + CSI8
CONTEXT = "ctx" + CLOSE + TITLE
"""The source's name as the header shows it (a kubeconfig context name)."""

PAYLOADS = (CLOSE, BOLD, LINK, TITLE, CLIPBOARD, CSI8)
RENAMED_POOL = "demo-dev"
RENAMED_NODE = "dev-4090-03"  # an empty node: compaction releases it, its phase shows in DETAIL
RENAMED_WORKLOAD = "notebook-vik"
RENAMED_NAMESPACE = "ml-eval"
NOTE_KEY = "tftui.dev/note"


def shown(text: str) -> str:
    """How the console and the CLI print `text` (one line, controls as escapes)."""
    return visible(text)


def _rename(objects: list[dict[str, Any]], renames: dict[str, str]) -> list[dict[str, Any]]:
    text = json.dumps(objects)
    for old, new in renames.items():
        encoded = json.dumps(new)[1:-1]
        text = text.replace(old, encoded)
    out: list[dict[str, Any]] = json.loads(text)
    return out


def hostile_objects(nodes: int = 40, seed: int = 7) -> list[dict[str, Any]]:
    """The demo cluster with payloads in names, phases, modes, models, messages and annotations."""
    objects = generate_objects(seed, nodes, DEFAULT_NOW)
    node_gpus = [
        o["metadata"]["name"]
        for o in objects
        if o["kind"] == "GPU"
        and (o["metadata"].get("labels") or {}).get("tensor-fusion.ai/managed-by") == RENAMED_NODE
    ]
    renames = {
        RENAMED_POOL: POOL,
        RENAMED_NODE: NODE,
        RENAMED_WORKLOAD: WORKLOAD,
        RENAMED_NAMESPACE: NAMESPACE,
    }
    objects = _rename(objects, renames)
    for o in objects:
        kind, meta = o["kind"], o["metadata"]
        if kind == "GPUNode" and meta["name"] == NODE:
            o["status"]["phase"] = PHASE
            for c in o["status"].get("conditions") or []:
                c["message"] = MESSAGE
            o["spec"]["costPerHour"] = COST  # not a number: a warning quoting it
        if kind == "SchedulingConfigTemplate":
            o["spec"]["placement"]["mode"] = MODE
        if kind == "GPU":
            o["status"]["gpuModel"] = MODEL + " " + o["status"].get("gpuModel", "")
            o["status"]["message"] = MESSAGE
            if node_gpus and meta["name"] == node_gpus[0]:
                o["status"]["phase"] = GPU_PHASE
        if kind in ("TensorFusionWorkload", "GPUPool", "Pod", "GPUNode"):
            meta.setdefault("annotations", {})[NOTE_KEY] = ANNOTATION
        if kind == "Pod" and meta["name"].startswith(WORKLOAD):
            o["status"]["message"] = MESSAGE
    return objects


def hostile_events() -> list[dict[str, Any]]:
    """Two events.k8s.io Events about the hostile pool and node, as a cluster would list them."""
    out = []
    for i, (kind, name) in enumerate((("GPUPool", POOL), ("GPUNode", NODE))):
        out.append(
            {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": f"hostile.{i}", "namespace": "default"},
                "eventTime": "2026-11-30T11:59:00.000000Z",
                "reason": EVENT_REASON,
                "regarding": {"kind": kind, "name": name},
                "note": EVENT_NOTE,
                "type": "Warning",
            }
        )
    return out


class HostileCluster(ActingSimCluster):
    """The writable demo cluster over `hostile_objects`, named `CONTEXT`, listing `hostile_events`
    before the ones it records itself."""

    def __init__(self, nodes: int = 40) -> None:
        super().__init__(objects=hostile_objects(nodes), now=DEFAULT_NOW)

    def describe(self) -> str:
        return CONTEXT

    def events(self) -> list[dict[str, Any]]:
        return [*hostile_events(), *super().events()]
