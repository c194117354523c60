"""The embedded demo cluster: the GPU table, determinism, the port and composition.

Its self-consistency, recomputed independently: test_sim_consistency.py; its usage history:
test_sim_usage.py.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import timedelta
from decimal import Decimal

from tests.sim_support import ISOLATION, NOW, TF, Index, Obj, q, ts

# fixtures, imported under their own names (which marks them as used) for pytest to find them here
from tests.sim_support import ix as ix
from tests.sim_support import objs as objs
from tftui.model.gpuinfo import by_full_name, by_short_name, lookup
from tftui.sources.ports import ClusterPort, MetricsPort
from tftui.sources.sim.cluster import SimCluster, format_bytes, format_tflops, generate_objects
from tftui.sources.sim.scenarios import PROFILE_ANNOTATION, PROFILES
from tftui.sources.sim.usage import SimMetrics

# -- GPU table and quantities ------------------------------------------------------------------


def test_gpu_table_lookups() -> None:
    h100 = by_full_name("NVIDIA H100 80GB HBM3")
    assert (
        h100 is not None and h100.tflops == 989 and h100.price_per_hour == 2.99 and h100.model == "H100_SXM"
    )
    rtx = by_short_name("rtx4090")
    assert rtx is not None and rtx.tflops_milli == 165160 and rtx.full_name == "NVIDIA GeForce RTX 4090"
    family = by_short_name("H100")
    assert family is not None and family.model == "H100_SXM"
    assert lookup("NVIDIA A100-SXM4-80GB") == by_short_name("A100_SXM_80G")
    assert lookup("NVIDIA L40S") is not None and lookup("no such gpu") is None


def test_quantity_helpers() -> None:
    assert format_bytes(81920 << 20) == "80Gi"
    assert format_bytes(81559 << 20) == "81559Mi"
    assert format_bytes(1 << 40) == "1Ti"
    assert format_bytes(1000) == "1k"  # Kubernetes canonical form of a BinarySI value below 1Ki
    assert format_tflops(165160) == "165160m" and format_tflops(989000) == "989"
    assert format_tflops(3000000) == "3k"


# -- determinism and the port ------------------------------------------------------------------


def test_same_args_give_identical_json_and_other_seed_differs(objs: list[Obj]) -> None:
    first = json.dumps(objs, sort_keys=False)
    assert json.dumps(generate_objects(), sort_keys=False) == first
    assert json.dumps(generate_objects(seed=8)) != first
    later = generate_objects(now=NOW + timedelta(days=1))
    assert max(
        o["metadata"]["creationTimestamp"] for o in later if "creationTimestamp" in o["metadata"]
    ) > max(o["metadata"]["creationTimestamp"] for o in objs if "creationTimestamp" in o["metadata"])


def test_sim_cluster_is_a_cluster_port(objs: list[Obj]) -> None:
    sim = SimCluster()
    port: ClusterPort = sim
    assert port.describe() == "demo"
    assert json.dumps(port.snapshot()) == json.dumps(objs)
    assert port.snapshot() is not port.snapshot()  # callers may not shrink our copy
    metrics_port: MetricsPort = SimMetrics(objs)
    assert metrics_port.latest_gpu_usage(NOW)


# -- composition -------------------------------------------------------------------------------


def test_counts(ix: Index) -> None:
    assert len(ix.kind["Node"]) == 43 and len(ix.kind["GPUNode"]) == 43  # 40 + the isolation pool's 3
    assert 190 <= len(ix.kind["GPU"]) <= 240
    assert 130 <= len(ix.kind["TensorFusionWorkload"]) <= 170
    assert 1 <= len(ix.kind["WorkloadProfile"]) <= 6
    assert len(ix.kind["TensorFusionCluster"]) == 1
    for w in ix.kind["TensorFusionWorkload"]:
        assert 1 <= w["spec"]["replicas"] <= 3
    counts = Counter(w["spec"]["gpuCount"] for w in ix.kind["TensorFusionWorkload"])
    assert counts[1] > counts[2] > 0
    two = {w["spec"].get("gpuModel") for w in ix.kind["TensorFusionWorkload"] if w["spec"]["gpuCount"] == 2}
    assert two == {"H100", "A100"}


def test_pools_and_provisioning(ix: Index) -> None:
    cluster = ix.kind["TensorFusionCluster"][0]
    modes = {
        p["name"]: p["specTemplate"]["nodeManagerConfig"]["provisioningMode"]
        for p in cluster["spec"]["gpuPools"]
    }
    assert modes == {
        "inference": "AutoSelect",
        "training": "Provisioned",
        "dev": "Karpenter",
        "isolation": "AutoSelect",
    }
    assert set(ix.pools) == {"demo-inference", "demo-training", "demo-dev", ISOLATION}
    templates = {
        t["metadata"]["name"]: t["spec"]["placement"]["mode"] for t in ix.kind["SchedulingConfigTemplate"]
    }
    expected = {
        "demo-inference": "NodeCompactGPULowLoad",
        "demo-training": "CompactFirst",
        "demo-dev": "LowLoadFirst",
        ISOLATION: "NodeCompactGPULowLoad",
    }
    for name, pool in ix.pools.items():
        spec_tpl = next(p for p in cluster["spec"]["gpuPools"] if f"demo-{p['name']}" == name)["specTemplate"]
        assert pool["spec"] == spec_tpl
        assert pool["metadata"]["labels"][f"{TF}/managed-by"] == "demo"
        assert pool["metadata"]["annotations"][f"{TF}/is-default-pool"] in ("true", "false")
        assert templates[pool["spec"]["schedulingConfigTemplate"]] == expected[name]
        cap = pool["spec"]["capacityConfig"]
        assert {"minResources", "warmResources", "maxResources", "oversubscription"} <= set(cap)
        assert q(cap["minResources"]["tflops"]) <= q(cap["maxResources"]["tflops"])
        assert pool["spec"]["nodeManagerConfig"]["nodeCompaction"]["period"]
        assert pool["status"]["phase"] == "Running"
    assert [p["metadata"]["annotations"][f"{TF}/is-default-pool"] for p in ix.pools.values()].count(
        "true"
    ) == 1

    # GPUNodeClaims exist exactly for the Provisioned and Karpenter pools, one per node, Bound
    claims = {c["metadata"]["name"]: c for c in ix.kind["GPUNodeClaim"]}
    for name, gn in ix.gpunodes.items():
        claim = gn["metadata"]["labels"].get(f"{TF}/node-provisioner")
        if ix.pool_of_node(name) in ("demo-inference", ISOLATION):  # AutoSelect: no claims
            assert claim is None
        else:
            assert claims[claim]["spec"]["nodeName"] == name and claims[claim]["status"]["phase"] == "Bound"
            assert ix.nodes[name]["metadata"]["labels"][f"{TF}/node-provisioner"] == claim
    assert len(claims) == sum(
        1 for n in ix.gpunodes if ix.pool_of_node(n) not in ("demo-inference", ISOLATION)
    )


def test_gpu_models_per_pool(ix: Index) -> None:
    expected = {
        "NVIDIA H100 80GB HBM3": ("demo-inference", Decimal(989), 81559 << 20, 8, "p5.48xlarge"),
        "NVIDIA L40S": ("demo-inference", Decimal(365), 46068 << 20, 4, "g6e.12xlarge"),
        "NVIDIA A100-SXM4-80GB": ("demo-training", Decimal(312), 81920 << 20, 8, "p4de.24xlarge"),
        "NVIDIA GeForce RTX 4090": ("demo-dev", Decimal("165.16"), 24564 << 20, 4, None),
        "NVIDIA A100 80GB PCIe": (ISOLATION, Decimal(312), 81920 << 20, 4, "a100-pcie-80g-x4"),
    }
    seen = set()
    for node, gpus in ix.gpus_of_node.items():
        models = {g["status"]["gpuModel"] for g in gpus}
        assert len(models) == 1
        model = models.pop()
        pool, tflops, vram, count, instance = expected[model]
        seen.add(model)
        assert ix.pool_of_node(node) == pool and len(gpus) == count
        assert sorted(g["status"]["index"] for g in gpus) == list(range(count))
        if instance:
            assert ix.nodes[node]["metadata"]["labels"]["node.kubernetes.io/instance-type"] == instance
        for g in gpus:
            assert (
                q(g["status"]["capacity"]["tflops"]) == tflops and q(g["status"]["capacity"]["vram"]) == vram
            )
            assert g["metadata"]["name"] == g["status"]["uuid"] and re.fullmatch(
                r"gpu-[0-9a-f-]{36}", g["metadata"]["name"]
            )
            assert g["metadata"]["labels"] == {f"{TF}/managed-by": node, f"{TF}/gpupool": pool}
            assert g["status"]["vendor"] == "NVIDIA" and g["status"]["message"] == "managed"
    assert seen == set(expected)
    rtx = next(g for g in ix.kind["GPU"] if g["status"]["gpuModel"] == "NVIDIA GeForce RTX 4090")
    assert rtx["status"]["capacity"]["tflops"] == "165160m"


def test_dev_pool_defrag_and_fragmentation(ix: Index) -> None:
    dev = ix.pools["demo-dev"]["spec"]["nodeManagerConfig"]["nodeCompaction"]
    assert dev == {
        "period": "5m",
        "defrag": {
            "enabled": True,
            "schedule": "0 3 * * *",
            "timezone": "America/New_York",
            "maxDuration": "2h",
            "utilizationThresholdPercent": 40,
        },
    }
    for name in ("demo-inference", "demo-training"):
        assert (
            not ix.pools[name]["spec"]["nodeManagerConfig"]["nodeCompaction"].get("defrag", {}).get("enabled")
        )
    dev_nodes = [n for n in ix.gpunodes if ix.pool_of_node(n) == "demo-dev"]
    used = {
        n: sum(1 for g in ix.gpus_of_node[n] if ix.workers_of_gpu[g["metadata"]["name"]]) for n in dev_nodes
    }
    assert sum(1 for v in used.values() if v == 0) >= 2
    assert sum(1 for v in used.values() if v == 1) >= len(dev_nodes) // 2
    for n in dev_nodes:  # small workers only
        for p in ix.workers_of_node[n]:
            assert q(p["metadata"]["annotations"][f"{TF}/tflops-request"]) <= 40


def test_special_nodes(ix: Index) -> None:
    dnd_gpunode = [
        n for n, o in ix.gpunodes.items() if o["metadata"]["labels"].get(f"{TF}/do-not-disrupt") == "true"
    ]
    dnd_node_only = [
        n
        for n, o in ix.nodes.items()
        if o["metadata"]["labels"].get(f"{TF}/do-not-disrupt") == "true" and n not in dnd_gpunode
    ]
    assert 2 <= len(dnd_gpunode) <= 3 and len(dnd_node_only) == 1
    young = [
        n
        for n, o in ix.gpunodes.items()
        if ts(o["metadata"]["creationTimestamp"]) > NOW - timedelta(minutes=5)
    ]
    assert 2 <= len(young) <= 4
    empty = [n for n in ix.gpunodes if not ix.workers_of_node[n]]
    assert len(empty) >= 2
    cordoned = [n for n, o in ix.nodes.items() if o["spec"].get("unschedulable")]
    assert len(cordoned) >= 2
    for n in ix.nodes.values():
        labels = n["metadata"]["labels"]
        assert (
            labels["nvidia.com/gpu.present"] == "true"
            and labels["kubernetes.io/hostname"] == n["metadata"]["name"]
        )
        assert (
            {"cpu", "memory", "nvidia.com/gpu"}
            <= set(n["status"]["capacity"])
            <= set(n["status"]["capacity"])
        )
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])


def test_native_gpu_pods(ix: Index) -> None:
    """2–3 pods of the device plugin on the generated pools, one holding a MIG slice on the isolation
    pool's MIG node (a resource only the ProviderConfig names)."""
    assert 3 <= len(ix.native) <= 4
    (provider,) = ix.kind["ProviderConfig"]
    in_use = set(provider["spec"]["inUseResourceNames"])
    mig = [
        p for p in ix.native if "nvidia.com/mig-1g.10gb" in p["spec"]["containers"][0]["resources"]["limits"]
    ]
    assert len(mig) == 1 and mig[0]["spec"]["nodeName"] == "iso-a100-03"
    for pod in ix.native:
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert [v for k, v in limits.items() if k in in_use] == ["1"]
        assert f"{TF}/component" not in pod["metadata"].get("labels", {})
        node = pod["spec"]["nodeName"]
        held = [g for g in ix.gpus_of_node[node] if g["status"]["usedBy"] == "nvidia-device-plugin"]
        assert len(held) == 1
        assert held[0]["status"]["runningApps"] == [] and not ix.workers_of_gpu[held[0]["metadata"]["name"]]
    assert sum(1 for g in ix.kind["GPU"] if g["status"]["usedBy"] == "nvidia-device-plugin") == len(ix.native)


def test_profiles_present(ix: Index) -> None:
    profiles = Counter(
        w["metadata"]["annotations"][PROFILE_ANNOTATION] for w in ix.kind["TensorFusionWorkload"]
    )
    assert set(profiles) == set(PROFILES)
    assert all(c >= 5 for c in profiles.values())
    autoscaled = [w for w in ix.kind["TensorFusionWorkload"] if w["spec"].get("autoScalingConfig")]
    assert autoscaled and all(
        w["spec"]["autoScalingConfig"]["autoSetResources"]["enable"] for w in autoscaled
    )
    namespaces = {w["metadata"]["namespace"] for w in ix.kind["TensorFusionWorkload"]}
    assert {"ml-serving", "ml-batch", "research", "recsys", "speech", "vision"} <= namespaces
