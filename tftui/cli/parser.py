"""The argument parser: the source flags (accepted before and after a subcommand), the daemon's
flags and one sub-parser per subcommand. Kept apart from the commands so `--help` and the README
check read one place."""

from __future__ import annotations

import argparse
from typing import Any


def _add_source_args(p: argparse.ArgumentParser, *, sub: bool = False) -> None:
    """Source flags, accepted before and after the subcommand.

    A subcommand's copies default to SUPPRESS so they never overwrite a flag given before it
    (`tftui --demo dump` and `tftui dump --demo` mean the same).
    """

    def d(value: object) -> object:
        return argparse.SUPPRESS if sub else value

    def console_only(text: str) -> str:
        # accepted after a subcommand too (`tftui dump --demo --speed 60` is not an error), but
        # not listed there: no subcommand writes or runs the demo clock
        return argparse.SUPPRESS if sub else text

    src = p.add_argument_group("source (default: the current kubeconfig context)")
    src.add_argument(
        "--demo", action="store_true", default=d(False), help="use the embedded simulated cluster"
    )
    src.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        default=d(None),
        help="read a `kubectl get -o json|yaml` dump ('-' = stdin)",
    )
    src.add_argument("--context", default=d(None), help="kubeconfig context to use")
    src.add_argument("--kubeconfig", default=d(None), help="path to a kubeconfig file")
    src.add_argument(
        "--metrics-dsn",
        metavar="DSN",
        default=d(None),
        help="GreptimeDB PostgreSQL DSN (default: env TFTUI_METRICS_DSN; --demo: its simulator)",
    )
    src.add_argument(
        "--metrics-timeout",
        metavar="DURATION",
        default=d(None),
        help="longest a metrics query may take before it is an error (a Go duration; default 30s)",
    )
    src.add_argument(
        "--read-only",
        action="store_true",
        default=d(False),
        help=console_only("never write to the cluster: the console offers no action that changes anything"),
    )
    demo = p.add_argument_group("embedded demo cluster")
    demo.add_argument(
        "--nodes", type=int, default=d(40), help="number of nodes of the demo cluster (default 40)"
    )
    demo.add_argument("--seed", type=int, default=d(7), help="seed of the demo cluster (default 7)")
    demo.add_argument(
        "--speed",
        type=float,
        default=d(0.0),
        metavar="X",
        help=console_only(
            "console on the demo: run its clock at X simulated seconds per second, compaction and "
            "defrag acting on their own (default 0: the clock stands still; keys still act)"
        ),
    )


