"""Isolation modes: the allocator's isolation filters, shared whole-GPU bookings, node mode rules.

Scenarios follow upstream's tests (named in each docstring) with the objects built the way those
tests build them: GPUs with `status.isolationMode` / `isolationPolicy` / `activeIsolationMode`, the
`virtualization-capabilities` annotation as JSON, requests with an isolation mode.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fixtures.engine_builders import GI, JSON, NOW, build, gpu, gpunode, host, node, pdb, pool, worker
from tftui.engine.defrag import plan_defrag
from tftui.engine.fit import Request, RequestError, reject_reason
from tftui.engine.placement import filter_gpus, place, preview
from tftui.engine.state import Res
from tftui.model.isolation import CAPABILITIES, gpu_isolation, node_mode

P = "p"


def caps(**flags: bool) -> str:
    """The annotation as the hypervisor writes it: every capability field, JSON."""
    doc = {
        "SupportsPartitioning": False,
        "SupportsSoftIsolation": False,
        "SupportsHardIsolation": False,
        "SupportsSnapshot": False,
        "SupportsMetrics": False,
        "SupportsRemoting": False,
        "MaxPartitions": 0,
        "MaxWorkersPerDevice": 0,
    }
    doc.update({f"Supports{k}": v for k, v in flags.items()})
    return json.dumps(doc)


def iso_gpu(
    name: str, node_: str = "n1", *, annotations: dict[str, str] | None = None, **status: Any
) -> JSON:
    """An upstream test GPU: 100 TFLOPS / 24Gi, isolation fields in its status."""
    g = gpu(name, node_, tflops=100, vram="24Gi", status=status, pool=P)
    if annotations:
        g["metadata"]["annotations"] = annotations
    return g


def one_node(*gpus: JSON, name: str = "n1") -> list[JSON]:
    return [pool(P), node(name, gpus=len(gpus)), gpunode(name, P), *gpus]


def req(isolation: str, **kw: Any) -> Request:
    return Request(vram=kw.pop("vram", 2 * GI), tflops=kw.pop("tflops", 10), isolation=isolation, **kw)


def reasons(objs: list[JSON], request: Request) -> dict[str, str | None]:
    st = build(objs)
    return {g.name: reject_reason(g, g.available, request, st.providers) for g in st.gpus.values()}


# -- the isolation-mode filter ---------------------------------------------------------------------


def test_hard_request_respects_capabilities() -> None:
    """Upstream TestGPUIsolationModeFilter_RespectsCapabilities: a hard request keeps the hard GPU
    whose annotation supports hard; refuses the one whose annotation says it does not, and the
    soft-mode GPU, each with its own reason."""
    objs = one_node(
        iso_gpu(
            "gpu-hard-supported", isolationMode="hard", annotations={CAPABILITIES: caps(HardIsolation=True)}
        ),
        iso_gpu(
            "gpu-hard-unsupported", isolationMode="hard", annotations={CAPABILITIES: caps(Partitioning=True)}
        ),
        iso_gpu(
            "gpu-mode-mismatch", isolationMode="soft", annotations={CAPABILITIES: caps(HardIsolation=True)}
        ),
    )
    assert reasons(objs, req("hard")) == {
        "gpu-hard-supported": None,
        "gpu-hard-unsupported": "isolation-unsupported",
        "gpu-mode-mismatch": "isolation-mode",
    }
    p = place(build(objs), P, req("hard"))
    assert p.gpus == ("gpu-hard-supported",)
    assert p.rejected == {"isolation-mode": 1, "isolation-unsupported": 1}


def test_missing_capabilities_keep_legacy_behaviour() -> None:
    """Upstream TestGPUIsolationModeFilter_BackwardCompatibilityWithoutCapabilities."""
    assert reasons(one_node(iso_gpu("gpu-legacy", isolationMode="soft")), req("soft")) == {"gpu-legacy": None}


def test_explicitly_unsupported_isolation_is_refused() -> None:
    """Upstream TestGPUIsolationModeFilter_ExplicitUnsupportedIsolation: an annotation with every
    capability false refuses hard, even on a hard GPU."""
    objs = one_node(
        iso_gpu("gpu-explicit-unsupported", isolationMode="hard", annotations={CAPABILITIES: caps()})
    )
    assert reasons(objs, req("hard")) == {"gpu-explicit-unsupported": "isolation-unsupported"}
    assert gpu_isolation(objs[-1]).capabilities is not None


def test_shared_accepts_any_node_runtime_mode() -> None:
    """Upstream TestGPUIsolationModeFilter_SharedAcceptsAnyNodeRuntimeMode."""
    objs = one_node(*(iso_gpu(m, isolationMode=m) for m in ("shared", "soft", "hard", "partitioned")))
    assert set(reasons(objs, req("shared")).values()) == {None}


def test_dynamic_gpus_use_their_recovered_active_mode() -> None:
    """Upstream TestGPUIsolationModeFilter_DynamicUsesRecoveredActiveMode: an idle Dynamic GPU and
    one locked to soft take a soft request; one locked to hard and one in conflict do not."""
    objs = one_node(
        iso_gpu("idle", isolationPolicy="Dynamic"),
        iso_gpu("soft", isolationPolicy="Dynamic", activeIsolationMode="soft"),
        iso_gpu("hard", isolationPolicy="Dynamic", activeIsolationMode="hard"),
        iso_gpu("conflict", isolationPolicy="Dynamic", dynamicIsolationConflict=True),
    )
    assert reasons(objs, req("soft")) == {
        "idle": None,
        "soft": None,
        "hard": "isolation-mode",
        "conflict": "isolation-conflict",
    }


def test_dynamic_policy_has_no_partitions() -> None:
    """Upstream Filter: "dynamic policy does not support partitioned allocation"."""
    objs = one_node(iso_gpu("g", isolationPolicy="Dynamic"))
    assert reasons(objs, req("partitioned", partition="1g.10gb"))["g"] == "isolation-policy"


def test_shared_needs_whole_idle_gpus() -> None:
    """Upstream TestSharedWholeGPUFilter_OnlyKeepsIdleUnpartitionedGPUs and
    TestSharedSimulationFiltersOnlyWholeIdleGPUsWithoutMutation: the used GPU and the partitioned
    one are refused; filtering changes no availability."""
    objs = [
        *one_node(iso_gpu("idle"), iso_gpu("used"), iso_gpu("partitioned", isolationMode="partitioned")),
        worker("w-used", ["used"], node="n1", tflops=20, vram="4Gi"),
        worker(
            "w-mig",
            ["partitioned"],
            node="n1",
            tflops=None,
            vram="0",
            annotations={
                "tensor-fusion.ai/isolation": "partitioned",
                "tensor-fusion.ai/partition-id": "1g.10gb",
            },
        ),
    ]
    st = build(objs)
    before = {g.name: g.available for g in st.gpus.values()}
    c = filter_gpus(st, P, req("shared"))
    assert c.by_node == {"n1": ("idle",)}
    assert c.rejected == {"shared-busy": 2}
    assert {g.name: g.available for g in st.gpus.values()} == before


def test_shared_allocation_consumes_the_whole_gpu() -> None:
    """Upstream TestSharedAllocationConsumesAndRestoresWholeGPU and
    TestRecomputeSharedAllocationKeepsGPUExclusive: a shared worker asking 10 TFLOPS / 2Gi holds
    its whole GPU (on a hard-mode node too), and nothing else fits there; when it goes, the GPU
    is whole again. The node, the pool, the workload and compaction's sums see the booking."""
    shared = worker(
        "pod-1",
        ["gpu-1"],
        node="n1",
        tflops=10,
        vram="2Gi",
        annotations={"tensor-fusion.ai/isolation": "shared"},
    )
    objs = [*one_node(iso_gpu("gpu-1", isolationMode="hard"), iso_gpu("gpu-2", isolationMode="hard")), shared]
    st = build(objs)
    g = st.gpus["gpu-1"]
    assert g.available == Res(0, 0) and g.allocated == g.capacity
    assert st.nodes["n1"].allocated == Res(100, 24 * GI)
    assert st.pools[P].allocated == Res(100, 24 * GI)
    assert st.workloads["default/pod-1"].allocated == Res(100, 24 * GI)
    assert st.compaction_sums[P]["n1"] == [100, 24 * GI, 200, 48 * GI]
    assert reject_reason(g, g.available, req("shared"), st.providers) == "shared-busy"
    assert reject_reason(g, g.available, req("hard", tflops=1, vram=1), st.providers) == "resource"
    p = place(st, P, req("hard", tflops=1, vram=1))
    assert p.gpus == ("gpu-2",)
    assert build(objs[:-1]).gpus["gpu-1"].available == Res(100, 24 * GI)


