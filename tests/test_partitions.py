"""Hardware partitions: templates from the ProviderConfig, MIG slots, Ascend vGroups, bookings.

Scenarios follow upstream's partition tests (named in each docstring); the templates are given as
a ProviderConfig (what the controller loads them from), the GPUs as upstream's tests build them
(`status.gpuModel`, vendor, capacity), allocated partitions as partitioned worker pods with their
GPU's `status.allocatedPartitions` entry where the test gives a slot.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.engine_builders import GI, JSON, build, gpu, gpunode, node, pool, worker
from tftui.engine import partitions
from tftui.engine.fit import Request
from tftui.engine.placement import filter_gpus, place, preview
from tftui.engine.state import GPUView, PartitionUse, Res
from tftui.model.provider import ProviderCatalog

P = "p"
A100 = "A100_SXM_80G"
TF = "tensor-fusion.ai"


def provider(*templates: JSON, model: str = A100, vendor: str = "NVIDIA", **hw: Any) -> JSON:
    """A ProviderConfig offering `templates` for one model (max 7 partitions, 8 MIG slots)."""
    meta = {
        "model": model,
        "fullModelName": model,
        "fp16TFlops": "312",
        "maxPartitions": 7,
        "maxPlacementSlots": 8,
    }
    meta.update(hw)
    meta["partitionTemplateRefs"] = [t["id"] for t in templates]
    return {
        "apiVersion": f"{TF}/v1",
        "kind": "ProviderConfig",
        "metadata": {"name": f"{vendor.lower()}-provider"},
        "spec": {"vendor": vendor, "images": {"middleware": "x"}, "hardwareMetadata": [meta],
                 "virtualizationTemplates": list(templates)},
    }  # fmt: skip


def template(tid: str, pct: float, gib: int, **kw: Any) -> JSON:
    return {"id": tid, "name": kw.pop("name", tid), "computePercent": str(pct), "memoryGigabytes": gib, **kw}


T1G = template(
    "1g.24gb", 100 / 7, 24, maxInstances=7, placementLimit=[0, 1, 2, 3, 4, 5, 6], placementOffset=1
)
T4G = template("4g.94gb", 400 / 7, 94, maxInstances=2, placementLimit=[0, 4], placementOffset=4)


def mig_gpu(
    name: str = "gpu-1", *, vendor: str = "NVIDIA", model: str = A100, tflops: Any = 312, vram: Any = "80Gi"
) -> JSON:
    return gpu(name, "n1", tflops=tflops, vram=vram, model=model, vendor=vendor, pool=P,
               status={"isolationMode": "partitioned"})  # fmt: skip


def part_worker(name: str, gpu_name: str, tid: str, **kw: Any) -> JSON:
    return worker(
        name,
        [gpu_name],
        node="n1",
        tflops=None,
        vram="0",
        annotations={f"{TF}/isolation": "partitioned", f"{TF}/partition-id": tid},
        **kw,
    )


def world(*objs: JSON, gpus: int = 1) -> list[JSON]:
    return [pool(P), node("n1", gpus=gpus), gpunode("n1", P), *objs]


def catalog(*providers: JSON) -> ProviderCatalog:
    return ProviderCatalog.of(providers)


# -- templates ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tflops", "percent", "vram_gi", "want"),
    [
        (30, None, 20, "1g.24gb"),  # match smallest template that fits
        (300, None, 100, None),  # no template matches request
        (None, 10, 20, "1g.24gb"),  # match with ComputePercent - smallest template that fits
        (None, 50, 50, "4g.94gb"),  # match with ComputePercent - requires larger template
        (None, 80, 100, None),  # match with ComputePercent - no template matches
    ],
)
def test_match_partition_template(
    tflops: float | None, percent: float | None, vram_gi: int, want: str | None
) -> None:
    """Upstream TestMatchPartitionTemplate (the least-waste template over the candidate GPUs)."""
    st = build(world(provider(T1G, T4G), mig_gpu()))
    got = partitions.match_template(st.providers, st.gpus.values(), tflops, percent, vram_gi * GI)
    assert (got.id if got else None) == want


def test_match_partition_template_unknown_model() -> None:
    """Upstream TestMatchPartitionTemplate "no templates available (unknown GPU model)"."""
    st = build(world(provider(T1G, T4G), mig_gpu(model="UNKNOWN_GPU_MODEL")))
    assert partitions.match_template(st.providers, st.gpus.values(), 30, None, 20 * GI) is None


@pytest.mark.parametrize("requested", ["4g.94gb", "mig-4g-94gb", "MIG-4G.94GB"])
def test_required_template_and_nvidia_alias(requested: str) -> None:
    """Upstream TestMatchPartitionTemplate "match specific template when required" and "match
    NVIDIA style alias when required" (the controller's loose template identifier)."""
    hw = catalog(provider(T1G, T4G)).model(A100)
    assert hw is not None
    t = hw.template(requested)
    assert t is not None and t.id == "4g.94gb"


