"""Console behaviour driven through Textual's pilot, against the embedded demo cluster.

Covers view switching (with aliases and completion), filter, drill-down and back, help, warnings,
the quit keys and the tables' widths. The refresh worker and degraded sources: test_ui_refresh.py.
"""

from __future__ import annotations

import copy
import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

import pytest
from textual.widgets import Label

from tests.fitting import WIDTHS, assert_fits
from tests.ui_support import POOLS, FlakyCluster, cell_text, command, main_table, make_app, plain, settle
from tftui.engine.state import ClusterState
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp
from tftui.ui.load.data import load
from tftui.ui.render.nodeviews import gpus_table, nodes_table
from tftui.ui.render.views import Gauges, layout_candidates, layout_for, pools_table, rendered
from tftui.ui.render.widths import fits
from tftui.ui.render.workviews import workers_table, workloads_table
from tftui.ui.screens.metrics import WorkloadScreen
from tftui.ui.screens.modals import HelpScreen, WarningsScreen
from tftui.ui.screens.resource import (
    GpusScreen,
    NodeScreen,
    NodesScreen,
    PoolsScreen,
    ResourceScreen,
    WorkersScreen,
    WorkloadsScreen,
)
from tftui.ui.widgets.chrome import Breadcrumb, Prompt
from tftui.ui.widgets.table import ResourceTable


@pytest.fixture(scope="module")
def state(demo: SimCluster) -> ClusterState:
    return load(demo, None, DEFAULT_NOW).state


def crumbs(app: TfTuiApp) -> str:
    return str(app.screen.query_one(Breadcrumb).render())


# -- views and switching -------------------------------------------------------------------------


async def test_pools_view_shows_pools_with_gauges(demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, PoolsScreen)
        table = main_table(app)
        assert table.row_keys == POOLS
        # at 120 columns PROVISIONING gives way to the waste columns (it shows from 200)
        assert "provisioning" not in table.columns and "money" in table.columns
        assert cell_text(table, "demo-dev", "placement") == "LowLoadFirst"
        gauge = cell_text(table, "demo-inference", "tflops")
        assert "%/" in gauge and "—" not in gauge  # metrics present: a used figure
        assert crumbs(app) == "pools (4)"
        assert "refreshed 12:00:00 UTC" in str(app.screen.query_one("#header-time", Label).render())
        assert "demo" in str(app.screen.query_one("#header-source", Label).render())


ALIASES: list[tuple[str, type[ResourceScreen]]] = [
    ("nodes", NodesScreen),
    ("gpu", GpusScreen),
    ("pool", PoolsScreen),
    ("no", NodesScreen),
    ("wl", WorkloadsScreen),
    ("gpus", GpusScreen),
    ("workload", WorkloadsScreen),
    ("node", NodesScreen),
    ("pools", PoolsScreen),
    ("workloads", WorkloadsScreen),
]


