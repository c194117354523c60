"""Numbers in table cells are never cut: a number wider than its column is abbreviated with a unit
(`10k`) or its column grows; the rows keep the exact figure for sort and export."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from textual.app import App, ComposeResult

from tftui.engine.state import ClusterState
from tftui.engine.usage import UsageIndex
from tftui.model.dump import validate_items
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.format import fit_number
from tftui.ui.render.views import NARROW, Column, Gauges, Row, Table, pools_table
from tftui.ui.widgets.table import ResourceTable


@pytest.mark.parametrize(
    ("text", "width", "shown"),
    [
        ("312", 4, "312"),
        ("10000", 4, "10k"),
        ("10500", 5, "10500"),
        ("10500", 4, "10k"),
        ("12345", 5, "12345"),
        ("123456", 5, "123k"),
        ("10500", 6, "10500"),
        ("1234567", 4, "1.2M"),
        ("1234567", 5, "1.23M"),
        ("999999", 4, "1M"),
        ("-12000", 4, "-12k"),
        ("60000", 3, "60k"),
    ],
)
def test_a_number_is_abbreviated_with_a_unit_never_cut(text: str, width: int, shown: str) -> None:
    assert fit_number(text, width) == shown


def test_no_abbreviation_fits_a_column_of_two() -> None:
    assert fit_number("10000", 2) is None


class One(App[None]):
    def compose(self) -> ComposeResult:
        yield ResourceTable(id="main")


def big_pool_data() -> ConsoleData:
    """The demo with one pool grown to 10,000 GPUs and 12,345 workers (the figures are the pool's)."""
    st = ClusterState.build(validate_items(generate_objects(nodes=12, now=DEFAULT_NOW)))
    name = sorted(st.pools)[0]
    st.pools[name] = replace(st.pools[name], gpu_count=10_000, worker_count=12_345)
    return ConsoleData("test", st, UsageIndex.build(st, {}, {}), datetime(2026, 1, 1, tzinfo=UTC))


async def test_the_pools_view_shows_10000_gpus_as_10k_not_1000() -> None:
    data = big_pool_data()
    pool = sorted(data.state.pools)[0]
    table = pools_table(data, Gauges(NARROW))
    assert next(r for r in table.rows if r.key == pool).cells["gpus"] == "10000"  # exact for sort/export
    app = One()
    async with app.run_test(size=(120, 20)) as pilot:
        widget = app.query_one(ResourceTable)
        widget.show(table)
        await pilot.pause()
        assert str(widget.get_cell(pool, "gpus")) == "10k"
        assert str(widget.get_cell(pool, "workers")) == "12k"
        other = sorted(data.state.pools)[1]
        assert str(widget.get_cell(other, "gpus")) == str(data.state.pools[other].gpu_count)


async def test_a_column_grows_when_no_abbreviation_fits() -> None:
    table = Table((Column("n", "N", 2),), (Row("a", {"n": "10000"}, "a"), Row("b", {"n": "7"}, "b")))
    app = One()
    async with app.run_test(size=(60, 10)) as pilot:
        widget = app.query_one(ResourceTable)
        widget.show(table)
        await pilot.pause()
        assert str(widget.get_cell("a", "n")) == "10000"
        assert widget.columns[next(iter(widget.columns))].width == 5
