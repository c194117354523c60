"""The embedded demo cluster: a deterministic, self-consistent TensorFusion installation.

`generate_objects()` returns plain dicts shaped like `kubectl get <kinds> -A -o json` items, so the
rest of tftui reads the demo exactly as it reads a live cluster or a dump. Layout (default 40 nodes):

- pool `demo-inference` (AutoSelect): H100 8-GPU and L40S 4-GPU nodes, NodeCompactGPULowLoad;
- pool `demo-training` (Provisioned): A100 8-GPU nodes with one GPUNodeClaim each, CompactFirst;
- pool `demo-dev` (Karpenter): RTX 4090 4-GPU nodes, LowLoadFirst, defrag enabled and visibly
  fragmented (most nodes use one GPU of four);
- pool `demo-isolation` (AutoSelect, `sources/sim/isolation.py`): three A100 80GB PCIe nodes with hard
  and shared isolation, a MIG-partitioned node, a quota; with the NVIDIA ProviderConfig and the
  chart's config ConfigMap. It comes on top of `nodes` and is built from its own random stream.

Status fields are not invented: workers are placed first (never over-allocating a GPU, never
exceeding a node's virtual capacity with limits), then every GPU, GPUNode, GPUPool, cluster, workload
and PDB status is summed from those placements with upstream's arithmetic. Everything time-related is
relative to `now`. All randomness comes from one `random.Random(seed)`, consumed in a fixed order.
"""

from __future__ import annotations

import functools
import gc
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from random import Random
from typing import Any, Final

from tftui.model.gpuinfo import GPUInfo, by_short_name
from tftui.model.quantity import format_quantity, parse_quantity
from tftui.sources.sim.isolation import isolation_pool
from tftui.sources.sim.scenarios import PROFILE_ANNOTATION

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


# --------------------------------------------------------------------------------------------
# Mutable placement state (plain slotted classes: this is the hot path for large clusters).
# --------------------------------------------------------------------------------------------


class _Gpu:
    __slots__ = (
        "avail_t",
        "avail_v",
        "count",
        "created",
        "index",
        "name",
        "native",
        "node",
        "open",
        "workers",
    )

    def __init__(self, node: _Node, index: int, name: str, cap_t: int, cap_v: int) -> None:
        self.node = node
        self.index = index
        self.name = name
        self.avail_t = cap_t
        self.avail_v = cap_v
        self.count = 0
        self.open = False
        self.native = False
        self.workers: list[_Worker] = []
        self.created = node.created


class _Node:
    __slots__ = (
        "claim", "created", "gpus", "index", "instance", "kind", "lim_t", "lim_v", "name", "price",
        "ram", "role", "uid", "virt_t", "virt_v", "workers", "zone",
    )  # fmt: skip

    def __init__(self, kind: _Kind, index: int, name: str) -> None:
        self.kind = kind
        self.index = index
        self.name = name
        self.role = "normal"
        self.gpus: list[_Gpu] = []
        self.workers: list[_Worker] = []
        self.created = DEFAULT_NOW
        self.zone = ""
        self.instance: tuple[str, int, int, float | None] = ("", 0, 0, None)
        self.ram = 0
        self.price = 0.0
        self.virt_t = 0
        self.virt_v = 0
        self.lim_t = 0
        self.lim_v = 0
        self.claim = ""
        self.uid = ""


class _Workload:
    __slots__ = ("autoscale", "created", "isolation", "kind", "name", "namespace", "pdb", "profile", "qos",
                 "shape", "uid", "workers")  # fmt: skip

    def __init__(self, kind: _Kind, shape: _Shape, namespace: str, qos: str, profile: str) -> None:
        self.kind = kind
        self.shape = shape
        self.namespace = namespace
        self.qos = qos
        self.profile = profile
        self.name = ""
        self.uid = ""
        self.created = DEFAULT_NOW
        self.autoscale = False
        self.isolation = "soft"
        self.pdb = ""  # "", "max1" or "min"
        self.workers: list[_Worker] = []


class _Worker:
    __slots__ = ("created", "gpus", "name", "node", "uid", "workload")

    def __init__(self, workload: _Workload, node: _Node, gpus: list[_Gpu]) -> None:
        self.workload = workload
        self.node = node
        self.gpus = gpus
        self.name = ""
        self.uid = ""
        self.created = DEFAULT_NOW


class _KindState:
    """Per node kind: its nodes and the ring of nodes that still accept workers."""

    __slots__ = ("cap", "cursor", "exhausted", "kind", "min_t", "min_v", "nodes", "placed", "ring", "widened")

    def __init__(self, kind: _Kind, nodes: list[_Node]) -> None:
        self.kind = kind
        self.nodes = nodes
        self.ring = [n for n in nodes if any(g.open for g in n.gpus)]
        self.cursor = 0
        self.placed = 0
        self.exhausted = not self.ring
        self.min_t = min(s.req_t for s in kind.shapes) * 1000
        self.min_v = min(s.req_gi for s in kind.shapes) * GI
        self.cap = kind.cap
        self.widened = False


def _pick(rng: Random, weighted: tuple[tuple[Any, float], ...]) -> Any:
    x = rng.random() * sum(w for _, w in weighted)
    for value, w in weighted:
        x -= w
        if x < 0:
            return value
    return weighted[-1][0]


def _apportion(total: int, weights: list[float]) -> list[int]:
    """Split `total` by `weights` with the largest-remainder method (deterministic, sums exactly)."""
    s = sum(weights)
    if total <= 0 or s <= 0:
        return [0] * len(weights)
    raw = [total * w / s for w in weights]
    out = [int(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i] - out[i]), i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


# --------------------------------------------------------------------------------------------
# The generator.
# --------------------------------------------------------------------------------------------


