"""The step-1 diagnosis' vocabulary: its thresholds (named, with the anchor each comes from), its
classes and levels, the rows and findings it returns, and the unit and object helpers it shares.

Apart from the classification (`engine.waste`) because the console, the reports and the fix texts
read these types and figures without classifying anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Literal

from tftui.engine.prices import gpu_price
from tftui.engine.state import ClusterState, PoolView

# -- thresholds (M4; upstream anchors: alerts at 90/95 % allocated, IdleGPU at < 1 %
#    compute and < 5 % VRAM, defrag at ≤ 40 % of GPUs occupied, autoscaler margin 0.15) ------------

HIGH_ALLOC_PCT: Final = 70.0  # over-request / saturation: allocated TFLOPS % at or above
LOW_USED_PCT: Final = 20.0  # over-request: used compute % at or below
HIGH_USED_PCT: Final = 70.0  # saturation: used compute % at or above
LOW_ALLOC_PCT: Final = 40.0  # fragmentation: node allocation (larger of TFLOPS/VRAM %) at or below
FRAGMENTED_MIN_NODES: Final = 2  # ... on at least this many partly used nodes of one pool
EMPTY_ALLOC_PCT: Final = 0.0  # empty node: allocation at or below (and no worker on it now)
IDLE_COMPUTE_PCT: Final = 1.0  # idle reservation: compute below, % of the GPU (IdleGPU: `compute < 1`)
IDLE_VRAM_PCT: Final = 5.0  # idle GPU: VRAM peak below (IdleGPU threshold)
IDLE_REQUEST_RATIO: Final = 0.05  # idle workload: average TFLOPS below this share of its request
VRAM_BOUND_MIN_PCT: Final = 70.0  # VRAM-bound: VRAM allocated at or above ...
VRAM_BOUND_GAP_PCT: Final = 30.0  # ... and this many points above TFLOPS allocated (demo H100: 87.9 vs 40.4)
OVER_REQUEST_RATIO: Final = 0.3  # workload over-request: average TFLOPS (or VRAM peak) / request below
UNDER_REQUEST_MARGIN_PCT: Final = 5.0  # node/GPU under-request: used compute % above allocated % + margin
LIMIT_NEAR_RATIO: Final = 0.95  # workload under-request: TFLOPS peak at or above this share of its limit
HEADROOM: Final = 1.15  # suggested request = peak × (1 + autoscaler's default marginFraction 0.15)
SAMPLE_INTERVAL: Final = timedelta(minutes=1)  # upstream writes one row per object per minute

GI: Final = 1024**3
_EPS: Final = 1e-9

Level = Literal["node", "gpu", "workload"]
Cls = Literal[
    "over-request",
    "fragmentation",
    "empty-node",
    "idle-reservation",
    "saturation",
    "vram-bound",
    "under-request",
    "ok",
    "no-data",
]
LEVELS: Final[tuple[Level, ...]] = ("workload", "node", "gpu")
#: classes whose waste `Totals` adds (disjoint: requested-but-unused, and unrequested capacity)
REQUEST_WASTE: Final = frozenset({"over-request", "idle-reservation"})
CAPACITY_WASTE: Final = frozenset({"empty-node", "fragmentation"})


@dataclass(frozen=True, slots=True)
class Finding:
    """One pattern found on one object, the evidence in figures, the settings that fix it, its cost."""

    level: Level
    name: str  # node name, GPU name, or "namespace/workload"
    pool: str | None
    cls: Cls
    detail: str
    fixes: tuple[str, ...]  # first = the main lever; each names the field, annotation or command
    wasted_gpu_hours: float | None  # None: capacity unknown; 0.0 for risks (saturation, under-request)
    wasted_money: float | None  # USD; None: no price known


@dataclass(frozen=True, slots=True)
class NodeRow:
    """Query 1 joined with query 2 over the node's GPUs: allocated vs used, and the verdict."""

    name: str
    pool: str | None
    gpus: int
    in_cluster: bool  # False: rows in the window, but the GPUNode is gone
    tflops_allocated_pct: float | None
    vram_allocated_pct: float | None
    compute_used_pct: float | None  # capacity-weighted average over its GPUs; None unless all reported
    vram_peak_pct: float | None  # highest GPU VRAM peak
    gpus_reporting: int
    hours: float  # hours of allocation rows in the window
    price_per_gpu_hour: float | None
    classes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GPURow:
    """Query 2 for one GPU, with its current allocation from the snapshot."""

    name: str
    node: str | None
    pool: str | None
    model: str
    in_cluster: bool
    tflops_allocated_pct: float | None  # now (snapshot)
    vram_allocated_pct: float | None  # now (snapshot)
    compute_used_pct: float | None  # window average
    vram_peak_pct: float | None  # window peak
    hours: float  # hours of usage rows in the window (0: none, figures based on them unknown)
    price_per_hour: float | None
    classes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class WorkloadRow:
    """Queries 3 and 4 for one workload: request per device vs average and peak use per device."""

    namespace: str
    name: str
    pool: str | None
    in_cluster: bool
    workers: int | None
    gpu_count: int | None
    tflops_request: float | None
    tflops_limit: float | None  # current, from the snapshot
    tflops_avg: float | None
    tflops_peak: float | None
    vram_request_bytes: float | None
    vram_peak_bytes: float | None
    device_tflops: float | None  # capacity of the GPUs it runs on (mean), for shares
    device_vram_bytes: float | None
    device_hours: float
    autoscale: bool
    classes: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def tflops_use_ratio(self) -> float | None:
        if self.tflops_avg is None or not self.tflops_request:
            return None
        return self.tflops_avg / self.tflops_request


