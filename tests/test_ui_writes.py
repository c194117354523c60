"""The console's writes, driven through Textual's pilot against the writable demo cluster: manual
compaction (confirm dialog with Cancel focused; cancel does nothing; confirm runs the runtime's round
and the released nodes reach the plan, the journal and the events), a write the cluster refuses,
and the runtime acting on its own on the demo's simulated clock.
"""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from datetime import timedelta
from typing import Any

from textual.widgets import Button

import tftui.ui.app as app_module
from tests.ui_engine_support import RELEASED, make_app, settle, state_of, text_of
from tests.ui_engine_support import demo as demo  # a fixture (re-exported for pytest)
from tests.ui_engine_support import metrics as metrics  # a fixture (re-exported for pytest)
from tftui.engine.compaction import plan_manual_compaction
from tftui.sources.ports import ActionError
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import ActionDone, TfTuiApp
from tftui.ui.screens.modals import ConfirmScreen
from tftui.ui.screens.ops import CompactionScreen, EventsScreen
from tftui.ui.screens.resource import PoolsScreen
from tftui.ui.widgets.table import ResourceTable

# -- manual compaction -----------------------------------------------------------------------------


async def test_confirm_dialog_lists_the_release_and_focuses_cancel(
    demo: ActingSimCluster, metrics: SimMetrics
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        before = demo.snapshot()
        await pilot.press("c")  # on demo-dev
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert dialog.focused is dialog.query_one("#confirm-cancel", Button)
        body = text_of(app, "#confirm-body")
        expected, _ = plan_manual_compaction(state_of(demo), "demo-dev", DEFAULT_NOW)
        for release in expected.pools["demo-dev"].compaction.released:  # type: ignore[union-attr]
            assert release.node in body and release.action in body
        assert "available now → after" in body and "warm ≥" in body and "min ≥" in body

        await pilot.press("enter")  # enter on Cancel closes
        await settle(pilot)
        assert isinstance(app.screen, PoolsScreen)
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape")  # esc cancels too
        await settle(pilot)
        assert isinstance(app.screen, PoolsScreen)
        assert demo.snapshot() == before and demo.events() == []
        assert app.runtime is not None and list(app.runtime.journal.entries()) == []


async def test_confirm_runs_the_manual_compaction(demo: ActingSimCluster, metrics: SimMetrics) -> None:
    seen: list[Any] = []
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40), notifications=True, message_hook=seen.append) as pilot:
        await settle(pilot)
        await pilot.press("c", "tab", "enter")
        await settle(pilot)
        done = [m for m in seen if isinstance(m, ActionDone)]
        assert len(done) == 1 and done[0].pool == "demo-dev"
        assert done[0].plan is not None
        result = done[0].plan.pools["demo-dev"].compaction
        assert result is not None and [r.node for r in result.released] == RELEASED
        assert any(f"released {', '.join(RELEASED)}" in n.message for n in app._notifications)
        journal = [e.message for e in app.runtime.journal.entries()]  # type: ignore[union-attr]
        for node in RELEASED:
            assert any(m.startswith(f"release {node}") for m in journal)
        assert sum(e["reason"] == "Compaction" for e in demo.events()) == 2
        # the refresh after the write shows it: the nodes are now already released
        data = app.data
        assert data is not None and data.ops.journal and data.ops.events
        kept = {k.node: k.reason for k in data.ops.compaction["demo-dev"].result.kept}
        assert all(kept[node] == "already-released" for node in RELEASED)
        assert data.ops.compaction["demo-dev"].last_run == DEFAULT_NOW

        await pilot.press("colon", *"events", "enter")
        await settle(pilot)
        assert isinstance(app.screen, EventsScreen)
        events = app.screen.query_one("#events", ResourceTable)
        journal_table = app.screen.query_one("#journal", ResourceTable)
        assert events.row_keys[0] == "event-1"  # newest first
        assert len(journal_table.row_keys) == len(data.ops.journal)
        assert journal_table.row_keys[0] == f"journal-{len(data.ops.journal) - 1}"


async def test_c_from_the_compaction_screen_acts_on_the_selected_pool(
    demo: ActingSimCluster, metrics: SimMetrics
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await app.push_screen(CompactionScreen("demo-training"))
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert "pool demo-training" in str(app.screen.query_one("#confirm-title").render())
        assert "Nothing would be released" in text_of(app, "#confirm-body")


# -- a refused write, the runtime on its own -------------------------------------------------------


class FailingRuntime:
    """A runtime whose writes are refused by the cluster."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.journal = inner.journal
        self.actuator = inner.actuator

    def preview_manual_compaction(self, pool: str) -> Any:
        return self.inner.preview_manual_compaction(pool)

    def manual_compaction(self, pool: str) -> Any:
        raise ActionError("apiserver: the GPUPool changed, try again", 409)


async def test_a_failed_write_is_reported_not_raised(demo: ActingSimCluster, metrics: SimMetrics) -> None:
    inner = app_module.make_runtime(demo, lambda: DEFAULT_NOW)
    app = TfTuiApp(
        demo, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None, runtime=FailingRuntime(inner)
    )
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("c", "tab", "enter")
        await settle(pilot)
        assert isinstance(app.screen, PoolsScreen)
        assert any(
            "manual compaction of demo-dev failed: apiserver: the GPUPool changed" in n.message
            for n in app._notifications
        )
        assert app.perform("manual_compaction", pool="demo-dev")  # not stuck "already running"
        await settle(pilot)


async def test_demo_speed_runs_the_runtime_on_the_simulated_clock() -> None:
    """With a simulation speed the console moves the demo's clock and the runtime acts on its own:
    the first refresh starts the clock, the next one reconciles the due pools (compaction releases
    the demo's empty dev nodes without any key being pressed, and autoscaling applies)."""
    import time as _time

    from tftui.sources.sim.acting import ActingSimCluster
    from tftui.sources.sim.cluster import DEFAULT_NOW
    from tftui.sources.sim.usage import SimMetrics
    from tftui.ui.app import TfTuiApp

    sim = ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW)
    app = TfTuiApp(
        sim,
        SimMetrics(sim.snapshot(), seed=7, now=DEFAULT_NOW),
        clock=sim.clock,
        refresh_interval=None,
        sim_speed=600.0,
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        start = sim.now()
        _time.sleep(0.2)  # 0.2 s wall × 600 = 2 simulated minutes
        app.action_refresh()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert sim.now() - start >= timedelta(minutes=1)
        assert app.runtime is not None
        messages = [e.message for e in app.runtime.journal.entries()]
        assert any("dev-4090-03" in m and "releas" in m for m in messages), messages[:10]
        # the console's runtime has the metrics, so its loop also autoscales enabled workloads
        assert any(m.startswith("autoscale ml-batch/batch-transcribe:") for m in messages), messages[:10]
