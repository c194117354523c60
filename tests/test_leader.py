"""Lease leader election (`tftui.runtime.leader`) against the in-process API server, real client."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.kubeapi import Fault, KubeApiServer, write_kubeconfig
from tests.waiting import eventually as _eventually
from tftui.runtime.leader import LeaderConfig, LeaderElector

FAST = {
    "lease_duration": timedelta(seconds=2),
    "renew_deadline": timedelta(seconds=1.5),
    "retry_period": timedelta(seconds=0.2),
}


@pytest.fixture
def server() -> Iterator[KubeApiServer]:
    srv = KubeApiServer(bookmark_interval=0.2).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def api(server: KubeApiServer, tmp_path: Path) -> Iterator[client.ApiClient]:
    cfg = client.Configuration()
    config.load_kube_config(
        config_file=str(write_kubeconfig(tmp_path / "kubeconfig", server.url)), client_configuration=cfg
    )
    api = client.ApiClient(cfg)
    try:
        yield api
    finally:
        api.close()


def eventually(check: Callable[[], bool], timeout: float = 5.0) -> float:
    """`tests.waiting.eventually` with this module's shorter default."""
    return _eventually(check, timeout)


def elector(api: client.ApiClient, identity: str, **kw: object) -> LeaderElector:
    return LeaderElector(api, LeaderConfig(name="tftui", namespace="tf-sys", identity=identity, **FAST), **kw)  # type: ignore[arg-type]


def holder(server: KubeApiServer) -> str:
    lease = server.get("Lease", "tftui", "tf-sys")
    assert lease is not None
    return str(lease["spec"].get("holderIdentity") or "")


def test_durations_are_validated() -> None:
    with pytest.raises(ValueError, match="--lease-duration > --renew-deadline > --retry-period"):
        LeaderConfig(lease_duration=timedelta(seconds=5), renew_deadline=timedelta(seconds=10))
    with pytest.raises(ValueError, match="--identity"):
        LeaderConfig(identity="")


def test_first_candidate_creates_the_lease(server: KubeApiServer, api: client.ApiClient) -> None:
    a = elector(api, "a")
    assert a.try_acquire_or_renew() is True
    assert a.is_leader()
    lease = server.get("Lease", "tftui", "tf-sys")
    assert lease is not None
    spec = lease["spec"]
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 2
    assert spec["leaseTransitions"] == 0
    first = spec["renewTime"]
    time.sleep(0.01)
    assert a.try_acquire_or_renew() is True  # renew: same holder, newer renewTime, same transitions
    spec = server.get("Lease", "tftui", "tf-sys")["spec"]  # type: ignore[index]
    assert spec["renewTime"] > first and spec["acquireTime"] <= first and spec["leaseTransitions"] == 0


def test_concurrent_candidates_exactly_one_wins(server: KubeApiServer, api: client.ApiClient) -> None:
    electors = [elector(api, f"r{i}") for i in range(4)]
    barrier = threading.Barrier(len(electors))
    won: list[bool] = [False] * len(electors)

    def go(i: int) -> None:
        barrier.wait()
        won[i] = electors[i].try_acquire_or_renew()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(electors))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(won) == 1
    assert holder(server) == f"r{won.index(True)}"
    # every later round keeps it that way: followers see a live holder
    for e in electors:
        e.try_acquire_or_renew()
    assert [e.is_leader() for e in electors] == won


def test_update_conflict_keeps_a_follower(server: KubeApiServer, api: client.ApiClient) -> None:
    a, b = elector(api, "a"), elector(api, "b")
    assert a.try_acquire_or_renew()
    a.release()  # free: both may take it; b's write conflicts with a's
    server.inject(Fault(409, method="PUT", path="/leases/tftui"))
    assert b.try_acquire_or_renew() is False  # 409: stays a follower this round
    assert b.try_acquire_or_renew() is True
    assert holder(server) == "b"


def test_a_hung_leader_stops_and_the_other_takes_over(server: KubeApiServer, api: client.ApiClient) -> None:
    a, b = elector(api, "a"), elector(api, "b")
    a.start()
    eventually(a.is_leader)
    b.start()
    time.sleep(0.5)
    assert a.is_leader() and not b.is_leader()
    paused_at = time.monotonic()
    a.paused = True  # no more renewals (a hung process, a partition)
    lost = eventually(lambda: not a.is_leader(), 3)
    taken = eventually(b.is_leader, 4) + lost
    assert lost <= 1.5 + 0.3  # the renew deadline since its last renew
    assert taken <= 2.0 + 0.2 + 0.5  # lease duration + one retry period (+ scheduling slack)
    assert not a.is_leader()  # never both: a stopped before b could start
    assert holder(server) == "b"
    assert server.get("Lease", "tftui", "tf-sys")["spec"]["leaseTransitions"] == 1  # type: ignore[index]
    assert time.monotonic() - paused_at < 5
    a.stop(release=False)
    b.stop()


def test_seeing_another_holder_stops_at_once(server: KubeApiServer, api: client.ApiClient) -> None:
    a = elector(api, "a")
    assert a.try_acquire_or_renew()
    lease = server.get("Lease", "tftui", "tf-sys")
    assert lease is not None
    lease["spec"]["holderIdentity"] = "intruder"
    server.seed([lease])  # e.g. an operator handed the lease over by hand
    assert a.try_acquire_or_renew() is False
    assert not a.is_leader()


def test_release_clears_the_holder_and_the_follower_takes_over_quickly(
    server: KubeApiServer, api: client.ApiClient
) -> None:
    changes: list[bool] = []
    a = elector(api, "a", on_change=changes.append)
    b = elector(api, "b")
    a.start()
    eventually(a.is_leader)
    b.start()
    time.sleep(0.3)
    a.stop(release=True)
    assert changes == [True, False]
    spec = server.get("Lease", "tftui", "tf-sys")["spec"]  # type: ignore[index]
    assert spec.get("holderIdentity") in (None, "", "b")
    took = eventually(b.is_leader, 2)
    assert took < 1.0  # one retry period, not a whole lease duration
    b.stop()
    assert holder(server) == ""