def test_calculate_partition_resource_usage() -> None:
    """Upstream TestCalculatePartitionResourceUsage: 1/7 of 312 TFLOPS is 44.57, and 24Gi."""
    hw = catalog(provider(T1G)).model(A100)
    assert hw is not None
    assert hw.templates[0].resources(312) == (44.57, 24 * GI)


# -- availability ------------------------------------------------------------------------------


def gpu_view(st_objs: list[JSON]) -> tuple[ProviderCatalog, GPUView]:
    st = build(st_objs)
    return st.providers, st.gpus["gpu-1"]


def uses(*tids: str) -> list[PartitionUse]:
    return [PartitionUse(f"default/pod-{i}", t) for i, t in enumerate(tids)]


@pytest.mark.parametrize(
    ("held", "wanted", "avail", "reason"),
    [
        ((), "1g.24gb", (100, 50), None),  # happy path - 1g.24gb allocation succeeds
        (("1g.24gb",) * 4, "1g.24gb", (200, 96), None),  # Profile 19 * 4 should succeed, slots 4-6 free
        (
            ("4g.94gb", "1g.24gb", "1g.24gb", "1g.24gb"),
            "1g.24gb",
            (200, 96),
            "partition-slots",
        ),  # Profile 9 at 0 + Profile 19 * 3 should fail
        (
            ("4g.94gb", "1g.24gb", "1g.24gb"),
            "1g.24gb",
            (150, 118),
            None,
        ),  # Profile 9 * 1 + Profile 19 * 2 should succeed for 3rd instance
        (
            ("4g.94gb", "4g.94gb"),
            "4g.94gb",
            (200, 94),
            "partition-full",
        ),  # Profile 9 - all placement positions occupied (count first)
        ((), "1g.24gb", (10, 50), "resource"),  # insufficient TFLOPs
        ((), "1g.24gb", (100, 10), "resource"),  # insufficient VRAM
        (
            ("1g.24gb",) * 3,
            "4g.94gb",
            (200, 94),
            None,
        ),  # Profile 9 can allocate at position 4 when Profile 19 uses slots 0-2
    ],
)
def test_check_partition_availability(
    held: tuple[str, ...], wanted: str, avail: tuple[int, int], reason: str | None
) -> None:
    """Upstream TestCheckPartitionAvailability (A100 MIG: 7 partitions, 8 slots; profile 19 one slot
    from any of 0-6, profile 9 four slots from 0 or 4)."""
    cat, g = gpu_view(world(provider(T1G, T4G), mig_gpu()))
    hw = cat.model(A100)
    assert hw is not None
    t = hw.template(wanted)
    assert t is not None
    got = partitions.fits(cat, g, t, Res(avail[0], avail[1] * GI), uses(*held))
    assert (got.reason if got else None) == reason


def test_recorded_slots_are_taken_first() -> None:
    """A partition's slot from `status.allocatedPartitions` is occupied where recorded; unrecorded
    ones take the first free start in worker order."""
    g = mig_gpu()
    g["status"]["allocatedPartitions"] = {
        "uid-default-a": {
            "templateId": "4g.94gb",
            "podUid": "uid-default-a",
            "allocatedSlotStart": 4,
            "allocatedSlotEnd": 8,
        }
    }
    objs = world(
        provider(T1G, T4G), g, part_worker("a", "gpu-1", "4g.94gb"), part_worker("b", "gpu-1", "1g.24gb")
    )
    st = build(objs)
    gv = st.gpus["gpu-1"]
    assert [(u.worker, u.template, u.slot) for u in gv.partitions] == [
        ("default/a", "4g.94gb", (4, 8)),
        ("default/b", "1g.24gb", None),
    ]
    hw = st.providers.model(A100)
    assert hw is not None and partitions.occupied_slots(hw, gv.partitions) == {0, 4, 5, 6, 7}
    assert partitions.mig_start(hw, hw.templates[1], gv.partitions) is None  # 4g needs 0-3: slot 0 taken
    assert partitions.mig_start(hw, hw.templates[0], gv.partitions) == 1