def test_compact_placement_keeps_binpacking_without_shared_priority() -> None:
    """Upstream TestCompactPlacementKeepsExistingGPUAndNodeBinpackWithoutSharedPriority: hard slices
    pack onto the used hard GPU; a shared request takes the idle hard GPU of the used node rather
    than a node whose GPUs report the shared mode."""
    objs = [
        pool(P, template="t"),
        {"apiVersion": "tensor-fusion.ai/v1", "kind": "SchedulingConfigTemplate", "metadata": {"name": "t"},
         "spec": {"placement": {"mode": "CompactFirst"}}},
        node("node-used", gpus=2),
        gpunode("node-used", P),
        node("node-idle", gpus=2),
        gpunode("node-idle", P),
        iso_gpu("hard-used", "node-used", isolationMode="hard"),
        iso_gpu("hard-idle", "node-used", isolationMode="hard"),
        iso_gpu("shared-idle-a", "node-idle", isolationMode="shared"),
        iso_gpu("shared-idle-b", "node-idle", isolationMode="shared"),
        worker("w", ["hard-used"], node="node-used", tflops=50, vram="12Gi",
               annotations={"tensor-fusion.ai/isolation": "hard"}),
    ]  # fmt: skip
    st = build(objs)
    assert place(st, P, req("hard")).gpus == ("hard-used",)
    assert place(st, P, req("shared")).gpus == ("hard-idle",)
    assert preview(st, P, req("shared")).for_mode("CompactFirst").placement.node == "node-used"


