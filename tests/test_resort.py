"""A table sorted again from the sort of the table before it (`render.resort`) is what sorting it
from scratch gives, row for row, whatever changed in between; and it works out keys only for the
rows that are new objects. The console sorts in the refresh thread, so the render after a refresh
does not sort on the interface thread."""

from __future__ import annotations

import threading
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tftui.ui.render import resort
from tftui.ui.render.resort import SortedRows, sorted_rows
from tftui.ui.render.tableops import sort_key, sorted_table
from tftui.ui.render.views import Column, Row, Table
from tftui.ui.screens.resource import NodesScreen

from .test_prebuild import make, on_nodes, refresh, taken

COLUMNS = (Column("name", "NAME", 12), Column("tf", "TF", 6))
VALUES = ["1", "2", "10", "—", "", "x", "X", "5%", "3d", "-1"]


def _row(i: int, name: str, tf: str) -> Row:
    return Row(f"r{i}", {"name": name, "tf": tf}, "")


def _same(a: Table, b: Table) -> bool:
    return len(a.rows) == len(b.rows) and all(x is y for x, y in zip(a.rows, b.rows, strict=True))


# one refresh: the rows kept (by index into the last table), in order, and rows that are new objects
_step = st.tuples(
    st.lists(st.booleans(), max_size=40),  # which of the last rows stay (the rest are gone)
    st.lists(st.integers(0, 39), max_size=8),  # which stay as a new object with new cells
    st.lists(st.tuples(st.integers(0, 40), st.sampled_from(VALUES)), max_size=6),  # inserted
    st.sampled_from(["tf", "name", "nope"]),
    st.booleans(),
)


@given(first=st.lists(st.sampled_from(VALUES), max_size=40), steps=st.lists(_step, min_size=1, max_size=5))
def test_a_sort_from_the_last_sort_is_a_sort_from_scratch(
    first: list[str], steps: list[tuple[list[bool], list[int], list[tuple[int, str]], str, bool]]
) -> None:
    count = len(first)
    table = Table(COLUMNS, tuple(_row(i, f"g{i % 5}", tf) for i, tf in enumerate(first)))
    last: SortedRows | None = None
    for keep, renew, insert, column, reverse in steps:
        done = sorted_rows(table, column, reverse, last)
        assert _same(done.table, sorted_table(table, column, reverse))
        assert done.source is table and done.sort == (column, reverse)
        rows = [r for r, k in zip(table.rows, keep + [True] * len(table.rows), strict=False) if k]
        for i in renew:
            if i < len(rows):
                old = rows[i]
                rows[i] = _row(count, str(old.cells["tf"]), str(old.cells["name"]))  # swapped: new keys
                count += 1
        for at, tf in insert:
            rows.insert(min(at, len(rows)), _row(count, f"g{count % 3}", tf))
            count += 1
        table, last = Table(COLUMNS, tuple(rows)), done
    done = sorted_rows(table, "tf", True, last)
    assert _same(done.table, sorted_table(table, "tf", True))


def _keys_worked_out(monkeypatch: Any) -> list[object]:
    """The cells `sorted_rows` works a sort key out for, from now on."""
    worked: list[object] = []
    key = resort.sort_key

    def counted(cell: Any, figure: str = "") -> tuple[int, float, str]:
        worked.append(cell)
        return key(cell, figure)

    monkeypatch.setattr(resort, "sort_key", counted)
    return worked


def test_keys_are_worked_out_only_for_the_rows_that_are_new_objects(monkeypatch: Any) -> None:
    rows = [_row(i, f"gpu-{(i * 37) % 100:03d}", str(i % 9)) for i in range(100)]
    before = sorted_rows(Table(COLUMNS, tuple(rows)), "name")
    worked = _keys_worked_out(monkeypatch)
    rows[5] = _row(100, "gpu-zzz", "1")  # one row rebuilt, with a new name
    after = Table(COLUMNS, tuple(rows))
    again = sorted_rows(after, "name", True, before)  # the other direction too: the same keys
    assert worked == ["gpu-zzz"]
    assert _same(again.table, sorted_table(after, "name", True))
    assert again.table.rows[0].key == "r100"
    worked.clear()
    sorted_rows(after, "tf", False, again)  # another column: its keys are other keys
    assert len(worked) == 100


def test_a_kept_sort_holds_the_cells_own_lower_case_text() -> None:
    name = "gpu-node-0001-3"
    assert sort_key(name) == (1, 0.0, name) and sort_key(name)[2] is name  # no copy kept
    assert sort_key("GPU-B") == (1, 0.0, "gpu-b")


async def test_a_refresh_of_a_sorted_view_is_sorted_in_the_refresh_thread(monkeypatch: Any) -> None:
    from tftui.ui.render import pagememo
    from tftui.ui.screens import prebuild

    cluster, app = make()
    renders = taken(monkeypatch)
    sorts: list[tuple[str, int]] = []  # (thread, rows) of each whole-table sort

    def spy(module: Any) -> None:
        sort = module.sorted_rows

        def recorded(table: Table, *args: Any, **kwargs: Any) -> SortedRows:
            sorts.append((threading.current_thread().name, len(table.rows)))
            return sort(table, *args, **kwargs)

        monkeypatch.setattr(module, "sorted_rows", recorded)

    spy(pagememo)
    spy(prebuild)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await on_nodes(app, pilot)
        await pilot.press("N")  # by name, A to Z
        await pilot.pause()
        assert isinstance(screen, NodesScreen) and screen.sort_column == "name"
        assert [t for t, _ in sorts] == [threading.main_thread().name]  # the key sorts the rows on show
        gone = cluster.drop_node()
        sorts.clear()
        renders.clear()
        await refresh(app, pilot)
        assert renders[:1] == [True]  # the render took the table the refresh thread built
        assert sorts and all(t != threading.main_thread().name for t, _ in sorts)
        built = screen.shown_tables["main"]
        assert gone not in [r.key for r in built.rows]
        assert [r.key for r in built.rows] == [r.key for r in sorted_table(built, "name").rows]
        assert screen.query_one("#main").row_keys[:3] == [r.key for r in built.rows[:3]]  # type: ignore[attr-defined]


def test_the_refresh_thread_keeps_a_sort_per_layout_and_none_once_unsorted(monkeypatch: Any) -> None:
    from tftui.ui.screens.prebuild import Prebuilding

    class Screen(Prebuilding):
        sort: tuple[str, bool] | None = ("name", False)

        def current_sort(self, table_id: str) -> tuple[str, bool] | None:
            return self.sort

    worked = _keys_worked_out(monkeypatch)
    # each layout builds its own row objects
    wide = Table(COLUMNS, tuple(_row(i, f"w{(i * 7) % 20:02d}", "1") for i in range(20)))
    narrow = Table(COLUMNS, tuple(_row(i, f"n{(i * 7) % 20:02d}", "1") for i in range(20)))
    screen = Screen()
    for table, scope in ((wide, "wide"), (narrow, "narrow")):
        done = screen.presort("main", table, scope)
        assert done is not None and _same(done.table, sorted_table(table, "name"))
    assert len(worked) == 40
    worked.clear()
    for table, scope in ((wide, "wide"), (narrow, "narrow")):  # the next refresh: the same rows
        assert screen.presort("main", table, scope) is not None
    assert worked == []  # each layout's keys reused, not the other layout's tried
    screen.sort = None
    assert screen.presort("main", wide, "wide") is None
    assert screen._presorted == {}  # nothing kept that would hold an old refresh's rows
