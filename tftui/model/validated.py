"""Validation that costs what changed: the validated objects of one refresh kept for the next.

Every source hands the same dict again for an object that did not change (the watch cache, the
simulator and a dump replace an object's dict on change and never mutate one), and a live cluster
relisted after a dropped watch hands equal objects again under the same `uid` and
`resourceVersion`, which the API server changes on every write. So an object is validated once;
later snapshots reuse its validated dict, found by the identity of the source dict or by
(kind, namespace, name, uid, resourceVersion). Reusing the very same validated dicts is also what
lets `engine.incremental.update_state` share the views of unchanged
objects. Only the objects not seen before go through pydantic, in chunks, so a thread validating a
big first snapshot hands the interpreter back between chunks (pydantic-core keeps the GIL for a
whole call) and the console keeps serving keys.

A live cluster's objects are what its API server stored, which our schema may refuse where the
CRDs' allow it (a quantity `1e999`, a `lastDefragTime` in year 1, a percentile `"NaN"`). A dump with
such an object is bad input (one line, exit 2); a live cluster is not: the daemon works on the
objects as stored and its engine warns on the value and leaves the pool alone. So a `lenient`
cache keeps such an object as its source dict — what the daemon sees — and records the problem
(`problems`, shown with the state's warnings), instead of failing every refresh of the console
while the object exists. Only an object whose refused fields all hold values of the right type is
kept so (`dump.value_problem`); a wrong shape (a type, a missing field) fails as before: no schema
an API server enforces would store it, and the engine reads fields by their types.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any, cast

from tftui.model.dump import DumpError, Snapshot, _kind_of, object_ref, validate_items, value_problem
from tftui.model.gcpause import gc_paused
from tftui.model.giveway import SLICE, checkpoint, offsets

__all__ = ["CHUNK", "ValidationCache"]

CHUNK = 128
"""Objects validated per pydantic call: about a millisecond of Rust holding the GIL on this machine
(500 held a key waiting for 4-8 ms while a refresh validated its changed pods)."""

_Version = tuple[str, str, str, str, str]
_Entry = tuple[dict[str, Any], dict[str, Any], "_Version | None"]


def _version(obj: Any) -> _Version | None:
    """(kind, namespace, name, uid, resourceVersion) when the object carries uid and version."""
    if not isinstance(obj, dict):
        return None
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    uid, rv = meta.get("uid"), meta.get("resourceVersion")
    if not (isinstance(uid, str) and uid and isinstance(rv, str) and rv):
        return None
    return (str(obj.get("kind")), str(meta.get("namespace", "")), str(meta.get("name")), uid, rv)


class ValidationCache:
    """`validate(items)` equals `validate_items(items)`, validating only objects not seen last time.

    Entries live for one snapshot: what the next snapshot no longer holds is dropped, so memory is
    one validated copy of the current cluster. Identity entries keep the source dict alive (an id
    is only unique while its object is). `validated` counts the objects pydantic saw in the last
    call (tests pin that an unchanged refresh validates none).
    """

    def __init__(self, *, lenient: bool = False) -> None:
        self.lenient = lenient
        # id(kept object) → (the object kept as its source dict, "field: why") (`lenient`)
        self._problems: dict[int, tuple[dict[str, Any], str]] = {}
        # id(source dict) → (source dict, validated dict, its version key or None)
        self._by_id: dict[int, _Entry] = {}
        self._by_version: dict[_Version, dict[str, Any]] = {}
        # the last call: its source list, entries, snapshot and each object's place in its kind
        self._items: list[Any] = []
        self._entries: list[_Entry] = []
        self._snapshot = Snapshot()
        self._kind_pos: list[int] = []
        self.validated = 0

    def validate(self, items: Sequence[Any], source: str = "<objects>") -> Snapshot:
        """The Snapshot of `items`; raises `DumpError` (one line, as `validate_items`) on a bad
        object (`lenient`: a wrongly shaped one), and then keeps the previous entries (nothing is
        half-applied)."""
        with gc_paused():
            snap: Snapshot | None = None
            if len(items) == len(self._items) and self._items:
                changed: list[int] = []
                for start in offsets(len(items)):
                    new, old = items[start : start + SLICE], self._items[start : start + SLICE]
                    changed += itertools.compress(itertools.count(start), map(operator.is_not, new, old))
                checkpoint()
                if len(changed) <= len(items) // 4:
                    snap = self._replace(items, changed, source)
            if snap is None:
                snap = self._validate(items, source)
            if self._problems:  # only the objects still in the snapshot
                here = {id(o) for o in snap.objects}
                self._problems = {k: p for k, p in self._problems.items() if k in here}
            return snap

    def problems(self) -> list[tuple[str, str]]:
        """(object, "field: why") of each object of the last snapshot kept as its source dict
        (`lenient`), in no particular order."""
        return [(object_ref(obj), why) for obj, why in self._problems.values()]

    def _lookup(self, obj: Any) -> _Entry | None:
        """The entry of a source object seen before (by identity, else by version), or None."""
        entry = self._by_id.get(id(obj))
        if entry is not None and entry[0] is obj:
            return entry
        version = _version(obj)
        done = self._by_version.get(version) if version is not None else None
        return (obj, done, version) if done is not None else None

    def _validated(self, items: Sequence[Any], misses: list[int], source: str) -> list[dict[str, Any]]:
        """The validated copies of `items[i]` for `misses`, in chunks (see the module docstring)."""
        out: list[dict[str, Any]] = []
        for start in range(0, len(misses), CHUNK):
            checkpoint()
            chunk = [items[i] for i in misses[start : start + CHUNK]]
            try:
                out += validate_items(chunk, source).objects
            except ValueError:
                if not self.lenient:
                    validate_items(items, source)  # the message names the object by its place in `items`
                    raise
                out += [self._one(items, i, source) for i in misses[start : start + CHUNK]]
        return out

    def _one(self, items: Sequence[Any], i: int, source: str) -> dict[str, Any]:
        """`items[i]` validated alone; one our schema refuses only for its values (`value_problem`,
        strict: what a cluster's schemas would store) is kept as stored, its problem recorded; a
        wrong shape fails the refresh naming it by its place, as a strict cache does."""
        obj = items[i]
        try:
            return validate_items([obj], source).objects[0]
        except DumpError:
            pass
        try:
            why = value_problem(obj, source)
        except DumpError:  # a wrong shape
            validate_items(items, source)  # raises, naming the object by its place in `items`
            raise
        if why is None:  # strict takes what lax refused: not expected; judged as a strict cache does
            return validate_items(items, source).objects[i]
        self._problems[id(obj)] = (obj, why)
        return cast(dict[str, Any], obj)

    def _replace(self, items: Sequence[Any], changed: list[int], source: str) -> Snapshot | None:
        """The usual refresh: same length, a few objects replaced in place, each by one of its
        kind. The previous snapshot with those objects swapped, at a cost per changed object (the
        comparison of the lists runs in C). None when a kind changed: the general path then."""
        old_snap = self._snapshot
        kinds = [_kind_of(old_snap.objects[i]) for i in changed]
        if any(_kind_of(items[i]) != k for i, k in zip(changed, kinds, strict=True)):
            return None
        entries: dict[int, _Entry] = {}
        misses = []
        for i in changed:
            entry = self._lookup(items[i])
            if entry is None:
                misses.append(i)
            else:
                entries[i] = entry
        for i, obj in zip(misses, self._validated(items, misses, source), strict=True):
            entries[i] = (items[i], obj, _version(items[i]))
        checkpoint()
        objects = list(old_snap.objects)
        by_kind = dict(old_snap.by_kind)
        for kind in set(kinds):
            by_kind[kind] = list(by_kind[kind])
        checkpoint()
        # every changed object is validated: from here nothing can fail, so the cache's own
        # entries are updated in place (copies of these 185,000-entry tables cost 30 ms a refresh)
        all_entries, by_id, by_version = self._entries, self._by_id, self._by_version
        for i, kind in zip(changed, kinds, strict=True):
            old, new = all_entries[i], entries[i]
            if by_id.get(id(old[0])) is old:
                del by_id[id(old[0])]
            if old[2] is not None and by_version.get(old[2]) is old[1]:
                del by_version[old[2]]
            by_id[id(new[0])] = new
            if new[2] is not None:
                by_version[new[2]] = new[1]
            all_entries[i] = new
            objects[i] = by_kind[kind][self._kind_pos[i]] = new[1]
        self.validated = len(misses)
        self._items = list(items)
        self._snapshot = Snapshot(objects, by_kind)
        return self._snapshot

    def _validate(self, items: Sequence[Any], source: str) -> Snapshot:
        entries: list[_Entry | None] = list(map(self._by_id.get, map(id, items)))
        misses: list[int] = []
        for i, (obj, entry) in enumerate(zip(items, entries, strict=True)):
            if entry is not None and entry[0] is obj:
                continue
            found = self._lookup(obj)
            if found is None:
                misses.append(i)
                found = (obj, obj, _version(obj))  # the validated copy comes below
            entries[i] = found
        for i, valid in zip(misses, self._validated(items, misses, source), strict=True):
            entries[i] = (items[i], valid, cast(_Entry, entries[i])[2])
        self.validated = len(misses)
        done = cast(list[_Entry], entries)
        self._by_id = dict(zip(map(id, items), done, strict=True))
        self._by_version = {e[2]: e[1] for e in done if e[2] is not None}
        self._items, self._entries = list(items), done
        snap = self._snapshot = Snapshot.of([e[1] for e in done])
        counts: dict[str, int] = {}
        pos = self._kind_pos = []
        for obj in snap.objects:
            kind = _kind_of(obj)
            pos.append(counts.get(kind, 0))
            counts[kind] = pos[-1] + 1
        return snap
