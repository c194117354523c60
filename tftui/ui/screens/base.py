"""The frame every resource view shares: header, breadcrumb, tables, `:`/`/` prompt, footer.

`ResourceScreen` re-renders when the app's `data` changes, through the pure builders of `views.py`
and the diffing `ResourceTable`, so a refresh only touches the cells that changed; it also holds
sorting, marks, export, YAML/describe and the view names the prompt accepts. The concrete views
(`resource.py`) only say what to build and what `enter` opens; they live apart so that this frame,
which every other screen module builds on, does not import any of them.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar, cast

from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.events import Resize
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Input

from tftui.model import giveway
from tftui.model.gcpause import gc_paused
from tftui.ui.actions import bindings
from tftui.ui.host import Host
from tftui.ui.load.analysis import AnalysisKey, AnalysisKind
from tftui.ui.load.data import ConsoleData
from tftui.ui.privatefiles import PrivateFileError, default_folder, write_new
from tftui.ui.render.format import count_words
from tftui.ui.render.objects import describe, find_object, object_yaml
from tftui.ui.render.pagememo import PageMemo
from tftui.ui.render.rowcache import RowCache
from tftui.ui.render.scope import Narrowing, RowFilter, parse_filter
from tftui.ui.render.tableops import has_column, table_csv
from tftui.ui.render.views import Cell, Gauges, Layout, Row, Table, layout_candidates
from tftui.ui.render.widths import fits
from tftui.ui.screens.prebuild import Prebuilding, same_shown
from tftui.ui.screens.text import TextScreen
from tftui.ui.screens.viewnames import COMMANDS, PROMPT_HINT, QUIT_COMMANDS, VIEWS
from tftui.ui.widgets.chrome import Breadcrumb, ConsoleHeader, Prompt, PromptMode, SteadyFooter
from tftui.ui.widgets.table import ROW_LIMIT, ResourceTable

EMPTY = Table((), ())
_NO_CELLS: Mapping[str, Mapping[str, Cell]] = MappingProxyType({})
"""No refresh before the one shown: no deltas."""
SORT_FALLBACK: dict[str, tuple[str, ...]] = {"name": ("key",), "pool": ("node",)}
"""Where a view has no column of the sort key's name, the column that plays its part."""
LARGEST_FIRST = frozenset({"gap", "money"})
"""Sorts a waste hunt starts from the top of: the largest gap, the most wasted dollars."""
KEEP_BUILT_AFTER = 100_000
"""Objects a build on the interface thread leaves for the collector above which they are frozen
(`YoungFreezer.keep`). At 5,000 nodes a view's first build leaves 80,000 (`:nodes`) to 900,000
(`:workloads`); a filter key that re-adds 1,000 rows leaves about 40,000, mostly freed by the next
filter key: the collector's young generation handles those at no cost worth a freeze."""


PROMPT_ACTIONS = frozenset({"command", "filter"})
"""The actions of `:` and `/`."""


