"""Replay the demo's 24 h through the autoscale loop and compare requests with usage, before and after.

The demo cluster (`ActingSimCluster`) and its usage history (`SimMetrics`) are generated for the end
of the day; the replay then walks the day from its first sample: at every autoscale interval the
`Runtime` loads the usage rows up to that moment (the first load its history window, then only the
new rows), recommends and applies to the embedded cluster, which changes the workers' requests. The
demand is the generated usage of the *original* requests, so it does not follow the new requests
(in the simulator usage is a fraction of the request; rebuilding it from the changed pods would let
every decrease shrink the next day's usage). Usage is capped at the worker's limit, as the device
caps it.

Printed for the run with the demo's own `autoSetResources.enable` and for a second run with every
workload enabled, each as before (requests never change) → after (requests as autoscaled):

- requested − used TFLOPS·hours and VRAM·GiB·hours, summed over every worker, device and minute
  (the over-request; negative minutes — usage above the request — count with their sign);
- throttle exposure: worker-minutes in which usage exceeded the request in effect (TFLOPS or VRAM).

    .venv/bin/python bench/autoscale_replay.py [--nodes 40] [--seed 7] [--interval 5m]
"""

from __future__ import annotations

import argparse
import bisect
import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.model.duration import parse_duration
from tftui.runtime.journal import Journal
from tftui.runtime.loops import Runtime
from tftui.sources.ports import MetricsTable
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.sources.sim.usage import SimMetrics

GI = float(1 << 30)


