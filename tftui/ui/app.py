"""The console application: refresh loop, typed messages, view switching, help, warnings, writes.

Loading never blocks the UI: a thread worker reads the ports and builds `ConsoleData` (`data.load`),
then posts `DataLoaded` or `LoadFailed`; the handlers only assign reactives, and every screen
re-renders from `TfTuiApp.data`. A failed cluster read keeps the last good state on screen and says
so in the header; a failed metrics read keeps allocation and shows `metrics: <error>` naming the
store, until the next good refresh.

The slow metrics work (waste diagnosis, alert replay, a workload's 24 h history) is computed on
demand by the screens that show it (`request_analysis`), in thread workers, once per refresh; the
finished `Analysis` lands in the reactive `analyses`, which those screens watch.

Writes have one door, `TfTuiApp.perform`: it refuses everything when the console is read-only
(`--read-only`, a source that cannot write, or no runtime), and runs the write in a thread worker
through the runtime. Keys that lead to a write are listed in `WRITE_ACTIONS`; `allows` hides them
from every screen's footer and help (`check_action`) when read-only, so they are not even offered.
"""

from __future__ import annotations

import fnmatch
import io
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, cast

from rich.console import Console
from rich.text import Text
from textual.app import App
from textual.binding import BindingType
from textual.command import Provider
from textual.filter import LineFilter
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker, WorkerState, get_current_worker

from tftui.config import ConsoleConfig, load_config
from tftui.engine.autoscale import AutoConfig, effective_autoscaling
from tftui.engine.compaction import plan_manual_compaction
from tftui.engine.fit import MODES
from tftui.engine.placement import mode_change_message, pool_mode, template_patch
from tftui.engine.plan import EvictPod, PatchWorkloadAutoscale, Plan
from tftui.engine.prices import price_map
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.model.gcpause import gc_paused
from tftui.model.plaintext import visible
from tftui.sources.ports import ClusterPort, MetricsPort, WritableClusterPort
from tftui.ui.actions import MUTATING, REGISTRY, bindings
from tftui.ui.background import in_thread
from tftui.ui.crash import CRASH_EXIT, crash_line, write_crash_log
from tftui.ui.keymap import check_keymap, normalise_keymap
from tftui.ui.load.analysis import (
    AUTOSCALE,
    HISTORY,
    HISTORY_CACHED,
    OBJHISTORY,
    Analysis,
    AnalysisKey,
    AnalysisKind,
    AnalysisSettings,
    Cancelled,
    run_analysis,
)
from tftui.ui.load.autoscale import AutoscaleAnalysis, AutoscaleLoader
from tftui.ui.load.data import (
    ClusterLoadError,
    ConsoleData,
    StateReader,
    connection_error,
    describe_error,
    load,
    load_rest,
    load_state,
)
from tftui.ui.load.ops import CapacityFigures, ConsoleRuntime, compaction_capacity
from tftui.ui.palette import ActionCommands
from tftui.ui.render.autoscaleview import toggle_body
from tftui.ui.render.opsviews import confirm_compaction_body
from tftui.ui.render.rowcache import RowCaches
from tftui.ui.render.views import Row
from tftui.ui.screens.metrics import WorkloadScreen
from tftui.ui.screens.modals import ConfirmScreen, HelpEntry, HelpScreen, ModeScreen, WarningsScreen
from tftui.ui.screens.placement import PlacementScreen
from tftui.ui.screens.registry import ROOT_VIEWS
from tftui.ui.screens.resource import VIEW_ALIASES, VIEWS, PoolsScreen, ResourceScreen
from tftui.ui.switching import ScopeCommands
from tftui.ui.themes import DARK, LIGHT, THEMES
from tftui.ui.widgets.plain import ControlFilter

