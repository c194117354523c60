"""The first screen: the pools view is posted as soon as the state is built, before the usage join
and the operation screens, and that first data carries no usage index at all (an empty index is a
pass over every GPU, node and worker that shows exactly what no index shows: no used figures)."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.ui.app import TfTuiApp
from tftui.ui.appbase import DataLoaded
from tftui.ui.load.data import ConsoleData
from tftui.ui.widgets.table import ResourceTable


class Recording(TfTuiApp):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.posted: list[ConsoleData] = []

    def on_data_loaded(self, message: DataLoaded) -> None:
        self.posted.append(message.data)
        super().on_data_loaded(message)


async def test_the_first_data_is_the_state_alone_then_the_rest(demo: SimCluster) -> None:
    app = Recording(demo, None, clock=lambda: DEFAULT_NOW, refresh_interval=None)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(4):
            await app.workers.wait_for_complete()
            await pilot.pause()
        first, rest = app.posted[0], app.posted[-1]
        assert first.pending and not rest.pending
        assert first.state is rest.state  # the same build, completed
        assert not first.usage.gpus and not first.usage.pools  # no index before the pools view
        assert set(rest.usage.gpus) == set(rest.state.gpus)  # then the join, every GPU (no data)
        assert not any(u.has_data for u in rest.usage.gpus.values())
        table = app.screen.query_one("#main", ResourceTable)
        assert sorted(table.row_keys) == sorted(rest.state.pools)
