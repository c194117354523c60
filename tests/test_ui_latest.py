"""`LatestReader`: a refresh waits on a remote store's latest samples briefly, one read at a time."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

from tftui.engine.state import ClusterState
from tftui.model.usage import GPUUsage
from tftui.ui.load.data import LatestUsage
from tftui.ui.load.latest import LatestReader

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
STATE = ClusterState.build([])


class Store:
    """A metrics port whose reads wait on `gate` while it is clear (a slow store)."""

    REMOTE = True

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.reads = 0
        self.fail = False

    def describe(self) -> str:
        return "greptime 10.0.0.1:4003/public (time column ts)"

    def latest_gpu_usage(self, now: datetime) -> dict[str, GPUUsage]:
        self.reads += 1
        self.gate.wait(30)
        if self.fail:
            raise OSError("connection reset")
        return {
            "gpu-1": GPUUsage(
                gpu="gpu-1", node="n", compute_percent=float(self.reads), memory_bytes=1.0, ts=now
            )
        }

    def latest_worker_usage(self, now: datetime) -> dict[tuple[str, str], object]:
        return {}


def _read(reader: LatestReader, store: Store, now: datetime) -> LatestUsage:
    return reader.read(store, STATE, now)  # type: ignore[arg-type]


def _answered(reader: LatestReader) -> None:
    """Until the read in flight has its answer (the store was let go)."""
    deadline = time.monotonic() + 10
    while reader._pending is not None and not reader._pending.done() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_store_that_answers_is_read_at_every_refresh() -> None:
    store, reader = Store(), LatestReader(wait=5)
    for i in range(3):
        got = _read(reader, store, T0 + timedelta(seconds=10 * i))
        assert got.late is None and got.gpus["gpu-1"].compute_percent == i + 1
    assert store.reads == 3


def test_a_slow_store_is_waited_on_briefly_and_read_once_at_a_time() -> None:
    store, reader = Store(), LatestReader(wait=0.5)
    first = _read(reader, store, T0)
    assert first.late is None
    store.gate.clear()  # the store stops answering
    late = _read(reader, store, T0 + timedelta(seconds=10))  # returns while the read hangs
    assert late.late is not None
    assert late.late.asked_at == T0 + timedelta(seconds=10) and late.late.shown_at == T0
    assert late.gpus == first.gpus  # the samples read last
    again = _read(reader, store, T0 + timedelta(seconds=20))
    assert again.late is not None and again.late.asked_at == T0 + timedelta(seconds=10)
    assert store.reads == 2  # the second refresh waited on the read in flight, started none
    store.gate.set()  # the store answers the read asked at T0 + 10 s
    _answered(reader)
    answered = _read(reader, store, T0 + timedelta(seconds=30))
    assert store.reads == 2 and answered.late is None and answered.gpus["gpu-1"].compute_percent == 2
    fresh = _read(reader, store, T0 + timedelta(seconds=40))
    assert fresh.gpus["gpu-1"].compute_percent == 3 and store.reads == 3


def test_no_samples_yet_and_a_failing_store() -> None:
    store, reader = Store(), LatestReader(wait=0.1)
    store.gate.clear()
    nothing = _read(reader, store, T0)
    assert nothing.gpus == {} and nothing.late is not None and nothing.late.shown_at is None
    store.fail = True
    store.gate.set()
    _answered(reader)
    failed = _read(reader, store, T0 + timedelta(seconds=10))
    assert failed.late is None and failed.error is not None and "connection reset" in failed.error


def test_another_store_starts_afresh() -> None:
    slow, reader = Store(), LatestReader(wait=1)
    _read(reader, slow, T0)
    slow.gate.clear()
    _read(reader, slow, T0 + timedelta(seconds=10))
    other = Store()
    got = _read(reader, other, T0 + timedelta(seconds=20))  # `:ctx` to a store that answers
    assert got.late is None and other.reads == 1
    slow.gate.set()