# -- the partition template filter -------------------------------------------------------------


def test_partition_template_filter() -> None:
    """Upstream TestPartitionTemplateFilter: non-partitioned requests pass every GPU; a model without
    templates, or without the required one, is filtered out; so is a GPU at its partition count."""
    other = gpu("gpu-other", "n1", model="NVIDIA L4", tflops=121, vram="24Gi", pool=P, index=1,
                status={"isolationMode": "partitioned"})  # fmt: skip
    full = gpu("gpu-full", "n1", tflops=312, vram="80Gi", model=A100, pool=P, index=2,
               status={"isolationMode": "partitioned"})  # fmt: skip
    held = [part_worker(f"w{i}", "gpu-full", "1g.10gb") for i in range(2)]
    t1 = template("1g.10gb", 100 / 7, 10, maxInstances=7, placementLimit=list(range(7)), placementOffset=1)
    objs = world(provider(t1, maxPartitions=2), mig_gpu(), other, full, *held, gpus=3)
    st = build(objs)
    plain = filter_gpus(st, P, Request(vram=GI, tflops=1))
    assert plain.rejected == {"isolation-mode": 3}  # soft requests do not go to partitioned GPUs
    assert filter_gpus(st, P, Request(vram=GI, tflops=1, isolation="shared")).rejected == {"shared-busy": 1}
    c = filter_gpus(st, P, Request(vram=GI, tflops=1, isolation="partitioned", partition="1g.10gb"))
    assert c.by_node == {"n1": ("gpu-1",)}
    assert c.rejected == {"partition-template": 1, "partition-full": 1}
    missing = filter_gpus(st, P, Request(vram=GI, tflops=1, isolation="partitioned", partition="9g.99gb"))
    assert missing.rejected == {"partition-template": 3}  # the template is checked before the count


# -- bookings and placement --------------------------------------------------------------------


T3G = template("3g.40gb", 300 / 7, 40, maxInstances=2, placementLimit=[0, 4], placementOffset=4)


def test_a_partitioned_worker_books_its_template() -> None:
    """A worker with a partition-id books the template's compute share and memory, whatever it
    requested (the controller's bindPartition); its GPU lists the partition."""
    objs = world(provider(T1G, T3G), mig_gpu(), part_worker("w", "gpu-1", "mig-3g-40gb"))
    st = build(objs)
    g = st.gpus["gpu-1"]
    assert g.allocated == Res(133.71, 40 * GI)  # 3/7 of 312 TFLOPS, rounded to 0.01
    assert g.partitions == [PartitionUse("default/w", "mig-3g-40gb")]
    assert st.workloads["default/w"].allocated == g.allocated
    assert st.nodes["n1"].allocated == g.allocated


def test_an_unknown_template_is_a_warning_and_books_the_request() -> None:
    objs = world(provider(T1G), mig_gpu(), part_worker("w", "gpu-1", "2g.20gb"))
    st = build(objs)
    assert any("no partition template '2g.20gb'" in w.message for w in st.warnings)
    assert st.gpus["gpu-1"].allocated == Res(0, 0)


def test_place_accepts_a_partition_request() -> None:
    """`place` books the template; a second 3g fits at slot 4, a third is refused by the count."""
    st = build(world(provider(T1G, T3G), mig_gpu(), part_worker("w", "gpu-1", "3g.40gb")))
    r = Request(vram=0, tflops=0, isolation="partitioned", partition="3g.40gb")
    p = place(st, P, r)
    assert p.gpus == ("gpu-1",) and p.partition == "3g.40gb"
    pv = preview(st, P, r)
    assert pv.to_json()["request"]["partition"] == "3g.40gb"
    after = pv.modes[0].node_after
    assert after is not None and after.vram == 100.0  # 40Gi + 40Gi of 80Gi
    held = [part_worker(f"w{i}", "gpu-1", "3g.40gb") for i in range(2)]
    refused = place(build(world(provider(T1G, T3G), mig_gpu(), *held)), P, r)
    assert refused.node is None and refused.rejected == {"partition-full": 1}


