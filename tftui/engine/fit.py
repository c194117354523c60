"""Shared placement arithmetic: the request of a worker, the GPU filter chain and the scores.

Placement previews, the defrag simulation and the demo's simulated scheduler all decide "does this
GPU fit and how good is it" the same way (docs/behaviour.md P2); keeping it in one module keeps
them from drifting apart. Pure functions; availability (and the partitions a simulation assumed) is
passed in so simulations can work on copies without touching `ClusterState`.

The filter chain runs in the controller's order: isolation policy (`engine.isolation`), phase,
used-by, index, isolation support and shared whole-GPU, the partition filter, resources, model,
vendor, then — checked by the controller only when it reserves the chosen GPU — whether the
partition itself fits (`engine.partitions`).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tftui.engine import partitions
from tftui.engine.isolation import mode_reject, policy_reject
from tftui.engine.state import GPUView, PartitionUse, Res, WorkerView
from tftui.model import keys
from tftui.model.isolation import MODES as ISOLATION_MODES
from tftui.model.isolation import PARTITIONED, SHARED
from tftui.model.provider import ProviderCatalog
from tftui.model.quantity import QuantityError, quantity_float

Mode = Literal["CompactFirst", "LowLoadFirst", "NodeCompactGPULowLoad"]
MODES: tuple[Mode, ...] = ("CompactFirst", "LowLoadFirst", "NodeCompactGPULowLoad")
DEFAULT_MODE: Mode = "NodeCompactGPULowLoad"
MAX_GPU_COUNT = 128
USED_BY_TF = "tensor-fusion"


def resolve_mode(value: str | None) -> Mode:
    """P1, as upstream: anything but CompactFirst or LowLoadFirst (incl. empty) is the default mode."""
    if value == "CompactFirst":
        return "CompactFirst"
    if value == "LowLoadFirst":
        return "LowLoadFirst"
    return DEFAULT_MODE


@dataclass(frozen=True, slots=True)
class Weights:
    """Score weights (scheduler plugin args upstream; tftui settings `placement.*Weight`)."""

    vram: float = 0.7
    tflops: float = 0.3


DEFAULT_WEIGHTS = Weights()
DEFRAG_WEIGHTS = Weights(0.5, 0.5)


class RequestError(ValueError):
    """A request that can never be placed as written (names the field)."""


@dataclass(frozen=True, slots=True)
class Request:
    """Per-device request of one worker (S1): TFLOPS or compute %, VRAM, device count."""

    vram: float
    tflops: float | None = None
    compute_percent: float | None = None
    count: int = 1
    model: str | None = None
    vendor: str | None = None
    isolation: str = "soft"
    indices: tuple[int, ...] = ()
    partition: str = ""  # partition template (id or name) of a partitioned request
    namespace: str = ""  # for the namespace's GPUResourceQuota ("": none applies)
    limit_tflops: float | None = None  # per device; None: the request (for the quota's limits)
    limit_vram: float | None = None

    def __post_init__(self) -> None:
        if (self.tflops is None) == (self.compute_percent is None):
            raise RequestError("exactly one of tflops and compute percent must be given")
        if self.isolation not in ISOLATION_MODES:
            raise RequestError(
                f"isolation must be one of {', '.join(ISOLATION_MODES)}, got {self.isolation!r}"
            )
        if self.partition and self.isolation != PARTITIONED:
            raise RequestError("a partition template needs isolation partitioned")
        if not 1 <= self.count <= MAX_GPU_COUNT:
            raise RequestError(f"gpu count must be 1..{MAX_GPU_COUNT}, got {self.count}")
        if self.vram < 0 or (self.tflops or 0) < 0 or not 0 <= (self.compute_percent or 0) <= 100:
            raise RequestError("requests must be non-negative (compute percent 0..100)")

    def tflops_on(self, capacity_tflops: float) -> float:
        """TFLOPS this request takes from a GPU; compute % is converted and truncated (upstream)."""
        if self.compute_percent is not None:
            return float(math.trunc(self.compute_percent * capacity_tflops / 100))
        return self.tflops or 0.0

    def take(self, gpu_capacity: Res) -> Res:
        """What one device of this request subtracts from a GPU's availability (a partition's
        template is `take_on`'s business: it depends on the GPU's model)."""
        if self.isolation == SHARED:
            return gpu_capacity.copy()
        return Res(self.tflops_on(gpu_capacity.tflops), self.vram)

    def take_on(self, gpu: GPUView, catalog: ProviderCatalog) -> Res:
        """What one device of this request takes from `gpu`: a partition books its template."""
        if self.partition:
            hw = catalog.model(gpu.model)
            t = hw.template(self.partition) if hw is not None else None
            if t is not None:
                return Res(*t.resources(gpu.capacity.tflops))
        return self.take(gpu.capacity)

    @property
    def limits(self) -> tuple[float | None, float]:
        """Per-device limits (TFLOPS or None for a compute percent, VRAM), the request's by default."""
        t = self.limit_tflops if self.limit_tflops is not None else self.tflops
        return t, self.limit_vram if self.limit_vram is not None else self.vram

    @classmethod
    def of_worker(cls, worker: WorkerView) -> Request:
        """The request a worker pod carries (annotations), for re-placing it elsewhere."""
        ann: dict[str, Any] = (worker.obj.get("metadata") or {}).get("annotations") or {}
        pct = ann.get(keys.COMPUTE_PERCENT_REQUEST)
        compute: float | None = None
        if pct and not ann.get(keys.TFLOPS_REQUEST):
            try:
                compute = quantity_float(pct)
            except QuantityError:
                compute = None
        indices: tuple[int, ...] = ()
        raw_idx = ann.get(keys.GPU_INDICES, "")
        if raw_idx:
            indices = tuple(int(x) for x in re.findall(r"\d+", raw_idx))
        isolation = worker.isolation if worker.isolation in ISOLATION_MODES else "soft"
        return cls(
            vram=worker.request.vram,
            tflops=None if compute is not None else worker.request.tflops,
            compute_percent=compute,
            count=max(1, min(worker.gpu_count, MAX_GPU_COUNT)),
            model=ann.get(keys.GPU_MODEL) or None,
            vendor=ann.get(keys.VENDOR) or None,
            isolation=isolation,
            indices=indices,
            partition=worker.partition if isolation == PARTITIONED else "",
            namespace=worker.namespace,
            limit_tflops=None if compute is not None else worker.limit.tflops,
            limit_vram=worker.limit.vram,
        )


