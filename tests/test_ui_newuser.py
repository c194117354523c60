"""What a new user hits first, driven through Textual's pilot on the demo: each test names the
defect it guards (it failed on the console before the fix)."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from typing import Any

import pytest
from rich.text import Text
from textual.pilot import Pilot

from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp
from tftui.ui.screens.metrics import WorkloadScreen
from tftui.ui.screens.modals import ConfirmScreen
from tftui.ui.screens.resource import NodeScreen, ResourceScreen, WorkersScreen
from tftui.ui.themes import LIGHT
from tftui.ui.widgets.table import ResourceTable


@pytest.fixture(scope="module")
def metrics() -> SimMetrics:
    return SimMetrics(SimCluster(seed=7, nodes=40, now=DEFAULT_NOW).snapshot(), seed=7, now=DEFAULT_NOW)


def make_app(metrics: SimMetrics, **kw: Any) -> TfTuiApp:
    cluster = ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW)
    return TfTuiApp(cluster, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None, **kw)


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def main_table(app: TfTuiApp) -> ResourceTable:
    return app.screen.query_one("#main", ResourceTable)


async def test_light_theme_redraws_free_dots_and_separators_at_once(metrics: SimMetrics) -> None:
    app = make_app(metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.switch_view("nodes")
        await settle(pilot)
        table = main_table(app)
        dark_free = table.gauge_styles().free
        await pilot.press("ctrl+t")
        await settle(pilot)
        assert app.theme == LIGHT.name
        free = table.gauge_styles().free
        assert free != dark_free
        key = table.row_keys[0]
        cell = table.get_cell(key, "tflops")
        assert isinstance(cell, Text)
        styles = {cell.plain[span.start : span.end]: span.style for span in cell.spans}
        dots = next(style for piece, style in styles.items() if piece.startswith("·"))
        slash = styles["/"]
        assert dots == free and slash == free  # no refresh needed: the light theme's colour


async def test_colon_in_the_placement_form_opens_the_command_prompt(metrics: SimMetrics) -> None:
    app = make_app(metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.switch_view("place")
        await settle(pilot)
        assert app.focused is not None and app.focused.id == "place-amount"  # the form has focus
        await pilot.press("colon", *"pools", "enter")
        await settle(pilot)
        assert type(app.screen).__name__ == "PoolsScreen"
        assert app.switch_view("place")
        await settle(pilot)
        await pilot.press("5")  # digits still go to the field
        await settle(pilot)
        assert app.screen.query_one("#place-amount").value == "105"  # type: ignore[attr-defined]


async def test_autoscale_column_and_a_dialog_title_that_asks(metrics: SimMetrics) -> None:
    app = make_app(metrics)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.switch_view("workloads")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ResourceScreen)
        table = main_table(app)
        shown = screen.shown_tables["main"]
        assert "AUTOSCALE" in [c.label for c in shown.columns]
        values = {str(table.get_cell(k, "autoscale")) for k in table.row_keys}
        assert values == {"on", "off"}
        first = table.row_keys[0]
        state = str(table.get_cell(first, "autoscale"))
        await pilot.press("a")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        title = dialog._title
        other = "off" if state == "on" else "on"
        assert title.startswith(f"Turn autoscaling {other}?"), title


async def test_enter_on_a_worker_goes_somewhere_new(metrics: SimMetrics) -> None:
    """Enter on a worker opened its node again (`nodes › n › gpu › workers › n`)."""
    app = make_app(metrics)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.switch_view("nodes")
        await settle(pilot)
        await app.push_screen(NodeScreen("inf-l40s-03", trail=("nodes", "inf-l40s-03")))
        await settle(pilot)
        gpus = app.screen.query_one("#gpus", ResourceTable)
        busy = next(k for k in gpus.row_keys if str(gpus.get_cell(k, "workers")) != "0")
        gpus.move_cursor(row=gpus.get_row_index(busy))
        gpus.focus()
        await pilot.press("enter")  # the GPU's workers
        await settle(pilot)
        assert isinstance(app.screen, WorkersScreen)
        await pilot.press("enter")  # a worker: its workload, not inf-l40s-03 again
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, WorkloadScreen)
        trail = screen.crumb_trail()
        assert len(trail) == len(set(trail)), trail
        await pilot.press("enter")  # from the workload, a worker: its node (not yet in the trail)
        await settle(pilot)
        trail = app.screen.crumb_trail()
        assert len(trail) == len(set(trail)), trail


async def test_released_nodes_read_releasing_after_a_manual_compaction(metrics: SimMetrics) -> None:
    app = make_app(metrics)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("c")  # demo-dev, the first pool
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("tab", "enter")
        await settle(pilot)
        assert app.switch_view("nodes")
        await settle(pilot)
        table = main_table(app)
        phases = {k: str(table.get_cell(k, "phase")) for k in table.row_keys}
        assert phases["dev-4090-03"] == "Releasing", phases["dev-4090-03"]
        assert phases["dev-4090-01"] == "Running"


async def test_help_at_80_columns_shows_every_key_and_its_whole_description(metrics: SimMetrics) -> None:
    """At 80 columns the help grid dropped the key column and cut the explanations."""
    from textual.geometry import Region

    from tftui.ui.screens.modals import HelpScreen
    from tftui.ui.widgets.plain import PlainStatic

    app = make_app(metrics)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.switch_view("workloads")
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        keys = help_screen.query_one("#help-keys", PlainStatic)
        strips = keys.render_lines(Region(0, 0, keys.size.width, keys.size.height))
        lines = ["".join(seg.text for seg in strip).rstrip() for strip in strips]
        text = " ".join(" ".join(lines).split())
        for entry in help_screen._entries:
            row = next((line for line in lines if entry.description in line), None)
            assert row is not None and row.split(entry.description)[0].strip() == entry.key, (entry, row)
            assert " ".join(entry.tooltip.split()) in text, entry.tooltip


async def test_pools_view_shows_releasable_and_fragmentation_and_the_header_sums_up(
    metrics: SimMetrics,
) -> None:
    """Waste at a glance: what compaction frees now and how stranded free capacity is, per pool;
    the header carries allocated against used for the whole cluster."""
    from tftui.ui.load.fragmentation import fragmentation, typical_request

    app = make_app(metrics)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = main_table(app)
        data = app.data
        assert data is not None
        releasing = {
            p: [n for n, d, _ in c.decisions() if d == "release"] for p, c in data.ops.compaction.items()
        }
        for pool in table.row_keys:
            assert str(table.get_cell(pool, "releasable")).strip() == str(len(releasing[pool]))
            frag = fragmentation(data.state, pool)
            assert frag is not None and 0 <= frag <= 100
            assert str(table.get_cell(pool, "frag")).strip() == f"{frag:.0f}%"
        assert releasing["demo-dev"] == ["dev-4090-03", "dev-4090-04"]
        # fragmentation by hand for one pool: free TFLOPS on GPUs too small for the median request
        typical = typical_request(data.state, "demo-inference")
        assert typical is not None
        gpus = [g for g in data.state.gpus.values() if g.pool == "demo-inference" and g.available.tflops > 0]
        small = [g for g in gpus if g.available.tflops < typical.tflops or g.available.vram < typical.vram]
        assert small and len(small) < len(gpus)  # the demo has both kinds
        expected = sum(g.available.tflops for g in small) / sum(g.available.tflops for g in gpus) * 100
        assert fragmentation(data.state, "demo-inference") == pytest.approx(expected)
        header = str(app.screen.query_one("#header-summary").render())
        assert header.startswith("TFLOPS ") and "% allocated · " in header and "% used" in header
        assert "2 nodes releasable" in header


async def test_sort_by_used_by_gap_and_by_waste(metrics: SimMetrics) -> None:
    """U sorts by used %, X by the allocated − used gap (largest first), $ by waste $ (most first)."""
    from tftui.ui.render.views import GaugeCell

    app = make_app(metrics)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.switch_view("nodes")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ResourceScreen)

        def figures(figure: str) -> list[float]:
            cells = [r.cells["tflops"] for r in screen.shown_tables["main"].rows]
            values = [getattr(c, figure) for c in cells if isinstance(c, GaugeCell)]
            return [v for v in values if v is not None]

        await pilot.press("U")
        await settle(pilot)
        used = figures("used_pct")
        assert len(used) > 10 and used == sorted(used)
        await pilot.press("X")
        await settle(pilot)
        gaps = figures("gap_pct")
        assert gaps == sorted(gaps, reverse=True) and gaps[0] > gaps[-1]
        assert "sort gap↓" in screen.crumb_state()
        assert app.switch_view("waste")
        await settle(pilot)
        await pilot.press("dollar_sign")
        await settle(pilot)
        waste = app.screen
        assert isinstance(waste, ResourceScreen)
        money = [r.cells["money"] for r in waste.shown_tables["main"].rows]
        values = [getattr(c, "value", None) for c in money]
        known = [v for v in values if v is not None]
        assert len(known) > 3 and known == sorted(known, reverse=True)