@dataclass(frozen=True, slots=True)
class Totals:
    """Disjoint waste over the window: requests above usage, and capacity nobody requested."""

    requests_gpu_hours: float
    requests_money: float
    capacity_gpu_hours: float
    capacity_money: float
    unpriced: int  # findings counted in GPU-hours whose money is unknown

    @property
    def gpu_hours(self) -> float:
        return self.requests_gpu_hours + self.capacity_gpu_hours

    @property
    def money(self) -> float:
        return self.requests_money + self.capacity_money


def disjoint_waste(f: Finding) -> bool:
    """Whether `f` is waste `Totals`, a pool's and a workload's figure add: requests above usage
    (a workload's over-request or idle reservation) or capacity nobody requested (an empty or
    fragmented node), with its GPU-hours known. The other findings re-count the same capacity."""
    if f.wasted_gpu_hours is None:
        return False
    return (f.level == "workload" and f.cls in REQUEST_WASTE) or (
        f.level == "node" and f.cls in CAPACITY_WASTE
    )


@dataclass(frozen=True, slots=True)
class WasteFigure:
    """The waste of a set of disjoint findings (a pool's, a workload's) over the window."""

    gpu_hours: float
    money: float | None  # USD; None: waste was found but none of it has a price
    unpriced: bool  # some of the waste has no price: `money` is a lower bound


def waste_figure(findings: Iterable[Finding]) -> WasteFigure:
    """GPU-hours and money of the `disjoint_waste` findings among `findings` (the others ignored)."""
    hours = money = 0.0
    wasting = unpriced = 0
    for f in findings:
        if not disjoint_waste(f):
            continue
        hours += f.wasted_gpu_hours or 0.0
        money += f.wasted_money or 0.0
        if f.wasted_gpu_hours:
            wasting += 1
            unpriced += f.wasted_money is None
    return WasteFigure(hours, None if wasting and unpriced == wasting else money, unpriced > 0)