async def test_colon_switches_views_with_aliases(demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for typed, expected in ALIASES:
            await command(pilot, typed)
            assert type(app.screen) is expected, typed
            assert len(app.screen_stack) == 2  # default screen + the root view
            assert main_table(app).row_count > 0


async def test_view_rows_match_the_state(demo: SimCluster, metrics: SimMetrics, state: ClusterState) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await command(pilot, "nodes")
        assert main_table(app).row_keys == sorted(state.nodes)
        await command(pilot, "gpus")
        assert sorted(main_table(app).row_keys) == sorted(state.gpus)
        await command(pilot, "wl")
        assert main_table(app).row_keys == sorted(state.workloads)


async def test_command_completion_and_cancel(demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("colon", "w", "o")
        await pilot.pause()
        prompt = app.screen.query_one(Prompt)
        assert prompt.display and prompt.input.has_focus
        await pilot.press("tab")  # accept the suggestion
        assert prompt.input.value == "workloads"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, WorkloadsScreen)

        await pilot.press("colon", "g", "p", "escape")
        await pilot.pause()
        assert isinstance(app.screen, WorkloadsScreen)
        assert not app.screen.query_one(Prompt).display
        assert main_table(app).has_focus


async def test_unknown_view_is_reported_and_nothing_changes(demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await command(pilot, "pods")
        assert isinstance(app.screen, PoolsScreen)
        assert any("unknown view 'pods'" in n.message for n in app._notifications)


# -- filter --------------------------------------------------------------------------------------


async def test_filter_is_case_insensitive_substring_and_esc_clears(
    demo: SimCluster, metrics: SimMetrics, state: ClusterState
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await command(pilot, "nodes")
        await pilot.press("slash", *"H100", "enter")
        await pilot.pause()
        table = main_table(app)
        h100 = sorted(n for n in state.nodes if "h100" in n)
        assert table.row_keys == h100
        assert crumbs(app) == f"nodes ({len(h100)}/{len(state.nodes)})   /H100"
        assert table.has_focus
        await pilot.press("escape")  # prompt closed, filter active: esc clears it
        await pilot.pause()
        assert table.row_keys == sorted(state.nodes)
        assert crumbs(app) == f"nodes ({len(state.nodes)})"


async def test_filter_matches_gpu_model_and_pool(
    demo: SimCluster, metrics: SimMetrics, state: ClusterState
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await command(pilot, "nodes")
        await pilot.press("slash", *"l40s", "enter")
        await pilot.pause()
        expected = sorted(
            n.name for n in state.nodes.values() if any("L40S" in state.gpus[g].model for g in n.gpus)
        )
        assert main_table(app).row_keys == expected
        await pilot.press("escape", "slash", *"-train")
        await pilot.pause()  # filtering is live while typing; matches the pool name too
        assert main_table(app).row_keys == sorted(state.pools["demo-training"].nodes)
        await pilot.press("escape")  # esc in the filter prompt clears it
        await pilot.pause()
        assert len(main_table(app).row_keys) == len(state.nodes)


# -- drill-down ----------------------------------------------------------------------------------


async def test_drill_down_pool_node_and_back(
    demo: SimCluster, metrics: SimMetrics, state: ClusterState
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("down")  # demo-inference
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodesScreen) and app.screen.pool == "demo-inference"
        nodes = sorted(state.pools["demo-inference"].nodes)
        assert main_table(app).row_keys == nodes
        assert crumbs(app) == f"pools › demo-inference › nodes ({len(nodes)})"

        await pilot.press("enter")
        await pilot.pause()
        node = nodes[0]
        assert isinstance(app.screen, NodeScreen) and app.screen.node == node
        gpus = app.screen.query_one("#gpus", ResourceTable)
        workers = app.screen.query_one("#workers", ResourceTable)
        assert sorted(gpus.row_keys) == sorted(state.nodes[node].gpus)
        assert sorted(workers.row_keys) == sorted(state.nodes[node].workers)
        n_gpus, n_workers = len(state.nodes[node].gpus), len(state.nodes[node].workers)
        assert crumbs(app) == f"pools › demo-inference › nodes › {node} ({n_gpus} GPUs, {n_workers} workers)"
        summary = str(app.screen.query_one("#node-summary").render())
        assert node in summary and "TFLOPS" in summary and "VRAM" in summary

        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, NodesScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, PoolsScreen)
        await pilot.press("escape")  # root view: nothing to go back to
        await pilot.pause()
        assert isinstance(app.screen, PoolsScreen)


async def test_node_screen_gpu_opens_its_workers(
    demo: SimCluster, metrics: SimMetrics, state: ClusterState
) -> None:
    node = "inf-h100-01"
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await command(pilot, "no")
        await pilot.press("slash", *"h100-01", "enter", "enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        gpus = app.screen.query_one("#gpus", ResourceTable)
        assert gpus.has_focus
        first = gpus.row_keys[0]
        await pilot.press("tab")
        assert app.screen.query_one("#workers", ResourceTable).has_focus
        await pilot.press("shift+tab", "enter")
        await pilot.pause()
        assert isinstance(app.screen, WorkersScreen)
        assert sorted(main_table(app).row_keys) == sorted(state.gpus[first].workers)
        assert crumbs(app).startswith(f"nodes › {node} › {first} › workers")


async def test_gpu_and_workload_drill_down_to_workers(
    demo: SimCluster, metrics: SimMetrics, state: ClusterState
) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        await command(pilot, "wl")
        first = main_table(app).row_keys[0]
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, WorkloadScreen)  # the workload detail lists its workers
        table = app.screen.query_one("#workers", ResourceTable)
        assert table.row_keys == sorted(state.workloads[first].workers)
        worker = state.workers[table.row_keys[0]]
        assert cell_text(table, worker.key, "node") == worker.node
        assert cell_text(table, worker.key, "reqlim").count("/") == 2
        # enter on a worker opens its node
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen) and app.screen.node == worker.node
        assert crumbs(app).startswith(f"workloads › {first} › {worker.node}")

        await command(pilot, "gpus")  # `:` replaces the whole drill-down stack
        assert isinstance(app.screen, GpusScreen) and len(app.screen_stack) == 2
        busy = next(k for k in main_table(app).row_keys if state.gpus[k].workers)
        await pilot.press("slash", *busy, "enter", "enter")
        await pilot.pause()
        assert isinstance(app.screen, WorkersScreen)
        assert sorted(main_table(app).row_keys) == sorted(state.gpus[busy].workers)


# -- help and warnings ---------------------------------------------------------------------------


async def test_help_is_generated_from_the_screen_bindings(demo: SimCluster, metrics: SimMetrics) -> None:
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.keys_text
        for key, what in [("⏎", "Open"), (":", "View"), ("/", "Filter"), ("esc", "Back"), ("^r", "Refresh")]:
            assert key in text and what in text
        assert "Next" not in text  # only the node screen binds tab
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, PoolsScreen)

        await command(pilot, "nodes")
        await pilot.press("enter", "question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "Next" in app.screen.keys_text
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)


async def test_warnings_count_and_list(demo: SimCluster, metrics: SimMetrics) -> None:
    objects = copy.deepcopy(demo.snapshot())
    gpu = next(o for o in objects if o["kind"] == "GPU")
    gpu["status"]["nodeSelector"] = {"kubernetes.io/hostname": "ghost-node"}
    cluster = FlakyCluster(demo)
    cluster.objects = objects
    app = make_app(cluster, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        warnings = app.screen.query_one("#header-warnings", Label)
        count = len(load(cluster, None, DEFAULT_NOW).state.warnings)
        assert count > 1
        assert warnings.display and str(warnings.render()) == f"⚠ {count} warnings [w]"
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, WarningsScreen)
        assert "ghost-node" in str(app.screen.query_one("#warnings-list").render())
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, PoolsScreen)


