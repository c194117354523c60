"""A `ClusterPort` over a `kubectl get -o json|yaml` dump file (offline support bundles)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tftui.model.dump import Snapshot, load


class DumpCluster:
    """Reads the file once at start (so a bad file fails before the console opens)."""

    prevalidated = True
    """`snapshot()` hands the objects validated at start: a reader need not validate them again."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._snapshot: Snapshot = load(path)

    def describe(self) -> str:
        return f"dump {Path(self.path).name}"

    def snapshot(self) -> list[dict[str, Any]]:
        return list(self._snapshot.objects)
