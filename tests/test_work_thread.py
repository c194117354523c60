"""Refreshes run in one long-lived thread (`background.WorkThread`): one job at a time, in order,
the same thread for every refresh, and none left running once idle."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW
from tftui.ui.app import TfTuiApp
from tftui.ui.background import WorkThread


def wait_until(done: threading.Event, timeout: float = 10.0) -> None:
    assert done.wait(timeout)


def test_jobs_run_one_after_another_in_one_thread() -> None:
    worker = WorkThread("test-work")
    ran: list[tuple[int, str]] = []
    done = threading.Event()
    gate = threading.Event()

    def job(n: int) -> None:
        if n == 0:
            gate.wait(5)  # the later jobs are queued while this one runs
        ran.append((n, threading.current_thread().name))
        if n == 4:
            done.set()

    for n in range(5):
        worker.submit(functools.partial(job, n))
    gate.set()
    wait_until(done)
    assert [n for n, _ in ran] == [0, 1, 2, 3, 4]
    assert {name for _, name in ran} == {"test-work"}
    assert worker.started == 1


def test_an_idle_thread_ends_and_the_next_job_starts_another() -> None:
    worker = WorkThread("test-idle", idle=0.05)
    first = threading.Event()
    worker.submit(first.set)
    wait_until(first)
    deadline = time.monotonic() + 10
    while any(t.name == "test-idle" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.name == "test-idle" for t in threading.enumerate())
    second = threading.Event()
    worker.submit(second.set)
    wait_until(second)
    assert worker.started == 2


async def test_the_consoles_refreshes_reuse_one_thread() -> None:
    cluster = ActingSimCluster(seed=3, nodes=6, now=DEFAULT_NOW)
    app = TfTuiApp(cluster, None, clock=lambda: DEFAULT_NOW, refresh_interval=None, read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        for _ in range(3):
            seq = app.data_seq
            await pilot.press("ctrl+r")
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert app.data_seq > seq
        assert app._refresh_thread.started == 1


def test_a_retired_object_is_freed_in_the_thread_after_the_jobs_before_it() -> None:
    worker = WorkThread("test-retire")
    freed: list[str] = []
    gate, done = threading.Event(), threading.Event()

    class Tracked:
        def __del__(self) -> None:
            freed.append(threading.current_thread().name)
            done.set()

    worker.submit(lambda: gate.wait(5))  # the retired object waits behind a running job
    worker.retire(Tracked())
    assert freed == []
    gate.set()
    wait_until(done)
    assert freed == ["test-retire"]


async def test_the_console_retires_the_data_a_refresh_replaced(monkeypatch: Any) -> None:
    cluster = ActingSimCluster(seed=3, nodes=6, now=DEFAULT_NOW)
    app = TfTuiApp(cluster, None, clock=lambda: DEFAULT_NOW, refresh_interval=None, read_only=True)
    retired: list[object] = []
    monkeypatch.setattr(app._refresh_thread, "retire", retired.append)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        first = app.data
        retired.clear()
        await pilot.press("ctrl+r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.data is not first and retired == [first]
