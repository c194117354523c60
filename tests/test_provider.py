"""ProviderConfig: the catalogue (models, prices, templates, device-plugin resources) and what it decides.

Catalogue scenarios follow upstream's provider manager tests, native-GPU pods its defrag candidate
tests, pool membership its `countPoolGPUUsage` test (names in the docstrings); the ProviderConfigs
are built as upstream's tests build them (vendor, images, hardwareMetadata, inUseResourceNames).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.fixtures.engine_builders import HOUR, JSON, NOW, build, gpu, gpunode, host, node, pdb, pool, worker
from tftui.engine.compaction import plan_compaction
from tftui.engine.defrag import plan_defrag
from tftui.engine.prices import gpu_price, price_map
from tftui.engine.waste import diagnose
from tftui.model.metrics import Step1
from tftui.model.provider import ProviderCatalog

TF = "tensor-fusion.ai"


def provider(
    vendor: str, *, hardware: list[JSON] | None = None, in_use: list[str] | None = None, **spec: Any
) -> JSON:
    body: JSON = {
        "vendor": vendor,
        "images": {
            "middleware": f"{vendor.lower()}-hypervisor:latest",
            "remoteClient": "c",
            "remoteWorker": "w",
        },
    }
    if hardware is not None:
        body["hardwareMetadata"] = hardware
    if in_use is not None:
        body["inUseResourceNames"] = in_use
    body.update(spec)
    return {
        "apiVersion": f"{TF}/v1",
        "kind": "ProviderConfig",
        "metadata": {"name": f"{vendor.lower()}-provider"},
        "spec": body,
    }


def hw(model: str, full: str, cost: str, tflops: str = "312", **kw: Any) -> JSON:
    return {"model": model, "fullModelName": full, "costPerHour": cost, "fp16TFlops": tflops, **kw}


# -- the catalogue -----------------------------------------------------------------------------


def test_gpu_pricing_map() -> None:
    """Upstream TestGetGPUPricingMap: full model name → the hardware's costPerHour."""
    cat = ProviderCatalog.of(
        [
            provider(
                "NVIDIA",
                hardware=[hw("A100", "NVIDIA A100", "1.89"), hw("H100", "NVIDIA H100", "2.99", "989")],
            )
        ]
    )
    assert cat.prices({}) == {"NVIDIA A100": 1.89, "NVIDIA H100": 2.99}
    assert cat.prices({"NVIDIA A100": 1.0, "Tesla T4": 0.3}) == {
        "NVIDIA A100": 1.89,
        "NVIDIA H100": 2.99,
        "Tesla T4": 0.3,
    }


def test_all_in_use_resource_names() -> None:
    """Upstream TestGetAllInUseResourceNames: every vendor's device-plugin resources, once each."""
    cat = ProviderCatalog.of(
        [
            provider("NVIDIA", in_use=["nvidia.com/gpu"]),
            provider("AMD", in_use=["amd.com/gpu", "nvidia.com/gpu"]),
        ]
    )
    assert sorted(cat.native_resources()) == ["amd.com/gpu", "nvidia.com/gpu"]
    assert ProviderCatalog().native_resources() == ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915")


def test_gpu_info_by_model_and_virtualization_templates() -> None:
    """Upstream TestGetGpuInfoByModel and TestVirtualizationTemplates: a model is found by its short
    and its full name, with the templates its refs name (unknown refs left out)."""
    templates = [
        {
            "id": "mig-1g",
            "name": "1g.10gb",
            "computePercent": "14.28",
            "memoryGigabytes": 10,
            "maxInstances": 7,
        },
        {
            "id": "mig-7g",
            "name": "7g.80gb",
            "computePercent": "100",
            "memoryGigabytes": 80,
            "maxInstances": 1,
        },
    ]
    a100 = hw(
        "A100_SXM_80G",
        "NVIDIA A100-SXM4-80GB",
        "1.89",
        maxPartitions=7,
        partitionTemplateRefs=["mig-1g", "gone"],
    )
    cat = ProviderCatalog.of([provider("NVIDIA", hardware=[a100], virtualizationTemplates=templates)])
    by_short, by_full = cat.model("A100_SXM_80G"), cat.model("NVIDIA A100-SXM4-80GB")
    assert by_short is by_full and by_full is not None
    assert [t.label for t in by_full.templates] == ["1g.10gb"]
    assert by_full.max_partitions == 7 and cat.model("NVIDIA H100") is None


