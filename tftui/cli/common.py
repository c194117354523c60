"""What every subcommand shares: the source the flags name (cluster, metrics), the one-line
user error, output that never shows raw control characters, and the parsing of `--now`.

Separate so each subcommand's module imports it directly and the package `__init__` stays the
entry point only."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TextIO

from tftui.model.plaintext import json_visible, visible
from tftui.model.snapshot import Snapshot
from tftui.sources.ports import SourceError

if TYPE_CHECKING:
    from tftui.engine.state import ClusterState
    from tftui.sources.greptime import GreptimeMetrics
    from tftui.sources.ports import ClusterPort, MetricsPort

EXIT_USAGE = 2
BIG_DUMP = 64 << 20
"""Bytes from which reading a dump says so on a terminal (half a second or more of reading and checking)."""


def emit(text: str, *, json_text: bool = False) -> None:
    """Print a command's output: object text never reaches the terminal raw. Text and CSV show
    control characters as escapes (`\\x1b`); JSON spells them `\\u001b`, so it stays valid and means
    the same (`tftui.model.plaintext`)."""
    sys.stdout.write(json_visible(text) if json_text else visible(text, multiline=True))


class UserError(Exception):
    """An error the user can fix; printed as one line, exit code 2."""


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

        line = StatusLine(sys.stderr)
        try:
            size = os.stat(args.from_file).st_size if args.from_file != "-" else 0
        except OSError:
            size = 0  # the load says why it cannot read the file
        if size >= BIG_DUMP:
            line.show(f"reading {os.path.basename(args.from_file)} ({size / 2**20:,.0f} MiB)")
        try:
            return DumpCluster(args.from_file)
        finally:
            line.clear()
    return _live_cluster(args)


def _live_cluster(args: argparse.Namespace) -> ClusterPort:
    """The kubeconfig context (or in-cluster config) as a list+watch cache, synced before use."""
    from tftui.sources.kube import KubeCluster

    hint = "try `tftui --demo` for the embedded demo cluster or `tftui --from dump.json` for a dump"
    try:
        cluster = KubeCluster(context=args.context, kubeconfig=args.kubeconfig)
    except SourceError as exc:
        raise UserError(f"no Kubernetes cluster reachable ({exc}); {hint}") from None
    line = StatusLine(sys.stderr)
    try:
        cluster.wait_synced(timeout=30, progress=line.synced)
    except SourceError as exc:
        cluster.close()
        raise UserError(f"no Kubernetes cluster reachable ({exc}); {hint}") from None
    finally:
        line.clear()
    return cluster


class StatusLine:
    """What a slow start is doing, on a terminal's stderr: reading a big dump or the first sync of
    a big cluster takes seconds, which would otherwise pass in silence. One line, rewritten in
    place and erased when the step ends (before the console or an error line); nothing when stderr
    is not a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.shown = False

    def show(self, text: str) -> None:
        if self.tty:
            self.stream.write(f"\r\x1b[Ktftui: {visible(text)}")
            self.stream.flush()
            self.shown = True

    def synced(self, objects: int, synced: int, kinds: int) -> None:
        """`KubeCluster.wait_synced`'s progress call (every half second)."""
        self.show(f"listing the cluster: {objects:,} objects, {synced}/{kinds} kinds")

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def metrics_dsn(args: argparse.Namespace) -> str | None:
    """`--metrics-dsn`, else env TFTUI_METRICS_DSN — except for `--demo`, which reads its simulator
    unless a DSN is given explicitly (a global env DSN must not mix another cluster's metrics in)."""
    return args.metrics_dsn or (None if args.demo else os.environ.get("TFTUI_METRICS_DSN")) or None


def metrics_timeout(args: argparse.Namespace) -> float | None:
    """`--metrics-timeout` in seconds (None: not given, the store's default of 30 s); the command
    checks it before it reads anything."""
    value = getattr(args, "metrics_timeout", None)
    if value is None:
        return None
    seconds = _duration_arg("--metrics-timeout", value).total_seconds()
    if seconds <= 0:
        raise UserError(f"--metrics-timeout: must be more than 0, got {value!r}")
    return seconds


def open_greptime(args: argparse.Namespace, dsn: str) -> GreptimeMetrics:
    """The metrics store at `dsn`, its queries limited by `--metrics-timeout`."""
    from tftui.sources.greptime import GreptimeMetrics

    seconds = metrics_timeout(args)
    return GreptimeMetrics(dsn) if seconds is None else GreptimeMetrics(dsn, query_timeout=seconds)


def open_metrics(args: argparse.Namespace, cluster: ClusterPort) -> MetricsPort | None:
    dsn = metrics_dsn(args)
    if dsn:
        return open_greptime(args, dsn)
    if args.demo:
        from tftui.sources.sim.usage import SimMetrics

        # the acting demo (console, daemon): usage follows its clock and its replaced workers
        follow = cluster if callable(getattr(cluster, "advance", None)) else None
        return SimMetrics(cluster.snapshot(), seed=args.seed, now=_demo_now(), follow=follow)
    return None


def _state(cluster: ClusterPort) -> ClusterState:
    """The cluster's state; the generated demo's objects (`SimCluster.generated`) are indexed as
    they are: validating them again would only drop the fields the engine never reads."""
    from tftui.engine.state import ClusterState

    objects = cluster.snapshot()
    if getattr(cluster, "generated", False) is True:
        snap = Snapshot.of(objects)
    else:
        from tftui.model.dump import validate_items  # with pydantic: only what is not generated

        snap = validate_items(objects, cluster.describe())
    state = ClusterState.build(snap)
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


def _duration_arg(flag: str, value: str) -> timedelta:
    from tftui.model.duration import DurationError, parse_duration

    try:
        return parse_duration(value)
    except DurationError as exc:
        raise UserError(f"{flag}: {exc}") from None
