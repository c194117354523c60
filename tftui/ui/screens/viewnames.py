"""The names `:` takes: the root views, in the order the prompt lists them, and their k9s aliases."""

from __future__ import annotations

VIEWS = (
    "pools",
    "nodes",
    "gpus",
    "workloads",
    "place",
    "compaction",
    "defrag",
    "events",
    "waste",
    "alerts",
    "whatif",
    "ns",
    "ctx",
    "xray",
)
"""The root views, in the order the prompt and the unknown-view hint list them."""
VIEW_ALIASES: dict[str, str] = {
    "pools": "pools",
    "pool": "pools",
    "nodes": "nodes",
    "node": "nodes",
    "no": "nodes",
    "gpus": "gpus",
    "gpu": "gpus",
    "workloads": "workloads",
    "workload": "workloads",
    "wl": "workloads",
    "place": "place",
    "placement": "place",
    "compaction": "compaction",
    "compact": "compaction",
    "defrag": "defrag",
    "events": "events",
    "event": "events",
    "ev": "events",
    "journal": "events",
    "waste": "waste",
    "diagnosis": "waste",
    "diag": "waste",
    "alerts": "alerts",
    "alert": "alerts",
    "whatif": "whatif",
    "what-if": "whatif",
    "ns": "ns",
    "namespace": "ns",
    "namespaces": "ns",
    "ctx": "ctx",
    "context": "ctx",
    "contexts": "ctx",
    "xray": "xray",
    "x": "xray",
}
"""`:` command → root view (k9s aliases)."""
QUIT_COMMANDS = ("quit", "q")
COMMANDS = [*VIEWS, *(a for a in VIEW_ALIASES if a not in VIEWS), "quit"]
"""Completion candidates, canonical names first so they win the prefix match."""
PROMPT_HINT = "  ".join(VIEWS)
