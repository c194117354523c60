"""`tftui --daemon` on a cluster whose first list is slow: the probes' server answers while it runs
(`/healthz` ok, `/readyz` 503 until the cache is synced), so the kubelet does not restart a daemon
that is still listing a big cluster."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.daemon_support import _free_port, _start, _stopped, http
from tests.kubeapi import Fault, KubeApiServer
from tests.waiting import eventually

LIST_DELAY = 8.0  # the first list of pods answers this late: longer than the process takes to start


def answers(url: str) -> bool:
    try:
        return http(url)[0] > 0
    except OSError:  # not listening yet (URLError and ConnectionError are OSErrors)
        return False


def test_the_probes_answer_while_the_first_list_runs(server: KubeApiServer, kubeconfig: Path) -> None:
    server.inject(Fault(delay=LIST_DELAY, method="GET", path="/api/v1/pods"))
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start(["--daemon", "--kubeconfig", str(kubeconfig), "--dry-run", "--listen", f"127.0.0.1:{port}"])
    try:
        eventually(lambda: answers(f"{base}/healthz"), 60)  # a busy machine starts the process slowly
        assert http(f"{base}/healthz") == (200, "ok\n")
        code, body = http(f"{base}/readyz")
        assert (code, body.strip()) == (503, "not ok: cluster cache not synced yet")  # the pods still listing
        eventually(lambda: server.pending_faults() == 0, 60)  # the delayed list asked for: the sync waits
        eventually(lambda: http(f"{base}/readyz")[0] == 200, 60)
        out, _ = _stopped(proc, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
    docs = [json.loads(line) for line in out.splitlines()]
    synced = [d for d in docs if d["msg"] == "cluster cache synced"]
    assert len(synced) == 1 and synced[0]["objects"] >= len(server.objects())
    assert synced[0]["seconds"] >= LIST_DELAY - 1  # the line says how long the list took
    started = next(i for i, d in enumerate(docs) if d["msg"] == "daemon started")
    assert docs.index(synced[0]) < started  # the loop starts on a synced cache


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_during_the_first_list_ends_the_run_cleanly(
    server: KubeApiServer, kubeconfig: Path, sig: signal.Signals
) -> None:
    """The signal handlers are installed before the first list: a stop during it ends the wait at
    its next progress call, exit 0, nothing started. Before, the default handlers met a process
    with a server and watch threads running: SIGTERM killed it (exit -15), SIGINT's
    KeyboardInterrupt gave 130, and once (a fresh-clone run) landed where the exit then hung."""
    server.inject(Fault(delay=120.0, method="GET", path="/api/v1/pods"))
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start(["--daemon", "--kubeconfig", str(kubeconfig), "--dry-run", "--listen", f"127.0.0.1:{port}"])
    try:
        eventually(lambda: answers(f"{base}/healthz"), 60)
        # the probes answer before the lists start: wait until the pods' list is asked for (held)
        eventually(lambda: server.pending_faults() == 0, 60)
        out, _ = _stopped(proc, sig)
    finally:
        if proc.poll() is None:
            proc.kill()
    messages = [json.loads(line)["msg"] for line in out.splitlines()]
    assert "daemon stopped before the cluster cache synced" in messages
    assert "daemon started" not in messages and "cluster cache synced" not in messages
    assert not answers(f"{base}/healthz")  # the probes' server went with it


def test_a_failed_first_list_stops_the_probes_server_and_exits(
    server: KubeApiServer, kubeconfig: Path
) -> None:
    """A cluster that refuses the list (403): one line, a non-zero exit, no server left behind."""
    server.inject(Fault(status=403, method="GET", path="/api/v1/pods", sticky=True))
    port = _free_port()
    proc = _start(["--daemon", "--kubeconfig", str(kubeconfig), "--dry-run", "--listen", f"127.0.0.1:{port}"])
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode != 0
    lines = [line for line in err.splitlines() if line.startswith("tftui: ")]
    assert len(lines) == 1 and "cannot list pods: 403" in lines[0], err
    assert not answers(f"http://127.0.0.1:{port}/healthz")
