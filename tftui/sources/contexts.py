"""The kubeconfig's contexts, for the console's `:ctx` view and its header (context and user).

Only names are read: the context, its cluster and its user entry. Credentials (tokens,
passwords, certificates) stay inside the kubernetes client; nothing here returns them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tftui.model import redact
from tftui.sources.ports import SourceError

__all__ = ["ContextInfo", "list_contexts"]


@dataclass(frozen=True, slots=True)
class ContextInfo:
    name: str
    cluster: str
    user: str
    namespace: str
    current: bool


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def list_contexts(kubeconfig: str | None, current: str | None = None) -> list[ContextInfo]:
    """Every context of the kubeconfig (the client's default file when None), sorted by name;
    `current` (the one in use) is marked, else the file's current-context. One-line `SourceError`
    when the file cannot be read."""
    # imported here: the console imports this module at start, and the kubernetes package costs
    # about half a CPU-second to import (a dump or the demo never needs it)
    from kubernetes import config

    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception as exc:  # the client raises several unrelated types for a bad kubeconfig
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SourceError(f"kubeconfig: {redact.scrub(first)}") from None
    chosen = current or _text((active or {}).get("name"))
    out = []
    for c in contexts or []:
        ctx = c.get("context") or {}
        name = _text(c.get("name"))
        out.append(
            ContextInfo(
                name,
                _text(ctx.get("cluster")),
                _text(ctx.get("user")),
                _text(ctx.get("namespace")),
                name == chosen,
            )
        )
    return sorted(out, key=lambda i: i.name)
