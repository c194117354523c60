"""`tftui --daemon` as a process: on the demo (no Textual, JSON logs, a SIGTERM stop), its flag
errors, and its wiring on the test API server (kubeconfig, the Lease from POD_NAME, dry run)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
from pathlib import Path

import pytest

from tests.daemon_support import ROOT, _free_port, _start, _stopped, http, metric, writes
from tests.kubeapi import KubeApiServer
from tests.waiting import eventually
from tftui.cli import main


def test_daemon_process_on_the_demo_never_imports_textual_and_stops_on_sigterm() -> None:
    port = _free_port()
    code = (
        "import sys\nfrom tftui.cli import main\n"
        f"rc = main(['--daemon', '--demo', '--speed', '600', '--listen', '127.0.0.1:{port}'])\n"
        "print('TEXTUAL', 'textual' in sys.modules, file=sys.stderr)\nsys.exit(rc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "POD_NAME": "demo-replica-1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def ready() -> bool:
            try:
                return http(f"http://127.0.0.1:{port}/readyz")[0] == 200
            except (urllib.error.URLError, ConnectionError):
                return False

        eventually(ready, 20)
        assert http(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
        # the per-pool series are exported once the loop has seen the pools (after the first
        # counters): waiting for the first alone raced with a busy machine
        eventually(
            lambda: (
                'tftui_pods_evicted_total{pool="demo-training"}'
                in http(f"http://127.0.0.1:{port}/metrics")[1]
            ),
            20,
        )
        scraped = http(f"http://127.0.0.1:{port}/metrics")[1]
        # counters that have not counted read 0 rather than being absent
        assert metric(scraped, "tftui_errors_total", where="loop") == 0
        assert metric(scraped, "tftui_actions_total", action="EvictPod", result="failed") == 0
        metric(scraped, "tftui_pods_evicted_total", pool="demo-training")  # exported, whatever it counted
        out, err = _stopped(proc, signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "TEXTUAL False" in err
    docs = [json.loads(line) for line in out.splitlines()]
    assert docs[0]["msg"] == "daemon started" and docs[0]["cluster"] == "demo"
    # the replica's name plus a per-process suffix (two daemons on one host never share it), not ""
    assert re.fullmatch(r"demo-replica-1_[0-9a-f]{8}", docs[0]["identity"]), docs[0]["identity"]
    assert any(d["logger"] == "tftui.journal" and d["kind"] == "compaction" for d in docs)
    assert any(d["msg"] == "received SIGTERM: finishing the call in flight, then stopping" for d in docs)
    assert docs[-1]["msg"] == "daemon stopped"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lease-duration", "5s"], "need --lease-duration > --renew-deadline > --retry-period"),
        (["--retry-period", "soon"], "--retry-period: "),
        (["--listen", "8080"], "--listen: expected HOST:PORT"),
        (["--from", "x.json"], "--daemon acts on a cluster"),
        (["--pools", ","], "--pools: no pool name"),
    ],
)
def test_daemon_flag_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--daemon", "--demo", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tftui: ") and message in err and len(err.splitlines()) == 1


def _ready(port: int) -> bool:
    try:
        return http(f"http://127.0.0.1:{port}/readyz")[0] == 200
    except (urllib.error.URLError, ConnectionError):
        return False


def test_cli_daemon_on_a_cluster_leads_and_releases_on_sigterm(
    server: KubeApiServer, kubeconfig: Path
) -> None:
    """The flags' wiring: kubeconfig, the Lease from POD_NAMESPACE/POD_NAME, release on SIGTERM."""
    port = _free_port()
    proc = _start(["--daemon", "--kubeconfig", str(kubeconfig), "--listen", f"127.0.0.1:{port}",
                   "--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "200ms"])  # fmt: skip
    try:
        eventually(lambda: _ready(port), 60)  # a busy machine starts the process slowly
        eventually(lambda: metric(http(f"http://127.0.0.1:{port}/metrics")[1], "tftui_leader") == 1)
        lease = server.get("Lease", "tftui", "tf-sys")
        assert lease is not None and re.fullmatch(r"pod-7_[0-9a-f]{8}", lease["spec"]["holderIdentity"])
        assert lease["spec"]["leaseDurationSeconds"] == 2
        eventually(
            lambda: any(
                k.startswith("DELETE /apis/tensor-fusion.ai/v1/gpunodeclaims/") for k in writes(server)
            )
        )
        out, _ = _stopped(proc, signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (server.get("Lease", "tftui", "tf-sys") or {})["spec"].get("holderIdentity")
    docs = [json.loads(line) for line in out.splitlines()]
    holder = lease["spec"]["holderIdentity"]
    assert any(d["msg"] == "acting: this replica leads" and d["identity"] == holder for d in docs)


def test_cli_daemon_dry_run_on_a_cluster_writes_nothing(server: KubeApiServer, kubeconfig: Path) -> None:
    port = _free_port()
    proc = _start(["--daemon", "--kubeconfig", str(kubeconfig), "--dry-run", "--listen", f"127.0.0.1:{port}"])
    try:
        eventually(lambda: _ready(port), 60)  # a busy machine starts the process slowly
        eventually(
            lambda: (
                metric(
                    http(f"http://127.0.0.1:{port}/metrics")[1],
                    "tftui_decisions_total",
                    0.0,  # not there before the first compaction tick
                    kind="compaction",
                )
                > 0
            )
        )
        out, _ = _stopped(proc, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert writes(server) == {}
    assert any('"msg": "dry-run: delete GPUNodeClaim ' in line for line in out.splitlines())
