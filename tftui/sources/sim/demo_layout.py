"""The demo cluster's fixed layout and the small helpers every part of its generator shares.

Pools, node kinds, instance types and timings are data, not logic; the quantity formatting and the
object-shape helpers (conditions, owner references, resource blocks, capacity status) are used by the
placement, the emitters and the acting simulator alike, so they live here, below all of them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any, Final

from tftui.model.quantity import format_quantity

DEFAULT_NOW: Final = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CLUSTER_NAME: Final = "demo"
TF_VERSION: Final = "2.15.0"
TF: Final = "tensor-fusion.ai"
TF_API: Final = "tensor-fusion.ai/v1"

KI: Final = 1 << 10
MI: Final = 1 << 20
GI: Final = 1 << 30
TI: Final = 1 << 40

JSON = dict[str, Any]

# --------------------------------------------------------------------------------------------
# Quantities: status values are computed on integers (milli-TFLOPS, bytes) and formatted once.
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8192)
def format_bytes(n: int) -> str:
    """Integral bytes in Kubernetes' canonical binary form: the largest exact suffix (`80Gi`, `81559Mi`)."""
    return format_quantity(n, "BinarySI")


@functools.lru_cache(maxsize=8192)
def format_tflops(milli: int) -> str:
    """Milli-TFLOPS as a canonical decimal quantity: whole numbers plain (`312`), else milli (`165160m`)."""
    return format_quantity(Fraction(milli, 1000), "DecimalSI")