MIN_REFRESH_INTERVAL = 2.0
"""Shortest automatic refresh period in seconds (k9s clamps the same way)."""
MAX_BACKOFF_TICKS = 31
"""After repeated cluster failures, skip up to this many ticks between attempts."""
STALE_AFTER = 3
"""Refresh periods after which the data on screen is called stale."""
REFRESH_SHARE = 0.25
"""Share of wall time automatic refreshes may take: a refresh that took longer than this share of
the interval pushes the next one out (a 5 s refresh every 10 s would leave the console busy)."""
REFRESH_GROUP = "refresh"
SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the GIL while another waits (Python's default: 0.005), while the
console runs: keys are served within a few of these even when a refresh thread is busy."""
ANALYSIS_GROUP = "analysis"
WRITE_GROUP = "write"
CONFIRM_GROUP = "confirm"

WRITE_ACTIONS: dict[str, str] = {name: a.noun or name for name, a in MUTATING.items()}
"""Actions that write to the cluster (binding action and `perform` name → words for messages),
taken from the registry (`actions.ACTIONS`, `mutates=True`). Their bindings carry ids
`tftui.write.<action>`; when the console is read-only they are hidden from footer, help and
palette and refused by `perform`.
"""


def utc_now() -> datetime:
    return datetime.now(UTC)


class DataLoaded(Message):
    """A refresh finished; `data` replaces what the console shows."""

    def __init__(self, data: ConsoleData) -> None:
        super().__init__()
        self.data = data


class LoadFailed(Message):
    """The cluster could not be read; the last good data stays on screen."""

    def __init__(self, error: str, at: datetime, source: str | None = None) -> None:
        super().__init__()
        self.error = error
        self.at = at
        self.source = source


class AnalysisReady(Message):
    """An analysis finished (or failed: `analysis.error`) for the refresh `analysis.seq`."""

    def __init__(self, analysis: Analysis) -> None:
        super().__init__()
        self.analysis = analysis


class CompactionPreviewReady(Message):
    """The forced round a manual compaction would run, ready for the confirm dialog."""

    def __init__(self, pool: str, plan: Plan, before: CapacityFigures, after: CapacityFigures) -> None:
        super().__init__()
        self.pool = pool
        self.plan = plan
        self.before = before
        self.after = after


class ActionDone(Message):
    """A write finished; `plan` is what the runtime did (None: a plain patch, said in `detail`)."""

    def __init__(self, action: str, pool: str, plan: Plan | None, detail: str = "") -> None:
        super().__init__()
        self.action = action
        self.pool = pool
        self.plan = plan
        self.detail = detail


class ActionFailed(Message):
    """A write (or its preview) failed; `error` is for a notification."""

    def __init__(self, action: str, pool: str, error: str) -> None:
        super().__init__()
        self.action = action
        self.pool = pool
        self.error = error


def writable(cluster: ClusterPort) -> bool:
    """Whether the source can carry out actions (the `WritableClusterPort` methods)."""
    return callable(getattr(cluster, "apply", None)) and callable(getattr(cluster, "events", None))


def make_runtime(
    cluster: ClusterPort, clock: Callable[[], datetime], metrics: MetricsPort | None = None
) -> ConsoleRuntime | None:
    """The runtime over a writable cluster, or None (read-only source, or no runtime package)."""
    if not writable(cluster):
        return None
    try:
        from tftui.runtime.loops import Runtime
    except ImportError:
        return None
    # with metrics the runtime also autoscales (when its loops run: `--speed` on the demo)
    runtime: ConsoleRuntime = Runtime(cast(WritableClusterPort, cluster), clock=clock, metrics=metrics)
    return runtime


def released_words(plan: Plan, pool: str, *, embedded: bool = True) -> str:
    """What a manual compaction did: on the embedded cluster the round ran; on a live cluster only
    the trigger annotation was written and the controller releases the nodes (behaviour C5)."""
    pp = plan.pools.get(pool)
    released = pp.compaction.released if pp is not None and pp.compaction is not None else []
    if not embedded:
        expected = ", ".join(r.node for r in released) or "nothing"
        return f"requested (tensor-fusion.ai/manual-compaction written; expected to release: {expected})"
    if not released:
        return "nothing released"
    return "released " + ", ".join(r.node for r in released)


class TfTuiApp(ScopeCommands, App[None]):
    """k9s-style console over a `ClusterPort` and an optional `MetricsPort`."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "tftui"
    ENABLE_COMMAND_PALETTE = True
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {ActionCommands}
    BINDINGS: ClassVar[list[BindingType]] = bindings("app")

    data: reactive[ConsoleData | None] = reactive(None, always_update=True, init=False)
    """The last good refresh (None until the first one lands)."""
    cluster_error: reactive[str | None] = reactive(None, init=False)
    """Why the last cluster read failed; None after a good refresh."""
    loading: reactive[bool] = reactive(False, init=False)
    analyses: reactive[dict[AnalysisKey, Analysis]] = reactive(dict, always_update=True, init=False)
    """The latest analysis of each kind (and workload history), replaced as a whole on each change."""
    stale: reactive[bool] = reactive(False, init=False)
    """The data on screen is older than `STALE_AFTER` refresh periods (header says STALE)."""
    paused: reactive[bool] = reactive(False, init=False)
    """Automatic refresh paused (`R`): the screen stays as it is; `ctrl+r` still refreshes."""
    namespace: reactive[str | None] = reactive(None, init=False)
    """The `:ns` scope every view is filtered to (None: all namespaces)."""

    def __init__(
        self,
        cluster: ClusterPort,
        metrics: MetricsPort | None,
        *,
        clock: Callable[[], datetime] | None = None,
        refresh_interval: float | None = 10.0,
        read_only: bool = False,
        runtime: ConsoleRuntime | None = None,
        analysis: AnalysisSettings | None = None,
        sim_speed: float = 0.0,
        config: ConsoleConfig | None = None,
    ) -> None:
        super().__init__()
        self.config = config or ConsoleConfig()
        """Keymap (checked by `run`), theme, production patterns, export folder."""
        for theme in THEMES.values():
            self.register_theme(theme)
        self.theme = THEMES[self.config.theme].name
        if self.config.keymap:
            self.set_keymap(normalise_keymap(self.config.keymap))  # `shift+c` also binds `C`
        self._sim_speed = max(0.0, sim_speed)
        """Simulated seconds per wall second on the embedded cluster (0: its clock stands still)."""
        self._sim_wall: float | None = None
        self._cluster = cluster
        self._metrics = metrics
        self.analysis_settings = analysis or AnalysisSettings()
        self.data_seq = 0
        """Number of the refresh on screen (analyses are cached per refresh)."""
        self._computing: dict[AnalysisKey, Worker[None]] = {}
        self._autoscale_loader = AutoscaleLoader()  # usage histograms, fed incrementally
        self._clock = clock or utc_now
        self._read_only_requested = read_only
        if read_only:
            runtime = None
        elif runtime is None:
            runtime = make_runtime(cluster, self._clock, metrics)
        self.runtime: ConsoleRuntime | None = runtime
        self.read_only = runtime is None
        """True with `--read-only`, a source that cannot write, or no runtime: no write is offered."""
        self._cluster_lock = threading.Lock()  # one reader or writer of the source at a time
        self._writing: set[str] = set()  # pools with a write in flight
        self._outcome_lock = threading.Lock()
        self.writes_in_flight: dict[str, str] = {}
        """Pool (or workload) → words of the write running for it; emptied by the write thread."""
        self._unseen: dict[int, str] = {}  # outcomes posted but not yet shown on screen
        self._refresh_interval = (
            None if refresh_interval is None else max(MIN_REFRESH_INTERVAL, refresh_interval)
        )
        self._timer: Timer | None = None
        self._reader = StateReader()  # validated objects and the last state, kept between refreshes
        self.row_caches: RowCaches[Row] = RowCaches()
        self._switch_interval = sys.getswitchinterval()
        """The tables' rows kept between refreshes and view switches (`rowcache`)."""
        self._shown_once = False  # the first refresh shows the state before metrics and operations
        self._next_refresh = 0.0  # monotonic time before which the timer starts no refresh
        self.last_refresh_seconds: float | None = None
        """Wall time of the last finished refresh (what the interval adapts to)."""
        self.last_refresh_cpu_seconds: float | None = None
        """CPU time the refresh thread used for it (on a loaded machine, less than the wall time)."""
        self._failures = 0
        self._skip_ticks = 0
        self.source_hint = "…"
        self._control_filter = ControlFilter()  # one instance: Textual caches filtered lines by it
        self.crash: BaseException | None = None
        """The first unexpected error that stopped the console (`run` reports it and exits 1)."""

    # -- text: object text is shown plain, never as markup nor raw controls (`widgets.plain`) --------

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every notification is plain text: messages quote object names and errors, which Textual
        would otherwise read as markup (`markup` is accepted for Textual's callers and ignored)."""
        super().notify(
            visible(message), title=visible(title), severity=severity, timeout=timeout, markup=False
        )

    def copy_to_clipboard(self, text: str) -> None:
        """Copies (names, fixes) are pasted into shells: each line is escaped like the screen shows
        it, so a newline or ESC inside an object's name cannot run or forge anything there."""
        super().copy_to_clipboard("\n".join(visible(line) for line in text.split("\n")))

    def get_line_filters(self) -> Sequence[LineFilter]:
        return [*super().get_line_filters(), self._control_filter]

    def _handle_exception(self, error: Exception) -> None:
        # Textual's one entry for an unhandled error (pinned Textual; see `crash`): keep the first
        # for `run`, then let Textual close the app as usual.
        if self.crash is None:
            self.crash = error
        super()._handle_exception(error)

    def _fatal_error(self) -> None:
        # Textual renders a traceback with every frame's locals here, for printing after exit:
        # over a cluster's state that took seconds and could print a credential. `run` logs its
        # own traceback instead; the app closes as Textual's would.
        self.bell()
        self._close_messages_no_wait()

    def on_mount(self) -> None:
        # a refresh thread in Python code keeps the GIL for the switch interval whenever the UI
        # thread asks for it, and a key passes through the event loop dozens of times on its way to
        # the frame: at the default 5 ms a key waited ~200 ms while a refresh ran
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL)
        # Textual's blank default screen stays at the bottom; the root view sits on top of it so
        # `switch_screen` can replace it (the default screen has no result callback to pop).
        self.push_screen(PoolsScreen())
        self.action_refresh()
        if self._refresh_interval is not None:
            self._timer = self.set_interval(self._refresh_interval, self._tick, name="refresh")

    def on_unmount(self) -> None:
        sys.setswitchinterval(self._switch_interval)

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
            in_thread(self._load_work, name="tftui-refresh"),
            exclusive=True,
            group=REFRESH_GROUP,
            exit_on_error=False,
            description="refresh",
        )

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
            with self._cluster_lock:
                self._run_simulation()
                now = self._clock()
                if self._shown_once:
                    data = load(self._cluster, self._metrics, now, self.runtime, self._reader)
                else:  # first screen: the pools view as soon as the state is built
                    first = load_state(self._cluster, self._metrics, now, self._reader)
                    if not worker.is_cancelled:
                        self.post_message(DataLoaded(first))
                    self._shown_once = True
                    with gc_paused():
                        data = load_rest(first, self._cluster, self._metrics, self.runtime, self._reader)
        except ClusterLoadError as exc:
            if not worker.is_cancelled:
                self.post_message(LoadFailed(str(exc), now, exc.source))
            return
        finally:
            took = time.monotonic() - started
            self.last_refresh_seconds = took
            self.last_refresh_cpu_seconds = time.thread_time() - cpu
            if self._refresh_interval is not None and took > REFRESH_SHARE * self._refresh_interval:
                self._next_refresh = started + took / REFRESH_SHARE
        if not worker.is_cancelled:
            self.post_message(DataLoaded(data))

    def on_data_loaded(self, message: DataLoaded) -> None:
        if self.dropped(message.data.source):
            return  # read from the context the console switched away from
        self._failures = self._skip_ticks = 0
        self.data_seq += 1
        self.source_hint = message.data.source
        self.cluster_error = None
        self.loading = bool(message.data.pending)
        self.stale = False
        self.data = message.data

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

    def now(self) -> datetime:
        """The console's clock (injected in tests; the demo's simulated clock)."""
        return self._clock()

    def clock_note(self) -> str:
        """The header's word on a simulated clock: it stands still without `--speed` (so the
        refresh time and ages do not move: paused, not stuck), or runs `×speed`; "" for real time."""
        if not callable(getattr(self._cluster, "advance", None)):
            return ""
        return f"clock ×{self._sim_speed:g}" if self._sim_speed > 0 else "clock paused"

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        self.notify("automatic refresh paused (R resumes, ^r refreshes once)" if self.paused else "resumed")

    def action_toggle_theme(self) -> None:
        self.theme = DARK.name if self.theme == LIGHT.name else LIGHT.name

    def is_production(self, source: str) -> bool:
        """Whether `source` (the context name) matches a production pattern of the config."""
        return any(fnmatch.fnmatch(source.lower(), p.lower()) for p in self.config.production)

    # -- analyses: computed on demand, once per refresh -------------------------------------------

    def analysis(self, kind: AnalysisKind, subject: str = "") -> Analysis | None:
        """The latest analysis of `kind` (possibly of an earlier refresh), or None."""
        return self.analyses.get((kind, subject))

    def computing(self, kind: AnalysisKind, subject: str = "") -> bool:
        """Whether that analysis is being computed right now (for the "computing…" state)."""
        return (kind, subject) in self._computing

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
        if not worker.is_cancelled:
            self.post_message(AnalysisReady(result))

    def on_analysis_ready(self, message: AnalysisReady) -> None:
        result = message.analysis
        self._computing.pop(result.key, None)
        analyses = dict(self.analyses)
        previous = analyses.pop(result.key, None)  # re-inserted last: the newest history is kept
        analyses[result.key] = result.keeping(previous)
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

    # -- writes: one door ------------------------------------------------------------------------

    def allows(self, action: str) -> bool:
        """Whether `action` is offered at all: the single read-only gate. Every binding's
        `check_action` (app and screens), the help, the palette and `perform` ask here, so a
        mutating action of the registry is neither shown nor runnable when read-only."""
        return not (self.read_only and action in WRITE_ACTIONS)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.allows(action)

    def start_manual_compaction(self, pool: str) -> None:
        """`c`: preview the forced round (worker), then ask; nothing is written before the answer."""
        if not self.allows("manual_compaction"):
            self._refuse("manual_compaction")
            return
        if pool in self._writing:
            self.notify(f"manual compaction of {pool} is already running", severity="warning")
            return
        self.run_worker(
            in_thread(partial(self._compaction_preview_work, pool), name="tftui-preview"),
            exclusive=True,
            group=CONFIRM_GROUP,
            exit_on_error=False,
            description="compaction preview",
        )

    def _compaction_preview_work(self, pool: str) -> None:
        data = self.data
        with self._cluster_lock:
            if self.runtime is not None:
                plan = self.runtime.preview_manual_compaction(pool)
            elif data is not None:
                plan = plan_manual_compaction(data.state, pool, self._clock(), prices=price_map(data.state))[
                    0
                ]
            else:
                return
        state: ClusterState | None = data.state if data is not None else None
        if state is None or pool not in state.pools:
            self.post_message(ActionFailed("manual_compaction", pool, f"pool {pool} is not in the cluster"))
            return
        pp = plan.pools.get(pool)
        released = [r.node for r in pp.compaction.released] if pp is not None and pp.compaction else []
        before, after = compaction_capacity(state, pool, released)
        if not get_current_worker().is_cancelled:
            self.post_message(CompactionPreviewReady(pool, plan, before, after))

    def on_compaction_preview_ready(self, message: CompactionPreviewReady) -> None:
        pool = message.pool

        def answered(confirmed: bool | None) -> None:
            if confirmed:
                self.perform("manual_compaction", pool=pool)

        body = confirm_compaction_body(pool, message.plan, message.before, message.after)
        self.push_screen(ConfirmScreen(f"Manual compaction · pool {pool}", body, "Compact"), answered)

    def start_placement_mode(self, pool: str) -> None:
        """`m`: choose the pool's new placement mode in a dialog showing what it changes (P4)."""
        if not self.allows("placement_mode"):
            self._refuse("placement_mode")
            return
        data = self.data
        if data is None or pool not in data.state.pools:
            self.notify(f"pool {pool} is not in the cluster", severity="error")
            return
        state = data.state
        current = pool_mode(state, pool)
        try:
            template_patch(state, pool, current)  # a pool without a (valid) template: nothing to patch
        except ValueError as exc:
            self.notify(str(exc), severity="error", timeout=10)
            return

        def answered(mode: str | None) -> None:
            if mode:
                self.perform("placement_mode", pool=pool, mode=mode)

        self.push_screen(
            ModeScreen(pool, current, MODES, partial(mode_change_message, state, pool)), answered
        )

    def start_workload_autoscale(self, key: str) -> None:
        """`a`: ask, showing the patch and its pod-template equivalent, then turn autoscaling on/off."""
        if not self.allows("workload_autoscale"):
            self._refuse("workload_autoscale")
            return
        data = self.data
        wv = data.state.workloads.get(key) if data is not None else None
        if data is None or wv is None:
            self.notify(f"workload {key} is not in the cluster", severity="error")
            return
        if wv.obj is None:
            self.notify(
                f"{key} has no TensorFusionWorkload object (local-GPU mode): set the "
                f'{keys.AUTOSCALE}: "true" annotation on its pod template instead',
                severity="error",
                timeout=10,
            )
            return
        analysis = self.analysis(AUTOSCALE)
        value = analysis.value if analysis is not None else None
        rec = value.result.workloads.get(key) if isinstance(value, AutoscaleAnalysis) else None
        # from the snapshot on screen (the analysis may still be the one before the last write)
        asc = effective_autoscaling(data.state, wv).get("autoSetResources")
        enable = not AutoConfig.parse(asc).enable
        pod_annotation = any(
            (data.state.workers[w].obj.get("metadata", {}).get("annotations") or {}).get(keys.AUTOSCALE)
            == keys.TRUE
            for w in wv.workers
            if w in data.state.workers
        )

        def answered(confirmed: bool | None) -> None:
            if confirmed:
                self.perform("workload_autoscale", pool=key, enable=enable)

        body = toggle_body(key, rec, enable, pod_annotation)
        label = "Turn on" if enable else "Turn off"
        self.push_screen(
            # a question, not a state: the title must not read like "autoscale is on"
            ConfirmScreen(f"Turn autoscaling {'on' if enable else 'off'}? · {key}", body, label),
            answered,
        )

    def start_admit(self, key: str) -> None:
        """`e` on a Pending worker: show why it waits and the move set, ask, then evict the set."""
        if not self.allows("admit"):
            self._refuse("admit")
            return
        from tftui.engine.pending import explain

        data = self.data
        why = explain(data.state, key) if data is not None else None
        if why is None:
            self.notify(f"{key} is not a Pending worker", severity="warning")
            return
        if why.admission is None or not why.admission.moves:
            self.notify(
                f"{key}: no PDB-safe move set admits it ({why.reason}: {why.detail})", severity="warning"
            )
            return

        def answered(confirmed: bool | None) -> None:
            if confirmed:
                self.perform("admit", pool=key)

        lines = [f"{key} is pending: {why.reason} ({why.detail}).", "", "Evict, in this order:"]
        lines += [f"  {m.pod}  {m.source} → {m.target} ({', '.join(m.gpus)})" for m in why.admission.moves]
        lines.append(f"then it fits on {why.admission.node} ({', '.join(why.admission.gpus)}).")
        self.push_screen(ConfirmScreen(f"Defrag to admit · {key}", Text("\n".join(lines)), "Evict"), answered)

    def perform(self, action: str, *, pool: str, mode: str | None = None, enable: bool | None = None) -> bool:
        """The only way the console writes: refused when read-only, else run in a thread worker.

        `mode` is the new placement mode of `placement_mode`; `workload_autoscale` takes the
        workload key ("ns/name") as `pool` and `enable`. Returns whether the write was started.
        """
        if action not in WRITE_ACTIONS:
            raise ValueError(f"unknown write action {action!r}")
        if self.read_only or self.runtime is None:
            self._refuse(action)
            return False
        if pool in self._writing:
            self.notify(f"{WRITE_ACTIONS[action]} of {pool} is already running", severity="warning")
            return False
        if action == "placement_mode" and mode not in MODES:
            raise ValueError(f"placement_mode needs a mode (one of {', '.join(MODES)}), not {mode!r}")
        if action == "workload_autoscale" and (enable is None or "/" not in pool):
            raise ValueError(
                f"workload_autoscale needs a workload ns/name and enable, not {pool!r}, {enable!r}"
            )
        self._writing.add(pool)
        with self._outcome_lock:
            self.writes_in_flight[pool] = WRITE_ACTIONS[action]
        # not a daemon thread: quitting waits for the write (`run` says so) instead of cutting it
        self.run_worker(
            in_thread(
                partial(self._write_work, action, pool, mode, enable), name="tftui-write", daemon=False
            ),
            group=WRITE_GROUP,
            exit_on_error=False,
            description="write",
        )
        return True

    def _refuse(self, action: str) -> None:
        self.notify(
            f"read-only console: {WRITE_ACTIONS.get(action, action)} is not allowed", severity="error"
        )

    def _write_work(
        self, action: str, pool: str, mode: str | None = None, enable: bool | None = None
    ) -> None:
        try:
            message = self._write(action, pool, mode, enable)
            with self._outcome_lock:
                self._unseen[id(message)] = self.outcome_text(message)[0]
        finally:
            with self._outcome_lock:
                self.writes_in_flight.pop(pool, None)
        self.post_message(message)

    def _write(
        self, action: str, pool: str, mode: str | None, enable: bool | None
    ) -> ActionDone | ActionFailed:
        """Carry out one write and say how it went (never raises: a failure is an outcome)."""
        runtime = self.runtime
        if runtime is None:  # perform checked; a runtime never goes away
            return ActionFailed(action, pool, "no runtime")
        try:
            with self._cluster_lock:
                if action == "workload_autoscale" and enable is not None:
                    ns, _, name = pool.partition("/")
                    plan = Plan(self._clock(), actions=[PatchWorkloadAutoscale(ns, name, enable)])
                    data = self.data
                    results = runtime.actuator.execute(plan, data.state if data is not None else None)
                    failed = [r.error for r in results if not r.ok]
                    if failed:
                        return ActionFailed(action, pool, "; ".join(failed))
                    word = "on" if enable else "off"
                    detail = f"{word} (spec.autoScalingConfig.autoSetResources.enable={str(enable).lower()})"
                    return ActionDone(action, pool, None, detail)
                if action == "admit":
                    return self._admit(pool)
                if action == "placement_mode" and mode is not None:
                    return ActionDone(action, pool, None, self._patch_mode(pool, mode))
                plan = runtime.manual_compaction(pool)
        except Exception as exc:
            return ActionFailed(action, pool, describe_error(exc))
        return ActionDone(action, pool, plan)

    def _admit(self, key: str) -> ActionDone | ActionFailed:
        """Evict the move set computed on the snapshot now on screen (it may differ from the one
        confirmed if the cluster moved: the evictions are what this snapshot needs)."""
        from tftui.engine.pending import explain

        runtime, data = self.runtime, self.data
        why = explain(data.state, key) if data is not None else None
        if runtime is None or data is None or why is None or why.admission is None:
            return ActionFailed("admit", key, "no move set admits it any more")
        evictions = [EvictPod(m.pod.split("/", 1)[0], m.pod.split("/", 1)[1]) for m in why.admission.moves]
        results = runtime.actuator.execute(Plan(self._clock(), actions=list(evictions)), data.state)
        failed = [r.error for r in results if not r.ok]
        if failed:
            return ActionFailed("admit", key, "; ".join(str(f) for f in failed))
        return ActionDone("admit", key, None, f"evicted {', '.join(m.pod for m in why.admission.moves)}")

    def outcome_text(self, message: ActionDone | ActionFailed) -> tuple[str, bool]:
        """How a finished write is told to the operator: (text, whether it failed)."""
        words = WRITE_ACTIONS.get(message.action, message.action)
        if isinstance(message, ActionFailed):
            return f"{words} of {message.pool} failed: {message.error}", True
        embedded = bool(getattr(self.runtime, "embedded", True))
        what = (
            message.detail
            if message.plan is None
            else released_words(message.plan, message.pool, embedded=embedded)
        )
        return f"{words} of {message.pool}: {what}", False

    def _seen(self, message: ActionDone | ActionFailed) -> str:
        """The outcome's text, now shown on screen (so `run` need not print it after exit)."""
        self._writing.discard(message.pool)
        with self._outcome_lock:
            self._unseen.pop(id(message), None)
        return self.outcome_text(message)[0]

    def wait_for_writes(self, report: Callable[[str], None]) -> None:
        """After the console closed: wait for the writes still running, then `report` every
        outcome the operator did not see on screen. A quit never abandons a write half-done."""
        with self._outcome_lock:
            pending = [f"{words} of {pool}" for pool, words in self.writes_in_flight.items()]
        if pending:
            report(f"tftui: waiting for {', '.join(pending)} to finish…")
        while True:
            with self._outcome_lock:
                if not self.writes_in_flight:
                    unseen, self._unseen = list(self._unseen.values()), {}
                    break
            time.sleep(0.05)
        for text in unseen:
            report(f"tftui: {text}")

    def _patch_mode(self, pool: str, mode: str) -> str:
        """Patch the SchedulingConfigTemplate of `pool` (read from the cluster as shown)."""
        data = self.data
        if data is None:
            raise ValueError(f"pool {pool}: no cluster state yet")
        name, patch = template_patch(data.state, pool, mode)
        cluster: Any = self._cluster
        if callable(getattr(cluster, "patch_template_mode", None)):  # a live cluster (`KubeCluster`)
            cluster.patch_template_mode(name, mode)
        elif callable(getattr(cluster, "patch", None)):  # the embedded cluster (`ActingSimCluster`)
            cluster.patch("SchedulingConfigTemplate", name, patch)
        else:
            raise ValueError(f"this source cannot patch SchedulingConfigTemplate {name}")
        return f"{mode} in SchedulingConfigTemplate {name}"

    def on_action_done(self, message: ActionDone) -> None:
        self.notify(self._seen(message), timeout=8)
        self.action_refresh()

    def on_action_failed(self, message: ActionFailed) -> None:
        self.notify(self._seen(message), severity="error", timeout=10)
        self.action_refresh()

    # -- navigation ----------------------------------------------------------------------------

    def switch_view(self, name: str) -> bool:
        """Replace the whole screen stack with a root view (`:nodes`); False for an unknown name."""
        view = VIEW_ALIASES.get(name.strip().lower())
        if view is None:
            return False
        while len(self.screen_stack) > 2:
            self.pop_screen()
        self.switch_screen(ROOT_VIEWS[view]())
        return True

    def open_placement(self, pool: str | None, trail: tuple[str, ...] = ()) -> None:
        """`p`: the placement preview for `pool`, as a drill-down of the current view."""
        base = trail or ("pools",)
        self.push_screen(PlacementScreen(pool, trail=(*base, "place")))

    def open_workload(self, key: str, trail: tuple[str, ...] = ("workloads",)) -> None:
        """`enter` on a workload: its detail (request vs use, 24 h sparklines, workers)."""
        self.push_screen(WorkloadScreen(key, trail=(*trail, key)))

    def help_entries(self, screen: Screen[Any]) -> list[HelpEntry]:
        """The registry's actions bound on `screen` (with the user's keys), in the order a key
        press searches them; writes are marked `!` and absent when read-only."""
        entries: list[HelpEntry] = []
        sorts: list[tuple[str, str]] = []
        seen: set[str] = set()
        for active in screen.active_bindings.values():
            binding = active.binding
            entry = REGISTRY.get(binding.id or "")
            if (
                entry is None
                or entry.id in seen
                or entry.id == "tftui.interrupt"
                or not self.allows(entry.name)
            ):
                continue
            seen.add(entry.id)
            key = binding.key_display or self.get_key_display(binding)
            if entry.id.startswith("tftui.sort_"):  # one line for the sort family: `N P G… Sort`
                sorts.append((key, entry.description.removeprefix("Sort ")))
                if len(sorts) == 1:
                    entries.append(HelpEntry("", "Sort", ""))
                continue
            description = entry.description + (" !" if entry.mutates else "")
            entries.append(HelpEntry(key, description, entry.tooltip))
        return [
            HelpEntry(
                "⇧x",
                "Sort",
                "x: " + ", ".join(f"{k} {what}" for k, what in sorts) + "; again reverses",
            )
            if e.description == "Sort" and not e.key
            else e
            for e in entries
        ]

    def action_help(self) -> None:
        screen = self.screen
        if isinstance(screen, HelpScreen):
            return
        title = " › ".join(screen.crumb_trail()) if isinstance(screen, ResourceScreen) else "tftui"
        self.push_screen(HelpScreen(title, self.help_entries(screen), views=VIEWS))

    def action_warnings(self) -> None:
        if isinstance(self.screen, WarningsScreen):
            return
        warnings = self.data.state.warnings if self.data is not None else []
        self.push_screen(WarningsScreen(list(warnings)))


