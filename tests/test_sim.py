"""The embedded demo cluster: determinism, composition, upstream arithmetic and usage history.

Every status figure is recomputed here from the pods and GPUs with an independent quantity parser,
so a generator bug cannot hide behind its own helpers.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from tftui.model.gpuinfo import by_full_name, by_short_name, lookup
from tftui.sources.ports import ClusterPort, MetricsPort
from tftui.sources.sim.cluster import (
    DEFAULT_NOW,
    SimCluster,
    format_bytes,
    format_tflops,
    generate_objects,
)
from tftui.sources.sim.scenarios import PROFILE_ANNOTATION, PROFILES, local_hour, pool_timezone
from tftui.sources.sim.usage import GPU_DRIVER_OVERHEAD_BYTES, SimMetrics

TF = "tensor-fusion.ai"
NOW = DEFAULT_NOW
Obj = dict[str, Any]

_SUFFIX: dict[str, Decimal] = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(1000),
    "Ki": Decimal(1 << 10),
    "Mi": Decimal(1 << 20),
    "Gi": Decimal(1 << 30),
    "Ti": Decimal(1 << 40),
}


def q(value: str) -> Decimal:
    """Independent quantity parser for the suffixes the demo may use."""
    m = re.fullmatch(r"(-?\d+)(m|k|Ki|Mi|Gi|Ti)?", value)
    assert m, f"unexpected quantity {value!r}"
    return Decimal(m.group(1)) * _SUFFIX[m.group(2) or ""]


def ts(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


ISOLATION = "demo-isolation"  # the pool with hard, shared and partitioned workers (not scaled by `nodes`)


def ann_tflops(p: Obj, cap_t: Decimal, which: str = "request") -> Decimal:
    """A worker's per-device TFLOPS request (or limit) as the allocator reads it: the annotation, or a
    compute percent of the GPU's capacity truncated to whole TFLOPS."""
    ann = p["metadata"]["annotations"]
    if ann.get(f"{TF}/tflops-{which}"):
        return q(ann[f"{TF}/tflops-{which}"])
    pct = ann.get(f"{TF}/compute-percent-{which}")
    return Decimal(int(Decimal(pct) * cap_t / 100)) if pct else Decimal(0)


def booked(ix: Index, p: Obj, gpu: Obj) -> tuple[Decimal, Decimal]:
    """What a worker takes from one GPU: all of it when shared, its MIG profile's compute share
    (rounded to 0.01 TFLOPS) and memory when partitioned, else its request."""
    ann = p["metadata"]["annotations"]
    cap_t, cap_v = q(gpu["status"]["capacity"]["tflops"]), q(gpu["status"]["capacity"]["vram"])
    if ann.get(f"{TF}/isolation") == "shared":
        return cap_t, cap_v
    if ann.get(f"{TF}/isolation") == "partitioned":
        (provider,) = ix.kind["ProviderConfig"]
        t = next(
            t for t in provider["spec"]["virtualizationTemplates"] if t["name"] == ann[f"{TF}/partition-id"]
        )
        return (Decimal(t["computePercent"]) * cap_t / 100).quantize(Decimal("0.01")), Decimal(
            t["memoryGigabytes"] << 30
        )
    return ann_tflops(p, cap_t), q(ann[f"{TF}/vram-request"])


