"""Blocking work off the UI thread, in threads that quitting does not wait for (unless it must).

Textual's `@work(thread=True)` runs the work in asyncio's default executor. At exit `asyncio.run`
joins that executor (`loop.shutdown_default_executor`) and the interpreter joins every non-daemon
thread, so a quit waits for whatever analysis is computing: SimStep1 over a day of demo metrics is
pure Python and cannot be interrupted, and `q` took over 10 s on a loaded machine.

`in_thread` runs the callable in a thread of its own from an async Textual worker: the worker
(its group, `exclusive`, cancellation, state events) behaves as before, but the thread is a daemon
one for reads and analyses, which are simply abandoned when the console closes. Writes pass
`daemon=False`: the interpreter then waits for them, so a write in flight is never cut in half;
`TfTuiApp.writes_in_flight` lets `run` say what it is waiting for.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

from tftui.model import giveway

T = TypeVar("T")


def _settle(future: asyncio.Future[T], result: T | None, error: BaseException | None) -> None:
    if future.done():  # the awaiting worker was cancelled: nobody wants the result any more
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]


async def in_thread(work: Callable[[], T], *, name: str, daemon: bool = True) -> T:
    """Run `work` in a new thread named `name` and await its result.

    The thread runs in a copy of the caller's context, so `get_current_worker()` inside it is the
    calling Textual worker (its `is_cancelled` is how long loops stop early). Cancelling the
    awaiting task does not stop the thread; a daemon thread is then left to die with the process.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def target() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            with giveway.background():  # long loops step aside while a key is served
                result = context.run(work)
        except BaseException as exc:  # handed to the awaiting worker, which reports it
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: the console has gone
            loop.call_soon_threadsafe(_settle, future, result, error)

    threading.Thread(target=target, name=name, daemon=daemon).start()
    return await future
