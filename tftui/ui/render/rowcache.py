"""Table rows kept between refreshes, each with what it was built from, so a build costs what changed.

A refresh derives the next `ClusterState` from the previous one and shares the views of objects
that did not change (`engine.incremental`), so a row built from the very same view, usage and
context as last time is the row it would build again. A builder hands each row's key and its
dependencies (a tuple of the values the row is made of: views, usage, formatted ages); a row is
re-used only when its dependencies compare equal to the ones it was built from (tuples compare by
identity first, so an unchanged row costs one comparison), else it is built anew. A row shown
stale would be the worst outcome: every value a builder reads must be in the dependencies.

Reused rows are the very same objects, their gauge cells already drawn: `ResourceTable` and the
`↑`/`↓` deltas skip them by identity. Rows depend on the layout and the theme (the gauges); those
are the cache's `scope`, and rows of a scope not used for two builds are dropped.

A build may run in the refresh thread (`screens.prebuild`) while the interface thread renders:
each cache's builds hold its lock, so the two never interleave on one cache.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["RowCache", "RowCaches", "Same"]

SCOPES = 2
"""Scopes (layout, theme) kept at once: a screen tries a second layout when the first does not fit."""


class Same:
    """A dependency compared by identity (a result object that is new whenever it changes, and
    whose value comparison would cost more than the row)."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj  # held: its id cannot be re-used while a row depends on it

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


class RowCache(Generic[R]):
    """The rows of one table by scope; `rows` builds what changed and keeps only this build's rows.

    `built` and `reused` count the rows of the last build (tests pin that an unchanged refresh
    builds none and a changed object rebuilds its row)."""

    def __init__(self) -> None:
        self._scopes: dict[Hashable, dict[str, tuple[tuple[object, ...], R]]] = {}
        self.built = 0
        self.reused = 0
        self._lock = threading.Lock()

    def rows(
        self,
        scope: Hashable,
        items: Iterable[tuple[str, tuple[object, ...], T]],
        make: Callable[[T], R],
    ) -> list[R]:
        """The rows of `items` ((key, dependencies, what `make` builds the row from)), in order."""
        with self._lock:
            return self._rows(scope, items, make)

    def _rows(
        self,
        scope: Hashable,
        items: Iterable[tuple[str, tuple[object, ...], T]],
        make: Callable[[T], R],
    ) -> list[R]:
        old = self._scopes.pop(scope, {})
        new: dict[str, tuple[tuple[object, ...], R]] = {}
        out: list[R] = []
        built = 0
        for key, deps, arg in items:
            entry = old.get(key)
            if entry is not None and entry[0] == deps:
                row = entry[1]
            else:
                row = make(arg)
                built += 1
            new[key] = (deps, row)
            out.append(row)
        self._scopes[scope] = new  # the most recent scope last
        while len(self._scopes) > SCOPES:
            del self._scopes[next(iter(self._scopes))]
        self.built, self.reused = built, len(out) - built
        return out


class RowCaches(Generic[R]):
    """The row caches of the console's tables, by (screen, trail, table): a view switched away from
    and back to (`:gpus` again) finds its rows. The least recently used beyond `limit` are dropped
    (drill-downs into many nodes must not keep every node's rows)."""

    def __init__(self, limit: int = 8) -> None:
        self.limit = limit
        self._caches: dict[Hashable, RowCache[R]] = {}

    def get(self, key: Hashable) -> RowCache[R]:
        cache = self._caches.pop(key, None)
        if cache is None:
            cache = RowCache()
        self._caches[key] = cache  # the most recent last
        while len(self._caches) > self.limit:
            del self._caches[next(iter(self._caches))]
        return cache
