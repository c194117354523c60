"""Benchmark: the console on the 5,000-node / 40,000-GPU generated cluster, driven by the Pilot.

Measures, in one run, on `:nodes` (5,000 rows) and `:gpus` (40,000 rows, of which the view hands
the DataTable the first `ROW_LIMIT`; filling it with all of them took minutes):
- the `enter` of `:view`: typing the command to the view drawn with its rows (gauges are drawn
  for the displayed rows only; the count of drawn gauges is printed);
- keypress-to-render latency: cursor moves (`down`, `pagedown`) and filter keystrokes (`/` prompt,
  each key re-filters all rows and diff-updates the table). Goal: median ≤ 100 ms. Printed as
  median and p95.
- refresh cost: re-rendering an unchanged refresh (diff: `update_cell` only for changed cells, here
  none) against rebuilding the same table from scratch (`clear` + `add_row` of every row), as a
  ratio; and the number of cells touched by a refresh where one GPU changed.

The latency of one key is the time from sending it to the app being idle again with the frame
rendered (`pilot.press` + `pilot.pause`), so it includes Textual's own work.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _timing import ratio
from textual.pilot import Pilot

from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.ui.app import TfTuiApp
from tftui.ui.screens.resource import ResourceScreen
from tftui.ui.views import LazyCell
from tftui.ui.widgets.table import ResourceTable


class Objects:
    """A read-only ClusterPort over generated objects; `drop_worker` changes one GPU's allocation."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    def describe(self) -> str:
        return "bench"

    def snapshot(self) -> list[dict[str, Any]]:
        return list(self.objects)

    def drop_worker(self, key: str) -> None:
        """Remove the worker pod `namespace/name` (its GPU's worker count and allocation drop)."""
        namespace, _, name = key.partition("/")
        self.objects = [
            o
            for o in self.objects
            if not (
                o.get("kind") == "Pod"
                and o["metadata"].get("name") == name
                and o["metadata"].get("namespace") == namespace
            )
        ]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(2):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()


async def timed_keys(pilot: Pilot[None], keys: list[str]) -> list[float]:
    out = []
    for key in keys:
        t = time.perf_counter()
        await pilot.press(key)
        await pilot.pause()
        out.append(time.perf_counter() - t)
    return out


async def baseline_keys(args: argparse.Namespace) -> list[float]:
    """The same cursor keys on the 40-node demo: what Textual and the Pilot cost on this machine."""
    app = TfTuiApp(
        Objects(generate_objects(nodes=40, gpus_per_node=args.gpus_per_node)),
        None,
        clock=lambda: DEFAULT_NOW,
        refresh_interval=None,
        read_only=True,
    )
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        assert app.switch_view(args.views.split(",")[0])
        await settle(pilot)
        return await timed_keys(pilot, ["down"] * args.keys)


