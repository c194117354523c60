"""The demo's isolation pool: hard and shared isolation, a MIG-partitioned node, a quota, a ProviderConfig.

`demo-isolation` (AutoSelect, three A100 80GB PCIe nodes of four GPUs) shows what the other demo pools
do not: the pool's `isolationModeRules` give `iso-a100-01` hard isolation (label
`gpu-isolation: hard`) and `iso-a100-03` MIG partitions (label `nvidia.com/mig.config: all-balanced`),
`iso-a100-02` runs the default soft mode. Hard workers share the hard node's GPUs, shared workers hold
a whole GPU each (on the hard and the soft node), a compute-percent workload runs on the soft node,
partitioned workers hold MIG slices (3g.40gb, 1g.10gb) and the MIG node's last GPU is held by a pod
of NVIDIA's device plugin (`nvidia.com/mig-1g.10gb`), which only the ProviderConfig's
`inUseResourceNames` reveal. Namespace `ml-eval` has a GPUResourceQuota close to its usage. The
cluster-wide objects the chart installs come with it: the NVIDIA ProviderConfig (the demo's GPU
models at the public table's prices, the A100 80GB MIG profiles) and the config ConfigMap with the
scheduler configuration (the chart's values).

The pool is built apart from the generated pools, from its own seeded random stream, so adding it
changes nothing in them; its size does not scale with `nodes`. Statuses are summed from the
placements with the allocator's bookings (a shared worker takes its whole GPU, a partition its
template's share), as the rest of the demo.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from random import Random
from typing import Any

from tftui.model.gpuinfo import GPUInfo, by_short_name
from tftui.sources.sim.demo_layout import _ready  # one Ready condition for both demos
from tftui.sources.sim.isolation_layout import (
    CAPABILITIES,
    DISK,
    GI,
    GPUS,
    HARD_LABEL,
    HARDWARE,
    IN_USE,
    JSON,
    MI,
    MIG_LABEL,
    MIG_PROFILES,
    MODEL,
    NAMESPACE,
    POOL,
    POOL_NAME,
    RAM,
    SCHEDULER_CONFIG,
    TEMPLATE,
    TF,
    TF_API,
    VRAM_MIB,
    WORKLOADS,
    IsolationPool,
    _bytes,
    _owner,
    _Spec,
    _tflops,
    _ts,
    capacity,
)
from tftui.sources.sim.scenarios import PROFILE_ANNOTATION


class _Build:
    def __init__(self, seed: int, now: datetime, cluster: str, cluster_uid: str) -> None:
        self.rng = Random(f"tftui-isolation-{seed}")
        self.now = now
        self.cluster = cluster
        self.cluster_uid = cluster_uid
        info = by_short_name(MODEL)
        if info is None:  # pragma: no cover - the packaged table has it
            raise LookupError(f"GPU model {MODEL} missing from gpu-info.csv")
        self.info: GPUInfo = info
        self.cap_t = info.tflops_milli
        self.cap_v = VRAM_MIB * MI
        self.out = IsolationPool()
        self.pool_uid = self.uid()
        self.nodes = [f"iso-a100-{i + 1:02d}" for i in range(3)]
        self.node_uids = [self.uid() for _ in self.nodes]
        self.gpus = [[f"gpu-{self.uid()}" for _ in range(GPUS)] for _ in self.nodes]
        self.created = [now - timedelta(days=d) for d in (34, 27, 19)]
        # per GPU: [available milli-TFLOPS, available bytes, pod infos, partitions]
        self.acc: dict[str, list[Any]] = {g: [self.cap_t, self.cap_v, [], {}] for n in self.gpus for g in n}
        self.node_lim: list[list[int]] = [[0, 0] for _ in self.nodes]
        self.node_pods = [0 for _ in self.nodes]

    def uid(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"

    def suffix(self) -> str:
        x, out = self.rng.getrandbits(32), []
        for _ in range(5):
            x, r = divmod(x, 27)
            out.append("bcdfghjklmnpqrstvwxz2456789"[r])
        return "".join(out)

    def ago(self, days: float) -> datetime:
        return self.now - timedelta(seconds=int(days * 86400))

    # -- the pool ------------------------------------------------------------------------------

    def pool_spec(self) -> JSON:
        unit_t, unit_v = self.cap_t * GPUS // 1000, VRAM_MIB * GPUS // 1024
        return {
            "capacityConfig": {
                "minResources": {"tflops": str(unit_t), "vram": f"{unit_v}Gi"},
                "warmResources": {"tflops": str(unit_t // 2), "vram": f"{unit_v // 2}Gi"},
                "maxResources": {"tflops": str(unit_t * 6), "vram": f"{unit_v * 6}Gi"},
                "oversubscription": {"tflopsOversellRatio": 300, "vramExpandToHostMem": 40,
                                     "vramExpandToHostDisk": 20},
            },
            "nodeManagerConfig": {
                "provisioningMode": "AutoSelect",
                "defaultVendor": "NVIDIA",
                "defaultIsolationMode": "soft",
                "isolationModeRules": [
                    {"mode": "partitioned", "selector": {"matchLabels": {MIG_LABEL: "all-balanced"}}},
                    {"mode": "hard", "selector": {"matchLabels": {HARD_LABEL: "hard"}}},
                ],
                "nodeSelector": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "nvidia.com/gpu.product", "operator": "In",
                         "values": [self.info.full_name.replace(" ", "-")]},
                    ]}]
                },
                "nodeCompaction": {"period": "10m"},
            },
            "qosConfig": {
                "definitions": [
                    {"name": q, "description": d, "priority": p}
                    for q, d, p in (("low", "batch", 10), ("medium", "default", 40), ("high", "serving", 70))
                ],
                "defaultQoS": "medium",
                "pricing": [
                    {"qos": q, "requests": {"perFP16TFlopsPerHour": "$0.0069228", "perGBOfVRAMPerHour": "$0.01548"},
                     "limitsOverRequests": r}
                    for q, r in (("low", "0.3"), ("medium", "0.5"), ("high", "0.8"))
                ],
            },
            "schedulingConfigTemplate": TEMPLATE,
        }  # fmt: skip

    def template(self) -> JSON:
        return {
            "apiVersion": TF_API,
            "kind": "SchedulingConfigTemplate",
            "metadata": {"name": TEMPLATE, "uid": self.uid(), "creationTimestamp": _ts(self.ago(60)),
                         "generation": 1},
            "spec": {"placement": {"mode": "NodeCompactGPULowLoad", "allowUsingLocalGPU": True}},
        }  # fmt: skip

    # -- workloads -----------------------------------------------------------------------------

    def book(self, spec: _Spec, template: tuple[Any, ...] | None, gpu: str) -> tuple[int, int]:
        """What one worker takes from `gpu` (the allocator's booking)."""
        if spec.isolation == "shared":
            return self.cap_t, self.cap_v
        if template is not None:
            pct = float(template[2])
            return round(round(pct * self.cap_t / 1000 / 100, 2) * 1000), template[3] * GI
        if spec.percent is not None:
            return self.percent_milli(spec.percent), spec.vram_gi * GI
        return (spec.tflops or 0) * 1000, spec.vram_gi * GI

    def percent_milli(self, percent: int | None) -> int:
        """A compute percent of this GPU model in whole TFLOPS (the allocator truncates), milli."""
        return int((percent or 0) * self.cap_t / 1000 / 100) * 1000

    def workload(self, spec: _Spec) -> None:
        b = self
        wl_uid = b.uid()
        created = b.ago(6 + b.rng.random() * 20)
        template = next((t for t in MIG_PROFILES if t[1] == spec.partition), None)
        res: JSON = {
            "requests": {"vram": _bytes(spec.vram_gi * GI)},
            "limits": {"vram": _bytes(spec.limit_gi * GI)},
        }
        if spec.tflops is not None:
            res["requests"]["tflops"] = str(spec.tflops)
            res["limits"]["tflops"] = str(spec.limit_tflops)
        else:  # Go writes the zero TFLOPS beside the percent (the CRD requires `tflops`)
            res["requests"].update(tflops="0", compute=str(spec.percent))
            res["limits"].update(tflops="0", compute=str(spec.percent))
        n = len(spec.placements)
        wspec: JSON = {"replicas": n, "poolName": POOL_NAME, "qos": spec.qos, "gpuCount": 1,
                       "isolation": spec.isolation, "resources": res, "gpuModel": "A100"}  # fmt: skip
        if spec.partition:
            wspec["partitionTemplateId"] = spec.partition
        ann: JSON = {
            f"{TF}/gpupool": POOL_NAME,
            f"{TF}/qos": spec.qos,
            f"{TF}/gpu-count": "1",
            f"{TF}/vram-request": _bytes(spec.vram_gi * GI),
            f"{TF}/vram-limit": _bytes(spec.limit_gi * GI),
            f"{TF}/isolation": spec.isolation,
            f"{TF}/gpu-model": "A100",
        }
        if spec.tflops is not None:
            ann[f"{TF}/tflops-request"] = str(spec.tflops)
            ann[f"{TF}/tflops-limit"] = str(spec.limit_tflops)
        else:
            ann[f"{TF}/compute-percent-request"] = str(spec.percent)
            ann[f"{TF}/compute-percent-limit"] = str(spec.percent)
        if spec.partition:
            ann[f"{TF}/partition-id"] = spec.partition
        labels = {f"{TF}/component": "worker", f"{TF}/workload": spec.name, f"{TF}/gpupool": POOL_NAME,
                  f"{TF}/pod-template-hash": wl_uid[:8]}  # fmt: skip
        names: set[str] = set()
        started = []
        for i, (node_i, gpu_i) in enumerate(spec.placements):
            gpu = b.gpus[node_i][gpu_i]
            name = f"{spec.name}-tf-worker-{b.suffix()}"
            while name in names:
                name = f"{spec.name}-tf-worker-{b.suffix()}"
            names.add(name)
            uid = b.uid()
            pod_created = min(created + timedelta(seconds=30 + 60 * i), b.now - timedelta(hours=3))
            started.append(pod_created)
            req_t, req_v = self.book(spec, template, gpu)
            acc = b.acc[gpu]
            acc[0] -= req_t
            acc[1] -= req_v
            ann_t = (spec.tflops or 0) * 1000 if spec.tflops is not None else self.percent_milli(spec.percent)
            ann_lim = (
                (spec.limit_tflops or 0) * 1000
                if spec.tflops is not None
                else self.percent_milli(spec.percent)
            )
            info = {"name": name, "namespace": spec.namespace, "uid": uid, "qos": spec.qos,
                    "requests": {"tflops": _tflops(ann_t), "vram": _bytes(spec.vram_gi * GI)},
                    "limits": {"tflops": _tflops(ann_lim), "vram": _bytes(spec.limit_gi * GI)}}  # fmt: skip
            acc[2].append((spec.namespace, spec.name, info))
            if template is not None:
                start = spec.slots[i]
                acc[3][uid] = {"templateId": spec.partition, "podUid": uid, "podName": name,
                               "namespace": spec.namespace, "allocatedAt": _ts(pod_created),
                               "allocatedSlotStart": start, "allocatedSlotEnd": start + template[6]}  # fmt: skip
            lim_t = (
                (spec.limit_tflops or 0) * 1000
                if spec.tflops is not None
                else self.percent_milli(spec.percent)
            )
            b.node_lim[node_i][0] += lim_t
            b.node_lim[node_i][1] += spec.limit_gi * GI
            b.node_pods[node_i] += 1
            ts = _ts(pod_created)
            b.out.add({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name, "generateName": f"{spec.name}-tf-worker-", "namespace": spec.namespace,
                    "uid": uid, "creationTimestamp": ts, "labels": dict(labels),
                    "annotations": {**ann, f"{TF}/gpu-ids": gpu},
                    "ownerReferences": [_owner("TensorFusionWorkload", spec.name, wl_uid)],
                    "finalizers": [f"{TF}/finalizer"],
                },
                "spec": {
                    "nodeName": b.nodes[node_i],
                    "schedulerName": "tensor-fusion-scheduler",
                    "containers": [{"name": "tensorfusion-worker", "image": "tensorfusion/tensor-fusion-worker:2.15.0",
                                    "resources": {"requests": {"cpu": "1", "memory": "4Gi"},
                                                  "limits": {"cpu": "8", "memory": "32Gi"}}}],
                },
                "status": {
                    "phase": "Running",
                    "conditions": [{"type": t, "status": "True", "lastTransitionTime": ts}
                                   for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
                    "startTime": ts,
                    "qosClass": "Burstable",
                },
            })  # fmt: skip
        b.out.add({
            "apiVersion": TF_API,
            "kind": "TensorFusionWorkload",
            "metadata": {"name": spec.name, "namespace": spec.namespace, "uid": wl_uid,
                         "creationTimestamp": _ts(created), "generation": 1,
                         "labels": {"app.kubernetes.io/name": spec.name, f"{TF}/gpupool": POOL_NAME},
                         "annotations": {PROFILE_ANNOTATION: spec.profile}},
            "spec": wspec,
            "status": {"phase": "Running", "conditions": [_ready(_ts(max(started)), "WorkloadReady")],
                       "workerCount": n, "readyWorkers": n, "podTemplateHash": wl_uid[:8]},
        })  # fmt: skip
        b.out.add({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": f"{spec.name}-pdb", "namespace": spec.namespace, "uid": b.uid(),
                         "creationTimestamp": _ts(created), "generation": 1,
                         "labels": {f"{TF}/workload": spec.name}},
            "spec": {"selector": {"matchLabels": {f"{TF}/workload": spec.name}}, "maxUnavailable": 1},
            "status": {"observedGeneration": 1, "currentHealthy": n, "desiredHealthy": n - 1, "expectedPods": n,
                       "disruptionsAllowed": 1,
                       "conditions": [{"type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods",
                                       "lastTransitionTime": _ts(created)}]},
        })  # fmt: skip

    # -- nodes and GPUs ------------------------------------------------------------------------

    def node_objects(self) -> None:
        b = self
        mode_label = {0: (HARD_LABEL, "hard"), 2: (MIG_LABEL, "all-balanced")}
        modes = {0: "hard", 1: "soft", 2: "partitioned"}
        sums_all: dict[str, int] = {}
        for i, name in enumerate(b.nodes):
            created = b.created[i]
            ts = _ts(created)
            labels: JSON = {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": "a100-pcie-80g-x4",
                "topology.kubernetes.io/region": "us-east-1",
                "topology.kubernetes.io/zone": "us-east-1b",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": b.info.full_name.replace(" ", "-"),
                "nvidia.com/gpu.count": str(GPUS),
                f"{TF}/hardware-vendor": "NVIDIA",
            }
            if i in mode_label:
                labels[mode_label[i][0]] = mode_label[i][1]
            b.out.add({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "uid": b.uid(), "creationTimestamp": ts, "labels": labels},
                "spec": {"providerID": f"aws:///us-east-1b/i-0iso{i:012d}"},
                "status": {
                    "capacity": {"cpu": "64", "memory": f"{RAM // 1024}Ki", "pods": "250", "nvidia.com/gpu": str(GPUS)},
                    "allocatable": {"cpu": "63500m", "memory": f"{RAM // 1024 - 10 * 1024 * 1024}Ki", "pods": "250",
                                    "nvidia.com/gpu": str(GPUS)},
                    "conditions": [_ready(ts, "KubeletReady")],
                },
            })  # fmt: skip
            gpu_names = b.gpus[i]
            avail_t = avail_v = 0
            allocated: JSON = {}
            for gi, g in enumerate(gpu_names):
                acc = b.acc[g]
                native = i == 2 and gi == GPUS - 1
                avail_t += acc[0]
                avail_v += acc[1]
                apps: dict[tuple[str, str], list[JSON]] = {}
                for ns, wl, info in acc[2]:
                    apps.setdefault((ns, wl), []).append(info)
                if acc[2]:
                    allocated[g] = [info for _, _, info in acc[2]]
                status: JSON = {
                    "phase": "Running",
                    "vendor": "NVIDIA",
                    "model": b.info.model,
                    "gpuModel": b.info.full_name,
                    "uuid": g,
                    "index": gi,
                    "numaNode": gi // 2,
                    "capacity": {"tflops": _tflops(b.cap_t), "vram": _bytes(b.cap_v)},
                    "available": {"tflops": _tflops(acc[0]), "vram": _bytes(acc[1])},
                    "nodeSelector": {"kubernetes.io/hostname": name},
                    "usedBy": "nvidia-device-plugin" if native else "tensor-fusion",
                    "isolationMode": modes[i],
                    "isolationPolicy": "Static",
                    "message": "managed",
                    "runningApps": [{"name": wl, "namespace": ns, "count": len(p), "pods": p}
                                    for (ns, wl), p in apps.items()],
                }  # fmt: skip
                if acc[3]:
                    status["allocatedPartitions"] = acc[3]
                b.out.add({
                    "apiVersion": TF_API,
                    "kind": "GPU",
                    "metadata": {
                        "name": g, "uid": b.uid(), "creationTimestamp": _ts(created + timedelta(seconds=45)),
                        "labels": {f"{TF}/managed-by": name, f"{TF}/gpupool": POOL_NAME},
                        "annotations": {f"{TF}/last-sync": _ts(b.now - timedelta(seconds=30)),
                                        f"{TF}/virtualization-capabilities": CAPABILITIES},
                        "ownerReferences": [_owner("GPUNode", name, b.node_uids[i])],
                    },
                    "status": status,
                })  # fmt: skip
            total_t, total_v = b.cap_t * GPUS, b.cap_v * GPUS
            virt_t = total_t * 300 // 100
            virt_v = total_v + RAM * 40 // 100 + DISK * 20 // 100
            sums = {"nodes": 1, "gpus": GPUS, "total_t": total_t, "total_v": total_v, "avail_t": avail_t,
                    "avail_v": avail_v, "virt_t": virt_t, "virt_v": virt_v,
                    "vavail_t": virt_t - b.node_lim[i][0], "vavail_v": virt_v - b.node_lim[i][1],
                    "pods": b.node_pods[i]}  # fmt: skip
            for k, v in sums.items():
                sums_all[k] = sums_all.get(k, 0) + v
            b.out.add({
                "apiVersion": TF_API,
                "kind": "GPUNode",
                "metadata": {
                    "name": name, "uid": b.node_uids[i], "creationTimestamp": _ts(created + timedelta(seconds=30)),
                    "generation": 1,
                    "labels": {f"{TF}/managed-by": POOL_NAME, f"{TF}/pool-{POOL_NAME}": "true",
                               f"{TF}/hardware-vendor": "NVIDIA"},
                    "ownerReferences": [_owner("GPUPool", POOL_NAME, b.pool_uid)],
                },
                "spec": {"manageMode": "AutoSelect", "costPerHour": f"{b.info.price_per_hour * GPUS:.4f}".rstrip("0")},
                "status": {
                    "phase": "Running", "conditions": [_ready(ts, "NodeReady")], **capacity(sums),
                    "totalGPUs": GPUS, "managedGPUs": GPUS, "managedGPUDeviceIDs": list(gpu_names),
                    "nodeInfo": {"ramSize": str(RAM), "dataDiskSize": str(DISK)},
                    "hypervisorStatus": {"hypervisorState": "Running", "hypervisorVersion": "2.15.0",
                                         "lastHeartbeatTime": _ts(b.now - timedelta(seconds=20 + i))},
                    "totalGPUPods": b.node_pods[i], "allocatedPods": allocated, "observedGeneration": 1,
                },
            })  # fmt: skip
        b.out.sums = sums_all

    def native_pod(self) -> None:
        """A pod of NVIDIA's device plugin holding a MIG slice of the MIG node's last GPU."""
        b = self
        created = _ts(b.now - timedelta(days=4, hours=5))
        res = {"nvidia.com/mig-1g.10gb": "1"}
        b.out.add({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"mig-legacy-infer-{b.suffix()}", "namespace": "legacy-serving", "uid": b.uid(),
                         "creationTimestamp": created, "labels": {"app": "mig-legacy-infer"}},
            "spec": {"nodeName": b.nodes[2], "schedulerName": "default-scheduler",
                     "containers": [{"name": "infer", "image": "registry.example.com/legacy-serving/infer:3.1",
                                     "resources": {"requests": {"cpu": "2", "memory": "16Gi", **res},
                                                   "limits": {"cpu": "4", "memory": "32Gi", **res}}}]},
            "status": {"phase": "Running", "conditions": [_ready(created)], "startTime": created,
                       "qosClass": "Burstable"},
        })  # fmt: skip

    # -- cluster-wide objects ------------------------------------------------------------------

    def provider_config(self) -> None:
        hardware = []
        for short in HARDWARE:
            info = by_short_name(short)
            if info is None:  # pragma: no cover - the packaged table has them
                continue
            entry: JSON = {"model": info.model, "fullModelName": info.full_name,
                           "costPerHour": f"{info.price_per_hour:g}",
                           "fp16TFlops": _tflops(info.tflops_milli)}  # fmt: skip
            if short.startswith("A100"):
                entry.update(
                    maxPartitions=7, maxPlacementSlots=8, partitionTemplateRefs=[t[0] for t in MIG_PROFILES]
                )
            hardware.append(entry)
        self.out.add({
            "apiVersion": TF_API,
            "kind": "ProviderConfig",
            "metadata": {"name": "nvidia-provider", "uid": self.uid(), "creationTimestamp": _ts(self.ago(160)),
                         "annotations": {"helm.sh/resource-policy": "keep"}},
            "spec": {
                "vendor": "NVIDIA",
                "images": {"middleware": "tensorfusion/vgpu-provider-nvidia:1.3.9",
                           "remoteClient": "tensorfusion/tensor-fusion-client:v2.15.0",
                           "remoteWorker": "tensorfusion/tensor-fusion-worker:v2.15.0"},
                "hypervisor": {"privilegedHypervisor": True},
                "devicePluginDetection": {"resourceNamePrefixes": ["nvidia.com/gpu", "nvidia.com/mig"],
                                          "usedBySystemName": "nvidia-device-plugin"},
                "inUseResourceNames": list(IN_USE),
                "hardwareMetadata": hardware,
                "virtualizationTemplates": [
                    {"id": tid, "name": name, "computePercent": pct, "memoryGigabytes": gib, "maxInstances": n,
                     "placementLimit": list(limit), "placementOffset": off, "isolationGroupSharing": "exclusive"}
                    for tid, name, pct, gib, n, limit, off in MIG_PROFILES
                ],
            },
        })  # fmt: skip

    def quota(self, used_t: int, used_v: int, workers: int) -> None:
        """ml-eval's quota: a little above what its workers request, so a large request is refused."""
        self.out.add({
            "apiVersion": TF_API,
            "kind": "GPUResourceQuota",
            "metadata": {"name": NAMESPACE, "namespace": NAMESPACE, "uid": self.uid(),
                         "creationTimestamp": _ts(self.ago(45)), "generation": 1},
            "spec": {
                "total": {
                    "requests": {"tflops": str(used_t + 80), "vram": f"{used_v // GI + 64}Gi"},
                    "limits": {"tflops": str(used_t * 2), "vram": f"{used_v // GI * 2}Gi"},
                    "maxWorkers": workers + 4,
                    "alertThresholdPercent": 90,
                },
                "single": {"maxRequests": {"tflops": "200", "vram": "40Gi"}, "maxGPUCount": 2},
            },
            "status": {"used": {"requests": {"tflops": str(used_t), "vram": _bytes(used_v)}, "workers": workers}},
        })  # fmt: skip

    def config_map(self) -> None:
        self.out.add({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "tensor-fusion-config", "namespace": "tensor-fusion-sys", "uid": self.uid(),
                         "creationTimestamp": _ts(self.ago(160)),
                         "labels": {f"{TF}/component": "config", "app.kubernetes.io/name": "tensor-fusion"}},
            "data": {"config.yaml": "metricsTTL: 30d\nmetricsFormat: influx\n",
                     "scheduler-config.yaml": SCHEDULER_CONFIG},
        })  # fmt: skip