class _UpTo:
    """The metrics store as seen at the replay's clock: no rows from the future."""

    def __init__(self, metrics: SimMetrics, clock: list[datetime]) -> None:
        self.metrics = metrics
        self.clock = clock

    def latest_gpu_usage(self, now: datetime, lookback: timedelta = timedelta(minutes=5)) -> Any:
        return self.metrics.latest_gpu_usage(min(now, self.clock[0]), lookback)

    def latest_worker_usage(self, now: datetime, lookback: timedelta = timedelta(minutes=5)) -> Any:
        return self.metrics.latest_worker_usage(min(now, self.clock[0]), lookback)

    def rows(self, table: MetricsTable, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        return self.metrics.rows(table, start, min(end, self.clock[0]))


@dataclass(slots=True)
class Figures:
    """Over-request and throttle exposure of one replay, before and after autoscaling."""

    tflops_hours: tuple[float, float] = (0.0, 0.0)  # requested − used, before / after
    vram_gib_hours: tuple[float, float] = (0.0, 0.0)
    throttle_minutes: tuple[int, int] = (0, 0)
    enabled: int = 0
    workloads: int = 0
    changes: int = 0  # worker request changes applied
    ticks: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def enable_everywhere(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of `objects` with `autoSetResources.enable: true` on every TensorFusionWorkload."""
    out = copy.deepcopy(objects)
    for obj in out:
        if obj.get("kind") == "TensorFusionWorkload":
            spec = obj.setdefault("spec", {})
            asc = spec.setdefault("autoScalingConfig", {})
            asr = asc.setdefault("autoSetResources", {})
            asr["enable"] = True
        elif obj.get("kind") == "Pod" and (obj.get("metadata") or {}).get("annotations", {}).get(
            keys.AUTOSCALE
        ):
            obj["metadata"]["annotations"][keys.AUTOSCALE] = keys.TRUE
    return out


def _requests(state: ClusterState) -> dict[tuple[str, str], tuple[float, float]]:
    return {(w.namespace, w.name): (w.request.tflops, w.request.vram) for w in state.workers.values()}


def replay(
    *,
    seed: int = 7,
    nodes: int = 40,
    hours: int = 24,
    interval: timedelta = timedelta(minutes=5),
    everywhere: bool = False,
    end: datetime = DEFAULT_NOW,
) -> Figures:
    started = time.perf_counter()
    objects = generate_objects(seed, nodes, end)
    if everywhere:
        objects = enable_everywhere(objects)
    metrics = SimMetrics(objects, seed, now=end, history=timedelta(hours=hours))
    sim = ActingSimCluster(seed, objects=copy.deepcopy(objects), now=end)
    clock = [datetime.fromtimestamp(metrics.start, end.tzinfo)]
    rt = Runtime(
        sim,
        clock=lambda: clock[0],
        metrics=_UpTo(metrics, clock),
        autoscale_interval=interval,
        journal=Journal(),
    )
    state = rt.state()
    figs = Figures(workloads=len(state.workloads))
    original = _requests(state)
    timeline: dict[tuple[str, str], tuple[list[float], list[tuple[float, float]]]] = {
        k: ([float("-inf")], [v]) for k, v in original.items()
    }
    last = dict(original)
    end_t = datetime.fromtimestamp(metrics.end, end.tzinfo)
    while clock[0] < end_t:
        clock[0] = min(clock[0] + interval, end_t)
        rt.autoscale_tick()
        figs.ticks += 1
        now_req = _requests(rt.state())
        for k, v in now_req.items():
            if k in last and last[k] != v:
                ts, vals = timeline[k]
                ts.append(clock[0].timestamp())
                vals.append(v)
                figs.changes += 1
                last[k] = v
    result = rt.last_autoscale.result if rt.last_autoscale is not None else None
    figs.enabled = sum(1 for r in result.workloads.values() if r.enabled) if result is not None else 0
    _score(figs, metrics, timeline, original)
    figs.seconds = time.perf_counter() - started
    return figs


def _score(
    figs: Figures,
    metrics: SimMetrics,
    timeline: dict[tuple[str, str], tuple[list[float], list[tuple[float, float]]]],
    original: dict[tuple[str, str], tuple[float, float]],
) -> None:
    """One pass over the day's rows: over-request before/after and throttled worker-minutes."""
    caps = {g.name: g.cap_t for g in metrics.gpus}
    step_h = metrics.step / 3600.0
    tf_b = tf_a = vr_b = vr_a = 0.0
    throttled_b: set[tuple[str, str, float]] = set()
    throttled_a: set[tuple[str, str, float]] = set()
    start = datetime.fromtimestamp(metrics.start, metrics.now.tzinfo)
    stop = datetime.fromtimestamp(metrics.end + metrics.step, metrics.now.tzinfo)
    for r in metrics.rows("tf_worker_usage", start, stop):
        key = (r["namespace"], r["pod_name"])
        before = original.get(key)
        if before is None:
            continue
        t = r["ts"].timestamp()
        ts, vals = timeline[key]
        after = vals[bisect.bisect_right(ts, t) - 1]
        used_t = r["compute_percentage"] / 100.0 * caps.get(r["uuid"], 0.0)
        used_v = float(r["memory_bytes"])
        tf_b += (before[0] - used_t) * step_h
        tf_a += (after[0] - used_t) * step_h
        vr_b += (before[1] - used_v) / GI * step_h
        vr_a += (after[1] - used_v) / GI * step_h
        if used_t > before[0] + 1e-9 or used_v > before[1]:
            throttled_b.add((*key, t))
        if used_t > after[0] + 1e-9 or used_v > after[1]:
            throttled_a.add((*key, t))
    figs.tflops_hours = (tf_b, tf_a)
    figs.vram_gib_hours = (vr_b, vr_a)
    figs.throttle_minutes = (
        round(len(throttled_b) * metrics.step / 60),
        round(len(throttled_a) * metrics.step / 60),
    )


def render(label: str, f: Figures) -> str:
    def pct(a: float, b: float) -> str:
        return f"{(b - a) / a * 100:+.0f}%" if a else "n/a"

    (tb, ta), (vb, va), (mb, ma) = f.tflops_hours, f.vram_gib_hours, f.throttle_minutes
    return "\n".join(
        [
            f"{label}: {f.enabled}/{f.workloads} workloads enabled, {f.ticks} autoscale runs, "
            f"{f.changes} worker request changes ({f.seconds:.1f} s)",
            f"  requested - used TFLOPS*h   {tb:12.1f} -> {ta:12.1f}  ({pct(tb, ta)})",
            f"  requested - used VRAM GiB*h {vb:12.1f} -> {va:12.1f}  ({pct(vb, va)})",
            f"  throttle exposure (worker-minutes usage > request) {mb} -> {ma}",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--interval", default="5m", help="autoscale interval (Go duration; default 5m)")
    args = parser.parse_args()
    interval = parse_duration(args.interval)
    for label, everywhere in (("as configured", False), ("enabled everywhere", True)):
        f = replay(
            seed=args.seed, nodes=args.nodes, hours=args.hours, interval=interval, everywhere=everywhere
        )
        print(render(label, f))
        if everywhere:
            from _timing import ratio  # bench/ is on sys.path when a script runs

            (tb, ta), (vb, va) = f.tflops_hours, f.vram_gib_hours
            ratio("tflops_waste_after/before", ta / tb if tb else 0.0, 1.0, "<=")
            ratio("vram_waste_after/before", va / vb if vb else 0.0, 1.0, "<=")


if __name__ == "__main__":
    main()
