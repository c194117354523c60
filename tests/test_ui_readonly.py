"""Read-only mode, driven through Textual's pilot: every write binding is registered as one, hidden
and refused at `perform` (with --read-only and on a dump), and offered by the writable console."""

from __future__ import annotations

import inspect
import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from typing import Any

import pytest
from textual.binding import Binding
from textual.dom import DOMNode

import tftui.ui.app as app_module
import tftui.ui.screens.base as base_module
import tftui.ui.screens.metrics as metrics_module
import tftui.ui.screens.modals as modals_module
import tftui.ui.screens.ops as ops_module
import tftui.ui.screens.placement as placement_module
import tftui.ui.screens.resource as resource_module
import tftui.ui.widgets.chrome as chrome_module
import tftui.ui.widgets.table as table_module
from tests.ui_engine_support import ObjectsCluster, make_app, settle
from tests.ui_engine_support import demo as demo  # a fixture (re-exported for pytest)
from tests.ui_engine_support import metrics as metrics  # a fixture (re-exported for pytest)
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import WRITE_ACTIONS
from tftui.ui.screens.modals import HelpScreen
from tftui.ui.screens.registry import ROOT_VIEWS
from tftui.ui.screens.resource import VIEWS, ResourceScreen

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
