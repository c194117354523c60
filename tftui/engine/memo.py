"""A bounded memo of a function of one object, kept while that object is the very same one.

A `ClusterState`'s objects and the values derived from them are never changed in place (a write
copies what it changes), so a value computed from one of them stays right for as long as the
object itself is alive and passed again: the autoscaler's loops ask for the same parses and keys
tick after tick. Entries are looked up by `id()` and hold their object, so an id is not reused by
another object while its entry lives; the memo is emptied when it reaches its bound.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ByIdentity(Generic[K, V]):
    """`compute(obj)`, computed once per object `obj` (compared by identity, not equality)."""

    __slots__ = ("_compute", "_entries", "_limit")

    def __init__(self, compute: Callable[[K], V], limit: int) -> None:
        self._compute = compute
        self._limit = limit
        self._entries: dict[int, tuple[K, V]] = {}

    def __call__(self, obj: K) -> V:
        hit = self._entries.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = self._compute(obj)
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[id(obj)] = (obj, value)
        return value
