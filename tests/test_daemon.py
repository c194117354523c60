"""`tftui --daemon` against the in-process API server (real client): a night's campaign on the demo
cluster, ticks skipped while the cache lags, stops by a signal, dry run."""

from __future__ import annotations

import io
import itertools
import json
import logging
import re
import signal
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.daemon_support import AFTER_CAMPAIGN, NIGHT_START, evictions, make_daemon, metric, writes
from tests.kubeapi import Fault, KubeApiServer
from tests.waiting import eventually
from tftui.daemon import setup_logging
from tftui.engine.plan import LabelPod
from tftui.runtime.journal import JournalEntry
from tftui.sources.sim.cluster import generate_objects

DEMO = generate_objects()


def test_a_night_on_the_demo_cluster(server: KubeApiServer, kubeconfig: Path) -> None:
    """Defrag drains candidates one pod at a time, compaction releases the emptied nodes; events,
    metrics and JSON journal lines appear."""
    logs = io.StringIO()
    root = logging.getLogger("tftui")
    saved = (root.handlers[:], root.level, root.propagate)
    setup_logging("info", logs)
    daemon, kube = make_daemon(kubeconfig, stop_at=AFTER_CAMPAIGN)
    try:
        assert daemon.run() == 0
    finally:
        kube.close()
        root.handlers[:], root.level, root.propagate = saved
    text = daemon.metrics.exposition().decode()  # what /metrics serves

    evicted = evictions(server)
    assert len(evicted) >= 6 and set(evicted.values()) == {1}  # every pod evicted once, never twice
    entries = daemon.journal.entries()
    evict_times = [e.ts for e in entries if e.kind == "action" and e.message.startswith("evict Pod")]
    assert len(evict_times) == len(evicted)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(evict_times)]
    assert min(gaps) >= 10  # one pod per step, steps 10 s apart
    # every drained source node was released by compaction afterwards (its GPUNodeClaim deleted)
    sources = {
        m.group(1)
        for e in entries
        for m in [re.match(r"label Node (\S+) tensor-fusion.ai/defrag-source=true", e.message)]
        if m
    }
    released = {m.group(1) for e in entries for m in [re.match(r"release (\S+) ", e.message)] if m}
    assert sources and sources <= released
    assert not [p for p in server.objects("Pod") if p["spec"].get("nodeName") in sources]
    claims = [k for k in writes(server) if k.startswith("DELETE /apis/tensor-fusion.ai/v1/gpunodeclaims/")]
    assert len(claims) == len(released) and set(writes(server)[k] for k in claims) == {1}
    reasons = {e["reason"] for e in server.objects("Event")}
    assert {"DefragStarted", "DefragPodEvicted", "Compaction"} <= reasons
    # metrics
    assert metric(text, "tftui_pods_evicted_total", pool="demo-dev") == len(evicted)
    assert metric(text, "tftui_nodes_released_total", pool="demo-dev") == len(released)
    assert metric(text, "tftui_actions_total", action="EvictPod", result="applied") == len(evicted)
    assert metric(text, "tftui_decisions_total", kind="defrag") >= len(evicted)
    assert metric(text, "tftui_loop_duration_seconds_count", loop="tick") == daemon.ticks
    assert metric(text, "tftui_dry_run") == 0
    # JSON journal lines on the log stream
    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    journal = [doc for doc in lines if doc["logger"] == "tftui.journal"]
    assert len(journal) == len(entries)
    assert any(d["kind"] == "defrag" and d["msg"].startswith("evict ") for d in journal)
    assert {"time", "level", "msg", "ts", "pool", "kind", "ok"} <= set(journal[0])
    assert lines[-1]["msg"] == "daemon stopped"


def test_no_tick_decides_while_the_cache_does_not_show_the_last_writes(
    server: KubeApiServer, kubeconfig: Path
) -> None:
    """A write of this process that the cache does not show yet (the Pod watch lags 8 s behind): every
    tick until then is skipped, counted and logged; none decides on the stale cache."""
    daemon, kube = make_daemon(kubeconfig, elect=False, stop_at=NIGHT_START + timedelta(seconds=30))
    daemon.options.settle_timeout = 0.3
    daemon.options.wedged_after = 0.5  # /readyz says so once ticks were skipped for longer
    readiness: list[tuple[bool, str]] = []
    health: list[tuple[bool, str]] = []
    tick = daemon._tick

    def ticking(rt: Any) -> bool:
        done = tick(rt)
        readiness.append(daemon.ready())
        health.append(daemon.health())
        return done

    daemon._tick = ticking  # type: ignore[method-assign]
    logs = io.StringIO()
    root = logging.getLogger("tftui")
    saved = (root.handlers[:], root.level, root.propagate)
    setup_logging("info", logs)
    try:
        watches = server.stats.requests.get("GET /api/v1/pods?watch", 0)
        server.inject(Fault(delay=8.0, method="GET", path="/pods"))
        server.drop_watches()
        eventually(lambda: server.stats.requests.get("GET /api/v1/pods?watch", 0) > watches)
        pod = next(p for p in DEMO if p["kind"] == "Pod")["metadata"]
        kube.apply(LabelPod(pod["namespace"], pod["name"], {"team": "x"}))
        assert daemon.run() == 0
    finally:
        kube.close()
        root.handlers[:], root.level, root.propagate = saved
    assert daemon.journal.total == 0  # no decision, no action
    assert daemon.ticks == 0
    text = daemon.metrics.exposition().decode()
    assert metric(text, "tftui_errors_total", where="loop") == 3  # 07:50:00, :10, :20
    skipped = [json.loads(line) for line in logs.getvalue().splitlines() if "tick skipped" in line]
    assert len(skipped) == 3 and skipped[0]["level"] == "warning"
    assert readiness[0] == (True, "")  # one skipped tick is not yet a cache behind
    assert any(
        not ok and reason.startswith("cluster cache behind: ticks skipped for") for ok, reason in readiness
    )
    assert set(health) == {(True, "")}  # never a restart: it would relist from a slow API server


