"""Background threads give way while the console serves a key.

Python runs one thread at a time (the GIL). A refresh is pure Python for half a second at 5,000
nodes; while it runs, the interface thread gets the interpreter only every other switch interval,
so a key that takes 5 ms of work reaches the screen in 40–50 ms, and a thread that does nothing but
spin delays keys just as much. No collector or scheduler setting fixes that; only the busy thread
can step aside.

So the interface says when it is serving input (`hold`) and when the frame is out (`release`), and
long loops in background work call `checkpoint()`: in a thread that opted in (`background`), it
sleeps until the interface is done, at most `MAX_HOLD` seconds after the key, so typing without a
pause delays a refresh but never starves it. Elsewhere — the interface thread itself, the daemon,
the CLI, tests — a check-point costs one global read and changes nothing, so engine functions stay
pure: where they pause does not change what they return.
"""

from __future__ import annotations

import operator
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

MAX_HOLD = 0.1
"""Longest a key holds background work (s): a key's frame takes 5–20 ms of the interface thread's
time; a burst of keys holds it again from each key."""
STRIDE = 256
"""Items between check-points in `paced` loops: a few hundred microseconds of light per-item work."""
SLICE = 8_192
"""Items per slice in `slices`: about half a millisecond of a C-level pass (a `map`, a `zip`)."""

_hold_until = 0.0  # monotonic deadline while the interface serves input; 0.0 when it is not
_held_at = 0.0  # monotonic time of the last `hold`
_token = 0  # of the last `hold` or `hold_on`
_local = threading.local()
_lock = threading.Lock()
_wakeup = threading.Condition(_lock)


def hold(seconds: float = MAX_HOLD) -> int:
    """The interface is serving input: background check-points wait (until `release` of the
    returned token, at most `seconds`, capped at `MAX_HOLD`)."""
    global _hold_until, _held_at, _token
    _held_at = time.monotonic()
    _hold_until = _held_at + min(seconds, MAX_HOLD)
    _token += 1
    return _token


def hold_on() -> int:
    """Hold again, until `release` of the returned token, if input was served less than
    `MAX_HOLD` ago (whether it did); 0 when it does not. A screen that a key brought up (a view
    switch, a drill-down, going back) or rows a filter key changed are drawn after that key's own
    frame, which released the key's hold. A screen no input brought up (the first) holds nothing."""
    global _hold_until, _token
    now = time.monotonic()
    if now - _held_at >= MAX_HOLD:
        return 0
    _hold_until = now + MAX_HOLD
    _token += 1
    return _token


def release(token: int = 0) -> None:
    """The interface has written its frame: waiting background work goes on now. With the token
    of a hold, only if no later hold was taken (that one is released by its own frame: the key's
    pending release must not end the hold of what the key brought up); 0 releases any."""
    global _hold_until
    if _hold_until and (not token or token == _token):
        with _wakeup:
            _hold_until = 0.0
            _wakeup.notify_all()


def held() -> bool:
    """Whether background work is being held now (for tests and the bench)."""
    return _hold_until > time.monotonic()


@contextmanager
def background() -> Iterator[None]:
    """Mark the calling thread as background work that gives way at check-points."""
    before = getattr(_local, "gives_way", False)
    _local.gives_way = True
    try:
        yield
    finally:
        _local.gives_way = before


def gives_way() -> bool:
    """Whether the calling thread is background work (inside `background`)."""
    return bool(getattr(_local, "gives_way", False))


def checkpoint() -> None:
    """Wait here while the interface serves input, if this thread is background work."""
    if _hold_until and getattr(_local, "gives_way", False):
        _wait()


def _wait() -> None:
    with _wakeup:
        while True:
            left = _hold_until - time.monotonic()
            if left <= 0:
                return
            _wakeup.wait(left)


def paced(items: Iterable[T], stride: int = STRIDE) -> Iterator[T]:
    """`items`, with a check-point every `stride` of them (for loops whose body is light)."""
    n = 0
    for item in items:  # lazily: a loop body may change what later items are
        n += 1
        if n == stride:
            n = 0
            if _hold_until:
                checkpoint()
        yield item


def offsets(length: int, size: int | None = None) -> Iterator[int]:
    """The starts of `length` items' consecutive slices of `size`, with a check-point between two:
    for passes that run in C (`all(map(...))`, `dict(zip(...))`) over big lists. Such a pass never
    gives the interpreter up until it ends, so a key waits for all of it however small the switch
    interval (60,000 pods: 5-10 ms a pass). `size`: `SLICE`."""
    size = size or SLICE
    for start in range(0, length, size):
        if start and _hold_until:
            checkpoint()
        yield start


def slices(items: Sequence[T], size: int | None = None) -> Iterator[Sequence[T]]:
    """`items` in consecutive slices of `size` (`SLICE`), with a check-point between two (`offsets`)."""
    size = size or SLICE
    for start in offsets(len(items), size):
        yield items[start : start + size]


def same_items(a: Sequence[object], b: Sequence[object]) -> bool:
    """Whether `a` and `b` hold the very same objects in the same order (by identity, in C, a slice
    at a time): a source hands an unchanged object's dict again, so this means nothing changed."""
    size = SLICE
    return len(a) == len(b) and all(
        all(map(operator.is_, a[start : start + size], b[start : start + size]))
        for start in offsets(len(a), size)
    )
