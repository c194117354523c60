"""The fixes the step-1 diagnosis names for each finding: the `kubectl` command or the template,
pool or workload setting to change, with the suggested value.

Text built from a row and the cluster's objects only; kept apart from the classification
(`engine.waste`), which decides *whether* a pattern applies, so each can be read on its own.
"""

from __future__ import annotations

from collections.abc import Iterable

from tftui.engine.state import ClusterState, NodeView, PoolView, WorkerView, WorkloadView
from tftui.engine.wastemodel import (
    HEADROOM,
    WorkloadRow,
    _capacity_text,
    _ceil_gi,
    _ceil_tflops,
    _compaction,
    _pool_path,
    _pool_spec,
    _template_name,
    gib,
    num,
)
from tftui.model import keys

# -- fix texts -----------------------------------------------------------------------------------


def _names(items: Iterable[str], limit: int = 3) -> str:
    names = sorted(set(items))
    if not names:
        return "no worker"
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _kubectl_workload(ns: str, name: str) -> str:
    return f"kubectl get tensorfusionworkload {name} -n {ns} -o jsonpath='{{.status.recommendation}}'"


def _over_request_fixes(row: WorkloadRow, wv: WorkloadView, tf_over: bool, vram_over: bool) -> list[str]:
    target = "all" if tf_over and vram_over else ("compute" if tf_over else "vram")
    fixes: list[str] = []
    if wv.autoscale:
        fixes.append(
            f"autoscaling is on: check its recommendation with `{_kubectl_workload(row.namespace, row.name)}`"
        )
    else:
        fixes.append(
            f'turn on autoscaling: pod-template annotations tensor-fusion.ai/autoscale: "true" and '
            f"tensor-fusion.ai/autoscale-target: {target} (or TensorFusionWorkload {row.key} "
            f"spec.autoScalingConfig.autoSetResources.enable: true, targetResource: {target})"
        )
    assert row.tflops_peak is not None and row.vram_peak_bytes is not None
    if tf_over:
        limit = f", keep {keys.TFLOPS_LIMIT} {num(row.tflops_limit)}" if row.tflops_limit else ""
        fixes.append(
            f"or lower {keys.TFLOPS_REQUEST} to {_ceil_tflops(row.tflops_peak * HEADROOM)} "
            f"(peak {num(row.tflops_peak)} × {HEADROOM}{limit})"
        )
    if vram_over:
        fixes.append(
            f"or lower {keys.VRAM_REQUEST} to {_ceil_gi(row.vram_peak_bytes * HEADROOM)}Gi "
            f"(peak {gib(row.vram_peak_bytes)} × {HEADROOM})"
        )
    return fixes


def _under_request_fixes(row: WorkloadRow, avg_over: bool, vram_over: bool, near_limit: bool) -> list[str]:
    assert row.tflops_avg is not None and row.tflops_peak is not None and row.vram_peak_bytes is not None
    fixes: list[str] = []
    if avg_over:
        fixes.append(
            f"raise {keys.TFLOPS_REQUEST} to {_ceil_tflops(row.tflops_avg * HEADROOM)} "
            f"(average {num(row.tflops_avg)} > request {num(row.tflops_request or 0.0)} TFLOPS per GPU)"
        )
    if near_limit and row.tflops_limit:
        fixes.append(
            f"raise {keys.TFLOPS_LIMIT} to {_ceil_tflops(max(row.tflops_peak, row.tflops_limit) * HEADROOM)} "
            f"(peak {num(row.tflops_peak)} vs limit {num(row.tflops_limit)})"
        )
    if vram_over:
        fixes.append(
            f"raise {keys.VRAM_REQUEST} to {_ceil_gi(row.vram_peak_bytes * HEADROOM)}Gi "
            f"(peak {gib(row.vram_peak_bytes)} > request {gib(row.vram_request_bytes or 0.0)})"
        )
    fixes.append(
        f"with autoscaling, let it grow: TensorFusionWorkload {row.key} "
        "spec.autoScalingConfig.autoSetResources.maxComputeResourcesRatio (default 10.0)"
    )
    fixes.append(f"latency-sensitive: {keys.QOS}: high or critical")
    return fixes


def _idle_fixes(st: ClusterState, pv: PoolView | None, qos: list[str], workloads: list[str]) -> list[str]:
    q = qos[0] if len(qos) == 1 else "|".join(qos) or "low"
    names = _names(workloads)
    return [
        f"freeze it while idle: SchedulingConfigTemplate {_template_name(pv)} "
        f"spec.hypervisor.autoFreezeAndResume.autoFreeze: [{{qos: {q}, enable: true}}]",
        f"or scale {names} to zero when unused: TensorFusionWorkload spec.replicas: 0",
        "or schedule it: TensorFusionWorkload spec.autoScalingConfig.cronScalingRules",
    ]


def _workers_over_request_fixes(workers: list[WorkerView]) -> list[str]:
    names = _names(f"{w.namespace}/{w.workload or w.name}" for w in workers)
    return [
        f'turn on autoscaling for {names}: pod-template annotation tensor-fusion.ai/autoscale: "true" '
        "(or spec.autoScalingConfig.autoSetResources.enable: true)",
        f"or lower {keys.TFLOPS_REQUEST} of {names} (see the workload findings)",
    ]


def _workers_under_request_fixes(workers: list[WorkerView]) -> list[str]:
    names = _names(f"{w.namespace}/{w.workload or w.name}" for w in workers)
    return [f"raise {keys.TFLOPS_REQUEST} or {keys.TFLOPS_LIMIT} of {names} (see the workload findings)"]


