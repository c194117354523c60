"""The trace what-if against the FGD paper: its protocol on the Alibaba openb trace, 10 seeds.

    python bench/trace.py [NODES.csv PODS.csv] [--seeds 42-51] [--workers N]

Default trace: `bench/data/alibaba-openb/` (openb_node_list_gpu_node.csv, openb_pod_list_default.csv,
kept in the repository so a fresh clone can run it). Figures: FGD's allocation at 130 % arrived (mean
of the seeds) and its distance from the paper's 95.4 %; each placement mode at 100 % and 130 %; the
best mode with +admit (and +admit+preempt: kube-scheduler's preemption of lower-priority pods;
+admit+evict: tftui's own, PDB-safe, least GPU share evicted) at 130 %; the CPU seconds of one arrivals run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _timing import ratio

from tftui.engine.arrivals import MODES
from tftui.runtime.sweep import Run, summarize, sweep
from tftui.sources.trace import TraceError, protocol_input, read_trace
from tftui.tracecmd import parse_seeds

PAPER_FGD_130 = 95.4
DEFAULT_DIR = Path(__file__).resolve().parent / "data" / "alibaba-openb"
NODES = "openb_node_list_gpu_node.csv"
PODS = "openb_pod_list_default.csv"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("nodes", nargs="?", default=str(DEFAULT_DIR / NODES))
    ap.add_argument("pods", nargs="?", default=str(DEFAULT_DIR / PODS))
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if not (Path(args.nodes).is_file() and Path(args.pods).is_file()):
        print(
            f"bench/trace.py: no trace at {args.nodes} and {args.pods}; give the two openb CSV files as "
            "arguments: python bench/trace.py NODES.csv PODS.csv (figures skipped)"
        )
        return 0
    try:
        trace = read_trace(args.nodes, args.pods)
    except TraceError as exc:
        print(f"bench/trace.py: {exc}", file=sys.stderr)
        return 2
    seeds = parse_seeds(args.seeds, 42)
    nodes, tasks = protocol_input(trace)
    admitting = [*(f"{m}+admit{f}" for f in ("", "+preempt", "+evict") for m in MODES)]
    policies = ["FGD", *MODES, *admitting]
    runs = [Run(p, s) for p in policies for s in seeds]
    summaries = {s.policy: s for s in summarize(sweep(nodes, tasks, runs, workers=args.workers))}
    print(
        f"trace: {len(trace.nodes)} nodes, {trace.gpu_milli // 1000} GPUs, {len(trace.tasks)} tasks; seeds {args.seeds}"
    )
    for p in policies:
        s = summaries[p]
        per = s.cpu_seconds / len(s.seeds)
        print(f"  {p:32s} @100 {s.at(100) or 0:6.2f}  @130 {s.at(130) or 0:6.2f}  failed {s.failed:7.1f}  "
              f"moves {s.moves:7.1f}  CPU/run {per:6.1f} s")  # fmt: skip
    fgd = summaries["FGD"].at(130) or 0.0
    ratio("fgd_alloc_pct_at_130", fgd)
    ratio("fgd_pp_from_paper_95.4", abs(fgd - PAPER_FGD_130), 1.0, "<=")
    for m in MODES:
        ratio(f"{m}_alloc_pct_at_100", summaries[m].at(100) or 0.0)
        ratio(f"{m}_alloc_pct_at_130", summaries[m].at(130) or 0.0)
    best = max(admitting, key=lambda p: summaries[p].at(130) or 0.0)
    print(f"best mode with +admit (alone, +preempt or +evict): {best}")
    ratio("best_admit_alloc_pct_at_130", summaries[best].at(130) or 0.0, 97.0, ">=")
    plain = max(r.cpu_seconds for p in ("FGD", *MODES) for r in summaries[p].runs)
    ratio("arrivals_run_cpu_s", plain, 60.0, "<=")
    admit = max(r.cpu_seconds for p in admitting for r in summaries[p].runs)
    ratio("arrivals_admit_run_cpu_s", admit, 60.0, "<=")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
