"""Hardware partitions (NVIDIA/PPU MIG, Ascend vNPU): whether one more fits on a GPU, and which.

A partitioned worker names a template of its GPU model's catalogue (ProviderConfig
`virtualizationTemplates`, see `model.provider`) and books that template's resources, not its own
request. Whether a GPU can take one more follows the controller's partition filter and the vendor's
partition strategy:

- the model must offer the template; the GPU holds fewer partitions than the model's
  `maxPartitions` (7 when unset) and fewer of this template than its `maxInstances`;
- NVIDIA and PPU (MIG): the template's `placementOffset` slots from one of its `placementLimit` start
  slots must be free; slots recorded in the GPU's `status.allocatedPartitions` are taken, and
  partitions without a recorded slot take the first free start of their template, in worker order
  (the controller orders those by allocation time);
- Ascend: an isolation group (vGroup, `maxIsolationGroups`, 4 when unset) must be free, or, for a
  template shared per group, one holding only that template below `maxPartitionsPerIsolationGroup`
  (2 when unset); the extended resources (AICORE, ...) of all partitions stay within the model's;
- other vendors cannot be partitioned;
- the GPU has the template's compute share and memory available.

Deviation (README): the controller checks the last three only when reserving the GPU it already
picked, so a pod can fail after placement; tftui filters on them, so the preview picks a GPU that
can take the partition.

A partitioned request without a template takes the template that fits its request with the least
waste over the candidate GPUs (compute weighted 0.6, memory 0.4), as the scheduler's pre-filter does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tftui.engine.state import GPUView, PartitionUse, Res
from tftui.model.provider import (
    DEFAULT_ISOLATION_GROUPS,
    DEFAULT_MAX_PARTITIONS,
    SHARED_GROUP,
    HardwareModel,
    PartitionTemplate,
    ProviderCatalog,
)

MIG_VENDORS = frozenset({"NVIDIA", "PPU", "Example"})
ASCEND = "Ascend"
DEFAULT_PER_GROUP = 2
TFLOPS_WEIGHT, VRAM_WEIGHT = 0.6, 0.4  # the pre-filter's template-matching weights


@dataclass(frozen=True, slots=True)
class Fit:
    """Why a partition does not fit a GPU (`reason` is a placement stage), with a detail line."""

    reason: str
    detail: str


def _template_of(hw: HardwareModel | None, use: PartitionUse) -> PartitionTemplate | None:
    return hw.template(use.template) if hw is not None else None


def template_reject(catalog: ProviderCatalog, gpu: GPUView, wanted: str, held: int) -> str | None:
    """The partition filter's template and count checks ("partition-template", "partition-full");
    `held`: partitions the GPU holds."""
    hw = catalog.model(gpu.model)
    if wanted and (hw is None or hw.template(wanted) is None):
        return "partition-template"
    limit = (hw.max_partitions if hw is not None else 0) or DEFAULT_MAX_PARTITIONS
    if held >= limit:
        return "partition-full"
    return None


def fits(
    catalog: ProviderCatalog,
    gpu: GPUView,
    template: PartitionTemplate,
    available: Res,
    uses: Sequence[PartitionUse],
) -> Fit | None:
    """Whether one more partition of `template` fits `gpu` holding `uses`; None when it does."""
    hw = catalog.model(gpu.model)
    if hw is None or hw.template(template.id) is None:
        return Fit("partition-template", f"model {gpu.model or '?'} has no template {template.label}")
    limit = hw.max_partitions or DEFAULT_MAX_PARTITIONS
    if len(uses) >= limit:
        return Fit("partition-full", f"{len(uses)}/{limit} partitions")
    same = sum(1 for u in uses if (t := _template_of(hw, u)) is not None and t.id == template.id)
    if template.max_instances and same >= template.max_instances:
        return Fit("partition-full", f"{same}/{template.max_instances} of {template.label}")
    vendor = gpu.vendor or hw.vendor
    if vendor in MIG_VENDORS:
        if template.placement_limit and template.placement_offset and mig_start(hw, template, uses) is None:
            return Fit("partition-slots", f"no free MIG slot for {template.label}")
    elif vendor == ASCEND:
        why = _ascend(hw, template, uses)
        if why is not None:
            return Fit("partition-slots", why)
    else:
        return Fit("partition-vendor", f"vendor {vendor or '?'} has no partition strategy")
    need_t, need_v = template.resources(gpu.capacity.tflops)
    if available.tflops < need_t or available.vram < need_v:
        return Fit("resource", f"{template.label} needs {need_t:g} TFLOPS")
    return None


def occupied_slots(hw: HardwareModel, uses: Iterable[PartitionUse]) -> set[int]:
    """MIG slots taken: recorded ones first, then each unrecorded partition at its first free start."""
    taken: set[int] = set()
    pending: list[PartitionTemplate] = []
    for u in uses:
        if u.slot is not None:
            taken.update(range(u.slot[0], u.slot[1]))
        elif (t := _template_of(hw, u)) is not None and t.placement_limit and t.placement_offset:
            pending.append(t)
    for t in pending:
        start = _first_free(t, taken)
        if start is not None:
            taken.update(range(start, start + t.placement_offset))
    return taken


def _first_free(t: PartitionTemplate, taken: set[int]) -> int | None:
    for start in t.placement_limit:
        if all(start + i not in taken for i in range(t.placement_offset)):
            return start
    return None


def mig_start(hw: HardwareModel, template: PartitionTemplate, uses: Iterable[PartitionUse]) -> int | None:
    """The MIG start slot a new partition of `template` would get, or None when none is free."""
    return _first_free(template, occupied_slots(hw, uses))


def _ascend(hw: HardwareModel, template: PartitionTemplate, uses: Sequence[PartitionUse]) -> str | None:
    used: dict[str, int] = {}
    groups: dict[int, list[str]] = {}
    for u in uses:
        t = _template_of(hw, u)
        if t is not None:
            for k, v in t.extended.items():
                used[k] = used.get(k, 0) + v
        groups.setdefault(u.group or 0, []).append(t.id if t is not None else u.template)
    for k, need in template.extended.items():
        total = hw.extended_total.get(k)
        if total is not None and used.get(k, 0) + need > total:
            return f"{k}: {used.get(k, 0)} + {need} > {total}"
    n_groups = hw.max_groups or DEFAULT_ISOLATION_GROUPS
    if template.group_sharing == SHARED_GROUP:
        per = template.per_group or DEFAULT_PER_GROUP
        for g in range(n_groups):
            members = groups.get(g, [])
            if members and all(m == template.id for m in members) and len(members) < per:
                return None
    if any(not groups.get(g) for g in range(n_groups)):
        return None
    return f"all {n_groups} isolation groups are occupied"


def match_template(
    catalog: ProviderCatalog,
    gpus: Iterable[GPUView],
    tflops: float | None,
    percent: float | None,
    vram: float,
) -> PartitionTemplate | None:
    """The template that holds the request (`tflops`, or `percent` of each GPU's capacity, and
    `vram`) with the least waste on any of `gpus` whose partition count is below its limit; ties by
    template id."""
    best: tuple[float, str] | None = None
    found: PartitionTemplate | None = None
    for g in gpus:
        hw = catalog.model(g.model)
        if hw is None:
            continue
        if len(g.partitions) >= (hw.max_partitions or DEFAULT_MAX_PARTITIONS):
            continue
        if percent is not None:
            tflops = float(int(percent * g.capacity.tflops / 100.0))
        need = tflops or 0.0
        for t in hw.templates:
            have_t, have_v = t.resources(g.capacity.tflops)
            if have_t < need or have_v < vram:
                continue
            score = (have_t - need) / max(need, 1.0) * TFLOPS_WEIGHT + (have_v - vram) / max(
                vram, 1.0
            ) * VRAM_WEIGHT
            key = (score, t.id)
            if best is None or key < best:
                best, found = key, t
    return found
