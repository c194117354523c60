"""Validation that costs what changed: the validated objects of one refresh kept for the next.

Every source hands the same dict again for an object that did not change (the watch cache, the
simulator and a dump replace an object's dict on change and never mutate one), and a live cluster
relisted after a dropped watch hands equal objects again under the same `uid` and
`resourceVersion`, which the API server changes on every write. So an object is validated once;
later snapshots reuse its validated dict, found by the identity of the source dict or by
(kind, namespace, name, uid, resourceVersion). Reusing the very same validated dicts is also what
lets `ClusterState.build(..., previous=...)` (engine.incremental) share the views of unchanged
objects. Only the objects not seen before go through pydantic, in chunks, so a thread validating a
big first snapshot hands the interpreter back between chunks (pydantic-core keeps the GIL for a
whole call) and the console keeps serving keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from tftui.model.dump import Snapshot, validate_items
from tftui.model.gcpause import gc_paused

__all__ = ["CHUNK", "ValidationCache"]

CHUNK = 2_000
"""Objects validated per pydantic call (≈ 15–30 ms of Rust holding the GIL on this machine)."""

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

    def __init__(self) -> None:
        # id(source dict) → (source dict, validated dict, its version key or None)
        self._by_id: dict[int, _Entry] = {}
        self._by_version: dict[_Version, dict[str, Any]] = {}
        self.validated = 0

    def validate(self, items: Sequence[Any], source: str = "<objects>") -> Snapshot:
        """The Snapshot of `items`; raises `DumpError` (one line, as `validate_items`) on a bad
        object, and then keeps the previous entries (nothing is half-applied)."""
        with gc_paused():
            return self._validate(items, source)

    def _validate(self, items: Sequence[Any], source: str) -> Snapshot:
        by_id, by_version = self._by_id, self._by_version
        entries: list[_Entry | None] = list(map(by_id.get, map(id, items)))
        misses: list[int] = []
        for i, (obj, entry) in enumerate(zip(items, entries, strict=True)):
            if entry is not None and entry[0] is obj:
                continue
            version = _version(obj)
            done = by_version.get(version) if version is not None else None
            if done is None:
                misses.append(i)
                done = obj  # replaced below by its validated copy
            entries[i] = (obj, done, version)
        for start in range(0, len(misses), CHUNK):
            chunk = misses[start : start + CHUNK]
            try:
                valid = validate_items([items[i] for i in chunk], source).objects
            except ValueError:
                validate_items(items, source)  # the message names the object by its place in `items`
                raise
            for i, obj in zip(chunk, valid, strict=True):
                entries[i] = (items[i], obj, cast(_Entry, entries[i])[2])
        self.validated = len(misses)
        done_entries = cast(list[_Entry], entries)
        self._by_id = dict(zip(map(id, items), done_entries, strict=True))
        self._by_version = {e[2]: e[1] for e in done_entries if e[2] is not None}
        return Snapshot.of([e[1] for e in done_entries])
