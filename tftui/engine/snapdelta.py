"""`DeltaSnapshot`: a snapshot that says which objects changed since an earlier one.

A source that knows what it changed (the acting simulator records every object it replaces, adds or
deletes) hands the change set along, so `engine.incremental.update_state` need not find it by
comparing every object of the two snapshots by identity (O(objects) per update, many updates per
simulated tick during a defrag campaign). The change set must be the exact identity difference of
the two snapshots, kind by kind, with the unchanged objects in the same relative order, each
replaced object in its predecessor's place and new objects last (a kind where that does not hold
is handed as None: compared object by object); positions need only keep the list's order;
`update_state` uses it only when `base` is the previous state's very snapshot, and drops it once
read (a state must not keep its predecessor alive).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tftui.model.dump import Snapshot

__all__ = ["DeltaSnapshot", "KindDelta"]

KindDelta = tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, int]]
"""(objects only in the new snapshot, objects only in `base`, position in the new kind list by id)."""


@dataclass(slots=True, eq=False)  # equal like any Snapshot: by its objects
class DeltaSnapshot(Snapshot):
    """A `Snapshot` plus what changed since `base`: per kind, a `KindDelta`, or None when the source
    could not tell (that kind is compared object by object); a kind not named did not change (its
    list is `base`'s)."""

    base: Snapshot | None = None
    changed: dict[str, KindDelta | None] | None = None

    def take(self, base: Snapshot | None) -> dict[str, KindDelta | None] | None:
        """The change set if it is relative to `base`, else None; either way it is dropped."""
        changed = self.changed if self.base is base else None
        self.base = self.changed = None
        return changed
