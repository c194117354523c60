"""`ResourceTable`: a DataTable that diff-updates from a `views.Table` instead of clearing.

`clear()` + `add_rows()` on every refresh resets the cursor and scroll position and throws away the
render caches. Here rows keep stable keys: stale rows are removed, changed cells
are updated one by one, new rows are added, and the table is re-ordered only when rows were added.
The cursor follows its row key, so a refresh never moves the operator's selection. Cells are
shown as plain text whatever the builder made of them (`widgets.plain`): object text is never markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import zip_longest
from typing import TYPE_CHECKING, Any, ClassVar, Self

from rich.console import RenderableType
from rich.style import Style
from textual.binding import BindingType
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import DataTable
from textual.widgets.data_table import CellKey, ColumnKey, DuplicateKey, RowDoesNotExist, RowKey
from textual.widgets.data_table import Row as DataRow

from tftui.ui.actions import bindings
from tftui.ui.render.format import fit_number, is_number
from tftui.ui.render.gauge import COMPONENT_CLASSES, GaugeStyles
from tftui.ui.render.views import Column, Row, Table, rendered
from tftui.ui.render.widths import content_widths
from tftui.ui.widgets.plain import plain_cell
from tftui.ui.widgets.tabledraw import KeptDrawing

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_keys, dict_values

ROW_LIMIT = 1_000
"""Rows a resource view hands its table at most (the rest: filter or sort to bring them up, as in
k9s). A DataTable pays per row added; 40,000 GPUs took minutes to fill and every later re-order
again. The view says `showing 1,000 of 40,000 — / to filter`; export and marks see every row."""
REBUILD_AFTER = 200
"""Row removals above which `show` clears and re-adds instead of removing one by one."""
EAGER_ROWS = 100
"""Rows whose cells are built when added (a screenful on a tall terminal); below them a row's cells
are built when the table first reads them, to draw it or hand it out (`LazyCells`). A filter key
that re-adds 1,000 rows then builds the cells of the screenful it shows, not of all 1,000."""

Shape = tuple[tuple[str, ...], tuple[int, ...]]
"""The column keys and widths a row's cells were built for."""


class RowCells:
    """One row's cells for a shape of columns: the values as compared (gauges drawn, numbers fitted)
    and the plain cells handed to the DataTable, built on first use and then kept."""

    __slots__ = ("_cells", "_values", "row", "shape")

    def __init__(self, row: Row, shape: Shape) -> None:
        self.row, self.shape = row, shape
        self._values: list[RenderableType] | None = None
        self._cells: list[RenderableType] | None = None

    @property
    def built(self) -> bool:
        return self._values is not None

    @property
    def values(self) -> list[RenderableType]:
        if self._values is None:
            cells = self.row.cells
            self._values = [_fit(rendered(cells.get(k, "")), w) for k, w in zip(*self.shape, strict=True)]
        return self._values

    @property
    def cells(self) -> list[RenderableType]:
        if self._cells is None:  # plain text whatever the builder made (a `str` is read as markup)
            self._cells = [plain_cell(v) for v in self.values]
        return self._cells


class LazyCells(dict[ColumnKey, RenderableType]):
    """A DataTable row's cells (its `_data[row_key]`) that are built when first read.

    Every read fills the dict from its `RowCells` first, so DataTable and the drawing code see
    an ordinary row. Iterating an unfilled row yields nothing: the one iteration of a row's keys in
    the pinned DataTable, `remove_row`'s, discards updated cells, and an unread row has none."""

    __slots__ = ("_columns", "_source")

    def __init__(self, columns: Sequence[ColumnKey], source: RowCells) -> None:
        super().__init__()
        self._columns: Sequence[ColumnKey] | None = columns
        self._source: RowCells | None = source

    @property
    def filled(self) -> bool:
        return self._source is None

    def _fill(self) -> None:
        if self._columns is not None and self._source is not None:
            columns, source = self._columns, self._source
            self._columns = self._source = None
            dict.update(self, zip_longest(columns, source.cells))

    def __missing__(self, key: ColumnKey) -> RenderableType:
        if self._source is None:
            raise KeyError(key)
        self._fill()
        return dict.__getitem__(self, key)

    def __contains__(self, key: object) -> bool:
        self._fill()
        return dict.__contains__(self, key)

    def __len__(self) -> int:
        self._fill()
        return dict.__len__(self)

    def __setitem__(self, key: ColumnKey, value: RenderableType) -> None:
        self._fill()
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: ColumnKey) -> None:
        self._fill()
        dict.__delitem__(self, key)

    def get(self, key: ColumnKey, default: Any = None) -> Any:
        self._fill()
        return dict.get(self, key, default)

    def keys(self) -> dict_keys[ColumnKey, RenderableType]:
        self._fill()
        return dict.keys(self)

    def values(self) -> dict_values[ColumnKey, RenderableType]:
        self._fill()
        return dict.values(self)

    def items(self) -> dict_items[ColumnKey, RenderableType]:
        self._fill()
        return dict.items(self)