def model_matches(wanted: str, gpu: GPUView) -> bool:
    """Exact `gpuModel` (upstream), or — tftui deviation — the short family name inside it.

    Workloads commonly say `H100` while GPUs report `NVIDIA H100 80GB HBM3`; upstream's exact match
    would make such requests unplaceable, which no operator intends.
    """
    reported = (gpu.obj.get("status") or {}).get("model")
    if wanted == gpu.model or wanted == reported:
        return True
    return _family_in(wanted, gpu.model)


@functools.lru_cache(maxsize=4096)
def _family_in(wanted: str, model: str) -> bool:
    """`wanted` is one of the words of `model` (memoized: every candidate GPU asks it per request)."""
    return wanted.upper() in re.split(r"[\s_-]+", model.upper())


_NO_CATALOG = ProviderCatalog()


def reject_reason(
    gpu: GPUView,
    available: Res,
    req: Request,
    catalog: ProviderCatalog = _NO_CATALOG,
    uses: Sequence[PartitionUse] | None = None,
) -> str | None:
    """The first of upstream's per-GPU filters (P2) the GPU fails, or None if it passes them all.

    `uses`: the GPU's partitions when a simulation assumed more than the state holds."""
    if (why := policy_reject(gpu, req.isolation)) is not None:
        return why
    if gpu.phase != "Running":
        return "phase"
    if gpu.used_by not in ("", USED_BY_TF):
        return "used-by"
    if req.indices and (gpu.index is None or gpu.index not in req.indices):
        return "index"
    parts = gpu.partitions if uses is None else uses
    if (why := mode_reject(gpu, available, req.isolation, bool(parts))) is not None:
        return why
    if req.isolation == PARTITIONED and (
        why := partitions.template_reject(catalog, gpu, req.partition, len(parts))
    ):
        return why
    if available.tflops < req.tflops_on(gpu.capacity.tflops) or available.vram < req.vram:
        return "resource"
    if req.model and not model_matches(req.model, gpu):
        return "model"
    if req.vendor and gpu.vendor != req.vendor:
        return "vendor"
    if req.partition:
        hw = catalog.model(gpu.model)
        t = hw.template(req.partition) if hw is not None else None
        if t is None:
            return "partition-template"
        fit = partitions.fits(catalog, gpu, t, available, parts)
        if fit is not None:
            return fit.reason
    return None


def _round_half_away(x: float) -> int:
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def score(vram_pct: float, tflops_pct: float, w: Weights) -> int:
    """The scheduler's GPU score S(x, y) (P2): weighted, rounded half away from zero, clamped to 0..100."""
    value = w.vram * vram_pct + w.tflops * tflops_pct
    if math.isnan(value):
        return 0
    return max(0, min(100, _round_half_away(value)))


def _pcts(capacity: Res, available: Res) -> tuple[float, float]:
    """Available share (VRAM %, TFLOPS %); capacity 0 counts as 0 % (Go's NaN clamps to 0)."""
    v = available.vram / capacity.vram * 100 if capacity.vram > 0 else math.nan
    t = available.tflops / capacity.tflops * 100 if capacity.tflops > 0 else math.nan
    return v, t


def node_level_score(mode: Mode, capacity: Res, available: Res, w: Weights = DEFAULT_WEIGHTS) -> int:
    """Score of one GPU when ranking nodes: packing modes prefer used GPUs, LowLoadFirst free ones."""
    return _level_score(mode, True, capacity.tflops, capacity.vram, available.tflops, available.vram, w)


def gpu_level_score(mode: Mode, capacity: Res, available: Res, w: Weights = DEFAULT_WEIGHTS) -> int:
    """Score of one GPU when choosing GPUs inside the chosen node."""
    return _level_score(mode, False, capacity.tflops, capacity.vram, available.tflops, available.vram, w)


@functools.lru_cache(maxsize=1 << 16)
def _level_score(
    mode: Mode, node_level: bool, cap_t: float, cap_v: float, av_t: float, av_v: float, w: Weights
) -> int:
    """Both scores, memoized: a pure function of a few numbers that placement and the defrag
    simulation evaluate for every GPU of every candidate node, over and over for the same figures."""
    av, at = _pcts(Res(cap_t, cap_v), Res(av_t, av_v))
    if math.isnan(av) or math.isnan(at):
        return 0
    if node_level:
        if mode == "LowLoadFirst":
            return score(av, at, w)
        return score(100 - av, 100 - at, w)
    if mode == "CompactFirst":
        return score(100 - av, 100 - at, w)
    return score(av, at, w)
