"""`tftui report`: the utilisation report (and, with `--compare`, its before/after check) as text,
JSON or CSV; runs on metrics alone when no cluster is configured."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from tftui.cli.common import (
    UserError,
    _demo_now,
    _settle,
    _state,
    emit,
    metrics_dsn,
    open_cluster,
    open_greptime,
)

if TYPE_CHECKING:
    from tftui.engine.state import ClusterState
    from tftui.sources.ports import ClusterPort, Step1Port


def cmd_report(args: argparse.Namespace) -> int:
    """`tftui report`: the page's step 1 (and, with --compare, its verify step) as text, JSON or CSV."""
    import json

    from tftui.engine.report import (
        ReportError,
        build_report,
        dumps,
        load,
        parse_window,
        save,
        to_json,
    )
    from tftui.engine.reportverify import compare
    from tftui.reportout import render_csv, render_report, render_verification

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
        port = open_greptime(args, dsn)
    elif args.demo:
        assert cluster is not None
        port = _demo_step1(cluster, args.seed)
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
    from tftui.model.dump import validate_items
    from tftui.sources.kubeconfig import cluster_configured

    if dsn and not args.demo and not args.from_file and not cluster_configured(args.kubeconfig, args.context):
        return None, ClusterState.build(validate_items([], NO_CLUSTER)), NO_CLUSTER
    cluster = open_cluster(args, acting=False)
    return cluster, _state(cluster), cluster.describe()


def _demo_step1(cluster: ClusterPort, seed: int) -> Step1Port:
    """The demo's metrics: the simulator, with its step-1 figures and alert replay kept in the
    demo cache when the demo is a cached one (`step1cache`; a warm run then builds no simulator)."""
    key = getattr(cluster, "demo_key", None)
    if isinstance(key, str):
        from tftui.sources.sim.step1cache import KeptStep1

        return KeptStep1(cluster.snapshot(), demo_key=key, seed=seed, now=_demo_now())
    from tftui.sources.sim.step1 import SimStep1
    from tftui.sources.sim.usage import SimMetrics

    return SimStep1(SimMetrics(cluster.snapshot(), seed=seed, now=_demo_now()))