class _Builder:
    """Builds the installation in memory: nodes and their roles first, then workloads placed on them."""

    def __init__(
        self, seed: int, nodes: int, now: datetime, gpus_per_node: int | None, workers: int | None
    ) -> None:
        if nodes < 1:
            raise ValueError("nodes must be at least 1")
        if gpus_per_node is not None and gpus_per_node < 1:
            raise ValueError("gpus_per_node must be at least 1")
        if workers is not None and workers < 0:
            raise ValueError("workers must not be negative")
        self.rng = Random(seed)
        self.rng_seed = seed
        self.n_nodes = nodes
        self.now = as_utc(now).replace(microsecond=0)
        self.gpus_per_node = gpus_per_node
        self.workers_target = workers
        self.gpu_info: dict[str, GPUInfo] = {}
        for kind in _KINDS:
            info = by_short_name(kind.gpu_model)
            if info is None:  # pragma: no cover - the packaged table has every model we use
                raise LookupError(f"GPU model {kind.gpu_model} missing from gpu-info.csv")
            self.gpu_info[kind.key] = info
        self.kinds: list[_KindState] = []
        self.workloads: list[_Workload] = []
        self.names: dict[str, set[str]] = {}
        self.stem_counter: dict[tuple[str, str], int] = {}
        self.pool_uids: dict[str, str] = {}
        self.cluster_uid = ""

    # -- small helpers -------------------------------------------------------------------------

    def uid(self) -> str:
        """A random (version 4) UUID string from the seeded RNG; formatted by hand, uuid.UUID is slow."""
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"

    def suffix(self) -> str:
        """Five characters from the alphabet Kubernetes uses for generated names."""
        x = self.rng.getrandbits(32)
        out = []
        for _ in range(5):
            x, r = divmod(x, 27)
            out.append(_POD_ALPHABET[r])
        return "".join(out)

    def ago(self, seconds: float) -> datetime:
        return self.now - timedelta(seconds=int(seconds))

    # -- nodes ---------------------------------------------------------------------------------

    def build_nodes(self) -> None:
        rng = self.rng
        counts = _apportion(self.n_nodes, [k.share for k in _KINDS])
        if self.n_nodes >= len(_KINDS):  # every kind present, so every pool has nodes
            for i, c in enumerate(counts):
                if c == 0:
                    j = max(range(len(counts)), key=lambda x: counts[x])
                    counts[j] -= 1
                    counts[i] = 1
        for kind, count in zip(_KINDS, counts, strict=True):
            gpus = self.gpus_per_node or kind.gpus
            info = self.gpu_info[kind.key]
            cap_t, cap_v = info.tflops_milli, kind.vram_mib * MI
            pool = next(p for p in _POOLS if p.name == kind.pool)
            inst = _instance(kind, gpus)
            width = max(2, len(str(count)))
            nodes = [_Node(kind, i, f"{kind.prefix}-{i + 1:0{width}d}") for i in range(count)]
            self.assign_roles(kind, nodes)
            lo, hi = kind.age_days
            for node in nodes:
                if node.role in _YOUNG_ROLES:
                    node.created = self.ago(rng.uniform(60, 270))
                else:
                    # older names were created earlier: age falls with the index, plus jitter
                    frac = 1.0 - (node.index + rng.random()) / max(count, 1)
                    node.created = self.ago(86400 * (lo + (hi - lo) * frac))
                node.zone = _ZONES[rng.randrange(len(_ZONES))]
                node.instance = inst
                node.ram = inst[2] * GI
                # the GPU table's price, like upstream's raw_cost, so cost views and compaction agree
                node.price = round(info.price_per_hour * gpus, 4)
                total_t, total_v = cap_t * gpus, cap_v * gpus
                node.virt_t = total_t * pool.oversell // 100
                node.virt_v = total_v + node.ram * pool.mem_pct // 100 + kind.disk * pool.disk_pct // 100
                node.gpus = [_Gpu(node, i, f"gpu-{self.uid()}", cap_t, cap_v) for i in range(gpus)]
                gpu_created = node.created + _GPU_DISCOVERED_AFTER
                for g in node.gpus:
                    g.created = gpu_created
                if node.role == "native":
                    node.gpus[-1].native = True
                if node.role not in _EMPTY_ROLES:
                    self.open_gpus(kind, node)
            self.kinds.append(_KindState(kind, nodes))

    def assign_roles(self, kind: _Kind, nodes: list[_Node]) -> None:
        """Mark the special nodes (empty, young, protected, cordoned, native GPU) of one kind.

        Counts scale with the kind's node count so a 5000-node cluster keeps the same mix; young
        nodes take the highest numbers (they joined last), the others are spread at random.
        """
        n = len(nodes)
        factor = max(1.0, n / kind.default_nodes)
        roles: list[str] = []
        for role in dict.fromkeys(kind.roles):
            per_default = kind.roles.count(role)
            roles += [role] * max(1, round(per_default * factor))
        roles = roles[: max(0, n - 1)]  # always keep one ordinary node
        young = [r for r in roles if r in _YOUNG_ROLES]
        others = [r for r in roles if r not in _YOUNG_ROLES]
        for offset, role in enumerate(young):
            nodes[n - 1 - offset].role = role
        free = list(range(n - len(young)))
        for role, idx in zip(others, self.rng.sample(free, min(len(others), len(free))), strict=False):
            nodes[idx].role = role

    def open_gpus(self, kind: _Kind, node: _Node) -> None:
        """Choose which GPUs of a node get TF workers; the dev pool's plan makes it fragmented."""
        candidates = [g for g in node.gpus if not g.native]
        if not candidates:
            return
        value = _pick(self.rng, kind.open_plan)
        k = value if value > 0 else len(node.gpus) + value
        if node.role == "young_busy":
            k = min(k, 2)
        k = max(1, min(k, len(candidates)))
        if kind.pool == "dev" and k < len(candidates):
            # LowLoadFirst spreads: the used GPU is whichever the scheduler found emptiest
            chosen = self.rng.sample(candidates, k)
        else:
            chosen = candidates[:k]
        for g in chosen:
            g.open = True

    # -- workloads and placement ---------------------------------------------------------------

    def place_all(self) -> None:
        weights = [
            sum(1 for n in ks.nodes for g in n.gpus if g.open) * ks.kind.density * (0 if ks.exhausted else 1)
            for ks in self.kinds
        ]
        target = self.workers_target
        if target is None:
            target = round(sum(weights))
        budgets = _apportion(target, weights)
        for ks, budget in zip(self.kinds, budgets, strict=True):
            self.fill(ks, budget)
        # capacity a kind could not use flows to the kinds that still have room; when none has,
        # open the GPUs the layout left idle (the fragmented dev pool last, to keep its story)
        remaining = target - sum(ks.placed for ks in self.kinds)
        widen_order = sorted(self.kinds, key=lambda ks: ks.kind.pool == "dev")
        while remaining > 0:
            live = [ks for ks in self.kinds if not ks.exhausted]
            if not live:
                if not any(self.widen(ks) for ks in widen_order):
                    break
                continue
            shares = _apportion(remaining, [1.0] * len(live))
            for ks, share in zip(live, shares, strict=True):
                if share:
                    self.fill(ks, ks.placed + share)
            remaining = target - sum(ks.placed for ks in self.kinds)

    def widen(self, ks: _KindState) -> bool:
        """Open every GPU of the kind's busy nodes and allow one more worker per GPU (once per kind)."""
        if ks.widened:
            return False
        ks.widened = True
        for node in ks.nodes:
            if node.role not in _EMPTY_ROLES:
                for g in node.gpus:
                    g.open = not g.native
        ks.cap += 1
        ks.ring = [n for n in ks.nodes if any(g.open for g in n.gpus)]
        ks.cursor = 0
        ks.exhausted = not ks.ring
        return True

    def fill(self, ks: _KindState, budget: int) -> None:
        """Create workloads for one kind until `budget` workers are placed or no shape fits any more."""
        rng = self.rng
        kind = ks.kind
        failures = 0
        while ks.placed < budget and not ks.exhausted:
            shape = _pick(rng, tuple((s, s.weight) for s in kind.shapes))
            replicas = min(_pick(rng, kind.replicas), budget - ks.placed)
            profile = _pick(rng, kind.profiles)
            if profile == "bursty" and shape.lim_t * 10 < shape.req_t * 13:
                profile = "right-sized"  # a burst needs headroom between request and limit
            wl = _Workload(kind, shape, rng.choice(shape.namespaces), _pick(rng, kind.qos), profile)
            used: set[str] = set()
            for _ in range(replicas):
                gpus = self.find(ks, wl, used)
                if gpus is None:
                    break
                node = gpus[0].node
                worker = _Worker(wl, node, gpus)
                used.add(node.name)
                req_t, req_v = shape.req_t * 1000, shape.req_gi * GI
                for g in gpus:
                    g.avail_t -= req_t
                    g.avail_v -= req_v
                    g.count += 1
                    g.workers.append(worker)
                node.lim_t += shape.lim_t * 1000
                node.lim_v += shape.lim_gi * GI
                node.workers.append(worker)
                wl.workers.append(worker)
                ks.placed += 1
            if not wl.workers:
                failures += 1
                if failures >= 25:
                    ks.exhausted = True
                continue
            failures = 0
            self.finish_workload(wl)

    def find(self, ks: _KindState, wl: _Workload, used: set[str]) -> list[_Gpu] | None:
        """Next node on the kind's ring (round robin, so replicas spread) with room for one worker."""
        shape = wl.shape
        req_t, req_v = shape.req_t * 1000, shape.req_gi * GI
        lim_t, lim_v = shape.lim_t * 1000, shape.lim_gi * GI
        cap = ks.cap
        compact = ks.kind.pool == "training"
        ring = ks.ring
        tries = min(len(ring), 48)
        for _ in range(tries):
            if not ring:
                break
            i = ks.cursor % len(ring)
            node = ring[i]
            ks.cursor = i + 1
            if node.name in used and len(ring) > len(used):
                continue
            if node.lim_t + lim_t <= node.virt_t and node.lim_v + lim_v <= node.virt_v:
                fits = [
                    g
                    for g in node.gpus
                    if g.open and g.count < cap and g.avail_t >= req_t and g.avail_v >= req_v
                ]
                if len(fits) >= shape.gpu_count:
                    if compact:  # CompactFirst: the fullest GPU that fits
                        fits.sort(key=lambda g: (g.avail_v, g.avail_t, g.index))
                    else:  # LowLoadFirst / NodeCompactGPULowLoad within a node: the emptiest
                        fits.sort(key=lambda g: (-g.avail_v, -g.avail_t, g.index))
                    return sorted(fits[: shape.gpu_count], key=lambda g: g.index)
            if not any(
                g.open and g.count < cap and g.avail_t >= ks.min_t and g.avail_v >= ks.min_v
                for g in node.gpus
            ):  # nothing the kind's smallest shape could use: drop the node from the ring
                ring.pop(i)
                ks.cursor = i
        if not ring:
            ks.exhausted = True
        return None

    @staticmethod
    def whole_gpus(wl: _Workload) -> bool:
        """Whether every worker of `wl` is alone on its GPUs (what shared isolation needs)."""
        return all(len(g.workers) == 1 for w in wl.workers for g in w.gpus)

    def name_workload(self, wl: _Workload) -> str:
        taken = self.names.setdefault(wl.namespace, set())
        stems = wl.shape.stems
        stem = stems[self.rng.randrange(len(stems))]
        name = stem
        while name in taken:
            key = (wl.namespace, stem)
            n = self.stem_counter.get(key, 1) + 1
            self.stem_counter[key] = n
            name = f"{stem}-{n}"
        taken.add(name)
        return name

    def finish_workload(self, wl: _Workload) -> None:
        """Names, ages and knobs of a placed workload and its workers."""
        rng = self.rng
        wl.name = self.name_workload(wl)
        wl.uid = self.uid()
        if rng.random() < 0.12:
            wl.created = self.ago(rng.uniform(15 * 60, 110 * 60))
        else:
            wl.created = self.ago(3 * 3600 + (30 * 86400 - 3 * 3600) * rng.random() ** 2)
        wl.autoscale = rng.random() < (0.3 if wl.namespace == "research" else 0.12)
        if wl.kind.pool == "dev" and rng.random() < 0.15 and self.whole_gpus(wl):
            wl.isolation = "shared"  # a shared worker holds its whole GPU: nothing else may land there
            for w in wl.workers:
                for g in w.gpus:
                    g.avail_t = g.avail_v = 0
        r = rng.random()
        wl.pdb = "" if r < 0.1 else ("min" if r < 0.3 else "max1")
        latest = self.now - timedelta(seconds=60)
        for w in wl.workers:
            lo = max(wl.created, w.node.created + _SCHEDULABLE_AFTER)
            if lo >= latest:
                lo = min(lo, self.now - timedelta(seconds=10))
                w.created = lo
            elif rng.random() < 0.7:  # started with the workload
                w.created = min(lo + timedelta(seconds=rng.uniform(5, 600)), latest)
            else:  # rescheduled since
                w.created = lo + timedelta(seconds=rng.uniform(0, (latest - lo).total_seconds()))
            w.created = w.created.replace(microsecond=0)
            w.uid = self.uid()
            prefix = f"{wl.name}-tf-worker-"
            names = {x.name for x in wl.workers}
            name = prefix + self.suffix()
            while name in names:
                name = prefix + self.suffix()
            w.name = name
        self.workloads.append(wl)


