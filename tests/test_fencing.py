"""A deposed leader writes nothing: the fence is asked before every attempt of every API call.

Reproduced against the test API server with its server-side timeline: A leads and evicts a pod,
the eviction answers 503 and A retries; A stops renewing (hung), B takes the Lease over, the 503s
stop. Before the fix A's next retry was applied by the server while B held the Lease. Now A
abandons the call as soon as its term has run out, and journals it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.daemon_support import LEASE, _free_port, http, metric
from tests.kubeapi import Fault, KubeApiServer, write_kubeconfig
from tests.waiting import eventually
from tftui.engine.plan import EvictPod, LabelNode, Plan
from tftui.engine.state import ClusterState
from tftui.runtime.actuator import ActionResult, Actuator
from tftui.runtime.journal import Journal
from tftui.runtime.leader import LeaderConfig, LeaderElector, default_identity
from tftui.sources.kube import KubeCluster
from tftui.sources.ports import NotLeader
from tftui.sources.sim.cluster import DEFAULT_NOW

ROOT = Path(__file__).resolve().parent.parent


def _holder(server: KubeApiServer) -> str:
    return str(((server.get("Lease", "tftui", "tf-sys") or {}).get("spec") or {}).get("holderIdentity") or "")


def test_a_deposed_leaders_retries_never_reach_the_server(server: KubeApiServer, tmp_path: Path) -> None:
    state = ClusterState.build(server.objects())
    worker = min((w for w in state.workers.values() if w.node and not w.terminating), key=lambda w: w.key)
    ns, name = worker.namespace, worker.name
    kube = {
        who: KubeCluster(
            kubeconfig=str(write_kubeconfig(tmp_path / f"kubeconfig-{who}", server.url, token=who)),
            start=False,
            retries=100_000,  # retries never run out: only the fence can stop them
            backoff=0.02,
            max_backoff=0.02,
        )
        for who in ("a", "b")
    }
    electors = {
        who: LeaderElector(
            kube[who].api, LeaderConfig(name="tftui", namespace="tf-sys", identity=who, **LEASE)
        )
        for who in ("a", "b")
    }
    a, b = electors["a"], electors["b"]
    try:
        assert a.try_acquire_or_renew() and _holder(server) == "a"  # A leads, and never renews again
        kube["a"].fence = a
        path = f"/api/v1/namespaces/{ns}/pods/{name}/eviction"
        server.inject(Fault(status=503, method="POST", path=path, sticky=True))  # until cleared
        journal = Journal()
        results: list[ActionResult] = []
        act = threading.Thread(
            target=lambda: results.extend(
                Actuator(kube["a"], journal, fence=a.is_leader).execute(
                    Plan(DEFAULT_NOW, actions=[EvictPod(ns, name)])
                )
            )
        )
        act.start()
        eventually(lambda: server.stats.requests.get(f"POST {path}", 0) >= 1)
        b.start()  # B campaigns and takes the Lease once A's record is a lease duration old
        eventually(lambda: _holder(server) == "b", 60)
        server.clear_faults()  # the API server recovers: A's next attempt would go through
        act.join(60)
        assert not act.is_alive()
    finally:
        b.stop(release=False)
        for k in kube.values():
            k.close()

    # server side: nothing of A's was accepted after B took the Lease (nor at all: only 503s)
    assert server.writes_outside_lease("tf-sys", "tftui") == []
    assert [c for c in server.changes() if c.who == "a" and c.kind != "Lease"] == []
    pod = server.get("Pod", name, ns)
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")
    # A abandoned the eviction as soon as its term was over, and said so
    (result,) = results
    assert result.status == "skipped" and result.note == "not the leader", result
    (line,) = [e for e in journal.entries() if not e.ok]
    assert re.fullmatch(
        rf"evict Pod {ns}/{name} abandoned: evict pod {ns}/{name}: abandoned after \d+ attempt\(s\) "
        r"\(503 injected fault\): this replica lost the lease \(an attempt in flight may still have "
        r"been applied\)",
        line.message,
    ), line.message
    answered = {s.code for s in server.served if s.who == "a" and s.path == path}
    assert answered == {503}  # every attempt A made was refused; it stopped before the API recovered


def test_a_replica_that_is_not_the_leader_sends_nothing(server: KubeApiServer, tmp_path: Path) -> None:
    """The fence is asked before the first attempt too (e.g. a write racing the loss of the lease)."""
    kube = KubeCluster(
        kubeconfig=str(write_kubeconfig(tmp_path / "kubeconfig", server.url, token="a")), start=False
    )
    try:
        a = LeaderElector(kube.api, LeaderConfig(name="tftui", namespace="tf-sys", identity="a", **LEASE))
        kube.fence = a  # never acquired
        journal = Journal()
        node = sorted(o["metadata"]["name"] for o in server.objects("Node"))[0]
        (result,) = Actuator(kube, journal).execute(Plan(DEFAULT_NOW, actions=[LabelNode(node, {"x": "y"})]))
    finally:
        kube.close()
    assert result.status == "skipped"
    assert [c for c in server.changes() if c.who == "a"] == []
    assert journal.entries()[0].message == (
        f"label Node {node} x=y abandoned: patch node/{node}: not sent: this replica is not the leader"
    )


def test_an_attempt_in_flight_when_the_term_ends_is_abandoned(server: KubeApiServer, tmp_path: Path) -> None:
    """The attempt's timeout is what is left of the term (not the 30 s request timeout): a call
    hanging past the end of the term is abandoned then, and the message says it may have landed."""
    kube = KubeCluster(
        kubeconfig=str(write_kubeconfig(tmp_path / "kubeconfig", server.url, token="a")),
        start=False,
        request_timeout=30.0,
        backoff=0.01,
        max_backoff=0.01,
    )
    node = sorted(o["metadata"]["name"] for o in server.objects("Node"))[0]
    server.inject(Fault(delay=4.0, method="PATCH", path=f"/nodes/{node}"))  # hangs past the term
    try:
        a = LeaderElector(kube.api, LeaderConfig(name="tftui", namespace="tf-sys", identity="a", **LEASE))
        assert a.try_acquire_or_renew()
        kube.fence = a
        with pytest.raises(NotLeader) as err:
            kube.apply(LabelNode(node, {"x": "y"}))
    finally:
        kube.close()
    assert re.fullmatch(
        rf"patch node/{node}: abandoned after 1 attempt\(s\) \(.*[Tt]imed? ?out.*\): this replica lost the "
        r"lease \(an attempt in flight may still have been applied\)",
        str(err.value),
    ), str(err.value)
    assert server.stats.requests[f"PATCH /api/v1/nodes/{node}"] == 1  # not retried after the term


def test_default_identity_is_unique_per_process() -> None:
    one, two = default_identity({}), default_identity({})
    assert one != two and one.rpartition("_")[0] == two.rpartition("_")[0]
    pod = default_identity({"POD_NAME": "tftui-7d9f-abcde"})
    assert re.fullmatch(r"tftui-7d9f-abcde_[0-9a-f]{8}", pod), pod


def _daemon(kubeconfig: Path, port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("POD_NAME", "POD_NAMESPACE")}
    return subprocess.Popen(
        [sys.executable, "-m", "tftui", "--daemon", "--kubeconfig", str(kubeconfig),
          "--lease-namespace", "tf-sys", "--listen", f"127.0.0.1:{port}",
         "--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "200ms"],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def test_two_daemons_on_one_host_never_both_lead(server: KubeApiServer, kubeconfig: Path) -> None:
    """Same host, no --identity, no POD_NAME: each process has its own identity, one leads."""
    ports = [_free_port(), _free_port()]
    procs = [_daemon(kubeconfig, p) for p in ports]

    def leaders() -> list[float]:
        out = []
        for p in ports:
            try:
                out.append(metric(http(f"http://127.0.0.1:{p}/metrics")[1], "tftui_leader"))
            except (OSError, AssertionError):
                out.append(-1.0)
        return out

    try:
        eventually(lambda: all(v >= 0 for v in leaders()) and sum(leaders()) >= 1, 90)  # busy machines
        samples = []
        for _ in range(10):
            time.sleep(0.2)
            samples.append(leaders())
        for p in procs:
            p.terminate()
        outs = [p.communicate(timeout=20)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(sum(s) == 1 for s in samples), samples  # exactly one leads at every sample
    idents = []
    for out in outs:
        docs = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
        idents += [d["identity"] for d in docs if d.get("msg") in ("acting: this replica leads",)]
    assert len(set(idents)) == len(idents) >= 1
    assert all(re.fullmatch(r".+_[0-9a-f]{8}", i) for i in idents), idents
