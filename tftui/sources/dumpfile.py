"""A `ClusterPort` over a `kubectl get -o json|yaml` dump file (offline support bundles)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any, Final

from tftui.model.dump import Snapshot, load
from tftui.model.gcpause import gc_paused

FREEZE_AFTER: Final = 20_000
"""Objects above which the loaded dump is frozen out of the cyclic GC (see `DumpCluster`)."""


class DumpCluster:
    """Reads the file once at start (so a bad file fails before the console opens).

    A big dump's objects live as long as the process and form no cycles: they are frozen out of
    the cyclic GC (`gc.freeze`) before it is re-enabled. Otherwise the first allocation after the
    load starts a collection that scans every one of them (they are all young), and each later
    full collection again (about a CPU-second at 5,000 nodes, before the first screen).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        with gc_paused():
            self._snapshot: Snapshot = load(path)
            if len(self._snapshot.objects) > FREEZE_AFTER:
                gc.freeze()

    def describe(self) -> str:
        return f"dump {Path(self.path).name}"

    def snapshot(self) -> list[dict[str, Any]]:
        return list(self._snapshot.objects)

    def validated_snapshot(self) -> Snapshot:
        """The objects validated at start, grouped by kind once: a reader takes this instead of
        validating and grouping `snapshot()` again on every refresh."""
        return self._snapshot
