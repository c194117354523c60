"""Benchmark: the demo's batch commands at 5,000 nodes (report, plan) and the autoscale what-if cost.

Goals: `tftui report --demo --nodes 5000` ≤ 10 s; `tftui plan --demo --nodes 5000
--json` ≤ 5 s with peak RSS ≤ 1.5 GB, peak RSS growing at most linearly (10,000 ÷ 5,000 nodes ≤ 2);
a what-if policy with autoscale costs at most twice the same policy without. Each command runs in
its own process; its CPU seconds (user + system) and peak RSS come from `wait4`, so the shared
machine's load shows in wall time only. The report's metrics part (step 1 and the alert replay,
answered from numpy blocks) is timed on its own as well, since the whole command also builds the
demo cluster and its state. The batch commands read a demo of 1,000 nodes or more from the user's
cache once it has been generated: the runs here use a cache directory of their own, empty at the
start, and say which runs were cold (generating) and which warm (reading it). `plan` also keeps
the autoscale history aggregates of a cached demo beside it (`tftui.sources.sim.usagecache`): its
first run on a cached demo computes them ("first"), the next reads them too ("warm", the goal's).
`report` likewise keeps its step-1 figures and alert replay (`tftui.sources.sim.step1cache`): its
"warm_demo_only" run reads the demo but computes them again, "warm" (the goal's) reads both.

`--quick` runs 200 / 400 / 800 nodes instead (a smoke run of the script itself). `--only whatif`
runs the autoscale what-if part alone (`--only batch` the report and plan part alone); without it,
both run.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from _timing import ratio  # bench/ is on sys.path when a script runs

GB = 1 << 30


CACHE = tempfile.mkdtemp(prefix="tftui-bench-cache-")  # the demo cache, empty at the start
atexit.register(shutil.rmtree, CACHE, True)  # its files are 80 MB a demo at 5,000 nodes


def measured(args: list[str]) -> tuple[float, float]:
    """(CPU seconds, peak RSS bytes) of one `tftui` run, output discarded. The runs share a demo
    cache of their own: a demo's first run generates it (cold), the next ones read it (warm)."""
    cmd = [sys.executable, "-m", "tftui", *args]
    env = {**os.environ, "XDG_CACHE_HOME": CACHE}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: exit {proc.returncode}\n{err}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024.0


def metrics_part(nodes: int) -> float:
    """CPU seconds of the report's metrics queries alone (step 1 over a day, the alert replay)."""
    from tftui.engine.alerts import evaluate_history
    from tftui.engine.report import ALERT_SPAN, RULES
    from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
    from tftui.sources.sim.step1 import SimStep1
    from tftui.sources.sim.usage import SimMetrics

    objects = generate_objects(7, nodes, DEFAULT_NOW)
    metrics = SimMetrics(objects, now=DEFAULT_NOW)
    cpu = time.process_time()
    port = SimStep1(metrics)
    port.step1(timedelta(days=1), DEFAULT_NOW, {})
    evaluate_history(port, RULES, now=DEFAULT_NOW, span=ALERT_SPAN)
    return time.process_time() - cpu


def json_floor(nodes: int) -> tuple[float, float]:
    """CPU seconds of the report's JSON (`engine.report.save`, pydantic-core's encoder) and of
    `json.dumps` of the very same data with the same options (the standard library's indenting
    encoder, what the text must equal byte for byte), with the built objects frozen out of the
    cyclic GC."""
    import gc
    import json

    from tftui.engine.report import build_report, parse_window, save, to_json
    from tftui.engine.state import ClusterState
    from tftui.model.dump import validate_items
    from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
    from tftui.sources.sim.step1 import SimStep1
    from tftui.sources.sim.usage import SimMetrics

    objects = generate_objects(7, nodes, DEFAULT_NOW)
    state = ClusterState.build(validate_items(objects, "demo"))
    port = SimStep1(SimMetrics(objects, seed=7, now=DEFAULT_NOW))
    report = build_report(port, state, window=parse_window("1d"), now=DEFAULT_NOW, cluster="demo")
    data = to_json(report)
    gc.freeze()
    cpu = time.process_time()
    save(report)
    out = time.process_time() - cpu
    cpu = time.process_time()
    json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)
    floor = time.process_time() - cpu
    gc.unfreeze()
    return out, floor


