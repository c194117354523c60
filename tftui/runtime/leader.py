"""Leader election on a coordination.k8s.io/v1 Lease, so only one daemon replica acts.

The protocol is client-go's `leaderelection` (re-implemented here over the official Python client,
which has none):

- A candidate reads the Lease every `retry_period`. It takes it when there is none (create; a 409
  means another candidate won the race), when the holder is empty (released), or when the record has
  not changed for `lease_duration` as observed on *this* replica's monotonic clock (no wall-clock
  comparison between machines). Taking and renewing are PUTs carrying the resourceVersion read, so
  of two candidates racing for the same record one gets 409 Conflict and stays a follower.
- The holder renews every `retry_period`. It counts as leader only while its last successful renew
  *started* less than `renew_deadline` ago, and stops at once when a read shows another holder. As
  `renew_deadline < lease_duration`, a leader that cannot renew stops acting before any other replica
  may take the lease over.
- `is_leader()` is the fence: the actuator calls it right before every action, and the cluster
  adapter before every attempt of a call (retries included), cutting each attempt's timeout to
  `term_left()`, so a replica that lost the lease sends nothing more.
- The identity defaults to the pod name (or hostname) plus a random suffix (`default_identity`):
  unique per process, so two daemons on one host, or a restarted container next to a hung one,
  never both count as the holder.
- `release()` (on shutdown) clears the holder as client-go's `ReleaseOnCancel` does (empty holder,
  1 s duration), so a follower takes over at its next retry instead of after a full lease duration.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error

from tftui.sources.kubebase import error_line as _one_line

__all__ = ["LeaderConfig", "LeaderElector", "default_identity"]

log = logging.getLogger("tftui.leader")
JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class LeaderConfig:
    """Where the Lease lives, who we are, and client-go's three durations (defaults 15 s / 10 s / 2 s)."""

    name: str = "tftui"
    namespace: str = "default"
    identity: str = "tftui"
    lease_duration: timedelta = timedelta(seconds=15)
    renew_deadline: timedelta = timedelta(seconds=10)
    retry_period: timedelta = timedelta(seconds=2)

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("--identity: must not be empty")
        if self.retry_period <= timedelta(0):
            raise ValueError("--retry-period: must be positive")
        if not self.lease_duration > self.renew_deadline > self.retry_period:
            raise ValueError(
                "lease durations: need --lease-duration > --renew-deadline > --retry-period "
                f"(got {self.lease_duration.total_seconds():g}s, {self.renew_deadline.total_seconds():g}s, "
                f"{self.retry_period.total_seconds():g}s)"
            )


def default_identity(env: Mapping[str, str] | None = None) -> str:
    """`POD_NAME` (else the hostname) plus `_` and 8 random hex digits: unique per process."""
    env = os.environ if env is None else env
    base = env.get("POD_NAME") or socket.gethostname() or "tftui"
    return f"{base}_{secrets.token_hex(4)}"


