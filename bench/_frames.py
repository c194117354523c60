"""Key → frame timing for the console benches (not a benchmark itself: bench/run.py skips `_*`).

The Pilot's `press` + `pause` waits for the app to go idle, which under a 2-core load measured the
test driver's waiting (≈ 90 ms floor) rather than the console (≈ 5 ms). Here a key is posted to
the app as the terminal driver would post it, and the time is taken when the app *writes the frame*
that shows its effect: `FrameDriver` is a headless driver that says it is not headless, so Textual
renders every frame into it as it would into a terminal, and its `write` checks whether the key's
effect is on screen yet.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import tftui.ui  # noqa: F401  (first: the console's Textual settings, its frame cap, as it runs)

# isort: split
from textual import events
from textual.app import App
from textual.drivers.headless_driver import HeadlessDriver


class FrameDriver(HeadlessDriver):
    """Receives every frame Textual renders (as terminal escape text) and times them."""

    waiting: tuple[Callable[[], bool], asyncio.Future[float]] | None = None
    frames = 0

    @property
    def is_headless(self) -> bool:
        return False  # so App._display renders the frame and writes it here

    def write(self, data: str) -> None:
        type(self).frames += 1
        waiting = type(self).waiting
        if waiting is not None and not waiting[1].done() and waiting[0]():
            waiting[1].set_result(time.perf_counter())

    def flush(self) -> None:
        pass


CHARACTERS = {"colon": ":", "slash": "/", "enter": "\r", "escape": "\x1b"}


def send_keys(app: App[Any], *keys: str) -> None:
    """Post key events as the terminal driver does (all at once, nothing awaited in between)."""
    driver = app._driver
    assert driver is not None
    for key in keys:
        event = events.Key(key, CHARACTERS.get(key, key if len(key) == 1 else None))
        event.set_sender(app)
        driver.send_message(event)


async def key_to_frame(
    app: App[Any], keys: tuple[str, ...], shown: Callable[[], bool], timeout: float = 60.0
) -> float:
    """Seconds from posting `keys` to the first frame written once `shown()` holds."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[float] = loop.create_future()
    FrameDriver.waiting = (shown, done)
    t = time.perf_counter()
    send_keys(app, *keys)
    try:
        return await asyncio.wait_for(done, timeout) - t
    finally:
        FrameDriver.waiting = None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
