"""The runtime loop both front ends share: reconcile each pool the way the upstream controller does.

A *reconcile* of a pool is one compaction decision (a round when `nodeCompaction.period` elapsed, on
the first reconcile, or on a fresh manual trigger) plus one defrag step, planned by
`engine.planning.plan_cluster` from a fresh snapshot at the runtime's clock and carried out by the
`Actuator`. Pacing follows upstream (docs/behaviour.md R1): the next reconcile of a pool comes
after min(period, defrag requeue), the requeue being 10 s after an eviction, a refused eviction or a
blocked step, 60 s while idle inside a campaign window, else the period. `tick_due()` runs the pools
whose time came; `run_for()` drives the embedded cluster's clock through that schedule.

The journal gets one line per decision: every release and a summary of every due round; every kept
node the first time and whenever its reason changes (a 5-minute period would otherwise repeat twenty
identical lines); every defrag step whose outcome differs from the pool's previous one; plus the
actuator's line for each action and event.

D7 (events "when the state changes, not on every loop") is done here, as the engine leaves it to the
runtime: an event identical to one the pool emitted in its previous reconcile is dropped, e.g.
`DefragBlockedByEvictedPod` while an evicted pod terminates. In dry-run nothing changes between
reconciles, so repeated actions are dropped the same way instead of being journaled every 10 s.

`last_compaction` (upstream's in-memory `jobStarted`) and the pacing live in memory, as upstream's do:
a restarted runtime compacts at once. Everything else that must survive a restart is in the cluster.

**Autoscale** (A1–A12) runs when the runtime has a `metrics` port: one loop for all workloads
every `autoscale_interval` (default: the smallest valid `autoSetResources.interval` of the enabled
workloads, else upstream's 30 s). The first run loads `tf_worker_usage` over the longest
`historyDataPeriod` (at least 2 h); later runs load only the rows since the previous load, so the
histograms are rebuilt from the metrics store alone after a restart (nothing is kept in files).
`engine.autoscale.plan_autoscale` decides; the actuator patches the worker pods' annotations, the
workloads' `status` and emits the events, one workload at a time (a failure stops only that
workload's actions). A status patch identical to the one this runtime applied last is not repeated,
nor an event identical to the workload's previous run's (in dry-run: any repeated action).
The metrics store failing (`SourceError`) pauses autoscaling — `autoscale_paused` holds the reason,
the journal gets one line when it pauses and one when it resumes — while compaction and defrag go on;
the rows that could not be loaded are loaded by the next successful run.

**One bad object never stops the loop.** A pool is reconciled on its own: a pool holding an object
whose figures cannot be read (`ClusterState.blocked_pools`: an invalid or out-of-range quantity) is
not acted on, and anything a pool's reconcile raises ends that pool's reconcile only; either way the
journal gets a line naming the object and field (or the error) when it first happens or changes, the
GPUPool a Warning event, and the pool is retried after its period while the other pools go on. The
autoscaler does the same per workload (`invalid-config` with an `AutoscaleConfigInvalid` event), and
a failure of the autoscale run as a whole is journaled without touching compaction and defrag.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from tftui.engine.autoscale import (
    AutoscalePlan,
    AutoscaleState,
    ExternalAnswer,
    effective_config,
    external_requests,
    plan_autoscale,
)
from tftui.engine.compaction import compaction_period, plan_manual_compaction
from tftui.engine.incremental import update_state
from tftui.engine.plan import (
    Action,
    AnnotatePod,
    CompactionResult,
    DefragResult,
    Event,
    EvictPod,
    PatchWorkloadStatus,
    Plan,
)
from tftui.engine.planning import plan_cluster
from tftui.engine.prices import price_map
from tftui.engine.state import ClusterState
from tftui.model import redact
from tftui.model.snapshot import Snapshot
from tftui.runtime.actuator import ActionResult, Actuator
from tftui.runtime.history import MAX_AUTOSCALE_HISTORY as MAX_AUTOSCALE_HISTORY
from tftui.runtime.history import autoscale_window as autoscale_window
from tftui.runtime.history import load_usage, rebuild_after, settled
from tftui.runtime.journal import Journal, defrag_line
from tftui.sources import external_scaler
from tftui.sources.ports import MetricsPort, SourceError, WritableClusterPort

__all__ = [
    "DEFAULT_AUTOSCALE_INTERVAL",
    "DEFRAG_ACTIVE_REQUEUE",
    "DEFRAG_IDLE_REQUEUE",
    "MAX_AUTOSCALE_HISTORY",
    "Runtime",
    "SimulatedCluster",
    "autoscale_interval",
    "autoscale_window",
]

DEFRAG_ACTIVE_REQUEUE = timedelta(seconds=10)  # after an eviction, a refusal or a blocked step
DEFRAG_IDLE_REQUEUE = timedelta(seconds=60)  # idle inside a campaign window
DEFAULT_AUTOSCALE_INTERVAL = timedelta(seconds=30)  # upstream: global autoScalingInterval, else 30s
DEFAULT_RETRY = timedelta(minutes=5)  # a failed pool is retried after its period; this when that fails too
_AUTOSCALE = "autoscale/"  # prefix of a workload's key in the repeat filter (pool names have no '/')


@runtime_checkable
class SimulatedCluster(WritableClusterPort, Protocol):
    """A cluster whose time the runtime may move (the embedded demo)."""

    def now(self) -> datetime: ...

    def advance(self, dt: timedelta) -> None: ...


def _identity(action: Action) -> str:
    """What makes two actions the same decision. A status patch's condition times are left out: a
    dry run writes nothing, so the same condition is set anew, at the run's time, at every run."""
    doc = action.to_json()
    conditions = action.fields.get("conditions") if isinstance(action, PatchWorkloadStatus) else None
    if isinstance(conditions, list):
        timeless = [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions]
        doc["fields"] = {**doc["fields"], "conditions": timeless}
    return json.dumps(doc, sort_keys=True)


