"""The demo's per-node objects: Node, GPUNode, GPUNodeClaim, GPU and the native (non-TF) pods.

A mixin of the emitter (demo_emit.py), separate because node and GPU status is the bulk of the
emission code and depends only on the placed state.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from tftui.sources.sim.demo_build import _EmitterBase, _Gpu, _Node, _Worker
from tftui.sources.sim.demo_layout import (
    _KINDS,
    _NATIVE_PODS,
    CLUSTER_NAME,
    GI,
    JSON,
    KI,
    MI,
    TF,
    TF_API,
    TF_VERSION,
    _money,
    _owner,
    _ready,
    _res,
    _ts,
    capacity_status,
    format_bytes,
    format_tflops,
)


class _NodeObjects(_EmitterBase):
    """Per-node objects, each status summed from the placements on it."""

    def claim(self, node: _Node) -> JSON:
        b = self.b
        kind = node.kind
        pool = self.pool_name(kind.pool)
        node.claim = f"{pool}-{b.suffix()}"
        info = b.gpu_info[kind.key]
        karpenter = kind.pool == "dev"
        ref = (
            {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "version": "v1", "name": "gpu-dev"}
            if karpenter
            else {
                "group": "tensor-fusion.ai",
                "kind": "GPUNodeClass",
                "version": "v1",
                "name": "a100-on-demand",
            }
        )
        return {
            "apiVersion": TF_API,
            "kind": "GPUNodeClaim",
            "metadata": {
                "name": node.claim,
                "uid": b.uid(),
                "creationTimestamp": _ts(node.created - timedelta(seconds=95)),
                "generation": 1,
                "labels": {f"{TF}/managed-by": pool},
                "ownerReferences": [_owner(TF_API, "GPUPool", pool, b.pool_uids[kind.pool])],
            },
            "spec": {
                "nodeName": node.name,
                "region": "us-east-1",
                "zone": node.zone,
                "instanceType": node.instance[0],
                "nodeClassRef": ref,
                "capacityType": "Spot" if karpenter and node.index % 3 == 0 else "OnDemand",
                "tflopsOffered": format_tflops(info.tflops_milli * len(node.gpus)),
                "vramOffered": format_bytes(kind.vram_mib * MI * len(node.gpus)),
                "gpuDeviceOffered": len(node.gpus),
            },
            "status": {"phase": "Bound", "instanceID": self.instance_id(node)},
        }

    def instance_id(self, node: _Node) -> str:
        digest = uuid.uuid5(uuid.NAMESPACE_DNS, f"{node.name}.{self.b.cluster_uid}").hex
        return f"i-0{digest[:16]}"

    def k8s_node(self, node: _Node) -> JSON:
        kind = node.kind
        inst, vcpu, mem_gib, _ = node.instance
        info = self.b.gpu_info[kind.key]
        created = _ts(node.created)
        labels: JSON = {
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            "kubernetes.io/hostname": node.name,
            "node.kubernetes.io/instance-type": inst,
            "topology.kubernetes.io/region": "us-east-1",
            "topology.kubernetes.io/zone": node.zone,
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": info.full_name.replace(" ", "-"),
            "nvidia.com/gpu.count": str(len(node.gpus)),
            f"{TF}/hardware-vendor": "NVIDIA",
        }
        if kind.pool != "inference":
            labels[f"{TF}/cluster"] = CLUSTER_NAME
            labels[f"{TF}/pool-{self.pool_name(kind.pool)}"] = "true"
            labels[f"{TF}/node-provisioner"] = node.claim
        if kind.pool == "dev":
            labels["karpenter.sh/nodepool"] = "gpu-dev"
            labels["karpenter.sh/capacity-type"] = "spot" if node.index % 3 == 0 else "on-demand"
        if node.role == "empty_dnd_node":
            labels[f"{TF}/do-not-disrupt"] = "true"
        mem_ki = mem_gib * 1024 * 1024
        cap_mem = mem_ki - mem_gib * 1024 * 9  # firmware and kernel reservations
        alloc_mem = cap_mem - mem_gib * 1024 * 10 - 100 * 1024
        gpu_n = str(len(node.gpus))
        spec: JSON = {"providerID": f"aws:///{node.zone}/{self.instance_id(node)}"}
        if node.role == "cordoned":
            spec["unschedulable"] = True
            spec["taints"] = [
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "effect": "NoSchedule",
                    "timeAdded": _ts(self.now - timedelta(hours=5)),
                }
            ]
        ip = f"10.{20 + _KINDS.index(kind)}.{node.index // 250}.{node.index % 250 + 4}"
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node.name,
                "uid": self.b.uid(),
                "creationTimestamp": created,
                "labels": labels,
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": spec,
            "status": {
                "capacity": {
                    "cpu": str(vcpu),
                    "memory": f"{cap_mem}Ki",
                    "ephemeral-storage": f"{kind.disk // KI}Ki",
                    "pods": "250",
                    "nvidia.com/gpu": gpu_n,
                },
                "allocatable": {
                    "cpu": f"{vcpu * 1000 - 90 - vcpu * 5}m",
                    "memory": f"{alloc_mem}Ki",
                    "ephemeral-storage": str(kind.disk * 9 // 10),
                    "pods": "250",
                    "nvidia.com/gpu": gpu_n,
                },
                "conditions": [
                    {"type": t, "status": "False", "reason": f"KubeletHas{r}", "lastTransitionTime": created}
                    for t, r in (
                        ("MemoryPressure", "SufficientMemory"),
                        ("DiskPressure", "NoDiskPressure"),
                        ("PIDPressure", "SufficientPID"),
                    )
                ]
                + [_ready(created, "KubeletReady")],
                "addresses": [
                    {"type": "InternalIP", "address": ip},
                    {"type": "Hostname", "address": node.name},
                ],
                "nodeInfo": {
                    "kubeletVersion": "v1.32.9-eks-113cf36",
                    "containerRuntimeVersion": "containerd://1.7.27",
                    "osImage": "Amazon Linux 2023.8.20250915",
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                },
            },
        }

    def gpunode(self, node: _Node) -> tuple[JSON, dict[str, int]]:
        b = self.b
        kind = node.kind
        pool_def = self.pool_defs[kind.pool]
        pool = self.pool_name(kind.pool)
        info = b.gpu_info[kind.key]
        cap_t, cap_v = info.tflops_milli, kind.vram_mib * MI
        n = len(node.gpus)
        total_t, total_v = cap_t * n, cap_v * n
        avail_t = sum(g.avail_t for g in node.gpus)
        avail_v = sum(g.avail_v for g in node.gpus)
        virt_t = total_t * pool_def.oversell // 100
        virt_v = total_v + node.ram * pool_def.mem_pct // 100 + kind.disk * pool_def.disk_pct // 100
        lim_t = sum(w.workload.shape.lim_t * 1000 for w in node.workers)
        lim_v = sum(w.workload.shape.lim_gi * GI for w in node.workers)
        labels: JSON = {
            f"{TF}/managed-by": pool,
            f"{TF}/pool-{pool}": "true",
            f"{TF}/hardware-vendor": "NVIDIA",
        }
        if node.claim:
            labels[f"{TF}/node-provisioner"] = node.claim
        if node.role in ("dnd_busy", "empty_dnd"):
            labels[f"{TF}/do-not-disrupt"] = "true"
        created = node.created + timedelta(seconds=30)
        allocated = {g.name: [self.pod_gpu_info(w) for w in g.workers] for g in node.gpus if g.workers}
        node.uid = b.uid()
        sums = {
            "nodes": 1,
            "gpus": n,
            "total_t": total_t,
            "total_v": total_v,
            "avail_t": avail_t,
            "avail_v": avail_v,
            "virt_t": virt_t,
            "virt_v": virt_v,
            "vavail_t": virt_t - lim_t,
            "vavail_v": virt_v - lim_v,
            "pods": len(node.workers),
        }
        obj = {
            "apiVersion": TF_API,
            "kind": "GPUNode",
            "metadata": {
                "name": node.name,
                "uid": node.uid,
                "creationTimestamp": _ts(created),
                "generation": 1,
                "labels": labels,
                "ownerReferences": [_owner(TF_API, "GPUPool", pool, b.pool_uids[kind.pool])],
            },
            "spec": {"manageMode": pool_def.manage_mode, "costPerHour": _money(node.price)},
            "status": {
                "phase": "Running",
                "conditions": [_ready(_ts(created), "NodeReady")],
                **capacity_status(sums),
                "totalGPUs": n,
                "managedGPUs": n,
                "managedGPUDeviceIDs": [g.name for g in node.gpus],
                "nodeInfo": {"ramSize": str(node.ram), "dataDiskSize": str(kind.disk)},
                "hypervisorStatus": {
                    "hypervisorState": "Running",
                    "hypervisorVersion": TF_VERSION,
                    "lastHeartbeatTime": _ts(self.now - timedelta(seconds=17 + node.index % 40)),
                },
                "totalGPUPods": len(node.workers),
                "allocatedPods": allocated,
                "observedGeneration": 1,
            },
        }
        return obj, sums

    def pod_gpu_info(self, w: _Worker) -> JSON:
        wl = w.workload
        s = wl.shape
        return {
            "name": w.name,
            "namespace": wl.namespace,
            "uid": w.uid,
            "qos": wl.qos,
            "requests": _res(s.req_t * 1000, s.req_gi * GI),
            "limits": _res(s.lim_t * 1000, s.lim_gi * GI),
        }

    def gpu(self, g: _Gpu) -> JSON:
        b = self.b
        node = g.node
        kind = node.kind
        info = b.gpu_info[kind.key]
        pool = self.pool_name(kind.pool)
        apps: dict[tuple[str, str], list[JSON]] = {}
        for w in g.workers:
            apps.setdefault((w.workload.namespace, w.workload.name), []).append(self.pod_gpu_info(w))
        status: JSON = {
            "phase": "Running",
            "vendor": "NVIDIA",
            "model": info.model,
            "gpuModel": info.full_name,
            "uuid": g.name,
            "index": g.index,
            "numaNode": g.index // max(1, len(node.gpus) // 2),
            "capacity": _res(info.tflops_milli, kind.vram_mib * MI),
            "available": _res(g.avail_t, g.avail_v),
            "nodeSelector": {"kubernetes.io/hostname": node.name},
            "usedBy": "nvidia-device-plugin" if g.native else "tensor-fusion",
            "isolationMode": "soft",
            "message": "managed",
            "runningApps": [
                {"name": name, "namespace": ns, "count": len(pods), "pods": pods}
                for (ns, name), pods in apps.items()
            ],
        }
        return {
            "apiVersion": TF_API,
            "kind": "GPU",
            "metadata": {
                "name": g.name,
                "uid": b.uid(),
                "creationTimestamp": _ts(g.created),
                "labels": {f"{TF}/managed-by": node.name, f"{TF}/gpupool": pool},
                "annotations": {f"{TF}/last-sync": _ts(self.now - timedelta(seconds=30))},
                "ownerReferences": [_owner(TF_API, "GPUNode", node.name, node.uid)],
            },
            "status": status,
        }

    def native_pod(self, g: _Gpu) -> JSON:
        b = self.b
        node = g.node
        ns, stem = _NATIVE_PODS[b.rng.randrange(len(_NATIVE_PODS))]
        created = max(node.created + timedelta(minutes=5), self.now - timedelta(days=6))
        created = min(created + timedelta(seconds=b.rng.uniform(0, 3 * 86400)), self.now - timedelta(hours=3))
        created_s = _ts(created)
        gpu_res = {"nvidia.com/gpu": "1"}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{stem}-{b.suffix()}",
                "namespace": ns,
                "uid": b.uid(),
                "creationTimestamp": created_s,
                "labels": {"app": stem},
            },
            "spec": {
                "nodeName": node.name,
                "schedulerName": "default-scheduler",
                "containers": [
                    {
                        "name": stem,
                        "image": f"registry.example.com/{ns}/{stem}:1.4.2",
                        "resources": {
                            "requests": {"cpu": "4", "memory": "32Gi", **gpu_res},
                            "limits": {"cpu": "8", "memory": "64Gi", **gpu_res},
                        },
                    }
                ],
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
            "status": {
                "phase": "Running",
                "conditions": [_ready(created_s)],
                "startTime": created_s,
                "qosClass": "Burstable",
            },
        }