class Index:
    """The joins the console makes, done by hand."""

    def __init__(self, objs: list[Obj]) -> None:
        self.objs = objs
        self.kind: dict[str, list[Obj]] = defaultdict(list)
        for o in objs:
            self.kind[o["kind"]].append(o)
        self.pools = {p["metadata"]["name"]: p for p in self.kind["GPUPool"]}
        self.nodes = {n["metadata"]["name"]: n for n in self.kind["Node"]}
        self.gpunodes = {n["metadata"]["name"]: n for n in self.kind["GPUNode"]}
        self.gpus = {g["metadata"]["name"]: g for g in self.kind["GPU"]}
        self.workers = [
            p for p in self.kind["Pod"] if p["metadata"].get("labels", {}).get(f"{TF}/component") == "worker"
        ]
        self.native = [
            p for p in self.kind["Pod"] if f"{TF}/component" not in p["metadata"].get("labels", {})
        ]
        self.workloads = {
            (w["metadata"]["namespace"], w["metadata"]["name"]): w for w in self.kind["TensorFusionWorkload"]
        }
        self.gpus_of_node: dict[str, list[Obj]] = defaultdict(list)
        for g in self.kind["GPU"]:
            self.gpus_of_node[g["status"]["nodeSelector"]["kubernetes.io/hostname"]].append(g)
        self.workers_of_gpu: dict[str, list[Obj]] = defaultdict(list)
        self.workers_of_node: dict[str, list[Obj]] = defaultdict(list)
        for p in self.workers:
            self.workers_of_node[p["spec"]["nodeName"]].append(p)
            for gid in p["metadata"]["annotations"][f"{TF}/gpu-ids"].split(","):
                self.workers_of_gpu[gid].append(p)

    def pool_of_node(self, node: str) -> str:
        return self.gpunodes[node]["metadata"]["labels"][f"{TF}/managed-by"]


@pytest.fixture(scope="module")
def objs() -> list[Obj]:
    return generate_objects()


@pytest.fixture(scope="module")
def ix(objs: list[Obj]) -> Index:
    return Index(objs)


@pytest.fixture(scope="module")
def metrics(objs: list[Obj]) -> SimMetrics:
    return SimMetrics(objs)


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


# -- self-consistency ---------------------------------------------------------------------------


def check_gpus(ix: Index, gpus: list[Obj]) -> None:
    """GPU.available = capacity − Σ requests of the workers that name it (a shared worker, alone on
    its GPU, takes all of it); runningApps agree."""
    for g in gpus:
        name = g["metadata"]["name"]
        cap, avail = g["status"]["capacity"], g["status"]["available"]
        pods = ix.workers_of_gpu[name]
        takes = [booked(ix, p, g) for p in pods]
        req_t, req_v = sum(t for t, _ in takes), sum(v for _, v in takes)
        if any(p["metadata"]["annotations"].get(f"{TF}/isolation") == "shared" for p in pods):
            assert len(pods) == 1, f"{name}: a shared worker shares its GPU"
        assert q(avail["tflops"]) == q(cap["tflops"]) - req_t, name
        assert q(avail["vram"]) == q(cap["vram"]) - req_v, name
        assert q(avail["tflops"]) >= 0 and q(avail["vram"]) >= 0, f"{name} over-allocated"
        apps = {(a["namespace"], pod["name"]) for a in g["status"]["runningApps"] for pod in a["pods"]}
        assert apps == {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}
        for a in g["status"]["runningApps"]:
            assert a["count"] == len(a["pods"])
        if pods:
            assert g["status"]["usedBy"] == "tensor-fusion"


def node_sums(ix: Index, node: str, pool: Obj) -> dict[str, Decimal]:
    """A GPUNode's status recomputed from its GPUs, its workers and the pool's oversubscription."""
    gn = ix.gpunodes[node]
    gpus = ix.gpus_of_node[node]
    over = pool["spec"]["capacityConfig"]["oversubscription"]
    total_t = sum(q(g["status"]["capacity"]["tflops"]) for g in gpus)
    total_v = sum(q(g["status"]["capacity"]["vram"]) for g in gpus)
    ram, disk = int(gn["status"]["nodeInfo"]["ramSize"]), int(gn["status"]["nodeInfo"]["dataDiskSize"])
    virt_t = total_t * over["tflopsOversellRatio"] / 100
    virt_v = total_v + ram * over["vramExpandToHostMem"] // 100 + disk * over["vramExpandToHostDisk"] // 100
    pods = ix.workers_of_node[node]
    cap_t = q(gpus[0]["status"]["capacity"]["tflops"]) if gpus else Decimal(0)
    lim_t = sum(ann_tflops(p, cap_t, "limit") for p in pods)  # once per worker
    lim_v = sum(q(p["metadata"]["annotations"][f"{TF}/vram-limit"]) for p in pods)
    return {
        "totalTFlops": total_t,
        "totalVRAM": total_v,
        "availableTFlops": sum(q(g["status"]["available"]["tflops"]) for g in gpus),
        "availableVRAM": sum(q(g["status"]["available"]["vram"]) for g in gpus),
        "virtualTFlops": virt_t,
        "virtualVRAM": Decimal(virt_v),
        "virtualAvailableTFlops": virt_t - lim_t,
        "virtualAvailableVRAM": virt_v - lim_v,
    }


