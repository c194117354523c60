"""`tftui recommend`: the autoscaler's recommendation per workload from the usage history."""

from __future__ import annotations

import argparse

from tftui.cli.common import UserError, _state, emit, metrics_dsn, open_cluster, open_metrics, parse_now


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
