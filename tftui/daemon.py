"""`tftui --daemon`: the console's runtime loops, unattended, without Textual (docs/architecture.md).

One process runs: the cluster cache (or the embedded demo), leader election on a Lease (only the
leader builds a `Runtime` and acts; the actuator asks the elector right before every action and the
cluster adapter before every attempt of an API call, retries included), the
ops HTTP server (`/healthz`, `/readyz`, `/metrics`) and JSON logs on stdout — one line per journal
entry (every decision, action, event and error, with its reason) and per daemon event (leadership,
start, stop).

Time: by default the wall clock, sleeping until the runtime's next due reconcile (at most `poll`
seconds, so leadership changes and shutdown are noticed quickly). With `advance` (the demo cluster's
clock, or a test's virtual clock) the daemon moves simulated time itself, `speed` simulated seconds
per wall second (`math.inf`: jump straight to the next due time), ticking at every due time on the
way — the `Runtime.run_for` schedule, with the metrics accounted per tick.

Before each tick on a live cluster the cache is `settle()`d: the previous tick's writes are visible
before the next decision, so nothing is decided twice from a stale cache. A cache that does not show
them within `settle_timeout` skips the tick (counted as a loop error, logged); the next iteration
tries again.

Shutdown (SIGTERM/SIGINT, or `stop()`): the tick in progress finishes the pool step or workload
patch it is applying (an eviction never without its markers) and leaves the rest, journaled as not
applied, to the next leader; the loops stop, the lease is released (its holder cleared), the ops
server closes, and `run()` returns 0.
"""

from __future__ import annotations

import json
import logging
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import IO, Any

from tftui.engine.plan import EvictPod, PatchWorkloadStatus, Plan, rfc3339
from tftui.model.plaintext import json_visible
from tftui.model.redact import scrub
from tftui.runtime.actuator import ActionResult
from tftui.runtime.journal import Journal, JournalEntry
from tftui.runtime.leader import LeaderElector
from tftui.runtime.loops import Runtime
from tftui.runtime.ops import DaemonMetrics, OpsServer
from tftui.sources.ports import MetricsPort, SourceError, WritableClusterPort

__all__ = ["Daemon", "DaemonOptions", "JsonFormatter", "setup_logging"]

log = logging.getLogger("tftui.daemon")
jlog = logging.getLogger("tftui.journal")
METRICS_PROBE_EVERY = 10.0  # wall seconds between metrics-store probes when autoscale does not run
FAILED_TICK_STEP = timedelta(seconds=10)  # simulated time moved after a failed tick (as run_for's step)
SIGNAL_POLL = 0.2  # wall seconds between checks for a signal while the loop waits (`Daemon._wait`)
SYNC_LOG_EVERY = 10.0  # wall seconds between two progress lines of the first sync (`Daemon.first_sync`)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, msg, plus the record's `fields` extra. Every
    text passes `model.redact.scrub`: no log line carries a password or token."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": scrub(record.getMessage()),
        }
        for key, value in (getattr(record, "fields", {}) or {}).items():
            doc[key] = scrub(value) if isinstance(value, str) else value
        if record.exc_info:
            doc["exc"] = scrub(self.formatException(record.exc_info))
        return json_visible(json.dumps(doc, ensure_ascii=False))  # object text: no raw control