async def measure_view(
    pilot: Pilot[None], cluster: Objects, view: str, args: argparse.Namespace
) -> dict[str, Any]:
    """Open `view` by typing `:view` + enter (the enter is timed until the view is drawn), then time
    cursor keys, filter keystrokes and refreshes on it."""
    app = pilot.app
    assert isinstance(app, TfTuiApp)
    result: dict[str, Any] = {"view": view}
    await pilot.press("colon", *view)
    await pilot.pause()
    t = time.perf_counter()
    await pilot.press("enter")
    await settle(pilot)
    result["open_view_s"] = time.perf_counter() - t
    screen = app.screen
    assert isinstance(screen, ResourceScreen) and screen.trail == (view,), screen
    table = screen.query_one("#main", ResourceTable)
    result["rows"] = table.row_count
    result["total"] = len(screen.shown_tables["main"].rows)
    gauges = [
        c for r in screen.shown_tables["main"].rows for c in r.cells.values() if isinstance(c, LazyCell)
    ]
    result["gauges"], result["drawn"] = len(gauges), sum(c.drawn for c in gauges)

    moves = await timed_keys(pilot, ["down"] * args.keys + ["pagedown"] * (args.keys // 4))
    await pilot.press("slash")
    await pilot.pause()
    typed = await timed_keys(pilot, list("h100-0")[: args.filter_keys])
    result["filtered_rows"] = len(screen.shown_tables["main"].rows)
    await pilot.press("escape")
    await settle(pilot)
    result["moves"], result["typed"] = moves, typed

    # refresh cost: unchanged refresh (diff) versus a rebuild from scratch, same table
    diffs, rebuilds = [], []
    for _ in range(args.repeat):
        t = time.perf_counter()
        screen.render_data()
        await pilot.pause()
        diffs.append(time.perf_counter() - t)
        assert table.last_changes == 0, table.last_changes
        t = time.perf_counter()
        table.clear(columns=True)
        table._columns_shown, table._shown, table._order = (), {}, []
        screen.render_data()
        await pilot.pause()
        rebuilds.append(time.perf_counter() - t)
    result["diff_s"], result["rebuild_s"] = min(diffs), min(rebuilds)

    assert app.data is not None
    worker = next(w for w in app.data.state.workers.values() if w.gpu_ids and w.node)
    cluster.drop_worker(worker.key)
    t = time.perf_counter()
    await pilot.press("ctrl+r")
    await settle(pilot)
    result["refresh_one_change_s"] = time.perf_counter() - t
    result["cells_touched"] = table.last_changes
    result["bumped"] = worker.node if view == "nodes" else worker.gpu_ids[0]
    return result


async def run(args: argparse.Namespace) -> tuple[float, float, list[dict[str, Any]]]:
    t = time.perf_counter()
    objects = generate_objects(nodes=args.nodes, gpus_per_node=args.gpus_per_node)
    generated = time.perf_counter() - t
    cluster = Objects(objects)
    app = TfTuiApp(cluster, None, clock=lambda: DEFAULT_NOW, refresh_interval=None, read_only=True)
    async with app.run_test(size=(200, 50)) as pilot:
        t = time.perf_counter()
        await settle(pilot)
        first_load = time.perf_counter() - t
        views = [await measure_view(pilot, cluster, view, args) for view in args.views.split(",")]
    return generated, first_load, views


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument(
        "--views", default="nodes,gpus", help="views measured in turn (nodes: 5,000 rows; gpus: 40,000)"
    )
    parser.add_argument("--keys", type=int, default=40, help="cursor moves timed")
    parser.add_argument("--filter-keys", type=int, default=6, help="filter keystrokes timed")
    parser.add_argument("--repeat", type=int, default=2, help="refresh measurements; the best is kept")
    args = parser.parse_args()
    base = asyncio.run(baseline_keys(args))
    generated, first_load, views = asyncio.run(run(args))
    ms = 1000.0
    print(
        f"cluster: {args.nodes} nodes × {args.gpus_per_node} GPUs; generated in {generated:.1f}s, "
        f"first load {first_load:.1f}s"
    )
    all_keys: list[float] = []
    for r in views:
        view = r["view"]
        keys = r["moves"] + r["typed"]
        all_keys += keys
        shown = f"{r['rows']:,} of {r['total']:,} rows displayed"
        print(
            f":{view} ({shown}): the enter of `:{view}` drew the view in {r['open_view_s'] * ms:.0f} ms "
            f"({r['drawn']:,} of {r['gauges']:,} gauges drawn: only the displayed rows)"
        )
        print(
            f"  cursor keys ({len(r['moves'])}): median {statistics.median(r['moves']) * ms:.0f} ms, "
            f"p95 {percentile(r['moves'], 0.95) * ms:.0f} ms; filter keystrokes ({len(r['typed'])}, "
            f"down to {r['filtered_rows']:,} rows): median {statistics.median(r['typed']) * ms:.0f} ms, "
            f"p95 {percentile(r['typed'], 0.95) * ms:.0f} ms"
        )
        print(
            f"  re-render of an unchanged refresh {r['diff_s'] * ms:.0f} ms (0 cells touched) vs rebuild "
            f"{r['rebuild_s'] * ms:.0f} ms; refresh with one worker gone (on {r['bumped']}): "
            f"{r['cells_touched']} cells touched, {r['refresh_one_change_s']:.2f}s incl. reading and indexing"
        )
        print(
            f"  :{view} key median {statistics.median(keys) * ms:.0f} ms (p95 "
            f"{percentile(keys, 0.95) * ms:.0f} ms); diff/rebuild refresh = {r['diff_s'] / r['rebuild_s']:.2f}"
        )
        ratio(f"{view}_key_median/100ms", statistics.median(keys) / 0.1, 1, "<=")
        ratio(f"{view}_refresh_diff/rebuild", r["diff_s"] / r["rebuild_s"])
    moves = views[0]["moves"]
    print(
        f"same cursor keys on the 40-node demo: median {statistics.median(base) * ms:.0f} ms "
        f"(Textual + Pilot on this machine); {args.nodes}-node :{views[0]['view']} / 40-node = "
        f"{statistics.median(moves) / statistics.median(base):.2f}"
    )
    median = statistics.median(all_keys)
    print(
        f"console key median {median * ms:.0f} ms (p95 {percentile(all_keys, 0.95) * ms:.0f} ms, all views)"
    )
    ratio("console_key_median/100ms", median / 0.1, 1, "<=")


if __name__ == "__main__":
    main()
