"""Benchmark: the what-if simulator over a week of a 500-node cluster, and the one-night figures.

Goal: a simulated week of the 500-node demo (as configured, a fifth of the workloads
replaced per day) in under a minute: simulated seconds per wall second ≥ 604800 / 60 = 10080.
The CPU-time ratio is printed beside it, since the 2-core machine is shared (wall time includes
waiting for the CPU); its goal is ≥ 20,000 simulated seconds per CPU-second.

Also the acceptance figure of the 40-node demo's fragmented pool (demo-dev) after one night, per
placement mode with compaction and defrag: active nodes ÷ the configured lower bound (goal ≤ 1.15
for CompactFirst; the other two modes are printed beside it). Twice: the pool as shipped (its 40 %
threshold and the blockers the demo carries on purpose: a cordoned node, PDBs that allow no
disruption, a worker no PDB covers, a native GPU pod), and `+defrag=80+unblock` — an 80 % threshold
with the operator-controlled blockers lifted (`runtime.whatif.unblock`; the native GPU pod stays).
"""

from __future__ import annotations

import argparse
import time
from datetime import timedelta

from _timing import ratio  # bench/ is on sys.path when a script runs

from tftui.runtime.whatif import SimConfig, parse_policy, render_table, simulate
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects

WEEK = timedelta(days=7)
NIGHT = timedelta(hours=23)  # demo-dev's campaign: 03:00-05:00 New York = 08:00-10:00 UTC next day


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--churn", type=float, default=0.2)
    args = parser.parse_args()

    objects = generate_objects(7, args.nodes, DEFAULT_NOW)
    cfg = SimConfig(duration=timedelta(days=args.days), churn=args.churn)
    wall, cpu = time.perf_counter(), time.process_time()
    res = simulate(objects, parse_policy("configured"), DEFAULT_NOW, cfg)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"{args.nodes} nodes, {args.days:g} days, churn {args.churn:g}/day: {len(res.plans)} reconciles, "
        f"{res.arrivals} arrivals, {res.departures} departures, {res.evictions} evictions, "
        f"{res.releases} releases; wall {wall:.1f} s, CPU {cpu:.1f} s"
    )
    sim_s = cfg.duration.total_seconds()
    ratio("week_500_nodes_sim_s/wall_s", sim_s / wall, WEEK.total_seconds() / 60, ">=")
    ratio("week_500_nodes_sim_s/cpu_s", sim_s / cpu, 20000, ">=")

    demo = generate_objects(7, 40, DEFAULT_NOW)
    night = SimConfig(duration=NIGHT, churn=0)
    for suffix in ("+defrag", "+defrag=80+unblock"):
        results = [
            simulate(demo, parse_policy(f"{m}{suffix}"), DEFAULT_NOW, night)
            for m in ("CompactFirst", "NodeCompactGPULowLoad", "LowLoadFirst")
        ]
        print(render_table(results), end="")
        for r in results:
            value = r.final_ratio("demo-dev")
            goal = 1.15 if r.policy.startswith("CompactFirst") else None
            ratio(f"night_demo-dev_active/bound_{r.policy}", value if value is not None else 0.0, goal, "<=")


if __name__ == "__main__":
    main()
