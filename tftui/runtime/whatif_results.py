"""A what-if run's configuration (`SimConfig`), its arrival/departure feed and the seeded churn
schedule every policy shares, and the figures it produces (`PolicyResult`). Apart from the driver so
the output and the trace protocols read them without importing the event loop."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from random import Random
from typing import Any, Protocol

from tftui.engine.plan import Plan
from tftui.engine.state import ClusterState
from tftui.runtime.whatif_cluster import WhatIfCluster

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class SimConfig:
    """How long, how much churn, how often to sample; `seed` makes all of it reproducible."""

    duration: timedelta = timedelta(days=1)
    seed: int = 7
    churn: float = 0.5  # fraction of workloads that leave (and arrive) per day
    churn_step: timedelta = timedelta(hours=1)
    sample: timedelta = timedelta(minutes=30)
    provision_delay: timedelta = timedelta(minutes=5)
    autoscale_interval: timedelta = timedelta(minutes=15)
    history: Mapping[str, list[float | None]] | None = None  # recorded usage (None: generated)
    on_sample: Callable[[datetime], None] | None = None  # progress hook
    feed: Feed | None = None  # arrivals and departures of a trace (None: generated churn)


class Feed(Protocol):
    """Where a run's workloads come from when not from generated churn (`runtime.lifetimes`)."""

    def schedule(self, start: datetime) -> list[_Churn]: ...
    def arrive(self, sim: WhatIfCluster, batch: list[_Churn]) -> int: ...
    def depart(self, sim: WhatIfCluster, batch: list[_Churn]) -> int: ...


@dataclass(slots=True)
class PolicyResult:
    """One policy's figures over the run, plus the node counts over time for plotting."""

    policy: str
    node_hours: float = 0.0
    gpu_hours_allocated: float = 0.0
    gpu_hours_used: float = 0.0
    unmeasured_worker_hours: float = 0.0
    capacity_tflops_hours: float = 0.0
    allocated_tflops_hours: float = 0.0
    releases: int = 0
    evictions: int = 0
    provisioned: int = 0
    throttled_minutes: float = 0.0
    pending_minutes: float = 0.0
    cost: float = 0.0
    arrivals: int = 0
    departures: int = 0
    final_active: dict[str, int] = field(default_factory=dict)
    final_bound: dict[str, int] = field(default_factory=dict)
    final_packing_bound: dict[str, int] = field(default_factory=dict)
    final_holds: dict[str, dict[str, str]] = field(default_factory=dict)  # pool → active node → why kept
    times: list[datetime] = field(default_factory=list)
    active: dict[str, list[int]] = field(default_factory=dict)  # pool → active nodes per sample
    bound: dict[str, list[int]] = field(default_factory=dict)  # pool → configured bound per sample
    plans: list[Plan] = field(default_factory=list, repr=False)
    sim_seconds: float = 0.0
    wall_seconds: float = 0.0

    @property
    def allocation_ratio(self) -> float:
        return self.allocated_tflops_hours / self.capacity_tflops_hours if self.capacity_tflops_hours else 0.0

    def final_ratio(self, pool: str) -> float | None:
        b = self.final_bound.get(pool, 0)
        return self.final_active.get(pool, 0) / b if b else None

    def summary(self) -> JSON:
        """The figures, rounded, in a stable order (CSV columns and JSON keys)."""
        total_active = sum(self.final_active.values())
        total_bound = sum(self.final_bound.values())
        return {
            "policy": self.policy,
            "node_hours": round(self.node_hours, 2),
            "gpu_hours_allocated": round(self.gpu_hours_allocated, 2),
            "gpu_hours_used": round(self.gpu_hours_used, 2),
            "unmeasured_worker_hours": round(self.unmeasured_worker_hours, 2),
            "allocation_ratio": round(self.allocation_ratio, 4),
            "releases": self.releases,
            "evictions": self.evictions,
            "provisioned": self.provisioned,
            "throttled_minutes": round(self.throttled_minutes, 1),
            "pending_minutes": round(self.pending_minutes, 1),
            "cost_usd": round(self.cost, 2),
            "arrivals": self.arrivals,
            "departures": self.departures,
            "final_active_nodes": total_active,
            "final_lower_bound": total_bound,
            "final_ratio": round(total_active / total_bound, 4) if total_bound else None,
            "pools": {
                p: {
                    "active": self.final_active[p],
                    "lower_bound": self.final_bound[p],
                    "packing_bound": self.final_packing_bound[p],
                    "ratio": None if (r := self.final_ratio(p)) is None else round(r, 4),
                    "held_by": dict(Counter(self.final_holds.get(p, {}).values())),
                }
                for p in sorted(self.final_active)
            },
        }


@dataclass(frozen=True, slots=True)
class _Churn:
    at: datetime
    kind: str  # "arrive" | "depart"
    namespace: str
    name: str
    template: str  # arrive: the workload key it is cloned from


def churn_schedule(state: ClusterState, start: datetime, cfg: SimConfig) -> list[_Churn]:
    """Arrivals and departures over the run, from the seed alone (the same for every policy)."""
    if cfg.churn <= 0:
        return []
    rng = Random(f"tftui-whatif-{cfg.seed}")
    step = cfg.churn_step.total_seconds()
    end = start + cfg.duration
    mean_life = 86400.0 / cfg.churn

    def on_grid(t: datetime) -> datetime:
        off = math.ceil((t - start).total_seconds() / step) * step
        return start + timedelta(seconds=off)

    out: list[_Churn] = []
    by_pool: dict[str, list[str]] = {}
    for key in sorted(state.workloads):
        wv = state.workloads[key]
        if wv.obj is None or not any(k in state.workers for k in wv.workers):
            continue
        by_pool.setdefault(wv.pool or "", []).append(key)
        leave = start + timedelta(seconds=rng.expovariate(1.0 / mean_life))
        if leave < end:
            out.append(_Churn(on_grid(leave), "depart", wv.namespace, wv.name, ""))
    serial = 0
    for pool in sorted(by_pool):
        keys_ = by_pool[pool]
        rate = len(keys_) / mean_life  # arrivals per second that keep the pool's size steady
        t = start + timedelta(seconds=rng.expovariate(rate))
        while t < end:
            tpl = keys_[rng.randrange(len(keys_))]
            ns, name = tpl.split("/", 1)
            serial += 1
            new = f"{name[:40]}-w{serial:05d}"
            out.append(_Churn(on_grid(t), "arrive", ns, new, tpl))
            leave = t + timedelta(seconds=rng.expovariate(1.0 / mean_life))
            if leave < end:
                out.append(_Churn(on_grid(leave), "depart", ns, new, ""))
            t += timedelta(seconds=rng.expovariate(rate))
    order = {"depart": 0, "arrive": 1}
    out.sort(key=lambda c: (c.at, order[c.kind], c.namespace, c.name))
    return out
