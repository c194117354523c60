"""Benchmark: engine decisions on the 5,000-node cluster, as ratios of the ClusterState build time.

Goals: compaction plan of every pool ≤ 0.05, one defrag step ≤ 0.5, placement preview
under all three modes ≤ 0.05. Each figure is the best of `--repeat` runs in this process.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from _timing import best, ratio  # bench/ is on sys.path when a script runs

WINDOW_NOW = datetime(2026, 12, 1, 8, 30, tzinfo=UTC)  # inside demo-dev's 03:00 New York window


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--workers", type=int, default=60000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from tftui.engine.compaction import plan_compaction
    from tftui.engine.defrag import plan_defrag
    from tftui.engine.fit import Request
    from tftui.engine.placement import preview
    from tftui.engine.state import ClusterState
    from tftui.model.dump import validate_items
    from tftui.model.gpuinfo import price_table
    from tftui.sources.sim.cluster import generate_objects

    objs = generate_objects(nodes=args.nodes, gpus_per_node=args.gpus_per_node, workers=args.workers)
    snap = validate_items(objs)
    build = best(lambda: ClusterState.build(snap), args.repeat)
    state = ClusterState.build(snap)
    prices = price_table()

    def compaction() -> None:
        for pool in state.pools:
            plan_compaction(state, pool, WINDOW_NOW, force=True, prices=prices)

    request = Request(vram=20 * 2**30, tflops=100.0)
    t_comp = best(compaction, args.repeat)
    t_defrag = best(lambda: plan_defrag(state, "demo-dev", WINDOW_NOW), args.repeat)
    t_place = best(lambda: preview(state, "demo-inference", request), args.repeat)
    print(
        f"cluster: {len(state.nodes)} nodes, {len(state.gpus)} GPUs, {len(state.workers)} workers; "
        f"ClusterState.build {build:.3f} s"
    )
    print(f"compaction plan (all pools)   {t_comp:8.4f} s")
    print(f"defrag step (demo-dev)        {t_defrag:8.4f} s")
    print(f"placement preview (3 modes)   {t_place:8.4f} s")
    ratio("compaction/build", t_comp / build, 0.05, "<=")
    ratio("defrag_step/build", t_defrag / build, 0.5, "<=")
    ratio("placement_preview/build", t_place / build, 0.05, "<=")


if __name__ == "__main__":
    main()
