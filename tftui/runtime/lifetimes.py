"""The lifetimes protocol: a trace's tasks arrive and leave at their creation and deletion times, on
the what-if runtime (`runtime.whatif`), with compaction and defrag as the policy configures them.

The trace's nodes become one pool (`sources.trace.trace_objects`); each GPU task arrives as a
TensorFusionWorkload whose worker the simulated TensorFusion scheduler places in the policy's mode
(with kube-scheduler's node fit), each CPU-only task as a plain pod bound the way kube-scheduler's
default would (`engine.packing.Packing.place_kube`: LeastAllocated + BalancedAllocation); a task
leaves by eviction at its deletion time. The replayed window starts at the first creation time and
lasts `--duration` (a trace spans months; every simulated hour costs its reconciles).

Measured, per policy, besides the what-if table: the active nodes ÷ the lower bound over time and
the GPU-hours allocated against the GPU-hours of capacity.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from tftui.engine.nodefit import pod_requests
from tftui.engine.packing import Packing, PTask
from tftui.engine.plan import EvictPod
from tftui.runtime.whatif import compare
from tftui.runtime.whatif_cluster import WhatIfCluster
from tftui.runtime.whatif_policy import parse_policy
from tftui.runtime.whatif_results import PolicyResult, SimConfig, _Churn
from tftui.sources.trace import NAMESPACE, Trace, task_objects, trace_objects

JSON = dict[str, Any]
START = datetime(2026, 1, 1, tzinfo=UTC)


class TraceFeed:
    """The trace's arrivals and departures (`runtime.whatif_results.Feed`)."""

    def __init__(self, trace: Trace, duration: timedelta, pool: str = "trace") -> None:
        self.trace = trace
        self.duration = duration
        models = trace.models()
        self.templates = {t.name: task_objects(t, models, pool) for t in trace.tasks}
        self.t0 = min(t.creation for t in trace.tasks)

    def schedule(self, start: datetime) -> list[_Churn]:
        out: list[_Churn] = []
        span = self.duration.total_seconds()
        for t in self.trace.tasks:
            if t.creation - self.t0 >= span:
                continue
            out.append(
                _Churn(start + timedelta(seconds=t.creation - self.t0), "arrive", NAMESPACE, t.name, t.name)
            )
            if t.deletion is not None and t.deletion - self.t0 < span:
                out.append(
                    _Churn(
                        start + timedelta(seconds=t.deletion - self.t0), "depart", NAMESPACE, t.name, t.name
                    )
                )
        order = {"depart": 0, "arrive": 1}
        out.sort(key=lambda c: (c.at, order[c.kind], c.name))
        return out

    def arrive(self, sim: WhatIfCluster, batch: list[_Churn]) -> int:
        for c in batch:
            wl, pod = self.templates[c.template]
            if wl is not None:
                sim.add_workload(wl, pod, c.name)
            else:
                self._bind_plain(sim, pod)
        if batch:
            sim.schedule()
        return len(batch)

    def depart(self, sim: WhatIfCluster, batch: list[_Churn]) -> int:
        gpu = [(c.namespace, c.name) for c in batch if self.templates[c.name][0] is not None]
        gone = sim.remove_workloads(gpu)
        for c in batch:
            if self.templates[c.name][0] is None and any(
                p["kind"] == "Pod"
                and p["metadata"]["name"] == c.name
                and p["metadata"].get("namespace") == NAMESPACE
                for p in sim.state().snapshot.kind("Pod")
            ):
                sim.apply(EvictPod(NAMESPACE, c.name))
                gone += 1
        return gone

    @staticmethod
    def _bind_plain(sim: WhatIfCluster, template: JSON) -> None:
        """A CPU-only pod, bound where kube-scheduler's default scoring puts it (Pending if nowhere)."""
        state = sim.state()
        pool = next(iter(sorted(state.pools)))
        pk = Packing.from_state(state, pool)
        req = pod_requests(template)
        got = pk.place_kube(PTask(template["metadata"]["name"], req.cpu, req.memory, pod=req))
        pod = copy.deepcopy(template)
        pod["metadata"]["creationTimestamp"] = sim.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        if got is not None:
            pod["spec"]["nodeName"] = pk.nodes[got[0]].name
            pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        sim.add_object(pod)


def run_lifetimes(
    trace: Trace, policies: Sequence[str], duration: timedelta, seed: int = 7
) -> list[PolicyResult]:
    objects = trace_objects(trace)
    cfg = SimConfig(duration=duration, seed=seed, churn=0.0, feed=TraceFeed(trace, duration))
    return compare(objects, [parse_policy(p) for p in policies], START, cfg)


def summary(results: Sequence[PolicyResult]) -> str:
    """Active ÷ bound over time, and GPU-hours allocated against the capacity of the active nodes."""
    lines = [
        "",
        "lifetimes: active nodes ÷ lower bound over time (samples with a bound); GPU-hours allocated:",
    ]
    for r in results:
        ratios = [a / b for p in r.active for a, b in zip(r.active[p], r.bound[p], strict=True) if b]
        spread = f"mean {sum(ratios) / len(ratios):.2f}, max {max(ratios):.2f}" if ratios else "no samples"
        lines.append(
            f"  {r.policy}: active/bound {spread}; GPU-h allocated {r.gpu_hours_allocated:.1f}, "
            f"{r.allocation_ratio:.1%} of the active nodes' capacity"
        )
    return "\n".join(lines) + "\n"
