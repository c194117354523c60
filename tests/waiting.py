"""Polling helpers the tests share: wait for a condition, fail with one line when it never holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

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