def test_bad_entries_are_reported_not_raised() -> None:
    cat = ProviderCatalog.of(
        [
            provider("", hardware=[]),
            provider("Ascend", hardware=[hw("Ascend 310P3", "Huawei Ascend 310P3", "cheap")]),
        ]
    )
    assert cat.vendors == ("Ascend",)
    assert [m for _, m in cat.problems] == [
        "spec.vendor: not set, ProviderConfig ignored",
        "spec.hardwareMetadata[0].costPerHour: not a number",
    ]
    st = build([pool("p"), provider("Ascend", hardware=[hw("X", "Y", "cheap")])])
    assert any("costPerHour: not a number" in w.message for w in st.warnings)


# -- which pods use GPUs outside TensorFusion ------------------------------------------------------


def native_pod(name: str, node_: str, resource: str, *, deleting: bool = False) -> JSON:
    """Upstream newNativeGPUPod: a non-TF pod on the node holding `resource` via its device plugin."""
    meta: JSON = {"name": name, "namespace": "default", "creationTimestamp": "2026-11-30T09:00:00Z"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T11:59:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node_,
            "containers": [
                {"name": "c", "resources": {"requests": {resource: "1"}, "limits": {resource: "1"}}}
            ],
        },
        "status": {"phase": "Running"},
    }


DEFRAG = {
    "enabled": True,
    "schedule": "50 11 * * *",
    "timezone": "UTC",
    "maxDuration": "30m",
    "utilizationThresholdPercent": 40,
}


def defrag_world(*extra: JSON) -> list[JSON]:
    """Source node-a (1 of 4 GPUs used) with an old, PDB-covered worker, target node-b (2 of 4)."""
    objs: list[JSON] = [
        pool("p", spec={"nodeManagerConfig": {"nodeCompaction": {"period": "5m", "defrag": DEFRAG}}})
    ]
    for n in ("node-a", "node-b"):
        objs += [node(n, gpus=4), gpunode(n, "p")]
        objs += [gpu(f"{n}-gpu-{i}", n, tflops=100, vram="10Gi", index=i, pool="p") for i in range(4)]
    old = NOW - 2 * HOUR
    objs += [
        worker("old-worker", ["node-a-gpu-0"], tflops=50, created=old),
        worker("t0", ["node-b-gpu-0"], tflops=50, created=old),
        worker("t1", ["node-b-gpu-1"], tflops=50, created=old),
        pdb("pdb-old", "old-worker", disruptions_allowed=1),
    ]
    return [*objs, *extra]


def candidates(objs: list[JSON]) -> list[str]:
    res = plan_defrag(build(objs), "p", NOW).pools["p"].defrag
    assert res is not None
    return [c.node for c in res.candidates]


def skip_reason(objs: list[JSON], node_: str) -> str | None:
    res = plan_defrag(build(objs), "p", NOW).pools["p"].defrag
    assert res is not None
    return next((s.reason for s in res.skipped if s.node == node_), None)


NVIDIA_MIG = provider("NVIDIA", in_use=["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"])
ASCEND = provider("Ascend", in_use=["huawei.com/Ascend310", "huawei.com/Ascend310P"])


def test_node_with_a_mig_pod_is_protected() -> None:
    """Upstream TestCollectDefragCandidates_SkipsNodeWithNativeGPUPod, with a MIG resource the
    ProviderConfig names: the node is not drained; without the catalogue it would be."""
    mig = native_pod("native-mig", "node-a", "nvidia.com/mig-1g.10gb")
    assert skip_reason(defrag_world(NVIDIA_MIG, mig), "node-a") == "native-gpu-pod"
    assert candidates(defrag_world(mig)) == ["node-a"]  # the fixed fallback list has no MIG names


