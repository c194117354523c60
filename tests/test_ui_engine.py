"""The console's operation screens, driven through Textual's pilot against the writable demo cluster.

Placement preview (form validation, result per mode), compaction and defrag screens (they show the
engine's plan), manual compaction (confirm dialog with Cancel focused; cancel does nothing; confirm
runs the runtime's round and the released nodes reach the plan, the journal and the events),
events/journal view, and read-only mode (every write binding hidden, refused at `perform`).
"""

from __future__ import annotations

import copy
import inspect
import io
import os
import re
import threading

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from datetime import timedelta
from typing import Any

import pytest
from rich.console import Console
from textual.binding import Binding
from textual.dom import DOMNode
from textual.pilot import Pilot
from textual.widgets import Button, Input, Static

import tftui.ui.app as app_module
import tftui.ui.screens.base as base_module
import tftui.ui.screens.metrics as metrics_module
import tftui.ui.screens.modals as modals_module
import tftui.ui.screens.ops as ops_module
import tftui.ui.screens.placement as placement_module
import tftui.ui.screens.resource as resource_module
import tftui.ui.widgets.chrome as chrome_module
import tftui.ui.widgets.table as table_module
from tftui.engine.compaction import plan_manual_compaction
from tftui.engine.fit import Request
from tftui.engine.placement import preview
from tftui.engine.state import ClusterState
from tftui.model.dump import validate_items
from tftui.sources.ports import ActionError
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import WRITE_ACTIONS, ActionDone, TfTuiApp
from tftui.ui.forms import parse_request
from tftui.ui.load.ops import build_ops
from tftui.ui.render.gauge import render_shift
from tftui.ui.screens.modals import ConfirmScreen, HelpScreen
from tftui.ui.screens.ops import CompactionScreen, DefragScreen, EventsScreen
from tftui.ui.screens.placement import PlacementScreen
from tftui.ui.screens.registry import ROOT_VIEWS
from tftui.ui.screens.resource import VIEWS, PoolsScreen, ResourceScreen
from tftui.ui.widgets.table import ResourceTable

RELEASED = ["dev-4090-03", "dev-4090-04"]  # what a forced round of demo-dev releases at DEFAULT_NOW


@pytest.fixture(scope="module")
def metrics() -> SimMetrics:
    return SimMetrics(SimCluster(seed=7, nodes=40, now=DEFAULT_NOW).snapshot(), seed=7, now=DEFAULT_NOW)


@pytest.fixture
def demo() -> ActingSimCluster:
    return ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW)


def state_of(cluster: Any) -> ClusterState:
    return ClusterState.build(validate_items(cluster.snapshot()))


def make_app(cluster: Any, metrics: SimMetrics | None, *, read_only: bool = False) -> TfTuiApp:
    return TfTuiApp(cluster, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None, read_only=read_only)


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def text_of(app: TfTuiApp, selector: str, width: int = 400) -> str:
    """The plain text a Static shows (Rich renderables rendered wide, so nothing is cut)."""
    content = app.screen.query_one(selector, Static).content
    if isinstance(content, str):
        return content
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(content)
    return console.export_text()