def check_nodes_and_pools(ix: Index, nodes: list[str]) -> None:
    for node in nodes:
        gn = ix.gpunodes[node]
        pool = ix.pools[ix.pool_of_node(node)]
        assert gn["metadata"]["labels"][f"{TF}/pool-{pool['metadata']['name']}"] == "true"
        for key, value in node_sums(ix, node, pool).items():
            assert q(gn["status"][key]) == value, (node, key)
        assert gn["status"]["virtualAvailableTFlops"][0] != "-", f"{node}: limits exceed virtual TFLOPS"
        gpus = ix.gpus_of_node[node]
        assert gn["status"]["totalGPUs"] == len(gpus) == gn["status"]["managedGPUs"]
        assert set(gn["status"]["managedGPUDeviceIDs"]) == {g["metadata"]["name"] for g in gpus}
        assert gn["status"]["totalGPUPods"] == len(ix.workers_of_node[node])
        assert gn["spec"]["costPerHour"] and gn["status"]["phase"] == "Running"


def check_pool_totals(ix: Index) -> None:
    keys = ("totalTFlops", "totalVRAM", "availableTFlops", "availableVRAM", "virtualTFlops", "virtualVRAM",
            "virtualAvailableTFlops", "virtualAvailableVRAM")  # fmt: skip
    grand: dict[str, Decimal] = defaultdict(Decimal)
    for name, pool in ix.pools.items():
        members = [n for n in ix.gpunodes if ix.pool_of_node(n) == name]
        st = pool["status"]
        assert st["totalNodes"] == len(members) == st["readyNodes"]
        assert st["totalGPUs"] == sum(ix.gpunodes[n]["status"]["totalGPUs"] for n in members)
        assert st["runningAppsCnt"] == sum(ix.gpunodes[n]["status"]["totalGPUPods"] for n in members)
        for key in keys:
            value = sum(q(ix.gpunodes[n]["status"][key]) for n in members)
            assert q(st[key]) == value, (name, key)
            grand[key] += value
    cst = ix.kind["TensorFusionCluster"][0]["status"]
    assert (
        cst["totalPools"] == len(ix.pools)
        and cst["totalNodes"] == len(ix.gpunodes)
        and cst["totalGPUs"] == len(ix.gpus)
    )
    for key in keys:
        assert q(cst[key]) == grand[key], key