def workload_waste(
    workloads: Iterable[WorkloadRow], findings: Iterable[Finding]
) -> dict[str, WasteFigure | None]:
    """Workload key → its wasted GPU-hours and money over the window, as the pool figure and the
    totals count it; None (unknown, never 0) when the workload had no metrics in the window
    (`no-data`) or its waste could not be sized (the capacity of its GPUs unknown)."""
    mine: dict[str, list[Finding]] = {}
    for f in findings:
        if f.level == "workload" and f.cls in REQUEST_WASTE:
            mine.setdefault(f.name, []).append(f)
    out: dict[str, WasteFigure | None] = {}
    for row in workloads:
        found = mine.get(row.key, [])
        if "no-data" in row.classes or any(f.wasted_gpu_hours is None for f in found):
            out[row.key] = None
        else:
            out[row.key] = waste_figure(found)
    return out


@dataclass(frozen=True, slots=True)
class Diagnosis:
    window: timedelta
    nodes: tuple[NodeRow, ...]
    gpus: tuple[GPURow, ...]
    workloads: tuple[WorkloadRow, ...]
    findings: tuple[Finding, ...]  # by wasted GPU-hours, largest first
    totals: Totals


# -- helpers -------------------------------------------------------------------------------------


def num(x: float, digits: int = 1) -> str:
    """A figure for fix and detail text: `digits` decimals (one more below 1), trailing zeros dropped."""
    text = f"{x:.{digits + 1 if abs(x) < 1 else digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def gib(x: float) -> str:
    return f"{num(x / GI)}Gi"


def _ceil_gi(x: float) -> int:
    return max(1, math.ceil(x / GI - _EPS))


def _ceil_tflops(x: float) -> int:
    return max(1, math.ceil(x - _EPS))


def _hours(samples: int, window: timedelta, objects: int = 1) -> float:
    covered = min(SAMPLE_INTERVAL * samples, window * max(objects, 1))
    return covered / timedelta(hours=1)


def _gpu_price(state: ClusterState, gpu: str) -> float | None:
    gv = state.gpus.get(gpu)
    if gv is None:
        return None
    node = state.nodes.get(gv.node) if gv.node else None
    if node is not None and node.cost_per_hour is not None and node.gpus:
        return node.cost_per_hour / len(node.gpus)
    return gpu_price(state, gv.model)


def _money(gpu_hours: float | None, price: float | None) -> float | None:
    if gpu_hours is None or price is None:
        return None
    return gpu_hours * price


def _pool_path(state: ClusterState, pool: str | None, path: str) -> str:
    """Where a pool setting is edited: the TensorFusionCluster's specTemplate (the controller copies it)."""
    pv = state.pools.get(pool) if pool else None
    if pv is None:
        return f"GPUPool {pool or '<pool>'} spec.{path}"
    if pv.cluster and pv.name.startswith(pv.cluster + "-"):
        short = pv.name[len(pv.cluster) + 1 :]
        return f"TensorFusionCluster {pv.cluster} spec.gpuPools[{short}].specTemplate.{path}"
    return f"GPUPool {pv.name} spec.{path}"


def _pool_spec(pv: PoolView | None) -> dict[str, object]:
    return (pv.obj.get("spec") or {}) if pv is not None else {}


def _capacity_text(spec: dict[str, object], key: str) -> str | None:
    cap = spec.get("capacityConfig")
    unit = cap.get(key) if isinstance(cap, dict) else None
    if not isinstance(unit, dict):
        return None
    parts = [f"{unit[k]} {label}" for k, label in (("tflops", "TFLOPS"), ("vram", "VRAM")) if unit.get(k)]
    return ", ".join(parts) or None


def _compaction(spec: dict[str, object]) -> dict[str, object]:
    nmc = spec.get("nodeManagerConfig")
    nc = nmc.get("nodeCompaction") if isinstance(nmc, dict) else None
    return nc if isinstance(nc, dict) else {}


def _template_name(pv: PoolView | None) -> str:
    return pv.template if pv is not None and pv.template else "<the pool's SchedulingConfigTemplate>"