class ResourceScreen(Prebuilding, Screen[None]):
    """Frame and behaviour shared by every resource view; subclasses say what to build and open."""

    AUTO_FOCUS = "ResourceTable"
    BINDINGS: ClassVar[list[BindingType]] = bindings("resource")

    COUNT_LABELS: ClassVar[dict[str, str]] = {}
    """What the breadcrumb calls each table's row count (empty: the bare number)."""
    FILTERED: ClassVar[frozenset[str] | None] = None
    """Ids of the tables `/` filters (None: all of them); sort keys apply to the same tables."""
    OBJECT_KINDS: ClassVar[dict[str, str]] = {}
    """Table id → the kind of object its rows are (for `y` YAML and `d` describe)."""
    CACHE_BUILDS: ClassVar[bool] = False
    ANALYSIS_EVERY: ClassVar[int] = 1
    WHOLE_NAMES: ClassVar[bool] = False
    """Prefer a shorter gauge to a cut name (see `render_data`)."""
    """Refreshes after which the analyses shown are computed again (1: on every refresh)."""
    NEEDS: ClassVar[frozenset[str]] = frozenset()
    """What of `ConsoleData.pending` this screen shows ("metrics", "operations"): while the first
    refresh still loads it, the screen says so instead of showing empty figures as findings."""
    """`build` depends only on the refresh, the layout and the theme (not on analyses or a
    selection), so its result is kept until one of them changes."""

    def __init__(self, trail: tuple[str, ...]) -> None:
        super().__init__()
        self.trail = trail
        self.needle = ""
        self.row_filter = RowFilter()
        """`needle` parsed (`!text`, `-l selector`)."""
        self._before_prompt: Widget | None = None
        self._layout: Layout | None = None  # of the last render; a resize within it changes nothing
        self.sort_column: str | None = None
        self.sort_reverse = False
        self.marks: dict[str, set[str]] = {}
        """Marked row keys per table id (`space`)."""
        self.shown_tables: dict[str, Table] = {}
        """Each table as last shown (filtered and sorted, before marks and deltas): what `ctrl+s` exports."""
        self._built: dict[str, tuple[int, dict[str, Mapping[str, Cell]]]] = {}
        self._previous: dict[str, dict[str, Mapping[str, Cell]]] = {}
        # table id → (layout, theme) → (refresh, table, analyses shown): one per layout tried, as
        # a render tries them in turn (`layout_candidates`) on every key that re-renders
        self._build_cache: dict[str, dict[tuple[Layout, str], tuple[int, Table, tuple[object, ...]]]] = {}
        self._row_caches: dict[str, RowCache[Row]] = {}
        self._narrowing = Narrowing()  # each table's last filtered rows: a key typed narrows them
        self._pages = PageMemo()  # each table's last page, kept while made from the same inputs
        self._stale = False  # a change arrived while off the stack (a kept view left aside)

    @property
    def is_root(self) -> bool:
        """Root views (reached with `:`) have a one-element trail; drill-downs are deeper."""
        return len(self.trail) == 1

    @property
    def tui(self) -> Host:
        return cast(Host, self.app)

    def crumb_trail(self) -> tuple[str, ...]:
        """The breadcrumb (screens with a selection add it to their trail)."""
        return self.trail

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Every screen asks the app: write actions vanish when the console is read-only. `:` and
        `/` (priority bindings) are text while an input has the focus: the prompt or a form field —
        unless the field leaves that action to the screen (`leaves_to_screen`: a placement field,
        where no value holds a `:`)."""
        focused = self.focused
        if (
            action in PROMPT_ACTIONS
            and isinstance(focused, Input)
            and action not in getattr(focused, "leaves_to_screen", ())
        ):
            return False
        return self.tui.allows(action)

    def default_focus(self) -> Widget | None:
        """Where focus goes when the prompt closes and nothing was focused before."""
        return self.query(ResourceTable).first() if self.query(ResourceTable) else None

    # -- composition ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield ConsoleHeader()
        yield Breadcrumb("", id="crumbs")
        yield from self.compose_body()
        yield Prompt(COMMANDS, hint=PROMPT_HINT, on_filter=self._set_needle, id="prompt")
        yield SteadyFooter()

    def compose_body(self) -> ComposeResult:
        yield ResourceTable(id="main")

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        """The full (unfiltered) table for the ResourceTable with id `table_id`."""
        raise NotImplementedError

    def rows_of(self, table_id: str) -> RowCache[Row]:
        """The rows of table `table_id` kept between refreshes (a refresh rebuilds what changed)."""
        cache = self._row_caches.get(table_id)
        if cache is None:  # kept by the app: switching back to this view re-uses them
            key = (type(self).__name__, self.crumb_trail(), table_id)
            cache = self._row_caches[table_id] = self.tui.row_caches.get(key)
        return cache

    def open(self, table_id: str, key: str) -> None:
        """Drill down from the row `key` of table `table_id` (default: nothing below)."""

    def analysis_keys(self) -> tuple[AnalysisKey, ...]:
        """The slow analyses this screen shows: requested on every render, cached per refresh."""
        return ()

    def analysis_every(self, kind: AnalysisKind) -> int:
        """Refreshes after which the analysis `kind` is computed again (`ANALYSIS_EVERY`)."""
        return self.ANALYSIS_EVERY

    def crumb_count(self, counts: list[str]) -> str:
        """The breadcrumb's count part (screens waiting for an analysis say so)."""
        return ", ".join(counts)

    # -- rendering -----------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.query_one(Prompt).display = False
        self.watch(self.app, "data", self.render_data, init=False)
        if self.analysis_keys():
            self.watch(self.app, "analyses", self.render_data, init=False)
        # gauge colours come from the theme (component classes): redraw once the new CSS applies,
        # or free-capacity dots and separators keep the old theme's colour until the next refresh
        self.watch(self.app, "theme", self._theme_changed, init=False)
        self.watch(self.app, "namespace", self._scope_changed, init=False)
        self.render_data()

    def on_unmount(self) -> None:
        """Drop this screen's watchers of the app: Textual prunes a closed screen's watchers only
        when that attribute next changes, and `theme` and `namespace` seldom do, so every view
        switched away from stayed alive with its table's rows (megabytes at 5,000 nodes). A closed
        screen is cyclic garbage, which waits for the collector (or for `gcpause.YoungFreezer`'s
        next reclaim, when it closed while a refresh ran): it waits without its rows."""
        watchers = getattr(self.app, "__watchers", None)
        if isinstance(watchers, dict):
            for callbacks in watchers.values():
                callbacks[:] = [(node, callback) for node, callback in callbacks if node is not self]
        for cache in (self.shown_tables, self._built, self._previous, self._build_cache, self._row_caches):
            cache.clear()
        self._aside.clear()
        self._narrowing.clear()
        self._pages.clear()

    def _scope_changed(self, _namespace: str | None) -> None:
        self.render_data()

    def _theme_changed(self, _theme: str) -> None:
        self.call_after_refresh(self.render_data)

    def on_resize(self, event: Resize) -> None:
        self.render_data()  # column widths follow the terminal

    def render_data(self) -> None:
        if self.is_attached and self not in self.app.screen_stack:
            self._stale = True  # a kept view left aside (`app.KEPT_VIEWS`): rendered when shown
            return
        # builds allocate thousands of rows that all stay alive: a full collection triggered here
        # would rescan the whole heap while the operator waits for the frame (see `gcpause`), and
        # each later one would rescan them until the next refresh freezes them: frozen now
        with gc_paused():
            self._render_data()
            if gc.get_count()[0] > KEEP_BUILT_AFTER:
                self.tui.keep_built()

    def on_screen_suspend(self) -> None:
        """Off the stack (kept for a later `:`, or going): what was prebuilt for the next refresh
        holds that refresh's whole data; a kept view builds again when shown."""
        self._prebuilt.clear()
        self._presorted.clear()

    def on_screen_resume(self) -> None:
        # shown by a key (`:nodes`, enter, esc): that key's hold ended with the old screen's frame
        self._hold_until_drawn()
        if self._stale:
            self._stale = False
            self.render_data()

    def _hold_until_drawn(self) -> None:
        """What a key just brought up (this screen, its filtered rows) is drawn after the key's own
        frame: background work waits on until the next frame is out too (`giveway.hold_on`)."""
        if token := giveway.hold_on():
            self.app.call_after_refresh(giveway.release, token)

    def _render_data(self) -> None:
        data = self.tui.data
        if data is None:
            self.query_one(Breadcrumb).show(self.crumb_trail(), "loading…", self.needle)
            return
        waiting = [what for what in data.pending if what in self.NEEDS]
        if waiting:
            self.query_one(Breadcrumb).show(self.trail, f"loading {' and '.join(waiting)}…", self.needle)
            return
        for kind, subject in self.analysis_keys():
            have = self.tui.analysis(kind, subject)
            if have is None or self.tui.data_seq - have.seq >= self.analysis_every(kind):
                self.tui.request_analysis(kind, subject)
        width = self.size.width or self.app.size.width
        tables = list(self.query(ResourceTable))
        # the first layout whose tables fit without cutting a name below its least width: at the
        # edge of a band (or with long names), the gauges give up their figures, then bar length
        candidates = layout_candidates(width)
        # screens whose names must stay whole (pools: a handful of rows, every one a name to act on)
        # first try every layout with nothing cut, then the least widths as the others do
        passes = (True, False) if self.WHOLE_NAMES else (False,)
        for whole, layout in ((w, lay) for w in passes for lay in candidates):
            maybe = [self._prepare(table, data, layout) for table in tables]
            prepared = [p for p in maybe if p is not None]
            if len(prepared) < len(maybe):  # built in a thread (`build_aside`): rendered when built
                self.query_one(Breadcrumb).show(self.crumb_trail(), "building rows…", self.needle)
                return
            if all(
                fits(p[3], self.table_width(t), scrollbar=p[4], whole=whole)
                for t, p in zip(tables, prepared, strict=True)
            ):
                break
        self._layout = layout
        for name in ("narrow", "normal", "wide"):
            self.set_class(layout.name == name, f"-{name}")
        counts: list[str] = []
        for table, (full, shown, page, marked, scrollbar) in zip(tables, prepared, strict=True):
            self.shown_tables[table.id or ""] = shown
            table.show(self._pages.fitted(table.id or "", marked, self.table_width(table), scrollbar))
            label = self.COUNT_LABELS.get(table.id or "", "")
            counts.append(count_words(len(page.rows), len(shown.rows), len(full.rows), label))
        self.render_extra(data, layout)
        self.query_one(Breadcrumb).show(
            self.crumb_trail(), self.crumb_count(counts), self.needle, self.crumb_state()
        )

    def _prepare(
        self, table: ResourceTable, data: ConsoleData, layout: Layout
    ) -> tuple[Table, Table, Table, Table, bool] | None:
        """(built, shown, page, page as displayed, whether a scrollbar shows) of one table; None
        while it is built aside."""
        full = self._built_table(table, data, layout)
        if full is None:
            return None
        filtered = self.FILTERED is None or (table.id or "") in self.FILTERED
        kind = self.OBJECT_KINDS.get(table.id or "")
        key = (table.id or "", layout.name)  # a render tries layouts in turn: one kept for each
        scoped = self._narrowing.scoped(
            table.id or "",
            full,
            data.state,
            kind,
            self.row_filter if filtered else RowFilter(),
            self.tui.namespace,
        )
        # sorted without sorting every row again on each filter key (`PageMemo.sorted`)
        shown = self._pages.sorted(key, full, scoped, self.current_sort(table.id or ""))
        # only the first ROW_LIMIT rows reach the DataTable (k9s caps the same way): filling it
        # costs per row, and 40,000 GPUs took minutes; sort, filter, marks and export still
        # work on `shown`, every matching row, through plain values: the gauges (lazy cells)
        # are drawn when the table shows their row, so for this page only
        made = self._pages.prepare(
            key,
            shown,
            self._previous_cells(table.id or "", full),
            self.marks.get(table.id or "", ()),
            ROW_LIMIT,
        )
        # a laid-out table taller than its rows shows no scrollbar: no room kept for one
        scrollbar = not table.size.height or len(made.marked.rows) >= table.size.height - 1
        return full, shown, made.page, made.marked, scrollbar

    def table_width(self, table: ResourceTable) -> int:
        """The cells `table` has for its columns: its own width once laid out, else the screen's."""
        return table.size.width or self.size.width or self.app.size.width

    def crumb_state(self) -> str:
        """Sort order and marks, when set (`sort tflops↓ · 2 marked`)."""
        parts = []
        if self.row_filter.error is not None:
            parts.append(f"{self.row_filter.error} (filtering nothing)")
        if self.sort_column is not None:
            parts.append(f"sort {self.sort_column}{'↓' if self.sort_reverse else '↑'}")
        marked = sum(len(m) for m in self.marks.values())
        if marked:
            parts.append(f"{marked} marked")
        return " · ".join(parts)

    def _built_table(self, table: ResourceTable, data: ConsoleData, layout: Layout) -> Table | None:
        """`build`, cached per refresh, layout and theme when the screen allows it: filter
        keystrokes, sort and marks then re-use the built rows and the gauges already drawn. None
        while a build nothing was kept for runs aside (`build_aside`)."""
        table_id = table.id or ""
        if not self.CACHE_BUILDS:
            return self.build(table_id, data, Gauges(layout, table.gauge_styles()))
        # The analyses the rows show (autoscale recommendations) arrive after the data: a new one
        # invalidates the cache like a refresh does. Compared by identity: each result is a new object.
        shown = self.analyses_shown()
        seq, key = self.tui.data_seq, (layout, self.app.theme)
        built = self._build_cache.setdefault(table_id, {})
        cached = built.get(key)
        if cached is not None and cached[0] == seq and same_shown(cached[2], shown):
            return cached[1]
        gauges = Gauges(layout, table.gauge_styles())
        taken = self.take_prebuilt(table_id, data, gauges, shown)
        if taken is not None:
            full = taken.table
            if taken.presorted is not None:  # sorted in the refresh thread: not sorted again here
                self._pages.sorted_already((table_id, layout.name), taken.presorted)
        else:
            if self.build_aside(table_id, data, gauges):
                return None
            full = self.build(table_id, data, gauges)
        for old in [k for k, v in built.items() if v[0] != seq]:
            del built[old]  # an earlier refresh's
        built[key] = (seq, full, shown)
        self.built_with(table_id, gauges, seq)
        return full

    def current_sort(self, table_id: str) -> tuple[str, bool] | None:
        column, reverse = self.sort_column, self.sort_reverse  # read once: a refresh thread may ask
        filtered = self.FILTERED is None or table_id in self.FILTERED
        return (column, reverse) if filtered and column is not None else None

    def analyses_shown(self) -> tuple[object, ...]:
        return tuple(self.tui.analysis(kind, subject) for kind, subject in self.analysis_keys())

    def _previous_cells(self, table_id: str, full: Table) -> Mapping[str, Mapping[str, Cell]]:
        """The cells of the refresh before the one on screen (for `↑`/`↓` deltas)."""
        seq = self.tui.data_seq
        last = self._built.get(table_id)
        if last is not None and last[0] != seq:
            self._previous[table_id] = last[1]
        if last is None or last[0] != seq:  # once per refresh, not on every filter keystroke
            self._built[table_id] = (seq, {r.key: r.cells for r in full.rows})
        return self._previous.get(table_id, _NO_CELLS)  # one object: the page memo compares identity

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        """Hook for screens with more than tables (the node summary)."""

    # -- actions -------------------------------------------------------------------------------

    def _open_prompt(self, mode: PromptMode) -> None:
        prompt = self.query_one(Prompt)
        if not prompt.display:
            self._before_prompt = self.focused
        if mode == "command":
            prompt.open("command")
        else:
            prompt.open("filter", self.needle)

    def action_command(self) -> None:
        self._open_prompt("command")

    def action_filter(self) -> None:
        self._open_prompt("filter")

    def _close_prompt(self) -> None:
        self.query_one(Prompt).close()
        target = self._before_prompt if self._before_prompt is not None else self.default_focus()
        self._before_prompt = None
        if target is not None:
            target.focus()

    def _set_needle(self, needle: str) -> None:
        if needle != self.needle:
            self._hold_until_drawn()  # the key's hold may end with the prompt's own frame
            self.needle = needle
            self.row_filter = parse_filter(needle)
            self.render_data()

    def action_back(self) -> None:
        prompt = self.query_one(Prompt)
        if prompt.display:
            if prompt.mode == "filter":
                self._set_needle("")
            self._close_prompt()
        elif self.needle:
            self._set_needle("")
        elif not self.is_root:
            self.app.pop_screen()

    @on(Input.Submitted, "#prompt-input")
    def _prompt_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        prompt = self.query_one(Prompt)
        if prompt.mode == "filter":
            self._set_needle(event.value)
            self._close_prompt()
            return
        command = event.value.strip()  # a context name keeps its case
        self._close_prompt()
        if not command:
            return
        if command.lower() in QUIT_COMMANDS:
            self.app.exit()
        elif not self.tui.run_command(command):
            self.notify(f"unknown view {command!r}: try {', '.join(VIEWS)}", severity="warning")

    # -- k9s keys on the selected row and the table (registry scope "resource") ------------------

    def active_table(self) -> ResourceTable | None:
        """The focused table, else the screen's first one."""
        focused = self.focused
        if isinstance(focused, ResourceTable):
            return focused
        tables = self.query(ResourceTable)
        return tables.first() if tables else None

    def selected_object(self) -> tuple[str, str] | None:
        """(kind, key) of the row under the cursor, when its table's rows are cluster objects."""
        table = self.active_table()
        if table is None:
            return None
        kind = self.OBJECT_KINDS.get(table.id or "")
        key = table.cursor_key
        return (kind, key) if kind is not None and key is not None else None

    def action_sort(self, column: str) -> None:
        tables = [
            t for t in self.query(ResourceTable) if self.FILTERED is None or (t.id or "") in self.FILTERED
        ]
        candidates = (column, *SORT_FALLBACK.get(column, ()))
        found = [
            c
            for c in candidates
            if any(has_column(self.shown_tables.get(t.id or "", EMPTY), c) for t in tables)
        ]
        if not found:
            self.notify(f"no {column} column to sort by here", severity="warning")
            return
        column = found[0]
        if self.sort_column == column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, column in LARGEST_FIRST
        self.render_data()
        # a new order is read from its top (the largest gap, the most dollars): the cursor does
        # not follow its row into the middle of the list
        for table in tables:
            if table.row_count:
                table.move_cursor(row=0, animate=False)

    def action_mark(self) -> None:
        table = self.active_table()
        key = table.cursor_key if table is not None else None
        if table is None or key is None:
            return
        marks = self.marks.setdefault(table.id or "", set())
        marks.symmetric_difference_update({key})
        self.render_data()
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1, animate=False)

    def action_clear_marks(self) -> None:
        if any(self.marks.values()):
            self.marks.clear()
            self.render_data()

    def action_copy_names(self) -> None:
        table = self.active_table()
        if table is None:
            return
        marked = self.marks.get(table.id or "", set())
        shown = self.shown_tables.get(table.id or "", EMPTY)  # marks beyond the displayed rows count too
        names = [r.key for r in shown.rows if r.key in marked] or (
            [table.cursor_key] if table.cursor_key else []
        )
        if not names:
            self.notify("nothing to copy", severity="warning")
            return
        self.app.copy_to_clipboard("\n".join(names))
        what = names[0] if len(names) == 1 else f"{len(names)} names"
        self.notify(f"copied {what} to the clipboard")

    def action_export(self) -> None:
        table = self.active_table()
        shown = self.shown_tables.get(table.id or "") if table is not None else None
        if table is None or shown is None:
            self.notify("no table to export here", severity="warning")
            return
        folder = self.tui.config.export_dir  # None: the private per-user folder in <tmp>
        stamp = self.tui.now().strftime("%Y%m%d-%H%M%S")
        name = "-".join([*self.trail, table.id or "table", stamp])
        try:
            path = write_new(folder, name, ".csv", table_csv(shown))
        except OSError as exc:
            where = folder if folder is not None else default_folder()
            text = str(exc) if isinstance(exc, PrivateFileError) else f"{where}: {exc.strerror or exc}"
            self.notify(f"export failed: {text}", severity="error", timeout=10)
            return
        self.notify(f"exported {len(shown.rows)} rows to {path}", timeout=10)

    def _open_object(self, how: str, selected: tuple[str, str] | None = None) -> None:
        selected = selected or self.selected_object()
        data = self.tui.data
        if selected is None or data is None:
            self.notify("no cluster object selected here", severity="warning")
            return
        kind, key = selected
        if how == "yaml":
            obj = find_object(data.state, kind, key)
            text = object_yaml(obj) if obj is not None else None
        else:
            text = describe(data, kind, key)
        if text is None:
            self.notify(f"{kind} {key} is not in the snapshot", severity="warning")
            return
        self.app.push_screen(TextScreen((*self.crumb_trail(), key, how), text))

    def action_yaml(self) -> None:
        self._open_object("yaml")

    def action_describe(self) -> None:
        self._open_object("describe")

    def open_worker(self, key: str) -> None:
        """`enter` on a worker: the first of its workload and its node that the breadcrumb does not
        already hold (going "down" to where the operator came from only repeated the trail), else
        its description."""
        data = self.tui.data
        worker = data.state.workers.get(key) if data is not None else None
        if data is None or worker is None:
            self.notify(f"worker {key} is no longer in the cluster", severity="warning")
            return
        trail = set(self.crumb_trail())
        workload = f"{worker.namespace}/{worker.workload}" if worker.workload else None
        if workload is not None and workload in data.state.workloads and workload not in trail:
            self.tui.open_workload(workload, self.crumb_trail())
        elif worker.node is not None and worker.node in data.state.nodes and worker.node not in trail:
            self.tui.open_node(worker.node, self.crumb_trail())
        else:
            self._open_object("describe", ("Pod", key))

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.open(event.data_table.id or "", str(event.row_key.value))
