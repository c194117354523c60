"""The console application: refresh loop, typed messages, view switching, help and warnings.

Loading never blocks the UI: a thread worker reads the ports and builds `ConsoleData` (`data.load`),
then posts `DataLoaded` or `LoadFailed`; the handlers only assign reactives, and every screen
re-renders from `TfTuiApp.data`. A failed cluster read keeps the last good state on screen and says
so in the header; a failed metrics read keeps allocation and shows `metrics: <error>`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker, WorkerState, get_current_worker

from tftui.sources.ports import ClusterPort, MetricsPort
from tftui.ui.data import ClusterLoadError, ConsoleData, describe_error, load
from tftui.ui.screens.modals import HelpEntry, HelpScreen, WarningsScreen
from tftui.ui.screens.resource import ROOT_VIEWS, VIEW_ALIASES, PoolsScreen, ResourceScreen

MIN_REFRESH_INTERVAL = 2.0
"""Shortest automatic refresh period in seconds (k9s clamps the same way)."""
MAX_BACKOFF_TICKS = 31
"""After repeated cluster failures, skip up to this many ticks between attempts."""
REFRESH_GROUP = "refresh"


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


class TfTuiApp(App[None]):
    """k9s-style console over a `ClusterPort` and an optional `MetricsPort`."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "tftui"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+r",
            "refresh",
            "Refresh",
            key_display="^r",
            id="tftui.refresh",
            tooltip="Reload the cluster snapshot and metrics now",
        ),
        Binding(
            "question_mark",
            "help",
            "Help",
            key_display="?",
            id="tftui.help",
            tooltip="Keys of this screen, gauge and flag legend",
        ),
        Binding(
            "w",
            "warnings",
            "Warnings",
            show=False,
            id="tftui.warnings",
            tooltip="Inconsistencies found in the snapshot (count in the header)",
        ),
        Binding("q", "quit", "Quit", id="tftui.quit", tooltip="Leave the console"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, id="tftui.interrupt"),
    ]

    data: reactive[ConsoleData | None] = reactive(None, always_update=True, init=False)
    """The last good refresh (None until the first one lands)."""
    cluster_error: reactive[str | None] = reactive(None, init=False)
    """Why the last cluster read failed; None after a good refresh."""
    loading: reactive[bool] = reactive(False, init=False)

    def __init__(
        self,
        cluster: ClusterPort,
        metrics: MetricsPort | None,
        *,
        clock: Callable[[], datetime] | None = None,
        refresh_interval: float | None = 10.0,
    ) -> None:
        super().__init__()
        self._cluster = cluster
        self._metrics = metrics
        self._clock = clock or utc_now
        self._refresh_interval = (
            None if refresh_interval is None else max(MIN_REFRESH_INTERVAL, refresh_interval)
        )
        self._timer: Timer | None = None
        self._failures = 0
        self._skip_ticks = 0
        self.source_hint = "…"

    def on_mount(self) -> None:
        # Textual's blank default screen stays at the bottom; the root view sits on top of it so
        # `switch_screen` can replace it (the default screen has no result callback to pop).
        self.push_screen(PoolsScreen())
        self.action_refresh()
        if self._refresh_interval is not None:
            self._timer = self.set_interval(self._refresh_interval, self._tick, name="refresh")

    # -- refresh -------------------------------------------------------------------------------

    def _refreshing(self) -> bool:
        return any(
            w.group == REFRESH_GROUP and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
            for w in self.workers
        )

    def _tick(self) -> None:
        """Periodic refresh: never overlaps a running one, backs off after failures."""
        if self._skip_ticks > 0:
            self._skip_ticks -= 1
            return
        if not self._refreshing():
            self.action_refresh()

    def action_refresh(self) -> None:
        """Start a refresh now (a newer one supersedes a running one)."""
        self.loading = True
        self._load_worker()

    @work(thread=True, exclusive=True, group=REFRESH_GROUP, exit_on_error=False, description="refresh")
    def _load_worker(self) -> None:
        worker = get_current_worker()
        now = self._clock()
        try:
            data = load(self._cluster, self._metrics, now)
        except ClusterLoadError as exc:
            if not worker.is_cancelled:
                self.post_message(LoadFailed(str(exc), now, exc.source))
            return
        if not worker.is_cancelled:
            self.post_message(DataLoaded(data))

    def on_data_loaded(self, message: DataLoaded) -> None:
        self._failures = self._skip_ticks = 0
        self.source_hint = message.data.source
        self.cluster_error = None
        self.loading = False
        self.data = message.data

    def on_load_failed(self, message: LoadFailed) -> None:
        self._failures += 1
        self._skip_ticks = min(2 ** (self._failures - 1) - 1, MAX_BACKOFF_TICKS)
        if message.source and self.data is None:
            self.source_hint = message.source
        self.loading = False
        self.cluster_error = message.error

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A bug in loading must not kill the console: report it like a failed read."""
        if event.worker.group == REFRESH_GROUP and event.state == WorkerState.ERROR:
            error = event.worker.error
            self.on_load_failed(
                LoadFailed(describe_error(error) if error else "refresh failed", self._clock())
            )

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

    def help_entries(self, screen: Screen[object]) -> list[HelpEntry]:
        """The console's own bindings active on `screen`, in the order a key press searches them."""
        entries: list[HelpEntry] = []
        seen: set[str] = set()
        for active in screen.active_bindings.values():
            binding = active.binding
            if not (binding.id or "").startswith("tftui.") or not binding.description:
                continue
            if binding.id in seen or binding.id == "tftui.interrupt":
                continue
            seen.add(binding.id or "")
            key = binding.key_display or self.get_key_display(binding)
            entries.append(HelpEntry(key, binding.description, binding.tooltip))
        return entries

    def action_help(self) -> None:
        screen = self.screen
        if isinstance(screen, HelpScreen):
            return
        title = " › ".join(screen.trail) if isinstance(screen, ResourceScreen) else "tftui"
        self.push_screen(HelpScreen(title, self.help_entries(screen)))

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
) -> None:
    """Open the console in the terminal until the operator quits."""
    TfTuiApp(cluster, metrics, clock=clock, refresh_interval=refresh_interval).run()
