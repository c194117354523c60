"""The console's operation screens, driven through Textual's pilot against the writable demo cluster.

The request form's parsing, placement preview (form validation, result per mode), compaction and
defrag screens (they show the engine's plan), and the operation tables and descriptions. Manual
compaction and the other writes: test_ui_writes.py; read-only mode: test_ui_readonly.py.
"""

from __future__ import annotations

import copy
import os
import re
import threading

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from typing import Any

import pytest
from textual.widgets import Input

import tftui.ui.app as app_module
import tftui.ui.screens.placement as placement_module
from tests.ui_engine_support import RELEASED, ObjectsCluster, make_app, settle, state_of, text_of
from tests.ui_engine_support import demo as demo  # a fixture (re-exported for pytest)
from tests.ui_engine_support import metrics as metrics  # a fixture (re-exported for pytest)
from tftui.engine.fit import Request
from tftui.engine.placement import preview
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.forms import parse_request
from tftui.ui.load.ops import build_ops
from tftui.ui.render.gauge import render_shift
from tftui.ui.screens.ops import CompactionScreen, DefragScreen
from tftui.ui.screens.placement import PlacementScreen
from tftui.ui.screens.resource import PoolsScreen
from tftui.ui.widgets.table import ResourceTable

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
