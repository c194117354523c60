"""What changed between two snapshots: `DeltaSnapshot` when the source says it, `identity_changes`
when it must be found by comparing the objects by identity.

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

import itertools
import operator
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tftui.model.giveway import SLICE, checkpoint, offsets, same_items, slices
from tftui.model.snapshot import Snapshot

__all__ = [
    "DeltaSnapshot",
    "KindDelta",
    "appended_in_order",
    "identity_changes",
    "in_order",
    "increasing",
    "ordered",
    "positions",
]

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


def identity_changes(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> KindDelta | None:
    """(objects only in `new`, objects only in `old`, position in `new` by id — empty when the two
    lists are the same objects), by identity; None when unchanged objects changed places. The set
    operations run in C, so an unchanged kind costs a few microseconds per thousand objects; each
    pass goes in slices (`giveway.slices`), so a key waits for a slice, not for a pass."""
    if same_items(old, new):
        return [], [], {}
    checkpoint()
    pos = positions(new)
    old_by_id: dict[int, dict[str, Any]] = {}
    for part in slices(old):
        old_by_id.update(zip(map(id, part), part, strict=True))
    new_by_id: dict[int, dict[str, Any]] = {}
    for part in slices(new):
        new_by_id.update(zip(map(id, part), part, strict=True))
    checkpoint()
    added = [new_by_id[i] for i in new_by_id.keys() - old_by_id.keys()]
    checkpoint()
    removed = [old_by_id[i] for i in old_by_id.keys() - new_by_id.keys()]
    checkpoint()
    kept: list[int] = []
    for part in slices(old):
        kept += [p for p in map(pos.get, map(id, part)) if p is not None]
    checkpoint()
    return (added, removed, pos) if increasing(kept) else None


def increasing(seq: list[int]) -> bool:
    """Whether `seq` is strictly increasing (in C, a slice at a time)."""
    for start in offsets(len(seq), SLICE):
        if not all(map(operator.lt, seq[start : start + SLICE], seq[start + 1 : start + SLICE + 1])):
            return False
    return True


def positions(objs: list[dict[str, Any]]) -> dict[int, int]:
    """Position in `objs` by the id of each object."""
    pos: dict[int, int] = {}
    for start in offsets(len(objs), SLICE):
        pos.update(zip(map(id, objs[start : start + SLICE]), itertools.count(start)))
    return pos


def in_order(objs: Iterable[dict[str, Any]], pos: dict[int, int]) -> list[dict[str, Any]]:
    """`objs` (each once) in snapshot order."""
    unique = {id(o): o for o in objs}
    return [unique[i] for i in sorted(unique, key=pos.__getitem__)]


_OBJ = operator.attrgetter("obj")


def appended_in_order(views: dict[str, Any], appended: int, pos: dict[int, int]) -> bool:
    """Whether `views` (name → view with `.obj`) are in the order of their objects' positions
    `pos`, given that all but the last `appended` are, and so are the last `appended` among
    themselves: the first of those must come after the last of the others. O(appended), where
    `ordered` looks at every view."""
    if not appended or appended >= len(views):
        return True
    tail = list(itertools.islice(reversed(views.values()), appended + 1))
    return bool(pos[id(tail[-1].obj)] < pos[id(tail[-2].obj)])


def ordered(views: dict[str, Any], pos: dict[int, int]) -> dict[str, Any]:
    """`views` (name → view with `.obj`) in the order of their objects in the snapshot, as the full
    build inserts them; usually already so (a replaced object keeps its place, new ones come last).
    An empty `pos`: nothing of this kind changed, the order is the previous state's."""
    if not pos:
        return views
    objs = list(map(_OBJ, views.values()))
    seq: list[int] = []
    for part in slices(objs):
        seq += map(pos.__getitem__, map(id, part))
    checkpoint()
    if increasing(seq):
        return views
    return dict(sorted(views.items(), key=lambda kv: pos[id(kv[1].obj)]))