def test_node_with_an_ascend_pod_is_protected() -> None:
    """Upstream TestCollectDefragCandidates_SkipsNodeWithAMDGPUPod, for Ascend's device plugin."""
    npu = native_pod("native-npu", "node-a", "huawei.com/Ascend310P")
    assert skip_reason(defrag_world(ASCEND, npu), "node-a") == "native-gpu-pod"
    assert build(defrag_world(ASCEND, npu)).nodes["node-a"].native_gpu_pods == ["default/native-npu"]


def test_only_tf_workers_owning_gpu_resources_do_not_protect() -> None:
    """Upstream TestCollectDefragCandidates_AllowsNodeWhenOnlyTFWorkerOwnsGPURequest and
    ..._AllowsNodeWithNonGPUSidecarPod and ..._AllowsNodeWhenNativeGPUPodIsTerminating."""
    sidecar = native_pod("sidecar", "node-a", "cpu")
    gone = native_pod("native-gone", "node-a", "nvidia.com/mig-1g.10gb", deleting=True)
    assert candidates(defrag_world(NVIDIA_MIG, sidecar, gone)) == ["node-a"]


# -- pool membership of GPUs -----------------------------------------------------------------------


def test_count_pool_gpu_usage() -> None:
    """Upstream TestCountPoolGPUUsage: a node's utilisation counts only the GPUs labelled for the
    pool and used by TensorFusion. node-a's 4th GPU belongs to another pool and is busy: counted,
    the node would be at 2/4 = 50 % (above the threshold); it is at 1/3 = 33 %."""
    objs = defrag_world()
    other = next(o for o in objs if o["kind"] == "GPU" and o["metadata"]["name"] == "node-a-gpu-3")
    other["metadata"]["labels"][f"{TF}/gpupool"] = "pool-b"
    objs.append(worker("foreign", ["node-a-gpu-3"], tflops=50, pool="pool-b", created=NOW - 2 * HOUR))
    objs.append(pdb("pdb-foreign", "foreign", disruptions_allowed=1))
    res = plan_defrag(build(objs), "p", NOW).pools["p"].defrag
    assert res is not None
    assert [(c.node, round(c.utilization, 2)) for c in res.candidates] == [("node-a", 33.33)]


# -- prices --------------------------------------------------------------------------------------


def test_provider_prices_order_compaction_and_price_waste() -> None:
    """A GPU model the public table does not know (Ascend) is priced by its ProviderConfig: its idle
    node is the most expensive and released first; the waste report puts money on its idle GPUs."""
    ascend = provider("Ascend", hardware=[hw("Ascend 910B", "Huawei Ascend 910B", "4.5", "320")])
    objs = [
        pool("p", compaction_period="1m"),
        ascend,
        *host("npu-1", "p", gpus=2, tflops=320, vram="64Gi", model="Huawei Ascend 910B", vendor="Ascend",
              created=NOW - timedelta(days=2), status={"totalTFlops": "640", "totalVRAM": "128Gi"}),
        *host("gpu-1", "p", gpus=2, created=NOW - timedelta(days=2),
              status={"totalTFlops": "624", "totalVRAM": "160Gi"}),
    ]  # fmt: skip
    for o in objs:
        if o["kind"] == "GPU":
            o["metadata"]["labels"][f"{TF}/gpupool"] = "p"
    st = build(objs)
    assert gpu_price(st, "Huawei Ascend 910B") == 4.5 and price_map(st)["Huawei Ascend 910B"] == 4.5
    assert gpu_price(build(objs[:1] + objs[2:]), "Huawei Ascend 910B") is None
    plan = plan_compaction(st, "p", NOW, prices=price_map(st))
    res = plan.pools["p"].compaction
    assert res is not None and [r.node for r in res.released] == ["npu-1", "gpu-1"]
    report = diagnose(Step1(NOW, HOUR), st)
    npu_rows = [r for r in report.gpus if r.node == "npu-1"]
    assert len(npu_rows) == 2 and all(r.price_per_hour == 4.5 for r in npu_rows)
