"""`:xray`: the pool → node → GPU → worker tree, built lazily, labels plain, `d` on a branch."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from typing import Any

from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Static
from textual.widgets.tree import TreeNode

from tests.hostile import NODE, POOL, HostileCluster, shown
from tests.waiting import type_text
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.ui.app import TfTuiApp
from tftui.ui.screens.text import TextScreen
from tftui.ui.screens.xray import XrayScreen
from tftui.ui.widgets.plain import PlainTree


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def text(node: TreeNode[Any]) -> str:
    label = node.label
    return label.plain if isinstance(label, Text) else str(label)


async def open_xray(pilot: Pilot[None]) -> PlainTree:
    await settle(pilot)
    await pilot.press("colon", *"xray", "enter")
    await settle(pilot)
    assert isinstance(pilot.app.screen, XrayScreen)
    return pilot.app.screen.query_one(PlainTree)


async def test_xray_walks_pool_node_gpu_worker(demo: SimCluster) -> None:
    app = TfTuiApp(demo, None, clock=lambda: DEFAULT_NOW, refresh_interval=None)
    async with app.run_test(size=(160, 48)) as pilot:
        tree = await open_xray(pilot)
        assert app.data is not None
        st = app.data.state
        pools = [n.data[1] for n in tree.root.children if n.data]
        assert pools == sorted(st.pools)
        assert all(not n.children for n in tree.root.children)  # nothing built before it is opened
        await pilot.press("enter")  # the cursor starts on the first pool: enter opens it
        await settle(pilot)
        assert tree.root.children[0].is_expanded and tree.root.children[0].children
        await pilot.press("enter")
        await settle(pilot)
        assert not tree.root.children[0].is_expanded
        node = next(n for n in st.nodes.values() if n.workers and n.pool)
        pool_branch = next(b for b in tree.root.children if b.data == ("GPUPool", node.pool))
        pool_branch.expand()
        await settle(pilot)
        assert [c.data[1] for c in pool_branch.children if c.data] == sorted(st.pools[str(node.pool)].nodes)
        node_branch = next(c for c in pool_branch.children if c.data == ("GPUNode", node.name))
        node_branch.expand()
        await settle(pilot)
        assert [c.data[1] for c in node_branch.children if c.data] == sorted(node.gpus)
        gpu = next(c for c in node_branch.children if c.data and st.gpus[c.data[1]].workers)
        gpu.expand()
        await settle(pilot)
        assert gpu.data is not None
        assert [c.data[1] for c in gpu.children if c.data] == sorted(st.gpus[gpu.data[1]].workers)
        first = text(gpu.children[0])
        assert "requested" in first
        # `d` on the node under the cursor describes it
        tree.move_cursor(node_branch)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, TextScreen)
        assert node.name in " ".join(app.screen.trail)
        await pilot.press("escape")
        await settle(pilot)
        # a refresh keeps what was open
        app.action_refresh()
        await settle(pilot)
        tree = app.screen.query_one(PlainTree)
        again = next(b for b in tree.root.children if b.data == ("GPUPool", node.pool))
        assert again.is_expanded and any(c.is_expanded for c in again.children)


async def test_xray_labels_are_plain_text() -> None:
    cluster = HostileCluster()
    app = TfTuiApp(cluster, None, clock=cluster.clock, refresh_interval=None)
    async with app.run_test(size=(200, 50)) as pilot:
        tree = await open_xray(pilot)
        pool = next(b for b in tree.root.children if b.data == ("GPUPool", POOL))
        assert text(pool).startswith(shown(POOL))
        assert app.data is not None
        holder = next(b for b in tree.root.children if b.data == ("GPUPool", app.data.state.nodes[NODE].pool))
        holder.expand()
        await settle(pilot)
        assert any(text(c).startswith(shown(NODE)) for c in holder.children)
        assert isinstance(app.screen, XrayScreen)  # the markup in the names did not stop it


def paths(node: TreeNode[Any], above: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every root-to-leaf path of the built tree, by object key."""
    out: set[tuple[str, ...]] = set()
    for child in node.children:
        here = (*above, child.data[1]) if child.data else above
        out |= paths(child, here) if child.children else {here}
    return out


async def test_xray_filter_keeps_matches_with_their_ancestors_and_esc_clears(demo: SimCluster) -> None:
    app = TfTuiApp(demo, None, clock=lambda: DEFAULT_NOW, refresh_interval=None)
    async with app.run_test(size=(160, 48)) as pilot:
        tree = await open_xray(pilot)
        assert app.data is not None
        st = app.data.state
        await pilot.press("enter")  # the operator opens the first pool before filtering
        await settle(pilot)
        first_pool = tree.root.children[0].data
        worker = next(
            w
            for w in sorted(st.workers.values(), key=lambda w: w.key)
            if w.gpu_ids and w.node and not any(w.key in o and o != w.key for o in st.workers)
        )
        gpu = worker.gpu_ids[0]
        node = st.nodes[str(worker.node)]
        # a worker's name: only its branch stays, pool → node → GPU → worker, open down to it
        await pilot.press("slash")
        await type_text(pilot, worker.key)
        await pilot.press("enter")
        await settle(pilot)
        holders = {g for g, v in st.gpus.items() if worker.key in v.workers}
        assert paths(tree.root) == {(str(node.pool), node.name, g, worker.key) for g in holders}
        assert gpu in holders
        assert all(n.is_expanded for n in tree.root.children)
        assert tree.cursor_node is not None and tree.cursor_node.data == ("Pod", worker.key)
        assert "1/" in str(app.screen.query_one("#crumbs", Static).content)
        # a node's name: the node (a match, its GPUs not) under its pool
        await pilot.press("slash", "ctrl+u")
        await type_text(pilot, node.name)
        await pilot.press("enter")
        await settle(pilot)
        assert paths(tree.root) == {(str(node.pool), node.name)}
        # inverse: every line but the worker's (its GPU and node stay, they do not name it)
        await pilot.press("slash", "ctrl+u")
        await type_text(pilot, f"!{worker.key}")
        await pilot.press("enter")
        await settle(pilot)
        kept = paths(tree.root)
        assert not any(worker.key in p for p in kept)
        assert any(p[:3] == (str(node.pool), node.name, gpu) for p in kept)
        # nothing matches: an empty tree, said in the breadcrumb
        await pilot.press("slash", "ctrl+u")
        await type_text(pilot, "no-such-object")
        await pilot.press("enter")
        await settle(pilot)
        assert not tree.root.children
        # esc clears: the whole lazy tree again, with what was open before the filter
        await pilot.press("escape")
        await settle(pilot)
        assert [c.data[1] for c in tree.root.children if c.data] == sorted(st.pools)
        opened = [c.data for c in tree.root.children if c.is_expanded]
        assert opened == [first_pool]