def _add_daemon_args(p: argparse.ArgumentParser) -> None:
    d = p.add_argument_group("daemon (tftui --daemon: the runtime loops, headless, with leader election)")
    d.add_argument("--daemon", action="store_true", help="run compaction, defrag and autoscale unattended")
    d.add_argument(
        "--metrics-optional",
        action="store_true",
        help="stay ready (/readyz) when the metrics store is unreachable (autoscale pauses either way)",
    )
    d.add_argument("--dry-run", action="store_true", help="decide and journal, act on nothing")
    d.add_argument(
        "--external-scaler",
        action="store_true",
        help="call the external scalers workloads name (http/https only, the API key Secret in the "
        "workload's namespace; never in --dry-run). Default off: no external call, no Secret read",
    )
    d.add_argument("--pools", metavar="A,B", help="reconcile only these GPUPools (default: all pools)")
    d.add_argument(
        "--listen", metavar="HOST:PORT", default="0.0.0.0:8080", help="/healthz /readyz /metrics address"
    )
    d.add_argument("--lease-name", default="tftui", help="leader-election Lease name (default tftui)")
    d.add_argument(
        "--lease-namespace",
        metavar="NS",
        help="the Lease's namespace (default: env POD_NAMESPACE, else default)",
    )
    d.add_argument(
        "--identity",
        metavar="ID",
        help="this replica's Lease holder name (default: env POD_NAME, else the hostname, plus a random "
        "suffix: unique per process)",
    )
    d.add_argument("--lease-duration", default="15s", metavar="D", help="Go duration (default 15s)")
    d.add_argument("--renew-deadline", default="10s", metavar="D", help="Go duration (default 10s)")
    d.add_argument("--retry-period", default="2s", metavar="D", help="Go duration (default 2s)")
    d.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"], help="(default info)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tftui",
        description="See and fix GPU waste in TensorFusion pools: console, reports and controller.",
    )
    _add_source_args(parser)
    _add_daemon_args(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    dump = sub.add_parser("dump", help="write the source's objects as a kubectl-style JSON List")
    _add_source_args(dump, sub=True)
    dump.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")

    place = sub.add_parser("place", help="preview where a request would land under every placement mode")
    _add_source_args(place, sub=True)
    amount = place.add_mutually_exclusive_group(required=True)
    amount.add_argument("--tflops", metavar="N", help="TFLOPS per GPU (a quantity, e.g. 100 or 312500m)")
    amount.add_argument("--compute", metavar="PCT", type=float, help="compute percent per GPU (0-100)")
    place.add_argument("--vram", metavar="Q", required=True, help="VRAM per GPU (a quantity, e.g. 20Gi)")
    place.add_argument("--count", metavar="N", type=int, default=1, help="GPUs per worker (default 1)")
    place.add_argument("--model", metavar="M", help="GPU model (e.g. H100 or the full NVML name)")
    place.add_argument("--vendor", metavar="V", help="GPU vendor (e.g. NVIDIA)")
    place.add_argument(
        "--isolation",
        choices=["shared", "soft", "hard", "partitioned"],
        help="isolation mode (default soft; partitioned with --partition)",
    )
    place.add_argument(
        "--partition",
        metavar="T",
        default="",
        help="partition template (MIG profile such as 1g.10gb, or its ProviderConfig id)",
    )
    place.add_argument(
        "--namespace", metavar="NS", default="", help="the workload's namespace: its GPUResourceQuota applies"
    )
    place.add_argument("--pool", metavar="P", help="GPUPool name (default: the default pool)")
    place.add_argument("--json", action="store_true", help="print the canonical JSON preview")

    plan = sub.add_parser("plan", help="what compaction and defrag would do now, per pool")
    _add_source_args(plan, sub=True)
    plan.add_argument(
        "--now", metavar="RFC3339", help="decide as of this time (default: now; demo: its clock)"
    )
    plan.add_argument("--pool", metavar="P", help="only this GPUPool")
    plan.add_argument("--json", action="store_true", help="print the canonical JSON plan")
    plan.add_argument(
        "--no-autoscale", action="store_true", help="leave out the autoscale section (no metrics read)"
    )

    rec = sub.add_parser(
        "recommend", help="autoscale: usage percentiles, recommended requests, would it apply and why not"
    )
    _add_source_args(rec, sub=True)
    rec.add_argument("--workload", metavar="NS/NAME", help="only this TensorFusionWorkload")
    rec.add_argument(
        "--now", metavar="RFC3339", help="decide as of this time (default: now; demo: its clock)"
    )
    rec.add_argument("--json", action="store_true", help="print the canonical JSON recommendations")

    doctor = sub.add_parser(
        "doctor",
        help="check connectivity, CRDs, RBAC permissions and the metrics store; say what is missing",
    )
    doctor.add_argument("--context", default=argparse.SUPPRESS, help="kubeconfig context to use")
    doctor.add_argument("--kubeconfig", default=argparse.SUPPRESS, help="path to a kubeconfig file")
    doctor.add_argument(
        "--metrics-dsn",
        metavar="DSN",
        default=argparse.SUPPRESS,
        help="GreptimeDB PostgreSQL DSN (default: env TFTUI_METRICS_DSN; none: the check is skipped)",
    )
    doctor.add_argument(
        "--role",
        choices=["console", "console-write", "daemon"],
        default="console-write",
        help="the permissions to check (deploy/rbac/<role>.yaml; default console-write)",
    )
    doctor.add_argument(
        "--lease-namespace",
        metavar="NS",
        default=argparse.SUPPRESS,
        help="--role daemon: where its Lease lives (default: env POD_NAMESPACE, else default)",
    )
    doctor.add_argument(
        "--secret-namespaces",
        metavar="A,B",
        default="",
        help="--role daemon with --external-scaler: namespaces where it must get API-key Secrets",
    )

    report = sub.add_parser(
        "report",
        help="step 1 of the page: allocation vs usage, waste diagnosis, alerts (--compare: verify)",
    )
    _add_source_args(report, sub=True)
    report.add_argument(
        "--window",
        metavar="DURATION",
        default="1d",
        help="look-back: a Go duration (12h, 90m, 1h30m) or whole days with d (1d, 7d, 1d12h); default 1d",
    )
    report_fmt = report.add_mutually_exclusive_group()
    report_fmt.add_argument("--json", action="store_true", help="print the canonical JSON report")
    report_fmt.add_argument("--csv", action="store_true", help="print CSV tables (one per section)")
    report.add_argument(
        "--all",
        action="store_true",
        dest="all_rows",
        help="text: also list the nodes, GPUs and workloads diagnosed ok (counted by default)",
    )
    report.add_argument("--save", metavar="FILE", help="also write the JSON report to FILE (for --compare)")
    report.add_argument(
        "--compare", metavar="FILE", help="verify against a report saved earlier: before (FILE) → now"
    )
    _add_simulate_parser(sub)
    return parser


def _add_simulate_parser(sub: Any) -> None:
    sim = sub.add_parser(
        "simulate", help="what-if: run placement/defrag/autoscale policies over simulated days, side by side"
    )
    _add_source_args(sim, sub=True)
    sim.add_argument(
        "--policy",
        action="append",
        metavar="P",
        help="a policy: `configured` or a placement mode, plus +defrag[=PCT], +nodefrag, +autoscale, "
        "+unblock (lift cordons, do-not-disrupt and PDB blocks) (e.g. CompactFirst+defrag); repeat to compare",
    )
    sim.add_argument(
        "--compare",
        metavar="PRESET",
        help="a set of policies: modes, autoscale, all or ladder (one change per step)",
    )
    sim.add_argument(
        "--duration", metavar="D", default="1d", help="simulated time (7d, 12h, 1d12h; default 1d)"
    )
    sim.add_argument("--start", metavar="RFC3339", help="simulated start (default: now; demo: its clock)")
    sim.add_argument(
        "--churn",
        type=float,
        default=0.5,
        help="share of workloads leaving and arriving per day (default 0.5)",
    )
    sim.add_argument("--sample", metavar="D", default="30m", help="sampling interval of the figures (30m)")
    sim.add_argument(
        "--provision-delay", metavar="D", default="5m", help="time for a new node to come up (default 5m)"
    )
    sim.add_argument("--history", metavar="D", default="1d", help="--metrics-dsn: usage window replayed (1d)")
    from tftui.tracecmd import add_trace_args

    add_trace_args(sim)
    fmt = sim.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON, with the node counts over time")
    fmt.add_argument("--csv", action="store_true", help="print CSV, one row per policy")
