"""One copy of each equal part: what a cache of decoded API objects keeps instead of the JSON's.

`json.loads` makes a new string for every value and a new dict or list for every object and array,
so a watch cache of 60,000 Pods holds 60,000 copies of `"Running"`, of each workload's `requests`
mapping, of each GPU node's `ownerReferences`. At 5,000 nodes (185,000 objects) the decoded objects
took ≈ 1,090 MiB; with every string interned ≈ 680 MiB; with equal parts shared too ≈ 465 MiB
(`bench/console.py`, whose source holds what the live cache holds). This is client-go's informer
`TransformFunc` pattern, applied as objects arrive (`sources.kubewatch`):

- every string (keys and values) is interned (`sys.intern`: one table for the process, an entry
  lives as long as its string);
- below the top level, every dict and list is replaced by an equal one seen before, when the
  `Deduper`'s table (bounded: cleared when full, so it never holds much more than `limit` parts
  alive) still has one — shared between objects, never twice within one object: a consumer that
  deep-copies an object and changes the copy in place (the simulator's copy-on-write) changes the
  one place it meant to, as `copy.deepcopy` would keep two references to one part as one;
- the objects themselves (the top-level dicts) are always new, so the identity of an object's dict
  still says whether it changed (`model.validated`, `engine.incremental`);
- `metadata.managedFields` (server-side apply bookkeeping, often the larger part of an object) and
  the `kubectl.kubernetes.io/last-applied-configuration` annotation (a copy of the object as last
  applied) are dropped: nothing in tftui reads them (kubectl hides the first too).

Equal means equal with the same types: `True`, `1` and `1.0` are never taken for one another. The
result equals the input but for the two dropped fields. Shared parts are the cache's contract made
stronger: a source never mutates an object it handed out, and nothing downstream writes into one
(the validated objects already share the source's parts), so two objects sharing a part is safe.
Pure: no I/O; a `Deduper` may be shared by threads (a race only misses a chance to share). Cost:
≈ 40 µs of CPU per object here (≈ 7.5 CPU-s for the 185,000, besides ≈ 2.5 to decode the JSON).
"""

from __future__ import annotations

import sys
from typing import Any, Final, cast

__all__ = ["DROPPED_ANNOTATIONS", "DROPPED_METADATA", "Deduper"]

DROPPED_METADATA: Final = frozenset({"managedFields"})
"""`metadata` fields a cache may drop: nothing reads them."""
DROPPED_ANNOTATIONS: Final = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})
"""Annotations a cache may drop: nothing reads them."""

_DICT: Final = object()  # first element of a dict's key, so a dict's key is never a list's
_EMPTY_DICT: Final = (_DICT,)
_intern = sys.intern


class Deduper:
    """`object(obj)`: `obj` with its strings interned and its parts shared (see the module docstring).

    `limit` bounds the table of parts seen: when it is full it is cleared, and sharing starts again
    from what arrives next (equal parts mostly arrive close together: the GPUs of one node, the
    workers of one workload; the very common ones come back at once).
    """

    def __init__(self, limit: int = 1 << 16) -> None:
        self.limit = limit
        # a part's key (its items' keys, recursively) → the equal parts kept for it (`_ALTERNATES`)
        self._parts: dict[tuple[Any, ...], list[Any]] = {}

    def object(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A new dict equal to `obj` (minus the dropped fields) whose values are shared parts;
        `obj` itself when it is nested too deeply to walk (one odd object never stops a watch)."""
        out: dict[str, Any] = {}
        placed: set[int] = set()  # the parts in `out` so far: none may appear twice in one object
        try:
            for key, value in obj.items():
                if key == "metadata" and type(value) is dict:
                    value = _trimmed_metadata(value)
                kind = type(value)
                if kind is str:
                    value = _intern(value)
                elif kind is dict:
                    value = self._dict(value, placed)[0]
                elif kind is list:
                    value = self._list(value, placed)[0]
                out[_intern(key)] = value
        except RecursionError:
            return obj
        return out

    def clear(self) -> None:
        """Forget the parts seen (after a big list: they need not outlive it)."""
        self._parts.clear()

    def _dict(self, value: dict[Any, Any], placed: set[int]) -> tuple[Any, Any]:
        """(the shared dict equal to `value`, its key); an empty one is never shared (it would
        cost more to keep track of than it takes)."""
        if not value:
            return {}, _EMPTY_DICT
        parts: list[Any] = [_DICT]
        new: dict[Any, Any] = {}
        kids: list[tuple[Any, Any]] = []  # (key, part) of the parts in it
        key: Any
        for k, v in value.items():
            if type(k) is str:
                k = _intern(k)
            kind = type(v)
            if kind is str:
                v = key = _intern(v)
            elif kind is dict or kind is list:
                v, key = self._dict(v, placed) if kind is dict else self._list(v, placed)
                if v:  # an empty one is its parent's own: nothing to check
                    kids.append((k, v))
            else:
                key = (kind, v)  # int, float, bool, None: the type is in the key (True == 1 == 1.0)
            new[k] = v
            parts += (k, key)
        return self._shared(new, kids, tuple(parts), placed)

    def _list(self, value: list[Any], placed: set[int]) -> tuple[Any, Any]:
        """(the shared list equal to `value`, its key); an empty one is never shared."""
        if not value:
            return [], ()
        parts: list[Any] = []
        new: list[Any] = []
        kids: list[tuple[Any, Any]] = []  # (index, part) of the parts in it
        key: Any
        for v in value:
            kind = type(v)
            if kind is str:
                v = key = _intern(v)
            elif kind is dict or kind is list:
                v, key = self._dict(v, placed) if kind is dict else self._list(v, placed)
                if v:
                    kids.append((len(new), v))
            else:
                key = (kind, v)
            new.append(v)
            parts.append(key)
        return self._shared(new, kids, tuple(parts), placed)

    def _shared(
        self, new: Any, kids: list[tuple[Any, Any]], key: tuple[Any, ...], placed: set[int]
    ) -> tuple[Any, Any]:
        """A part kept for `key`, else `new` (kept from now on). Never one already in this object,
        nor one whose own parts are not `kids`, the ones just placed (the table was cleared since
        it was kept): one object never holds a part twice, so a consumer that deep-copies an object
        and changes the copy (the simulator) changes one place, not two. An object that holds equal
        parts (`requests` equal to `limits`) takes the second of those kept, and so on."""
        table = self._parts
        kept = table.get(key)
        if kept is None:
            if len(table) >= self.limit:
                table.clear()
            table[key] = [new]
        else:
            for part in kept:
                if id(part) not in placed and all(part[at] is kid for at, kid in kids):
                    placed.add(id(part))
                    return part, key
            if len(kept) < _ALTERNATES:
                kept.append(new)
        placed.add(id(new))
        return new, key


_ALTERNATES: Final = 4
"""Equal parts kept per key: as many as one object may hold (beyond, they are not shared)."""


def _trimmed_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """`meta` without the dropped fields and annotations (itself when it has none)."""
    annotations = meta.get("annotations")
    drop_annotations = type(annotations) is dict and not DROPPED_ANNOTATIONS.isdisjoint(annotations)
    if DROPPED_METADATA.isdisjoint(meta) and not drop_annotations:
        return meta
    out = {k: v for k, v in meta.items() if k not in DROPPED_METADATA}
    if drop_annotations:
        kept = cast(dict[str, Any], annotations)
        out["annotations"] = {k: v for k, v in kept.items() if k not in DROPPED_ANNOTATIONS}
    return out