Made = tuple[Row, RowCells]
"""A row as `ResourceTable` added it: the row object and its cells."""


def fitted_columns(
    columns: Sequence[Column], rows: Sequence[Row], natural: Mapping[str, int] | None = None
) -> tuple[Column, ...]:
    """`columns`, each widened to its widest numeric cell that no abbreviation fits (numbers are
    never cut: `format.fit_number`). `natural`: each column's widest drawn cell (`widths`), when
    known: a column no wider than that has no number to widen it, and its cells are not looked at."""
    widths = {c.key: c.width for c in columns}
    for key in widths:
        if natural is not None and natural.get(key, 0) <= widths[key]:
            continue
        for row in rows:
            text, width = row.cells.get(key), widths[key]
            if (
                isinstance(text, str)
                and len(text) > width
                and is_number(text)
                and not fit_number(text, width)
            ):
                widths[key] = len(text)
    return tuple(Column(c.key, c.label, widths[c.key]) for c in columns)


def _fit(value: RenderableType, width: int) -> RenderableType:
    """A number wider than its column abbreviated with a unit; anything else as it is."""
    if isinstance(value, str) and len(value) > width and is_number(value):
        return fit_number(value, width) or value
    return value


def gauge_styles_of(widget: Widget) -> GaugeStyles:
    """Gauge styles from a widget's `gauge--*` component classes (foreground colour only).

    Only the colour is taken, so the table's cursor and zebra backgrounds still show through.
    """

    def fg(name: str) -> Style:
        styles = widget.get_component_styles(name)
        return Style(color=styles.color.rich_color, bold=styles.text_style.bold or None)

    return GaugeStyles(
        fg("gauge--ok"), fg("gauge--warn"), fg("gauge--crit"), fg("gauge--free"), fg("gauge--alloc")
    )


