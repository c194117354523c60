"""Is any Kubernetes cluster configured here? (kubeconfig files or the pod's service account)

`tftui report --metrics-dsn` needs no cluster: with none configured it reports from the metrics
alone. A configured cluster that cannot be reached stays an error (its objects were wanted).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["cluster_configured"]


def cluster_configured(
    kubeconfig: str | None = None, context: str | None = None, env: Mapping[str, str] | None = None
) -> bool:
    """True when a flag names one, `KUBECONFIG` lists an existing file, `~/.kube/config` exists, or
    the process runs in a pod (`KUBERNETES_SERVICE_HOST`) — what the kubernetes client would load."""
    env = os.environ if env is None else env
    if kubeconfig or context or env.get("KUBERNETES_SERVICE_HOST"):
        return True
    listed = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        return any(Path(p).expanduser().is_file() for p in listed)
    home = env.get("HOME") or str(Path.home())
    return (Path(home) / ".kube" / "config").is_file()
