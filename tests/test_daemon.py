"""`tftui --daemon` against the in-process API server (real client) and as a process on the demo."""

from __future__ import annotations

import io
import itertools
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_support import NIGHT_START, make_daemon
from tests.kubeapi import Fault, KubeApiServer
from tests.waiting import eventually
from tftui.cli import main
from tftui.daemon import Daemon, setup_logging
from tftui.engine.plan import LabelPod
from tftui.model import keys
from tftui.runtime.journal import JournalEntry
from tftui.sources.greptime import GreptimeMetrics
from tftui.sources.sim.cluster import generate_objects

ROOT = Path(__file__).resolve().parent.parent
DEMO = generate_objects()
AFTER_CAMPAIGN = datetime.fromisoformat("2026-12-01T08:10:00+00:00")  # drained by 08:02, released 08:05
WINDOW_END = datetime.fromisoformat("2026-12-01T10:00:00+00:00")
A_KILLED = datetime.fromisoformat("2026-12-01T08:00:00+00:00")  # a daemon started 07:59:50 evicts first then
EVICT = re.compile(r"^POST /api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction$")


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


def test_two_daemons_one_acts_the_leader_is_killed_the_other_resumes_the_campaign(
    server: KubeApiServer, kubeconfig: Path
) -> None:
    """A (a process) leads and is SIGKILLed right after its 2nd eviction; B, standing by, takes over
    within the lease duration and finishes the campaign; no eviction is repeated."""
    a = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.daemon_support",
            str(kubeconfig),
            "a",
            "2026-12-01T07:59:50Z",
            "2026-12-01T08:10:00Z",
            "--kill-after-evictions",
            "2",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    b = None
    try:
        eventually(
            lambda: (
                (server.get("Lease", "tftui", "tf-sys") or {}).get("spec", {}).get("holderIdentity") == "a"
            ),
            60,  # a child process starting and listing every kind takes long on a busy machine
        )
        b, kube = make_daemon(kubeconfig, "b", stop_at=AFTER_CAMPAIGN)
        became: list[float] = []
        assert b.elector is not None
        b.elector._on_change = lambda leader: became.append(time.monotonic()) if leader else None
        thread = run_in_thread(b)
        out, err = a.communicate(timeout=30)
        died = time.monotonic()
        assert a.returncode == -signal.SIGKILL, err
        # while A lived, only A acted: B stood by (it cannot lead before A's lease expires)
        assert b.runtime is None and b.journal.total == 0 and not became
        assert len(evictions(server)) == 2
        assert sum(json.loads(ln)["msg"].startswith("evict Pod ") for ln in out.splitlines()) == 2
        thread.join(timeout=30)
        assert not thread.is_alive()
        kube.close()
    finally:
        if a.poll() is None:
            a.kill()
    assert became and became[0] - died < 2.0 + 0.2 + 0.8  # lease duration + retry period (+ slack)
    evicted = evictions(server)
    assert len(evicted) >= 6 and set(evicted.values()) == {1}  # resumed, finished, nothing repeated
    b_evicts = [e for e in b.journal.entries() if e.message.startswith("evict Pod")]
    assert len(b_evicts) == len(evicted) - 2
    sources = {
        m.group(1)
        for e in b.journal.entries()
        for m in [re.match(r"label Node (\S+) tensor-fusion.ai/defrag-source=true", e.message)]
        if m
    }
    assert not [p for p in server.objects("Pod") if p["spec"].get("nodeName") in sources]
    lease = server.get("Lease", "tftui", "tf-sys")
    assert lease is not None and not lease["spec"].get("holderIdentity")  # B released it on stop
    assert lease["spec"]["leaseTransitions"] == 1


def test_killed_between_an_eviction_and_its_marker_the_restart_waits_and_never_evicts_twice(
    server: KubeApiServer, kubeconfig: Path
) -> None:
    """Evicted pods stay terminating for a while (eviction grace). A is SIGKILLed right after its
    first eviction call returns, before the pod's `defrag-evicted` marker is written. The restarted
    daemon finds the evicted pod terminating and unmarked on the source node: it waits until the pod
    is gone before evicting the next one, and never evicts any pod twice."""
    server.eviction_grace = 600.0  # A's evicted pod stays terminating until the test reaps it
    a = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.daemon_support",
            str(kubeconfig),
            "a",
            "2026-12-01T07:59:50Z",
            "2026-12-01T08:10:00Z",
            "--kill-after-evictions",
            "1",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = a.communicate(timeout=30)
    assert a.returncode == -signal.SIGKILL, err
    (first,) = evictions(server)
    ns, name = first.split("/")
    left = server.get("Pod", name, ns)
    assert left is not None and left["metadata"].get("deletionTimestamp")  # terminating ...
    assert keys.DEFRAG_EVICTED not in (left["metadata"].get("labels") or {})  # ... and unmarked

    b, kube = make_daemon(kubeconfig, "b", start=A_KILLED, stop_at=WINDOW_END, elect=False)
    seen: list[tuple[str, bool]] = []  # B's defrag lines and evictions, with "first pod still there"

    def on_entry(entry: JournalEntry) -> None:
        if entry.kind == "defrag" or entry.message.startswith("evict Pod"):
            seen.append((entry.message, server.get("Pod", name, ns) is not None))
            if entry.message.startswith("paused: "):
                # B waits on the terminating pod; its grace ends now, not after real seconds that
                # B's virtual clock (speed ∞) would turn into a stale source marker
                server.reap_pod(ns, name)
                server.eviction_grace = 0.0  # B's own evictions: pods go at once (no real-time race)

    b.journal.subscribe(on_entry)
    try:
        assert b.run() == 0
    finally:
        kube.close()
    b_evicts = [i for i, (m, _) in enumerate(seen) if m.startswith("evict Pod")]
    assert b_evicts, seen
    waited = seen[: b_evicts[0]]
    assert waited and waited[0][0].startswith("paused: ") and waited[0][1]  # saw it terminating: waited
    assert not seen[b_evicts[0]][1]  # the next eviction only once the first pod was gone
    evicted = evictions(server)
    assert len(evicted) >= 6 and set(evicted.values()) == {1}  # resumed, finished, nothing repeated
    assert f"evict Pod {first}" not in [m for m, _ in seen]


def ended(daemon: Daemon, thread: threading.Thread, *used: Any) -> None:
    """Stop a daemon run by `run_in_thread`, wait for it, and close what it used."""
    daemon.stop()
    thread.join(timeout=10)
    for resource in used:
        resource.close()


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


def test_follower_never_acts(server: KubeApiServer, kubeconfig: Path) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "tftui", "namespace": "tf-sys"},
        "spec": {
            "holderIdentity": "someone-else",
            "leaseDurationSeconds": 3600,
            "renewTime": "2026-12-01T00:00:00.000000Z",
        },
    }
    server.seed([lease])
    daemon, kube = make_daemon(kubeconfig, "b", stop_at=None)
    thread = run_in_thread(daemon)
    try:
        time.sleep(1.0)
        assert daemon.runtime is None and not daemon.is_leader()
        assert [k for k in writes(server) if "leases" not in k] == []
        assert daemon.journal.entries() == []
        assert kube.lease() is not None and kube.lease()["spec"]["holderIdentity"] == "someone-else"  # type: ignore[index]
    finally:
        ended(daemon, thread, kube)
    assert (server.get("Lease", "tftui", "tf-sys") or {})["spec"]["holderIdentity"] == "someone-else"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tftui", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "POD_NAME": "pod-7", "POD_NAMESPACE": "tf-sys"},
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
