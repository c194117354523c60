"""Helpers for the daemon tests: a virtual clock and a daemon wired to the test API server; what
the server received (evictions, writes); the probes' and /metrics' answers; a daemon run in a thread
or started as a `tftui` process and stopped by a signal.

Also runnable as a child process (`python -m tests.daemon_support KUBECONFIG IDENTITY START STOP
[--kill-after-evictions N] [--speed X] [--request-timeout S] [--lease-timing D,R,P] [--backoff B,M] [--retries N]`): a daemon on a
virtual clock with leader election, which SIGKILLs itself right after its N-th eviction call
returns — a crash between two evictions of a campaign.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tftui.daemon import Daemon, DaemonOptions
from tftui.engine.compaction import parse_rfc3339
from tftui.runtime.journal import JournalEntry
from tftui.runtime.leader import LeaderConfig, LeaderElector
from tftui.sources.kube import KubeCluster
from tftui.sources.ports import MetricsPort

if TYPE_CHECKING:  # the child process (below) does not import the test API server
    from tests.kubeapi import KubeApiServer

LEASE = {
    "lease_duration": timedelta(seconds=2),
    "renew_deadline": timedelta(seconds=1.5),
    "retry_period": timedelta(seconds=0.2),
}
NIGHT_START = datetime.fromisoformat("2026-12-01T07:50:00+00:00")  # the demo's defrag window: 08:00–10:00Z
NIGHT_END = datetime.fromisoformat("2026-12-01T10:30:00+00:00")
ROOT = Path(__file__).resolve().parent.parent
AFTER_CAMPAIGN = datetime.fromisoformat("2026-12-01T08:10:00+00:00")  # drained by 08:02, released 08:05
EVICT = re.compile(r"^POST /api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction$")


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


def evictions(server: KubeApiServer) -> dict[str, int]:
    """Eviction requests the server received, per pod."""
    out = {}
    for key, n in server.stats.requests.items():
        m = EVICT.match(key)
        if m:
            out[f"{m.group(1)}/{m.group(2)}"] = n
    return out


def writes(server: KubeApiServer) -> dict[str, int]:
    return {k: n for k, n in server.stats.requests.items() if not k.startswith("GET ")}


def http(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def metric(text: str, name: str, default: float | None = None, **labels: str) -> float:
    """A series' value; `default` when it is absent (else AssertionError)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        head, _, rest = series.partition("{")
        got = ",".join(sorted(rest.rstrip("}").split(","))) if rest else ""
        if head == name and got == want:
            return float(value)
    if default is not None:
        return default
    raise AssertionError(f"no series {name}{{{want}}} in /metrics")


def run_in_thread(daemon: Daemon) -> threading.Thread:
    t = threading.Thread(target=daemon.run, daemon=True)
    t.start()
    return t


def ended(daemon: Daemon, thread: threading.Thread, *used: Any) -> None:
    """Stop a daemon run by `run_in_thread`, wait for it, and close what it used."""
    daemon.stop()
    thread.join(timeout=10)
    for resource in used:
        resource.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tftui", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "POD_NAME": "pod-7", "POD_NAMESPACE": "tf-sys"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def killed_leader(kubeconfig: Path, after_evictions: int) -> subprocess.Popen[str]:
    """This module run as a child daemon `a` over the 08:00 campaign, SIGKILLed by itself right
    after its `after_evictions`-th eviction call returns (`--kill-after-evictions`)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.daemon_support",
            str(kubeconfig),
            "a",
            "2026-12-01T07:59:50Z",
            "2026-12-01T08:10:00Z",
            "--kill-after-evictions",
            str(after_evictions),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stopped(proc: subprocess.Popen[str], sig: int) -> tuple[str, str]:
    """Send `sig` to a daemon process; its (stdout, stderr) once it exited 0. Each step of a stop
    (the call in flight, the Lease's release, the cache's close) is bounded, but slow on a busy
    machine: up to a minute."""
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out, err


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