def _nice_ceil(x: int) -> int:
    """Round up to two significant digits (15824 → 16000): capacity settings people would write."""
    if x < 100:
        return x
    step = 10 ** (len(str(x)) - 2)
    return -(-x // step) * step


def as_utc(dt: datetime) -> datetime:
    """`dt` in UTC; a naive datetime is taken to be UTC already (not local time)."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def _ts(dt: datetime) -> str:
    """RFC 3339 with a `Z`, as the API server writes it; `dt` is always UTC here (derived from `now`)."""
    return dt.isoformat()[:19] + "Z"


def _money(x: float) -> str:
    return f"{x:.4f}".rstrip("0").rstrip(".")


# --------------------------------------------------------------------------------------------
# The catalogue: pools, node kinds, workload shapes.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _PoolDef:
    name: str  # gpuPools[].name; the GPUPool object is demo-<name>
    mode: str  # provisioningMode
    manage_mode: str  # GPUNode spec.manageMode
    template: str  # SchedulingConfigTemplate name
    placement: str
    oversell: int  # tflopsOversellRatio
    mem_pct: int  # vramExpandToHostMem
    disk_pct: int  # vramExpandToHostDisk
    period: str  # nodeCompaction.period
    defrag: JSON | None
    is_default: bool
    min_nodes: float  # capacityConfig.minResources in multiples of the pool's largest node
    warm_nodes: float
    max_factor: float  # maxResources as a multiple of the generated total


_POOLS: Final[tuple[_PoolDef, ...]] = (
    _PoolDef(
        "inference", "AutoSelect", "AutoSelect", "inference-balanced", "NodeCompactGPULowLoad",
        300, 40, 20, "10m",
        {"enabled": False, "schedule": "0 4 * * 6", "timezone": "America/Los_Angeles",
         "maxDuration": "1h", "utilizationThresholdPercent": 30},
        True, 2.0, 1.0, 2.0,
    ),
    _PoolDef(
        "training", "Provisioned", "Provisioned", "training-compact", "CompactFirst",
        200, 50, 0, "30m", None, False, 1.0, 0.5, 1.5,
    ),
    _PoolDef(
        "dev", "Karpenter", "Provisioned", "dev-spread", "LowLoadFirst",
        500, 50, 70, "5m",
        {"enabled": True, "schedule": "0 3 * * *", "timezone": "America/New_York",
         "maxDuration": "2h", "utilizationThresholdPercent": 40},
        False, 1.0, 1.0, 2.0,
    ),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Shape:
    """A workload archetype: per-device requests/limits, device count, names and namespaces."""

    stems: tuple[str, ...]
    namespaces: tuple[str, ...]
    req_t: int  # TFLOPS, whole
    req_gi: int
    lim_t: int
    lim_gi: int
    gpu_count: int
    weight: float


@dataclass(frozen=True, slots=True)
class _Kind:
    """A node type: which pool, which GPU, how many, how the demo fills it."""

    key: str
    pool: str
    prefix: str  # node name prefix
    gpu_model: str  # short name in the GPU table
    family: str  # spec.gpuModel on workloads that must land on this kind
    vram_mib: int
    gpus: int
    share: float  # fraction of all nodes
    default_nodes: int  # nodes of this kind at nodes=40, to scale the special roles
    disk: int  # bytes of local data disk (nodeInfo.dataDiskSize)
    age_days: tuple[float, float]
    open_plan: tuple[tuple[int, float], ...]  # GPUs with workers per node: >0 absolute, <=0 = gpus + value
    density: float  # default workers per occupied GPU
    cap: int  # at most this many workers share one GPU
    replicas: tuple[tuple[int, float], ...]
    profiles: tuple[tuple[str, float], ...]
    qos: tuple[tuple[str, float], ...]
    roles: tuple[str, ...]  # special nodes at default scale
    shapes: tuple[_Shape, ...]


_PEOPLE: Final = (
    "alice", "bob", "chen", "dana", "eve", "farid", "gita", "hiro", "ines", "jun", "kai", "lena",
    "mo", "nia", "omar", "pia", "quinn", "raj", "sofia", "tom", "uma", "vik", "wen", "yara",
)  # fmt: skip

_KINDS: Final[tuple[_Kind, ...]] = (
    _Kind(
        "h100", "inference", "inf-h100", "H100_SXM", "H100", 81559, 8, 0.175, 7, 4 * TI, (20, 140),
        ((0, 0.4), (-1, 0.4), (-2, 0.2)), 2.4, 4,
        ((1, 0.35), (2, 0.45), (3, 0.2)),
        (("over-request", 0.4), ("bursty", 0.3), ("right-sized", 0.2), ("idle", 0.1)),
        (("critical", 0.15), ("high", 0.45), ("medium", 0.35), ("low", 0.05)),
        ("young_busy", "dnd_busy"),
        (
            _Shape(("llama3-70b-chat", "qwen2-72b-infer", "mixtral-8x22b-api", "deepseek-v2-chat"),
                   ("ml-serving",), 400, 70, 800, 76, 2, 0.12),
            _Shape(("llama3-8b-infer", "mistral-7b-api", "gemma2-27b-chat", "codellama-34b", "phi3-medium"),
                   ("ml-serving",), 300, 32, 600, 48, 1, 0.3),
            _Shape(("bge-m3-embed", "rerank-v2", "e5-large-embed", "guardrail-classifier", "moderation-llm"),
                   ("ml-serving", "recsys"), 160, 16, 400, 24, 1, 0.28),
            _Shape(("sdxl-turbo", "flux-schnell", "sam2-segment", "clip-vit-l"),
                   ("vision",), 220, 16, 400, 24, 1, 0.15),
            _Shape(("whisper-large-v3", "xtts-v2", "asr-streaming"), ("speech",), 120, 10, 300, 16, 1, 0.15),
        ),
    ),
    _Kind(
        "l40s", "inference", "inf-l40s", "L40S", "L40S", 46068, 4, 0.175, 7, 2 * TI, (10, 120),
        ((0, 0.6), (-1, 0.4)), 2.2, 3,
        ((1, 0.35), (2, 0.45), (3, 0.2)),
        (("over-request", 0.3), ("bursty", 0.35), ("right-sized", 0.25), ("idle", 0.1)),
        (("high", 0.35), ("medium", 0.5), ("low", 0.15)),
        ("empty_dnd_node", "native", "young_busy"),
        (
            _Shape(("yolo-v8-detect", "ocr-donut", "sdxl-render", "video-caption"),
                   ("vision",), 120, 16, 240, 24, 1, 0.35),
            _Shape(("whisper-medium", "tts-fastpitch", "diarize-pyannote"), ("speech",), 60, 8, 180, 12, 1, 0.3),
            _Shape(("bert-ner", "dlrm-ranker", "two-tower-serve", "ctr-predictor"),
                   ("recsys", "ml-serving"), 90, 10, 200, 16, 1, 0.2),
            _Shape(("llava-13b", "qwen2-vl-7b"), ("vision", "ml-serving"), 180, 30, 300, 40, 1, 0.15),
        ),
    ),
    _Kind(
        "a100", "training", "train-a100", "A100_SXM_80G", "A100", 81920, 8, 0.15, 6, 4 * TI, (15, 100),
        ((0, 0.75), (-1, 0.25)), 1.45, 3,
        ((1, 0.6), (2, 0.3), (3, 0.1)),
        (("right-sized", 0.5), ("over-request", 0.25), ("bursty", 0.15), ("idle", 0.1)),
        (("medium", 0.5), ("low", 0.35), ("high", 0.15)),
        ("empty_dnd", "cordoned", "native"),
        (
            _Shape(("llama3-8b-sft", "dpo-finetune", "pretrain-small-lm", "rlhf-ppo"),
                   ("research", "ml-batch"), 300, 72, 312, 78, 2, 0.16),
            _Shape(("reward-model", "distill-student", "vit-pretrain", "dlrm-train"),
                   ("research", "ml-batch", "recsys"), 200, 40, 312, 64, 1, 0.3),
            _Shape(("eval-harness", "embed-batch", "feature-embed", "asr-finetune"),
                   ("ml-batch", "recsys", "speech"), 100, 24, 200, 40, 1, 0.34),
            _Shape(("data-dedup-gpu", "batch-transcribe", "caption-backfill"),
                   ("ml-batch", "speech", "vision"), 60, 16, 150, 24, 1, 0.2),
        ),
    ),
    _Kind(
        "4090", "dev", "dev-4090", "RTX4090", "", 24564, 4, 0.5, 20, 1 * TI, (1, 21),
        ((1, 0.65), (2, 0.2), (3, 0.08), (0, 0.07)), 1.35, 2,
        ((1, 0.8), (2, 0.2)),
        (("idle", 0.4), ("over-request", 0.25), ("right-sized", 0.2), ("bursty", 0.15)),
        (("low", 0.8), ("medium", 0.2)),
        ("empty", "empty", "young_empty", "cordoned", "native"),
        (
            _Shape(tuple(f"notebook-{p}" for p in _PEOPLE), ("research",), 20, 4, 80, 12, 1, 0.45),
            _Shape(("yolo-dev", "seg-experiments", "diffusion-sandbox"), ("vision",), 40, 8, 120, 16, 1, 0.2),
            _Shape(("asr-prototype", "vad-tuning"), ("speech",), 30, 6, 100, 12, 1, 0.15),
            _Shape(("ranker-sandbox", "embed-playground"), ("recsys", "research"), 15, 2, 60, 8, 1, 0.2),
        ),
    ),
)  # fmt: skip

# (GPU model, GPUs per node) → (instance type, vCPUs, memory GiB, on-demand $/h or None); from
# AWS's published EC2 GPU instance list (Linux on-demand prices). Combinations AWS does not sell get a descriptive name.
_INSTANCES: Final[dict[tuple[str, int], tuple[str, int, int, float | None]]] = {
    ("H100_SXM", 8): ("p5.48xlarge", 192, 2048, None),
    ("L40S", 1): ("g6e.xlarge", 4, 32, 1.8610),
    ("L40S", 4): ("g6e.12xlarge", 48, 384, 10.4926),
    ("L40S", 8): ("g6e.48xlarge", 192, 1536, 30.1312),
    ("A100_SXM_80G", 8): ("p4de.24xlarge", 96, 1152, 27.4471),
}
# a node's life: GPUNode +30 s, GPUs discovered by the hypervisor +45 s, first worker bound +50 s
_GPU_DISCOVERED_AFTER: Final = timedelta(seconds=45)
_SCHEDULABLE_AFTER: Final = timedelta(seconds=50)
_ZONES: Final = ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d")
_NATIVE_PODS: Final = (
    ("legacy-serving", "triton-legacy"),
    ("media", "nvenc-transcode"),
    ("infra", "cuda-burn-in"),
)
_POD_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
_YOUNG_ROLES: Final = ("young_busy", "young_empty")
_EMPTY_ROLES: Final = ("empty", "empty_dnd", "empty_dnd_node", "young_empty")


def _instance(kind: _Kind, gpus: int) -> tuple[str, int, int, float | None]:
    hit = _INSTANCES.get((kind.gpu_model, gpus))
    if hit is not None:
        return hit
    return (
        f"{kind.gpu_model.lower().replace('_', '-')}-x{gpus}",
        max(8, 12 * gpus),
        max(64, 48 * gpus),
        None,
    )


def _ready(ts: str, reason: str = "") -> JSON:
    """A `Ready` condition; with a reason, a whole `metav1.Condition` (the CRDs require its
    `message`, empty or not), else a pod's (whose reason and message are optional)."""
    cond: JSON = {"type": "Ready", "status": "True", "lastTransitionTime": ts}
    if reason:
        cond["reason"] = reason
        cond["message"] = ""
    return cond


def _owner(api: str, kind: str, name: str, uid: str) -> JSON:
    return {
        "apiVersion": api,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _with(d: JSON, key: str, value: Any) -> JSON:
    out = dict(d)
    out[key] = value
    return out


def _res(req_t: int, req_v: int) -> JSON:
    return {"tflops": format_tflops(req_t), "vram": format_bytes(req_v)}


_START_DELAY: Final = timedelta(seconds=4)
_READY_DELAY: Final = timedelta(seconds=21)
_SUM_KEYS: Final = (
    "nodes", "gpus", "total_t", "total_v", "avail_t", "avail_v", "virt_t", "virt_v", "vavail_t", "vavail_v", "pods",
)  # fmt: skip


def capacity_status(s: dict[str, int]) -> JSON:
    """The capacity block shared by GPUNode, GPUPool and TensorFusionCluster status."""
    return {
        "totalTFlops": format_tflops(s["total_t"]),
        "totalVRAM": format_bytes(s["total_v"]),
        "availableTFlops": format_tflops(s["avail_t"]),
        "availableVRAM": format_bytes(s["avail_v"]),
        "virtualTFlops": format_tflops(s["virt_t"]),
        "virtualVRAM": str(s["virt_v"]),
        "virtualAvailableTFlops": format_tflops(s["vavail_t"]),
        "virtualAvailableVRAM": str(s["vavail_v"]),
    }