def test_a_partitioned_request_without_template_gets_the_best_fit() -> None:
    """The scheduler's pre-filter matches the least-waste template before scoring."""
    st = build(world(provider(T1G, T3G), mig_gpu()))
    p = place(st, P, Request(vram=20 * GI, tflops=30, isolation="partitioned"))
    assert (p.node, p.partition) == ("n1", "1g.24gb")
    none = place(st, P, Request(vram=50 * GI, tflops=200, isolation="partitioned"))
    assert none.node is None and none.reason is not None
    assert none.reason.startswith("no suitable partition template")


# -- Ascend vNPU -------------------------------------------------------------------------------

ASCEND = "Ascend_310P3"


def vir(tid: str, pct: float, gib: int, limit: int, core: int, cpu: int, shared: bool = False) -> JSON:
    kw: dict[str, Any] = {"isolationGroupSharing": "shared" if shared else "exclusive"}
    if shared:
        kw["maxPartitionsPerIsolationGroup"] = 2
    return template(tid, pct, gib, maxInstances=limit, extendedResources={"AICORE": core, "AICPU": cpu}, **kw)


VIRS = (
    vir("vir01", 12.5, 3, 8, 1, 1, shared=True),
    vir("vir02", 25, 6, 4, 2, 2),
    vir("vir04", 50, 12, 2, 4, 4),
    vir("vir04_3c", 50, 12, 2, 4, 3),
)


def ascend() -> tuple[ProviderCatalog, GPUView]:
    """Upstream's Ascend test configuration: 7 partitions, 4 vGroups, AICORE 8 / AICPU 7."""
    objs = world(
        provider(*VIRS, model=ASCEND, vendor="Ascend", maxIsolationGroups=4, maxPlacementSlots=0,
                 totalExtendedResources={"AICORE": 8, "AICPU": 7}),
        mig_gpu(vendor="Ascend", model=ASCEND, tflops=22, vram="21Gi"),
    )  # fmt: skip
    return gpu_view(objs)


def grouped(*pairs: tuple[str, int]) -> list[PartitionUse]:
    return [PartitionUse(f"default/pod-{i}", t, None, g) for i, (t, g) in enumerate(pairs)]


FULL_GROUPS = (("vir01", 0), ("vir01", 1), ("vir01", 2), ("vir01", 3))  # 4 of 8 AICORE, every vGroup


@pytest.mark.parametrize(
    ("held", "wanted", "reason"),
    [
        ((), "vir01", None),  # should succeed for vir01
        ((("vir04", 0),), "vir04_3c", None),  # should succeed for vir04+vir04_3c
        (
            (("vir02", 0), ("vir02", 1), ("vir02", 2), ("vir02", 3)),
            "vir02",
            "partition-full",
        ),  # no group available
        (
            (("vir04_3c", 0), ("vir04_3c", 1)),
            "vir04_3c",
            "partition-full",
        ),  # max vir04_3c partitions exceeded
        ((("vir01", 0),), "vir01", None),  # should allow vir01 sharing within same group
        (
            (("vir04_3c", 0), ("vir04_3c", 1)),
            "vir01",
            "partition-slots",
        ),  # should fail when AICORE is insufficient
        (FULL_GROUPS, "vir02", "partition-slots"),  # every vGroup taken (AllocateSlot would fail)
    ],
)
def test_ascend_partition_strategy(
    held: tuple[tuple[str, int], ...], wanted: str, reason: str | None
) -> None:
    """Upstream "Ascend Partition Strategy" CheckAvailability and AllocateSlot."""
    cat, g = ascend()
    hw = cat.model(ASCEND)
    assert hw is not None
    t = hw.template(wanted)
    assert t is not None
    fit = partitions.fits(cat, g, t, Res(22, 21 * GI), grouped(*held))
    assert (fit.reason if fit else None) == reason
    if fit is not None and fit.reason == "partition-slots":
        assert ("AICORE" if wanted == "vir01" else "isolation groups") in fit.detail


def test_other_vendors_cannot_be_partitioned() -> None:
    """Upstream GetPartitionStrategy: vendors without a strategy are not supported."""
    objs = world(provider(T1G, vendor="AMD"), mig_gpu(vendor="AMD"))
    cat, g = gpu_view(objs)
    t = cat.model(A100)
    assert t is not None
    fit = partitions.fits(cat, g, t.templates[0], g.available, [])
    assert fit is not None and fit.reason == "partition-vendor"