def autoscale_cost(nodes: int, hours: float) -> tuple[float, float]:
    """CPU seconds of one policy without and with autoscale over `hours` of the demo."""
    from tftui.runtime.whatif import SimConfig, parse_policy, simulate
    from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects

    objects = generate_objects(7, nodes, DEFAULT_NOW)
    cfg = SimConfig(duration=timedelta(hours=hours), churn=0.2)
    out = []
    for policy in ("CompactFirst+defrag", "CompactFirst+defrag+autoscale"):
        cpu = time.process_time()
        simulate(objects, parse_policy(policy), DEFAULT_NOW, cfg)
        out.append(time.process_time() - cpu)
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("batch", "whatif"), help="run one part of the benchmark")
    args = parser.parse_args()
    if args.only != "whatif":
        batch_commands(400 if args.quick else 5000)
    if args.only != "batch":
        whatif_part(args.quick)


def batch_commands(big: int) -> None:
    """The report and plan commands at `big` nodes (and half, twice as many for plan's RSS)."""
    small, huge = big // 2, big * 2

    cpu = metrics_part(big)
    print(f"report metrics (step 1 + alert replay), {big} nodes: CPU {cpu:.1f} s")
    ratio(f"report_metrics_{big}_nodes_cpu_s", cpu, None)
    for run in ("cold", "warm_demo_only", "warm"):
        # cold: the demo generated (and it and the report's aggregates kept); warm_demo_only: the
        # demo read from the cache, its kept step-1 figures and alert replay removed first (they
        # are computed again); warm: both read from the cache (the goal's)
        if run == "warm_demo_only":
            for kept in (*Path(CACHE).rglob("*.step1"), *Path(CACHE).rglob("*.alerts")):
                kept.unlink()
        cpu, rss = measured(["report", "--demo", "--nodes", str(big), "--json"])
        print(
            f"tftui report --demo --nodes {big} --json ({run} cache): CPU {cpu:.1f} s, peak RSS {rss / GB:.2f} GB"
        )
        ratio(f"report_demo_{big}_nodes_cpu_s_{run}", cpu, 10.0, "<=")
    cpu, rss = measured(["report", "--demo", "--nodes", str(big)])
    print(
        f"tftui report --demo --nodes {big} (text, warm cache): CPU {cpu:.1f} s, peak RSS {rss / GB:.2f} GB"
    )
    ratio(f"report_demo_{big}_nodes_text_cpu_s_warm", cpu, 10.0, "<=")

    out, floor = json_floor(big)
    print(f"report JSON, {big} nodes: CPU {out:.1f} s; json.dumps of the same data {floor:.1f} s")
    ratio(f"report_json_{big}_nodes/json.dumps", out / floor, None)

    rss_at: dict[int, float] = {}
    for n, run in ((small, "cold"), (big, "first"), (big, "warm"), (huge, "cold")):
        # big: the report's runs cached the demo; the first plan on it computes the autoscale
        # history aggregates and keeps them beside it (usagecache), the next one reads them too
        cpu, rss = measured(["plan", "--demo", "--nodes", str(n), "--json"])
        rss_at[n] = max(rss, rss_at.get(n, 0.0))
        print(f"tftui plan --demo --nodes {n} --json ({run}): CPU {cpu:.1f} s, peak RSS {rss / GB:.2f} GB")
        if n == big and run == "first":
            ratio(f"plan_demo_{big}_nodes_cpu_s_warm_demo_only", cpu, None)
        if n == big and run == "warm":
            ratio(f"plan_demo_{big}_nodes_cpu_s_warm", cpu, 5.0, "<=")
            ratio(f"plan_demo_{big}_nodes_peak_rss_gb", rss_at[n] / GB, 1.5, "<=")
    ratio(f"plan_peak_rss_{huge}/{big}_nodes", rss_at[huge] / rss_at[big], 2.0, "<=")
    ratio(f"plan_peak_rss_{big}/{small}_nodes", rss_at[big] / rss_at[small], 2.0, "<=")


def whatif_part(quick: bool) -> None:
    """One what-if policy without and with autoscale, in this process."""
    nodes, hours = (100, 6.0) if quick else (500, 24.0)
    plain, scaled = autoscale_cost(nodes, hours)
    print(
        f"what-if, {nodes} nodes, {hours:g} h: CompactFirst+defrag CPU {plain:.1f} s, +autoscale {scaled:.1f} s"
    )
    ratio(f"whatif_{nodes}_nodes_autoscale/plain_cpu", scaled / plain, 2.0, "<=")


if __name__ == "__main__":
    main()
