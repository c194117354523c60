"""A defrag campaign under faults, judged from the API server's own record of what it accepted.

Three daemons share one Lease on the test API server, each with its own identity (its bearer
token): A (a separate process) leads first, B and C stand by. The server answers 503, 429, 409,
500 and 502 to some writes, loses the answer of an applied eviction (the client times out and
retries), cuts watches again and again and compacts its history (410 Gone, relists). A is SIGKILLed
after its second eviction; whoever takes over is later deposed while evictions answer 503 (its
renewals hang, as a stuck process's would); the third finishes the campaign. A test-side workload
controller gives every evicted pod a replacement placed by the scheduler's rules (evicted pods
terminate for a while first: eviction grace > 0), so a repeated eviction *could* happen.

From the server-side timeline (`KubeApiServer.timeline`: every change, who caused it, the Lease
holder after each Lease write) and the log of answered writes (`served`):

- no pod is disrupted twice, nor is any pod evicted by two replicas;
- no change was accepted from a replica while the Lease was held by another (or by nobody);
- every faulted path was exercised, every disruption was a graceful one and got a replacement.

Time runs at `SPEED` simulated seconds per wall second (the daemons' virtual clocks), the Lease and
the eviction grace in real seconds; the run takes well under a minute.
"""

from __future__ import annotations

import copy
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_support import make_daemon
from tests.kubeapi import Change, Fault, KubeApiServer, write_kubeconfig
from tests.waiting import eventually
from tftui.daemon import Daemon
from tftui.engine.fit import Request, RequestError
from tftui.engine.placement import place
from tftui.engine.plan import rfc3339
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.sources.kube import KubeCluster
from tftui.sources.sim.cluster import generate_objects

ROOT = Path(__file__).resolve().parent.parent
START = datetime.fromisoformat("2026-12-01T07:59:50+00:00")  # demo-dev's window opens at 08:00Z
SPEED = 60.0
GRACE = 0.6  # real seconds an evicted pod terminates before it is gone
TIMING = {  # 2 s between the end of a leader's term and the earliest takeover: a busy machine's margin
    "lease_duration": timedelta(seconds=4),
    "renew_deadline": timedelta(seconds=2),
    "retry_period": timedelta(seconds=0.25),
}
REQUEST_TIMEOUT = 1.0  # each daemon's per-request timeout; a lost answer holds the line longer
BACKOFF = (0.1, 0.5)  # retry backoff (base, cap) and attempts: a call's retries outlast a lease
RETRIES = 20
EVICTION = re.compile(r"^POST /api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction$")
_POD_MARKERS = (keys.GPU_IDS, keys.DEFRAG_EVICTED, keys.DEFRAG_EVICTED_POOL, keys.DEFRAG_EVICTED_SINCE)


