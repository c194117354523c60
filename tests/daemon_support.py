"""Helpers for the daemon tests: a virtual clock and a daemon wired to the test API server.

Also runnable as a child process (`python -m tests.daemon_support KUBECONFIG IDENTITY START STOP
[--kill-after-evictions N] [--speed X] [--request-timeout S] [--lease-timing D,R,P] [--backoff B,M] [--retries N]`): a daemon on a
virtual clock with leader election, which SIGKILLs itself right after its N-th eviction call
returns — a crash between two evictions of a campaign.
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
    speed: float = float("inf"),
    request_timeout: float = 30.0,
    lease_timing: dict[str, timedelta] | None = None,
    backoff: tuple[float, float] = (0.01, 0.05),
    retries: int = 5,
) -> tuple[Daemon, KubeCluster]:
    """A daemon on a virtual clock (`speed` simulated seconds per wall second, default ∞) against the
    cluster of `kubeconfig`; caller closes `kube`."""
    lease = None if dry_run or not elect else ("tf-sys", "tftui")
    kube = KubeCluster(
        kubeconfig=os.fspath(kubeconfig),
        backoff=backoff[0],
        max_backoff=backoff[1],
        retries=retries,
        lease=lease,
        request_timeout=request_timeout,
    )
    kube.wait_synced(10)
    clock = VirtualClock(start)
    timing = lease_timing or LEASE
    elector = (
        LeaderElector(kube.api, LeaderConfig(name="tftui", namespace="tf-sys", identity=identity, **timing))
        if lease
        else None
    )
    options = DaemonOptions(
        dry_run=dry_run,
        listen=listen,
        poll=0.05,
        speed=speed,
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
    p.add_argument("--speed", type=float, default=float("inf"))
    p.add_argument("--request-timeout", type=float, default=30.0)
    p.add_argument("--lease-timing", default="", help="DURATION,DEADLINE,PERIOD in seconds")
    p.add_argument("--backoff", default="0.01,0.05", help="BASE,MAX retry backoff in seconds")
    p.add_argument("--retries", type=int, default=5)
    args = p.parse_args()
    from tftui.daemon import setup_logging

    setup_logging("info")
    timing = None
    if args.lease_timing:
        d, r, t = (timedelta(seconds=float(x)) for x in args.lease_timing.split(","))
        timing = {"lease_duration": d, "renew_deadline": r, "retry_period": t}
    daemon, kube = make_daemon(
        args.kubeconfig,
        args.identity,
        start=parse_rfc3339(args.start),
        stop_at=parse_rfc3339(args.stop),
        speed=args.speed,
        request_timeout=args.request_timeout,
        lease_timing=timing,
        backoff=(float(args.backoff.split(",")[0]), float(args.backoff.split(",")[1])),
        retries=args.retries,
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
