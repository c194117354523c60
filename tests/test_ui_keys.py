"""The k9s keys beyond navigation: sort, mark, copy, export, YAML, describe, pause, theme, and the
header cues (production band, stale, disconnected, ↑/↓ deltas)."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

import csv
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import RenderableType
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Label

from tftui.config import ConsoleConfig
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import LoadFailed, TfTuiApp
from tftui.ui.load.data import load
from tftui.ui.render.format import fmt_bytes, fmt_num
from tftui.ui.render.gauge import gauge_plain, render_gauge
from tftui.ui.render.nodeviews import gpus_table, nodes_table
from tftui.ui.render.tableops import MARK, sort_key, sorted_table, table_csv, with_deltas
from tftui.ui.render.views import NARROW, WIDE, Column, Gauges, LazyCell, Row, Table
from tftui.ui.render.workviews import workers_table, workloads_table
from tftui.ui.screens.resource import ResourceScreen
from tftui.ui.screens.text import TextScreen
from tftui.ui.themes import DARK
from tftui.ui.widgets.chrome import Breadcrumb, ConsoleHeader
from tftui.ui.widgets.table import ResourceTable


def make_app(cluster: Any, metrics: Any, **kw: Any) -> TfTuiApp:
    return TfTuiApp(cluster, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None, **kw)


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def main(app: TfTuiApp) -> ResourceTable:
    return app.screen.query_one("#main", ResourceTable)


def column(table: ResourceTable, key: str) -> list[str]:
    out = []
    for row in table.row_keys:
        cell = table.get_cell(row, key)
        out.append(cell.plain if isinstance(cell, Text) else str(cell))
    return out


# -- pure helpers ----------------------------------------------------------------------------------


def test_sort_key_orders_numbers_ages_gauges_then_text_then_unknown() -> None:
    cells: list[RenderableType] = ["b", "10", "2", "—", "3d", "5h", Text("██▒··  40%/ 30%"), "A"]
    ordered = sorted(cells, key=sort_key)
    assert ordered[:5] == ["2", "10", Text("██▒··  40%/ 30%"), "5h", "3d"]
    assert ordered[5:] == ["A", "b", "—"]


def test_deltas_mark_rises_and_falls_only() -> None:
    cols = (Column("name", "NAME", 5), Column("gpus", "GPUS", 4))
    now = Table(cols, (Row("a", {"name": "a", "gpus": "4"}, "a"), Row("b", {"name": "b", "gpus": "1"}, "b")))
    before = {"a": {"name": "a", "gpus": "2"}, "b": {"name": "b", "gpus": "3"}}
    shown = with_deltas(now, before)
    assert [str(r.cells["gpus"]) for r in shown.rows] == ["4↑", "1↓"]
    assert with_deltas(now, {}) is now
    assert with_deltas(now, {"a": {"gpus": "4"}}).rows[0].cells["gpus"] == "4"


def test_csv_is_the_table_as_shown() -> None:
    cols = (Column("name", "NAME", 5), Column("tflops", "TFLOPS", 9))
    table = Table(cols, (Row("x,y", {"name": "x,y", "tflops": Text("█ 40%")}, ""),))
    assert list(csv.reader(table_csv(table).splitlines())) == [["NAME", "TFLOPS"], ["x,y", "█ 40%"]]


def test_csv_writes_gauges_and_figures_as_numbers_and_names_in_full(
    demo: SimCluster, metrics: SimMetrics
) -> None:
    """ctrl+s wrote `█████▒▒▒▒·  93%/ 55%`: a gauge is now numeric columns (allocated, used and
    capacity, both percentages; a workload's request, use and use %), unknown use is empty."""
    data = load(demo, metrics, DEFAULT_NOW)
    nodes = nodes_table(data, Gauges(NARROW))
    rows = list(csv.DictReader(table_csv(nodes).splitlines()))
    assert set(rows[0]) >= {
        "NAME",
        "TFLOPS allocated (TFLOPS)",
        "TFLOPS used (TFLOPS)",
        "TFLOPS capacity (TFLOPS)",
        "TFLOPS allocated %",
        "TFLOPS used %",
        "VRAM allocated (bytes)",
        "VRAM used (bytes)",
        "VRAM capacity (bytes)",
    }
    for row in rows:
        node = data.state.nodes[row["NAME"]]
        assert float(row["TFLOPS allocated (TFLOPS)"]) == pytest.approx(node.allocated.tflops, abs=1e-3)
        assert int(row["VRAM capacity (bytes)"]) == round(node.capacity.vram)
        used = row["TFLOPS used (TFLOPS)"]
        assert used == "" or float(used) >= 0
        assert "█" not in ",".join(row.values()) and "▒" not in ",".join(row.values())
    assert any(r["TFLOPS used %"] for r in rows)
    workloads = list(csv.DictReader(table_csv(workloads_table(data, Gauges(NARROW))).splitlines()))
    assert "TFLOPS used % of request" in workloads[0] and "VRAM requested (bytes)" in workloads[0]
    long = max(data.state.workloads, key=len)
    assert long in {r["NAMESPACE/NAME"] for r in workloads}  # never cut to a column's width


def test_gauge_plain_is_the_drawn_text() -> None:
    """Sort and export read `gauge_plain`, the screen shows `render_gauge`: same characters."""
    GI = 1024**3
    cases = [
        (cap, alloc, used)
        for cap in (0.0, 100.0, 80.0 * GI)
        for alloc in (0.0, 0.3, 37.5, 95.0, 120.0, 40.0 * GI)
        for used in (None, 0.0, 0.2, 12.0, 99.0, 130.0, 10.0 * GI)
    ]
    for cap, alloc, used in cases:
        for width in (4, 8, 20):
            for fmt, unit in ((None, ""), (fmt_num, "TF"), (fmt_bytes, "")):
                kw: dict[str, Any] = {"fmt": fmt, "unit": unit, "value_width": 12}
                drawn = render_gauge(cap, alloc, used, width, **kw).plain
                assert gauge_plain(cap, alloc, used, width, **kw) == drawn, (cap, alloc, used, width)


def test_lazy_gauges_build_undrawn_and_sort_and_export_as_drawn(
    demo: SimCluster, metrics: SimMetrics
) -> None:
    """Building a table draws no gauge; sorting and CSV export read every row exactly as they
    would with the gauges drawn (the order and the bytes of the export are unchanged)."""
    data = load(demo, metrics, DEFAULT_NOW)
    node = next(iter(data.state.nodes))
    for layout in (NARROW, WIDE):
        g = Gauges(layout)
        for table in (
            nodes_table(data, g),
            gpus_table(data, g),
            workloads_table(data, g),
            workers_table(data, g, data.state.nodes[node].workers),
        ):
            lazy = [c for r in table.rows for c in r.cells.values() if isinstance(c, LazyCell)]
            assert len(lazy) == 2 * len(table.rows) > 0
            assert not any(c.drawn for c in lazy)
            csv_lazy = table_csv(table)
            order = {
                (col, rev): [r.key for r in sorted_table(table, col, rev).rows]
                for col in ("tflops", "vram", "used", "gap")
                for rev in (False, True)
            }
            assert not any(c.drawn for c in lazy)  # sort and export drew nothing
            assert "█" not in csv_lazy  # the numbers, not the bars
            for (col, rev), keys in order.items():
                key, figure = {"used": ("tflops", "used"), "gap": ("tflops", "gap")}.get(col, (col, ""))
                values = [
                    sort_key(table.rows[[r.key for r in table.rows].index(k)].cells[key], figure)
                    for k in keys
                ]
                known = [v for v in values if v[0] == 0]
                assert known == sorted(known, reverse=rev), (layout.name, col, rev)
                assert values[len(known) :] == [v for v in values if v[0] != 0]  # unknown use last


# -- keys ------------------------------------------------------------------------------------------


async def test_shift_letters_sort_and_repeat_reverses(demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("colon", *"nodes", "enter")
        await settle(pilot)
        table = main(app)
        await pilot.press("shift+g")
        await pilot.pause()
        gpus = [int(v) for v in column(table, "gpus")]
        assert gpus == sorted(gpus) and len(set(gpus)) > 1
        await pilot.press("shift+g")
        await pilot.pause()
        assert [int(v) for v in column(table, "gpus")] == sorted(gpus, reverse=True)
        await pilot.press("shift+t")
        await pilot.pause()
        alloc = [sort_key(v)[1] for v in column(table, "tflops")]
        assert alloc == sorted(alloc)
        await pilot.press("shift+n")
        await pilot.pause()
        assert column(table, "name") == sorted(column(table, "name"), key=str.lower)
        # a column this view does not have: said, nothing changes
        before = table.row_keys
        await pilot.press("colon", *"pools", "enter")
        await settle(pilot)
        await pilot.press("shift+a")
        await pilot.pause()
        assert any("no age column" in n.message for n in app._notifications)
        assert before  # the nodes table had rows to sort


async def test_a_new_sort_order_starts_at_its_top(demo: SimCluster, metrics: SimMetrics) -> None:
    """The waste hunt reads a sort from the top: the cursor does not follow its row into the list."""
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        await pilot.press("colon", *"workloads", "enter")
        await settle(pilot)
        table = main(app)
        first = table.cursor_key
        await pilot.press("X")  # largest allocated − used gap first
        await pilot.pause()
        assert table.row_keys[0] != first  # the old first row moved (else this proves nothing)
        assert table.cursor_row == 0 and table.cursor_key == table.row_keys[0]
        assert table.scroll_offset.y == 0
        await pilot.press("down", "down", "X")  # reversed: again from the top
        await pilot.pause()
        assert table.cursor_row == 0 and table.scroll_offset.y == 0


async def test_mark_copy_and_export(tmp_path: Path, demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics, config=ConsoleConfig(export_dir=tmp_path / "out"))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("colon", *"nodes", "enter")
        await settle(pilot)
        table = main(app)
        first, second = table.row_keys[:2]
        await pilot.press("space", "space")  # marks the first two rows (the cursor moves down)
        await pilot.pause()
        names = column(table, "name")
        assert names[0].startswith(MARK) and names[1].startswith(MARK) and not names[2].startswith(MARK)
        await pilot.press("n")
        await pilot.pause()
        assert app.clipboard == f"{first}\n{second}"
        assert any("copied 2 names" in n.message for n in app._notifications)
        await pilot.press("ctrl+backslash", "n")
        await pilot.pause()
        assert not column(table, "name")[0].startswith(MARK)
        assert app.clipboard == table.cursor_key

        await pilot.press("slash", *"inference", "enter")
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        files = list((tmp_path / "out").glob("*.csv"))
        assert len(files) == 1 and files[0].name.startswith("nodes-main-")
        assert any(str(files[0]) in n.message for n in app._notifications)
        rows = list(csv.reader(files[0].read_text().splitlines()))
        assert rows[0][0] == "NAME" and [r[0] for r in rows[1:]] == table.row_keys
        assert app.data is not None
        assert 0 < len(rows) - 1 < len(app.data.state.nodes)  # the filtered table, not everything


async def test_yaml_and_describe_of_the_selected_row(demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        pool = main(app).cursor_key
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, TextScreen)
        text = app.screen.text
        assert "kind: GPUPool" in text and f"name: {pool}" in text
        await pilot.press("escape", "d")
        await pilot.pause()
        assert isinstance(app.screen, TextScreen) and app.screen.trail[-1] == "describe"
        assert f"name: {pool}" in app.screen.text and "capacity:" in app.screen.text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ResourceScreen)
        await pilot.press("colon", *"place", "enter")
        await settle(pilot)
        await pilot.press("escape")  # leave the form field, then y: nothing selectable here
        app.screen.set_focus(None)
        await pilot.press("y")
        await pilot.pause()
        assert any("no cluster object selected" in n.message for n in app._notifications)


async def test_pause_stops_periodic_refresh_but_not_ctrl_r(demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        seq = app.data_seq
        await pilot.press("shift+r")
        await pilot.pause()
        assert app.paused and app.screen.query_one("#header-paused", Label).display
        app._tick()
        await settle(pilot)
        assert app.data_seq == seq
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert app.data_seq == seq + 1
        await pilot.press("shift+r")
        await pilot.pause()
        assert not app.paused and not app.screen.query_one("#header-paused", Label).display


async def test_theme_key_and_config(demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics, config=ConsoleConfig(theme="light"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.theme == "tftui-light" and not app.current_theme.dark
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert app.theme == "tftui-dark"


def _contrast(a: Any, b: Any) -> float:
    """WCAG contrast ratio of two Rich colours."""

    def lum(c: Any) -> float:
        def ch(v: int) -> float:
            x = v / 255
            return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4

        r, g, b_ = c.get_truecolor()
        return 0.2126 * ch(r) + 0.7152 * ch(g) + 0.0722 * ch(b_)

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("theme", ["dark", "light"])
async def test_the_allocated_figure_reads_on_the_cursor_row(
    theme: str, demo: SimCluster, metrics: SimMetrics
) -> None:
    """The cursor row keeps the cells' colours: the allocated layer's must not be the cursor's
    background (it was `$primary` in both themes: `6%/ 2%` read `  / 2%` on the selected row)."""
    app = make_app(demo, metrics, config=ConsoleConfig(theme=theme))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = main(app)
        cursor = table.get_component_rich_style("datatable--cursor").bgcolor
        background = table.rich_style.bgcolor
        alloc = table.gauge_styles().alloc.color
        assert cursor is not None and background is not None and alloc is not None
        assert _contrast(alloc, cursor) >= 1.8
        assert _contrast(alloc, background) >= 3.0


async def test_production_context_is_unmistakable(demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics, config=ConsoleConfig(production=("dem*",)))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        header = app.screen.query_one(ConsoleHeader)
        assert header.has_class("-production")
        assert header.query_one("#header-production", Label).display
        assert header.styles.background.hex.lower() == DARK.variables["production"]
    other = make_app(demo, metrics)
    async with other.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        header = other.screen.query_one(ConsoleHeader)
        assert not header.has_class("-production")
        assert not header.query_one("#header-production", Label).display


async def test_stale_and_disconnected_cues(demo: SimCluster, metrics: SimMetrics) -> None:
    now = [DEFAULT_NOW]
    app = TfTuiApp(demo, metrics, clock=lambda: now[0], refresh_interval=10)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        link = app.screen.query_one("#header-link", Label)
        assert not link.display
        app.paused = True  # keep the tick from refreshing: only the age is checked
        now[0] = DEFAULT_NOW + timedelta(seconds=31)
        app._tick()
        await pilot.pause()
        assert app.stale and link.display and str(link.render()) == "STALE"
        app.post_message(LoadFailed("disconnected: watch lost", now[0]))
        await pilot.pause()
        assert str(link.render()) == "DISCONNECTED"


class Dropping:
    """A ClusterPort over the demo whose next snapshots leave out chosen objects."""

    def __init__(self, inner: SimCluster) -> None:
        self.inner = inner
        self.dropped: set[str] = set()

    def describe(self) -> str:
        return "demo"

    def snapshot(self) -> list[dict[str, Any]]:
        return [o for o in self.inner.snapshot() if o["metadata"]["name"] not in self.dropped]


async def test_refresh_shows_deltas_in_changed_numeric_cells(demo: SimCluster, metrics: SimMetrics) -> None:
    cluster = Dropping(demo)
    app = make_app(cluster, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.data is not None
        pool = main(app).row_keys[0]
        gpus_before = int(str(main(app).get_cell(pool, "gpus")))
        gpu = next(g for g in app.data.state.gpus.values() if g.pool == pool)
        cluster.dropped.add(gpu.name)
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert str(main(app).get_cell(pool, "gpus")) == f"{gpus_before - 1}↓"
        other = main(app).row_keys[1]
        assert "↑" not in str(main(app).get_cell(other, "gpus"))
        await pilot.press("ctrl+r")  # nothing changed since: the arrow goes
        await settle(pilot)
        assert str(main(app).get_cell(pool, "gpus")) == str(gpus_before - 1)


async def test_large_filter_rebuilds_and_keeps_the_cursor_row() -> None:
    """Past 200 removals the table is cleared and refilled (remove_row is O(rows) each); the
    result is the same rows, and the cursor stays on its row when that row is still shown."""
    from textual.app import App, ComposeResult

    cols = (Column("name", "NAME", 8),)
    rows = tuple(Row(f"r{i:03}", {"name": f"r{i:03}"}, f"r{i:03}") for i in range(300))
    full = Table(cols, rows)

    class Harness(App[None]):
        def compose(self) -> ComposeResult:
            yield ResourceTable(id="t")

    app = Harness()
    async with app.run_test() as pilot:
        table = app.query_one(ResourceTable)
        table.show(full)
        await pilot.pause()
        table.move_cursor(row=250)
        table.show(full.filtered("r25"))  # 290 rows go: rebuilt
        await pilot.pause()
        assert table.row_keys == [f"r25{i}" for i in range(10)]
        assert table.cursor_key == "r250" and table.last_changes == 1 + 10
        table.show(full.filtered("r2"))  # rows come back in order after a removed prefix
        await pilot.pause()
        assert table.row_keys == [f"r{i:03}" for i in range(200, 300)] and table.cursor_key == "r250"


async def test_large_view_shows_a_page_but_filter_sort_marks_and_export_see_every_row(
    tmp_path: Path, demo: SimCluster, metrics: SimMetrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `ROW_LIMIT` rows (1,000; 20 here so the demo's GPUs exceed it) the DataTable gets only
    the first page and the breadcrumb says how to reach the rest; nothing else is limited."""
    monkeypatch.setattr("tftui.ui.screens.base.ROW_LIMIT", 20)
    app = make_app(demo, metrics, config=ConsoleConfig(export_dir=tmp_path / "out"))
    async with app.run_test(size=(160, 40), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("colon", *"gpus", "enter")
        await settle(pilot)
        assert app.data is not None
        gpus = sorted(app.data.state.gpus)
        total = len(gpus)
        assert total > 20
        table = main(app)
        assert table.row_count == 20
        screen = app.screen
        assert isinstance(screen, ResourceScreen)

        def drawn_rows() -> set[str]:
            return {
                r.key
                for r in screen.shown_tables["main"].rows
                if any(isinstance(c, LazyCell) and c.drawn for c in r.cells.values())
            }

        assert drawn_rows() == set(table.row_keys)  # gauges drawn for the page only
        crumb = plain_crumbs(app)
        assert f"showing 20 of {total:,} — / to filter" in crumb, crumb

        # marks survive the row leaving the page: mark the first row, reverse-sort it away
        first = table.cursor_key
        assert first is not None
        await pilot.press("space")
        await pilot.press("N", "N")  # name ascending, then descending: the marked row leaves the page
        await pilot.pause()
        assert first not in table.row_keys and table.row_keys[0] == max(table.row_keys)
        assert "1 marked" in plain_crumbs(app)
        await pilot.press("n")
        await pilot.pause()
        assert app.clipboard == first

        # export: every row in the sorted order, not the page, without drawing their gauges
        before_export = drawn_rows()
        assert len(before_export) < total
        await pilot.press("ctrl+s")
        await pilot.pause()
        files = list((tmp_path / "out").glob("*.csv"))
        assert len(files) == 1
        exported = [r[0] for r in list(csv.reader(files[0].read_text().splitlines()))[1:]]
        assert len(exported) == total and exported[:20] == column(table, "name")
        assert drawn_rows() == before_export

        # a filter that matches fewer rows than the limit shows them all, with the usual count
        node = app.data.state.nodes["inf-h100-03"]
        await pilot.press("slash", *node.name, "enter")
        await pilot.pause()
        assert sorted(table.row_keys) == sorted(node.gpus)
        assert f"gpus ({len(node.gpus)}/{total})" in plain_crumbs(app)


def plain_crumbs(app: TfTuiApp) -> str:
    content = app.screen.query_one(Breadcrumb).content
    return content.plain if isinstance(content, Text) else str(content)


async def test_home_and_end_go_to_the_first_and_last_row(demo: SimCluster, metrics: SimMetrics) -> None:
    """As in k9s and as the help says: rows, not DataTable's sideways scroll; j and k move a row,
    ctrl+f and ctrl+b a page, g to the first row."""
    app = make_app(demo, metrics)
    async with app.run_test(size=(100, 20)) as pilot:
        await settle(pilot)
        await pilot.press("colon", *"gpus", "enter")
        await settle(pilot)
        table = main(app)
        assert table.row_count > 20  # more rows than the screen shows (else this proves nothing)
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == table.row_count - 1 and table.scroll_offset.x == 0
        assert table.scroll_offset.y > 0
        await pilot.press("home")
        await pilot.pause()
        assert table.cursor_row == 0 and table.scroll_offset.y == 0
        await pilot.press("j", "j", "j", "k")
        await pilot.pause()
        assert table.cursor_row == 2
        # k9s's page keys and g, beside pgdn/pgup/home
        await pilot.press("pagedown")
        await pilot.pause()
        paged = table.cursor_row
        await pilot.press("pageup")
        await pilot.pause()
        assert paged > 10 and table.cursor_row == 2
        await pilot.press("ctrl+f")
        await pilot.pause()
        assert table.cursor_row == paged
        await pilot.press("ctrl+b")
        await pilot.pause()
        assert table.cursor_row == 2
        await pilot.press("end", "g")
        await pilot.pause()
        assert table.cursor_row == 0 and table.scroll_offset.y == 0
