"""Helpers for the daemon tests: a virtual clock and a daemon wired to the test API server.

Also runnable as a child process (`python -m tests.daemon_support KUBECONFIG IDENTITY START STOP
[--kill-after-evictions N]`): a daemon on a virtual clock with leader election, which SIGKILLs
itself right after its N-th eviction call returns — a crash between two evictions of a campaign.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from datetime import datetime, timedelta

from tftui.daemon import Daemon, DaemonOptions
from tftui.engine.compaction import parse_rfc3339
from tftui.runtime.journal import JournalEntry
from tftui.runtime.leader import LeaderConfig, LeaderElector
from tftui.sources.kube import KubeCluster
from tftui.sources.ports import MetricsPort

LEASE = {
    "lease_duration": timedelta(seconds=2),
    "renew_deadline": timedelta(seconds=1.5),
    "retry_period": timedelta(seconds=0.2),
}
NIGHT_START = datetime.fromisoformat("2026-12-01T07:50:00+00:00")  # the demo's defrag window: 08:00–10:00Z
NIGHT_END = datetime.fromisoformat("2026-12-01T10:30:00+00:00")


class VirtualClock:
    """Simulated time the daemon moves itself (`advance`), thread-safe."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, dt: timedelta) -> None:
        with self._lock:
            self._now += dt


def make_daemon(
    kubeconfig: str | os.PathLike[str],
    identity: str = "a",
    *,
    start: datetime = NIGHT_START,
    stop_at: datetime | None = NIGHT_END,
    dry_run: bool = False,
    elect: bool = True,
    metrics: MetricsPort | None = None,
    listen: str | None = None,
    metrics_optional: bool = False,
) -> tuple[Daemon, KubeCluster]:
    """A daemon on a virtual clock (speed ∞) against the cluster of `kubeconfig`; caller closes `kube`."""
    lease = None if dry_run or not elect else ("tf-sys", "tftui")
    kube = KubeCluster(kubeconfig=os.fspath(kubeconfig), backoff=0.01, max_backoff=0.05, lease=lease)
    kube.wait_synced(10)
    clock = VirtualClock(start)
    elector = (
        LeaderElector(kube.api, LeaderConfig(name="tftui", namespace="tf-sys", identity=identity, **LEASE))
        if lease
        else None
    )
    options = DaemonOptions(
        dry_run=dry_run,
        listen=listen,
        poll=0.05,
        speed=float("inf"),
        stop_at=stop_at,
        metrics_optional=metrics_optional,
    )
    return Daemon(kube, metrics, options, elector=elector, clock=clock.now, advance=clock.advance), kube


def _child() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("kubeconfig")
    p.add_argument("identity")
    p.add_argument("start")
    p.add_argument("stop")
    p.add_argument("--kill-after-evictions", type=int, default=0)
    args = p.parse_args()
    from tftui.daemon import setup_logging

    setup_logging("info")
    daemon, kube = make_daemon(
        args.kubeconfig, args.identity, start=parse_rfc3339(args.start), stop_at=parse_rfc3339(args.stop)
    )
    evictions = 0

    def on_entry(entry: JournalEntry) -> None:
        nonlocal evictions
        if entry.kind == "action" and entry.message.startswith("evict Pod"):
            evictions += 1
            if evictions == args.kill_after_evictions:
                sys.stdout.flush()
                os.kill(os.getpid(), signal.SIGKILL)  # no release, no markers after the eviction

    daemon.journal.subscribe(on_entry)
    daemon.install_signal_handlers()
    try:
        return daemon.run()
    finally:
        kube.close()


if __name__ == "__main__":
    sys.exit(_child())
