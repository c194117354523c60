"""The console's refresh loop and its on-demand analyses (a mixin of `TfTuiApp`).

Loading never blocks the UI: a thread worker reads the ports and builds `ConsoleData`, then posts
`DataLoaded` or `LoadFailed`; the handlers only assign reactives. The slow metrics work is computed
on demand by the screens that show it (`request_analysis`), in thread workers, once per refresh.
Separate from the app class because it is the one part that owns the timing and the workers.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar

from textual.worker import Worker, WorkerState, get_current_worker

from tftui.engine.autoscale_config import effective_autoscaling_all
from tftui.model import giveway
from tftui.model.gcpause import gc_paused
from tftui.ui.appbase import (
    ANALYSIS_GROUP,
    CONFIRM_GROUP,
    INPUT_QUIET,
    MAX_BACKOFF_TICKS,
    REFRESH_GROUP,
    REFRESH_SHARE,
    STALE_AFTER,
    WRITE_GROUP,
    AnalysisReady,
    ConsoleBase,
    DataLoaded,
    LoadFailed,
)
from tftui.ui.background import in_thread
from tftui.ui.load.analysis import (
    HISTORY,
    HISTORY_CACHED,
    OBJHISTORY,
    Analysis,
    AnalysisKey,
    AnalysisKind,
    Cancelled,
    run_analysis,
)
from tftui.ui.load.data import (
    ClusterLoadError,
    ConsoleData,
    connection_error,
    describe_error,
    latest_usage,
    load_rest,
    load_state,
)
from tftui.ui.screens.prebuild import same_shown

T = TypeVar("T")


class Refreshing(ConsoleBase):
    """Refreshes (timer, back-off, stale marking) and analyses, computed once per refresh."""

    # -- refresh -------------------------------------------------------------------------------

    def _refreshing(self) -> bool:
        return any(
            w.group == REFRESH_GROUP and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
            for w in self.workers
        )

    def _tick(self) -> None:
        """Periodic refresh: never overlaps a running one, backs off after failures, not when paused."""
        data = self.data
        if data is not None and self._refresh_interval is not None:
            age = (self._clock() - data.refreshed_at).total_seconds()
            self.stale = age > STALE_AFTER * self._refresh_interval * max(1.0, self._sim_speed)
        if self.paused:
            return
        if self._skip_ticks > 0:
            self._skip_ticks -= 1
            return
        if time.monotonic() < self._next_refresh:
            return  # the last refresh was slow: the interval stretches (REFRESH_SHARE)
        if not self._refreshing():
            self.action_refresh()

    def action_refresh(self) -> None:
        """Start a refresh now (a newer one supersedes a running one)."""
        self.loading = True
        self._load_worker()

    def _run_simulation(self) -> None:
        """Move the embedded cluster's clock by the wall time since the last refresh × `sim_speed`
        and let the runtime reconcile what came due (compaction periods, defrag windows)."""
        run_for = getattr(self.runtime, "run_for", None)
        if self._sim_speed <= 0 or run_for is None or not callable(getattr(self._cluster, "advance", None)):
            return
        wall = time.monotonic()
        last, self._sim_wall = self._sim_wall, wall
        if last is not None and wall > last:
            run_for(timedelta(seconds=(wall - last) * self._sim_speed))

    def _load_worker(self) -> None:
        self.run_worker(
            in_thread(self._load_work, name="tftui-refresh", thread=self._refresh_thread),
            exclusive=True,
            group=REFRESH_GROUP,
            exit_on_error=False,
            description="refresh",
        )

    def _quiet(self) -> bool:
        """No key or click for `INPUT_QUIET` seconds: a stop-the-world collection would hit nobody."""
        return time.monotonic() - self._last_input >= INPUT_QUIET

    def _load_work(self) -> None:
        worker = get_current_worker()
        now = self._clock()
        started, cpu = time.monotonic(), time.thread_time()
        try:
            lost = connection_error(self._cluster)
            if lost is not None:  # a live cluster's cache would show stale objects as current
                if not worker.is_cancelled:
                    self.post_message(LoadFailed(f"disconnected: {lost}", now))
                return
            data = self._load(worker)
        except ClusterLoadError as exc:
            if not worker.is_cancelled:  # the clock as the load read it (the demo's moved in `_load`)
                self.post_message(LoadFailed(str(exc), self._clock(), exc.source))
            return
        finally:
            took = time.monotonic() - started
            self.last_refresh_seconds = took
            self.last_refresh_cpu_seconds = time.thread_time() - cpu
            if self._refresh_interval is not None and took > REFRESH_SHARE * self._refresh_interval:
                self._next_refresh = started + took / REFRESH_SHARE
        if not worker.is_cancelled:
            self.post_message(DataLoaded(data))
            cpu = time.thread_time()
            self._after_post(data)
            self.last_refresh_cpu_seconds = (self.last_refresh_cpu_seconds or 0.0) + time.thread_time() - cpu

    def _after_post(self, data: ConsoleData) -> None:
        """Work of the refresh that no screen on show waits for, done once its data is posted:
        every workload's effective autoscaling configuration (`:workloads` shows whether it is on).
        Derived when the view first built its rows, that froze the console for a second at 5,000
        nodes; here a refresh derives those it changed and carries the rest (≈ 0.08 CPU-s a 1 %
        refresh at that size, 0.75 on the first). A workload that fails is left to the view."""
        with gc_paused():
            # a bug here must not end the refreshes: the view meets it and says so
            with contextlib.suppress(Exception):
                effective_autoscaling_all(data.state)
            self._young.freeze()  # no collection scans what it built (`YoungFreezer.freeze`)

    def _load(self, worker: Any) -> ConsoleData:
        """One refresh's data, under the cluster lock (one reader or writer of the source at a
        time). The first screen is posted as soon as the state is built, before any usage index
        exists (an empty one costs a pass over every GPU and worker and shows what none shows: no
        figures). With a metrics store over the network (`REMOTE`) the lock is let go while its
        latest samples are read, so a slow or hung store (up to its query limit) delays no write
        the console makes meanwhile; a write in between is shown by the refresh it asks for. Nor
        does it hold the refresh past `LATEST_WAIT`: the new state is shown with the samples read
        last (`ui.load.latest`). The demo's simulated metrics follow the simulated cluster: read
        under the lock."""
        cluster, metrics, reader, lock = self._cluster, self._metrics, self._reader, self._cluster_lock
        with lock:
            self._run_simulation()
            now = self._clock()
            # one pause until what the refresh built is frozen (`settle`): let back on in between,
            # the collector's first run scanned all that `load_state` built, holding the
            # interpreter from the keys for ≈ 40 ms at 5,000 nodes
            with gc_paused():
                first = load_state(cluster, metrics, now, reader, usage=False)
                if not self._shown_once:
                    if not worker.is_cancelled:
                        self.post_message(DataLoaded(first))
                    self._shown_once = True
                if metrics is not None and getattr(metrics, "REMOTE", False):
                    lock.release()
                    try:  # waited on at most LATEST_WAIT: past it, the samples read last (`late`)
                        latest = self._latest_reader.read(metrics, first.state, now)
                    finally:
                        lock.acquire()
                else:
                    latest = latest_usage(metrics, first.state, now)
                data = load_rest(first, cluster, metrics, self.runtime, reader, latest)
                self._prebuild(data)
                self._young.settle(self._quiet())  # no collection scans what it built
        return data

    def _prebuild(self, data: ConsoleData, outcome: Analysis | None = None) -> None:
        """Let the screen on show build its tables for `data` here, in the refresh thread
        (`screens.prebuild`): its render on the interface thread then only shows them. Then the
        kept views switched away from (`kept_aside`), so that `:` back to one shows tables built
        for the data on screen instead of building them first (at 5,000 nodes the `:gpus` rows
        after a few refreshes: 65-350 ms of the interface thread). A screen without `prebuild`
        (or none yet) builds on the interface thread as before; so does one whose prebuild
        failed, where the same error is then reported as any render error is. With `outcome`
        (`_prebuild_outcome`), only the screens whose tables would show it differently."""
        try:
            screens = [self.screen, *self.kept_aside()]
        except Exception:  # no screen yet (the console is starting or closing)
            return
        for screen in screens:
            prebuild = getattr(screen, "prebuild", None)
            if prebuild is None:
                continue
            try:
                if outcome is None or self._shown_otherwise(screen, outcome):
                    self.prebuilt_tables += self._ahead(outcome, prebuild, data)
            except Exception:  # the render builds again on the interface thread and reports it
                continue

    def _shown_otherwise(self, screen: Any, outcome: Analysis) -> bool:
        """Whether `screen`'s tables show `outcome` otherwise than what they show now."""
        if outcome.key not in screen.analysis_keys():
            return False
        now: tuple[object, ...] = screen.analyses_shown()
        then: tuple[object, ...] = self._ahead(outcome, screen.analyses_shown)
        return not same_shown(now, then)

    def _ahead(self, outcome: Analysis | None, call: Callable[..., T], *args: Any) -> T:
        """`call(*args)` reading the analyses as they will be once `outcome` is posted (this
        thread's `analysis` and `computing`)."""
        if outcome is None:
            return call(*args)
        ahead = dict(self.analyses)
        ahead[outcome.key] = outcome
        self._as_ready.analyses, self._as_ready.done = ahead, outcome.key
        try:
            return call(*args)
        finally:
            self._as_ready.analyses = self._as_ready.done = None

    def _after_the_keys_frame(self, message: DataLoaded | AnalysisReady) -> bool:
        """Whether `message` waits until the frame of the key being served is out (then it is
        applied, in arrival order). A refresh's or an analysis' outcome re-renders the view on
        this thread (10-30 ms on `:gpus` at 5,000 nodes, a filter applied); landing between a
        key and its frame, it made that key the slowest of a typed filter."""
        held = giveway.held()
        if self._after_frame and not held:
            self._apply_after_frame()  # that frame is out (its call can go with a screen closed)
        if not held:
            return False
        if not self._after_frame:
            self.call_after_refresh(self._apply_after_frame)
            # the call waits on the current screen, and a screen closed before its next idle
            # drops it: the hold's own end is the backstop
            self.set_timer(giveway.MAX_HOLD, self._apply_after_frame)
        self._after_frame.append(message)
        return True

    def _apply_after_frame(self) -> None:
        waiting, self._after_frame = self._after_frame, []
        for message in waiting:
            if isinstance(message, DataLoaded):
                self._data_loaded(message)
            else:
                self._analysis_ready(message)

    def on_data_loaded(self, message: DataLoaded) -> None:
        if not self._after_the_keys_frame(message):
            self._data_loaded(message)

    def _data_loaded(self, message: DataLoaded) -> None:
        if self.dropped(message.data.source):
            return  # read from the context the console switched away from
        self._failures = self._skip_ticks = 0
        self.data_seq += 1
        self.source_hint = message.data.source
        self.cluster_error = None
        self.loading = bool(message.data.pending)
        self.stale = False
        retired = self.data
        self.data = message.data
        if retired is not None:  # freed in the refresh thread, not while the new frame is drawn
            self._refresh_thread.retire(retired)

    def on_load_failed(self, message: LoadFailed) -> None:
        self._failures += 1
        self._skip_ticks = min(2 ** (self._failures - 1) - 1, MAX_BACKOFF_TICKS)
        if message.source and self.data is None:
            self.source_hint = message.source
        self.loading = False
        self.cluster_error = message.error

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A bug in loading or writing must not kill the console: report it."""
        if event.worker.group == ANALYSIS_GROUP and event.worker.is_finished:
            self._analysis_gone(event.worker)
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        text = describe_error(error) if error else "failed"
        if event.worker.group == REFRESH_GROUP:
            self.on_load_failed(LoadFailed(text, self._clock()))
        elif event.worker.group in (WRITE_GROUP, CONFIRM_GROUP):
            self._writing.clear()
            self.notify(f"{event.worker.description}: {text}", severity="error", timeout=10)

    # -- analyses: computed on demand, once per refresh -------------------------------------------

    def analysis(self, kind: AnalysisKind, subject: str = "") -> Analysis | None:
        """The latest analysis of `kind` (possibly of an earlier refresh), or None. In an analysis
        thread prebuilding for its outcome (`_prebuild_outcome`): as they will be with it."""
        ahead: dict[AnalysisKey, Analysis] | None = getattr(self._as_ready, "analyses", None)
        return (self.analyses if ahead is None else ahead).get((kind, subject))

    def computing(self, kind: AnalysisKind, subject: str = "") -> bool:
        """Whether that analysis is being computed right now (for the "computing…" state)."""
        return (kind, subject) in self._computing and (kind, subject) != getattr(self._as_ready, "done", None)

    def request_analysis(self, kind: AnalysisKind, subject: str = "") -> None:
        """Make sure the analysis for the refresh on screen exists or is being computed.

        Nothing happens before the first refresh, when it is already cached for this refresh, or
        while one of the same key is running (its result re-renders the screen, which asks again).
        """
        key: AnalysisKey = (kind, subject)
        data = self.data
        if data is None or data.pending or key in self._computing:
            return  # before the first refresh, or its metrics are still loading
        have = self.analyses.get(key)
        if have is not None and have.seq == self.data_seq:
            return
        name = f"{kind}:{subject}" if subject else kind
        worker = self.run_worker(
            in_thread(partial(self._analysis_work, key, data, self.data_seq), name=f"tftui-{name}"),
            name=name,
            group=ANALYSIS_GROUP,
            description=f"{kind} analysis",
            exit_on_error=False,
        )
        self._computing[key] = worker

    def _analysis_work(self, key: AnalysisKey, data: ConsoleData, seq: int) -> None:
        worker = get_current_worker()
        try:
            result = run_analysis(
                key,
                self._metrics,
                data,
                seq,
                self.analysis_settings,
                cancelled=lambda: worker.is_cancelled,
                autoscale=self._autoscale_loader,
            )
        except Cancelled:
            return
        if worker.is_cancelled:
            return
        previous = self.analyses.get(key)
        kept = result.keeping(previous)
        if data is self.data:
            self._prebuild_outcome(kept, data)
        if not worker.is_cancelled:
            self.post_message(AnalysisReady(kept, previous))

    def _prebuild_outcome(self, kept: Analysis, data: ConsoleData) -> None:
        """Let the screens that show this analysis build their tables with its outcome here, in
        its thread, as `_prebuild` does for a refresh: every outcome is a new object, and
        rebuilding :workloads for it took 0.5 s of the interface thread at 5,000 nodes with a
        metrics store, every refresh. The screens read the analyses as they will be once the
        outcome is posted (this thread's `analysis` and `computing`)."""
        with gc_paused():
            self._prebuild(data, kept)

    def on_analysis_ready(self, message: AnalysisReady) -> None:
        if not self._after_the_keys_frame(message):
            self._analysis_ready(message)

    def _analysis_ready(self, message: AnalysisReady) -> None:
        result = message.analysis
        if result.seq < self.analyses_from:
            return  # read for the context switched away from
        self._computing.pop(result.key, None)
        analyses = dict(self.analyses)
        previous = analyses.pop(result.key, None)  # re-inserted last: the newest history is kept
        analyses[result.key] = result if previous is message.previous else result.keeping(previous)
        histories = [k for k in analyses if k[0] in (HISTORY, OBJHISTORY)]
        for stale in histories[: max(0, len(histories) - HISTORY_CACHED)]:
            del analyses[stale]
        self.analyses = analyses

    def _analysis_gone(self, worker: Worker[Any]) -> None:
        """A finished analysis worker that delivered nothing (a bug, a cancel): forget it, so the
        next request starts over. One that delivered was already removed by `on_analysis_ready`."""
        for key, running in list(self._computing.items()):
            if running is worker:
                del self._computing[key]
                if worker.state == WorkerState.ERROR:
                    error = describe_error(worker.error) if worker.error else "failed"
                    self.notify(f"{worker.description}: {error}", severity="error", timeout=10)