def check_workers(ix: Index, pods: list[Obj]) -> None:
    for p in pods:
        ann = p["metadata"]["annotations"]
        node = p["spec"]["nodeName"]
        ids = ann[f"{TF}/gpu-ids"].split(",")
        assert len(ids) == len(set(ids)) == int(ann[f"{TF}/gpu-count"])
        for gid in ids:
            gpu = ix.gpus[gid]
            assert gpu["status"]["nodeSelector"]["kubernetes.io/hostname"] == node
            assert p["metadata"]["creationTimestamp"] >= gpu["metadata"]["creationTimestamp"]
        wl_name = p["metadata"]["labels"][f"{TF}/workload"]
        wl = ix.workloads[(p["metadata"]["namespace"], wl_name)]
        (owner,) = p["metadata"]["ownerReferences"]
        assert (
            owner["kind"] == "TensorFusionWorkload"
            and owner["name"] == wl_name
            and owner["controller"] is True
        )
        assert owner["uid"] == wl["metadata"]["uid"]
        assert ann[f"{TF}/gpupool"] == wl["spec"]["poolName"] == ix.pool_of_node(node)
        if f"{TF}/tflops-request" in ann:
            assert q(ann[f"{TF}/tflops-request"]) == q(wl["spec"]["resources"]["requests"]["tflops"])
        else:  # a compute-percent workload
            assert q(ann[f"{TF}/compute-percent-request"]) == q(
                wl["spec"]["resources"]["requests"]["compute"]
            )
        assert ann.get(f"{TF}/isolation") == wl["spec"]["isolation"]
        assert q(ann[f"{TF}/vram-limit"]) == q(wl["spec"]["resources"]["limits"]["vram"])
        assert q(ann[f"{TF}/vram-limit"]) <= q(ix.gpus[ids[0]]["status"]["capacity"]["vram"])
        assert ann[f"{TF}/qos"] == wl["spec"]["qos"] and int(ann[f"{TF}/gpu-count"]) == wl["spec"]["gpuCount"]
        assert p["spec"]["schedulerName"] == "tensor-fusion-scheduler" and p["status"]["phase"] == "Running"
        assert ts(p["metadata"]["creationTimestamp"]) >= ts(ix.nodes[node]["metadata"]["creationTimestamp"])
        assert ts(p["metadata"]["creationTimestamp"]) <= NOW


def test_gpus_consistent(ix: Index) -> None:
    check_gpus(ix, ix.kind["GPU"])


def test_nodes_pools_cluster_consistent(ix: Index) -> None:
    check_nodes_and_pools(ix, list(ix.gpunodes))
    check_pool_totals(ix)


def test_workers_consistent(ix: Index) -> None:
    check_workers(ix, ix.workers)
    per_wl = Counter(
        (p["metadata"]["namespace"], p["metadata"]["labels"][f"{TF}/workload"]) for p in ix.workers
    )
    for key, wl in ix.workloads.items():
        assert (
            per_wl[key]
            == wl["spec"]["replicas"]
            == wl["status"]["workerCount"]
            == wl["status"]["readyWorkers"]
        )
        assert wl["status"]["phase"] == "Running"
        limits = wl["spec"]["resources"]["limits"]
        assert limits.get("tflops") or limits.get("compute")
    ages = [NOW - ts(p["metadata"]["creationTimestamp"]) for p in ix.workers]
    assert (
        any(a < timedelta(hours=2) for a in ages) and sum(a > timedelta(days=1) for a in ages) > len(ages) / 2
    )


def test_pdbs_consistent(ix: Index) -> None:
    pdbs = {
        (p["metadata"]["namespace"], p["spec"]["selector"]["matchLabels"][f"{TF}/workload"]): p
        for p in ix.kind["PodDisruptionBudget"]
    }
    missing = [k for k in ix.workloads if k not in pdbs]
    assert 0.05 <= len(missing) / len(ix.workloads) <= 0.2
    ready = Counter(
        (p["metadata"]["namespace"], p["metadata"]["labels"][f"{TF}/workload"])
        for p in ix.workers
        if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"]["conditions"])
    )
    kinds: Counter[str] = Counter()
    for key, pdb in pdbs.items():
        wl, spec, st = ix.workloads[key], pdb["spec"], pdb["status"]
        assert pdb["apiVersion"] == "policy/v1"
        assert st["expectedPods"] == wl["spec"]["replicas"] and st["currentHealthy"] == ready[key]
        if "maxUnavailable" in spec:
            kinds["max"] += 1
            assert st["desiredHealthy"] == max(0, st["expectedPods"] - spec["maxUnavailable"])
        else:
            kinds["min"] += 1
            assert st["desiredHealthy"] == spec["minAvailable"]
        assert st["disruptionsAllowed"] == max(0, st["currentHealthy"] - st["desiredHealthy"])
    assert kinds["max"] > kinds["min"] > 0


# -- usage history ------------------------------------------------------------------------------

