"""`tftui --daemon`: flag checks and the wiring of source, leader election and the controller
loops. Never imports the console (nor Textual)."""

from __future__ import annotations

import argparse
import os

from tftui.cli.common import UserError, _demo_now, _duration_arg, open_metrics
from tftui.sources.ports import SourceError


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
        metrics = open_metrics(args, cluster)  # opens nothing until first used
        elector = None if args.dry_run else LeaderElector(cluster.api, config)
        daemon = Daemon(cluster, metrics, options, elector=elector)
        # the handlers first: a signal during the list ends it at its next progress call with
        # exit 0 (before, the default handlers met a process with threads and a server running:
        # SIGINT's KeyboardInterrupt could land anywhere, even inside a lock, and hang the exit)
        daemon.install_signal_handlers()
        # the probes' server is up while the first list runs
        if not daemon.first_sync(cluster.wait_synced, timeout=60):
            return 0
        return daemon.run()
    finally:
        if metrics is not None:
            close = getattr(metrics, "close", None)
            if callable(close):
                close()
        cluster.close()