async def test_quit_keys(demo: SimCluster, metrics: SimMetrics) -> None:
    for key in ("q", "ctrl+c"):
        app = make_app(demo, metrics)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press(key)
            await pilot.pause()
            assert app.return_code == 0
    app = make_app(demo, metrics)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("slash", "q")  # typed into the prompt, not a quit
        await pilot.pause()
        assert app.return_code is None
        await pilot.press("escape")
        await command(pilot, "q")  # k9s `:q`
        assert app.return_code == 0


# -- pure table builders -------------------------------------------------------------------------


def test_every_table_fits_the_terminal_and_keeps_names_whole(demo: SimCluster, metrics: SimMetrics) -> None:
    """Widths follow the content: from 160 columns no workload, node or pool name is cut (at 120 to
    199 they were cut in the middle with 40 empty columns on the right), and every table fits."""
    data = load(demo, metrics, DEFAULT_NOW)
    node = "inf-h100-01"
    for width in WIDTHS:
        g = Gauges(layout_for(width))
        tables = [
            pools_table(data, g),
            nodes_table(data, g),
            gpus_table(data, g, node=node),
            workloads_table(data, g),
            workers_table(data, g, data.state.nodes[node].workers),
        ]
        if width >= 120:  # the pools screen shortens its gauges before it cuts a name or a mode
            whole = next(
                lay
                for lay in layout_candidates(width)
                if fits(pools_table(data, Gauges(lay)), width, scrollbar=False, whole=True)
            )
            for r in assert_fits(pools_table(data, Gauges(whole)), width).rows:
                for key in ("name", "placement"):
                    assert "…" not in plain(rendered(r.cells[key])), (width, key)
        for table in tables:
            fitted = assert_fits(table, width)
            if width >= 160:
                for col in fitted.columns:
                    if col.key in ("name", "key", "pool", "node"):
                        cut = [plain(rendered(r.cells[col.key])) for r in fitted.rows]
                        assert not [c for c in cut if "…" in c], (width, col.key)
