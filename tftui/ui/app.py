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

The class is assembled here from its parts: the shared state and messages (`appbase`), the refresh
loop and analyses (`refreshing`), the writes (`writes`) and `:ns`/`:ctx` (`switching`). This module
adds construction, text hygiene, navigation and `run`; it imports the screens, and the screens see
the app only through `host.Host`, never this class.
"""

from __future__ import annotations

import fnmatch
import io
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Console
from textual import events
from textual.binding import BindingType
from textual.command import Provider
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker

from tftui.config import ConsoleConfig, load_config
from tftui.model import giveway
from tftui.model.gcpause import YoungFreezer
from tftui.model.plaintext import visible
from tftui.model.redact import scrub
from tftui.sources.ports import ClusterPort, MetricsPort
from tftui.ui.actions import MOVES, REGISTRY, bindings
from tftui.ui.appbase import ANALYSIS_GROUP as ANALYSIS_GROUP
from tftui.ui.appbase import MIN_REFRESH_INTERVAL, SWITCH_INTERVAL, utc_now
from tftui.ui.appbase import REFRESH_GROUP as REFRESH_GROUP
from tftui.ui.appbase import WRITE_ACTIONS as WRITE_ACTIONS
from tftui.ui.appbase import ActionDone as ActionDone
from tftui.ui.appbase import DataLoaded as DataLoaded
from tftui.ui.appbase import LoadFailed as LoadFailed
from tftui.ui.appbase import make_runtime as make_runtime
from tftui.ui.background import WorkThread
from tftui.ui.crash import CRASH_EXIT, crash_line, write_crash_log
from tftui.ui.host import Host
from tftui.ui.keymap import check_keymap, normalise_keymap
from tftui.ui.load.analysis import AnalysisKey, AnalysisSettings
from tftui.ui.load.autoscale import AutoscaleLoader
from tftui.ui.load.data import StateReader
from tftui.ui.load.latest import LatestReader
from tftui.ui.load.ops import ConsoleRuntime
from tftui.ui.palette import ActionCommands
from tftui.ui.refreshing import Refreshing
from tftui.ui.render.rowcache import RowCaches
from tftui.ui.render.views import Row
from tftui.ui.screens.base import ResourceScreen
from tftui.ui.screens.metrics import WorkloadScreen
from tftui.ui.screens.modals import HelpEntry, HelpScreen, WarningsScreen
from tftui.ui.screens.placement import PlacementScreen
from tftui.ui.screens.registry import ROOT_VIEWS
from tftui.ui.screens.resource import NodeScreen
from tftui.ui.screens.viewnames import VIEW_ALIASES, VIEWS
from tftui.ui.switching import ScopeCommands
from tftui.ui.themes import DARK, LIGHT, THEMES
from tftui.ui.widgets.plain import ControlFilter
from tftui.ui.writes import Writes
from tftui.ui.writes import released_words as released_words

KEPT_VIEWS = frozenset({"pools", "nodes", "gpus", "workloads"})
"""Root views kept mounted when switched away from, so `:` back to one shows it without building
its screen, its styles and its table's rows again (≈ 0.3 s at 5,000 nodes). Only the big tables:
the other views are cheap to open, and some read what they show as they open (`:ctx`). A kept
view left aside renders nothing until it is shown again (`ResourceScreen.render_data`)."""
KEPT_PREFIX = "view:"


class TfTuiApp(ScopeCommands, Refreshing, Writes):
    """k9s-style console over a `ClusterPort` and an optional `MetricsPort`."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "tftui"
    ENABLE_COMMAND_PALETTE = True
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {ActionCommands}
    BINDINGS: ClassVar[list[BindingType]] = bindings("app")

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
        self.analyses_from = 0
        """Number of the refresh on screen (analyses are cached per refresh)."""
        self._computing: dict[AnalysisKey, Worker[None]] = {}
        self._as_ready = threading.local()  # an analysis thread's view of its outcome (`refreshing`)
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
        self._young = YoungFreezer()  # what each refresh built, out of the cyclic GC's sight
        self._last_input = 0.0
        self.row_caches: RowCaches[Row] = RowCaches()
        self._switch_interval = sys.getswitchinterval()
        """The tables' rows kept between refreshes and view switches (`rowcache`)."""
        self._shown_once = False  # the first refresh shows the state before metrics and operations
        self._next_refresh = 0.0  # monotonic time before which the timer starts no refresh
        self.last_refresh_seconds: float | None = None
        """Wall time of the last finished refresh (what the interval adapts to)."""
        self.last_refresh_cpu_seconds: float | None = None
        """CPU time the refresh thread used for it (on a loaded machine, less than the wall time)."""
        self.prebuilt_tables = 0
        """Tables the refresh thread built for the screen on show (`screens.prebuild`)."""
        self._refresh_thread = WorkThread("tftui-refresh")  # one thread for every refresh (`background`)
        self._latest_reader = LatestReader()  # a remote store's latest samples, waited on briefly
        self._failures = 0
        self._after_frame = []
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
        would otherwise read as markup (`markup` is accepted for Textual's callers and ignored).
        Credentials are masked (`redact.scrub`): an error message may quote a DSN or a token."""
        super().notify(
            visible(scrub(message)), title=visible(title), severity=severity, timeout=timeout, markup=False
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
        self.push_screen(self._root_view("pools"))
        self.action_refresh()
        if self._refresh_interval is not None:
            self._timer = self.set_interval(self._refresh_interval, self._tick, name="refresh")

    async def on_event(self, event: events.Event) -> None:
        if (
            isinstance(event, (events.Key, events.MouseDown, events.MouseScrollDown, events.MouseScrollUp))
            and not event.is_forwarded  # a key comes back here as it bubbles up from the focused widget
        ):
            self._last_input = time.monotonic()  # the refreshes' full collections wait for quiet
            token = giveway.hold()  # background loops wait at their check-points until the frame is out
            self.call_after_refresh(giveway.release, token)
        await super().on_event(event)

    def on_unmount(self) -> None:
        sys.setswitchinterval(self._switch_interval)
        self._young.release()

    def keep_built(self) -> None:
        """What a screen just built on this thread joins the refreshes' in the frozen set
        (`YoungFreezer.keep`; call inside `gc_paused`)."""
        self._young.keep()

    def freeze_built(self) -> None:
        """What a thread built aside for a screen joins the frozen set, with no collection
        (`YoungFreezer.freeze`; call inside `gc_paused`)."""
        self._young.freeze()

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

    # -- navigation ----------------------------------------------------------------------------

    def switch_view(self, name: str, *, fresh: bool = False) -> bool:
        """Replace the whole screen stack with a root view (`:nodes`); False for an unknown name.
        `fresh`: every kept view is dropped first (another cluster's rows, sort and marks)."""
        view = VIEW_ALIASES.get(name.strip().lower())
        if view is None:
            return False
        while len(self.screen_stack) > 2:
            self.pop_screen()
        if not fresh:
            self.switch_screen(self._root_view(view))
            return True
        top, screen = self.screen, ROOT_VIEWS[view]()
        self.switch_screen(screen)  # the view on show leaves the stack now, and is removed after
        self._drop_kept_views(top)
        if view in KEPT_VIEWS:
            self.install_screen(screen, KEPT_PREFIX + view)
        return True

    def _root_view(self, view: str) -> Screen[Any]:
        """The screen of root view `view`: the one kept mounted for it (`KEPT_VIEWS`), else new."""
        if view not in KEPT_VIEWS:
            return ROOT_VIEWS[view]()
        name = KEPT_PREFIX + view
        if self.is_screen_installed(name):
            return self.get_screen(name)
        screen = ROOT_VIEWS[view]()
        self.install_screen(screen, name)
        return screen

    def kept_aside(self) -> list[Screen[Any]]:
        """The kept root views off the stack (`KEPT_VIEWS`); safe from the refresh thread, where a
        view dropped meanwhile is simply not in the list."""
        aside = []
        for view in sorted(KEPT_VIEWS):
            try:
                screen = self.get_screen(KEPT_PREFIX + view)
            except KeyError:
                continue
            if screen not in self.screen_stack:
                aside.append(screen)
        return aside

    def _drop_kept_views(self, leaving: Screen[Any]) -> None:
        """Forget the kept root views and remove them, but `leaving`: the switch that took it off
        the stack removes it once nothing keeps it."""
        for view in KEPT_VIEWS:
            name = KEPT_PREFIX + view
            if self.is_screen_installed(name):
                screen = self.get_screen(name)
                self.uninstall_screen(name)
                if screen is not leaving and screen.is_attached:
                    screen.remove()

    def open_placement(self, pool: str | None, trail: tuple[str, ...] = ()) -> None:
        """`p`: the placement preview for `pool`, as a drill-down of the current view."""
        base = trail or ("pools",)
        self.push_screen(PlacementScreen(pool, trail=(*base, "place")))

    def open_workload(self, key: str, trail: tuple[str, ...] = ("workloads",)) -> None:
        """`enter` on a workload: its detail (request vs use, 24 h sparklines, workers)."""
        self.push_screen(WorkloadScreen(key, trail=(*trail, key)))

    def open_node(self, node: str, trail: tuple[str, ...]) -> None:
        """`enter` on a worker whose workload is already in the trail: its node's detail."""
        self.push_screen(NodeScreen(node, trail=(*trail, node)))

    def help_entries(self, screen: Screen[Any]) -> list[HelpEntry]:
        """The registry's actions bound on `screen` (with the user's keys), in the order a key
        press searches them; writes are marked `!` and absent when read-only."""
        entries: list[HelpEntry] = []
        sorts: list[tuple[str, str]] = []
        moves: list[HelpEntry] = []
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
            (moves if entry.id in MOVES else entries).append(HelpEntry(key, description, entry.tooltip))
        entries += moves  # beside the cursor keys' line, after what a screen does
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
        warnings = self.data.warnings if self.data is not None else []
        self.push_screen(WarningsScreen(list(warnings)))


def as_host(app: TfTuiApp) -> Host:
    """The app as its screens type it; mypy checks here that `TfTuiApp` satisfies `Host`."""
    return app


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
