"""The daemon's metrics store down, unresolvable, without its database or holding its queries:
autoscale pauses saying so (and resumes once the store answers), the cluster loops and probes go on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.daemon_support import ended, evictions, http, make_daemon, metric, run_in_thread, writes
from tests.kubeapi import KubeApiServer
from tests.waiting import eventually
from tftui.daemon import Daemon
from tftui.runtime.journal import JournalEntry
from tftui.sources.greptime import GreptimeMetrics


def journaled(daemon: Daemon, prefix: str) -> list[JournalEntry]:
    """The daemon's journal entries whose message starts with `prefix`."""
    return [e for e in daemon.journal.entries() if e.message.startswith(prefix)]


def test_metrics_store_down_pauses_autoscale_only(server: KubeApiServer, kubeconfig: Path) -> None:
    down = GreptimeMetrics("host=127.0.0.1 port=1 dbname=public user=tftui", connect_timeout=1)
    daemon, kube = make_daemon(kubeconfig, metrics=down, stop_at=None, listen="127.0.0.1:0")
    thread = run_in_thread(daemon)
    try:
        eventually(lambda: len(evictions(server)) >= 2)
        assert daemon.ops is not None
        base = f"http://127.0.0.1:{daemon.ops.port}"
        code, body = http(f"{base}/readyz")
        assert code == 503 and "autoscale paused: metrics store unreachable" in body
        assert http(f"{base}/healthz")[0] == 200
        text = http(f"{base}/metrics")[1]
        assert metric(text, "tftui_autoscale_paused") == 1
        assert metric(text, "tftui_metrics_store_up") == 0
        daemon.options.metrics_optional = True
        assert http(f"{base}/readyz") == (200, "ok\n")
    finally:
        ended(daemon, thread, kube)
    paused = journaled(daemon, "autoscale paused")
    assert len(paused) == 1 and not paused[0].ok  # one status line, not one per run
    assert "compaction and defrag go on" in paused[0].message


def test_a_silent_resolver_for_the_metrics_store_neither_holds_the_loop_nor_the_stop(
    server: KubeApiServer, kubeconfig: Path, silent_resolver: str
) -> None:
    """The metrics host's DNS lookup never answers: autoscale pauses after the connect timeout (not
    the resolver's), the cluster loops go on, and a stop ends the run although the lookup hangs."""
    hung = GreptimeMetrics(f"host={silent_resolver} port=4003 dbname=public user=tftui", connect_timeout=1)
    daemon, kube = make_daemon(kubeconfig, metrics=hung, stop_at=None)
    thread = run_in_thread(daemon)
    try:
        eventually(lambda: len(evictions(server)) >= 2)
        paused = journaled(daemon, "autoscale paused")
        assert paused and f"no DNS answer for {silent_resolver} within 1 s" in paused[0].message
        daemon.stop()
        thread.join(timeout=60)
        assert not thread.is_alive()
    finally:
        ended(daemon, thread, kube)


def test_metrics_store_pauses_then_resumes_autoscale(
    server: KubeApiServer, kubeconfig: Path, store: Any
) -> None:
    """On each metrics store: its database missing pauses autoscale; once it exists, the next tick resumes."""
    db = f"daemon_metrics_{store.kind}"
    metrics = GreptimeMetrics(store.dsn(db), connect_timeout=1)
    daemon, kube = make_daemon(kubeconfig, metrics=metrics, stop_at=None, listen="127.0.0.1:0")
    thread = run_in_thread(daemon)
    try:
        eventually(lambda: bool(journaled(daemon, "autoscale paused")))
        assert daemon.ops is not None
        base = f"http://127.0.0.1:{daemon.ops.port}"
        # the journal line is written inside the tick, readiness is set as the tick ends; until
        # then /readyz may carry the idle probe's "metrics store unreachable" (also a 503)
        eventually(lambda: "autoscale paused" in http(f"{base}/readyz")[1], 30)
        code, body = http(f"{base}/readyz")
        assert code == 503 and "autoscale paused" in body
        store.create(db, "greptime_timestamp")
        # the next autoscale tick after the store answers (slow on a loaded machine: generous timeout)
        eventually(lambda: bool(journaled(daemon, "autoscale resumed")), 60)
        eventually(lambda: http(f"{base}/readyz") == (200, "ok\n"), 30)
        text = http(f"{base}/metrics")[1]
        assert metric(text, "tftui_autoscale_paused") == 0 and metric(text, "tftui_metrics_store_up") == 1
    finally:
        ended(daemon, thread, kube, metrics)
    paused = journaled(daemon, "autoscale paused")
    assert len(paused) == 1 and ("does not exist" in paused[0].message or "not found" in paused[0].message)


def test_a_metrics_store_that_stops_answering_pauses_autoscale_only(
    server: KubeApiServer, kubeconfig: Path, store: Any
) -> None:
    """On each store: queries on a held table end at the query timeout (they used to wait for good,
    and the loop with them until the liveness probe restarted the daemon); autoscale pauses saying
    so, the cluster loops and the probes go on, and autoscale resumes once the store answers."""
    db = f"daemon_held_{store.kind}"
    store.create(db, "greptime_timestamp")
    metrics = GreptimeMetrics(store.dsn(db), connect_timeout=1, query_timeout=1)
    daemon, kube = make_daemon(kubeconfig, metrics=metrics, stop_at=None, listen="127.0.0.1:0")
    thread = run_in_thread(daemon)
    try:
        with store.hold(db, "tf_worker_usage"):
            eventually(lambda: bool(journaled(daemon, "autoscale paused")), 60)
            ticks = daemon.ticks
            eventually(lambda: daemon.ticks >= ticks + 2, 60)  # the loop goes on
            assert [k for k in writes(server) if "leases" not in k]  # and acted on the cluster meanwhile
            assert daemon.ops is not None
            base = f"http://127.0.0.1:{daemon.ops.port}"
            code, body = http(f"{base}/readyz")
            assert code == 503 and "no result within 1 s" in body, body
            assert http(f"{base}/healthz")[0] == 200
        eventually(lambda: bool(journaled(daemon, "autoscale resumed")), 60)
    finally:
        ended(daemon, thread, kube, metrics)
    paused = journaled(daemon, "autoscale paused")
    assert len(paused) == 1 and "no result within 1 s while" in paused[0].message, paused
