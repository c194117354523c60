"""The demo's per-workload objects: profiles, TensorFusionWorkloads, worker pods and their PDBs.

A mixin of the emitter (demo_emit.py), separate from the node objects because it reads the
workloads rather than the nodes.
"""

from __future__ import annotations

from datetime import timedelta

from tftui.sources.sim.demo_build import _EmitterBase, _Workload
from tftui.sources.sim.demo_layout import (
    _READY_DELAY,
    _START_DELAY,
    GI,
    JSON,
    TF,
    TF_API,
    TF_VERSION,
    _owner,
    _ready,
    _res,
    _ts,
    _with,
    format_bytes,
    format_tflops,
)
from tftui.sources.sim.scenarios import PROFILE_ANNOTATION


class _WorkloadObjects(_EmitterBase):
    """Per-workload objects, each status summed from its placed workers."""

    def profiles(self) -> list[JSON]:
        """A few WorkloadProfiles: templates teams reference from their pods."""
        items = (
            ("llm-serving-h100", "ml-serving", "demo-inference", "high", 200, 40, 400, 48, 1, "H100"),
            ("vision-l40s", "vision", "demo-inference", "medium", 120, 16, 240, 24, 1, "L40S"),
            ("finetune-a100x2", "research", "demo-training", "medium", 300, 72, 312, 78, 2, ""),
            ("notebook-small", "research", "demo-dev", "low", 20, 4, 80, 12, 1, ""),
        )
        out = []
        for name, ns, pool, qos, rt, rv, lt, lv, count, model in items:
            spec: JSON = {
                "poolName": pool,
                "qos": qos,
                "gpuCount": count,
                "isolation": "soft",
                "resources": {"requests": _res(rt * 1000, rv * GI), "limits": _res(lt * 1000, lv * GI)},
            }
            if model:
                spec["gpuModel"] = model
            if name == "notebook-small":
                spec["autoScalingConfig"] = {"autoSetResources": {"enable": True, "targetResource": "all"}}
            out.append(
                {
                    "apiVersion": TF_API,
                    "kind": "WorkloadProfile",
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "uid": self.b.uid(),
                        "creationTimestamp": _ts(self.now - timedelta(days=90)),
                        "generation": 1,
                    },
                    "spec": spec,
                }
            )
        return out

    def workload(self, wl: _Workload) -> JSON:
        s = wl.shape
        n = len(wl.workers)
        created = _ts(wl.created)
        spec: JSON = {
            "replicas": n,
            "poolName": self.pool_name(wl.kind.pool),
            "qos": wl.qos,
            "gpuCount": s.gpu_count,
            "isolation": wl.isolation,
            "resources": {
                "requests": _res(s.req_t * 1000, s.req_gi * GI),
                "limits": _res(s.lim_t * 1000, s.lim_gi * GI),
            },
        }
        if wl.kind.family:
            spec["gpuModel"] = wl.kind.family
        if wl.autoscale:
            spec["autoScalingConfig"] = {
                "autoSetResources": {"enable": True, "targetResource": "all", "historyDataPeriod": "2h"}
            }
        return {
            "apiVersion": TF_API,
            "kind": "TensorFusionWorkload",
            "metadata": {
                "name": wl.name,
                "namespace": wl.namespace,
                "uid": wl.uid,
                "creationTimestamp": created,
                "generation": 1,
                "labels": {"app.kubernetes.io/name": wl.name, f"{TF}/gpupool": self.pool_name(wl.kind.pool)},
                "annotations": {PROFILE_ANNOTATION: wl.profile},
            },
            "spec": spec,
            "status": {
                "phase": "Running",
                "conditions": [_ready(_ts(max(w.created for w in wl.workers)), "WorkloadReady")],
                "workerCount": n,
                "readyWorkers": n,
                "podTemplateHash": wl.uid[:8],
            },
        }

    def pods(self, wl: _Workload) -> list[JSON]:
        """The workload's worker pods; what they share is formatted once per workload."""
        s = wl.shape
        pool = self.pool_name(wl.kind.pool)
        annotations: JSON = {
            f"{TF}/gpupool": pool,
            f"{TF}/qos": wl.qos,
            f"{TF}/gpu-count": str(s.gpu_count),
            f"{TF}/tflops-request": format_tflops(s.req_t * 1000),
            f"{TF}/tflops-limit": format_tflops(s.lim_t * 1000),
            f"{TF}/vram-request": format_bytes(s.req_gi * GI),
            f"{TF}/vram-limit": format_bytes(s.lim_gi * GI),
            f"{TF}/isolation": wl.isolation,
        }
        if wl.kind.family:
            annotations[f"{TF}/gpu-model"] = wl.kind.family
        labels = {
            f"{TF}/component": "worker",
            f"{TF}/workload": wl.name,
            f"{TF}/gpupool": pool,
            f"{TF}/pod-template-hash": wl.uid[:8],
        }
        owner = _owner(TF_API, "TensorFusionWorkload", wl.name, wl.uid)
        image = f"tensorfusion/tensor-fusion-worker:{TF_VERSION}"
        out = []
        for w in wl.workers:
            created = _ts(w.created)
            started = _ts(w.created + _START_DELAY)
            ready = _ts(w.created + _READY_DELAY)
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": w.name,
                        "generateName": f"{wl.name}-tf-worker-",
                        "namespace": wl.namespace,
                        "uid": w.uid,
                        "creationTimestamp": created,
                        "labels": dict(labels),
                        "annotations": _with(annotations, f"{TF}/gpu-ids", ",".join(g.name for g in w.gpus)),
                        "ownerReferences": [dict(owner)],
                        "finalizers": [f"{TF}/finalizer"],
                    },
                    "spec": {
                        "nodeName": w.node.name,
                        "schedulerName": "tensor-fusion-scheduler",
                        "restartPolicy": "Always",
                        "containers": [
                            {
                                "name": "tensorfusion-worker",
                                "image": image,
                                "resources": {
                                    "requests": {"cpu": "1", "memory": "4Gi"},
                                    "limits": {"cpu": "8", "memory": "32Gi"},
                                },
                            }
                        ],
                    },
                    "status": {
                        "phase": "Running",
                        "conditions": [
                            {"type": "PodScheduled", "status": "True", "lastTransitionTime": created},
                            {"type": "Initialized", "status": "True", "lastTransitionTime": started},
                            {"type": "ContainersReady", "status": "True", "lastTransitionTime": ready},
                            {"type": "Ready", "status": "True", "lastTransitionTime": ready},
                        ],
                        "startTime": started,
                        "qosClass": "Burstable",
                        "containerStatuses": [
                            {
                                "name": "tensorfusion-worker",
                                "ready": True,
                                "started": True,
                                "restartCount": 0,
                                "image": image,
                                "state": {"running": {"startedAt": started}},
                            }
                        ],
                    },
                }
            )
        return out

    def pdb(self, wl: _Workload) -> JSON:
        n = len(wl.workers)
        spec: JSON = {"selector": {"matchLabels": {f"{TF}/workload": wl.name}}}
        if wl.pdb == "min":
            desired = max(1, n - 1)
            spec["minAvailable"] = desired
        else:
            desired = max(0, n - 1)
            spec["maxUnavailable"] = 1
        healthy = n  # every demo worker is Ready
        allowed = max(0, healthy - desired)
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "name": f"{wl.name}-pdb",
                "namespace": wl.namespace,
                "uid": self.b.uid(),
                "creationTimestamp": _ts(wl.created),
                "generation": 1,
                "labels": {f"{TF}/workload": wl.name},
            },
            "spec": spec,
            "status": {
                "observedGeneration": 1,
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "expectedPods": n,
                "disruptionsAllowed": allowed,
                "conditions": [
                    {
                        "type": "DisruptionAllowed",
                        "status": "True" if allowed else "False",
                        "reason": "SufficientPods" if allowed else "InsufficientPods",
                        "lastTransitionTime": _ts(wl.created),
                    }
                ],
            },
        }