class Shared:
    """The campaign's simulated time as the daemons see it: START when A took the Lease."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def now(self) -> datetime:
        return START + timedelta(seconds=(time.monotonic() - self.t0) * SPEED)


class Replacer(threading.Thread):
    """The workload controller, scheduler and kubelet: a terminating worker gets a replacement at
    once, bound where `engine.placement.place` puts it (never on a defrag source node), Running and
    Ready; once the evicted pod is gone, its PDB allows the disruption again."""

    def __init__(self, server: KubeApiServer, clock: Shared) -> None:
        super().__init__(daemon=True, name="replacer")
        self.server, self.clock = server, clock
        self.replaced: dict[str, str] = {}  # evicted pod uid → its replacement's "ns/name"
        self._pdb_pending: dict[tuple[str, str], str] = {}  # (ns, pod) evicted → uid
        self._halt = threading.Event()
        self._serial = 0
        self.errors: list[str] = []
        # Every pod seen, by uid, and how far the server's timeline was read: an evicted pod whose
        # grace ran out between two rounds (a slow round under load) is still found in the timeline
        # and replaced from its last copy, as a ReplicaSet controller acting on watch events would.
        self._seen: dict[str, dict[str, Any]] = {p["metadata"]["uid"]: p for p in server.objects("Pod")}
        self._cursor = 0

    def stop(self) -> None:
        self._halt.set()
        self.join(10)

    def run(self) -> None:
        while not self._halt.wait(0.05):
            try:
                self._round()
                time.sleep(1.0)
            except Exception as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def _round(self) -> None:
        timeline = self.server.changes()
        pods = self.server.objects("Pod")
        self._seen.update((p["metadata"]["uid"], p) for p in pods)
        evicted = {c.uid for c in timeline[self._cursor :] if c.kind == "Pod" and c.terminating} | {
            p["metadata"]["uid"] for p in pods if p["metadata"].get("deletionTimestamp")
        }
        self._cursor = len(timeline)
        todo = [
            self._seen[uid]
            for uid in sorted(evicted)
            if uid in self._seen
            and uid not in self.replaced
            and (self._seen[uid]["metadata"].get("labels") or {}).get(keys.WORKLOAD)
        ]
        if todo:
            state = ClusterState.build(self.server.objects())
            sources = [
                n for n, nv in state.nodes.items() if _label(nv.node_obj, keys.DEFRAG_SOURCE) == keys.TRUE
            ]
            for pod in todo:
                self._replace(state, pod, sources)
        live = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}
        for ns, name in list(self._pdb_pending):
            if (ns, name) not in live:  # gone: the disruption controller counts its replacement
                self._restore_pdbs(ns, name)
                del self._pdb_pending[(ns, name)]

    def _replace(self, state: ClusterState, pod: dict[str, Any], sources: list[str]) -> None:
        meta = pod["metadata"]
        ns, uid = meta["namespace"], meta["uid"]
        worker = state.workers.get(f"{ns}/{meta['name']}")
        self._serial += 1
        new = copy.deepcopy(pod)
        wl = (meta.get("labels") or {})[keys.WORKLOAD]
        name = f"{wl}-tf-worker-r{self._serial:03d}"
        new["metadata"] = {
            "name": name,
            "namespace": ns,
            "labels": {k: v for k, v in (meta.get("labels") or {}).items() if k not in _POD_MARKERS},
            "annotations": {
                k: v for k, v in (meta.get("annotations") or {}).items() if k not in _POD_MARKERS
            },
            "creationTimestamp": rfc3339(self.clock.now()),
            **{k: copy.deepcopy(meta[k]) for k in ("ownerReferences",) if meta.get(k)},
        }
        new["spec"].pop("nodeName", None)
        node: str | None = None
        gpus: tuple[str, ...] = ()
        if worker is not None and worker.pool:
            try:
                placement = place(state, worker.pool, Request.of_worker(worker), exclude_nodes=sources)
                node, gpus = placement.node, placement.gpus
            except RequestError:
                pass
        now = rfc3339(self.clock.now())
        if node is not None:
            new["spec"]["nodeName"] = node
            new["metadata"]["annotations"][keys.GPU_IDS] = ",".join(gpus)
            new["status"] = {
                "phase": "Running",
                "conditions": [
                    {"type": t, "status": "True", "lastTransitionTime": now}
                    for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                ],
                "startTime": now,
            }
        else:
            new["status"] = {"phase": "Pending"}
        self.server.store(new)
        self.replaced[uid] = f"{ns}/{name}"
        self._pdb_pending[(ns, meta["name"])] = uid

    def _restore_pdbs(self, ns: str, pod: str) -> None:
        for pdb in self.server.objects("PodDisruptionBudget"):
            st = pdb.get("status") or {}
            if pdb["metadata"].get("namespace") != ns or pod not in (st.get("disruptedPods") or {}):
                continue
            st = {**st, "disruptedPods": {k: v for k, v in st["disruptedPods"].items() if k != pod}}
            st["disruptionsAllowed"] = int(st.get("disruptionsAllowed") or 0) + 1
            self.server.store({**pdb, "status": st})


def _label(obj: dict[str, Any] | None, key: str) -> str | None:
    return ((obj or {}).get("metadata", {}).get("labels") or {}).get(key)


class Chaos(threading.Thread):
    """Cuts every watch every 1.2 s (the test expires the history twice besides: 410 Gone)."""

    def __init__(self, server: KubeApiServer) -> None:
        super().__init__(daemon=True, name="chaos")
        self.server = server
        self._halt = threading.Event()
        self.rounds = 0

    def stop(self) -> None:
        self._halt.set()
        self.join(10)

    def run(self) -> None:
        while not self._halt.wait(1.2):
            self.rounds += 1
            self.server.drop_watches()


def _disruptions(server: KubeApiServer) -> list[Change]:
    """Changes an eviction request made to a pod: each one a disruption (grace > 0: terminating)."""
    return [
        c
        for c in server.changes()
        if c.kind == "Pod" and EVICTION.match(c.request) and c.who and c.type != "ADDED"
    ]


def _holder(server: KubeApiServer) -> str:
    return str(((server.get("Lease", "tftui", "tf-sys") or {}).get("spec") or {}).get("holderIdentity") or "")


def _run(d: Daemon) -> threading.Thread:
    t = threading.Thread(target=d.run, daemon=True)
    t.start()
    return t


@pytest.fixture
def campaign_server() -> Iterator[KubeApiServer]:
    srv = KubeApiServer(bookmark_interval=0.2).start()
    srv.seed(generate_objects())
    srv.eviction_grace = GRACE
    try:
        yield srv
    finally:
        srv.stop()


def test_fault_campaign_server_side(campaign_server: KubeApiServer, tmp_path: Path) -> None:
    server = campaign_server
    cfg = {w: write_kubeconfig(tmp_path / f"kubeconfig-{w}", server.url, token=w) for w in "abc"}
    server.inject(
        Fault(status=503, method="POST", path="/eviction"),  # the first eviction: retried
        Fault(
            lose_answer=True, hold=REQUEST_TIMEOUT + 0.5, method="POST", path="/eviction"
        ),  # applied, no answer
        Fault(status=429, method="PATCH", path="/api/v1/nodes/"),  # a node marker: retried after Retry-After
        Fault(status=409, method="PATCH", path="/pods/"),  # a pod marker: re-read, retried
        Fault(status=500, method="POST", path="/events"),
        Fault(status=502, method="PATCH", path="/gpupools/"),
        Fault(drop=True, after=2, path="/pods"),  # a pod watch cut after two events
    )
    lease = ",".join(str(v.total_seconds()) for v in TIMING.values())
    a = subprocess.Popen(
        [sys.executable, "-m", "tests.daemon_support", str(cfg["a"]), "a", rfc3339(START),
         "2026-12-01T12:00:00Z", "--speed", str(SPEED), "--request-timeout", str(REQUEST_TIMEOUT),
         "--lease-timing", lease, "--backoff", ",".join(map(str, BACKOFF)), "--retries", str(RETRIES)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    clock = Shared()
    replacer, chaos = Replacer(server, clock), Chaos(server)
    standby: dict[str, tuple[Daemon, KubeCluster, threading.Thread]] = {}
    try:
        eventually(lambda: _holder(server) == "a", 60)
        clock.t0 = time.monotonic()  # A's clock starts at START about now
        replacer.start()
        chaos.start()
        for who in "bc":
            d, kube = make_daemon(cfg[who], who, start=clock.now(), stop_at=None, speed=SPEED,
                                  request_timeout=REQUEST_TIMEOUT, lease_timing=TIMING, backoff=BACKOFF,
                                  retries=RETRIES)  # fmt: skip
            assert d.advance is not None
            d.advance(clock.now() - d.clock())  # on the shared simulated time
            standby[who] = (d, kube, _run(d))
        server.expire_watches()  # every cache (A's, B's, C's) resumes into 410 Gone and relists

        def evicted_by(who: str) -> int:
            return len({c.uid for c in _disruptions(server) if c.who == who})

        try:
            eventually(lambda: evicted_by("a") >= 2, 60)
        except AssertionError:
            a.kill()
            out, err = a.communicate()
            raise AssertionError(
                f"A evicted {evicted_by('a')} pod(s):\n{out[-6000:]}\n{err[-3000:]}"
            ) from None
        a.send_signal(signal.SIGKILL)  # the leader dies mid-campaign: no release, no cleanup
        _, a_err = a.communicate(timeout=20)
        eventually(lambda: _holder(server) in ("b", "c"), 60)
        deposed = _holder(server)
        (last,) = [w for w in "bc" if w != deposed]
        eventually(lambda: evicted_by(deposed) >= 1, 60)
        # the API answers evictions 503; once the new leader is retrying one, it hangs (no more
        # renewals): its retries outlast its term, and the 503s stop when the other one took over
        server.inject(Fault(status=503, method="POST", path="/eviction", sticky=True))

        def retrying() -> bool:
            return any(
                s.who == deposed and s.code == 503 and s.path.endswith("/eviction") for s in server.served
            )

        eventually(retrying, 60)
        elector = standby[deposed][0].elector
        assert elector is not None
        elector.paused = True
        eventually(lambda: _holder(server) == last, 60)
        server.clear_faults()
        server.expire_watches()

        def quiet() -> bool:
            recent = [c for c in _disruptions(server) if time.monotonic() - c.at < 4.0]
            pods = server.objects("Pod")
            terminating = [p for p in pods if p["metadata"].get("deletionTimestamp")]
            return not recent and not terminating and len(_disruptions(server)) >= 6

        eventually(quiet, 120)
    finally:
        if a.poll() is None:
            a.kill()
        for d, kube, t in standby.values():
            d.stop()
            t.join(15)
            kube.close()
        chaos.stop()
        replacer.stop()

    # -- the setup did what it says -------------------------------------------------------------
    assert a.returncode == -signal.SIGKILL, a_err
    assert not replacer.errors, replacer.errors
    codes = {(s.who, s.method, s.code) for s in server.served}
    for who, method, code in [("a", "POST", 503), ("a", "POST", 0)]:
        assert (who, method, code) in codes, (who, method, code)  # the first faults hit A
    assert {503, 429, 409, 500, 502} <= {s.code for s in server.served}
    assert chaos.rounds >= 6
    assert all(kube.relists >= 1 for _, kube, _ in standby.values())  # 410 Gone: listed again
    disruptions = _disruptions(server)
    assert all(c.terminating and c.type == "MODIFIED" for c in disruptions)  # graceful: grace > 0
    assert {c.who for c in disruptions} == {"a", deposed, last}, disruptions  # all three evicted
    for c in disruptions:  # every evicted pod got a replacement of its workload
        assert c.uid in replacer.replaced, c

    # -- what the server accepted ------------------------------------------------------------------
    per_pod: dict[str, list[Change]] = {}
    for c in disruptions:
        per_pod.setdefault(c.uid, []).append(c)
    twice = {uid: cs for uid, cs in per_pod.items() if len(cs) > 1}
    assert not twice, twice  # no pod disrupted twice
    evictors: dict[str, set[str]] = {}
    for s in server.served:
        m = EVICTION.match(f"{s.method} {s.path}")
        if m and s.code in (0, 201):  # accepted (or applied with its answer lost)
            evictors.setdefault(m.group(2), set()).add(s.who)
    assert all(len(w) == 1 for w in evictors.values()), evictors  # no pod evicted by two replicas
    outside = server.writes_outside_lease("tf-sys", "tftui")
    assert outside == [], outside[:5]  # nothing accepted from a replica that did not hold the Lease
    holders = [c.holder for c in server.lease_holders("tf-sys", "tftui")]
    assert holders[0] == "a" and deposed in holders and last in holders
    # the deposed leader was retrying an eviction when its term ended: it abandoned it, and said so
    lines = [e.message for e in standby[deposed][0].journal.entries() if not e.ok]
    assert any(re.match(r"evict Pod \S+ abandoned: .* this replica lost the lease", m) for m in lines), lines
