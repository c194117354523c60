"""Command line: picks a source and a front end.

`tftui` opens the console on the current kubeconfig context, `--demo` on the embedded simulated
cluster, `--from FILE` on a dump; `tftui dump` writes the objects of any source as a `kubectl`-style
JSON List. User errors exit with status 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from tftui.config import ConfigError
from tftui.model.dump import DumpError, dumps, validate_items
from tftui.model.plaintext import json_visible, visible
from tftui.model.redact import scrub
from tftui.sources.ports import SourceError

if TYPE_CHECKING:
    from tftui.engine.plan import Plan
    from tftui.engine.state import ClusterState
    from tftui.sources.ports import ClusterPort, MetricsPort

EXIT_USAGE = 2


def emit(text: str, *, json_text: bool = False) -> None:
    """Print a command's output: object text never reaches the terminal raw. Text and CSV show
    control characters as escapes (`\\x1b`); JSON spells them `\\u001b`, so it stays valid and means
    the same (`tftui.model.plaintext`)."""
    sys.stdout.write(json_visible(text) if json_text else visible(text, multiline=True))


class UserError(Exception):
    """An error the user can fix; printed as one line, exit code 2."""


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


def _demo_now() -> datetime:
    return datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def open_cluster(args: argparse.Namespace, *, acting: bool = True) -> ClusterPort:
    """The ClusterPort the flags name; raises UserError with a hint when none is usable.

    `acting=False` is for commands that only read the objects once (dump, place, plan, report,
    recommend): the demo is then the generated objects as they are, without the acting simulator's
    indexes and queues — the same objects an acting demo's first snapshot returns, at a fraction
    of the cost at thousands of nodes."""
    if args.demo and args.from_file:
        raise UserError("--demo and --from are mutually exclusive")
    if args.speed < 0:
        raise UserError(f"--speed: must be 0 or more, got {args.speed:g}")
    if args.nodes < 1:
        raise UserError(f"--nodes: must be at least 1, got {args.nodes}")
    if args.demo and not acting:
        from tftui.sources.sim.cluster import SimCluster

        return SimCluster(seed=args.seed, nodes=args.nodes, now=_demo_now())
    if args.demo:
        from tftui.sources.sim.acting import ActingSimCluster

        return ActingSimCluster(seed=args.seed, nodes=args.nodes, now=_demo_now())
    if args.from_file:
        from tftui.sources.dumpfile import DumpCluster

        return DumpCluster(args.from_file)
    return _live_cluster(args)


def _live_cluster(args: argparse.Namespace) -> ClusterPort:
    """The kubeconfig context (or in-cluster config) as a list+watch cache, synced before use."""
    from tftui.sources.kube import KubeCluster

    hint = "try `tftui --demo` for the embedded demo cluster or `tftui --from dump.json` for a dump"
    try:
        cluster = KubeCluster(context=args.context, kubeconfig=args.kubeconfig)
    except SourceError as exc:
        raise UserError(f"no Kubernetes cluster reachable ({exc}); {hint}") from None
    try:
        cluster.wait_synced(timeout=30)
    except SourceError as exc:
        cluster.close()
        raise UserError(f"no Kubernetes cluster reachable ({exc}); {hint}") from None
    return cluster


def metrics_dsn(args: argparse.Namespace) -> str | None:
    """`--metrics-dsn`, else env TFTUI_METRICS_DSN — except for `--demo`, which reads its simulator
    unless a DSN is given explicitly (a global env DSN must not mix another cluster's metrics in)."""
    return args.metrics_dsn or (None if args.demo else os.environ.get("TFTUI_METRICS_DSN")) or None


def open_metrics(args: argparse.Namespace, cluster: ClusterPort) -> MetricsPort | None:
    dsn = metrics_dsn(args)
    if dsn:
        from tftui.sources.greptime import GreptimeMetrics

        return GreptimeMetrics(dsn)
    if args.demo:
        from tftui.sources.sim.usage import SimMetrics

        # the acting demo (console, daemon): usage follows its clock and its replaced workers
        follow = cluster if callable(getattr(cluster, "advance", None)) else None
        return SimMetrics(cluster.snapshot(), seed=args.seed, now=_demo_now(), follow=follow)
    return None


def cmd_dump(args: argparse.Namespace) -> int:
    cluster = open_cluster(args, acting=False)
    snap = validate_items(cluster.snapshot(), cluster.describe())
    text = json_visible(dumps(snap.objects))  # the same JSON values, no raw control character
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise UserError(f"{args.output}: cannot write: {exc.strerror or exc}") from None
    else:
        emit(text, json_text=True)
    return 0


def _state(cluster: ClusterPort) -> ClusterState:
    from tftui.engine.state import ClusterState

    state = ClusterState.build(validate_items(cluster.snapshot(), cluster.describe()))
    _settle()
    return state


def _settle() -> None:
    """Move everything built so far out of the cyclic GC's sight (`gc.freeze`): a one-shot command
    keeps its objects, state and metrics index until it exits, and every full collection after the
    build would rescan those millions of objects (at 5,000 nodes, seconds of a `report`'s run).
    Garbage made afterwards is still collected."""
    gc.freeze()


def default_pool(state: ClusterState, wanted: str | None) -> str:
    """The pool the user named, else the one annotated as default, else the only/first one."""
    from tftui.model import keys

    if wanted is not None:
        if wanted not in state.pools:
            known = ", ".join(sorted(state.pools)) or "none"
            raise UserError(f"--pool: no GPUPool named {wanted!r} (pools: {known})")
        return wanted
    if not state.pools:
        raise UserError("the cluster has no GPUPool")
    for name in sorted(state.pools):
        ann = state.pools[name].obj["metadata"].get("annotations") or {}
        if ann.get(keys.IS_DEFAULT_POOL) == keys.TRUE:
            return name
    return sorted(state.pools)[0]


def cmd_place(args: argparse.Namespace) -> int:
    from tftui.engine.fit import Request, RequestError
    from tftui.engine.placement import preview
    from tftui.model.quantity import QuantityError, quantity_float
    from tftui.textout import render_preview

    def qty(flag: str, value: str) -> float:
        try:
            return quantity_float(value)
        except QuantityError as exc:
            raise UserError(f"{flag}: {exc}") from None

    try:
        request = Request(
            vram=qty("--vram", args.vram),
            tflops=qty("--tflops", args.tflops) if args.tflops is not None else None,
            compute_percent=args.compute,
            count=args.count,
            model=args.model,
            vendor=args.vendor,
            isolation=args.isolation or ("partitioned" if args.partition else "soft"),
            partition=args.partition,
            namespace=args.namespace,
        )
    except RequestError as exc:
        raise UserError(f"request: {exc}") from None
    state = _state(open_cluster(args, acting=False))
    pv = preview(state, default_pool(state, args.pool), request)
    emit(pv.dumps() if args.json else render_preview(pv), json_text=args.json)
    return 0


def parse_now(value: str | None, demo: bool) -> datetime:
    """`--now`: an RFC3339 time with an offset; default the demo's clock or the real one."""
    if value is None:
        return _demo_now() if demo else datetime.now(UTC)
    from tftui.engine.compaction import parse_rfc3339

    try:
        return parse_rfc3339(value)
    except ValueError:
        raise UserError(
            f"--now: not an RFC 3339 time with offset: {value!r} (e.g. 2026-12-01T08:30:00Z)"
        ) from None


def cmd_plan(args: argparse.Namespace) -> int:
    """`tftui plan`: compaction and defrag per pool, plus the autoscale section when usage is readable.

    The autoscale section is additive: its actions follow the pools' actions, and the JSON gains a
    top-level `autoscale` summary per workload (`autoscaleSkipped` says why when there is none).
    """
    import json

    from tftui.engine.planning import plan_cluster
    from tftui.textout import render_plan

    now = parse_now(args.now, args.demo)
    cluster = open_cluster(args, acting=False)
    state = _state(cluster)
    pools = [default_pool(state, args.pool)] if args.pool else None
    plan = plan_cluster(state, now, pools=pools)
    summary, skipped = _plan_autoscale(args, cluster, state, now, plan)
    if args.json:
        doc = plan.to_json()
        doc["autoscale"] = summary
        if skipped is not None:
            doc["autoscaleSkipped"] = skipped
        emit(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", json_text=True)
    else:
        emit(render_plan(plan) + _render_autoscale(summary, skipped))
    return 0


def _plan_autoscale(
    args: argparse.Namespace, cluster: ClusterPort, state: ClusterState, now: datetime, plan: Plan
) -> tuple[dict[str, Any], str | None]:
    """Append autoscale's actions to `plan`; return the per-workload summary, or why it was skipped."""
    from tftui.engine.autoscale import AutoscaleState, plan_autoscale
    from tftui.engine.plan import AnnotatePod, Event, PatchWorkloadStatus
    from tftui.model.duration import format_duration
    from tftui.runtime.history import load_usage
    from tftui.runtime.loops import autoscale_window

    if args.no_autoscale:
        return {}, "--no-autoscale"
    dsn = metrics_dsn(args)
    metrics: MetricsPort | None
    if args.demo and not dsn:
        from tftui.sources.sim.usage import SimMetrics

        metrics = SimMetrics(cluster.snapshot(), seed=args.seed, now=now)  # usage up to --now
        _settle()
    else:
        metrics = open_metrics(args, cluster)
    if metrics is None:
        return {}, "no metrics source (give --metrics-dsn DSN or set TFTUI_METRICS_DSN)"
    astate = AutoscaleState()
    astate.configure(state)
    try:  # aggregated where the rows are (store or simulator), as the daemon's first load is
        load_usage(metrics, astate, now - autoscale_window(state), now)
    except SourceError as exc:
        return {}, f"metrics store unreachable: {exc}"
    finally:
        close = getattr(metrics, "close", None)
        if callable(close):
            close()
    ap = plan_autoscale(state, astate, now)
    assert ap.result is not None
    pool_set = set(plan.pools) if args.pool else None
    summary: dict[str, Any] = {}
    keep: set[str] = set()
    for key in sorted(ap.result.workloads):
        rec = ap.result.workloads[key]
        wv = state.workloads[key]
        if pool_set is not None and wv.pool not in pool_set:
            continue
        if rec.reason == "no-data" and not rec.enabled:
            continue
        keep.add(key)
        summary[key] = {
            "enabled": rec.enabled,
            "target": rec.target,
            "current": rec.current.to_json(),
            "recommendation": rec.recommendation.to_json() if rec.recommendation else None,
            "provisional": rec.provisional,
            "history": format_duration(rec.history),
            "wouldApply": rec.would_apply,
            "reason": rec.reason,
            "detail": rec.detail,
        }
    for action in ap.actions():
        if isinstance(action, PatchWorkloadStatus):
            key = f"{action.namespace}/{action.name}"
        elif isinstance(action, Event):
            key = action.object.partition("/")[2]
        elif isinstance(action, AnnotatePod):
            w = state.workers.get(f"{action.namespace}/{action.name}")
            key = f"{action.namespace}/{w.workload}" if w is not None else ""
        else:  # pragma: no cover - autoscale emits only these
            key = ""
        if key in keep:
            plan.actions.append(action)
    return summary, None


def _render_autoscale(summary: dict[str, Any], skipped: str | None) -> str:
    lines = ["", "== autoscale"]
    if skipped is not None:
        lines.append(f"skipped: {visible(skipped)}")
        return "\n".join(lines) + "\n"
    if not summary:
        lines.append("no workload with usage data or autoscaling enabled")
    for key, s in summary.items():
        cur, rec = s["current"], s["recommendation"]
        change = "-"
        if rec is not None:
            change = (
                f"TFLOPS {cur['requests']['tflops']}->{rec['requests']['tflops']}, "
                f"VRAM {cur['requests']['vram']}->{rec['requests']['vram']}"
            )
        verdict = "would apply" if s["wouldApply"] else f"not applied: {visible(str(s['reason']))}"
        detail = f" ({visible(str(s['detail']))})" if s["detail"] else ""
        prov = ", provisional" if s["provisional"] else ""
        state = "on" if s["enabled"] else "off"
        lines.append(f"{visible(key)}  autoscale {state}{prov}  {change}  {verdict}{detail}")
    return "\n".join(lines) + "\n"


def cmd_report(args: argparse.Namespace) -> int:
    """`tftui report`: the page's step 1 (and, with --compare, its verify step) as text, JSON or CSV."""
    import json

    from tftui.engine.report import (
        ReportError,
        build_report,
        compare,
        dumps,
        load,
        parse_window,
        save,
        to_json,
    )
    from tftui.reportout import render_csv, render_report, render_verification
    from tftui.sources.ports import Step1Port

    try:
        window = parse_window(args.window)
    except ValueError as exc:
        raise UserError(f"--window: {exc}") from None
    before = None
    if args.compare:
        try:
            with open(args.compare, encoding="utf-8") as fh:
                before = load(fh.read())
        except OSError as exc:
            raise UserError(f"--compare {args.compare}: cannot read: {exc.strerror or exc}") from None
        except (ReportError, UnicodeDecodeError) as exc:
            raise UserError(f"--compare {args.compare}: {exc}") from None
    # --demo reads its simulator unless a DSN is given explicitly (a global TFTUI_METRICS_DSN must not
    # turn the demo into a report on another cluster's metrics).
    dsn = metrics_dsn(args)
    cluster, state, cluster_name = _report_cluster(args, dsn)
    port: Step1Port
    if dsn:
        from tftui.sources.greptime import GreptimeMetrics

        port = GreptimeMetrics(dsn)
    elif args.demo:
        from tftui.sources.sim.step1 import SimStep1
        from tftui.sources.sim.usage import SimMetrics

        assert cluster is not None
        port = SimStep1(SimMetrics(cluster.snapshot(), seed=args.seed, now=_demo_now()))
        _settle()
    else:
        raise UserError("no metrics source: give --metrics-dsn DSN or set TFTUI_METRICS_DSN (or use --demo)")
    now = _demo_now() if args.demo else datetime.now(UTC)
    try:
        report = build_report(port, state, window=window, now=now, cluster=cluster_name)
    finally:
        close = getattr(port, "close", None)
        if callable(close):
            close()
    if args.save:
        try:
            with open(args.save, "w", encoding="utf-8") as fh:
                fh.write(save(report))
        except OSError as exc:
            raise UserError(f"--save {args.save}: cannot write: {exc.strerror or exc}") from None
    verification = compare(before, report) if before is not None else None
    if args.json:
        text = save(report)
        if verification is not None:
            text = dumps({"report": json.loads(text), "verify": to_json(verification)})
    elif args.csv:
        text = render_csv(report, verification)
    else:
        text = render_report(report, all_rows=args.all_rows)
        if verification is not None:
            text += "\n" + render_verification(verification)
    emit(text, json_text=args.json)
    return 0


def _report_cluster(
    args: argparse.Namespace, dsn: str | None
) -> tuple[ClusterPort | None, ClusterState, str]:
    """The cluster `report` reads: the flags' source, or none at all (metrics only) when a DSN is
    given and no kubeconfig or in-cluster config exists, as the reference page's SQL needs none."""
    from tftui.engine.report import NO_CLUSTER
    from tftui.engine.state import ClusterState
    from tftui.sources.kubeconfig import cluster_configured

    if dsn and not args.demo and not args.from_file and not cluster_configured(args.kubeconfig, args.context):
        return None, ClusterState.build(validate_items([], NO_CLUSTER)), NO_CLUSTER
    cluster = open_cluster(args, acting=False)
    return cluster, _state(cluster), cluster.describe()


def cmd_recommend(args: argparse.Namespace) -> int:
    """`tftui recommend`: the autoscaler's view of every workload, from the usage history window."""
    from datetime import timedelta

    from tftui.engine.autoscale import (
        AutoConfig,
        AutoscaleState,
        effective_autoscaling,
        recommend,
        render_text,
    )
    from tftui.runtime.history import load_usage

    now = parse_now(args.now, args.demo)
    cluster = open_cluster(args, acting=False)
    state = _state(cluster)
    if args.workload is not None and args.workload not in state.workloads:
        raise UserError(f"--workload: no workload {args.workload!r} (give NAMESPACE/NAME)")
    dsn = metrics_dsn(args)
    if not dsn and not args.demo:
        raise UserError("no metrics source: give --metrics-dsn DSN or set TFTUI_METRICS_DSN (or use --demo)")
    metrics = open_metrics(args, cluster)
    assert metrics is not None
    window = timedelta(hours=2)
    for wv in state.workloads.values():
        cfg = AutoConfig.parse(effective_autoscaling(state, wv).get("autoSetResources"))
        window = max(window, min(cfg.history, timedelta(days=30)))
    astate = AutoscaleState()
    astate.configure(state)
    try:  # aggregated where the rows are (store or simulator); histograms are per workload, so
        # loading every workload and keeping one is what reading one workload's rows gives
        load_usage(metrics, astate, now - window, now)
    finally:
        close = getattr(metrics, "close", None)
        if callable(close):
            close()
    result = recommend(state, astate, now)
    if args.workload is not None:
        result.workloads = {args.workload: result.workloads[args.workload]}
    emit(result.dumps() if args.json else render_text(result), json_text=args.json)
    return 0


def cmd_console(args: argparse.Namespace) -> int:
    cluster = open_cluster(args)
    metrics = open_metrics(args, cluster)
    from tftui.ui.app import run

    clock = getattr(cluster, "clock", None) if args.demo else None
    try:
        return run(
            cluster,
            metrics,
            clock=clock,
            read_only=args.read_only,
            sim_speed=args.speed if args.demo else 0.0,
        )
    finally:
        for source in (metrics, cluster):
            close = getattr(source, "close", None)
            if callable(close):
                close()


def _duration_arg(flag: str, value: str) -> timedelta:
    from tftui.model.duration import DurationError, parse_duration

    try:
        return parse_duration(value)
    except DurationError as exc:
        raise UserError(f"{flag}: {exc}") from None


def cmd_daemon(args: argparse.Namespace) -> int:
    """`tftui --daemon`: see tftui/daemon.py. Never imports the console (nor Textual)."""
    from tftui.daemon import Daemon, DaemonOptions, setup_logging
    from tftui.runtime.leader import LeaderConfig, LeaderElector, default_identity

    if args.command is not None:
        raise UserError(f"--daemon runs alone; it takes no subcommand (got {args.command!r})")
    if args.from_file:
        raise UserError("--daemon acts on a cluster; --from opens a read-only dump")
    if args.read_only:
        raise UserError("--daemon --read-only: use --dry-run (decide and journal, act on nothing)")
    setup_logging(args.log_level)
    pools = None
    if args.pools:
        pools = frozenset(p.strip() for p in args.pools.split(",") if p.strip())
        if not pools:
            raise UserError(f"--pools: no pool name in {args.pools!r}")
    try:
        config = LeaderConfig(
            name=args.lease_name,
            namespace=args.lease_namespace or os.environ.get("POD_NAMESPACE") or "default",
            identity=args.identity or default_identity(),
            lease_duration=_duration_arg("--lease-duration", args.lease_duration),
            renew_deadline=_duration_arg("--renew-deadline", args.renew_deadline),
            retry_period=_duration_arg("--retry-period", args.retry_period),
        )
        from tftui.runtime.ops import parse_listen

        parse_listen(args.listen)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    options = DaemonOptions(
        dry_run=args.dry_run,
        pools=pools,
        listen=args.listen,
        metrics_optional=args.metrics_optional,
        external_scaler=args.external_scaler,
        identity=config.identity,
    )
    if args.demo:
        if args.speed < 0:
            raise UserError(f"--speed: must be 0 or more, got {args.speed:g}")
        from tftui.sources.sim.acting import ActingSimCluster

        sim = ActingSimCluster(seed=args.seed, nodes=args.nodes, now=_demo_now())
        options.speed = args.speed or 1.0  # the demo clock runs (real time unless --speed)
        daemon = Daemon(sim, open_metrics(args, sim), options, clock=sim.clock, advance=sim.advance)
        daemon.install_signal_handlers()
        return daemon.run()
    from tftui.sources.kube import KubeCluster

    in_cluster = (
        True
        if not args.kubeconfig and not args.context and os.environ.get("KUBERNETES_SERVICE_HOST")
        else None
    )
    lease = None if args.dry_run else (config.namespace, config.name)
    try:
        cluster = KubeCluster(
            context=args.context, kubeconfig=args.kubeconfig, in_cluster=in_cluster, lease=lease
        )
    except SourceError as exc:
        raise UserError(f"no Kubernetes cluster reachable ({exc})") from None
    metrics = None
    try:
        cluster.wait_synced(timeout=60)
        metrics = open_metrics(args, cluster)
        elector = None if args.dry_run else LeaderElector(cluster.api, config)
        daemon = Daemon(cluster, metrics, options, elector=elector)
        daemon.install_signal_handlers()
        return daemon.run()
    finally:
        if metrics is not None:
            close = getattr(metrics, "close", None)
            if callable(close):
                close()
        cluster.close()


def cmd_doctor(args: argparse.Namespace) -> int:
    from tftui.doctor import run_doctor
    from tftui.sources.greptime import dsn_from_env

    return run_doctor(
        out=lambda line: print(visible(line)),
        context=args.context,
        kubeconfig=args.kubeconfig,
        metrics_dsn=args.metrics_dsn or dsn_from_env(),
        role=args.role,
        lease_namespace=args.lease_namespace or os.environ.get("POD_NAMESPACE") or "default",
        secret_namespaces=tuple(n.strip() for n in args.secret_namespaces.split(",") if n.strip()),
    )


def cmd_simulate(args: argparse.Namespace) -> int:
    """`tftui simulate`: every policy from the same start, seed and churn; one row each."""
    from tftui.tracecmd import TraceUsage, cmd_trace, wants_trace

    if wants_trace(args):
        try:
            return cmd_trace(args)
        except TraceUsage as exc:
            raise UserError(str(exc)) from None
    from tftui.engine.report import parse_window
    from tftui.runtime import whatif

    def span(flag: str, text: str) -> timedelta:
        try:
            value = parse_window(text)
        except ValueError as exc:
            raise UserError(f"{flag}: {exc}") from None
        if value <= timedelta(0):
            raise UserError(f"{flag}: must be positive, got {text!r}")
        return value

    names = list(args.policy or [])
    if args.compare:
        if args.compare not in whatif.PRESETS:
            raise UserError(
                f"--compare: unknown preset {args.compare!r} (one of {', '.join(whatif.PRESETS)})"
            )
        names += [p for p in whatif.PRESETS[args.compare] if p not in names]
    if not names:
        names = list(whatif.PRESETS["modes"])
    try:
        policies = [whatif.parse_policy(n) for n in names]
    except ValueError as exc:
        raise UserError(f"--policy: {exc}") from None
    if args.churn < 0:
        raise UserError(f"--churn: must be 0 or more, got {args.churn:g}")
    duration, sample = span("--duration", args.duration), span("--sample", args.sample)
    delay, history = span("--provision-delay", args.provision_delay), span("--history", args.history)
    try:
        start = parse_now(args.start, args.demo).replace(microsecond=0)
    except UserError as exc:
        raise UserError(str(exc).replace("--now", "--start", 1)) from None
    cluster = open_cluster(args, acting=False)
    objects = validate_items(cluster.snapshot(), cluster.describe()).objects
    _check_zones(objects)
    recorded = None
    if metrics_dsn(args):
        metrics = open_metrics(args, cluster)
        assert metrics is not None
        recorded = whatif.recorded_usage(metrics, _state(cluster), start, history)
    cfg = whatif.SimConfig(
        duration=duration,
        seed=args.seed,
        churn=args.churn,
        sample=sample,
        provision_delay=delay,
        history=recorded,
    )
    from tftui.model.duration import format_duration
    from tftui.runtime.sweep import stderr_progress

    workers = min(len(policies), os.cpu_count() or 1)
    progress = stderr_progress(f"simulate: {len(policies)} policies", format_duration(duration))
    results = whatif.compare(objects, policies, start, cfg, workers=workers, progress=progress)
    if args.json:
        emit(whatif.render_json(results), json_text=True)
    elif args.csv:
        emit(whatif.render_csv(results))
    else:
        emit(whatif.render_table(results))
    return 0


def _check_zones(objects: Sequence[dict[str, Any]]) -> None:
    """`simulate` models each pool's day in its defrag timezone (and runs its campaigns there): a
    pool naming a zone that does not exist cannot be simulated, so say which one instead."""
    from tftui.model.zones import load_zone

    for obj in objects:
        if obj.get("kind") != "GPUPool":
            continue
        nmc = (obj.get("spec") or {}).get("nodeManagerConfig") or {}
        tz = ((nmc.get("nodeCompaction") or {}).get("defrag") or {}).get("timezone")
        if tz is None or (isinstance(tz, str) and not tz.strip()):
            continue
        try:
            load_zone(str(tz).strip())
        except ValueError as exc:
            raise UserError(
                f"GPUPool {visible(obj['metadata']['name'])}: spec.nodeManagerConfig.nodeCompaction.defrag.timezone: "
                f"{exc}; fix it (or remove it) before simulating the pool"
            ) from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.daemon:
            return cmd_daemon(args)
        if args.command == "dump":
            return cmd_dump(args)
        if args.command == "place":
            return cmd_place(args)
        if args.command == "plan":
            return cmd_plan(args)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "recommend":
            return cmd_recommend(args)
        if args.command == "doctor":
            return cmd_doctor(args)
        if args.command == "simulate":
            return cmd_simulate(args)
        return cmd_console(args)
    except (UserError, DumpError, SourceError, ConfigError) as exc:
        print(f"tftui: {visible(scrub(str(exc)))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    finally:
        gc.unfreeze()  # `_settle`'s freeze ends with the command (main may be called in-process)