class ResourceTable(KeptDrawing):
    """One resource list; `show(table)` makes it display exactly `table`, changing as little as possible.

    The number of `add_row`/`remove_row`/`update_cell` calls of the last `show` is kept in
    `last_changes`, so tests can check that an unchanged refresh touches nothing.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = DataTable.COMPONENT_CLASSES | set(COMPONENT_CLASSES)
    DEFAULT_CSS = """
    ResourceTable > .gauge--ok { color: $success; }
    ResourceTable > .gauge--warn { color: $warning; }
    ResourceTable > .gauge--crit { color: $error; text-style: bold; }
    ResourceTable > .gauge--free { color: $foreground 35%; }
    ResourceTable > .gauge--alloc { color: $primary-lighten-3; }
    /* the cursor row: a tint of $primary, not $primary itself, with the theme's text colour: red,
       yellow and green figures and the gauges' layers stay legible on it in both themes (on solid
       $primary a red figure had a contrast of 1.2 to 1.3; on this tint 2.4 dark, 3.9 light) */
    ResourceTable:focus > .datatable--cursor { background: $primary 25%; color: $foreground; }
    """
    BINDINGS: ClassVar[list[BindingType]] = bindings("table")

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", cursor_foreground_priority="renderable")
        self._columns_shown: tuple[Column, ...] = ()
        self._shown: dict[str, RowCells] = {}
        self._order: list[str] = []
        self._rows: dict[str, Row] = {}  # the row objects shown: the very same one again is unchanged
        # per row added by the last two syncs (a filter key and its backspace): the row object, the
        # column keys and widths, the values as compared and the cells handed over
        self._made: dict[str, Made] = {}
        self._made_before: dict[str, Made] = {}
        self._synced: tuple[tuple[str, ...], tuple[int, ...]] = ((), ())  # columns of the last sync
        self._restore: str | None = None  # cursor key to restore after a column rebuild
        self._last_shown: Table | None = None  # the table `show` was last given
        self.last_changes = 0

    def on_unmount(self) -> None:
        """Let the rows go: a closed view is cyclic garbage that may wait for the collector (see
        `ResourceScreen.on_unmount`). Only the containers: nothing reactive is set on the way out."""
        self._clear_caches()
        self._data.clear()
        self.rows.clear()
        self._y_offsets.clear()
        self._shown.clear()
        self._order.clear()
        self._rows.clear()
        self._made.clear()
        self._made_before.clear()
        self._last_shown = None
        self.forget_drawn()

    def clear(self, columns: bool = False) -> Self:
        """DataTable's `clear`, and this table's record of what it shows with it: the next `show`
        adds every row again, even the very table it was last given."""
        self._last_shown = None
        self._shown, self._order, self._rows = {}, [], {}
        return super().clear(columns=columns)

    def gauge_styles(self) -> GaugeStyles:
        """The theme's gauge colours (the `gauge--*` component classes of this table)."""
        return gauge_styles_of(self)

    # -- what Textual measures (pinned version) ---------------------------------------------------
    # Every column here has a width of its own (`add_column(width=…)`), so a cell's measured width
    # is never read: DataTable only draws a column at its measured width when it has none. Yet it
    # measures every cell of each added row (1,000 rows × 10 columns on a view switch: ≈ 0.5 s) and,
    # for an updated cell that got narrower, every cell of its column again (on each refresh).
    # Those passes are skipped while no column sizes itself; anything else goes to DataTable.

    def _measures_nothing(self) -> bool:
        return not any(c.auto_width for c in self.columns.values())

    def _update_column_widths(self, updated_cells: set[CellKey]) -> None:
        if not self._measures_nothing():
            super()._update_column_widths(updated_cells)
            return
        self._require_update_dimensions = True

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        new_rows = list(new_rows)
        rows = self.rows
        if not self._measures_nothing() or any(
            (row := rows.get(key)) is not None and (row.label is not None or row.auto_height)
            for key in new_rows
        ):
            super()._update_dimensions(new_rows)
            return
        # what DataTable does after measuring: the scrollable size from the columns' widths
        width = sum(c.get_render_width(self) for c in self.columns.values()) + self._row_label_column_width
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(width, self._total_row_height + header)

    @property
    def row_keys(self) -> list[str]:
        """Keys of the displayed rows, in display order."""
        return [str(row.key.value) for row in self.ordered_rows]

    @property
    def cursor_key(self) -> str | None:
        """Key of the row under the cursor, if any."""
        if not self.row_count:
            return None
        try:
            return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)
        except (RowDoesNotExist, IndexError):
            return None

    def _removals(self, rows: Sequence[Row], wanted: set[str]) -> int:
        """How many rows a diff would remove: stale ones and those after the first misplaced one."""
        stale = sum(1 for k in self._order if k not in wanted)
        displayed = [k for k in self._order if k in wanted]
        prefix = 0
        for shown_key, row in zip(displayed, rows, strict=False):
            if shown_key != row.key:
                break
            prefix += 1
        return stale + len(displayed) - prefix

    def _add_rows(self, rows: Sequence[tuple[str, RowCells]]) -> None:
        """`add_row` for each of `rows` (one line each, no label), with its bookkeeping done once:
        DataTable's own re-sorts the columns, re-validates the cursor and counts an update per
        row (≈ 20 µs a row: 20 ms of a filter key that re-adds 1,000 rows). Pinned version.
        A row whose cells are not built yet goes in as `LazyCells`."""
        if not rows:
            return
        was_empty = self.row_count == 0
        columns = [c.key for c in self.ordered_columns]
        locations, data, meta, new = self._row_locations, self._data, self.rows, self._new_rows
        index = len(locations)
        for key, made in rows:
            row_key = RowKey(key)
            if row_key in locations:
                raise DuplicateKey(f"The row key {row_key!r} already exists.")
            if len(made.shape[0]) > len(columns):
                raise ValueError("More values provided than there are columns.")
            locations[row_key] = index
            index += 1
            data[row_key] = dict(zip_longest(columns, made.cells)) if made.built else LazyCells(columns, made)
            meta[row_key] = DataRow(row_key, 1, None, False)
            new.add(row_key)
        self._require_update_dimensions = True
        self.cursor_coordinate = self.cursor_coordinate
        if was_empty and self.columns and self.show_cursor and self.cursor_type != "none":
            self._highlight_cursor()
        self._update_count += 1
        self.check_idle()

    def _remove_row(self, key: str) -> None:
        """`remove_row`, without building the cells of a row never read (DataTable reads the row's
        keys to forget its updated cells; an unread row has none)."""
        row_key = RowKey(key)
        if isinstance(cells := self._data.get(row_key), LazyCells) and not cells.filled:
            self._data[row_key] = {}
        self.remove_row(key)

    def _set_columns(self, columns: tuple[Column, ...]) -> None:
        if columns == self._columns_shown:
            return
        shown = self._columns_shown
        if [(c.key, c.label) for c in columns] == [(c.key, c.label) for c in shown]:
            # only widths changed (content-driven widths move with the rows and the terminal):
            # resize in place, keeping rows, cursor and scroll
            for col in columns:
                self.columns[ColumnKey(col.key)].width = col.width
            self._columns_shown = columns
            self._clear_caches()  # Textual's own cache of drawn rows (pinned version)
            self._require_update_dimensions = True
            self.refresh()
            return
        cursor = self.cursor_key
        self.clear(columns=True)
        for col in columns:
            self.add_column(col.label, width=col.width, key=col.key)
        self._columns_shown = columns
        self._shown = {}
        self._order = []
        self._rows = {}
        self._restore = cursor

    def show(self, table: Table) -> None:
        """Display exactly `table`: columns (rebuilt only on a layout change) and rows (diffed).

        The very table shown last is shown already: a render of unchanged inputs
        (`render.pagememo`) gives the same object, and comparing its 1,000 rows one by one cost
        ≈ 2 ms of a filter key that kept every row. (The rows change only here and in `clear`,
        which forgets it; the diff below relies on that too.)"""
        if table is self._last_shown:
            self.last_changes = 0
            return
        # the page is measured already (`fit_table`): only a column too narrow for it is looked at
        columns = fitted_columns(table.columns, table.rows, content_widths(table))
        with self.app.batch_update():
            self._set_columns(columns)
            cursor = self._restore or self.cursor_key
            self._restore = None
            self._sync(columns, table.rows)
            if cursor is not None and cursor in self._shown:
                index = self.get_row_index(cursor)
                if index != self.cursor_row:
                    self.move_cursor(row=index, animate=False)
        self._last_shown = table

    def _sync(self, columns: Sequence[Column], rows: Sequence[Row]) -> None:
        keys = [c.key for c in columns]
        widths = [c.width for c in columns]
        wanted = {r.key for r in rows}
        changes = 0
        # rows are built once and re-used while their objects do not change (`rowcache`): a row
        # that is the very object shown last time, in the same columns, has nothing to update
        same_columns = self._synced == (tuple(keys), tuple(widths))
        last_rows = self._rows if same_columns else {}
        if self._removals(rows, wanted) > REBUILD_AFTER:
            # DataTable.remove_row costs O(rows) each: past a few hundred removals (a filter
            # keystroke, a new sort order) clearing and re-adding is far cheaper (dolphie does this)
            self.clear()
            self._shown, self._order = {}, []
            changes += 1
            last_rows = {}
        for key in [k for k in self._order if k not in wanted]:
            self._remove_row(key)
            del self._shown[key]
            changes += 1
        displayed = [k for k in self._order if k in wanted]
        # Rows keep their place while the display order is a prefix of the wanted order (the usual
        # case: same rows, or new rows at the end). From the first divergence on, the rows are
        # removed and re-added in order; DataTable has no insert-at-index.
        prefix = 0
        for shown_key, row in zip(displayed, rows, strict=False):
            if shown_key != row.key:
                break
            prefix += 1
        for key in displayed[prefix:]:
            self._remove_row(key)
            del self._shown[key]
            changes += 1
        made, before = self._made, self._made_before
        self._made, self._made_before = {}, made
        added: list[tuple[str, RowCells]] = []
        shape = (tuple(keys), tuple(widths))
        column_keys = [c.key for c in self.ordered_columns]
        for index, row in enumerate(rows):
            kept = made.get(row.key) or before.get(row.key)
            if kept is not None and (kept[0] is not row or kept[1].shape != shape):
                kept = None
            if index < prefix and last_rows.get(row.key) is row:
                if kept is not None:
                    self._made[row.key] = kept
                continue
            # shown before, since cleared (a filter key): the same cells again
            cells = kept[1] if kept is not None else RowCells(row, shape)
            if index >= prefix:
                if index < EAGER_ROWS:
                    cells.cells  # noqa: B018 (built now: the rows a screen shows first)
                added.append((row.key, cells))
                changes += 1
            else:
                old = self._shown[row.key]
                data = self._data.get(RowKey(row.key))
                if isinstance(data, LazyCells) and not data.filled:
                    # never read, so never drawn: the new cells replace the old unbuilt
                    self._data[RowKey(row.key)] = LazyCells(column_keys, cells)
                else:
                    for col, new, prev in zip(keys, cells.values, old.values, strict=True):
                        if new != prev:
                            self.update_cell(row.key, col, plain_cell(new))
                            changes += 1
            self._made[row.key] = (row, cells)
            self._shown[row.key] = cells
        self._add_rows(added)
        self._order = [r.key for r in rows]
        self._rows = {r.key: r for r in rows}
        self._synced = (tuple(keys), tuple(widths))
        self.last_changes = changes
