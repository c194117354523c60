"""Daemons sharing the Lease: the leader SIGKILLed mid-campaign (a child process, tests/daemon_support.py)
and the standby finishing it, a restart after a kill between an eviction and its marker, a follower
that never acts."""

from __future__ import annotations

import json
import re
import signal
import time
from datetime import datetime
from pathlib import Path

from tests.daemon_support import (
    AFTER_CAMPAIGN,
    ended,
    evictions,
    killed_leader,
    make_daemon,
    run_in_thread,
    writes,
)
from tests.kubeapi import KubeApiServer
from tests.waiting import eventually
from tftui.model import keys
from tftui.runtime.journal import JournalEntry

WINDOW_END = datetime.fromisoformat("2026-12-01T10:00:00+00:00")
A_KILLED = datetime.fromisoformat("2026-12-01T08:00:00+00:00")  # a daemon started 07:59:50 evicts first then


def test_two_daemons_one_acts_the_leader_is_killed_the_other_resumes_the_campaign(
    server: KubeApiServer, kubeconfig: Path
) -> None:
    """A (a process) leads and is SIGKILLed right after its 2nd eviction; B, standing by, takes over
    within the lease duration and finishes the campaign; no eviction is repeated."""
    a = killed_leader(kubeconfig, 2)
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
    a = killed_leader(kubeconfig, 1)
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
