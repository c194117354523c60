"""The isolation pool's fixed layout: its nodes, MIG profiles and workloads, and the shape helpers.

Data and small formatters only; the builder (isolation.py) places the workloads and sums the statuses.
Separate so the layout can be read (and changed) without the placement code around it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any, Final

from tftui.model.quantity import format_quantity

JSON = dict[str, Any]
TF: Final = "tensor-fusion.ai"
TF_API: Final = f"{TF}/v1"
POOL: Final = "isolation"
POOL_NAME: Final = f"demo-{POOL}"
TEMPLATE: Final = "isolation-balanced"
NAMESPACE: Final = "ml-eval"
GI: Final = 1 << 30
MI: Final = 1 << 20
MODEL: Final = "A100_PCIe_80G"
VRAM_MIB: Final = 81920
GPUS: Final = 4
RAM: Final = 512 * GI
DISK: Final = 2 * (1 << 40)
HARD_LABEL: Final = "gpu-isolation"
MIG_LABEL: Final = "nvidia.com/mig.config"
CAPABILITIES: Final = (
    '{"SupportsPartitioning":true,"SupportsSoftIsolation":true,"SupportsHardIsolation":true,'
    '"SupportsSnapshot":false,"SupportsMetrics":true,"SupportsRemoting":true,"MaxPartitions":7,'
    '"MaxWorkersPerDevice":16}'
)
SCHEDULER_CONFIG: Final = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: ""
  qps: 1000
  burst: 2000
profiles:
- schedulerName: tensor-fusion-scheduler
  plugins:
    preFilter:
      enabled:
      - name: GPUResourcesFit
    filter:
      enabled:
      - name: GPUResourcesFit
    score:
      enabled:
      - name: GPUResourcesFit
        weight: 5
  pluginConfig:
  - name: GPUResourcesFit
    args:
      maxWorkerPerNode: 256
      vramWeight: 0.7
      tflopsWeight: 0.3
"""
# MIG profiles of an 80GB A100 (the ones the ProviderConfig offers): id, name, compute %, GiB,
# instances per GPU, start slots, slots taken
MIG_PROFILES: Final = (
    ("a100-80g-1g-10gb", "1g.10gb", "14.2857", 10, 7, (0, 1, 2, 3, 4, 5, 6), 1),
    ("a100-80g-2g-20gb", "2g.20gb", "28.5714", 20, 3, (0, 2, 4), 2),
    ("a100-80g-3g-40gb", "3g.40gb", "42.8571", 40, 2, (0, 4), 4),
    ("a100-80g-4g-40gb", "4g.40gb", "57.1428", 40, 1, (0,), 4),
    ("a100-80g-7g-80gb", "7g.80gb", "100", 80, 1, (0,), 8),
)
# the demo's GPU models with the public table's prices (so compaction and cost views agree)
HARDWARE: Final = ("H100_SXM", "L40S", "A100_SXM_80G", "A100_PCIe_80G", "RTX4090")
IN_USE: Final = (
    "nvidia.com/gpu",
    "nvidia.com/mig-1g.10gb",
    "nvidia.com/mig-1g.20gb",
    "nvidia.com/mig-2g.20gb",
    "nvidia.com/mig-3g.40gb",
    "nvidia.com/mig-4g.40gb",
    "nvidia.com/mig-7g.80gb",
)


@dataclass(frozen=True, slots=True)
class _Spec:
    """One demo workload: where its workers go and what they ask (per device)."""

    name: str
    namespace: str
    isolation: str
    placements: tuple[tuple[int, int], ...]  # (node index, GPU index) per worker
    tflops: int | None  # None: compute percent
    percent: int | None
    vram_gi: int
    limit_tflops: int | None
    limit_gi: int
    qos: str
    profile: str
    partition: str = ""  # MIG profile name
    slots: tuple[int, ...] = ()  # MIG start slot per worker


WORKLOADS: Final = (
    _Spec("fraud-scoring", NAMESPACE, "hard", ((0, 0), (0, 1)), 120, None, 24, 160, 28, "high", "right-sized"),
    _Spec("risk-sim", NAMESPACE, "hard", ((0, 0),), 80, None, 16, 120, 20, "medium", "bursty"),
    _Spec("batch-transcribe", NAMESPACE, "shared", ((0, 2),), 40, None, 8, 80, 12, "low", "idle"),
    _Spec("embed-eval", NAMESPACE, "soft", ((1, 0), (1, 1)), None, 25, 16, None, 20, "medium", "over-request"),
    _Spec("rerank-eval", "recsys", "soft", ((1, 0),), 100, None, 20, 150, 24, "medium", "right-sized"),
    _Spec("video-caption-batch", "vision", "shared", ((1, 3),), 60, None, 16, 120, 20, "low", "bursty"),
    _Spec("llm-eval-mig", NAMESPACE, "partitioned", ((2, 0), (2, 1)), None, 40, 36, None, 40, "high",
          "right-sized", "3g.40gb", (0, 0)),
    _Spec("notebook-mig", "research", "partitioned", ((2, 0), (2, 0)), None, 10, 8, None, 10, "low", "idle",
          "1g.10gb", (4, 5)),
)  # fmt: skip


@dataclass(slots=True)
class IsolationPool:
    """What the pool adds to the demo: objects by kind, the cluster's pool entry, the status sums."""

    by_kind: dict[str, list[JSON]] = field(default_factory=dict)
    pool_entry: JSON = field(default_factory=dict)
    sums: dict[str, int] = field(default_factory=dict)

    def add(self, obj: JSON) -> None:
        self.by_kind.setdefault(obj["kind"], []).append(obj)


def _ts(dt: datetime) -> str:
    return dt.isoformat()[:19] + "Z"


def _tflops(milli: int) -> str:
    return format_quantity(Fraction(milli, 1000), "DecimalSI")


def _bytes(n: int) -> str:
    return format_quantity(n, "BinarySI")


def _owner(kind: str, name: str, uid: str) -> JSON:
    return {"apiVersion": TF_API, "kind": kind, "name": name, "uid": uid, "controller": True,
            "blockOwnerDeletion": True}  # fmt: skip


def capacity(s: dict[str, int]) -> JSON:
    return {
        "totalTFlops": _tflops(s["total_t"]),
        "totalVRAM": _bytes(s["total_v"]),
        "availableTFlops": _tflops(s["avail_t"]),
        "availableVRAM": _bytes(s["avail_v"]),
        "virtualTFlops": _tflops(s["virt_t"]),
        "virtualVRAM": str(s["virt_v"]),
        "virtualAvailableTFlops": _tflops(s["vavail_t"]),
        "virtualAvailableVRAM": str(s["vavail_v"]),
    }
