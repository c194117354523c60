"""A render of unchanged inputs gives the same page and fitted table objects (`render.pagememo`),
which the table recognises without comparing its rows (`ResourceTable.show`); any input that
changes (the filtered rows, the sort, the marks, the refresh before, the width) makes them again."""

from __future__ import annotations

from typing import Any

import pytest
from rich.text import Text

from tftui.sources.sim.cluster import SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.render.pagememo import PageMemo
from tftui.ui.render.views import Column, Row, Table
from tftui.ui.screens.resource import ResourceScreen
from tftui.ui.widgets.chrome import Breadcrumb
from tftui.ui.widgets.table import ResourceTable

from .test_table_draw import Drawn, _from_scratch, _lines
from .test_ui_keys import main, make_app, settle

COLUMNS = (Column("name", "NAME", 12), Column("tf", "TF", 6))


def _table(n: int, tf: int = 10) -> Table:
    return Table(
        COLUMNS,
        tuple(Row(f"r{i}", {"name": f"gpu-{i:03d}", "tf": str(tf + i)}, f"gpu-{i}") for i in range(n)),
    )


def _names(table: Table) -> list[str]:
    return [str(r.cells["name"]) for r in table.rows]


def test_the_same_inputs_give_the_same_objects() -> None:
    memo, scoped = PageMemo(), _table(30)
    first = memo.prepare("main", scoped, None, {}, set(), 20)
    assert first.shown is scoped and len(first.page.rows) == 20
    previous: dict[str, dict[str, str]] = {}
    made = memo.prepare("main", scoped, None, previous, set(), 20)
    again = memo.prepare("main", scoped, None, previous, {"r1"} - {"r1"}, 20)  # marks equal by value
    assert again is made
    fitted = memo.fitted("main", made.marked, 40, True)
    assert memo.fitted("main", made.marked, 40, True) is fitted
    assert memo.fitted("main", made.marked, 41, True) is not fitted
    assert memo.fitted("main", made.marked, 41, False) is not fitted


def test_each_input_that_changes_makes_the_page_again() -> None:
    memo, scoped = PageMemo(), _table(30)
    base = memo.prepare("main", scoped, None, {}, set(), 20)
    # the filtered rows: an equal table that is another object (new data) is made again
    other = memo.prepare("main", _table(30), None, {}, set(), 20)
    assert other is not base
    # the sort
    by_tf = memo.prepare("main", scoped, ("tf", True), {}, set(), 20)
    assert _names(by_tf.page)[0] == "gpu-029"
    # the marks: `▸` before the first cell of a marked row
    marked = memo.prepare("main", scoped, ("tf", True), {}, {"r29"}, 20)
    cell = marked.marked.rows[0].cells["name"]
    assert isinstance(cell, Text) and cell.plain.startswith("▸")
    # the refresh before: deltas
    previous = {r.key: {**r.cells, "tf": "0"} for r in scoped.rows}
    delta = memo.prepare("main", scoped, ("tf", True), previous, {"r29"}, 20)
    assert "↑" in str(delta.marked.rows[1].cells["tf"])
    # the row limit
    assert len(memo.prepare("main", scoped, ("tf", True), previous, {"r29"}, 5).page.rows) == 5
    # another key keeps its own: a render that tries two layouts in turn finds both again
    wide, narrow = _table(30), _table(30)
    none: dict[str, dict[str, str]] = {}
    first = memo.prepare(("main", "wide"), wide, None, none, set(), 20)
    second = memo.prepare(("main", "narrow"), narrow, None, none, set(), 20)
    assert memo.prepare(("main", "wide"), wide, None, none, set(), 20) is first
    assert memo.prepare(("main", "narrow"), narrow, None, none, set(), 20) is second


async def test_the_table_shown_again_changes_nothing_until_something_else_did() -> None:
    app = Drawn()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one("#t", ResourceTable)
        page = _table(40)
        table.show(page)
        await pilot.pause()
        assert table.row_count == 40 and table.last_changes > 0
        counted = table._update_count
        compared = table._sync
        table._sync = lambda *_: pytest.fail("the same table compared again")  # type: ignore[method-assign]
        table.show(page)  # the very same object: nothing to compare
        assert table.last_changes == 0 and table._update_count == counted
        table._sync = compared  # type: ignore[method-assign]
        # cleared by something else: the same table is added again, not taken as shown
        table.clear()
        assert table.row_count == 0
        table.show(page)
        await pilot.pause()
        assert table.row_count == 40 and table.last_changes > 0
        assert _lines(table) == _from_scratch(table)
        # another table in between, then the first again: shown in full again
        table.show(_table(40, tf=50))
        await pilot.pause()
        assert table.last_changes > 0 and str(table.get_row("r0")[1]) == "50"
        table.show(page)
        await pilot.pause()
        assert table.last_changes > 0 and str(table.get_row("r0")[1]) == "10"
        assert _lines(table) == _from_scratch(table)


async def test_a_filter_key_that_keeps_every_row_leaves_the_table_alone(
    demo: SimCluster, metrics: SimMetrics
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        await pilot.press("colon", *"gpus", "enter")
        await settle(pilot)
        table = main(app)
        rows = table.row_keys
        assert len(rows) > 10
        synced: list[int] = []
        sync = table._sync

        def counted(*args: Any) -> None:
            synced.append(1)
            sync(*args)

        table._sync = counted  # type: ignore[method-assign,assignment]
        await pilot.press("slash", "g")  # every GPU's text holds its name, `gpu-…`
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ResourceScreen)
        assert screen.needle == "g" and table.row_keys == rows and not synced
        # the breadcrumb still follows the filter (it is drawn apart from the table)
        assert str(screen.query_one(Breadcrumb).render()).endswith(f"({len(rows)})   /g")
        await pilot.press("backspace", *rows[0][-12:])  # the end of one GPU's name: one row left
        await pilot.pause()
        assert synced and table.row_keys == [rows[0]]
        await pilot.press("escape")
        await settle(pilot)
        assert table.row_keys == rows
