"""`tftui simulate`: every what-if policy from the same start, seed and churn, or a production
trace replayed (`tftui.tracecmd`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from tftui.cli.common import UserError, _state, emit, metrics_dsn, open_cluster, open_metrics, parse_now
from tftui.model.plaintext import visible


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
    from tftui.model.dump import validate_items

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