# --------------------------------------------------------------------------------------------
# Object emission.
# --------------------------------------------------------------------------------------------


def _ready(ts: str, reason: str = "") -> JSON:
    cond: JSON = {"type": "Ready", "status": "True", "lastTransitionTime": ts}
    if reason:
        cond["reason"] = reason
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


class _Emitter:
    """Turns the placed state into Kubernetes-shaped dicts, summing every status from placements."""

    def __init__(self, b: _Builder) -> None:
        self.b = b
        self.now = b.now
        self.now_s = _ts(b.now)
        self.pool_defs = {p.name: p for p in _POOLS}
        self.kinds_by_pool: dict[str, list[_KindState]] = {}
        for ks in b.kinds:
            self.kinds_by_pool.setdefault(ks.kind.pool, []).append(ks)

    def pool_name(self, pool: str) -> str:
        return f"{CLUSTER_NAME}-{pool}"

    # -- pool spec -----------------------------------------------------------------------------

    def capacity(self, p: _PoolDef) -> JSON:
        kinds = self.kinds_by_pool.get(p.name, [])
        node_t = max((len(n.gpus) * self.b.gpu_info[ks.kind.key].tflops_milli for ks in kinds for n in ks.nodes[:1]),
                     default=0)  # fmt: skip
        node_v = max((len(n.gpus) * ks.kind.vram_mib * MI for ks in kinds for n in ks.nodes[:1]), default=0)
        total_t = sum(
            len(n.gpus) * self.b.gpu_info[ks.kind.key].tflops_milli for ks in kinds for n in ks.nodes
        )
        total_v = sum(len(n.gpus) * ks.kind.vram_mib * MI for ks in kinds for n in ks.nodes)

        def unit(t: float, v: float) -> JSON:
            return {
                "tflops": str(_nice_ceil(-(-int(t) // 1000))),
                "vram": f"{_nice_ceil(-(-int(v) // GI))}Gi",
            }

        return {
            "minResources": unit(node_t * p.min_nodes, node_v * p.min_nodes),
            "warmResources": unit(node_t * p.warm_nodes, node_v * p.warm_nodes),
            "maxResources": unit(max(total_t * p.max_factor, node_t), max(total_v * p.max_factor, node_v)),
            "oversubscription": {
                "tflopsOversellRatio": p.oversell,
                "vramExpandToHostMem": p.mem_pct,
                "vramExpandToHostDisk": p.disk_pct,
            },
        }

    def pool_spec(self, p: _PoolDef) -> JSON:
        kinds = self.kinds_by_pool.get(p.name, [])
        instance_types = sorted({ks.nodes[0].instance[0] for ks in kinds if ks.nodes})
        nmc: JSON = {
            "provisioningMode": p.mode,
            "defaultVendor": "NVIDIA",
            "defaultIsolationMode": "soft",
        }
        if p.mode == "AutoSelect":
            products = sorted({self.b.gpu_info[ks.kind.key].full_name.replace(" ", "-") for ks in kinds})
            nmc["nodeSelector"] = {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]},
                            {"key": "nvidia.com/gpu.product", "operator": "In", "values": products},
                        ]
                    }
                ]
            }
        elif p.mode == "Provisioned":
            nmc["nodeProvisioner"] = {
                "nodeClass": "a100-on-demand",
                "gpuRequirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": instance_types},
                    {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["us-east-1"]},
                ],
                "gpuNodeLabels": {f"{TF}/cluster": CLUSTER_NAME},
                "budget": {
                    "budgetPerDay": "2500",
                    "budgetPerMonth": "70000",
                    "budgetExceedStrategy": "AlertOnly",
                },
            }
        else:
            nmc["nodeProvisioner"] = {
                "karpenterNodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "version": "v1",
                    "name": "gpu-dev",
                },
                "gpuRequirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": instance_types},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
                ],
                "budget": {
                    "budgetPerDay": "300",
                    "budgetPerMonth": "8000",
                    "budgetExceedStrategy": "AlertOnly",
                },
            }
        compaction: JSON = {"period": p.period}
        if p.defrag is not None:
            compaction["defrag"] = dict(p.defrag)
        nmc["nodeCompaction"] = compaction
        qos_defs = [
            {"name": "low", "description": "notebooks and batch, first to be frozen", "priority": 10},
            {"name": "medium", "description": "default", "priority": 40},
            {"name": "high", "description": "user-facing serving", "priority": 70},
            {"name": "critical", "description": "revenue-critical serving", "priority": 100},
        ]
        pricing = [
            {
                "qos": q,
                "requests": {"perFP16TFlopsPerHour": "$0.0069228", "perGBOfVRAMPerHour": "$0.01548"},
                "limitsOverRequests": ratio,
            }
            for q, ratio in (("low", "0.3"), ("medium", "0.5"), ("high", "0.8"), ("critical", "1"))
        ]
        return {
            "capacityConfig": self.capacity(p),
            "nodeManagerConfig": nmc,
            "qosConfig": {
                "definitions": qos_defs,
                "defaultQoS": "low" if p.name == "dev" else "medium",
                "pricing": pricing,
                "evictionProtectionPriceRatio": "1.2",
            },
            "schedulingConfigTemplate": p.template,
        }

    # -- emission ------------------------------------------------------------------------------

    def emit(self) -> list[JSON]:
        b = self.b
        b.cluster_uid = b.uid()
        for p in _POOLS:
            b.pool_uids[p.name] = b.uid()
        templates = self.templates()
        claims: list[JSON] = []
        k8s_nodes: list[JSON] = []
        gpunodes: list[JSON] = []
        gpus: list[JSON] = []
        native: list[JSON] = []
        pool_sums: dict[str, dict[str, int]] = {p.name: dict.fromkeys(_SUM_KEYS, 0) for p in _POOLS}
        for ks in b.kinds:
            for node in ks.nodes:
                if ks.kind.pool != "inference":
                    claims.append(self.claim(node))
                k8s_nodes.append(self.k8s_node(node))
                node_obj, sums = self.gpunode(node)
                gpunodes.append(node_obj)
                acc = pool_sums[ks.kind.pool]
                for key in _SUM_KEYS:
                    acc[key] += sums[key]
                gpus.extend(self.gpu(g) for g in node.gpus)
                native.extend(self.native_pod(g) for g in node.gpus if g.native)
        pools = [self.pool(p, pool_sums[p.name]) for p in _POOLS]
        cluster = self.cluster(pool_sums)
        workloads: list[JSON] = []
        pods: list[JSON] = []
        pdbs: list[JSON] = []
        for wl in b.workloads:
            workloads.append(self.workload(wl))
            pods.extend(self.pods(wl))
            if wl.pdb:
                pdbs.append(self.pdb(wl))
        return [
            cluster,
            *templates,
            *pools,
            *claims,
            *k8s_nodes,
            *gpunodes,
            *gpus,
            *self.profiles(),
            *workloads,
            *pods,
            *native,
            *pdbs,
        ]

    def templates(self) -> list[JSON]:
        out = []
        for p in _POOLS:
            spec: JSON = {"placement": {"mode": p.placement, "allowUsingLocalGPU": True}}
            if p.name == "dev":
                spec["hypervisor"] = {
                    "autoFreezeAndResume": {
                        "autoFreeze": [
                            {"qos": "low", "freezeToMemTTL": "30m", "freezeToDiskTTL": "4h", "enable": False}
                        ]
                    }
                }
                spec["verticalScalingRules"] = [
                    {
                        "name": "notebooks-autoscale",
                        "selector": {"matchLabels": {"team": "research"}},
                        "autoScaling": {"autoSetResources": {"enable": True, "targetResource": "all"}},
                    }
                ]
            out.append(
                {
                    "apiVersion": TF_API,
                    "kind": "SchedulingConfigTemplate",
                    "metadata": {
                        "name": p.template,
                        "uid": self.b.uid(),
                        "creationTimestamp": _ts(self.now - timedelta(days=150)),
                        "generation": 1,
                    },
                    "spec": spec,
                }
            )
        return out

    def cluster(self, pool_sums: dict[str, dict[str, int]]) -> JSON:
        total = dict.fromkeys(_SUM_KEYS, 0)
        for sums in pool_sums.values():
            for key in _SUM_KEYS:
                total[key] += sums[key]
        created = _ts(self.now - timedelta(days=160))
        return {
            "apiVersion": TF_API,
            "kind": "TensorFusionCluster",
            "metadata": {
                "name": CLUSTER_NAME,
                "uid": self.b.cluster_uid,
                "creationTimestamp": created,
                "generation": 1,
            },
            "spec": {
                "gpuPools": [
                    {"name": p.name, "isDefault": p.is_default, "specTemplate": self.pool_spec(p)}
                    for p in _POOLS
                ],
                "computingVendor": {
                    "name": "aws-us-east-1",
                    "type": "aws",
                    "authType": "serviceAccountRole",
                    "enable": True,
                    "params": {
                        "defaultRegion": "us-east-1",
                        "iamRole": "arn:aws:iam::123456789012:role/tensor-fusion-provisioner",
                    },
                },
            },
            "status": {
                "phase": "Running",
                "conditions": [_ready(created, "AllPoolsReady")],
                "totalPools": len(_POOLS),
                "totalNodes": total["nodes"],
                "totalGPUs": total["gpus"],
                **capacity_status(total),
                "readyGPUPools": [self.pool_name(p.name) for p in _POOLS],
                "notReadyGPUPools": [],
                "retryCount": 0,
            },
        }

    def pool(self, p: _PoolDef, sums: dict[str, int]) -> JSON:
        name = self.pool_name(p.name)
        created = _ts(self.now - timedelta(days=160))
        status: JSON = {
            "cluster": CLUSTER_NAME,
            "phase": "Running",
            "conditions": [_ready(created, "PoolReady")],
            "totalNodes": sums["nodes"],
            "totalGPUs": sums["gpus"],
            "readyNodes": sums["nodes"],
            "notReadyNodes": 0,
            **capacity_status(sums),
            "runningAppsCnt": sums["pods"],
            "componentStatus": {
                "worker": TF_VERSION,
                "workerConfigSynced": True,
                "hypervisor": TF_VERSION,
                "hypervisorConfigSynced": True,
                "client": TF_VERSION,
                "clientConfigSynced": True,
            },
            "provisioningPhase": "None" if p.mode == "AutoSelect" else "Completed",
            "lastCompactionTime": _ts(self.now - timedelta(minutes=3)),
        }
        return {
            "apiVersion": TF_API,
            "kind": "GPUPool",
            "metadata": {
                "name": name,
                "uid": self.b.pool_uids[p.name],
                "creationTimestamp": created,
                "generation": 1,
                "labels": {f"{TF}/managed-by": CLUSTER_NAME},
                "annotations": {f"{TF}/is-default-pool": "true" if p.is_default else "false"},
                "ownerReferences": [_owner(TF_API, "TensorFusionCluster", CLUSTER_NAME, self.b.cluster_uid)],
            },
            "spec": self.pool_spec(p),
            "status": status,
        }

    def claim(self, node: _Node) -> JSON:
        b = self.b
        kind = node.kind
        pool = self.pool_name(kind.pool)
        node.claim = f"{pool}-{b.suffix()}"
        info = b.gpu_info[kind.key]
        karpenter = kind.pool == "dev"
        ref = (
            {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "version": "v1", "name": "gpu-dev"}
            if karpenter
            else {
                "group": "tensor-fusion.ai",
                "kind": "GPUNodeClass",
                "version": "v1",
                "name": "a100-on-demand",
            }
        )
        return {
            "apiVersion": TF_API,
            "kind": "GPUNodeClaim",
            "metadata": {
                "name": node.claim,
                "uid": b.uid(),
                "creationTimestamp": _ts(node.created - timedelta(seconds=95)),
                "generation": 1,
                "labels": {f"{TF}/managed-by": pool},
                "ownerReferences": [_owner(TF_API, "GPUPool", pool, b.pool_uids[kind.pool])],
            },
            "spec": {
                "nodeName": node.name,
                "region": "us-east-1",
                "zone": node.zone,
                "instanceType": node.instance[0],
                "nodeClassRef": ref,
                "capacityType": "Spot" if karpenter and node.index % 3 == 0 else "OnDemand",
                "tflopsOffered": format_tflops(info.tflops_milli * len(node.gpus)),
                "vramOffered": format_bytes(kind.vram_mib * MI * len(node.gpus)),
                "gpuDeviceOffered": len(node.gpus),
            },
            "status": {"phase": "Bound", "instanceID": self.instance_id(node)},
        }

    def instance_id(self, node: _Node) -> str:
        digest = uuid.uuid5(uuid.NAMESPACE_DNS, f"{node.name}.{self.b.cluster_uid}").hex
        return f"i-0{digest[:16]}"

    def k8s_node(self, node: _Node) -> JSON:
        kind = node.kind
        inst, vcpu, mem_gib, _ = node.instance
        info = self.b.gpu_info[kind.key]
        created = _ts(node.created)
        labels: JSON = {
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            "kubernetes.io/hostname": node.name,
            "node.kubernetes.io/instance-type": inst,
            "topology.kubernetes.io/region": "us-east-1",
            "topology.kubernetes.io/zone": node.zone,
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": info.full_name.replace(" ", "-"),
            "nvidia.com/gpu.count": str(len(node.gpus)),
            f"{TF}/hardware-vendor": "NVIDIA",
        }
        if kind.pool != "inference":
            labels[f"{TF}/cluster"] = CLUSTER_NAME
            labels[f"{TF}/pool-{self.pool_name(kind.pool)}"] = "true"
            labels[f"{TF}/node-provisioner"] = node.claim
        if kind.pool == "dev":
            labels["karpenter.sh/nodepool"] = "gpu-dev"
            labels["karpenter.sh/capacity-type"] = "spot" if node.index % 3 == 0 else "on-demand"
        if node.role == "empty_dnd_node":
            labels[f"{TF}/do-not-disrupt"] = "true"
        mem_ki = mem_gib * 1024 * 1024
        cap_mem = mem_ki - mem_gib * 1024 * 9  # firmware and kernel reservations
        alloc_mem = cap_mem - mem_gib * 1024 * 10 - 100 * 1024
        gpu_n = str(len(node.gpus))
        spec: JSON = {"providerID": f"aws:///{node.zone}/{self.instance_id(node)}"}
        if node.role == "cordoned":
            spec["unschedulable"] = True
            spec["taints"] = [
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "effect": "NoSchedule",
                    "timeAdded": _ts(self.now - timedelta(hours=5)),
                }
            ]
        ip = f"10.{20 + _KINDS.index(kind)}.{node.index // 250}.{node.index % 250 + 4}"
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node.name,
                "uid": self.b.uid(),
                "creationTimestamp": created,
                "labels": labels,
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": spec,
            "status": {
                "capacity": {
                    "cpu": str(vcpu),
                    "memory": f"{cap_mem}Ki",
                    "ephemeral-storage": f"{kind.disk // KI}Ki",
                    "pods": "250",
                    "nvidia.com/gpu": gpu_n,
                },
                "allocatable": {
                    "cpu": f"{vcpu * 1000 - 90 - vcpu * 5}m",
                    "memory": f"{alloc_mem}Ki",
                    "ephemeral-storage": str(kind.disk * 9 // 10),
                    "pods": "250",
                    "nvidia.com/gpu": gpu_n,
                },
                "conditions": [
                    {"type": t, "status": "False", "reason": f"KubeletHas{r}", "lastTransitionTime": created}
                    for t, r in (
                        ("MemoryPressure", "SufficientMemory"),
                        ("DiskPressure", "NoDiskPressure"),
                        ("PIDPressure", "SufficientPID"),
                    )
                ]
                + [_ready(created, "KubeletReady")],
                "addresses": [
                    {"type": "InternalIP", "address": ip},
                    {"type": "Hostname", "address": node.name},
                ],
                "nodeInfo": {
                    "kubeletVersion": "v1.32.9-eks-113cf36",
                    "containerRuntimeVersion": "containerd://1.7.27",
                    "osImage": "Amazon Linux 2023.8.20250915",
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                },
            },
        }

    def gpunode(self, node: _Node) -> tuple[JSON, dict[str, int]]:
        b = self.b
        kind = node.kind
        pool_def = self.pool_defs[kind.pool]
        pool = self.pool_name(kind.pool)
        info = b.gpu_info[kind.key]
        cap_t, cap_v = info.tflops_milli, kind.vram_mib * MI
        n = len(node.gpus)
        total_t, total_v = cap_t * n, cap_v * n
        avail_t = sum(g.avail_t for g in node.gpus)
        avail_v = sum(g.avail_v for g in node.gpus)
        virt_t = total_t * pool_def.oversell // 100
        virt_v = total_v + node.ram * pool_def.mem_pct // 100 + kind.disk * pool_def.disk_pct // 100
        lim_t = sum(w.workload.shape.lim_t * 1000 for w in node.workers)
        lim_v = sum(w.workload.shape.lim_gi * GI for w in node.workers)
        labels: JSON = {
            f"{TF}/managed-by": pool,
            f"{TF}/pool-{pool}": "true",
            f"{TF}/hardware-vendor": "NVIDIA",
        }
        if node.claim:
            labels[f"{TF}/node-provisioner"] = node.claim
        if node.role in ("dnd_busy", "empty_dnd"):
            labels[f"{TF}/do-not-disrupt"] = "true"
        created = node.created + timedelta(seconds=30)
        allocated = {g.name: [self.pod_gpu_info(w) for w in g.workers] for g in node.gpus if g.workers}
        node.uid = b.uid()
        sums = {
            "nodes": 1,
            "gpus": n,
            "total_t": total_t,
            "total_v": total_v,
            "avail_t": avail_t,
            "avail_v": avail_v,
            "virt_t": virt_t,
            "virt_v": virt_v,
            "vavail_t": virt_t - lim_t,
            "vavail_v": virt_v - lim_v,
            "pods": len(node.workers),
        }
        obj = {
            "apiVersion": TF_API,
            "kind": "GPUNode",
            "metadata": {
                "name": node.name,
                "uid": node.uid,
                "creationTimestamp": _ts(created),
                "generation": 1,
                "labels": labels,
                "ownerReferences": [_owner(TF_API, "GPUPool", pool, b.pool_uids[kind.pool])],
            },
            "spec": {"manageMode": pool_def.manage_mode, "costPerHour": _money(node.price)},
            "status": {
                "phase": "Running",
                "conditions": [_ready(_ts(created), "NodeReady")],
                **capacity_status(sums),
                "totalGPUs": n,
                "managedGPUs": n,
                "managedGPUDeviceIDs": [g.name for g in node.gpus],
                "nodeInfo": {"ramSize": str(node.ram), "dataDiskSize": str(kind.disk)},
                "hypervisorStatus": {
                    "hypervisorState": "Running",
                    "hypervisorVersion": TF_VERSION,
                    "lastHeartbeatTime": _ts(self.now - timedelta(seconds=17 + node.index % 40)),
                },
                "totalGPUPods": len(node.workers),
                "allocatedPods": allocated,
                "observedGeneration": 1,
            },
        }
        return obj, sums

    def pod_gpu_info(self, w: _Worker) -> JSON:
        wl = w.workload
        s = wl.shape
        return {
            "name": w.name,
            "namespace": wl.namespace,
            "uid": w.uid,
            "qos": wl.qos,
            "requests": _res(s.req_t * 1000, s.req_gi * GI),
            "limits": _res(s.lim_t * 1000, s.lim_gi * GI),
        }

    def gpu(self, g: _Gpu) -> JSON:
        b = self.b
        node = g.node
        kind = node.kind
        info = b.gpu_info[kind.key]
        pool = self.pool_name(kind.pool)
        apps: dict[tuple[str, str], list[JSON]] = {}
        for w in g.workers:
            apps.setdefault((w.workload.namespace, w.workload.name), []).append(self.pod_gpu_info(w))
        status: JSON = {
            "phase": "Running",
            "vendor": "NVIDIA",
            "model": info.model,
            "gpuModel": info.full_name,
            "uuid": g.name,
            "index": g.index,
            "numaNode": g.index // max(1, len(node.gpus) // 2),
            "capacity": _res(info.tflops_milli, kind.vram_mib * MI),
            "available": _res(g.avail_t, g.avail_v),
            "nodeSelector": {"kubernetes.io/hostname": node.name},
            "usedBy": "nvidia-device-plugin" if g.native else "tensor-fusion",
            "isolationMode": "soft",
            "message": "managed",
            "runningApps": [
                {"name": name, "namespace": ns, "count": len(pods), "pods": pods}
                for (ns, name), pods in apps.items()
            ],
        }
        return {
            "apiVersion": TF_API,
            "kind": "GPU",
            "metadata": {
                "name": g.name,
                "uid": b.uid(),
                "creationTimestamp": _ts(g.created),
                "labels": {f"{TF}/managed-by": node.name, f"{TF}/gpupool": pool},
                "annotations": {f"{TF}/last-sync": _ts(self.now - timedelta(seconds=30))},
                "ownerReferences": [_owner(TF_API, "GPUNode", node.name, node.uid)],
            },
            "status": status,
        }

    def native_pod(self, g: _Gpu) -> JSON:
        b = self.b
        node = g.node
        ns, stem = _NATIVE_PODS[b.rng.randrange(len(_NATIVE_PODS))]
        created = max(node.created + timedelta(minutes=5), self.now - timedelta(days=6))
        created = min(created + timedelta(seconds=b.rng.uniform(0, 3 * 86400)), self.now - timedelta(hours=3))
        created_s = _ts(created)
        gpu_res = {"nvidia.com/gpu": "1"}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{stem}-{b.suffix()}",
                "namespace": ns,
                "uid": b.uid(),
                "creationTimestamp": created_s,
                "labels": {"app": stem},
            },
            "spec": {
                "nodeName": node.name,
                "schedulerName": "default-scheduler",
                "containers": [
                    {
                        "name": stem,
                        "image": f"registry.example.com/{ns}/{stem}:1.4.2",
                        "resources": {
                            "requests": {"cpu": "4", "memory": "32Gi", **gpu_res},
                            "limits": {"cpu": "8", "memory": "64Gi", **gpu_res},
                        },
                    }
                ],
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
            "status": {
                "phase": "Running",
                "conditions": [_ready(created_s)],
                "startTime": created_s,
                "qosClass": "Burstable",
            },
        }

    def profiles(self) -> list[JSON]:
        """A few WorkloadProfiles: templates teams reference from their pods."""
        items = (
            ("llm-serving-h100", "ml-serving", "demo-inference", "high", 200, 40, 400, 48, 1, "H100"),
            ("vision-l40s", "vision", "demo-inference", "medium", 120, 16, 240, 24, 1, "L40S"),
            ("finetune-a100x2", "research", "demo-training", "medium", 300, 72, 312, 78, 2, ""),
            ("notebook-small", "research", "demo-dev", "low", 20, 4, 80, 12, 1, ""),
        )
        out = []
        for name, ns, pool, qos, rt, rv, lt, lv, count, model in items:
            spec: JSON = {
                "poolName": pool,
                "qos": qos,
                "gpuCount": count,
                "isolation": "soft",
                "resources": {"requests": _res(rt * 1000, rv * GI), "limits": _res(lt * 1000, lv * GI)},
            }
            if model:
                spec["gpuModel"] = model
            if name == "notebook-small":
                spec["autoScalingConfig"] = {"autoSetResources": {"enable": True, "targetResource": "all"}}
            out.append(
                {
                    "apiVersion": TF_API,
                    "kind": "WorkloadProfile",
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "uid": self.b.uid(),
                        "creationTimestamp": _ts(self.now - timedelta(days=90)),
                        "generation": 1,
                    },
                    "spec": spec,
                }
            )
        return out

    def workload(self, wl: _Workload) -> JSON:
        s = wl.shape
        n = len(wl.workers)
        created = _ts(wl.created)
        spec: JSON = {
            "replicas": n,
            "poolName": self.pool_name(wl.kind.pool),
            "qos": wl.qos,
            "gpuCount": s.gpu_count,
            "isolation": wl.isolation,
            "resources": {
                "requests": _res(s.req_t * 1000, s.req_gi * GI),
                "limits": _res(s.lim_t * 1000, s.lim_gi * GI),
            },
        }
        if wl.kind.family:
            spec["gpuModel"] = wl.kind.family
        if wl.autoscale:
            spec["autoScalingConfig"] = {
                "autoSetResources": {"enable": True, "targetResource": "all", "historyDataPeriod": "2h"}
            }
        return {
            "apiVersion": TF_API,
            "kind": "TensorFusionWorkload",
            "metadata": {
                "name": wl.name,
                "namespace": wl.namespace,
                "uid": wl.uid,
                "creationTimestamp": created,
                "generation": 1,
                "labels": {"app.kubernetes.io/name": wl.name, f"{TF}/gpupool": self.pool_name(wl.kind.pool)},
                "annotations": {PROFILE_ANNOTATION: wl.profile},
            },
            "spec": spec,
            "status": {
                "phase": "Running",
                "conditions": [_ready(_ts(max(w.created for w in wl.workers)), "WorkloadReady")],
                "workerCount": n,
                "readyWorkers": n,
                "podTemplateHash": wl.uid[:8],
            },
        }

    def pods(self, wl: _Workload) -> list[JSON]:
        """The workload's worker pods; what they share is formatted once per workload."""
        s = wl.shape
        pool = self.pool_name(wl.kind.pool)
        annotations: JSON = {
            f"{TF}/gpupool": pool,
            f"{TF}/qos": wl.qos,
            f"{TF}/gpu-count": str(s.gpu_count),
            f"{TF}/tflops-request": format_tflops(s.req_t * 1000),
            f"{TF}/tflops-limit": format_tflops(s.lim_t * 1000),
            f"{TF}/vram-request": format_bytes(s.req_gi * GI),
            f"{TF}/vram-limit": format_bytes(s.lim_gi * GI),
            f"{TF}/isolation": wl.isolation,
        }
        if wl.kind.family:
            annotations[f"{TF}/gpu-model"] = wl.kind.family
        labels = {
            f"{TF}/component": "worker",
            f"{TF}/workload": wl.name,
            f"{TF}/gpupool": pool,
            f"{TF}/pod-template-hash": wl.uid[:8],
        }
        owner = _owner(TF_API, "TensorFusionWorkload", wl.name, wl.uid)
        image = f"tensorfusion/tensor-fusion-worker:{TF_VERSION}"
        out = []
        for w in wl.workers:
            created = _ts(w.created)
            started = _ts(w.created + _START_DELAY)
            ready = _ts(w.created + _READY_DELAY)
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": w.name,
                        "generateName": f"{wl.name}-tf-worker-",
                        "namespace": wl.namespace,
                        "uid": w.uid,
                        "creationTimestamp": created,
                        "labels": dict(labels),
                        "annotations": _with(annotations, f"{TF}/gpu-ids", ",".join(g.name for g in w.gpus)),
                        "ownerReferences": [dict(owner)],
                        "finalizers": [f"{TF}/finalizer"],
                    },
                    "spec": {
                        "nodeName": w.node.name,
                        "schedulerName": "tensor-fusion-scheduler",
                        "restartPolicy": "Always",
                        "containers": [
                            {
                                "name": "tensorfusion-worker",
                                "image": image,
                                "resources": {
                                    "requests": {"cpu": "1", "memory": "4Gi"},
                                    "limits": {"cpu": "8", "memory": "32Gi"},
                                },
                            }
                        ],
                    },
                    "status": {
                        "phase": "Running",
                        "conditions": [
                            {"type": "PodScheduled", "status": "True", "lastTransitionTime": created},
                            {"type": "Initialized", "status": "True", "lastTransitionTime": started},
                            {"type": "ContainersReady", "status": "True", "lastTransitionTime": ready},
                            {"type": "Ready", "status": "True", "lastTransitionTime": ready},
                        ],
                        "startTime": started,
                        "qosClass": "Burstable",
                        "containerStatuses": [
                            {
                                "name": "tensorfusion-worker",
                                "ready": True,
                                "started": True,
                                "restartCount": 0,
                                "image": image,
                                "state": {"running": {"startedAt": started}},
                            }
                        ],
                    },
                }
            )
        return out

    def pdb(self, wl: _Workload) -> JSON:
        n = len(wl.workers)
        spec: JSON = {"selector": {"matchLabels": {f"{TF}/workload": wl.name}}}
        if wl.pdb == "min":
            desired = max(1, n - 1)
            spec["minAvailable"] = desired
        else:
            desired = max(0, n - 1)
            spec["maxUnavailable"] = 1
        healthy = n  # every demo worker is Ready
        allowed = max(0, healthy - desired)
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "name": f"{wl.name}-pdb",
                "namespace": wl.namespace,
                "uid": self.b.uid(),
                "creationTimestamp": _ts(wl.created),
                "generation": 1,
                "labels": {f"{TF}/workload": wl.name},
            },
            "spec": spec,
            "status": {
                "observedGeneration": 1,
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "expectedPods": n,
                "disruptionsAllowed": allowed,
                "conditions": [
                    {
                        "type": "DisruptionAllowed",
                        "status": "True" if allowed else "False",
                        "reason": "SufficientPods" if allowed else "InsufficientPods",
                        "lastTransitionTime": _ts(wl.created),
                    }
                ],
            },
        }


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