COLUMNS = {
    "tf_gpu_usage": {"uuid", "node", "pool", "compute_percentage", "memory_bytes", "memory_percentage",
                     "compute_tflops", "temperature", "power_usage", "rx", "tx", "ts"},
    "tf_worker_usage": {"workload", "worker", "pod_name", "namespace", "pool", "node", "uuid",
                        "compute_percentage", "memory_bytes", "memory_percentage", "compute_tflops", "ts"},
    "tf_node_metrics": {"node", "pool", "phase", "allocated_tflops", "allocated_tflops_percent",
                        "allocated_vram_bytes", "allocated_vram_percent", "allocated_tflops_percent_virtual",
                        "allocated_vram_percent_virtual", "raw_cost", "gpu_count", "ts"},
    "tf_worker_resources": {"worker", "workload", "pool", "namespace", "qos", "tflops_request", "tflops_limit",
                            "vram_bytes_request", "vram_bytes_limit", "gpu_count", "raw_cost", "ready", "ts"},
}  # fmt: skip


def at(metrics: SimMetrics, table: str, when: datetime) -> list[dict[str, Any]]:
    return list(metrics.rows(table, when, when + timedelta(seconds=1)))  # type: ignore[arg-type]


@pytest.mark.parametrize("table", sorted(COLUMNS))
def test_row_columns(metrics: SimMetrics, table: str) -> None:
    rows = at(metrics, table, NOW)
    assert rows
    for row in rows:
        assert set(row) == COLUMNS[table]
        assert row["ts"] == NOW
    assert isinstance(rows[0].get("memory_bytes", 0), int)


def test_rows_are_lazy_and_unknown_table_fails(metrics: SimMetrics) -> None:
    gen = metrics.rows("tf_gpu_usage", NOW - timedelta(days=30), NOW + timedelta(days=30))
    assert next(gen)["ts"] == NOW - timedelta(hours=24) + timedelta(minutes=1)
    with pytest.raises(ValueError):
        list(metrics.rows("tf_nope", NOW, NOW + timedelta(minutes=1)))  # type: ignore[arg-type]


def test_a_day_of_minute_samples_per_gpu(metrics: SimMetrics, ix: Index) -> None:
    counts: Counter[str] = Counter()
    last: dict[str, datetime] = {}
    for row in metrics.rows("tf_gpu_usage", NOW - timedelta(hours=24), NOW + timedelta(minutes=1)):
        uuid = row["uuid"]
        assert row["ts"] > last.get(uuid, NOW - timedelta(days=2))
        last[uuid] = row["ts"]
        counts[uuid] += 1
        assert 0 <= row["compute_percentage"] <= 100
        assert row["memory_percentage"] == 0.0 and row["compute_tflops"] == 0.0
    for name, g in ix.gpus.items():
        created = ts(g["metadata"]["creationTimestamp"])
        if created <= NOW - timedelta(hours=24):
            assert counts[name] == 24 * 60, name
        else:  # young nodes: rows only since the GPU exists
            assert 0 < counts[name] < 24 * 60
            first = created + (timedelta(seconds=60 - created.second) if created.second else timedelta())
            assert counts[name] == (NOW - first) // timedelta(minutes=1) + 1


def test_gpu_is_the_sum_of_its_workers(metrics: SimMetrics, ix: Index) -> None:
    for when in (NOW, NOW - timedelta(hours=9, minutes=17)):
        per_gpu: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in at(metrics, "tf_worker_usage", when):
            per_gpu[row["uuid"]].append(row)
        for row in at(metrics, "tf_gpu_usage", when):
            g = ix.gpus[row["uuid"]]
            cap_v = int(q(g["status"]["capacity"]["vram"]))
            workers = per_gpu.get(row["uuid"], [])
            if g["status"]["usedBy"] == "nvidia-device-plugin":
                assert not workers and row["compute_percentage"] > 1 and row["memory_bytes"] > 0
            elif workers:
                assert row["compute_percentage"] == pytest.approx(
                    min(100.0, sum(w["compute_percentage"] for w in workers)), abs=1e-6
                )
                assert row["memory_bytes"] == min(
                    cap_v, sum(w["memory_bytes"] for w in workers) + GPU_DRIVER_OVERHEAD_BYTES
                )
            else:
                assert row["compute_percentage"] == 0 and row["memory_bytes"] == 0
            assert row["memory_bytes"] <= cap_v


