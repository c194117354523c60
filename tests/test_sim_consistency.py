"""The demo cluster's self-consistency, at the default size and others: every status figure is recomputed
from the pods and GPUs with an independent quantity parser, so a generator bug cannot hide behind its
own helpers."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import timedelta
from decimal import Decimal

from tests.sim_support import ISOLATION, NOW, TF, Index, Obj, q, ts

# fixtures, imported under their own names (which marks them as used) for pytest to find them here
from tests.sim_support import ix as ix
from tests.sim_support import objs as objs
from tftui.sources.sim.cluster import generate_objects
from tftui.sources.sim.scenarios import PROFILE_ANNOTATION, PROFILES


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