def _node_over_request_fixes(st: ClusterState, nv: NodeView) -> list[str]:
    return _workers_over_request_fixes(st.workers_of_node(nv.name))


def _node_under_request_fixes(st: ClusterState, nv: NodeView) -> list[str]:
    return _workers_under_request_fixes(st.workers_of_node(nv.name))


def _empty_node_fixes(st: ClusterState, nv: NodeView, pv: PoolView | None) -> list[str]:
    spec = _pool_spec(pv)
    pool = pv.name if pv else (nv.pool or "<pool>")
    fixes: list[str] = []
    if nv.do_not_disrupt:
        fixes.append(
            f"remove label {keys.DO_NOT_DISRUPT}=true from GPUNode/Node {nv.name}: compaction skips it"
        )
    period = _compaction(spec).get("period") or "5m"
    bounds = [f"{k} ({t})" for k, t in (("minResources", _capacity_text(spec, "minResources")),
                                          ("warmResources", _capacity_text(spec, "warmResources"))) if t]  # fmt: skip
    keep = f" if the pool stays at or above {' and '.join(bounds)}" if bounds else ""
    fixes.append(
        f"node compaction releases it every {_pool_path(st, pool, 'nodeManagerConfig.nodeCompaction.period')} "
        f"(now {period}){keep}"
    )
    fixes.append(
        f'now: kubectl annotate gpupool {pool} --overwrite {keys.MANUAL_COMPACTION}="$(date -u +%Y-%m-%dT%H:%M:%SZ)"'
    )
    if pv is not None and pv.provisioning_mode == "AutoSelect":
        fixes.append(
            f"AutoSelect pool: compaction only labels the Node {keys.SHOULD_DELETE}=true; "
            "a node autoscaler must remove it"
        )
    return fixes


def _fragmentation_fixes(st: ClusterState, nv: NodeView, pv: PoolView | None) -> list[str]:
    spec = _pool_spec(pv)
    fixes: list[str] = []
    mode = pv.placement_mode if pv else "NodeCompactGPULowLoad"
    if mode != "CompactFirst":
        if pv is not None and pv.template:
            fixes.append(
                f"SchedulingConfigTemplate {pv.template} spec.placement.mode: CompactFirst (now {mode}): "
                f"kubectl patch schedulingconfigtemplate {pv.template} --type=merge "
                """-p '{"spec":{"placement":{"mode":"CompactFirst"}}}'"""
            )
        else:
            fixes.append(
                f"give {_pool_path(st, pv.name if pv else nv.pool, 'schedulingConfigTemplate')} a "
                "SchedulingConfigTemplate with spec.placement.mode: CompactFirst"
            )
    defrag = _compaction(spec).get("defrag")
    defrag = defrag if isinstance(defrag, dict) else {}
    path = _pool_path(st, pv.name if pv else nv.pool, "nodeManagerConfig.nodeCompaction.defrag")
    if defrag.get("enabled") is True:
        fixes.append(
            f"defrag is on ({path}: schedule {defrag.get('schedule', '0 3 * * *')!r}, "
            f"utilizationThresholdPercent {defrag.get('utilizationThresholdPercent', 40)}): "
            f"check PodDisruptionBudgets cover the workers on {nv.name} (else DefragSkipMissingPDB)"
        )
    else:
        fixes.append(
            f"{path}.enabled: true (with schedule, timezone, utilizationThresholdPercent: 40) and "
            f"PodDisruptionBudgets for the workers on {nv.name}"
        )
    if nv.do_not_disrupt:
        fixes.append(f"remove label {keys.DO_NOT_DISRUPT}=true from {nv.name} where safe")
    fixes.append("then node compaction releases the emptied nodes (within minResources/warmResources)")
    return fixes


def _saturation_fixes(st: ClusterState, pv: PoolView | None) -> list[str]:
    spec = _pool_spec(pv)
    pool = pv.name if pv else None
    cur = _capacity_text(spec, "maxResources")
    fixes = [
        f"raise {_pool_path(st, pool, 'capacityConfig.maxResources')}"
        + (f" (now {cur})" if cur else "")
        + " and warmResources"
    ]
    if pv is not None and pv.provisioning_mode in ("Provisioned", "Karpenter"):
        fixes.append(f"{pv.provisioning_mode} pool: the controller adds nodes once maxResources allows")
    else:
        fixes.append(
            f"AutoSelect pool: label more GPU nodes to match {_pool_path(st, pool, 'nodeManagerConfig.nodeSelector')}"
        )
    return fixes


def _vram_bound_fixes(st: ClusterState, workers: list[WorkerView], pv: PoolView | None) -> list[str]:
    top = sorted(workers, key=lambda w: (-w.request.vram * w.gpu_count, w.key))[:3]
    listing = ", ".join(f"{w.namespace}/{w.workload or w.name} {gib(w.request.vram)}" for w in top)
    over = f"{pv.vram_expand_mem}/{pv.vram_expand_disk}" if pv else "?"
    return [
        f"review {keys.VRAM_REQUEST}" + (f" of {listing}" if listing else "") + " (per GPU)",
        f"{_pool_path(st, pv.name if pv else None, 'capacityConfig.oversubscription')}.vramExpandToHostMem/"
        f"vramExpandToHostDisk (now {over}) to back VRAM with host memory",
        "route compute-light models to other GPU models: TensorFusionWorkload spec.gpuModel",
    ]