def run(
    cluster: ClusterPort,
    metrics: MetricsPort | None,
    *,
    clock: Callable[[], datetime] | None = None,
    refresh_interval: float | None = 10.0,
    read_only: bool = False,
    runtime: ConsoleRuntime | None = None,
    analysis: AnalysisSettings | None = None,
    sim_speed: float = 0.0,
    config: ConsoleConfig | None = None,
    crash_folder: Path | None = None,
) -> int:
    """Open the console in the terminal until the operator quits; return the exit status.

    An unexpected error stops the console with status 1 (`CRASH_EXIT`): one line on stderr names
    the error and the log holding its traceback (in `crash_folder`, default the private per-user
    folder of `privatefiles`), instead of Textual's traceback on screen and status 0.

    `config` defaults to the user's file (`tftui.config.load_config`); a bad keymap entry raises
    `ConfigError` naming it before anything is drawn.

    `read_only` offers no write at all; otherwise writes go through `runtime` (default: a runtime
    over `cluster` when it is writable, else the console is read-only anyway). `metrics` is a
    `MetricsPort`; when it also implements `Step1Port` (`GreptimeMetrics`), or is the simulator's
    `SimMetrics`, the waste and alerts views are computed from it.
    """
    if config is None:
        config = load_config()
    origin = f"config {config.path}" if config.path is not None else "config"
    check_keymap(config.keymap, origin)
    app = TfTuiApp(
        cluster,
        metrics,
        clock=clock,
        refresh_interval=refresh_interval,
        read_only=read_only,
        runtime=runtime,
        analysis=analysis,
        sim_speed=sim_speed,
        config=config,
    )
    # Textual would print its own traceback (with local variables) here: it goes nowhere, ours to a log
    app.error_console = Console(file=io.StringIO(), markup=False, highlight=False)
    try:
        app.run()
    except Exception as exc:  # the driver or the app failed outside Textual's own handling
        app.crash = app.crash or exc
    # the terminal is back; a write started before the quit still finishes and is reported
    app.wait_for_writes(lambda line: print(visible(line), file=sys.stderr, flush=True))
    close = getattr(app.switched, "close", None)  # the caller closes the source it passed in
    if callable(close):
        close()
    if app.crash is None and not app.return_code:
        return 0
    error = app.crash or RuntimeError(f"the console ended with status {app.return_code}")
    try:
        log: Path | None = write_crash_log(error, crash_folder)
        problem = ""
    except OSError as exc:
        log, problem = None, str(exc)
    print(crash_line(error, log, problem), file=sys.stderr, flush=True)
    return CRASH_EXIT
