"""ProviderConfig: what each hardware vendor's catalogue tells tftui (model, price, partitions, plugins).

TensorFusion keeps one ProviderConfig per vendor (`spec.vendor`). Three parts of it change
decisions tftui previews or makes:

- `inUseResourceNames`: the extended resources of that vendor's own device plugin
  (`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`, `huawei.com/Ascend310P`, ...). A pod that is not a
  TensorFusion worker and asks for any of them uses GPUs outside TensorFusion, which protects its
  node from defrag. Without any ProviderConfig the controller falls back to a short fixed list;
  tftui falls back to `keys.NATIVE_GPU_RESOURCES`.
- `hardwareMetadata[].costPerHour`: hourly prices keyed by the NVML full name (`GPU.status.gpuModel`);
  the controller merges them over the legacy price table, so they win where both name a model.
- `virtualizationTemplates` referenced by `hardwareMetadata[].partitionTemplateRefs`: the hardware
  partitions (MIG profiles, Ascend vNPU templates) a GPU model can be cut into, and what each takes.

Lookups use the exact strings the controller indexes by (the short `model` and the `fullModelName`);
a template is found by its id, by its name, or by the loose spelling the controller also accepts
(`mig-1g-10gb` for `1g.10gb`). Parsing never raises: values that do not parse are left out and
reported in `problems`, so one bad catalogue entry cannot stop the console.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tftui.model import keys
from tftui.model.quantity import QuantityError, quantity_float

GIB = 1 << 30
DEFAULT_MAX_PARTITIONS = 7  # the partition filter's and the MIG strategy's default per GPU
DEFAULT_ISOLATION_GROUPS = 4  # Ascend vGroups per NPU when the catalogue does not say
SHARED_GROUP = "shared"


@dataclass(frozen=True, slots=True)
class PartitionTemplate:
    """One hardware partition profile (a `virtualizationTemplates` entry)."""

    id: str
    name: str
    memory_gib: int
    compute_percent: float
    max_instances: int = 0  # per GPU; 0 = no limit of its own
    placement_limit: tuple[int, ...] = ()  # MIG start slots, in the order they are tried
    placement_offset: int = 0  # MIG slots one instance occupies
    extended: Mapping[str, int] = field(default_factory=dict)  # Ascend AICORE, AICPU, ...
    group_sharing: str = "exclusive"  # Ascend: "shared" templates may share one vGroup
    per_group: int = 0  # Ascend: partitions of a shared template per vGroup (0: the default 2)

    @property
    def label(self) -> str:
        """How people name it: the vendor's profile name (`1g.10gb`), else the id."""
        return self.name or self.id

    def resources(self, capacity_tflops: float) -> tuple[float, float]:
        """(TFLOPS, VRAM bytes) the partition takes on a GPU of `capacity_tflops`: compute % of the
        capacity rounded to two decimals and `memoryGigabytes` GiB, as the controller books it."""
        return round(self.compute_percent * capacity_tflops / 100.0, 2), float(self.memory_gib * GIB)


@dataclass(frozen=True, slots=True)
class HardwareModel:
    """One `hardwareMetadata` entry with its templates resolved."""

    vendor: str
    model: str
    full_name: str
    price_per_hour: float | None
    fp16_tflops: float | None
    max_partitions: int
    max_slots: int
    max_groups: int
    extended_total: Mapping[str, int]
    templates: tuple[PartitionTemplate, ...]

    def template(self, requested: str) -> PartitionTemplate | None:
        """The template `requested` names (id, name, or the same spelled loosely), else None."""
        for t in self.templates:
            if requested in (t.id, t.name):
                return t
        return next((t for t in self.templates if template_matches(t, requested)), None)


def _canonical(value: str) -> str:
    out = re.sub(r"[._ /]", "-", value.strip().lower())
    out = re.sub(r"-{2,}", "-", out)
    return out.strip("-")


def template_matches(t: PartitionTemplate, requested: str) -> bool:
    """The controller's loose match: case and separators ignored, an optional `mig-` prefix."""
    req = requested.strip()
    if not req:
        return False
    if req.lower() in (t.id.strip().lower(), t.name.strip().lower()):
        return True
    canon = _canonical(req)
    if not canon:
        return False
    for own in (_canonical(t.name), _canonical(t.id)):
        if own and (canon in (own, "mig-" + own) or canon.removeprefix("mig-") == own):
            return True
    return False


def _num(value: Any) -> float | None:
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        return quantity_float(value)
    except (QuantityError, TypeError, ValueError):
        return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass(frozen=True, slots=True)
