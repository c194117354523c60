"""The demo's emitter: the cluster, pools and templates, and the order every object is emitted in.

The node objects (demo_nodes.py) and workload objects (demo_workloads.py) are mixins of `_Emitter`;
this module holds the pool-level objects that sum over all of them.
"""

from __future__ import annotations

from datetime import timedelta

from tftui.sources.sim.demo_layout import (
    _POOLS,
    _SUM_KEYS,
    CLUSTER_NAME,
    GI,
    JSON,
    MI,
    TF,
    TF_API,
    TF_VERSION,
    _nice_ceil,
    _owner,
    _PoolDef,
    _ready,
    _ts,
    capacity_status,
)
from tftui.sources.sim.demo_nodes import _NodeObjects
from tftui.sources.sim.demo_workloads import _WorkloadObjects


class _Emitter(_NodeObjects, _WorkloadObjects):
    """Turns the placed state into Kubernetes-shaped dicts, summing every status from placements."""

    # -- pool spec -----------------------------------------------------------------------------

    def capacity(self, p: _PoolDef) -> JSON:
        kinds = self.kinds_by_pool.get(p.name, [])
        node_t = max((len(n.gpus) * self.b.gpu_info[ks.kind.key].tflops_milli for ks in kinds for n in ks.nodes[:1]),
                     default=0)  # fmt: skip
        node_v = max((len(n.gpus) * ks.kind.vram_mib * MI for ks in kinds for n in ks.nodes[:1]), default=0)
        total_t = sum(
            len(n.gpus) * self.b.gpu_info[ks.kind.key].tflops_milli for ks in kinds for n in ks.nodes
        )
        total_v = sum(len(n.gpus) * ks.kind.vram_mib * MI for ks in kinds for n in ks.nodes)

        def unit(t: float, v: float) -> JSON:
            return {
                "tflops": str(_nice_ceil(-(-int(t) // 1000))),
                "vram": f"{_nice_ceil(-(-int(v) // GI))}Gi",
            }

        return {
            "minResources": unit(node_t * p.min_nodes, node_v * p.min_nodes),
            "warmResources": unit(node_t * p.warm_nodes, node_v * p.warm_nodes),
            "maxResources": unit(max(total_t * p.max_factor, node_t), max(total_v * p.max_factor, node_v)),
            "oversubscription": {
                "tflopsOversellRatio": p.oversell,
                "vramExpandToHostMem": p.mem_pct,
                "vramExpandToHostDisk": p.disk_pct,
            },
        }

    def pool_spec(self, p: _PoolDef) -> JSON:
        kinds = self.kinds_by_pool.get(p.name, [])
        instance_types = sorted({ks.nodes[0].instance[0] for ks in kinds if ks.nodes})
        nmc: JSON = {
            "provisioningMode": p.mode,
            "defaultVendor": "NVIDIA",
            "defaultIsolationMode": "soft",
        }
        if p.mode == "AutoSelect":
            products = sorted({self.b.gpu_info[ks.kind.key].full_name.replace(" ", "-") for ks in kinds})
            nmc["nodeSelector"] = {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]},
                            {"key": "nvidia.com/gpu.product", "operator": "In", "values": products},
                        ]
                    }
                ]
            }
        elif p.mode == "Provisioned":
            nmc["nodeProvisioner"] = {
                "nodeClass": "a100-on-demand",
                "gpuRequirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": instance_types},
                    {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["us-east-1"]},
                ],
                "gpuNodeLabels": {f"{TF}/cluster": CLUSTER_NAME},
                "budget": {
                    "budgetPerDay": "2500",
                    "budgetPerMonth": "70000",
                    "budgetExceedStrategy": "AlertOnly",
                },
            }
        else:
            nmc["nodeProvisioner"] = {
                "karpenterNodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "version": "v1",
                    "name": "gpu-dev",
                },
                "gpuRequirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": instance_types},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
                ],
                "budget": {
                    "budgetPerDay": "300",
                    "budgetPerMonth": "8000",
                    "budgetExceedStrategy": "AlertOnly",
                },
            }
        compaction: JSON = {"period": p.period}
        if p.defrag is not None:
            compaction["defrag"] = dict(p.defrag)
        nmc["nodeCompaction"] = compaction
        qos_defs = [
            {"name": "low", "description": "notebooks and batch, first to be frozen", "priority": 10},
            {"name": "medium", "description": "default", "priority": 40},
            {"name": "high", "description": "user-facing serving", "priority": 70},
            {"name": "critical", "description": "revenue-critical serving", "priority": 100},
        ]
        pricing = [
            {
                "qos": q,
                "requests": {"perFP16TFlopsPerHour": "$0.0069228", "perGBOfVRAMPerHour": "$0.01548"},
                "limitsOverRequests": ratio,
            }
            for q, ratio in (("low", "0.3"), ("medium", "0.5"), ("high", "0.8"), ("critical", "1"))
        ]
        return {
            "capacityConfig": self.capacity(p),
            "nodeManagerConfig": nmc,
            "qosConfig": {
                "definitions": qos_defs,
                "defaultQoS": "low" if p.name == "dev" else "medium",
                "pricing": pricing,
                "evictionProtectionPriceRatio": "1.2",
            },
            "schedulingConfigTemplate": p.template,
        }

    # -- emission ------------------------------------------------------------------------------

    def emit(self) -> list[JSON]:
        b = self.b
        b.cluster_uid = b.uid()
        for p in _POOLS:
            b.pool_uids[p.name] = b.uid()
        templates = self.templates()
        claims: list[JSON] = []
        k8s_nodes: list[JSON] = []
        gpunodes: list[JSON] = []
        gpus: list[JSON] = []
        native: list[JSON] = []
        pool_sums: dict[str, dict[str, int]] = {p.name: dict.fromkeys(_SUM_KEYS, 0) for p in _POOLS}
        for ks in b.kinds:
            for node in ks.nodes:
                if ks.kind.pool != "inference":
                    claims.append(self.claim(node))
                k8s_nodes.append(self.k8s_node(node))
                node_obj, sums = self.gpunode(node)
                gpunodes.append(node_obj)
                acc = pool_sums[ks.kind.pool]
                for key in _SUM_KEYS:
                    acc[key] += sums[key]
                gpus.extend(self.gpu(g) for g in node.gpus)
                native.extend(self.native_pod(g) for g in node.gpus if g.native)
        pools = [self.pool(p, pool_sums[p.name]) for p in _POOLS]
        cluster = self.cluster(pool_sums)
        workloads: list[JSON] = []
        pods: list[JSON] = []
        pdbs: list[JSON] = []
        for wl in b.workloads:
            workloads.append(self.workload(wl))
            pods.extend(self.pods(wl))
            if wl.pdb:
                pdbs.append(self.pdb(wl))
        return [
            cluster,
            *templates,
            *pools,
            *claims,
            *k8s_nodes,
            *gpunodes,
            *gpus,
            *self.profiles(),
            *workloads,
            *pods,
            *native,
            *pdbs,
        ]

    def templates(self) -> list[JSON]:
        out = []
        for p in _POOLS:
            spec: JSON = {"placement": {"mode": p.placement, "allowUsingLocalGPU": True}}
            if p.name == "dev":
                spec["hypervisor"] = {
                    "autoFreezeAndResume": {
                        "autoFreeze": [
                            {"qos": "low", "freezeToMemTTL": "30m", "freezeToDiskTTL": "4h", "enable": False}
                        ]
                    }
                }
                spec["verticalScalingRules"] = [
                    {
                        "name": "notebooks-autoscale",
                        "selector": {"matchLabels": {"team": "research"}},
                        "autoScaling": {"autoSetResources": {"enable": True, "targetResource": "all"}},
                    }
                ]
            out.append(
                {
                    "apiVersion": TF_API,
                    "kind": "SchedulingConfigTemplate",
                    "metadata": {
                        "name": p.template,
                        "uid": self.b.uid(),
                        "creationTimestamp": _ts(self.now - timedelta(days=150)),
                        "generation": 1,
                    },
                    "spec": spec,
                }
            )
        return out

    def cluster(self, pool_sums: dict[str, dict[str, int]]) -> JSON:
        total = dict.fromkeys(_SUM_KEYS, 0)
        for sums in pool_sums.values():
            for key in _SUM_KEYS:
                total[key] += sums[key]
        created = _ts(self.now - timedelta(days=160))
        return {
            "apiVersion": TF_API,
            "kind": "TensorFusionCluster",
            "metadata": {
                "name": CLUSTER_NAME,
                "uid": self.b.cluster_uid,
                "creationTimestamp": created,
                "generation": 1,
            },
            "spec": {
                "gpuPools": [
                    {"name": p.name, "isDefault": p.is_default, "specTemplate": self.pool_spec(p)}
                    for p in _POOLS
                ],
                "computingVendor": {
                    "name": "aws-us-east-1",
                    "type": "aws",
                    "authType": "serviceAccountRole",
                    "enable": True,
                    "params": {
                        "defaultRegion": "us-east-1",
                        "iamRole": "arn:aws:iam::123456789012:role/tensor-fusion-provisioner",
                    },
                },
            },
            "status": {
                "phase": "Running",
                "conditions": [_ready(created, "AllPoolsReady")],
                "totalPools": len(_POOLS),
                "totalNodes": total["nodes"],
                "totalGPUs": total["gpus"],
                **capacity_status(total),
                "readyGPUPools": [self.pool_name(p.name) for p in _POOLS],
                "notReadyGPUPools": [],
                "retryCount": 0,
            },
        }

    def pool(self, p: _PoolDef, sums: dict[str, int]) -> JSON:
        name = self.pool_name(p.name)
        created = _ts(self.now - timedelta(days=160))
        status: JSON = {
            "cluster": CLUSTER_NAME,
            "phase": "Running",
            "conditions": [_ready(created, "PoolReady")],
            "totalNodes": sums["nodes"],
            "totalGPUs": sums["gpus"],
            "readyNodes": sums["nodes"],
            "notReadyNodes": 0,
            **capacity_status(sums),
            "runningAppsCnt": sums["pods"],
            "componentStatus": {
                "worker": TF_VERSION,
                "workerConfigSynced": True,
                "hypervisor": TF_VERSION,
                "hypervisorConfigSynced": True,
                "client": TF_VERSION,
                "clientConfigSynced": True,
            },
            "provisioningPhase": "None" if p.mode == "AutoSelect" else "Completed",
            "lastCompactionTime": _ts(self.now - timedelta(minutes=3)),
        }
        return {
            "apiVersion": TF_API,
            "kind": "GPUPool",
            "metadata": {
                "name": name,
                "uid": self.b.pool_uids[p.name],
                "creationTimestamp": created,
                "generation": 1,
                "labels": {f"{TF}/managed-by": CLUSTER_NAME},
                "annotations": {f"{TF}/is-default-pool": "true" if p.is_default else "false"},
                "ownerReferences": [_owner(TF_API, "TensorFusionCluster", CLUSTER_NAME, self.b.cluster_uid)],
            },
            "spec": self.pool_spec(p),
            "status": status,
        }