def test_worker_rows_match_pods(metrics: SimMetrics, ix: Index) -> None:
    rows = at(metrics, "tf_worker_usage", NOW)
    pods = {p["metadata"]["uid"]: p for p in ix.workers}
    per_pod = Counter(r["worker"] for r in rows)
    assert set(per_pod) == set(pods)
    for r in rows:
        p = pods[r["worker"]]
        ann = p["metadata"]["annotations"]
        assert per_pod[r["worker"]] == int(ann[f"{TF}/gpu-count"])
        assert r["pod_name"] == p["metadata"]["name"] and r["node"] == p["spec"]["nodeName"]
        assert r["uuid"] in ann[f"{TF}/gpu-ids"] and r["pool"] == ann[f"{TF}/gpupool"]
        assert r["memory_bytes"] < q(ann[f"{TF}/vram-limit"])
    resources = {r["worker"]: r for r in at(metrics, "tf_worker_resources", NOW)}
    assert set(resources) == {p["metadata"]["name"] for p in ix.workers}
    for p in ix.workers:
        r = resources[p["metadata"]["name"]]
        ann = p["metadata"]["annotations"]
        cap_t = q(ix.gpus[ann[f"{TF}/gpu-ids"].split(",")[0]]["status"]["capacity"]["tflops"])
        want = (
            q(ann[f"{TF}/tflops-request"])
            if f"{TF}/tflops-request" in ann
            else q(ann[f"{TF}/compute-percent-request"]) * cap_t / 100  # converted as the recorder does
        )
        assert r["tflops_request"] == pytest.approx(float(want)) and r["gpu_count"] == int(
            ann[f"{TF}/gpu-count"]
        )
        assert (
            r["vram_bytes_limit"] == q(ann[f"{TF}/vram-limit"]) and r["ready"] is True and r["raw_cost"] > 0
        )


def test_workers_have_no_rows_before_creation(metrics: SimMetrics, ix: Index) -> None:
    young = [p for p in ix.workers if ts(p["metadata"]["creationTimestamp"]) > NOW - timedelta(hours=2)]
    assert young
    before = NOW - timedelta(hours=2)
    uids = {r["worker"] for r in at(metrics, "tf_worker_usage", before)}
    assert not uids & {p["metadata"]["uid"] for p in young}
    assert (ix.workers[0]["metadata"]["uid"] in uids) == (
        ts(ix.workers[0]["metadata"]["creationTimestamp"]) <= before
    )


def test_node_metrics_match_status(metrics: SimMetrics, ix: Index) -> None:
    for row in at(metrics, "tf_node_metrics", NOW):
        gn = ix.gpunodes[row["node"]]["status"]
        alloc_t = q(gn["totalTFlops"]) - q(gn["availableTFlops"])
        alloc_v = q(gn["totalVRAM"]) - q(gn["availableVRAM"])
        assert row["allocated_tflops"] == pytest.approx(float(alloc_t))
        assert row["allocated_vram_bytes"] == pytest.approx(float(alloc_v))
        assert row["allocated_tflops_percent"] == pytest.approx(
            float(alloc_t / q(gn["totalTFlops"]) * 100), abs=1e-3
        )
        assert row["gpu_count"] == gn["totalGPUs"] and row["pool"] == ix.pool_of_node(row["node"])
        price = sum(price_of(g["status"]["gpuModel"]) for g in ix.gpus_of_node[row["node"]])
        assert row["raw_cost"] == pytest.approx(price * 60 / 3600)


def price_of(model: str) -> float:
    info = lookup(model)
    assert info is not None, model
    return info.price_per_hour


