"""Waiting helpers the tests share: wait for a condition, fail with one line when it never holds;
type text into a pilot app without waiting after each key."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual import events
from textual.keys import _character_to_key
from textual.pilot import Pilot


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> float:
    """Poll `check` every 20 ms until it holds; the seconds it took (AssertionError after `timeout`)."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)
    return time.monotonic() - start


async def wait_until(pilot: Pilot[Any], check: Callable[[], bool], timeout: float = 10.0) -> float:
    """Let the app run until `check()` holds; the seconds it took (AssertionError after `timeout`)."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.02)
    return time.monotonic() - start


async def type_text(pilot: Pilot[Any], text: str) -> None:
    """Type `text` into the focused widget as one burst of key events, then wait for the app.

    `Pilot.press` waits for the app to go idle after every key, so each character costs an idle wait
    and a rendered frame: in a long filter that is most of a test's time. The same Key events go the
    same way here (the driver's queue, the bindings, the focused widget), as from a fast typist or a
    terminal pasting; the screen is looked at after the last one. Only for text into a widget that
    already has the focus (`slash`, `colon` and the keys after the text still go through `press`)."""
    app = pilot.app
    driver = app._driver
    assert driver is not None
    for char in text:
        key = char if char.isalnum() else _character_to_key(char)
        event = events.Key(key, char)
        event.set_sender(app)
        driver.send_message(event)
    await pilot.pause()