def setup_logging(level: str = "info", stream: IO[str] | None = None) -> None:
    """JSON lines on stdout for every `tftui.*` logger at `level`."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"--log-level: one of debug, info, warning, error; got {level!r}")
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("tftui")
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    root.propagate = False


class _StoppedListing(Exception):
    """A stop asked for during the first list (`Daemon.first_sync`)."""


@dataclass(slots=True)
class DaemonOptions:
    dry_run: bool = False
    pools: frozenset[str] | None = None  # None: every pool
    listen: str | None = "0.0.0.0:8080"  # None: no ops server
    metrics_optional: bool = False
    external_scaler: bool = False  # call workloads' external scalers (--external-scaler; never in dry-run)
    poll: float = 1.0  # wall seconds between loop iterations at most
    wedged_after: float = 120.0  # /healthz fails when the loop has not come round for this long
    settle_timeout: float = 5.0
    speed: float | None = None  # simulated seconds per wall second (needs `advance`); None: wall clock
    stop_at: datetime | None = None  # internal (tests): return once the clock reaches this
    identity: str = ""  # this replica's name for the logs (the elector's when there is one)
    extra: dict[str, Any] = field(default_factory=dict)


class Daemon:
    """Runs the runtime loops under leader election with ops endpoints; see the module docstring."""

    def __init__(
        self,
        cluster: WritableClusterPort,
        metrics: MetricsPort | None = None,
        options: DaemonOptions | None = None,
        *,
        elector: LeaderElector | None = None,
        clock: Callable[[], datetime] | None = None,
        advance: Callable[[timedelta], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.metrics_port = metrics
        self.options = options or DaemonOptions()
        if self.options.speed is not None and advance is None:
            raise ValueError("speed needs a clock the daemon can advance (the demo cluster)")
        self.elector = elector
        if elector is not None and hasattr(cluster, "fence"):
            cluster.fence = elector  # every write attempt asks it (sources.kube), retries included
        self.clock = clock or (lambda: datetime.now(UTC))
        self.advance = advance
        self.journal = Journal()
        self.metrics = DaemonMetrics()
        self.metrics.dry_run.set(1 if self.options.dry_run else 0)
        self.metrics.known_labels()  # every counter series at 0 from the first scrape
        self.runtime: Runtime | None = None
        self.ops: OpsServer | None = None
        self._stop = threading.Event()
        self._signal_stop = False  # set by a signal handler (see `_on_signal`)
        self._signalled: str | None = None  # a signal's name until the loop has said it stops
        self._heartbeat = time.monotonic()
        self._sync_logged = self._heartbeat  # when `first_sync` last logged its progress
        self._unsettled_since: float | None = None  # since when ticks are skipped (`_tick`)
        self._metrics_ok: tuple[bool, str] = (True, "")
        self._last_probe = -math.inf
        self._last_wall = time.monotonic()
        self._unsubscribe = self.journal.subscribe(self._on_entry)
        self.ticks = 0

    # -- lifecycle ------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to finish (what SIGTERM/SIGINT do); `run()` then cleans up and returns."""
        self._stop.set()

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, _frame: self._on_signal(signum))
        threading.Thread(target=self._interrupt_on_stop, name="tftui-stop", daemon=True).start()

    def _interrupt_on_stop(self) -> None:
        """Once a stop is asked for, cut the metrics store's queries in flight (`interrupt`): the
        call in flight may be one waiting on a slow store, which would hold the stop up to the
        query limit. Polls, as the handler sets plain attributes only (see `_on_signal`)."""
        while not self._stop_asked():
            time.sleep(SIGNAL_POLL)
        interrupt = getattr(self.metrics_port, "interrupt", None)
        if callable(interrupt):
            interrupt()

    def _on_signal(self, signum: int) -> None:
        """No I/O here: the handler runs between two bytecodes of the main thread, which may be in
        the middle of writing a log line (a reentrant write fails, and the line is lost). No lock
        either: that thread may hold the stop event's own lock (in its `wait`, between two of the
        event's bytecodes), and `Event.set` would then wait for itself forever: a daemon that never
        stopped on SIGTERM, now and then under load. Two plain stores; the loop sees them at its
        next check of the stop (`_stopping`, and `_wait` every `SIGNAL_POLL`), and says it there."""
        self._signalled = signal.Signals(signum).name
        self._signal_stop = True

    def _stop_asked(self) -> bool:
        return self._signal_stop or self._stop.is_set()

    def _stopping(self) -> bool:
        """Whether a stop was asked for (the runtime asks at each pool and workload); the first
        time after a signal, say so."""
        if not self._stop_asked():
            return False
        self._stop.set()  # here, outside the handler: whoever waits on the event wakes up
        if self._signalled is not None:
            log.info("received %s: finishing the call in flight, then stopping", self._signalled)
            self._signalled = None
        return True

    def serve(self) -> None:
        """Start the ops server (`/healthz`, `/readyz`, `/metrics`) unless it runs or `listen` is
        None. `first_sync` starts it before the cluster's first list, `run` otherwise."""
        if self.options.listen is not None and self.ops is None:
            self.ops = OpsServer(self.options.listen, self.metrics, self.health, self.ready)
            self.ops.start()

    def first_sync(self, wait: Callable[..., None], timeout: float) -> bool:
        """The cluster's first list (`wait`: `KubeCluster.wait_synced`), with the ops server up;
        False when a stop (SIGTERM, SIGINT: `install_signal_handlers` first) ended it.

        A 5,000-node cluster's first list takes tens of seconds, longer than the kubelet gives a
        liveness probe that finds no server (the chart's: 5 s, then three failures 10 s apart):
        with the server started after the list, such a daemon was restarted before it had listed,
        again and again. Meanwhile `/healthz` is ok (the list's progress counts as the loop's
        heartbeat; a list that stops answering ends the wait, and the process, after `timeout`),
        `/readyz` answers 503 until it is done, and a line is logged every `SYNC_LOG_EVERY` s. A
        stop is seen at the wait's next progress call (every half second): nothing was decided or
        written yet, so the run ends there with exit 0."""
        self.serve()
        start = self._sync_logged = time.monotonic()
        try:
            wait(timeout=timeout, progress=self._syncing)
        except _StoppedListing:
            self._stop_ops()
            self._stopping()  # says which signal
            log.info("daemon stopped before the cluster cache synced")
            return False
        except BaseException:
            self._stop_ops()
            raise
        fields = {
            "objects": getattr(self.cluster, "listed", None),
            "seconds": round(time.monotonic() - start, 1),
        }
        log.info("cluster cache synced", extra={"fields": fields})
        return True

    def _syncing(self, objects: int, synced: int, kinds: int) -> None:
        if self._stop_asked():
            raise _StoppedListing
        now = self._heartbeat = time.monotonic()
        if now - self._sync_logged >= SYNC_LOG_EVERY:
            self._sync_logged = now
            log.info(
                "listing the cluster", extra={"fields": {"objects": objects, "kinds": f"{synced}/{kinds}"}}
            )

    def _stop_ops(self) -> None:
        if self.ops is not None:
            self.ops.stop()
            self.ops = None

    def run(self) -> int:
        """The loop; returns 0 after a graceful stop."""
        opts = self.options
        self.serve()
        log.info(
            "daemon started",
            extra={
                "fields": {
                    "cluster": self.cluster.describe(),
                    "identity": self._identity(),
                    "dryRun": opts.dry_run,
                    "externalScaler": opts.external_scaler and not opts.dry_run,
                    "pools": sorted(opts.pools) if opts.pools is not None else "all",
                    "leaderElection": self.elector is not None,
                    "listen": f"{(opts.listen or '').rpartition(':')[0]}:{self.ops.port}"
                    if self.ops
                    else None,
                }
            },
        )
        if self.elector is not None:
            self.elector.start()
        try:
            while not self._stopping():
                self._heartbeat = time.monotonic()
                self._iteration()
                if opts.stop_at is not None and self.clock() >= opts.stop_at:
                    break
                self._wait()
        finally:
            self._shutdown()
        return 0

    def _shutdown(self) -> None:
        self._stopping()  # a signal during the last iteration is said before the loop ends
        self.runtime = None
        if self.elector is not None:
            self.elector.stop(release=True)
            self.metrics.leader.set(0)
        self._stop_ops()
        self._unsubscribe()
        log.info("daemon stopped", extra={"fields": {"ticks": self.ticks}})

    # -- probes -----------------------------------------------------------------------------------------

    def health(self) -> tuple[bool, str]:
        """Alive, and the loop came round within `wedged_after` seconds."""
        age = time.monotonic() - self._heartbeat
        if age > self.options.wedged_after:
            return False, f"loop wedged: no iteration for {age:.0f}s"
        return True, ""

    def ready(self) -> tuple[bool, str]:
        """Caches synced and showing this replica's writes (ticks not skipped for `wedged_after`),
        and the metrics store reachable (unless --metrics-optional)."""
        synced = getattr(self.cluster, "synced", None)
        if callable(synced) and not synced():
            return False, "cluster cache not synced yet"
        since = self._unsettled_since
        if since is not None and (behind := time.monotonic() - since) > self.options.wedged_after:
            # not /healthz: a restart would relist from an API server that may be what is slow
            return False, f"cluster cache behind: ticks skipped for {behind:.0f}s (own writes not seen)"
        ok, reason = self._metrics_ok
        if not ok and not self.options.metrics_optional:
            return False, reason
        return True, ""

    # -- one iteration ------------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def _iteration(self) -> None:
        synced = getattr(self.cluster, "synced", None)
        self.metrics.cache_synced.set(1 if not callable(synced) or synced() else 0)
        leader = self.is_leader()
        self.metrics.leader.set(1 if leader else 0)
        if leader and self.runtime is None:
            if callable(synced) and not synced():
                return  # never decide on a half-listed cluster
            self.runtime = self._new_runtime()
            log.info("acting: this replica leads", extra={"fields": {"identity": self._identity()}})
        elif not leader and self.runtime is not None:
            self.runtime = None
            log.warning("standing by: not the leader", extra={"fields": {"identity": self._identity()}})
        if self.runtime is not None:
            try:
                self._tick_due(self.runtime)
            except SourceError as exc:  # the cluster went away mid-tick: report, try again next round
                self.metrics.errors.labels("loop").inc()
                log.error("tick failed: %s", exc)
        self._probe_metrics()

    def _identity(self) -> str:
        return self.elector.config.identity if self.elector is not None else self.options.identity

    def _new_runtime(self) -> Runtime:
        rt = Runtime(
            self.cluster,
            clock=self.clock,
            dry_run=self.options.dry_run,
            journal=self.journal,
            metrics=self.metrics_port,
            external_scaler=self.options.external_scaler and not self.options.dry_run,
        )
        rt.pools = self.options.pools
        pools = self.options.pools
        if pools is None:
            try:
                pools = frozenset(
                    str((o.get("metadata") or {}).get("name") or "")
                    for o in self.cluster.snapshot()
                    if o.get("kind") == "GPUPool"
                )
            except SourceError:
                pools = frozenset()  # the next plan names them
        self.metrics.known_labels(sorted(p for p in pools if p))
        if self.elector is not None:
            rt.actuator.fence = self.elector.is_leader
        rt.stopping = self._stopping
        return rt

    def _tick_due(self, rt: Runtime) -> None:
        """Tick what is due; with simulated time, also move the clock (see the module docstring)."""
        if self.advance is None or self.options.speed is None:
            self._tick(rt)
            return
        wall = time.monotonic()
        elapsed, self._last_wall = wall - self._last_wall, wall
        now = self.clock()
        if math.isinf(self.options.speed):
            target = None  # jump to the next due time after this tick
        else:
            target = now + timedelta(seconds=elapsed * self.options.speed)
        while not self._stopping() and self.is_leader():
            self._heartbeat = time.monotonic()
            ok = self._tick(rt)
            nxt = rt.next_due()
            now = self.clock()
            if not ok:  # nothing may have been scheduled: move time on, never spin on the failure
                step = target - now if target is not None and target > now else FAILED_TICK_STEP
                if self.options.stop_at is not None:
                    step = min(step, max(timedelta(0), self.options.stop_at - now))
                if step > timedelta(0):
                    self.advance(step)
                return
            if self.options.stop_at is not None and now >= self.options.stop_at:
                return
            if target is None:
                if nxt is not None and nxt > now:
                    stop_at = self.options.stop_at
                    self.advance(min(nxt, stop_at) - now if stop_at is not None else nxt - now)
                return
            if nxt is None or nxt > target:
                if target > now:
                    self.advance(target - now)
                return
            if nxt > now:
                self.advance(nxt - now)

    def _tick(self, rt: Runtime) -> bool:
        """One tick; False when it failed outside the runtime's per-pool containment (logged, counted:
        the next iteration tries again). A SourceError (the cluster went away) is the caller's."""
        settle = getattr(self.cluster, "settle", None)
        if callable(settle) and not settle(self.options.settle_timeout):
            # no decision on a cache that does not show this replica's own writes yet (it would
            # decide them again): the next iteration tries again
            if self._unsettled_since is None:
                self._unsettled_since = time.monotonic()
            self.metrics.errors.labels("loop").inc()
            log.warning(
                "tick skipped: the cache did not show the last writes within %gs", self.options.settle_timeout
            )
            return False
        self._unsettled_since = None
        started = time.perf_counter()
        try:
            plan = rt.tick_due()
        except SourceError:
            raise
        except Exception as exc:  # e.g. a snapshot the engine cannot index: report, never crash-loop
            self.metrics.errors.labels("loop").inc()
            log.error("tick failed: %s: %s", type(exc).__name__, " ".join(str(exc).split())[:500])
            return False
        self.metrics.loop_duration.labels("tick").observe(time.perf_counter() - started)
        self.ticks += 1
        if plan is not None:
            self.metrics.known_labels(plan.pools)  # the pools' counters at 0 until they count
            self._account(plan, rt.last_results)
        if rt.metrics is not None:
            self.metrics.autoscale_paused.set(1 if rt.autoscale_paused else 0)
            if rt.autoscale_paused:
                self._metrics_ok = (False, f"autoscale paused: {rt.autoscale_paused}")
                self.metrics.metrics_store_up.set(0)
            elif rt.last_autoscale is not None:
                self._metrics_ok = (True, "")
                self.metrics.metrics_store_up.set(1)
        return True

    def _account(self, plan: Plan, results: Iterable[ActionResult]) -> None:
        failed_pools: set[str] = set()
        for r in results:
            self.metrics.actions.labels(type(r.action).__name__, r.status).inc()
            if r.status == "failed":
                failed_pools.add(r.pool)
            if r.status != "applied":
                continue
            if isinstance(r.action, EvictPod) and r.note != "already gone":
                self.metrics.pods_evicted.labels(r.pool).inc()
            elif isinstance(r.action, PatchWorkloadStatus):
                self.metrics.recommendation_changes.inc()
        if self.options.dry_run:
            return
        for name, pp in plan.pools.items():
            comp = pp.compaction
            if comp is not None and comp.due and comp.released and name not in failed_pools:
                self.metrics.nodes_released.labels(name).inc(len(comp.released))

    def _probe_metrics(self) -> None:
        """Readiness of the metrics store when the autoscale loop does not tell (a follower, or idle)."""
        port = self.metrics_port
        if port is None:
            self.metrics.metrics_store_up.set(0)
            return
        if self._stop_asked():
            return  # a read the stop would wait for, and nobody reads its answer
        if self.runtime is not None and (
            self.runtime.last_autoscale is not None or self.runtime.autoscale_paused
        ):
            return  # the autoscale loop reports it (see _tick); paused, its reason must not be overwritten
        wall = time.monotonic()
        if wall - self._last_probe < METRICS_PROBE_EVERY:
            return
        self._last_probe = wall
        now = self.clock()
        try:
            list(port.rows("tf_worker_usage", now - timedelta(seconds=1), now))
        except SourceError as exc:
            self._metrics_ok = (False, f"metrics store unreachable: {exc}")
            self.metrics.metrics_store_up.set(0)
            self.metrics.errors.labels("metrics").inc()
            return
        self._metrics_ok = (True, "")
        self.metrics.metrics_store_up.set(1)

    def _wait(self) -> None:
        """Sleep until the next due reconcile, at most `poll` wall seconds (simulated time: `poll`)."""
        delay = self.options.poll
        rt = self.runtime
        if rt is not None and self.advance is None:
            nxt = rt.next_due()
            if nxt is not None:
                delay = min(delay, max(0.0, (nxt - self.clock()).total_seconds()))
        elif rt is not None and self.options.speed is not None and math.isinf(self.options.speed):
            delay = 0.0
        deadline = time.monotonic() + delay
        while not self._stop_asked():  # in steps: a signal sets no event (see `_on_signal`)
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._stop.wait(min(left, SIGNAL_POLL))

    # -- journal → logs and counters ------------------------------------------------------------------------

    def _on_entry(self, entry: JournalEntry) -> None:
        if entry.kind in ("compaction", "defrag"):
            self.metrics.decisions.labels(entry.kind).inc()
        if not entry.ok:
            self.metrics.errors.labels("action" if entry.kind in ("action", "error") else entry.kind).inc()
        jlog.log(
            logging.INFO if entry.ok else logging.ERROR,
            entry.message,
            extra={
                "fields": {
                    "ts": rfc3339(entry.ts),
                    "pool": entry.pool,
                    "kind": entry.kind,
                    "ok": entry.ok,
                }
            },
        )