def test_a_signal_while_the_stop_event_is_locked_still_stops_the_loop(kubeconfig: Path) -> None:
    """A signal handler runs in the main thread between two bytecodes, maybe inside the stop
    event's `wait` while it holds the event's lock: the handler must take no lock (`Event.set` there
    waited for itself forever: a daemon that ignored SIGTERM now and then under load), and the loop's
    wait must still end soon after."""
    daemon, kube = make_daemon(kubeconfig, elect=False)
    try:
        handled = threading.Event()

        def in_the_wait() -> None:
            # as inside `Event.wait`, where the handler may run
            with daemon._stop._cond:  # type: ignore[attr-defined]
                daemon._on_signal(signal.SIGTERM)
            handled.set()

        threading.Thread(target=in_the_wait, daemon=True).start()
        assert handled.wait(5), "the signal handler waited for the stop event's lock"
        daemon.options.poll = 30.0
        started = time.monotonic()
        daemon._wait()
        assert time.monotonic() - started < 2  # a due wait of 30 s ends at the next check
        assert daemon._stopping()
        assert daemon._stop.is_set()  # and the event is set, from the loop, for other threads
    finally:
        kube.close()


def test_a_stop_ends_the_tick_at_the_next_pool(server: KubeApiServer, kubeconfig: Path) -> None:
    """SIGTERM mid-tick: the pool being reconciled is finished (its releases, events and last-sync
    stamp), the pools after it are left to the next leader with one journal line, and nothing more
    is written."""
    daemon, kube = make_daemon(kubeconfig, elect=False, stop_at=AFTER_CAMPAIGN)
    logs = io.StringIO()
    root = logging.getLogger("tftui")
    saved = (root.handlers[:], root.level, root.propagate)
    setup_logging("info", logs)
    written_by_handler: list[int] = []

    def on_entry(entry: JournalEntry) -> None:
        if (
            entry.kind == "action"
            and entry.message.startswith("delete GPUNodeClaim")
            and not written_by_handler
        ):
            before = len(logs.getvalue())
            daemon._on_signal(signal.SIGTERM)  # while the first pool's releases are being applied
            written_by_handler.append(len(logs.getvalue()) - before)

    daemon.journal.subscribe(on_entry)
    try:
        assert daemon.run() == 0
    finally:
        kube.close()
        root.handlers[:], root.level, root.propagate = saved
    # the handler writes nothing (it may interrupt a log line being written); the loop says it at
    # its next check of the stop, before the journal line of what it leaves
    assert written_by_handler == [0]
    said = [json.loads(line)["msg"] for line in logs.getvalue().splitlines()]
    received = [
        i for i, m in enumerate(said) if m == "received SIGTERM: finishing the call in flight, then stopping"
    ]
    assert len(received) == 1
    assert received[0] < next(i for i, m in enumerate(said) if m.startswith("stopping:"))
    entries = daemon.journal.entries()
    rounds = {e.pool for e in entries if e.kind == "compaction" and e.message.startswith("round:")}
    assert rounds == {"demo-dev"}
    released = [e for e in entries if e.message.startswith("delete GPUNodeClaim")]
    assert len(released) == 3  # the pool's step applied whole, its last-sync stamp too
    assert any(e.message.startswith("annotate GPUPool demo-dev tensor-fusion.ai/last-sync") for e in entries)
    stopping = [e.message for e in entries if e.message.startswith("stopping:")]
    assert len(stopping) == 1 and "demo-inference" in stopping[0]
    assert entries[-1].message == stopping[0]  # nothing after it


def test_dry_run_decides_and_journals_but_writes_nothing(server: KubeApiServer, kubeconfig: Path) -> None:
    daemon, kube = make_daemon(kubeconfig, dry_run=True, stop_at=AFTER_CAMPAIGN)
    try:
        assert daemon.run() == 0
    finally:
        kube.close()
    assert writes(server) == {}  # not even a Lease: a dry-run replica takes no part in the election
    messages = [e.message for e in daemon.journal.entries()]
    assert any(m.startswith("dry-run: evict Pod ") for m in messages)
    assert any(m.startswith("dry-run: delete GPUNodeClaim ") for m in messages)
    text = daemon.metrics.exposition().decode()
    assert metric(text, "tftui_actions_total", action="EvictPod", result="dry-run") >= 1
    assert metric(text, "tftui_dry_run") == 1
