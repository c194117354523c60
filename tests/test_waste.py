"""Step-1 diagnosis (behaviour M4): each class with exact figures, its fix, and the waste arithmetic.

Step1 values are hand-made (what the four reference-page queries would return); the cluster comes
from `engine_builders` or the demo seed (tests/fixtures/upstream_demo.py), whose metric rows show
over-request on llama and a VRAM-bound H100 node.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest

from tests.fixtures import upstream_demo as demo
from tests.fixtures.engine_builders import GI, NOW, build, host, pool, template, worker, workload
from tftui.engine.waste import Diagnosis, Finding, diagnose, num
from tftui.model.metrics import GPUUsageSummary, NodeAllocation, Step1, WorkloadRequest, WorkloadUsage

DAY = timedelta(days=1)
A100_PRICE = 1.89  # public GPU table, $/h
H100_PRICE = 2.99
H100_VRAM = 81559 * 1024**2


def step1(
    nodes: Sequence[NodeAllocation] = (),
    gpus: Sequence[GPUUsageSummary] = (),
    requests: Sequence[WorkloadRequest] = (),
    usage: Sequence[WorkloadUsage] = (),
    window: timedelta = DAY,
) -> Step1:
    return Step1(NOW, window, tuple(nodes), tuple(gpus), tuple(requests), tuple(usage))


def alloc(node: str, t: float, v: float, pool: str = "p", samples: int = 1440) -> NodeAllocation:
    return NodeAllocation(node, pool, t, v, samples)


def used(
    node: str, gpu: str, compute: float, vram_pct: float | None = None, vram_bytes: float = 0.0
) -> GPUUsageSummary:
    return GPUUsageSummary(node, gpu, compute, vram_pct, vram_bytes, 1440)


def finding(d: Diagnosis, level: str, name: str, cls: str) -> Finding:
    hits = [f for f in d.findings if (f.level, f.name, f.cls) == (level, name, cls)]
    assert len(hits) == 1, [(f.level, f.name, f.cls) for f in d.findings]
    return hits[0]


def classes(d: Diagnosis) -> dict[str, tuple[str, ...]]:
    out = {f"node {n.name}": n.classes for n in d.nodes}
    out |= {f"gpu {g.name}": g.classes for g in d.gpus}
    out |= {f"workload {w.key}": w.classes for w in d.workloads}
    return out


# -- the demo seed -------------------------------------------------------------------------------

G = demo.G


def demo_diagnosis() -> Diagnosis:
    s = step1(
        nodes=[
            alloc("gpu-a100-1", 19.23, 23.75, demo.POOL),
            alloc("gpu-a100-2", 16.03, 18.75, demo.POOL),
            alloc("gpu-h100-1", 40.44, 87.89, demo.POOL),
        ],
        gpus=[
            used("gpu-a100-1", G[0], 6.0, None, 9663676416),
            used("gpu-h100-1", G[4], 78.0, None, 73014444032),
        ],
        # llama: 60 TFLOPS / 20Gi per GPU, 2 workers for the whole day; uses 4 % of an A100 = 12.48 TFLOPS
        requests=[WorkloadRequest("ml-serving", "llama3-8b-infer", 60.0, 20 * GI, 1.0, 2, 2880)],
        usage=[WorkloadUsage("ml-serving", "llama3-8b-infer", 12.48, 12.48, 6442450944, 2880)],
    )
    return diagnose(s, build(demo.objects()))


def test_demo_llama_is_over_requested_with_its_fix_and_waste() -> None:
    d = demo_diagnosis()
    f = finding(d, "workload", "ml-serving/llama3-8b-infer", "over-request")
    # held = max(60/312, 20Gi/80Gi) = 0.25 of a GPU; needed = max(12.48/312, 6Gi/80Gi) = 0.075;
    # 2 workers × 24 h = 48 GPU-hours → 0.175 × 48 = 8.4 GPU-h at $1.89
    assert f.wasted_gpu_hours == pytest.approx(8.4)
    assert f.wasted_money == pytest.approx(8.4 * A100_PRICE)
    assert f.detail == (
        "uses 12.5 of 60 TFLOPS requested per GPU on average (20.8%), peak 12.5; VRAM peak 6Gi of 20Gi"
    )
    assert f.fixes == (
        'turn on autoscaling: pod-template annotations tensor-fusion.ai/autoscale: "true" and '
        "tensor-fusion.ai/autoscale-target: compute (or TensorFusionWorkload ml-serving/llama3-8b-infer "
        "spec.autoScalingConfig.autoSetResources.enable: true, targetResource: compute)",
        "or lower tensor-fusion.ai/tflops-request to 15 (peak 12.5 × 1.15, keep tensor-fusion.ai/tflops-limit 120)",
    )
    (row,) = [w for w in d.workloads if w.name == "llama3-8b-infer"]
    assert (row.tflops_use_ratio, row.device_hours, row.device_tflops) == (pytest.approx(0.208), 48.0, 312.0)


def test_demo_h100_node_is_vram_bound() -> None:
    d = demo_diagnosis()
    f = finding(d, "node", "gpu-h100-1", "vram-bound")
    # (87.89 − 40.44) points × 2 GPUs × 24 h
    assert f.wasted_gpu_hours == pytest.approx(0.4745 * 48)
    assert f.wasted_money == pytest.approx(0.4745 * 48 * H100_PRICE)
    assert f.fixes[0] == "review tensor-fusion.ai/vram-request of ml-serving/qwen2-72b-infer 70Gi (per GPU)"
    assert f.fixes[1] == (
        "TensorFusionCluster demo spec.gpuPools[shared].specTemplate.capacityConfig.oversubscription."
        "vramExpandToHostMem/vramExpandToHostDisk (now 40/20) to back VRAM with host memory"
    )
    (h100,) = [n for n in d.nodes if n.name == "gpu-h100-1"]
    assert h100.vram_peak_pct == pytest.approx(73014444032 / H100_VRAM * 100)
    assert h100.compute_used_pct is None and h100.gpus_reporting == 1  # one GPU silent: no node usage


def test_demo_classes_and_totals() -> None:
    d = demo_diagnosis()
    assert classes(d) == {
        "node gpu-a100-1": ("fragmentation",),
        "node gpu-a100-2": ("fragmentation",),
        "node gpu-h100-1": ("vram-bound",),
        f"gpu {G[0]}": ("ok",),  # 25.6 % / 35 % allocated, 6 % used
        f"gpu {G[1]}": ("no-data",),
        f"gpu {G[2]}": ("no-data",),
        f"gpu {G[3]}": ("no-data",),
        f"gpu {G[4]}": ("vram-bound", "under-request"),  # qwen uses 78 % of a GPU it booked 40.4 % of
        f"gpu {G[5]}": ("vram-bound",),
        "workload ml-batch/embedding-batch": ("no-data",),
        "workload ml-serving/llama3-8b-infer": ("over-request",),
        "workload ml-serving/qwen2-72b-infer": ("no-data",),
        "workload research/notebook-alice": ("no-data",),
    }
    frag = finding(d, "node", "gpu-a100-2", "fragmentation")
    assert frag.wasted_gpu_hours == pytest.approx(0.8125 * 48)  # 18.75 % held of 2 GPUs × 24 h
    assert frag.detail == (
        "only 18.8% allocated (TFLOPS 16%, VRAM 18.8%), one of 2 partly used nodes in pool demo-shared"
    )
    assert frag.fixes[0] == (
        "SchedulingConfigTemplate demo-compact spec.placement.mode: CompactFirst (now NodeCompactGPULowLoad): "
        "kubectl patch schedulingconfigtemplate demo-compact --type=merge "
        """-p '{"spec":{"placement":{"mode":"CompactFirst"}}}'"""
    )
    assert frag.fixes[1] == (
        "TensorFusionCluster demo spec.gpuPools[shared].specTemplate.nodeManagerConfig.nodeCompaction.defrag"
        ".enabled: true (with schedule, timezone, utilizationThresholdPercent: 40) and PodDisruptionBudgets "
        "for the workers on gpu-a100-2"
    )
    # GPU-hours of a silent GPU are unknown, not zero
    assert finding(d, "gpu", G[5], "vram-bound").wasted_gpu_hours is None
    # disjoint totals: llama's requests; the two fragmented nodes' unrequested capacity
    assert d.totals.requests_gpu_hours == pytest.approx(8.4)
    assert d.totals.capacity_gpu_hours == pytest.approx((0.8125 + 0.7625) * 48)
    assert d.totals.money == pytest.approx((8.4 + 1.575 * 48) * A100_PRICE)
    wasted = [f.wasted_gpu_hours for f in d.findings]
    known = [w for w in wasted if w is not None]
    assert known == sorted(known, reverse=True) and wasted[-1] is None


# -- each class on a small cluster ---------------------------------------------------------------


def cluster(*extra: dict, cost: float | None = None, do_not_disrupt: bool = False):  # type: ignore[no-untyped-def]
    objs = [
        template("tpl", "NodeCompactGPULowLoad"),
        pool("c-gpu", template="tpl", cluster="c"),
        *host("n1", "c-gpu", cost=cost, do_not_disrupt=do_not_disrupt),
        *host("n2", "c-gpu"),
        *extra,
    ]
    return build(objs)


def test_empty_node_with_compaction_fix_and_node_price() -> None:
    st = cluster(
        workload("app", pool="c-gpu"),
        worker("app-w", ["n2-gpu-0"], workload="app", pool="c-gpu", tflops=156, vram="40Gi"),
        cost=10.0,
        do_not_disrupt=True,
    )
    s = step1(
        nodes=[alloc("n1", 0.0, 0.0, "c-gpu"), alloc("n2", 25.0, 25.0, "c-gpu")],
        gpus=[used("n1", "n1-gpu-0", 0.0, 0.0), used("n1", "n1-gpu-1", 0.0, 0.0)],
    )
    d = diagnose(s, st)
    f = finding(d, "node", "n1", "empty-node")
    assert f.wasted_gpu_hours == 48.0  # 2 GPUs × 24 h
    assert f.wasted_money == pytest.approx(48 * 5.0)  # costPerHour 10 $ / 2 GPUs
    assert f.fixes == (
        "remove label tensor-fusion.ai/do-not-disrupt=true from GPUNode/Node n1: compaction skips it",
        "node compaction releases it every TensorFusionCluster c "
        "spec.gpuPools[gpu].specTemplate.nodeManagerConfig.nodeCompaction.period (now 5m)",
        'now: kubectl annotate gpupool c-gpu --overwrite tensor-fusion.ai/manual-compaction="$(date -u +%Y-%m-%dT%H:%M:%SZ)"',
        "AutoSelect pool: compaction only labels the Node tensor-fusion.ai/should-delete=true; "
        "a node autoscaler must remove it",
    )
    assert classes(d)["node n1"] == ("empty-node",)
    assert classes(d)["node n2"] == ("no-data",)  # allocation known, usage not: nothing decided
    assert d.totals.capacity_gpu_hours == 48.0


def test_zero_allocation_with_a_worker_now_is_not_empty() -> None:
    st = cluster(worker("late", ["n1-gpu-0"], pool="c-gpu", tflops=10, vram="1Gi"))
    d = diagnose(step1(nodes=[alloc("n1", 0.0, 0.0, "c-gpu")]), st)
    assert [f for f in d.findings if f.cls == "empty-node"] == []


def test_idle_reservation_on_gpu_and_workload() -> None:
    st = cluster(
        workload("nb", "research", "c-gpu", qos="low", tflops=100, vram="10Gi"),
        worker(
            "nb-w",
            ["n1-gpu-0"],
            namespace="research",
            workload="nb",
            pool="c-gpu",
            qos="low",
            tflops=100,
            vram="10Gi",
        ),
    )
    s = step1(
        gpus=[used("n1", "n1-gpu-0", 0.5, 2.0, 1 * GI)],
        requests=[WorkloadRequest("research", "nb", 100.0, 10 * GI, 1.0, 1, 1440)],
        usage=[WorkloadUsage("research", "nb", 0.5, 0.9, 1 * GI, 1440)],
    )
    d = diagnose(s, st)
    g = finding(d, "gpu", "n1-gpu-0", "idle-reservation")
    assert g.wasted_gpu_hours == pytest.approx(100 / 312 * 24)  # the whole reservation, 24 h
    assert g.detail == "32.1% reserved by research/nb-w but compute 0.5% and VRAM peak 2%"
    w = finding(d, "workload", "research/nb", "idle-reservation")
    assert w.wasted_gpu_hours == pytest.approx((100 / 312 - 1 / 80) * 24)
    assert w.wasted_money == pytest.approx((100 / 312 - 1 / 80) * 24 * A100_PRICE)
    assert w.fixes == (
        "freeze it while idle: SchedulingConfigTemplate tpl spec.hypervisor.autoFreezeAndResume.autoFreeze: "
        "[{qos: low, enable: true}]",
        "or scale research/nb to zero when unused: TensorFusionWorkload spec.replicas: 0",
        "or schedule it: TensorFusionWorkload spec.autoScalingConfig.cronScalingRules",
    )
    assert classes(d)["workload research/nb"] == ("idle-reservation",)  # not also over-request


def test_saturation_and_node_over_request() -> None:
    st = cluster()
    s = step1(
        nodes=[alloc("n1", 80.0, 60.0, "c-gpu"), alloc("n2", 90.0, 50.0, "c-gpu")],
        gpus=[
            used("n1", "n1-gpu-0", 70.0, 50.0),
            used("n1", "n1-gpu-1", 80.0, 50.0),
            used("n2", "n2-gpu-0", 10.0, 5.0),
            used("n2", "n2-gpu-1", 5.0, 5.0),
        ],
    )
    d = diagnose(s, st)
    sat = finding(d, "node", "n1", "saturation")
    assert (sat.detail, sat.wasted_gpu_hours) == ("TFLOPS 80% allocated and compute 75% used", 0.0)
    assert sat.fixes == (
        "raise TensorFusionCluster c spec.gpuPools[gpu].specTemplate.capacityConfig.maxResources and warmResources",
        "AutoSelect pool: label more GPU nodes to match TensorFusionCluster c "
        "spec.gpuPools[gpu].specTemplate.nodeManagerConfig.nodeSelector",
    )
    over = finding(d, "node", "n2", "over-request")
    assert over.detail == "TFLOPS 90% allocated but compute only 7.5% used"
    assert over.wasted_gpu_hours == pytest.approx((90 - 7.5) / 100 * 48)
    assert classes(d)["node n1"] == ("saturation",) and classes(d)["node n2"] == ("over-request",)


def test_fragmentation_needs_two_partly_used_nodes() -> None:
    st = cluster()
    one = diagnose(step1(nodes=[alloc("n1", 20.0, 30.0, "c-gpu"), alloc("n2", 60.0, 50.0, "c-gpu")]), st)
    assert [f.cls for f in one.findings] == []
    two = diagnose(step1(nodes=[alloc("n1", 20.0, 30.0, "c-gpu"), alloc("n2", 40.0, 10.0, "c-gpu")]), st)
    assert [(f.name, f.cls) for f in two.findings] == [("n1", "fragmentation"), ("n2", "fragmentation")]
    assert finding(two, "node", "n1", "fragmentation").wasted_gpu_hours == pytest.approx(0.7 * 48)


def test_under_request_workload_raises_request_and_limit() -> None:
    st = cluster(
        workload("api", pool="c-gpu", tflops=20, vram="8Gi", tflops_limit=40),
        worker("api-w", ["n1-gpu-0"], workload="api", pool="c-gpu", tflops=20, vram="8Gi", tflops_limit=40),
    )
    s = step1(
        gpus=[used("n1", "n1-gpu-0", 12.0, 10.0)],  # 12 % of 312 TFLOPS vs 6.4 % allocated
        requests=[WorkloadRequest("default", "api", 20.0, 8 * GI, 1.0, 1, 1440)],
        usage=[WorkloadUsage("default", "api", 30.0, 39.0, 9 * GI, 1440)],
    )
    d = diagnose(s, st)
    f = finding(d, "workload", "default/api", "under-request")
    assert f.wasted_gpu_hours == 0.0
    assert f.fixes[:3] == (
        "raise tensor-fusion.ai/tflops-request to 35 (average 30 > request 20 TFLOPS per GPU)",
        "raise tensor-fusion.ai/tflops-limit to 46 (peak 39 vs limit 40)",
        "raise tensor-fusion.ai/vram-request to 11Gi (peak 9Gi > request 8Gi)",
    )
    assert f.detail.endswith("; peak at 97.5% of its 40 TFLOPS limit")
    assert classes(d)["gpu n1-gpu-0"] == ("under-request",)


def test_vram_only_over_request_targets_vram() -> None:
    st = cluster(
        workload("emb", pool="c-gpu", tflops=40, vram="40Gi"),
        worker("emb-w", ["n1-gpu-0"], workload="emb", pool="c-gpu", tflops=40, vram="40Gi"),
    )
    s = step1(
        requests=[WorkloadRequest("default", "emb", 40.0, 40 * GI, 1.0, 1, 720)],  # 12 h of rows
        usage=[WorkloadUsage("default", "emb", 30.0, 35.0, 4 * GI, 720)],
    )
    d = diagnose(s, st)
    f = finding(d, "workload", "default/emb", "over-request")
    assert "tensor-fusion.ai/autoscale-target: vram" in f.fixes[0]
    assert f.fixes[1] == "or lower tensor-fusion.ai/vram-request to 5Gi (peak 4Gi × 1.15)"
    assert f.wasted_gpu_hours == pytest.approx((0.5 - 30 / 312) * 12)  # held 40/80, needed 30/312 TFLOPS


def test_hours_are_capped_at_the_window_and_unknown_prices_stay_unknown() -> None:
    st = build(
        [
            pool("p"),
            *host("x1", "p", model="Acme X1", tflops=100, vram="40Gi"),
            workload("a", tflops=50, vram="20Gi"),
            worker("a-w", ["x1-gpu-0"], workload="a", tflops=50, vram="20Gi"),
        ]
    )
    s = step1(
        requests=[
            WorkloadRequest("default", "a", 50.0, 20 * GI, 1.0, 1, 5000)
        ],  # more rows than 1 worker-day
        usage=[WorkloadUsage("default", "a", 5.0, 6.0, 2 * GI, 5000)],
    )
    d = diagnose(s, st)
    f = finding(d, "workload", "default/a", "over-request")
    assert f.wasted_gpu_hours == pytest.approx((0.5 - 0.05) * 24)
    assert f.wasted_money is None
    assert d.totals.unpriced == 1 and d.totals.requests_money == 0.0


def test_missing_data_is_no_data_never_a_decision() -> None:
    st = cluster(
        workload("app", pool="c-gpu"),
        worker("app-w", ["n1-gpu-0"], workload="app", pool="c-gpu"),
    )
    s = step1(
        nodes=[alloc("n1", 30.0, 30.0, "c-gpu", samples=0)],  # a row with no samples is no row
        requests=[WorkloadRequest("default", "app", 10.0, GI, 1.0, 1, 1440)],  # usage missing
    )
    d = diagnose(s, st)
    assert d.findings == ()
    assert set(classes(d).values()) == {("no-data",)}


def test_everything_measured_and_fine_is_ok() -> None:
    st = cluster(
        workload("app", pool="c-gpu", tflops=100, vram="20Gi"),
        worker("app-w", ["n1-gpu-0"], workload="app", pool="c-gpu", tflops=100, vram="20Gi"),
    )
    s = step1(
        nodes=[alloc("n1", 50.0, 45.0, "c-gpu")],
        gpus=[used("n1", "n1-gpu-0", 30.0, 22.0), used("n1", "n1-gpu-1", 28.0, 20.0)],
        requests=[WorkloadRequest("default", "app", 100.0, 20 * GI, 1.0, 1, 1440)],
        usage=[WorkloadUsage("default", "app", 80.0, 90.0, 18 * GI, 1440)],
    )
    d = diagnose(s, st)
    c = classes(d)
    assert (c["node n1"], c["gpu n1-gpu-0"], c["workload default/app"]) == (("ok",), ("ok",), ("ok",))
    (n1,) = [n for n in d.nodes if n.name == "n1"]
    assert n1.compute_used_pct == pytest.approx(29.0) and n1.vram_peak_pct == 22.0


def test_num_keeps_small_figures_readable() -> None:
    assert [num(x) for x in (12.48, 20.0, 0.04, -0.0001, 1234.56)] == ["12.5", "20", "0.04", "0", "1234.6"]


def test_the_demo_simulators_intended_profiles_are_recognised() -> None:
    """Each demo workload carries the usage profile it was generated with; the diagnosis must find it."""
    from tftui.sources.sim.cluster import SimCluster
    from tftui.sources.sim.scenarios import PROFILE_ANNOTATION
    from tftui.sources.sim.step1 import SimStep1
    from tftui.sources.sim.usage import SimMetrics

    sim = SimCluster(seed=7, nodes=8, now=NOW)
    st = build(sim.snapshot())
    port = SimStep1(SimMetrics(sim.snapshot(), seed=7, now=NOW))
    cap = {n: (g.capacity.tflops, g.capacity.vram) for n, g in st.gpus.items()}
    d = diagnose(port.step1(DAY, NOW, cap), st)
    expected = {
        "idle": {("idle-reservation",)},
        "over-request": {("over-request",)},
        "right-sized": {("ok",)},
    }
    seen: set[str] = set()
    for w in d.workloads:
        obj = st.workloads[w.key].obj or {}
        profile = (obj["metadata"].get("annotations") or {}).get(PROFILE_ANNOTATION)
        if profile in expected:
            seen.add(profile)
            assert w.classes in expected[profile], (w.key, profile, w.classes)
    assert seen == set(expected)
