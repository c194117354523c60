"""Pause the cyclic garbage collector around bulk object construction.

Loading a 5,000-node dump allocates millions of dicts and lists that all stay alive; CPython's
generational GC would rescan that growing heap again and again (measured: ~25 % of load time).
None of these objects form cycles that need collecting during the load, so it is safe to pause.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic GC inside the block (re-entrant: restores the state it found)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def without_gc(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator form of `gc_paused` for engine entry points that allocate per node of a big state.

    With a 5,000-node state alive, a few thousand small allocations trigger full collections that
    rescan the whole state (measured: 90 % of a compaction round).
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with gc_paused():
            return fn(*args, **kwargs)

    return wrapper


RECLAIM_EVERY = 500
"""Settles after which `YoungFreezer` collects everything once (see there)."""


class YoungFreezer:
    """Freeze what a refresh built, before the collector is back on (call `settle` inside `gc_paused`).

    A refresh runs with the collector paused; its survivors (the changed views, the usage index,
    the operations: hundreds of thousands of objects at 5,000 nodes) are all young when it is back
    on, and the first allocation then starts a collection of the youngest generation that scans
    every one, then of the middle one, and every few refreshes of the whole unfrozen heap: measured
    0.05–0.13 s, 0.08–0.13 s and 0.3–0.6 s pauses of every thread, the console's keys included.
    Frozen (`gc.freeze`, constant time), the collector never scans them; reference counting still
    frees them when the next refresh replaces them (the state holds no reference cycles).

    What the collector would have found among them is cyclic garbage pending when they were
    frozen (the finished worker's task, some of Textual's render caches: about a hundred objects
    a refresh): it is kept. Every `reclaim_every` settles everything is unfrozen and collected
    once (a full collection: a few CPU-seconds at 5,000 nodes, where the generational collector
    spent 0.3–0.6 s every few refreshes) and frozen again, so that garbage stays bounded. Counted
    in settles, not measured: `gc.get_freeze_count` walks every frozen object (0.4 s at 5,000 nodes).
    That collection stops every thread, so a due one waits for a quiet settle (`quiet=False`: the
    operator typed a moment ago) rather than landing on the keys; the garbage kept meanwhile is
    the same hundred objects a refresh.
    """

    def __init__(self, reclaim_every: int = RECLAIM_EVERY) -> None:
        self.reclaim_every = reclaim_every
        self.settles = 0
        self.reclaims = 0
        self._since_reclaim = 0
        self._kept = False

    def settle(self, quiet: bool = True) -> None:
        """Freeze what is tracked now; first collect everything once if that is due and `quiet`."""
        self.settles += 1
        self._since_reclaim += 1
        if self._since_reclaim >= self.reclaim_every and quiet:
            gc.unfreeze()
            gc.collect()
            self.reclaims += 1
            self._since_reclaim = 0
        gc.freeze()

    def keep(self) -> None:
        """Freeze what is tracked now, between two settles (call inside `gc_paused`): what the
        interface thread built itself (a view opened for the first time, its rows and gauges: about
        400,000 objects for `:gpus` at 5,000 nodes) would otherwise be rescanned by each full
        collection until the next refresh settles, a 0.1 s pause of every thread every few view
        switches. Not counted as a settle: the reclaim stays as often as the refreshes make it.

        The young generations are collected first: the cyclic garbage pending in them (Textual's
        messages and render leftovers, about 23,000 objects a filter round at 5,000 nodes) would
        otherwise be frozen with the build and kept until the next reclaim, hundreds of refreshes
        away (measured: 2.5 MiB more for each `/` filter typed). The build itself is alive and
        survives; the old generation's garbage is left to the reclaim, as a settle leaves it."""
        self._kept = True
        gc.collect(1)
        gc.freeze()

    def freeze(self) -> None:
        """Freeze what is tracked now, without collecting first (call inside `gc_paused`): for a
        table built in a background thread while the operator waits for its view. A collection
        of the young generations it fills (every row, cell and gauge: ~0.1 s at 5,000 nodes)
        stops every thread, the interface's frame included; the cyclic garbage pending meanwhile
        (a few hundred objects) is kept until the next reclaim, as a settle keeps it."""
        self._kept = True
        gc.freeze()

    def release(self) -> None:
        """Hand what was frozen back to the collector (the console closing: a process that runs
        consoles one after another, as the tests do, would otherwise keep each one's garbage)."""
        if self.settles or self._kept:
            gc.unfreeze()
