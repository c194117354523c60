"""The console app's shared ground: its reactive state, constants, messages and runtime factory.

`TfTuiApp` is assembled from mixins (refresh and analyses in `refreshing`, writes in `writes`, the
`:ns`/`:ctx` commands in `switching`); each needs the same state and messages. They live here, below
all of them, so that no mixin imports the app class (nor another mixin) to reach them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from textual.app import App
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker

from tftui.config import ConsoleConfig
from tftui.engine.plan import Plan
from tftui.model.gcpause import YoungFreezer
from tftui.sources.ports import ClusterPort, MetricsPort, WritableClusterPort
from tftui.ui.actions import MUTATING
from tftui.ui.background import WorkThread
from tftui.ui.load.analysis import Analysis, AnalysisKey, AnalysisKind, AnalysisSettings
from tftui.ui.load.autoscale import AutoscaleLoader
from tftui.ui.load.data import ConsoleData, StateReader
from tftui.ui.load.latest import LatestReader
from tftui.ui.load.ops import CapacityFigures, ConsoleRuntime
from tftui.ui.render.rowcache import RowCaches
from tftui.ui.render.views import Row

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
INPUT_QUIET = 30.0
"""Seconds without a key or a click after which the console counts as quiet: a refresh then may
run the cyclic GC's occasional full collection (`YoungFreezer`), which stops every thread."""
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
    """An analysis finished (or failed: `analysis.error`) for the refresh `analysis.seq`; it is
    the outcome as kept after `previous` (`Analysis.keeping`), the one the screens prebuilt for."""

    def __init__(self, analysis: Analysis, previous: Analysis | None = None) -> None:
        super().__init__()
        self.analysis = analysis
        self.previous = previous


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


class ConsoleBase(App[None]):
    """The state every part of `TfTuiApp` reads and writes (set in `TfTuiApp.__init__`)."""

    # The refresh cycle's reactives do not repaint the whole screen (Textual's default for an
    # App's reactive): their watchers update the widgets that show them, each repainting its own
    # region. A full-screen render per set cost the interface thread two full frames per refresh.
    data: reactive[ConsoleData | None] = reactive(None, always_update=True, init=False, repaint=False)
    """The last good refresh (None until the first one lands)."""
    cluster_error: reactive[str | None] = reactive(None, init=False, repaint=False)
    """Why the last cluster read failed; None after a good refresh."""
    loading: reactive[bool] = reactive(False, init=False, repaint=False)
    analyses: reactive[dict[AnalysisKey, Analysis]] = reactive(
        dict, always_update=True, init=False, repaint=False
    )
    """The latest analysis of each kind (and workload history), replaced as a whole on each change."""
    stale: reactive[bool] = reactive(False, init=False, repaint=False)
    """The data on screen is older than `STALE_AFTER` refresh periods (header says STALE)."""
    paused: reactive[bool] = reactive(False, init=False)
    """Automatic refresh paused (`R`): the screen stays as it is; `ctrl+r` still refreshes."""
    namespace: reactive[str | None] = reactive(None, init=False)
    """The `:ns` scope every view is filtered to (None: all namespaces)."""

    config: ConsoleConfig
    analysis_settings: AnalysisSettings
    runtime: ConsoleRuntime | None
    read_only: bool
    data_seq: int
    analyses_from: int
    """Analyses requested for an earlier refresh are dropped when they land (a context switch)."""
    source_hint: str
    row_caches: RowCaches[Row]
    writes_in_flight: dict[str, str]
    last_refresh_seconds: float | None
    last_refresh_cpu_seconds: float | None
    prebuilt_tables: int
    _refresh_thread: WorkThread
    _latest_reader: LatestReader
    _cluster: ClusterPort
    _metrics: MetricsPort | None
    _clock: Callable[[], datetime]
    _cluster_lock: threading.Lock
    _outcome_lock: threading.Lock
    _reader: StateReader
    _young: YoungFreezer
    _last_input: float
    """Monotonic time of the last key or click (`on_event`)."""
    _shown_once: bool
    _read_only_requested: bool
    _sim_speed: float
    _sim_wall: float | None
    _computing: dict[AnalysisKey, Worker[None]]
    _as_ready: threading.local
    _autoscale_loader: AutoscaleLoader
    _writing: set[str]
    _unseen: dict[int, str]
    _refresh_interval: float | None
    _timer: Timer | None
    _next_refresh: float
    _failures: int
    _skip_ticks: int
    _after_frame: list[DataLoaded | AnalysisReady]
    """Refresh and analysis outcomes that arrived while a key's frame was pending (`Refreshing`)."""

    if TYPE_CHECKING:  # defined by the other parts; declared here for the parts that call them

        def switch_view(self, name: str, *, fresh: bool = False) -> bool: ...
        def action_refresh(self) -> None: ...
        def dropped(self, source: str) -> bool: ...
        def kept_aside(self) -> list[Screen[Any]]: ...
        def analysis(self, kind: AnalysisKind, subject: str = "") -> Analysis | None: ...