def test_node_score_counts_only_gpus_that_could_host_the_mode() -> None:
    """Upstream PreFilter: a node's other GPUs join its average score only when they could host
    the request's isolation mode (`IsGPUIsolationCompatible`)."""
    objs = [
        *one_node(iso_gpu("soft-a", isolationMode="soft"), iso_gpu("hard-busy", isolationMode="hard")),
        worker(
            "w",
            ["hard-busy"],
            node="n1",
            tflops=90,
            vram="20Gi",
            annotations={"tensor-fusion.ai/isolation": "hard"},
        ),
    ]
    p = place(build(objs), P, req("soft"), mode="CompactFirst")
    # only soft-a counts: idle → CompactFirst node-level score 0 (with hard-busy it would be ~40)
    assert p.node_scores == (("n1", 0),)


# -- the pool's node rules -----------------------------------------------------------------------


RULES = {
    "defaultIsolationMode": "soft",
    "isolationModeRules": [
        {
            "mode": "partitioned",
            "selector": {
                "matchExpressions": [
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["p4d.24xlarge", "p5.48xlarge"],
                    }
                ]
            },
        },
        {"mode": "hard", "selector": {"matchLabels": {"tensor-fusion.ai/gpu-model": "H100"}}},
    ],
}


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        ({"node.kubernetes.io/instance-type": "p5.48xlarge"}, "partitioned"),  # one of several types
        (
            {"node.kubernetes.io/instance-type": "p4d.24xlarge", "tensor-fusion.ai/gpu-model": "H100"},
            "partitioned",
        ),
        ({"unrelated": "true"}, "soft"),  # the configured default
    ],
)
def test_resolve_node_isolation_mode(labels: dict[str, str], want: str) -> None:
    """Upstream TestResolveNodeIsolationMode (first matching rule wins, else the default)."""
    assert node_mode(labels, RULES) == want


def test_resolve_node_isolation_mode_defaults_to_soft() -> None:
    """Upstream TestResolveNodeIsolationModeDefaultsToSoft."""
    assert node_mode({}, None) == "soft"


def test_request_validates_its_isolation() -> None:
    with pytest.raises(RequestError, match="isolation must be one of"):
        req("strict")
    with pytest.raises(RequestError, match="needs isolation partitioned"):
        req("soft", partition="1g.10gb")


# -- the defrag simulation sees shared workers whole -----------------------------------------------


def test_defrag_simulation_sees_a_shared_worker_holding_its_gpu() -> None:
    """The only other node's GPU is held by a shared worker asking 10 TFLOPS: the defrag simulation
    finds it full (the allocator's booking), so the source's worker cannot move there."""
    defrag = {"enabled": True, "schedule": "0 3 * * *", "timezone": "UTC", "utilizationThresholdPercent": 50}
    old = NOW.replace(day=1)
    objs = [
        pool(P, spec={"nodeManagerConfig": {"nodeCompaction": {"period": "5m", "defrag": defrag}}}),
        *host("src", P, gpus=2, tflops=100, vram="24Gi"),
        *host("dst", P, gpus=1, tflops=100, vram="24Gi"),
        worker("mv", ["src-gpu-0"], node="src", tflops=10, vram="2Gi", created=old),
        worker("sh", ["dst-gpu-0"], node="dst", tflops=10, vram="2Gi", created=old,
               annotations={"tensor-fusion.ai/isolation": "shared"}),
        pdb("pdb-mv", "mv", max_unavailable=1, disruptions_allowed=1),
    ]  # fmt: skip
    for o in objs:
        if o["kind"] == "GPU":
            o["metadata"]["labels"]["tensor-fusion.ai/gpupool"] = P
    st = build(objs)
    assert st.gpus["dst-gpu-0"].available == Res(0, 0)
    res = plan_defrag(st, P, NOW.replace(hour=3, minute=1)).pools[P].defrag
    assert res is not None and res.evict is None
    skip = next(s for s in res.skipped if s.node == "src")
    assert (
        skip.reason == "unmovable" and "dst:allocator-filter(filtered=0 required=1 resource=1)" in skip.detail
    )