class ObjectsCluster:
    """A read-only ClusterPort over a fixed object list (a dump, in effect)."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    def describe(self) -> str:
        return "dump test.json"

    def snapshot(self) -> list[dict[str, Any]]:
        return list(self.objects)


# -- pure parts ------------------------------------------------------------------------------------


def test_parse_request_names_the_field() -> None:
    pools = {"demo-dev"}
    request, errors = parse_request(
        {"pool": "demo-dev", "amount": "25%", "vram": "20Gi", "count": "2"}, pools
    )
    assert errors == {} and request == Request(vram=20 * 2**30, compute_percent=25.0, count=2)
    request, errors = parse_request({"pool": "demo-dev", "amount": "312500m", "vram": "1Gi", "model": "H100"})
    assert request == Request(vram=2**30, tflops=312.5, model="H100")
    _, errors = parse_request({"pool": "nope", "amount": "lots", "vram": "-1Gi", "count": "0"}, pools)
    assert set(errors) == {"pool", "amount", "vram", "count"}
    assert "pools: demo-dev" in errors["pool"] and "'lots'" in errors["amount"]
    _, errors = parse_request({"pool": "demo-dev", "amount": "150%", "vram": "", "count": "x"}, pools)
    assert "0-100%" in errors["amount"] and "required" in errors["vram"] and "whole number" in errors["count"]


def test_shift_gauge_draws_before_and_added() -> None:
    text = render_shift(40.0, 60.0, 10).plain
    assert text == "▒▒▒▒▓▓···· " + " 40%→ 60%"  # ▒ allocated now, ▓ what the request adds
    assert render_shift(0.0, 0.3, 4).plain == "▓··· " + "  0%→ <1%"


# -- placement preview -----------------------------------------------------------------------------


async def test_p_on_a_pool_opens_the_preview_and_shows_every_mode(
    demo: ActingSimCluster, metrics: SimMetrics
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("down", "down", "down", "p")  # demo-training
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PlacementScreen) and screen.pool == "demo-training"
        assert screen.query_one("#place-amount", Input).has_focus
        expected = preview(app.data.state, "demo-training", Request(vram=8 * 2**30, tflops=10))  # type: ignore[union-attr]
        assert screen.preview == expected
        result = text_of(app, "#place-result")
        for mp in expected.modes:
            assert mp.placement.mode in result
            assert mp.placement.node is not None and mp.placement.node in result
        assert "▶ CompactFirst" in result  # demo-training's current mode is marked
        assert "pools › demo-training › place" in str(screen.query_one("#crumbs").render())
        await pilot.press("escape")  # esc goes back to the pools
        await settle(pilot)
        assert isinstance(app.screen, PoolsScreen)


async def test_bad_input_shows_the_error_inline_then_a_good_one_previews(
    demo: ActingSimCluster, metrics: SimMetrics
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("colon", *"place", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PlacementScreen)
        amount = screen.query_one("#place-amount", Input)
        amount.value = "a lot"
        screen.query_one("#place-count", Input).value = "999"
        amount.focus()
        await pilot.press("enter")
        await settle(pilot)
        errors = text_of(app, "#place-errors")
        assert "compute: 'a lot' is not a quantity" in errors
        assert "gpus: GPU count must be 1-128, got 999" in errors
        assert screen.query_one("#field-amount").has_class("-invalid")
        assert screen.preview is None and text_of(app, "#place-result") == ""

        amount.value = "50%"
        screen.query_one("#place-count", Input).value = "2"
        screen.query_one("#place-model", Input).value = "H100"
        await pilot.press("enter")
        await settle(pilot)
        assert not screen.query_one("#place-errors").display
        assert screen.preview is not None
        assert screen.preview.request == Request(vram=8 * 2**30, compute_percent=50.0, count=2, model="H100")
        assert "2 × (50% compute, 8Gi VRAM) · model H100" in text_of(app, "#place-result")


async def test_nothing_fits_gives_the_engines_reason(demo: ActingSimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        await pilot.press("p")  # demo-dev: RTX 4090 only
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PlacementScreen)
        screen.query_one("#place-model", Input).value = "H100"
        await pilot.press("enter")
        await settle(pilot)
        assert screen.preview is not None and not any(m.placement.ok for m in screen.preview.modes)
        result = text_of(app, "#place-result")
        assert result.count("nothing fits") == 3
        assert "no gpus available" in result  # the engine's reason (wrapped in its column)
        assert "model" in result  # the filter stage that removed the GPUs


async def test_preview_runs_in_a_thread_worker(
    demo: ActingSimCluster, metrics: SimMetrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return preview(*args, **kwargs)

    monkeypatch.setattr(placement_module, "preview", spy)
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        assert isinstance(app.screen, PlacementScreen) and app.screen.preview is not None
    assert threads and threading.main_thread().name not in threads


# -- compaction, defrag, events --------------------------------------------------------------------


async def test_compaction_screen_shows_the_engines_decisions(
    demo: ActingSimCluster, metrics: SimMetrics
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("colon", *"compaction", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CompactionScreen)
        assert screen.query_one("#pools", ResourceTable).row_keys == sorted(app.data.state.pools)  # type: ignore[union-attr]
        ops = build_ops(state_of(demo), DEFAULT_NOW)
        result = ops.compaction["demo-dev"].result
        decisions = screen.query_one("#decisions", ResourceTable)
        assert decisions.row_keys == [r.node for r in result.released] + [k.node for k in result.kept]
        assert [r.node for r in result.released] == RELEASED
        summary = text_of(app, "#ops-summary")
        assert "period 5m ·" in summary and "due first-run" in summary and "releases 2 nodes" in summary
        assert "warm ≥" in summary and "min ≥" in summary and "✓" in summary
        # the cursor picks the pool; enter on a node row opens the node
        await pilot.press("down")
        await settle(pilot)
        assert decisions.row_keys[0].startswith("inf-")
        assert "compaction › demo-inference" in str(screen.query_one("#crumbs").render())
        await pilot.press("tab", "enter")
        await settle(pilot)
        assert type(app.screen).__name__ == "NodeScreen"


async def test_defrag_screen_shows_config_window_candidates_and_move(
    demo: ActingSimCluster, metrics: SimMetrics
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        await app.push_screen(DefragScreen("demo-dev"))
        await settle(pilot)
        summary = text_of(app, "#ops-summary")
        assert "state not-due" in summary
        assert "valid · '0 3 * * *' in America/New_York · maxDuration 2h · threshold 40%" in summary
        # the window in the pool's zone and in UTC
        assert "next 2026-12-01 03:00–05:00 EST · 2026-12-01 08:00–10:00 UTC · in 20h0m" in summary
        view = app.data.ops.defrag["demo-dev"]  # type: ignore[union-attr]
        assert view.preview is not None and view.preview.evict is not None
        ev = view.preview.evict
        assert f"evict {ev.pod}: {ev.node} → {ev.target}" in summary
        nodes = app.screen.query_one("#defrag-nodes", ResourceTable)
        assert nodes.row_keys[: len(view.preview.candidates)] == [c.node for c in view.preview.candidates]
        assert "recent defrag events" in text_of(app, "#defrag-events")


async def test_defrag_screen_shows_an_invalid_config(metrics: SimMetrics) -> None:
    objects = copy.deepcopy(SimCluster(seed=7, nodes=40, now=DEFAULT_NOW).snapshot())
    pool = next(o for o in objects if o["kind"] == "GPUPool" and o["metadata"]["name"] == "demo-dev")
    pool["spec"]["nodeManagerConfig"]["nodeCompaction"]["defrag"]["timezone"] = "Mars/Olympus"
    app = make_app(ObjectsCluster(objects), metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await app.push_screen(DefragScreen("demo-dev"))
        await settle(pilot)
        summary = text_of(app, "#ops-summary")
        assert "state invalid" in summary
        assert 'invalid: invalid timezone "Mars/Olympus"' in summary


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


# -- read-only -------------------------------------------------------------------------------------

UI_MODULES = [
    app_module,
    base_module,
    resource_module,
    metrics_module,
    ops_module,
    placement_module,
    modals_module,
    chrome_module,
    table_module,
]


def all_bindings() -> list[tuple[str, Binding]]:
    """Every binding declared by a console class: (class name, binding)."""
    out: list[tuple[str, Binding]] = []
    for module in UI_MODULES:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, DOMNode) and cls.__module__ == module.__name__:
                for b in cls.__dict__.get("BINDINGS", []):
                    if isinstance(b, Binding):
                        out.append((cls.__name__, b))
    for b in resource_module.POOL_BINDINGS:
        if isinstance(b, Binding):
            out.append(("POOL_BINDINGS", b))
    return out


def write_bindings() -> list[Binding]:
    return [b for _, b in all_bindings() if b.action in WRITE_ACTIONS]


def test_every_write_binding_is_registered() -> None:
    bindings = all_bindings()
    writes = write_bindings()
    assert {b.action for b in writes} == set(WRITE_ACTIONS)
    for b in writes:  # write bindings say so in their id, and nothing else claims to be one
        assert (b.id or "").startswith("tftui.write."), b
    for _, b in bindings:
        if (b.id or "").startswith("tftui.write."):
            assert b.action in WRITE_ACTIONS, b


def test_every_view_has_a_screen() -> None:
    assert tuple(ROOT_VIEWS) == VIEWS


SCREENS_WITH_WRITES = [
    ("pools", None),
    ("compaction", None),
    ("defrag", None),
]


@pytest.mark.parametrize("how", ["flag", "dump"])
async def test_read_only_hides_and_refuses_every_write(
    how: str, demo: ActingSimCluster, metrics: SimMetrics
) -> None:
    cluster: Any = (
        demo if how == "flag" else ObjectsCluster(SimCluster(seed=7, nodes=40, now=DEFAULT_NOW).snapshot())
    )
    app = make_app(cluster, metrics, read_only=how == "flag")
    keys = {b.key for b in write_bindings()}
    actions = set(WRITE_ACTIONS)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        assert app.read_only and app.runtime is None
        assert str(app.screen.query_one("#header-readonly").render()) == "read-only"
        for view in ("pools", "compaction", "defrag", "place", "events"):
            assert app.switch_view(view)
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, ResourceScreen)
            active = {ab.binding.action for ab in screen.active_bindings.values()}
            assert not active & actions, (view, active & actions)
            assert not any(
                ab.binding.key in keys and ab.binding.action in actions
                for ab in screen.active_bindings.values()
            )
            help_entries = app.help_entries(screen)
            assert not any(e.description == "Compact" for e in help_entries), view
            if view != "place":  # the form takes letters as text
                await pilot.press(*keys)
                await settle(pilot)
                assert app.screen is screen, view  # no confirm dialog
        for action in actions:
            assert app.perform(action, pool="demo-dev") is False
        await settle(pilot)
        assert any("read-only console" in n.message for n in app._notifications)
    if how == "flag":
        assert demo.events() == []
        assert all(
            not (o["metadata"].get("deletionTimestamp"))
            for o in demo.snapshot()
            if o["kind"] == "GPUNodeClaim"
        )


async def test_writable_console_offers_the_write_keys(demo: ActingSimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert not app.read_only and not app.screen.query_one("#header-readonly").display
        active = {ab.binding.action for ab in app.screen.active_bindings.values()}
        # the pool writes; `a` (workload_autoscale) is on the workload screens (test_ui_autoscale),
        # `e` (admit) on the workloads and workers views (test_keymap walks them)
        assert set(WRITE_ACTIONS) - {"workload_autoscale", "admit"} <= active
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = app.screen.keys_text
        assert "Compact" in keys and "Place" in keys


def test_every_operation_table_fits_its_layout(demo: ActingSimCluster, metrics: SimMetrics) -> None:

    from tests.fitting import WIDTHS, assert_fits
    from tftui.ui.load.data import load
    from tftui.ui.render.opsviews import (
        compaction_decisions_table,
        compaction_pools_table,
        defrag_nodes_table,
        defrag_pools_table,
        events_table,
        journal_table,
    )
    from tftui.ui.render.views import layout_for

    runtime = app_module.make_runtime(demo, lambda: DEFAULT_NOW)
    assert runtime is not None
    runtime.manual_compaction("demo-dev")  # so events and journal have rows
    data = load(demo, metrics, DEFAULT_NOW, runtime)
    assert data.ops.events and data.ops.journal
    for width in WIDTHS:
        layout = layout_for(width)
        tables = [
            compaction_pools_table(data, layout),
            compaction_decisions_table(data.ops.compaction["demo-dev"], layout),
            defrag_pools_table(data, layout),
            defrag_nodes_table(data.ops.defrag["demo-dev"], layout),
            events_table(data.ops.events, layout),
            journal_table(data.ops.journal, layout),
        ]
        for table in tables:
            assert_fits(table, width)


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


def test_defrag_utilization_is_shown_and_labelled_for_every_node(demo: ActingSimCluster) -> None:
    """UTIL was `—` for above-threshold nodes while DETAIL said 75 %, unlabelled next to TFLOPS
    gauges; a pool without defrag and a disabled one read `off` and `disabled`."""
    from tftui.ui.load.data import load
    from tftui.ui.render.opsviews import defrag_nodes_table, defrag_pools_table
    from tftui.ui.render.views import NORMAL

    data = load(demo, None, DEFAULT_NOW)
    view = data.ops.defrag["demo-dev"]
    table = defrag_nodes_table(view, NORMAL)
    assert [c.label for c in table.columns if c.key == "util"] == ["GPUS BUSY"]
    above = [r for r in table.rows if str(r.cells["decision"]) == "above-threshold"]
    assert above
    for row in above:
        shown = str(row.cells["util"])
        said = re.search(r"utilization ([\d.]+)%", str(row.cells["detail"]))
        assert shown != "—" and said is not None
        assert float(shown.rstrip("%")) == pytest.approx(float(said.group(1)), abs=0.5)
    pools = {r.key: r.cells for r in defrag_pools_table(data, NORMAL).rows}
    for name, cells in pools.items():
        v = data.ops.defrag[name]
        if v.error is None and not (v.configured and v.enabled):
            assert cells["state"] == "off" and cells["enabled"] == ("off" if v.configured else "unset")


def test_describe_reads_like_an_operator_writes_and_lists_decisions_and_events(
    demo: ActingSimCluster,
) -> None:
    """`d` showed `vram: 687194767360.0` and nothing of what was decided or happened."""
    from tftui.ui.load.data import load
    from tftui.ui.render.objects import describe

    runtime = app_module.make_runtime(demo, demo.clock)
    assert runtime is not None
    runtime.manual_compaction("demo-dev")
    data = load(demo, None, demo.now(), runtime)
    released = next(n for n, d, _ in data.ops.compaction["demo-dev"].decisions() if d == "already-released")
    text = describe(data, "GPUNode", released)
    assert text is not None
    assert "vram: 96Gi" in text and ".0\n" not in text and "e+" not in text
    assert "decisions:" in text and "compaction: 'already-released" in text and "defrag:" in text
    events = text[text.index("events:") :]
    assert "Compaction" in events and released in events
    pool = describe(data, "GPUPool", "demo-dev")
    assert pool is not None and "journal compaction:" in pool and "Normal Compaction" in pool
    worker = next(iter(data.state.workers))
    assert "events:" in (describe(data, "Pod", worker) or "")
