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

Starting a thread blocks the caller until the new thread runs (`Thread.start` waits for it), and
on a loaded machine that wait took about 20 ms of the interface thread on every refresh. Refreshes
therefore run in one long-lived daemon thread (`WorkThread`), handed each refresh through a queue:
one refresh at a time, as before (a refresh that supersedes a running one waited for its cluster
lock; it now waits in the queue), and the thread ends by itself once idle, so a console that closes
leaves nothing behind for long.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import queue
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


IDLE_SECONDS = 30.0
"""How long a `WorkThread` waits for work before it ends (the next `submit` starts another)."""


class WorkThread:
    """One daemon thread that runs what is submitted, in order, and ends after `idle` seconds
    without work; `submit` starts it (again) when it is not running. `started` counts the threads
    started (tests pin that refreshes re-use one)."""

    def __init__(self, name: str, *, idle: float = IDLE_SECONDS) -> None:
        self.name = name
        self.idle = idle
        self.started = 0
        self._queue: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._running = False

    def submit(self, job: Callable[[], object]) -> None:
        with self._lock:
            self._queue.put(job)
            if not self._running:
                self._running = True
                self.started += 1
                threading.Thread(target=self._serve, name=self.name, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                job = self._queue.get(timeout=self.idle)
            except queue.Empty:
                with self._lock:  # nothing came while idle; a submit from now on starts a thread
                    if self._queue.empty():
                        self._running = False
                        return
                continue
            job()  # never raises: `in_thread`'s target hands every error to its awaiting worker
            del job  # what it held is freed here, in this thread (`retire`)

    def retire(self, obj: object) -> None:
        """Free `obj` in this thread: its last reference is dropped here once the jobs queued before
        it ran. For a refresh's old data: freeing what the new one no longer shares (the replaced
        views, the usage index, the operations) took ~10 ms of the interface thread per refresh."""
        self.submit(functools.partial(_keep, obj))


def _keep(_obj: object) -> None:
    """A job that only holds its argument (`WorkThread.retire`)."""


async def in_thread(
    work: Callable[[], T], *, name: str, daemon: bool = True, thread: WorkThread | None = None
) -> T:
    """Run `work` in a new thread named `name` (or in `thread`, a daemon one) and await its result.

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

    if thread is not None:
        thread.submit(target)
    else:
        threading.Thread(target=target, name=name, daemon=daemon).start()
    return await future
