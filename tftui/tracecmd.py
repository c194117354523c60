"""`tftui simulate --trace-nodes NODES.csv --trace-pods PODS.csv`: a production trace replayed per policy.

`--protocol arrivals` (default) is the FGD paper's protocol (`engine.arrivals`), swept over policies
and seeds in parallel processes (`runtime.sweep`, or a Dask cluster with `--dask`); `--protocol
lifetimes` replays creation and deletion times through the what-if runtime (`runtime.lifetimes`);
this module keeps the flag checks and output of both, so the runtime never imports the CLI.
Output: a table (allocation at 100 % and 130 % arrived, failed tasks, moves), each policy's
allocation curve, and the mapping of trace figures to TensorFusion requests; `--json` all of it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tftui.sources.trace import Trace

CURVE_POINTS = (10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130)


class TraceUsage(Exception):
    """A bad flag or file: one line, exit 2 (the CLI turns it into its UserError)."""


def add_trace_args(sim: argparse.ArgumentParser) -> None:
    t = sim.add_argument_group("trace (openb CSV format: the FGD paper's Alibaba trace or your own history)")
    t.add_argument("--trace-nodes", metavar="CSV", help="nodes: sn,cpu_milli,memory_mib,gpu,model")
    t.add_argument("--trace-pods", metavar="CSV", help="tasks: name,cpu_milli,memory_mib,num_gpu,gpu_milli,…")
    t.add_argument(
        "--protocol",
        choices=["arrivals", "lifetimes"],
        default="arrivals",
        help="arrivals: the paper's (no departures, inflated, shuffled); lifetimes: creation/deletion times",
    )
    t.add_argument("--inflate", type=float, default=1.3, help="arrivals: demand ÷ GPU capacity (default 1.3)")
    t.add_argument(
        "--order", choices=["shuffle", "creation"], default="shuffle", help="arrivals: task order (shuffle)"
    )
    t.add_argument("--seeds", metavar="A-B|A,B", help="arrivals: several seeds (default: --seed)")
    t.add_argument("--workers", type=int, metavar="N", help="parallel processes (default: one per core)")
    t.add_argument("--dask", metavar="ADDRESS", help="run the sweep on this Dask scheduler (tftui[dask])")


def wants_trace(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "trace_nodes", None) or getattr(args, "trace_pods", None))


def parse_seeds(text: str | None, default: int) -> list[int]:
    if not text:
        return [default]
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part[1:]:
                a, b = part.split("-", 1)
                lo, hi = int(a), int(b)
                if hi < lo:
                    raise ValueError
                out.extend(range(lo, hi + 1))
            elif part:
                out.append(int(part))
    except ValueError:
        raise TraceUsage(f"--seeds: expected A-B or A,B,… integers, got {text!r}") from None
    if not out:
        raise TraceUsage(f"--seeds: no seed in {text!r}")
    return out


def default_policies() -> tuple[str, ...]:
    """The arrivals protocol's policies when none are named: the reference, each mode, each with
    admission. A function, so the parser (which imports this module for `add_trace_args`) does not
    import the protocol, numpy with it, on every `tftui` start."""
    from tftui.engine.arrivals import MODES, REFERENCE

    return (REFERENCE, *MODES, *(f"{m}+admit" for m in MODES))


def cmd_trace(args: argparse.Namespace) -> int:
    from tftui.engine.arrivals import PolicyError, parse_trace_policy
    from tftui.sources.trace import TraceError, protocol_input, read_trace

    if not (args.trace_nodes and args.trace_pods):
        raise TraceUsage("--trace-nodes and --trace-pods go together (a node list and a task list)")
    if args.demo or args.from_file:
        raise TraceUsage("--trace-nodes/--trace-pods replace --demo and --from (the trace is the cluster)")
    if not args.inflate > 0:
        raise TraceUsage(f"--inflate: must be positive, got {args.inflate:g}")
    names = list(args.policy or [])
    if args.compare:
        raise TraceUsage("--compare: presets are for the demo and dumps; name trace policies with --policy")
    if args.protocol == "arrivals":
        names = names or list(default_policies())
        try:
            for n in names:
                parse_trace_policy(n)
        except PolicyError as exc:
            raise TraceUsage(f"--policy: {exc}") from None
    try:
        trace = read_trace(args.trace_nodes, args.trace_pods)
    except TraceError as exc:
        raise TraceUsage(str(exc)) from None
    if args.protocol == "lifetimes":
        return cmd_lifetimes(args, trace, names)
    from tftui.runtime.sweep import Run, summarize, sweep

    seeds = parse_seeds(args.seeds, args.seed)
    nodes, tasks = protocol_input(trace)
    runs = [Run(p, s, args.inflate, args.order) for p in names for s in seeds]
    if args.workers is not None and args.workers < 1:
        raise TraceUsage(f"--workers: must be at least 1, got {args.workers}")
    results = sweep(nodes, tasks, runs, workers=args.workers, dask=args.dask)
    summaries = summarize(results)
    if args.json:
        doc: dict[str, Any] = {
            "protocol": "arrivals",
            "trace": {"nodes": args.trace_nodes, "pods": args.trace_pods, "gpus": trace.gpu_milli // 1000},
            "inflate": args.inflate,
            "order": args.order,
            "seeds": seeds,
            "mapping": trace.mapping(),
            "policies": {s.policy: s.to_json() for s in summaries},
            "failed_tasks": {s.policy: round(s.failed, 1) for s in summaries},
        }
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    elif args.csv:
        sys.stdout.write(
            "policy,seeds,allocated_pct_at_100,allocated_pct_at_130,failed_tasks,moves,cpu_seconds,"
            "preempted_tasks\n"
        )
        for s in summaries:
            sys.stdout.write(
                f"{s.policy},{' '.join(map(str, s.seeds))},{_f(s.at(100))},{_f(s.at(130))},"
                f"{s.failed:.1f},{s.moves:.1f},{s.cpu_seconds:.2f},{s.preempted:.1f}\n"
            )
    else:
        sys.stdout.write(render(trace.mapping(), summaries, seeds, args.inflate))
    return 0


def cmd_lifetimes(args: argparse.Namespace, trace: Trace, policies: Sequence[str]) -> int:
    """`--protocol lifetimes`: placement modes (+defrag, +nodefrag, +unblock), FGD, +admit and +preempt
    refused."""
    from tftui.engine.report import parse_window
    from tftui.runtime.lifetimes import run_lifetimes, summary
    from tftui.runtime.whatif_output import render_csv, render_json, render_table
    from tftui.runtime.whatif_policy import MODES

    names = list(args.policy or [f"{m}+defrag" for m in MODES])
    for n in names:
        if n.split("+")[0].strip().upper() == "FGD":
            raise TraceUsage(
                f"--policy {n}: FGD is a yardstick of the arrivals protocol, not a mode a cluster runs"
            )
        for flag in ("admit", "preempt", "evict"):
            if flag in [f.strip().lower() for f in n.split("+")[1:]]:
                raise TraceUsage(f"--policy {n}: +{flag} is a policy of the arrivals protocol")
    try:
        duration = parse_window(args.duration)
    except ValueError as exc:
        raise TraceUsage(f"--duration: {exc}") from None
    try:
        results = run_lifetimes(trace, names, duration, seed=args.seed)
    except ValueError as exc:
        raise TraceUsage(f"--policy: {exc}") from None
    if args.json:
        sys.stdout.write(render_json(results))
    elif args.csv:
        sys.stdout.write(render_csv(results))
    else:
        sys.stdout.write(render_table(results) + summary(results))
    return 0


def _f(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def render(mapping: dict[str, Any], summaries: Sequence[Any], seeds: Sequence[int], inflate: float) -> str:
    """The table, the curves and the mapping, as plain text."""
    heads = ("policy", "alloc % @100", "alloc % @130", "failed", "moves", "preempted", "CPU s")
    rows = [
        (
            s.policy,
            _f(s.at(100)) or "—",
            _f(s.at(130)) or "—",
            f"{s.failed:.0f}",
            f"{s.moves:.0f}",
            f"{s.preempted:.0f}",
            f"{s.cpu_seconds:.1f}",
        )
        for s in summaries
    ]
    out = [_table(heads, rows)]
    seed_text = (
        f"seed {seeds[0]}" if len(seeds) == 1 else f"mean of seeds {seeds[0]}–{seeds[-1]} ({len(seeds)})"
    )
    out.append(f"\nGPU allocation % by arrived workload % (inflate {inflate:g}, {seed_text}):")
    points = [p for p in CURVE_POINTS if p <= round(inflate * 100)]
    out.append(
        _table(
            ("policy", *map(str, points)),
            [(s.policy, *(_f(s.at(p)) or "—" for p in points)) for s in summaries],
        )
    )
    out.append("\nmapping (the trace has no VRAM per task):")
    for key in ("gpu_share", "multi_gpu", "gpu_spec", "cpu_only", "node"):
        out.append(f"  {key}: {mapping[key]}")
    models = ", ".join(
        f"{k} {v['tflops']:g} TFLOPS {v['vram_gib']} GiB ({v['source']})"
        for k, v in mapping["models"].items()
    )
    out.append(f"  models: {models}")
    return "\n".join(out) + "\n"


def _table(heads: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(heads)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(heads), *(line(r) for r in rows)])