def worker_series(metrics: SimMetrics, start: datetime, end: datetime) -> dict[str, list[dict[str, Any]]]:
    series: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in metrics.rows("tf_worker_usage", start, end):
        series[row["worker"]].append(row)
    return series


@pytest.fixture(scope="module")
def day(metrics: SimMetrics) -> dict[str, list[dict[str, Any]]]:
    return worker_series(metrics, NOW - timedelta(hours=24), NOW + timedelta(minutes=1))


def profile_of(ix: Index, pod: Obj) -> tuple[str, Obj]:
    wl = ix.workloads[(pod["metadata"]["namespace"], pod["metadata"]["labels"][f"{TF}/workload"])]
    return wl["metadata"]["annotations"][PROFILE_ANNOTATION], wl


def request_tflops(wl: Obj, cap: Decimal) -> Decimal:
    """A workload's TFLOPS request per device (a compute percent, given beside a zero `tflops` as
    TensorFusion stores it, converted with the GPU's capacity)."""
    req = wl["spec"]["resources"]["requests"]
    tflops = q(req.get("tflops") or "0")
    return tflops if tflops or not req.get("compute") else q(req["compute"]) * cap / 100


def test_profiles_shape_usage(ix: Index, day: dict[str, list[dict[str, Any]]]) -> None:
    seen: Counter[str] = Counter()
    for pod in ix.workers:
        profile, wl = profile_of(ix, pod)
        cap = q(
            ix.gpus[pod["metadata"]["annotations"][f"{TF}/gpu-ids"].split(",")[0]]["status"]["capacity"][
                "tflops"
            ]
        )
        req = request_tflops(wl, cap)
        used = [Decimal(str(r["compute_percentage"])) / 100 * cap / req for r in day[pod["metadata"]["uid"]]]
        assert used
        if profile == "idle":
            assert all(r["compute_percentage"] < 1 for r in day[pod["metadata"]["uid"]])
        elif profile == "over-request":
            assert max(used) < Decimal("0.25") and min(used) >= Decimal("0.099")
        elif profile == "right-sized":
            assert Decimal("0.69") <= min(used) and max(used) <= Decimal("0.951")
        seen[profile] += 1
    assert set(seen) == set(PROFILES)


def test_bursty_peaks_mid_afternoon(ix: Index, day: dict[str, list[dict[str, Any]]]) -> None:
    above_request = 0
    checked = 0
    for pod in ix.workers:
        profile, wl = profile_of(ix, pod)
        rows = day[pod["metadata"]["uid"]]
        if profile != "bursty" or len(rows) < 24 * 60:
            continue
        tz = pool_timezone(ix.pools[wl["spec"]["poolName"]])
        by_hour: dict[int, list[float]] = defaultdict(list)
        for r in rows:
            by_hour[int(local_hour(int(r["ts"].timestamp()), tz))].append(r["compute_percentage"])
        means = {h: sum(v) / len(v) for h, v in by_hour.items()}
        peak = max(means, key=lambda h: means[h])
        assert 13 <= peak <= 17, (pod["metadata"]["name"], peak)
        assert means[peak] > 3 * min(means.values())
        cap = q(ix.gpus[rows[0]["uuid"]]["status"]["capacity"]["tflops"])
        req = request_tflops(wl, cap)
        if max(Decimal(str(r["compute_percentage"])) / 100 * cap for r in rows) > req:
            above_request += 1
        checked += 1
    assert checked >= 5 and above_request >= 1