def isolation_pool(seed: int, now: datetime, cluster: str, cluster_uid: str) -> IsolationPool:
    """The pool's objects (own random stream: the other pools are untouched)."""
    b = _Build(seed, now, cluster, cluster_uid)
    b.out.add(b.template())
    for spec in WORKLOADS:
        b.workload(spec)
    b.node_objects()
    b.native_pod()
    b.provider_config()
    mine = [s for s in WORKLOADS if s.namespace == NAMESPACE]
    used_t = sum((s.tflops or 0) * len(s.placements) for s in mine)  # a compute percent counts no TFLOPS
    used_v = sum(s.vram_gi * GI * len(s.placements) for s in mine)
    b.quota(used_t, used_v, sum(len(s.placements) for s in mine))
    b.config_map()
    pool_spec = b.pool_spec()
    created = _ts(b.ago(150))
    sums = b.out.sums
    b.out.add({
        "apiVersion": TF_API,
        "kind": "GPUPool",
        "metadata": {"name": POOL_NAME, "uid": b.pool_uid, "creationTimestamp": created, "generation": 1,
                     "labels": {f"{TF}/managed-by": cluster},
                     "annotations": {f"{TF}/is-default-pool": "false"},
                     "ownerReferences": [{**_owner("TensorFusionCluster", cluster, cluster_uid)}]},
        "spec": pool_spec,
        "status": {"cluster": cluster, "phase": "Running", "conditions": [_ready(created, "PoolReady")],
                   "totalNodes": sums["nodes"], "totalGPUs": sums["gpus"], "readyNodes": sums["nodes"],
                   "notReadyNodes": 0, **capacity(sums), "runningAppsCnt": sums["pods"],
                   "provisioningPhase": "None", "lastCompactionTime": _ts(now - timedelta(minutes=4)),
                   "componentStatus": {}},
    })  # fmt: skip
    b.out.pool_entry = {"name": POOL, "isDefault": False, "specTemplate": pool_spec}
    return b.out
