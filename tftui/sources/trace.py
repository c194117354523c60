"""A GPU cluster trace in the openb format (Alibaba `cluster-trace-gpu-v2023`) as tftui objects.

Two CSV files: nodes (`sn,cpu_milli,memory_mib,gpu,model`) and tasks (`name,cpu_milli,memory_mib,
num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time`). `read_trace`
checks every row and stops at the first bad one with one line naming the file, the row (1 = the
header) and the column. `trace_objects` / `task_objects` turn the result into the objects a
TensorFusion cluster would hold: a GPUPool with one GPUNode, Node and GPU objects per trace node, and
per task a TensorFusionWorkload with one worker pod (or a plain pod for a CPU-only task).

**The mapping** (the trace has no VRAM per task, so this is a choice, printed with every result):
a task's `gpu_milli/1000` is that share of one GPU — compute as `compute-percent-request =
gpu_milli/10` (a share of the TFLOPS of whichever GPU it lands on), VRAM as the same share of the
smallest VRAM among the GPU models it accepts. `num_gpu > 1` tasks are whole-GPU workers
(`gpu-count = num_gpu`, 100 % each); `gpu_spec` (models separated by `|`) is the request's model
constraint (`gpu-model` for one model, a required node affinity on `MODEL_LABEL` for several);
`num_gpu = 0` tasks are CPU-only pods. Node CPU and memory are the Node's `allocatable`, with
`NODE_PODS` pod slots (the trace has no pod limit).

GPU models: the trace names them by short codes; `GPU_MODELS` gives each TFLOPS (FP16) and VRAM.
G1–G3 are undisclosed in the trace: they get the figures of the table, stated as assumptions.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tftui.model import keys

JSON = dict[str, Any]
MI: Final = 1 << 20
GI: Final = 1 << 30
NODE_PODS: Final = 1001  # pod slots per node (the paper's simulator uses the same figure)
NAMESPACE: Final = "trace"
MODEL_LABEL: Final = f"{keys.DOMAIN}/gpu-model"  # Node label naming the trace GPU model code
NODE_COLUMNS: Final = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS: Final = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
MAX_GPUS: Final = 128


@dataclass(frozen=True, slots=True)
class GPUModel:
    """One trace GPU model code: its NVML-style name, FP16 TFLOPS, VRAM, and where the figures are from."""

    code: str
    full_name: str
    tflops: float
    vram_gib: int
    source: str

    def to_json(self) -> JSON:
        return {
            "name": self.full_name,
            "tflops": self.tflops,
            "vram_gib": self.vram_gib,
            "source": self.source,
        }


GPU_MODELS: Final[dict[str, GPUModel]] = {
    m.code: m
    for m in (
        GPUModel("P100", "Tesla P100-PCIE-16GB", 19.0, 16, "NVIDIA data sheet (18.7 FP16, rounded)"),
        GPUModel("T4", "Tesla T4", 65.0, 16, "NVIDIA data sheet"),
        GPUModel("V100M16", "Tesla V100-SXM2-16GB", 125.0, 16, "NVIDIA data sheet"),
        GPUModel("V100M32", "Tesla V100-SXM2-32GB", 125.0, 32, "NVIDIA data sheet"),
        GPUModel("A10", "NVIDIA A10", 125.0, 24, "NVIDIA data sheet"),
        GPUModel("G1", "Undisclosed G1", 125.0, 32, "assumed (undisclosed in the trace): V100-class"),
        GPUModel("G2", "Undisclosed G2", 125.0, 32, "assumed (undisclosed in the trace): V100-class"),
        GPUModel("G3", "Undisclosed G3", 312.0, 80, "assumed (undisclosed in the trace): A100-class"),
    )
}


class TraceError(ValueError):
    """A trace file that cannot be read: the message names the file, row and column."""


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str  # a `GPU_MODELS` code ("" when the node has no GPU)


@dataclass(frozen=True, slots=True)
class TraceTask:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU; 1000 for whole GPUs
    gpu_spec: tuple[str, ...]  # accepted models (empty: any)
    qos: str
    phase: str
    creation: int
    deletion: int | None
    scheduled: int | None

    @property
    def milli_total(self) -> int:
        """Milli-GPUs the task asks for in all (the protocol's unit of demand)."""
        return self.gpu_milli * self.num_gpu

    @property
    def shape(self) -> tuple[int, int, int, int, tuple[str, ...]]:
        """What placement looks at: CPU, memory, GPUs, share, models."""
        return (self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli, self.gpu_spec)


@dataclass(frozen=True, slots=True)
class Trace:
    nodes: tuple[TraceNode, ...]
    tasks: tuple[TraceTask, ...]
    nodes_file: str = ""
    pods_file: str = ""

    @property
    def gpu_milli(self) -> int:
        """The cluster's GPU capacity in milli-GPUs."""
        return 1000 * sum(n.gpus for n in self.nodes)

    def models(self) -> list[str]:
        return sorted({n.model for n in self.nodes if n.gpus})

    def mapping(self) -> JSON:
        """How trace figures became TensorFusion requests (stated with every result)."""
        return {
            "gpu_share": "gpu_milli/1000 of one GPU: compute-percent-request = gpu_milli/10 of the TFLOPS "
            "of the GPU it lands on; VRAM the same share of the smallest VRAM among the models the task "
            "accepts (the trace has no VRAM per task)",
            "multi_gpu": "num_gpu > 1: whole-GPU workers, gpu-count = num_gpu, 100 % of each GPU",
            "gpu_spec": "accepted GPU models (gpu-model annotation for one, node affinity for several)",
            "cpu_only": "num_gpu = 0: plain pods that take CPU and memory only",
            "node": f"CPU and memory as the Node's allocatable, {NODE_PODS} pod slots",
            "models": {m: GPU_MODELS[m].to_json() for m in self.models()},
        }


def _reader(path: str | Path, columns: Sequence[str]) -> tuple[str, Iterable[tuple[int, dict[str, str]]]]:
    name = str(path)
    try:
        fh = open(path, encoding="utf-8", newline="")  # noqa: SIM115 - closed by the generator
    except OSError as exc:
        raise TraceError(f"{name}: cannot read: {exc.strerror or exc}") from None

    def rows() -> Iterable[tuple[int, dict[str, str]]]:
        with fh:
            reader = csv.reader(fh)
            try:
                header = next(reader)
            except StopIteration:
                raise TraceError(
                    f"{name}: row 1: empty file (expected the header {','.join(columns)})"
                ) from None
            except (csv.Error, UnicodeDecodeError) as exc:
                raise TraceError(f"{name}: row 1: {exc}") from None
            header = [h.strip() for h in header]
            for col in columns:
                if col not in header:
                    raise TraceError(f"{name}: row 1: column {col}: missing from the header")
            idx = {c: header.index(c) for c in columns}
            row_no = 1
            try:
                for row in reader:
                    row_no += 1
                    if not row or all(not c.strip() for c in row):
                        continue
                    if len(row) != len(header):
                        raise TraceError(
                            f"{name}: row {row_no}: has {len(row)} fields, the header {len(header)}"
                        )
                    yield row_no, {c: row[i].strip() for c, i in idx.items()}
            except (csv.Error, UnicodeDecodeError) as exc:
                raise TraceError(f"{name}: row {row_no + 1}: {exc}") from None

    return name, rows()


def _int(file: str, row: int, col: str, text: str, lo: int = 0, hi: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise TraceError(f"{file}: row {row}: column {col}: not an integer: {text!r}") from None
    if value < lo or (hi is not None and value > hi):
        bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise TraceError(f"{file}: row {row}: column {col}: must be {bound}, got {value}")
    return value


def _known(file: str, row: int, col: str, code: str) -> str:
    if code not in GPU_MODELS:
        raise TraceError(
            f"{file}: row {row}: column {col}: unknown GPU model {code!r} (known: {', '.join(GPU_MODELS)})"
        )
    return code


def read_nodes(path: str | Path) -> tuple[TraceNode, ...]:
    file, rows = _reader(path, NODE_COLUMNS)
    out: list[TraceNode] = []
    seen: set[str] = set()
    for row, r in rows:
        name = r["sn"]
        if not name:
            raise TraceError(f"{file}: row {row}: column sn: empty node name")
        if name in seen:
            raise TraceError(f"{file}: row {row}: column sn: node {name!r} listed twice")
        seen.add(name)
        gpus = _int(file, row, "gpu", r["gpu"], 0, MAX_GPUS)
        model = r["model"] if r["model"].lower() not in ("", "nan") else ""
        if gpus and not model:
            raise TraceError(f"{file}: row {row}: column model: a node with {gpus} GPUs needs a model")
        out.append(
            TraceNode(
                name,
                _int(file, row, "cpu_milli", r["cpu_milli"]),
                _int(file, row, "memory_mib", r["memory_mib"]),
                gpus,
                _known(file, row, "model", model) if gpus else "",
            )
        )
    if not out:
        raise TraceError(f"{file}: no nodes")
    return tuple(out)


def read_tasks(path: str | Path) -> tuple[TraceTask, ...]:
    file, rows = _reader(path, POD_COLUMNS)
    out: list[TraceTask] = []
    seen: set[str] = set()
    for row, r in rows:
        name = r["name"]
        if not name:
            raise TraceError(f"{file}: row {row}: column name: empty task name")
        if name in seen:
            raise TraceError(f"{file}: row {row}: column name: task {name!r} listed twice")
        seen.add(name)
        num = _int(file, row, "num_gpu", r["num_gpu"], 0, MAX_GPUS)
        milli = _int(file, row, "gpu_milli", r["gpu_milli"] or "0", 0, 1000)
        if num == 0 and milli:
            raise TraceError(
                f"{file}: row {row}: column gpu_milli: a CPU-only task (num_gpu 0) asks for {milli}"
            )
        if num == 1 and not milli:
            raise TraceError(f"{file}: row {row}: column gpu_milli: a 1-GPU task must ask for 1..1000")
        if num > 1 and milli != 1000:
            raise TraceError(
                f"{file}: row {row}: column gpu_milli: a {num}-GPU task must ask for whole GPUs (1000), got {milli}"
            )
        spec_text = r["gpu_spec"] if r["gpu_spec"].lower() != "nan" else ""
        spec = tuple(
            sorted({_known(file, row, "gpu_spec", s.strip()) for s in spec_text.split("|") if s.strip()})
        )
        created = _int(file, row, "creation_time", r["creation_time"] or "0")
        deleted = _int(file, row, "deletion_time", r["deletion_time"]) if r["deletion_time"] else None
        if deleted is not None and deleted < created:
            raise TraceError(
                f"{file}: row {row}: column deletion_time: {deleted} is before creation_time {created}"
            )
        sched = _int(file, row, "scheduled_time", r["scheduled_time"]) if r["scheduled_time"] else None
        out.append(
            TraceTask(
                name,
                _int(file, row, "cpu_milli", r["cpu_milli"]),
                _int(file, row, "memory_mib", r["memory_mib"]),
                num,
                milli,
                spec,
                r["qos"],
                r["pod_phase"],
                created,
                deleted,
                sched,
            )
        )
    if not out:
        raise TraceError(f"{file}: no tasks")
    return tuple(out)


def read_trace(nodes: str | Path, pods: str | Path) -> Trace:
    """Both files, every row checked (`TraceError` names the first bad one)."""
    return Trace(read_nodes(nodes), read_tasks(pods), str(nodes), str(pods))


# -- objects ------------------------------------------------------------------------------------------

_QOS: Final = {"LS": "high", "Guaranteed": "high", "BE": "low"}  # the rest: medium
_TS: Final = "2026-01-01T00:00:00Z"


def _gpu_name(node: str, i: int) -> str:
    return f"{node}-gpu{i}"


def trace_objects(trace: Trace, pool: str = "trace", mode: str | None = None) -> list[JSON]:
    """The cluster of the trace's nodes, empty: a TensorFusionCluster, the GPUPool (with a
    SchedulingConfigTemplate setting `mode`, if given) and per node its Node, GPUNode and GPUs."""
    tf = keys.API_VERSION
    objs: list[JSON] = [
        {
            "apiVersion": tf,
            "kind": "TensorFusionCluster",
            "metadata": {"name": "trace", "creationTimestamp": _TS},
            "spec": {},
        },
        {
            "apiVersion": tf,
            "kind": "SchedulingConfigTemplate",
            "metadata": {"name": pool, "creationTimestamp": _TS},
            "spec": {"placement": {"mode": mode}} if mode else {},
        },
        {
            "apiVersion": tf,
            "kind": "GPUPool",
            "metadata": {
                "name": pool,
                "creationTimestamp": _TS,
                "labels": {keys.MANAGED_BY: "trace"},
                "annotations": {keys.IS_DEFAULT_POOL: keys.TRUE},
            },
            "spec": {
                "schedulingConfigTemplate": pool,
                "nodeManagerConfig": {"provisioningMode": "AutoSelect"},
            },
            "status": {"cluster": "trace", "phase": "Running"},
        },
    ]
    for n in trace.nodes:
        model = GPU_MODELS.get(n.model)
        labels = {keys.HOSTNAME: n.name, MODEL_LABEL: n.model} if n.model else {keys.HOSTNAME: n.name}
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": n.name, "creationTimestamp": _TS, "labels": labels},
                "spec": {},
                "status": {
                    "capacity": {
                        "cpu": f"{n.cpu_milli}m",
                        "memory": f"{n.memory_mib}Mi",
                        "pods": str(NODE_PODS),
                    },
                    "allocatable": {
                        "cpu": f"{n.cpu_milli}m",
                        "memory": f"{n.memory_mib}Mi",
                        "pods": str(NODE_PODS),
                    },
                    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": _TS}],
                },
            }
        )
        objs.append(
            {
                "apiVersion": tf,
                "kind": "GPUNode",
                "metadata": {
                    "name": n.name,
                    "creationTimestamp": _TS,
                    "labels": {keys.MANAGED_BY: pool, keys.pool_label(pool): keys.TRUE},
                },
                "spec": {"manageMode": "AutoSelect"},
                "status": {
                    "phase": "Running",
                    "totalGPUs": n.gpus,
                    "nodeInfo": {"ramSize": f"{n.memory_mib}Mi"},
                },
            }
        )
        for i in range(n.gpus):
            assert model is not None
            objs.append(
                {
                    "apiVersion": tf,
                    "kind": "GPU",
                    "metadata": {
                        "name": _gpu_name(n.name, i),
                        "creationTimestamp": _TS,
                        "labels": {keys.MANAGED_BY: n.name, keys.GPUPOOL: pool},
                    },
                    "status": {
                        "phase": "Running",
                        "vendor": "NVIDIA",
                        "model": n.model,
                        "gpuModel": model.full_name,
                        "uuid": _gpu_name(n.name, i),
                        "index": i,
                        "capacity": {"tflops": f"{model.tflops:g}", "vram": f"{model.vram_gib}Gi"},
                        "available": {"tflops": f"{model.tflops:g}", "vram": f"{model.vram_gib}Gi"},
                        "nodeSelector": {keys.HOSTNAME: n.name},
                        "usedBy": "tensor-fusion",
                    },
                }
            )
    return objs