def test_latest_samples(metrics: SimMetrics, ix: Index) -> None:
    gpus = metrics.latest_gpu_usage(NOW + timedelta(seconds=30))
    assert set(gpus) == set(ix.gpus)
    rows = {r["uuid"]: r for r in at(metrics, "tf_gpu_usage", NOW)}
    for name, gu in gpus.items():
        assert gu.ts == NOW and gu.compute_percent == rows[name]["compute_percentage"]
        assert gu.memory_bytes == rows[name]["memory_bytes"] and gu.node == rows[name]["node"]
    assert metrics.latest_gpu_usage(NOW + timedelta(minutes=10)) == {}  # older than the lookback
    assert metrics.latest_gpu_usage(NOW + timedelta(minutes=10), lookback=timedelta(minutes=15))
    assert metrics.latest_gpu_usage(NOW - timedelta(days=2)) == {}  # before the history

    workers = metrics.latest_worker_usage(NOW)
    assert set(workers) == {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in ix.workers}
    by_pod: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in at(metrics, "tf_worker_usage", NOW):
        by_pod[(r["namespace"], r["pod_name"])].append(r)
    for key, u in workers.items():
        rows_w = by_pod[key]
        cap = float(q(ix.gpus[rows_w[0]["uuid"]]["status"]["capacity"]["tflops"]))
        assert (u.namespace, u.pod) == key and u.ts == NOW
        assert u.memory_bytes == sum(r["memory_bytes"] for r in rows_w)
        assert u.tflops == pytest.approx(sum(r["compute_percentage"] for r in rows_w) / 100 * cap)
        assert u.compute_percent == pytest.approx(sum(r["compute_percentage"] for r in rows_w) / len(rows_w))
    earlier = metrics.latest_worker_usage(NOW - timedelta(hours=1, seconds=20))
    assert earlier and len(earlier) < len(workers)
    assert {u.ts for u in earlier.values()} == {NOW - timedelta(hours=1, minutes=1)}


def test_metrics_are_deterministic(objs: list[Obj]) -> None:
    window = (NOW - timedelta(minutes=3), NOW + timedelta(minutes=1))
    first = list(SimMetrics(objs).rows("tf_gpu_usage", *window))
    assert first == list(SimMetrics(objs).rows("tf_gpu_usage", *window))
    assert first != list(SimMetrics(objs, seed=8).rows("tf_gpu_usage", *window))


# -- other sizes ---------------------------------------------------------------------------------


def test_worker_count_and_gpu_count_are_honoured() -> None:
    objs = generate_objects(seed=3, nodes=60, gpus_per_node=8, workers=700)
    ix = Index(objs)
    assert len([p for p in ix.workers if p["metadata"]["annotations"][f"{TF}/gpupool"] != ISOLATION]) == 700
    assert all(
        n["status"]["totalGPUs"] == 8
        for n in ix.kind["GPUNode"]
        if ix.pool_of_node(n["metadata"]["name"]) != ISOLATION
    )
    check_gpus(ix, ix.kind["GPU"])
    check_nodes_and_pools(ix, list(ix.gpunodes))
    check_pool_totals(ix)
    check_workers(ix, ix.workers)


def test_large_cluster_stays_consistent() -> None:
    objs = generate_objects(nodes=5000)  # its speed is measured in bench/state.py, not asserted here
    ix = Index(objs)
    assert len(ix.gpunodes) == 5003
    share = Counter(ix.pool_of_node(n) for n in ix.gpunodes)
    assert share == {
        "demo-inference": 1750,
        "demo-training": 750,
        "demo-dev": 2500,
        ISOLATION: 3,
    }  # same as 40
    # every GPU: no over-allocation; a sample: full recomputation
    for g in ix.kind["GPU"]:
        assert g["status"]["available"]["tflops"][0] != "-" and g["status"]["available"]["vram"][0] != "-"
    sample_nodes = sorted(ix.gpunodes)[::50]
    check_gpus(ix, [g for n in sample_nodes for g in ix.gpus_of_node[n]])
    check_nodes_and_pools(ix, sample_nodes)
    check_pool_totals(ix)
    check_workers(ix, ix.workers[::40])
    profiles = Counter(
        w["metadata"]["annotations"][PROFILE_ANNOTATION] for w in ix.kind["TensorFusionWorkload"]
    )
    assert set(profiles) == set(PROFILES)
    assert len(ix.native) > 3 and len([n for n in ix.gpunodes if not ix.workers_of_node[n]]) > 100
