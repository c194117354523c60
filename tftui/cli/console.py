"""`tftui` with no subcommand: the Textual console on the source the flags name. The only
subcommand module that imports the UI, and only when it runs."""

from __future__ import annotations

import argparse

from tftui.cli.common import open_cluster, open_metrics


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
        # queries still waiting on a slow store (an analysis's, the latest samples') are cut: the
        # interpreter's exit joins their worker threads, which would hold it up to the query limit
        interrupt = getattr(metrics, "interrupt", None)
        if callable(interrupt):
            interrupt()
        for source in (metrics, cluster):
            close = getattr(source, "close", None)
            if callable(close):
                close()
