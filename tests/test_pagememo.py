"""A render of unchanged inputs gives the same page and fitted table objects (`render.pagememo`),
which the table recognises without comparing its rows (`ResourceTable.show`); any input that
changes (the filtered rows, the sort, the marks, the refresh before, the width) makes them again."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from rich.text import Text
from textual.pilot import Pilot

from tftui.sources.sim.cluster import SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.render import pagememo
from tftui.ui.render.pagememo import PageMemo
from tftui.ui.render.tableops import sort_key, sorted_table
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
    previous: dict[str, dict[str, str]] = {}
    made = memo.prepare("main", scoped, previous, set(), 20)
    assert len(made.page.rows) == 20 and made.marked is made.page  # no deltas, no marks
    again = memo.prepare("main", scoped, previous, {"r1"} - {"r1"}, 20)  # marks equal by value
    assert again is made
    fitted = memo.fitted("main", made.marked, 40, True)
    assert memo.fitted("main", made.marked, 40, True) is fitted
    assert memo.fitted("main", made.marked, 41, True) is not fitted
    assert memo.fitted("main", made.marked, 41, False) is not fitted
    by_tf = memo.sorted("main", scoped, scoped, ("tf", True))
    assert memo.sorted("main", scoped, scoped, ("tf", True)) is by_tf
    assert memo.sorted("main", scoped, scoped, None) is scoped


def test_each_input_that_changes_makes_the_page_again() -> None:
    memo, scoped = PageMemo(), _table(30)
    none: dict[str, dict[str, str]] = {}
    base = memo.prepare("main", scoped, none, set(), 20)
    # the filtered rows: an equal table that is another object (new data) is made again
    other = memo.prepare("main", _table(30), none, set(), 20)
    assert other is not base
    # the sort: by its column and direction, made again for another table
    by_tf = memo.sorted("main", scoped, scoped, ("tf", True))
    assert _names(by_tf)[0] == "gpu-029"
    assert _names(memo.sorted("main", scoped, scoped, ("tf", False)))[0] == "gpu-000"
    by_name = memo.sorted("main", scoped, scoped, ("name", True))
    assert _names(by_name)[0] == "gpu-029"
    new_data = _table(30, tf=100)
    assert memo.sorted("main", new_data, new_data, ("name", True)) is not by_name
    # the marks: `▸` before the first cell of a marked row
    marked = memo.prepare("main", by_tf, none, {"r29"}, 20)
    cell = marked.marked.rows[0].cells["name"]
    assert isinstance(cell, Text) and cell.plain.startswith("▸")
    # the refresh before: deltas
    previous = {r.key: {**r.cells, "tf": "0"} for r in scoped.rows}
    delta = memo.prepare("main", by_tf, previous, {"r29"}, 20)
    assert "↑" in str(delta.marked.rows[1].cells["tf"])
    # the row limit
    assert len(memo.prepare("main", by_tf, previous, {"r29"}, 5).page.rows) == 5
    # another key keeps its own: a render that tries two layouts in turn finds both again
    wide, narrow = _table(30), _table(30)
    first = memo.prepare(("main", "wide"), wide, none, set(), 20)
    second = memo.prepare(("main", "narrow"), narrow, none, set(), 20)
    assert memo.prepare(("main", "wide"), wide, none, set(), 20) is first
    assert memo.prepare(("main", "narrow"), narrow, none, set(), 20) is second


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


async def _on_gpus(pilot: Pilot[None]) -> None:
    await settle(pilot)
    await pilot.press("colon", *"gpus", "enter")
    await settle(pilot)


async def test_a_filter_key_that_keeps_every_row_leaves_the_table_alone(
    demo: SimCluster, metrics: SimMetrics
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(160, 40)) as pilot:
        await _on_gpus(pilot)
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


async def test_rows_are_sorted_once_and_a_filter_key_keeps_their_order(
    demo: SimCluster, metrics: SimMetrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(160, 40)) as pilot:
        await _on_gpus(pilot)
        screen = app.screen
        assert isinstance(screen, ResourceScreen)
        unsorted = screen.shown_tables["main"]
        await pilot.press("T")  # TFLOPS allocated %, ascending
        await settle(pilot)
        table = main(app)
        assert screen.sort_column == "tflops"
        everything = screen.shown_tables["main"]
        sorted_sizes: list[int] = []
        sort = pagememo.sorted_table

        def counted(table: Table, column: str, reverse: bool = False) -> Table:
            sorted_sizes.append(len(table.rows))
            return sort(table, column, reverse)

        monkeypatch.setattr(pagememo, "sorted_table", counted)
        whole = pagememo.sorted_rows

        def counted_whole(table: Table, *args: Any, **kwargs: Any) -> Any:
            sorted_sizes.append(len(table.rows))
            return whole(table, *args, **kwargs)

        monkeypatch.setattr(pagememo, "sorted_rows", counted_whole)
        total = len(everything.rows)
        typed = ""
        for ch in "a100":  # the first letters keep most rows, the last a few
            typed += ch
            await pilot.press("slash" if ch == "a" else ch, *(ch if ch == "a" else ""))
            await pilot.pause()
            kept = [r.key for r in everything.rows if typed in r.search]
            assert 0 < len(kept) <= total and table.row_keys == kept[:1000]
            # the same as filtering the unsorted rows first and sorting the rows that pass
            passing = Table(unsorted.columns, tuple(r for r in unsorted.rows if typed in r.search))
            assert [r.key for r in sorted_table(passing, "tflops").rows] == kept
        assert len(kept) < total and [r.key for r in passing.rows] != kept  # filtered, and sorted
        assert not sorted_sizes  # so far every key picked from the sorted rows
        one = kept[-1]
        await pilot.press(*["backspace"] * 4, *one[-14:])  # down to one GPU: a few rows sorted
        await pilot.pause()
        assert table.row_keys == [one] and sorted_sizes
        # the whole table was never sorted again: picked from the sorted rows, or few sorted
        assert all(size * pagememo.SORT_PICK_RATIO < total for size in sorted_sizes)


def _sort_key_by_patterns(text: str) -> tuple[int, float, str]:
    """What `sort_key` gives a text cell, by its patterns alone (every pattern tried on every text)."""
    text = text.strip()
    if re.match(r"^-?\d+(?:\.\d+)?$", text):
        return (0, float(text), "")
    if age := re.match(r"^(\d+)([smhd])$", text):
        return (0, float(int(age.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[age.group(2)]), "")
    if percent := re.search(r"(-?\d+(?:\.\d+)?)%", text):
        return (0, float(percent.group(1)), "")
    if not text or text == "—":
        return (2, 0.0, "")
    return (1, 0.0, text.lower())


@given(st.text(alphabet=" -.%smhd—0123456789abcXYZ", max_size=12))
@example("-1")
@example(" -2.5 ")
@example("12")
@example("3d")
@example("45%")
@example("gpu 5%")
@example("—")
@example("")
@example(" 7m ")
@example("-")
@example("1x")
def test_a_text_cell_sorts_as_its_patterns_say(text: str) -> None:
    # sort_key tries the patterns only on texts that can match them (a name sort of 40,000 GPUs
    # searched each name for a percentage: 190 → 53 ms)
    assert sort_key(text) == _sort_key_by_patterns(text)


@given(
    tfs=st.lists(st.sampled_from(["1", "2", "10", "—", "x", "5%", "3d"]), min_size=1, max_size=60),
    masks=st.lists(st.lists(st.booleans(), min_size=60, max_size=60), min_size=1, max_size=6),
    column=st.sampled_from(["tf", "name", "nope"]),
    reverse=st.booleans(),
)
def test_the_rows_that_pass_come_in_the_order_sorting_them_gives(
    tfs: list[str], masks: list[list[bool]], column: str, reverse: bool
) -> None:
    # filter keys in turn over one table: whether the rows that pass are sorted themselves or
    # picked from the sorted table, they are what sorting them gives (stable: ties keep their order)
    full = Table(
        COLUMNS, tuple(Row(f"r{i}", {"name": f"g{i % 7}", "tf": tf}, "") for i, tf in enumerate(tfs))
    )
    memo = PageMemo()
    for mask in [[True] * 60, *masks]:
        scoped = Table(COLUMNS, tuple(r for r, keep in zip(full.rows, mask, strict=False) if keep))
        got = memo.sorted("main", full, scoped, (column, reverse))
        assert [r.key for r in got.rows] == [r.key for r in sorted_table(scoped, column, reverse).rows]