def generate_objects(
    seed: int = 7,
    nodes: int = 40,
    now: datetime | None = None,
    *,
    gpus_per_node: int | None = None,
    workers: int | None = None,
    isolation: bool = True,
) -> list[dict[str, Any]]:
    """Build the demo installation: same arguments → byte-identical JSON.

    `gpus_per_node` overrides every node kind's GPU count; `workers` sets the number of worker pods
    (default: what the layout holds at demo density, ~250 for 40 nodes). Fewer are produced only if
    the GPUs cannot hold them without over-allocation. Neither applies to the isolation pool (three
    nodes, 13 workers), added unless `isolation` is False.
    """
    b = _Builder(seed, nodes, now or DEFAULT_NOW, gpus_per_node, workers)
    # Hundreds of thousands of small dicts, none cyclic: the cyclic collector would rescan the growing
    # heap over and over (more than half the run time at 5000 nodes), so pause it while building.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        b.build_nodes()
        b.place_all()
        objects = _Emitter(b).emit()
        if isolation:
            _add_isolation_pool(objects, b)
        return objects
    finally:
        if was_enabled:
            gc.enable()


def _add_isolation_pool(objects: list[JSON], b: _Builder) -> None:
    """Append the isolation pool and fold it into the TensorFusionCluster's spec and status."""
    iso = isolation_pool(b.rng_seed, b.now, CLUSTER_NAME, b.cluster_uid)
    cluster = objects[0]
    cluster["spec"]["gpuPools"].append(iso.pool_entry)
    status = cluster["status"]
    totals = {"nodes": status["totalNodes"], "gpus": status["totalGPUs"]}
    for key, field in (("total_t", "totalTFlops"), ("avail_t", "availableTFlops"),
                       ("virt_t", "virtualTFlops"), ("vavail_t", "virtualAvailableTFlops")):  # fmt: skip
        totals[key] = parse_quantity(status[field]).milli_value()
    for key, field in (("total_v", "totalVRAM"), ("avail_v", "availableVRAM"),
                       ("virt_v", "virtualVRAM"), ("vavail_v", "virtualAvailableVRAM")):  # fmt: skip
        totals[key] = parse_quantity(status[field]).value()
    for key, v in iso.sums.items():
        if key in totals:
            totals[key] += v
    status.update(capacity_status(totals))
    status["totalNodes"], status["totalGPUs"] = totals["nodes"], totals["gpus"]
    status["totalPools"] += 1
    status["readyGPUPools"] = [*status["readyGPUPools"], f"{CLUSTER_NAME}-{iso.pool_entry['name']}"]
    for kind in (
        "SchedulingConfigTemplate",
        "GPUPool",
        "ProviderConfig",
        "ConfigMap",
        "Node",
        "GPUNode",
        "GPU",
        "TensorFusionWorkload",
        "Pod",
        "PodDisruptionBudget",
        "GPUResourceQuota",
    ):
        objects.extend(iso.by_kind.get(kind, ()))


class SimCluster:
    """`ClusterPort` over the generated demo objects (built once, at construction)."""

    def __init__(
        self,
        seed: int = 7,
        nodes: int = 40,
        now: datetime | None = None,
        *,
        gpus_per_node: int | None = None,
        workers: int | None = None,
    ) -> None:
        self.seed = seed
        self.now = as_utc(now or DEFAULT_NOW).replace(microsecond=0)
        self._objects = generate_objects(seed, nodes, self.now, gpus_per_node=gpus_per_node, workers=workers)

    def describe(self) -> str:
        """Always `demo`: the header shows the embedded cluster."""
        return "demo"

    def snapshot(self) -> list[dict[str, Any]]:
        """The objects (a new list; the dicts are shared, so treat them as read-only)."""
        return list(self._objects)