def _micro(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for the Lease in a background thread; `is_leader()` says whether we may act now.

    `monotonic` and `wall` are injectable for tests; `on_change(leader)` is called on every transition
    (from the election thread).
    """

    def __init__(
        self,
        api: client.ApiClient,
        config: LeaderConfig,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_change: Callable[[bool], None] | None = None,
        request_timeout: float = 5.0,
    ) -> None:
        self.api = client.CoordinationV1Api(api)
        self.config = config
        self._mono = monotonic
        self._wall = wall
        self._on_change = on_change
        self._timeout = request_timeout
        self._lock = threading.Lock()
        self._valid_until: float | None = None  # monotonic: end of our current term, if we hold it
        self._observed: tuple[str, str, str] | None = None  # (holder, renewTime, transitions) last seen
        self._observed_at = 0.0  # monotonic time the observed record last changed
        self._holder = ""  # holder as last read
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._leader = False
        self.transitions = 0  # times this replica became leader
        self.paused = False  # tests: stop renewing (as a hung leader would) without stopping the thread

    # -- state ------------------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        """True while our last successful renew started less than `renew_deadline` ago."""
        with self._lock:
            ok = self._valid_until is not None and self._mono() < self._valid_until
        if not ok and self._leader:
            self._set_leader(False)
        return ok

    def term_left(self) -> float:
        """Seconds this replica may still act: until its last successful renew is `renew_deadline`
        old (0 when it is not the leader). Writes cut their timeouts to it (`KubeCluster.fence`)."""
        with self._lock:
            left = 0.0 if self._valid_until is None else max(0.0, self._valid_until - self._mono())
        if left <= 0:
            self.is_leader()  # report the transition
        return left

    @property
    def holder(self) -> str:
        """The holder identity as last read ("" when none)."""
        with self._lock:
            return self._holder

    def _set_leader(self, leader: bool) -> None:
        if leader == self._leader:
            return
        self._leader = leader
        if leader:
            self.transitions += 1
        log.info("%s %s the lease %s/%s", self.config.identity, "acquired" if leader else "lost",
                 self.config.namespace, self.config.name)  # fmt: skip
        if self._on_change is not None:
            self._on_change(leader)

    # -- the loop ---------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self, release: bool = True) -> None:
        """End the campaign; with `release`, clear the holder if we hold the lease."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._timeout + 1)
        was = self.is_leader()
        with self._lock:
            self._valid_until = None
        self._set_leader(False)
        if release and was:
            self.release()

    def _run(self) -> None:
        period = self.config.retry_period.total_seconds()
        while not self._stop.is_set():
            if not self.paused:
                self.try_acquire_or_renew()
            self.is_leader()  # report a lapsed term even when no request answers
            self._stop.wait(period)

    def try_acquire_or_renew(self) -> bool:
        """One round of the protocol (see the module docstring); True when we hold the lease after it."""
        started = self._mono()
        try:
            ok = self._round(started)
        except (ApiException, Urllib3Error, OSError, ValueError) as exc:
            log.warning("lease %s/%s: %s", self.config.namespace, self.config.name, _one_line(exc))
            ok = False
        if ok:
            with self._lock:
                self._valid_until = started + self.config.renew_deadline.total_seconds()
            self._set_leader(True)
        return self.is_leader()

    def _round(self, started: float) -> bool:
        cfg = self.config
        now = self._wall()
        try:
            lease = self._read()
        except ApiException as exc:
            if exc.status != 404:
                raise
            return self._create(now)
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""), str(spec.get("leaseTransitions") or 0))
        with self._lock:
            self._holder = holder
            if record != self._observed:
                self._observed, self._observed_at = record, started
            expired = started >= self._observed_at + float(
                spec.get("leaseDurationSeconds") or cfg.lease_duration.total_seconds()
            )
            if holder and holder != cfg.identity:
                self._valid_until = None  # another holder: stop acting at once
        if holder and holder != cfg.identity and not expired:
            self._set_leader(False)
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        mine = holder == cfg.identity
        new_spec: JSON = {
            "holderIdentity": cfg.identity,
            "leaseDurationSeconds": max(1, round(cfg.lease_duration.total_seconds())),
            "acquireTime": spec.get("acquireTime") if mine else _micro(now),
            "renewTime": _micro(now),
            "leaseTransitions": transitions if mine else transitions + 1,
        }
        body = {**lease, "spec": new_spec}
        try:
            updated = self._replace(body)
        except ApiException as exc:
            if exc.status == 409:  # someone else wrote first: read again next round
                return False
            raise
        with self._lock:
            upd = updated.get("spec") or {}
            self._observed = (
                cfg.identity,
                str(upd.get("renewTime") or ""),
                str(upd.get("leaseTransitions") or 0),
            )
            self._observed_at = started
            self._holder = cfg.identity
        return True

    def _create(self, now: datetime) -> bool:
        cfg = self.config
        body: Any = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": cfg.name, "namespace": cfg.namespace},
            "spec": {
                "holderIdentity": cfg.identity,
                "leaseDurationSeconds": max(1, round(cfg.lease_duration.total_seconds())),
                "acquireTime": _micro(now),
                "renewTime": _micro(now),
                "leaseTransitions": 0,
            },
        }
        try:
            resp: Any = self.api.create_namespaced_lease(
                cfg.namespace, body, _preload_content=False, _request_timeout=self._timeout
            )
            resp.read()
            resp.release_conn()
        except ApiException as exc:
            if exc.status == 409:  # another candidate created it first
                return False
            raise
        with self._lock:
            self._holder = cfg.identity
        return True

    def _read(self) -> JSON:
        resp: Any = self.api.read_namespaced_lease(
            self.config.name, self.config.namespace, _preload_content=False, _request_timeout=self._timeout
        )
        try:
            doc: JSON = json.loads(resp.data)
        finally:
            resp.release_conn()
        return doc

    def _replace(self, body: Any) -> JSON:
        resp: Any = self.api.replace_namespaced_lease(
            self.config.name,
            self.config.namespace,
            body,
            _preload_content=False,
            _request_timeout=self._timeout,
        )
        try:
            doc: JSON = json.loads(resp.data)
        finally:
            resp.release_conn()
        return doc

    def release(self) -> bool:
        """Give the lease up if we still hold it (empty holder, 1 s duration); True when released."""
        try:
            lease = self._read()
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.config.identity:
                return False
            now = _micro(self._wall())
            body = {
                **lease,
                "spec": {
                    "leaseDurationSeconds": 1,
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": int(spec.get("leaseTransitions") or 0),
                },
            }
            self._replace(body)
        except (ApiException, Urllib3Error, OSError, ValueError) as exc:
            log.warning("releasing lease %s/%s: %s", self.config.namespace, self.config.name, _one_line(exc))
            return False
        with self._lock:
            self._holder = ""
        return True