def autoscale_interval(state: ClusterState) -> timedelta:
    """The loop's interval: the smallest valid `interval` of the enabled workloads, else 30 s."""
    best: timedelta | None = None
    for wv in state.workloads.values():
        cfg = effective_config(state, wv)
        if cfg.enable and not cfg.errors and (best is None or cfg.interval < best):
            best = cfg.interval
    return best if best is not None else DEFAULT_AUTOSCALE_INTERVAL


class Runtime:
    """Reconciles pools on a cluster: plans, actuates (or only journals in dry-run), paces, explains."""

    def __init__(
        self,
        cluster: WritableClusterPort,
        *,
        clock: Callable[[], datetime],
        dry_run: bool = False,
        journal: Journal | None = None,
        embedded: bool | None = None,
        metrics: MetricsPort | None = None,
        autoscale_interval: timedelta | None = None,
        external_scaler: bool = False,
    ) -> None:
        """`embedded` (default: the cluster is a `SimulatedCluster`) makes the manual trigger run the round
        at once; on a live cluster it only writes the annotation and the controller runs it (C5).

        `metrics` turns the autoscale loop on; `autoscale_interval` overrides its interval.
        `external_scaler` lets the autoscale loop call workloads' external scalers (HTTP, with a
        Secret's token): off unless the daemon is started with `--external-scaler`, and never in
        dry-run — the console, `simulate`, the what-if and dumps reach no external system."""
        self.cluster = cluster
        self.clock = clock
        self.dry_run = dry_run
        self.journal = journal if journal is not None else Journal()
        self.actuator = Actuator(cluster, self.journal, dry_run=dry_run)
        self.embedded = isinstance(cluster, SimulatedCluster) if embedded is None else embedded
        self.pools: frozenset[str] | None = None  # reconcile only these (the daemon's --pools); None: all
        # the daemon's shutdown: a tick then ends at the next pool or workload (`_stop_here`)
        self.stopping: Callable[[], bool] = lambda: False
        self.last_compaction: dict[str, datetime] = {}
        self.next_reconcile: dict[str, datetime] = {}
        self.last_results: list[ActionResult] = []
        self._previous: dict[str, set[str]] = {}  # pool → identities of last reconcile's repeatables
        self._kept: dict[tuple[str, str], str] = {}  # (pool, node) → last journaled compaction outcome
        self._defrag_line: dict[str, str] = {}
        self.metrics = metrics
        self.autoscale_interval_override = autoscale_interval
        self.autoscale_state = AutoscaleState()
        self.autoscale_loaded_until: datetime | None = None  # rows before this are in the histograms
        self.next_autoscale: datetime | None = None
        self.autoscale_paused: str | None = None  # why autoscaling is paused (the metrics store failed)
        self.last_autoscale: AutoscalePlan | None = None
        # workload → the fields of the last status patch written (a patch equal to it is skipped)
        self._status_applied: dict[str, dict[str, Any]] = {}
        self.external_scaler = external_scaler and not dry_run
        self._pool_error: dict[str, str] = {}  # pool → why its last reconcile did not run (journaled once)
        self._autoscale_error: str | None = None
        self._last_state: ClusterState | None = None  # what `state()` derives the next one from

    # -- reconciles ---------------------------------------------------------------------------------

    def state(self) -> ClusterState:
        """The `ClusterState` of the cluster now, equal to a build from scratch but costing what
        changed: sources hand the very same dict for an object that did not change and never mutate
        one (`ClusterPort.snapshot`), so the last state is reused when every object is the same and
        otherwise updated from it (`engine.incremental`). A tick reads the state two or three times;
        at thousands of nodes a full build each time was most of the loop's CPU."""
        snap = Snapshot.of(self.cluster.snapshot())
        last = self._last_state
        if last is None:
            state = ClusterState.build(snap)
        elif snap.same_objects(last.snapshot):
            state = last
        else:
            state = update_state(last, snap)
        self._last_state = state
        return state

    def tick(self, pools: Iterable[str] | None = None) -> Plan:
        """Reconcile every pool (or `pools`) now; returns the plan as executed (repeated events dropped).

        Raises KeyError for a pool the cluster does not have.
        """
        return self._tick(self.state(), self.clock(), pools)

    def due_pools(self, state: ClusterState | None = None, now: datetime | None = None) -> list[str]:
        """Pools whose next reconcile time has come (never reconciled: at once)."""
        state = state if state is not None else self.state()
        now = now if now is not None else self.clock()
        return [
            p
            for p in sorted(state.pools)
            if (self.pools is None or p in self.pools) and self.next_reconcile.get(p, now) <= now
        ]

    def tick_due(self) -> Plan | None:
        """Reconcile the pools that are due and run autoscale if due (what a timer-driven front end
        calls); None if nothing was due."""
        state, now = self.state(), self.clock()
        due = self.due_pools(state, now)
        plan = self._tick(state, now, due) if due else None
        if self.autoscale_due(now):
            results = self.last_results
            if plan is not None:  # compaction/defrag may have changed the cluster
                state = self.state()
            auto = self._autoscale(state, now)
            self.last_results = results + self.last_results
            if plan is None:
                plan = auto
            else:
                plan.actions.extend(auto.actions)
        return plan

    def next_due(self) -> datetime | None:
        """The earliest scheduled reconcile or autoscale run (None before the first)."""
        times = list(self.next_reconcile.values())
        if self.metrics is not None and self.next_autoscale is not None:
            times.append(self.next_autoscale)
        return min(times, default=None)

    # -- autoscale ------------------------------------------------------------------------------------

    def autoscale_due(self, now: datetime | None = None) -> bool:
        """Whether the autoscale loop should run now (never without a metrics port)."""
        if self.metrics is None:
            return False
        now = now if now is not None else self.clock()
        return self.next_autoscale is None or self.next_autoscale <= now

    def autoscale_tick(self) -> Plan:
        """Run the autoscale loop now: load the new usage rows, recommend, apply; returns what was done."""
        if self.metrics is None:
            raise RuntimeError("autoscale needs a metrics port (Runtime(metrics=...))")
        return self._autoscale(self.state(), self.clock())

    def _load_usage(self, state: ClusterState, now: datetime) -> None:
        """Feed the histograms the rows since the last load (the history window on the first).

        After a gap longer than an hour or the history window (the store down, the clock jumped;
        `rebuild_after`) the histograms are rebuilt from the store's aggregates, as a restarted
        daemon's are, instead of reading the whole gap row by row."""
        assert self.metrics is not None
        window = autoscale_window(state)
        upto = settled(self.metrics, now)  # the rows a late writer may still add are read next time
        start = self.autoscale_loaded_until
        interval = self.autoscale_interval_override or autoscale_interval(state)
        if start is None or upto - start > rebuild_after(window, interval):
            if start is not None:
                self.autoscale_state = AutoscaleState()
            start = upto - window
        astate = self.autoscale_state
        astate.configure(state)
        if start >= upto:
            return

        def loaded(t: datetime) -> None:  # raw rows arrive in chunks: a failure keeps what is in
            self.autoscale_loaded_until = t

        load_usage(self.metrics, astate, start, upto, loaded)  # store-aggregated on the first load
        self.autoscale_loaded_until = upto

    def _autoscale(self, state: ClusterState, now: datetime) -> Plan:
        """One autoscale run; a failure of the run as a whole is journaled (once per message) and
        retried at the next interval, never raised into the compaction/defrag loop."""
        try:
            executed = self._autoscale_run(state, now)
        except Exception as exc:
            why = f"autoscale run failed: {_one_line(exc)}"
            if self._autoscale_error != why:
                self._autoscale_error = why
                self.journal.record(now, "", "error", f"{why}; compaction and defrag go on", ok=False)
            if self.next_autoscale is None or self.next_autoscale <= now:
                self.next_autoscale = now + (self.autoscale_interval_override or DEFAULT_AUTOSCALE_INTERVAL)
            return Plan(now)
        self._autoscale_error = None
        return executed

    def _autoscale_run(self, state: ClusterState, now: datetime) -> Plan:
        interval = self.autoscale_interval_override or autoscale_interval(state)
        self.next_autoscale = now + interval
        self.last_results = []
        executed = Plan(now)
        try:
            self._load_usage(state, now)
        except SourceError as exc:
            if self.stopping():  # the stop cut the read (`GreptimeMetrics.interrupt`): nothing to pause
                return executed
            reason = f"metrics store unreachable: {exc}"
            if self.autoscale_paused is None:
                self.journal.record(
                    now, "", "error", f"autoscale paused ({reason}); compaction and defrag go on", ok=False
                )
            self.autoscale_paused = reason
            return executed
        if self.autoscale_paused is not None:
            self.autoscale_paused = None
            self.journal.record(now, "", "action", "autoscale resumed: the metrics store answers again")
        ap = plan_autoscale(state, self.autoscale_state, now, external=self._ask_external(state, now))
        self.last_autoscale = ap
        groups: dict[str, list[Action]] = {}
        for action in ap.actions():
            key = _workload_of(action, state)
            if isinstance(action, PatchWorkloadStatus) and self._status_applied.get(key) == action.fields:
                continue  # the very status written last time (compared as JSON values, no encoding)
            groups.setdefault(key, []).append(action)
        assert ap.result is not None
        seen = {k.removeprefix(_AUTOSCALE) for k in self._previous if k.startswith(_AUTOSCALE)}
        batch = getattr(self.cluster, "batch", None)  # the embedded cluster: one scheduler pass
        with batch() if callable(batch) else nullcontext():
            for key in sorted(seen | set(groups)):
                if self._stop_here(now, "the rest of this autoscale round not applied"):
                    break
                actions = self._drop_repeats(_AUTOSCALE + key, groups.get(key, []))
                if not actions:
                    continue
                rec = ap.result.workloads.get(key)
                wv = state.workloads.get(key)
                pool = (wv.pool if wv else None) or ""
                if rec is not None and rec.would_apply and rec.recommendation is not None:
                    pods = sum(isinstance(a, AnnotatePod) for a in actions)
                    new, cur = rec.recommendation, rec.current
                    self.journal.record(
                        now,
                        pool,
                        "action",
                        f"autoscale {key}: TFLOPS {cur.tf_req}->{new.tf_req}, VRAM {cur.vram_req}->"
                        f"{new.vram_req} ({rec.reason}; {pods} worker(s) patched)",
                    )
                results = self.actuator.execute(Plan(now, actions=actions), state)
                self.last_results += results
                for r in results:
                    if isinstance(r.action, PatchWorkloadStatus) and r.ok:
                        self._status_applied[key] = dict(r.action.fields)
                executed.actions.extend(actions)
        return executed

    external_timeout: float = external_scaler.DEFAULT_TIMEOUT
    """Seconds each external-scaler call may take (upstream's: 10 s)."""

    def _ask_external(self, state: ClusterState, now: datetime) -> dict[str, ExternalAnswer]:
        """This tick's external-scaler answers (A11); failures are answers with `error`, never raised.
        Empty (nobody is asked) unless external calls are on (see `__init__`)."""
        if not self.external_scaler or self.dry_run:
            return {}
        reader = getattr(self.cluster, "read_secret", None)
        return external_scaler.ask_all(
            external_requests(state, now),
            timeout=self.external_timeout,
            secrets=reader if callable(reader) else None,
        )

    def run_for(self, duration: timedelta, step: timedelta = timedelta(seconds=10)) -> list[Plan]:
        """Drive a simulated cluster for `duration`: reconcile what is due, advance its clock, repeat.

        The clock moves by `step` at most, and lands exactly on each scheduled reconcile. Returns the
        executed plans. Raises TypeError for a cluster without `advance()`.
        """
        sim = self.cluster
        if not isinstance(sim, SimulatedCluster):
            raise TypeError("run_for needs a simulated cluster (one with now() and advance())")
        if step <= timedelta(0):
            raise ValueError("step must be positive")
        end = self.clock() + duration
        plans: list[Plan] = []
        while True:
            plan = self.tick_due()
            if plan is not None:
                plans.append(plan)
            now = self.clock()
            if now >= end:
                return plans
            scheduled = list(self.next_reconcile.values())
            if self.metrics is not None and self.next_autoscale is not None:
                scheduled.append(self.next_autoscale)
            target = min([now + step, end, *(t for t in scheduled if t > now)])
            sim.advance(target - now)
            if self.clock() <= now:
                raise RuntimeError("the runtime's clock does not follow the simulated cluster's")

    def _tick(self, state: ClusterState, now: datetime, pools: Iterable[str] | None) -> Plan:
        names = sorted(state.pools) if pools is None else sorted(set(pools))
        for name in names:
            if name not in state.pools:
                raise KeyError(f"GPUPool {name!r} not found")
        total = Plan(now)
        self.last_results = []
        blocked = state.blocked_pools()
        for i, name in enumerate(names):
            if self._stop_here(now, f"pool(s) {', '.join(names[i:])} not reconciled"):
                break
            if name in blocked:
                self._pool_failed(
                    name, state, now, f"{blocked[name]}; the pool is not reconciled until it is fixed"
                )
                continue
            try:
                plan = plan_cluster(state, now, pools=[name], last_compaction=self.last_compaction)
                pp = plan.pool(name)
                if pp.compaction is not None and pp.compaction.due:
                    self.last_compaction[name] = now
                plan.actions = self._drop_repeats(name, plan.actions)
                self._journal_compaction(name, pp.compaction, now)
                self._journal_defrag(name, pp.defrag, now)
                results = self.actuator.execute(plan, state)
                self.last_results += results
                self._schedule(name, state, pp.defrag, results, now)
            except Exception as exc:  # contained: this pool only (see the module docstring)
                self._pool_failed(name, state, now, f"reconcile failed: {_one_line(exc)}")
                continue
            self._pool_error.pop(name, None)
            total.merge(plan)
        return total

    def _stop_here(self, now: datetime, what: str) -> bool:
        """True (journaled) when the daemon is stopping: a pool's step or a workload's patches are
        applied whole or not at all (never an eviction without its markers); the rest is left to
        the next leader, which decides it again from the cluster."""
        if not self.stopping():
            return False
        self.journal.record(now, "", "action", f"stopping: {what}")
        return True

    def _pool_failed(self, pool: str, state: ClusterState, now: datetime, why: str) -> None:
        """Journal (when new), a Warning event on the GPUPool (repeats dropped), retry after the period."""
        if self._pool_error.get(pool) != why:
            self._pool_error[pool] = why
            self.journal.record(now, pool, "error", f"pool {pool}: {why}; the other pools go on", ok=False)
        event = Event(f"GPUPool/{pool}", "Warning", "ReconcileFailed", why[:1024])
        try:
            self.last_results += self.actuator.execute(
                Plan(now, actions=self._drop_repeats(pool, [event])), state
            )
        except Exception as exc:  # the event is a courtesy: never let it stop the loop either
            self.journal.record(
                now, pool, "error", f"pool {pool}: Warning event not written: {_one_line(exc)}", ok=False
            )
        try:
            period, _ = compaction_period(state.pools[pool].obj)
        except Exception:
            period = DEFAULT_RETRY
        self.next_reconcile[pool] = now + period

    # -- manual compaction (C5) ----------------------------------------------------------------------

    def preview_manual_compaction(self, pool: str) -> Plan:
        """What a manual round would do now (the confirm dialog's list); no side effects."""
        state = self.state()
        if pool not in state.pools:
            raise KeyError(f"GPUPool {pool!r} not found")
        plan, _ = plan_manual_compaction(state, pool, self.clock(), prices=price_map(state))
        return plan

    def manual_compaction(self, pool: str) -> Plan:
        """Stamp `manual-compaction` on the pool and, on the embedded cluster, run its forced round now.

        Returns the executed plan: the annotation first, then the round's actions. On a live cluster
        only the annotation is written (the controller runs the round when it sees the stamp); the
        returned plan's `pools` still hold the forced round's decision, for display.
        """
        state, now = self.state(), self.clock()
        if pool not in state.pools:
            raise KeyError(f"GPUPool {pool!r} not found")
        plan, stamp = plan_manual_compaction(state, pool, now, prices=price_map(state))
        if not self.embedded:
            self.journal.record(
                now, pool, "compaction", "manual compaction requested; the controller runs the round"
            )
            # the forced round's decision is shown (pools), but only the stamp is applied
            self.last_results = self.actuator.execute(
                Plan(now, pools=dict(plan.pools), actions=[stamp]), state
            )
            return Plan(now, pools=dict(plan.pools), actions=[stamp])
        self.journal.record(now, pool, "compaction", "manual compaction: running the round now")
        executed = Plan(now, pools=dict(plan.pools), actions=[stamp, *plan.actions])
        self.last_compaction[pool] = now
        self._journal_compaction(pool, plan.pool(pool).compaction, now)
        self.last_results = self.actuator.execute(executed, state)
        period, _ = compaction_period(state.pools[pool].obj)
        self.next_reconcile[pool] = min(self.next_reconcile.get(pool, now + period), now + period)
        return executed

    # -- helpers -----------------------------------------------------------------------------------

    def _drop_repeats(self, pool: str, actions: list[Action]) -> list[Action]:
        """D7: drop what this pool's previous reconcile already emitted (events; everything in dry-run)."""

        def repeatable(a: Action) -> bool:
            return self.dry_run or isinstance(a, Event)

        before = self._previous.get(pool, set())
        self._previous[pool] = {_identity(a) for a in actions if repeatable(a)}
        return [a for a in actions if not (repeatable(a) and _identity(a) in before)]

    def _schedule(
        self,
        pool: str,
        state: ClusterState,
        defrag: DefragResult | None,
        results: list[ActionResult],
        now: datetime,
    ) -> None:
        """R1 pacing: min(period, defrag requeue), and never past the next compaction round."""
        period, _ = compaction_period(state.pools[pool].obj)
        refused = any(isinstance(r.action, EvictPod) and r.status == "failed" for r in results)
        if defrag is not None and (defrag.state in ("evict", "blocked") or refused):
            requeue = DEFRAG_ACTIVE_REQUEUE
        elif (
            defrag is not None
            and defrag.state == "idle"
            and defrag.window is not None
            and defrag.window[0] <= now < defrag.window[1]
        ):
            requeue = DEFRAG_IDLE_REQUEUE
        else:
            requeue = period
        nxt = now + min(requeue, period)
        last = self.last_compaction.get(pool)
        if last is not None and last + period > now:
            nxt = min(nxt, last + period)
        self.next_reconcile[pool] = nxt

    def _journal_compaction(self, pool: str, res: CompactionResult | None, now: datetime) -> None:
        if res is None or not res.due:
            return
        self.journal.record(
            now, pool, "compaction", f"round: {len(res.released)} node(s) released, {len(res.kept)} kept"
        )
        for r in res.released:
            self._kept[(pool, r.node)] = "released"
            self.journal.record(
                now,
                pool,
                "compaction",
                f"release {r.node} ({r.action}): no TensorFusion worker, Running for 5m+, "
                "and the pool keeps its warm and min resources without it",
            )
        for k in res.kept:
            if self._kept.get((pool, k.node)) == k.reason:
                continue
            self._kept[(pool, k.node)] = k.reason
            detail = f" ({k.detail})" if k.detail else ""
            self.journal.record(now, pool, "compaction", f"keep {k.node}: {k.reason}{detail}")

    def _journal_defrag(self, pool: str, res: DefragResult | None, now: datetime) -> None:
        line = defrag_line(res, now)
        if (
            line is None or self._defrag_line.get(pool) == line
        ):  # unchanged (only dry-run repeats an eviction)
            return
        self._defrag_line[pool] = line
        self.journal.record(now, pool, "defrag", line)


def _one_line(exc: BaseException) -> str:
    """An unexpected error for the journal and the GPUPool's Warning event (written into the
    cluster): one line, credentials masked, as an error we did not word may quote a DSN or token."""
    text = redact.scrub(" ".join(str(exc).split())) or "(no message)"
    return f"{type(exc).__name__}: {text[:500]}"


def _workload_of(action: Action, state: ClusterState) -> str:
    """The `ns/name` workload an autoscale action belongs to."""
    if isinstance(action, PatchWorkloadStatus):
        return f"{action.namespace}/{action.name}"
    if isinstance(action, Event):
        return action.object.partition("/")[2]
    if isinstance(action, AnnotatePod):
        w = state.workers.get(f"{action.namespace}/{action.name}")
        return f"{action.namespace}/{w.workload}" if w is not None and w.workload else ""
    return ""
