"""`ClusterState`: the indexed, derived view of one snapshot that every decision and view reads.

Built in one linear pass (pools → GPUNodes → GPUs → worker pods → workloads) so cost grows with the
number of objects. Capacity, allocation and availability are derived here once, with upstream's
arithmetic (docs/behaviour.md S1, S2): a worker's TFLOPS and VRAM requests are **per device** and
charged to every GPU named in its `gpu-ids` (total = request × gpu-count); virtual capacity follows the
pool's oversubscription; virtual availability subtracts each worker's limit once per node.
Inconsistent objects are kept and reported in `warnings`, never raised: an operator opening a broken
cluster most needs to see it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from tftui.engine.state.derive import (
    _model_tflops,
    _uses_native_gpu,
    add_compaction_sums,
    add_node_to_pool,
    add_partition,
    convert_percent,
    percent_tflops,
    unset_quantity,
    virtual_capacity,
)
from tftui.engine.state.pernode import PerNodeDerived
from tftui.engine.state.queries import StateQueries
from tftui.engine.state.views import (
    DEFAULT_PLACEMENT_MODE,
    DEFAULT_PROVISIONING_MODE,
    DEFAULT_TFLOPS_OVERSELL,
    DEFAULT_VRAM_EXPAND_DISK,
    DEFAULT_VRAM_EXPAND_MEM,
    ENDED_PHASES,
    OVER_ALLOCATED,
    GPUView,
    NodeView,
    PoolView,
    Res,
    StateWarning,
    WorkerView,
    WorkloadView,
    _int,
    _ref,
    over_allocated,
    parse_time,
)
from tftui.model import keys
from tftui.model.gcpause import gc_paused
from tftui.model.isolation import PARTITIONED, SHARED, gpu_isolation
from tftui.model.provider import ProviderCatalog
from tftui.model.quantity import QuantityError, quantity_float
from tftui.model.schedconfig import DEFAULT as DEFAULT_SCHEDULER
from tftui.model.schedconfig import SchedulerSettings, scheduler_settings
from tftui.model.snapshot import Snapshot

#: The field path of each pod annotation the build reads quantities from (for its warnings).
_ANN_PATH = {
    key: f"metadata.annotations[{key}]"
    for key in (
        keys.TFLOPS_REQUEST,
        keys.TFLOPS_LIMIT,
        keys.VRAM_REQUEST,
        keys.VRAM_LIMIT,
        keys.COMPUTE_PERCENT_REQUEST,
        keys.COMPUTE_PERCENT_LIMIT,
    )
}
T = TypeVar("T")


@dataclass(slots=True, weakref_slot=True)
class ClusterState(StateQueries, PerNodeDerived):
    """Pools, nodes, GPUs, workers and workloads of one snapshot, indexed by name."""

    pools: dict[str, PoolView] = field(default_factory=dict)
    nodes: dict[str, NodeView] = field(default_factory=dict)
    gpus: dict[str, GPUView] = field(default_factory=dict)
    workers: dict[str, WorkerView] = field(default_factory=dict)
    workloads: dict[str, WorkloadView] = field(default_factory=dict)
    clusters: list[dict[str, Any]] = field(default_factory=list)
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    providers: ProviderCatalog = field(default_factory=ProviderCatalog)  # every ProviderConfig
    quotas: dict[str, dict[str, Any]] = field(default_factory=dict)  # namespace → GPUResourceQuota
    config_maps: list[dict[str, Any]] = field(default_factory=list)  # TensorFusion's config ConfigMaps
    scheduler: SchedulerSettings = DEFAULT_SCHEDULER  # GPUResourcesFit args from the chart's ConfigMap
    gpus_by_pool_label: dict[str, list[str]] = field(default_factory=dict)  # `gpupool` label → GPUs
    # Upstream compaction's capacity view (C3): per `gpupool` label and node,
    # Σ Value() of available and capacity (TFLOPS, VRAM) over GPUs used by TensorFusion with a
    # nodeSelector and no deletionTimestamp. Built here so a compaction round costs O(nodes).
    compaction_sums: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    warnings: list[StateWarning] = field(default_factory=list)
    snapshot: Snapshot = field(default_factory=Snapshot, repr=False)
    # indexes other engine modules derive from this state once (see `derived`)
    _derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # the state this one was derived from incrementally (a weak reference: no chain of states is
    # kept alive), whose per-node derived values `derived_per_node` may re-use
    _basis: weakref.ref[ClusterState] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def build(cls, source: Snapshot | Iterable[dict[str, Any]]) -> ClusterState:
        """The state of `source`, built from scratch. To derive it from the state of an earlier
        snapshot of the same cluster (reusing the views of unchanged objects, same result), call
        `engine.incremental.update_state`: it builds on this module, so this module never calls it."""
        snap = source if isinstance(source, Snapshot) else Snapshot.of(source)
        st = cls(snapshot=snap)
        with gc_paused():
            st._index(snap)
        return st

    # -- building ------------------------------------------------------------------------------

    def _warn(self, obj: dict[str, Any], message: str, *, blocking: bool = False) -> None:
        self.warnings.append(StateWarning(_ref(obj), message, blocking))

    def _q(self, obj: dict[str, Any], path: str, value: Any, default: float = 0.0) -> float:
        """Parse a quantity; a bad one becomes a (blocking) warning and `default`, never an exception."""
        if value is None or value == "":
            return default
        try:
            return quantity_float(value)
        except QuantityError as exc:
            self._warn(obj, f"{path}: {exc}", blocking=True)
        except (TypeError, ValueError):
            self._warn(obj, f"{path}: invalid quantity {value!r}", blocking=True)
        return default

    def index_raw_kinds(self, snap: Snapshot) -> None:
        """The kinds kept as they are (clusters, templates, claims, profiles, PDBs) and the pools:
        the first step of a full and of an incremental build alike."""
        self.clusters = list(snap.kind("TensorFusionCluster"))
        for t in snap.kind("SchedulingConfigTemplate"):
            self.templates[t["metadata"]["name"]] = t
        for c in snap.kind("GPUNodeClaim"):
            self.claims[c["metadata"]["name"]] = c
        for p in snap.kind("WorkloadProfile"):
            self.profiles[f"{p['metadata'].get('namespace', '')}/{p['metadata']['name']}"] = p
        self.pdbs = list(snap.kind("PodDisruptionBudget"))
        self.providers = ProviderCatalog.of(snap.kind("ProviderConfig"))
        for ref, message in self.providers.problems:
            self.warnings.append(StateWarning(ref, message))
        for q in snap.kind("GPUResourceQuota"):
            ns = q["metadata"].get("namespace", "")
            if ns in self.quotas:  # the controller keeps one quota per namespace (the last it saw)
                self._warn(q, f"namespace {ns!r} has more than one GPUResourceQuota; this one is used")
            self.quotas[ns] = q
        self.config_maps = [
            c
            for c in snap.kind("ConfigMap")
            if ((c.get("metadata") or {}).get("labels") or {}).get(keys.COMPONENT) == keys.COMPONENT_CONFIG
        ]
        self.scheduler = scheduler_settings(self.config_maps)
        if self.scheduler.problem:
            self.warnings.append(StateWarning("scheduler configuration", self.scheduler.problem))
        for pool in snap.kind("GPUPool"):
            self._add_pool(pool)

    def _index(self, snap: Snapshot) -> None:
        self.index_raw_kinds(snap)
        k8s_nodes = {n["metadata"]["name"]: n for n in snap.kind("Node")}
        for gn in snap.kind("GPUNode"):
            self._add_node(gn, k8s_nodes.get(gn["metadata"]["name"]))
        for gpu in snap.kind("GPU"):
            self._add_gpu(gpu)
        for wl in snap.kind("TensorFusionWorkload"):
            self._add_workload(wl)
        for pod in snap.kind("Pod"):
            self._add_pod(pod)
        self._aggregate()

    def _add_pool(self, pool: dict[str, Any]) -> None:
        name = pool["metadata"]["name"]
        spec = pool.get("spec") or {}
        nmc = spec.get("nodeManagerConfig") or {}
        over = (spec.get("capacityConfig") or {}).get("oversubscription") or {}
        template = spec.get("schedulingConfigTemplate") or None
        mode = DEFAULT_PLACEMENT_MODE
        if template:
            tpl = self.templates.get(template)
            if tpl is None:
                self._warn(pool, f"spec.schedulingConfigTemplate: template {template!r} not found")
            else:
                mode = ((tpl.get("spec") or {}).get("placement") or {}).get("mode") or DEFAULT_PLACEMENT_MODE
        self.pools[name] = PoolView(
            name=name,
            cluster=(pool.get("status") or {}).get("cluster")
            or pool["metadata"].get("labels", {}).get(keys.MANAGED_BY),
            provisioning_mode=nmc.get("provisioningMode") or DEFAULT_PROVISIONING_MODE,
            placement_mode=mode,
            template=template,
            tflops_oversell=_int(over.get("tflopsOversellRatio"), DEFAULT_TFLOPS_OVERSELL),
            vram_expand_mem=_int(over.get("vramExpandToHostMem"), DEFAULT_VRAM_EXPAND_MEM),
            vram_expand_disk=_int(over.get("vramExpandToHostDisk"), DEFAULT_VRAM_EXPAND_DISK),
            obj=pool,
        )

    def _add_node(self, gn: dict[str, Any], k8s: dict[str, Any] | None) -> None:
        node = self._node_view(gn, k8s)
        self.nodes[node.name] = node
        pv = self.pools.get(node.pool) if node.pool else None
        if pv is not None:
            pv.nodes.append(node.name)

    def _node_view(self, gn: dict[str, Any], k8s: dict[str, Any] | None) -> NodeView:
        """A GPUNode's view from its own objects (GPUs, workers and sums are added by the build)."""
        meta = gn["metadata"]
        name = meta["name"]
        labels = meta.get("labels") or {}
        pool = None
        for key in labels:
            if key.startswith(keys.POOL_LABEL_PREFIX) and labels[key] == keys.TRUE:
                pool = key[len(keys.POOL_LABEL_PREFIX) :]
                break
        if pool is None:
            pool = labels.get(keys.MANAGED_BY)
        if pool is None:
            self._warn(
                gn, f"metadata.labels: no {keys.POOL_LABEL_PREFIX}<pool> label, node belongs to no pool"
            )
        elif pool not in self.pools:
            self._warn(gn, f"metadata.labels: pool {pool!r} not found")
        k8s_labels = (k8s or {}).get("metadata", {}).get("labels") or {}
        spec = gn.get("spec") or {}
        status = gn.get("status") or {}
        cost = spec.get("costPerHour")
        cost_f: float | None = None
        if cost not in (None, ""):
            try:
                cost_f = float(str(cost).lstrip("$"))
            except ValueError:
                self._warn(gn, f"spec.costPerHour: not a number: {cost!r}")
        info = status.get("nodeInfo") or {}
        claim = labels.get(keys.NODE_PROVISIONER) or k8s_labels.get(keys.NODE_PROVISIONER)
        node = NodeView(
            name=name,
            pool=pool,
            phase=status.get("phase") or "Pending",
            manage_mode=spec.get("manageMode") or "",
            cost_per_hour=cost_f,
            created=parse_time(meta.get("creationTimestamp")),
            do_not_disrupt=labels.get(keys.DO_NOT_DISRUPT) == keys.TRUE
            or k8s_labels.get(keys.DO_NOT_DISRUPT) == keys.TRUE,
            unschedulable=bool(((k8s or {}).get("spec") or {}).get("unschedulable")),
            claim=claim,
            ram_bytes=self._q(gn, "status.nodeInfo.ramSize", info.get("ramSize")),
            disk_bytes=self._q(gn, "status.nodeInfo.dataDiskSize", info.get("dataDiskSize")),
            obj=gn,
            node_obj=k8s,
        )
        if k8s is None:
            self._warn(gn, "no Kubernetes Node of the same name")
        return node

    def _add_gpu(self, gpu: dict[str, Any]) -> None:
        view = self._gpu_view(gpu)
        self.gpus[view.name] = view
        label_pool = (gpu["metadata"].get("labels") or {}).get(keys.GPUPOOL)
        if label_pool:
            self.gpus_by_pool_label.setdefault(label_pool, []).append(view.name)
        node = self.nodes.get(view.node) if view.node else None
        if node is not None:
            node.gpus.append(view.name)
            node.capacity.add(view.capacity)

    def _gpu_view(self, gpu: dict[str, Any]) -> GPUView:
        """A GPU's view from its object and its node's pool (nothing allocated yet)."""
        name = gpu["metadata"]["name"]
        status = gpu.get("status") or {}
        cap = status.get("capacity") or {}
        node_name = (status.get("nodeSelector") or {}).get(keys.HOSTNAME)
        node = self.nodes.get(node_name) if node_name else None
        if node_name is None:
            self._warn(gpu, f"status.nodeSelector: no {keys.HOSTNAME}, GPU belongs to no node")
        elif node is None:
            self._warn(gpu, f"status.nodeSelector: node {node_name!r} has no GPUNode")
        view = GPUView(
            name=name,
            node=node_name,
            pool=node.pool if node else (gpu["metadata"].get("labels") or {}).get(keys.GPUPOOL),
            model=status.get("gpuModel") or status.get("model") or "",
            vendor=status.get("vendor") or "",
            phase=status.get("phase") or "",
            used_by=status.get("usedBy") or "",
            index=status.get("index"),
            capacity=Res(
                self._q(gpu, "status.capacity.tflops", cap.get("tflops")),
                self._q(gpu, "status.capacity.vram", cap.get("vram")),
            ),
            obj=gpu,
            isolation=gpu_isolation(gpu),
        )
        return view

    def _add_workload(self, wl: dict[str, Any]) -> None:
        view = self._workload_view(wl)
        self.workloads[view.key] = view

    def _workload_view(self, wl: dict[str, Any]) -> WorkloadView:
        """A TensorFusionWorkload's view from its object (workers are added by the build)."""
        meta = wl["metadata"]
        ns = meta.get("namespace", "")
        spec = wl.get("spec") or {}
        res = spec.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        auto = ((spec.get("autoScalingConfig") or {}).get("autoSetResources") or {}).get("enable") is True
        pool = spec.get("poolName") or None
        if pool and pool not in self.pools:
            self._warn(wl, f"spec.poolName: pool {pool!r} not found")
        percent = (
            self._percent(wl, "spec.resources.requests", req),
            self._percent(wl, "spec.resources.limits", lim),
        )
        view = WorkloadView(
            key=f"{ns}/{meta['name']}",
            namespace=ns,
            name=meta["name"],
            pool=pool,
            replicas=spec.get("replicas"),
            gpu_count=_int(spec.get("gpuCount"), 1) or 1,
            qos=spec.get("qos") or "medium",
            request=Res(
                self._q(wl, "spec.resources.requests.tflops", req.get("tflops")),
                self._q(wl, "spec.resources.requests.vram", req.get("vram")),
            ),
            limit=Res(
                self._q(wl, "spec.resources.limits.tflops", lim.get("tflops")),
                self._q(wl, "spec.resources.limits.vram", lim.get("vram")),
            ),
            autoscale=auto,
            obj=wl,
            percent=percent,
        )
        convert_percent(view, None, _model_tflops(spec.get("gpuModel")))
        return view

    def _percent(self, obj: dict[str, Any], path: str, res: dict[str, Any]) -> float | None:
        """The compute percent of a requests/limits block that gives no TFLOPS (None: TFLOPS given).
        A zero `tflops` gives none: upstream's Go types always write the field, so a percent-based
        workload stored by TensorFusion reads `tflops: "0"` beside its `compute`."""
        if res.get("compute") in (None, "") or not unset_quantity(res.get("tflops")):
            return None
        return self._q(obj, f"{path}.compute", res["compute"])

    def _add_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if (meta.get("labels") or {}).get(keys.COMPONENT) != keys.COMPONENT_WORKER:
            native = self._native_gpu_node(pod)
            if native is not None:
                self.nodes[native].native_gpu_pods.append(f"{meta.get('namespace', '')}/{meta['name']}")
            return
        got = self._worker_view(pod)
        if got is None:
            return
        worker, known = got
        key, limit, node_name = worker.key, worker.limit, worker.node
        self.workers[key] = worker
        booked = Res()
        for g in known:
            gv = self.gpus[g]
            take = self.booking(worker, gv)
            if take is None:
                self._warn(
                    pod,
                    f"metadata.annotations[{keys.PARTITION_ID}]: no partition template "
                    f"{worker.partition!r} for GPU model {gv.model!r} (booked as its request)",
                )
                take = worker.request
            gv.allocated.add(take)
            booked.add(take)
            gv.workers.append(key)
            add_partition(gv, worker)
            if node_name is not None and gv.node != node_name:
                self._warn(pod, f"spec.nodeName: {node_name!r} but GPU {g!r} is on node {gv.node!r}")
        node = self.nodes.get(node_name) if node_name else None
        if node_name and node is None and worker.gpu_ids:
            self._warn(pod, f"spec.nodeName: node {node_name!r} has no GPUNode")
        if node is not None:
            node.workers.append(key)
            node.limits.add(limit)
        if worker.workload:
            wkey = f"{worker.namespace}/{worker.workload}"
            wv = self.workloads.get(wkey)
            if wv is None:  # local-GPU mode: the app pod is its own worker, no workload object
                wv = self._local_workload(worker, wkey)
                self.workloads[wkey] = wv
            wv.workers.append(key)
            wv.allocated.add(booked)
            if len(wv.workers) == 1 and known:
                convert_percent(wv, self.gpus[known[0]].capacity.tflops, None)

    def _native_gpu_node(self, pod: dict[str, Any]) -> str | None:
        """The node of a live non-worker pod that uses GPUs outside TensorFusion (None: not one)."""
        spec = pod.get("spec") or {}
        node_name = spec.get("nodeName") or None
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        if (
            phase not in ENDED_PHASES
            and node_name in self.nodes
            and _uses_native_gpu(spec, self.providers.native_resources())
        ):
            return node_name
        return None

    def _local_workload(self, worker: WorkerView, wkey: str) -> WorkloadView:
        """The workload of a pod without a workload object, from its first worker (local-GPU mode)."""
        ann = (worker.obj.get("metadata") or {}).get("annotations") or {}
        return WorkloadView(
            key=wkey,
            namespace=worker.namespace,
            name=worker.workload or "",
            pool=worker.pool,
            replicas=None,
            gpu_count=worker.gpu_count,
            qos=worker.qos,
            request=worker.request.copy(),
            limit=worker.limit.copy(),
            autoscale=ann.get(keys.AUTOSCALE) == keys.TRUE,
        )

    def _worker_view(self, pod: dict[str, Any]) -> tuple[WorkerView, list[str]] | None:
        """A worker pod's view and the GPUs it names that exist (None: it has ended)."""
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        spec = pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        node_name = spec.get("nodeName") or None
        if phase in ENDED_PHASES:
            return None
        ann = meta.get("annotations") or {}
        ns = meta.get("namespace", "")
        key = f"{ns}/{meta['name']}"
        gpu_ids = [g.strip() for g in ann.get(keys.GPU_IDS, "").split(",") if g.strip()]
        try:
            count = int(ann.get(keys.GPU_COUNT, "") or len(gpu_ids) or 1)
        except ValueError:
            self._warn(
                pod, f"metadata.annotations[{keys.GPU_COUNT}]: not an integer: {ann[keys.GPU_COUNT]!r}"
            )
            count = len(gpu_ids) or 1
        if gpu_ids and count != len(gpu_ids):
            self._warn(
                pod,
                f"metadata.annotations[{keys.GPU_IDS}]: names {len(gpu_ids)} GPUs but gpu-count is {count}",
            )
        gpus = self.gpus
        known = [g for g in gpu_ids if g in gpus]
        if len(known) != len(gpu_ids):
            for g in gpu_ids:
                if g not in gpus:
                    self._warn(pod, f"metadata.annotations[{keys.GPU_IDS}]: GPU {g!r} not found")
        percent = None
        if not ann.get(keys.TFLOPS_REQUEST) and ann.get(keys.COMPUTE_PERCENT_REQUEST):
            percent = self._q(pod, _ANN_PATH[keys.COMPUTE_PERCENT_REQUEST], ann[keys.COMPUTE_PERCENT_REQUEST])
        request = Res(
            self._tflops(pod, ann, keys.TFLOPS_REQUEST, keys.COMPUTE_PERCENT_REQUEST, known),
            self._q(pod, _ANN_PATH[keys.VRAM_REQUEST], ann.get(keys.VRAM_REQUEST)),
        )
        limit = Res(
            self._tflops(pod, ann, keys.TFLOPS_LIMIT, keys.COMPUTE_PERCENT_LIMIT, known),
            self._q(pod, _ANN_PATH[keys.VRAM_LIMIT], ann.get(keys.VRAM_LIMIT)),
        )
        workload = labels.get(keys.WORKLOAD) or None
        pool = ann.get(keys.GPUPOOL) or labels.get(keys.GPUPOOL) or None
        worker = WorkerView(
            key=key,
            namespace=ns,
            name=meta["name"],
            uid=meta.get("uid", ""),
            workload=workload,
            pool=pool,
            node=node_name,
            phase=phase,
            qos=ann.get(keys.QOS) or "medium",
            gpu_ids=gpu_ids,
            gpu_count=len(gpu_ids) or count,
            request=request,
            limit=limit,
            created=parse_time(meta.get("creationTimestamp")),
            terminating=bool(meta.get("deletionTimestamp")),
            obj=pod,
            isolation=ann.get(keys.ISOLATION) or "soft",
            partition=(ann.get(keys.PARTITION_ID) or "") if ann.get(keys.ISOLATION) == PARTITIONED else "",
            percent=percent,
        )
        return worker, known

    def _tflops(
        self, pod: dict[str, Any], ann: dict[str, str], tflops_key: str, pct_key: str, gpus: list[str]
    ) -> float:
        """TFLOPS per device; a compute-percent request is converted with the (first) GPU's capacity
        and truncated to whole TFLOPS, as the controller does."""
        if ann.get(tflops_key):
            return self._q(pod, _ANN_PATH[tflops_key], ann[tflops_key])
        if ann.get(pct_key):
            pct = self._q(pod, _ANN_PATH[pct_key], ann[pct_key])
            cap = self.gpus[gpus[0]].capacity.tflops if gpus else 0.0
            return percent_tflops(pct, cap)
        return 0.0

    def booking(self, worker: WorkerView, gpu: GPUView) -> Res | None:
        """What `worker` takes from `gpu`: the whole GPU when shared, its partition template's
        resources when partitioned (None: the GPU's model has no such template), else its request
        (a compute percent converted with this GPU's capacity)."""
        if worker.isolation == SHARED:
            return gpu.capacity.copy()
        if worker.partition:
            hw = self.providers.model(gpu.model)
            t = hw.template(worker.partition) if hw is not None else None
            if t is None:
                return None
            return Res(*t.resources(gpu.capacity.tflops))
        if worker.percent is not None:
            return Res(percent_tflops(worker.percent, gpu.capacity.tflops), worker.request.vram)
        return worker.request

    def _aggregate(self) -> None:
        for node in self.nodes.values():
            for g in node.gpus:
                node.allocated.add(self.gpus[g].allocated)
            pool = self.pools.get(node.pool) if node.pool else None
            node.virtual = virtual_capacity(node, pool)
            if pool is not None:
                add_node_to_pool(pool, node)
        for pool_label, names in self.gpus_by_pool_label.items():
            per_node = self.compaction_sums.setdefault(pool_label, {})
            for name in names:
                add_compaction_sums(per_node, self.gpus[name])
        for gpu in self.gpus.values():
            if over_allocated(gpu):
                self._warn(gpu.obj, OVER_ALLOCATED)

    # -- queries -------------------------------------------------------------------------------

    def derived(self, key: str, make: Callable[[ClusterState], T]) -> T:
        """`make(self)`, computed once per state and kept under `key`: a module's index of this
        snapshot (e.g. defrag's workers per node) costs one pass however many plans read it. Safe
        because a state is never changed after `build`; racing threads compute the same value."""
        got = self._derived.get(key)
        if got is None:
            got = self._derived[key] = make(self)
        return cast(T, got)

    def derived_from(self, basis: ClusterState) -> None:
        """Mark this state as derived from `basis` (sharing the views of unchanged objects)."""
        self._basis = weakref.ref(basis)
        self.carry_bases(basis)

    def basis_derived(self, key: str) -> tuple[ClusterState, Any] | None:
        """(the basis, its value under `key`) when this state was derived from a basis that is
        still alive (`derived_from`) and has computed `key`; else None."""
        basis = self._basis() if self._basis is not None else None
        got = basis._derived.get(key) if basis is not None else None
        return None if basis is None or got is None else (basis, got)