def task_vram(task: TraceTask, models: Sequence[str]) -> int:
    """VRAM bytes per GPU of a task: its share of the smallest VRAM among the models it accepts."""
    accepted = [m for m in (task.gpu_spec or models) if m in GPU_MODELS] or list(GPU_MODELS)
    smallest = min(GPU_MODELS[m].vram_gib for m in accepted)
    return smallest * GI * task.gpu_milli // 1000


def task_objects(task: TraceTask, models: Sequence[str], pool: str = "trace") -> tuple[JSON | None, JSON]:
    """(TensorFusionWorkload, its worker pod, Pending) for a GPU task; (None, a plain pod) for a
    CPU-only one. `models`: the cluster's GPU models (for the VRAM of the mapping)."""
    container = {
        "name": "main",
        "image": "trace",
        "resources": {"requests": {"cpu": f"{task.cpu_milli}m", "memory": f"{task.memory_mib}Mi"}},
    }
    meta: JSON = {"name": task.name, "namespace": NAMESPACE, "creationTimestamp": _TS, "labels": {}}
    if task.num_gpu == 0:
        pod: JSON = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**meta, "labels": {"app": task.name}},
            "spec": {"schedulerName": "default-scheduler", "containers": [container]},
            "status": {"phase": "Pending"},
        }
        return None, pod
    vram = str(task_vram(task, models))
    pct = f"{task.gpu_milli / 10:g}"
    qos = _QOS.get(task.qos, "medium")
    ann = {
        keys.GPUPOOL: pool,
        keys.QOS: qos,
        keys.GPU_COUNT: str(task.num_gpu),
        keys.COMPUTE_PERCENT_REQUEST: pct,
        keys.COMPUTE_PERCENT_LIMIT: pct,
        keys.VRAM_REQUEST: vram,
        keys.VRAM_LIMIT: vram,
    }
    spec: JSON = {"schedulerName": "tensor-fusion-scheduler", "containers": [container]}
    if len(task.gpu_spec) == 1:
        ann[keys.GPU_MODEL] = task.gpu_spec[0]
    elif task.gpu_spec:
        term = {"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": list(task.gpu_spec)}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    workload: JSON = {
        "apiVersion": keys.API_VERSION,
        "kind": "TensorFusionWorkload",
        "metadata": {**meta, "labels": {keys.GPUPOOL: pool}},
        "spec": {
            "replicas": 1,
            "poolName": pool,
            "qos": qos,
            "gpuCount": task.num_gpu,
            "resources": {"requests": {"vram": vram}, "limits": {"vram": vram}},
        },
        "status": {},
    }
    if len(task.gpu_spec) == 1:
        workload["spec"]["gpuModel"] = task.gpu_spec[0]
    worker: JSON = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **meta,
            "name": f"{task.name}-tf-worker-0",
            "labels": {keys.COMPONENT: keys.COMPONENT_WORKER, keys.WORKLOAD: task.name, keys.GPUPOOL: pool},
            "annotations": ann,
            "ownerReferences": [
                {
                    "apiVersion": keys.API_VERSION,
                    "kind": "TensorFusionWorkload",
                    "name": task.name,
                    "uid": "",
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }
    return workload, worker


def protocol_input(trace: Trace) -> tuple[list[Any], list[Any]]:
    """The trace's nodes and tasks in the arrivals protocol's units (`engine.arrivals`)."""
    from tftui.engine.arrivals import Node, Task
    from tftui.engine.preempt import QOS_PRIORITY

    nodes = [Node(n.name, n.cpu_milli, n.memory_mib, n.gpus, n.model) for n in trace.nodes]
    tasks = [
        Task(
            t.name,
            t.cpu_milli,
            t.memory_mib,
            t.num_gpu,
            t.gpu_milli,
            frozenset(t.gpu_spec) or None,
            t.creation,
            QOS_PRIORITY.get(_QOS.get(t.qos, "medium"), 0),
        )
        for t in trace.tasks
    ]
    return nodes, tasks