class ProviderCatalog:
    """Every ProviderConfig of a snapshot, indexed. Empty when the cluster has none."""

    models: Mapping[str, HardwareModel] = field(default_factory=dict)  # by `model` and `fullModelName`
    in_use: tuple[str, ...] = ()  # device-plugin resource names of every vendor, first seen first
    vendors: tuple[str, ...] = ()
    problems: tuple[tuple[str, str], ...] = ()  # (object ref, message)

    @classmethod
    def of(cls, providers: Iterable[Mapping[str, Any]]) -> ProviderCatalog:
        """Index ProviderConfigs; for one vendor named twice, the later object (by name) wins."""
        by_vendor: dict[str, Mapping[str, Any]] = {}
        problems: list[tuple[str, str]] = []
        for p in sorted(providers, key=lambda o: str((o.get("metadata") or {}).get("name", ""))):
            spec = p.get("spec") or {}
            vendor = str(spec.get("vendor") or "")
            ref = f"ProviderConfig {(p.get('metadata') or {}).get('name')}"
            if not vendor:
                problems.append((ref, "spec.vendor: not set, ProviderConfig ignored"))
                continue
            if vendor in by_vendor:
                problems.append(
                    (ref, f"spec.vendor: {vendor!r} is also configured by another ProviderConfig")
                )
            by_vendor[vendor] = p
        models: dict[str, HardwareModel] = {}
        in_use: list[str] = []
        for vendor in sorted(by_vendor):
            p = by_vendor[vendor]
            spec = p.get("spec") or {}
            ref = f"ProviderConfig {(p.get('metadata') or {}).get('name')}"
            templates: dict[str, PartitionTemplate] = {}
            for i, raw in enumerate(spec.get("virtualizationTemplates") or ()):
                t = _template(raw)
                if t is None:
                    problems.append((ref, f"spec.virtualizationTemplates[{i}]: no id or computePercent"))
                    continue
                templates[t.id] = t
            for i, hw in enumerate(spec.get("hardwareMetadata") or ()):
                name, full = str(hw.get("model") or ""), str(hw.get("fullModelName") or "")
                if not name and not full:
                    problems.append((ref, f"spec.hardwareMetadata[{i}]: no model"))
                    continue
                price = _num(hw.get("costPerHour"))
                if hw.get("costPerHour") not in (None, "") and price is None:
                    problems.append((ref, f"spec.hardwareMetadata[{i}].costPerHour: not a number"))
                refs = [str(r) for r in hw.get("partitionTemplateRefs") or ()]
                model = HardwareModel(
                    vendor=vendor,
                    model=name,
                    full_name=full,
                    price_per_hour=price,
                    fp16_tflops=_num(hw.get("fp16TFlops")),
                    max_partitions=_int(hw.get("maxPartitions")),
                    max_slots=_int(hw.get("maxPlacementSlots")),
                    max_groups=_int(hw.get("maxIsolationGroups")),
                    extended_total={
                        str(k): v
                        for k, v in (hw.get("totalExtendedResources") or {}).items()
                        if isinstance(v, int) and not isinstance(v, bool)
                    },
                    templates=tuple(templates[r] for r in refs if r in templates),
                )
                for key in (name, full):
                    if key:
                        models[key] = model
            for r in spec.get("inUseResourceNames") or ():
                if isinstance(r, str) and r and r not in in_use:
                    in_use.append(r)
        return cls(models, tuple(in_use), tuple(sorted(by_vendor)), tuple(problems))

    def model(self, gpu_model: str) -> HardwareModel | None:
        """The catalogue entry of a GPU's `status.gpuModel` (or its short model name)."""
        return self.models.get(gpu_model) if gpu_model else None

    def native_resources(self) -> tuple[str, ...]:
        """Resource names that mean "uses GPUs outside TensorFusion"."""
        return self.in_use or keys.NATIVE_GPU_RESOURCES

    def prices(self, base: Mapping[str, float]) -> dict[str, float]:
        """`base` (full model name → $/h per GPU) with the catalogue's prices laid over it."""
        out = dict(base)
        for key, m in self.models.items():
            if key == m.full_name and m.price_per_hour is not None:
                out[key] = m.price_per_hour
        return out


def _template(raw: Mapping[str, Any]) -> PartitionTemplate | None:
    tid = str(raw.get("id") or "")
    pct = _num(raw.get("computePercent"))
    if not tid or pct is None:
        return None
    limit = tuple(int(x) for x in raw.get("placementLimit") or () if isinstance(x, int) and x >= 0)
    mem = raw.get("memoryGigabytes")
    return PartitionTemplate(
        id=tid,
        name=str(raw.get("name") or ""),
        memory_gib=mem if isinstance(mem, int) and not isinstance(mem, bool) and mem >= 0 else 0,
        compute_percent=pct,
        max_instances=_int(raw.get("maxInstances")),
        placement_limit=limit,
        placement_offset=_int(raw.get("placementOffset")),
        extended={str(k): v for k, v in (raw.get("extendedResources") or {}).items() if isinstance(v, int)},
        group_sharing=str(raw.get("isolationGroupSharing") or "exclusive"),
        per_group=_int(raw.get("maxPartitionsPerIsolationGroup")),
    )
