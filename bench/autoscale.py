"""Benchmark: autoscale history load + recommend for 10,000 workers × 2 h of 1-minute samples.

Rows are synthetic `tf_worker_usage` dicts held in memory (1.2 M by default), so the baseline is the
cost of *consuming* them: one pass reading the seven columns the loader reads. The figure is

    RATIO (load + recommend) / read_rows = X   (goal <= 1.5)

Best of `--repeat` runs each. A real history load also pays the database fetch, which this baseline
leaves out on purpose: it measures the recommender's own overhead per row. A second ratio uses a
fetch proxy, building the row dicts from tuples as a driver's `dict_row` factory does.
"""

from __future__ import annotations

import argparse
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from _timing import best  # bench/ is on sys.path when a script runs

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GI = 1024**3


def objects(workers: int, per_workload: int, gpus_per_node: int) -> list[dict[str, Any]]:
    api = "tensor-fusion.ai/v1"
    created = (NOW - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": api,
            "kind": "GPUPool",
            "metadata": {"name": "p", "creationTimestamp": created},
            "spec": {},
        }
    ]
    nodes = (workers + gpus_per_node - 1) // gpus_per_node
    for n in range(nodes):
        name = f"n{n}"
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "creationTimestamp": created},
                "spec": {},
                "status": {},
            }
        )
        objs.append(
            {
                "apiVersion": api,
                "kind": "GPUNode",
                "metadata": {
                    "name": name,
                    "labels": {"tensor-fusion.ai/pool-p": "true"},
                    "creationTimestamp": created,
                },
                "spec": {},
                "status": {"phase": "Running"},
            }
        )
        for g in range(gpus_per_node):
            objs.append(
                {
                    "apiVersion": api,
                    "kind": "GPU",
                    "metadata": {"name": f"{name}-g{g}", "creationTimestamp": created},
                    "status": {
                        "capacity": {"tflops": "312", "vram": "80Gi"},
                        "nodeSelector": {"kubernetes.io/hostname": name},
                        "usedBy": "tensor-fusion",
                        "phase": "Running",
                    },
                }
            )
    for i in range(workers // per_workload):
        auto = {"autoSetResources": {"enable": i % 2 == 0}}
        objs.append(
            {
                "apiVersion": api,
                "kind": "TensorFusionWorkload",
                "metadata": {"name": f"wl{i}", "namespace": "ns", "creationTimestamp": created},
                "spec": {
                    "poolName": "p",
                    "replicas": per_workload,
                    "resources": {
                        "requests": {"tflops": "50", "vram": "16Gi"},
                        "limits": {"tflops": "100", "vram": "24Gi"},
                    },
                    "autoScalingConfig": auto,
                },
                "status": {"workerCount": per_workload},
            }
        )
    for w in range(workers):
        node, g = divmod(w, gpus_per_node)
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"wk{w}",
                    "namespace": "ns",
                    "uid": f"u{w}",
                    "creationTimestamp": created,
                    "labels": {
                        "tensor-fusion.ai/component": "worker",
                        "tensor-fusion.ai/workload": f"wl{w // per_workload}",
                    },
                    "annotations": {
                        "tensor-fusion.ai/gpu-ids": f"n{node}-g{g}",
                        "tensor-fusion.ai/tflops-request": "50",
                        "tensor-fusion.ai/tflops-limit": "100",
                        "tensor-fusion.ai/vram-request": "16Gi",
                        "tensor-fusion.ai/vram-limit": "24Gi",
                    },
                },
                "spec": {"nodeName": f"n{node}"},
                "status": {"phase": "Running"},
            }
        )
    return objs


def rows(workers: int, per_workload: int, gpus_per_node: int, minutes: int) -> list[dict[str, Any]]:
    """ts-ordered rows, as `MetricsPort.rows` yields them (one shared datetime per minute)."""
    rng = random.Random(1)
    base = [(rng.uniform(5, 60), rng.uniform(2, 20) * GI) for _ in range(workers)]
    out: list[dict[str, Any]] = []
    start = NOW - timedelta(minutes=minutes)
    for m in range(minutes):
        ts = start + timedelta(minutes=m)
        for w in range(workers):
            t, v = base[w]
            node, g = divmod(w, gpus_per_node)
            out.append(
                {
                    "namespace": "ns",
                    "workload": f"wl{w // per_workload}",
                    "pod_name": f"wk{w}",
                    "worker": f"u{w}",
                    "uuid": f"n{node}-g{g}",
                    "compute_tflops": t * (0.8 + 0.4 * ((m * 7 + w) % 11) / 10),
                    "compute_percentage": 0.0,
                    "memory_bytes": int(v * (0.9 + 0.2 * ((m * 3 + w) % 7) / 6)),
                    "ts": ts,
                }
            )
    return out


def read_rows(rs: list[dict[str, Any]]) -> int:
    n = 0
    for r in rs:
        _ = (
            r["ts"],
            r["namespace"],
            r["workload"],
            r["pod_name"],
            r["uuid"],
            r["compute_tflops"],
            r["memory_bytes"],
        )
        n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=10000)
    parser.add_argument("--per-workload", type=int, default=4)
    parser.add_argument("--minutes", type=int, default=120)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from tftui.engine.autoscale import AutoscaleState, recommend
    from tftui.engine.state import ClusterState
    from tftui.model.dump import validate_items

    state = ClusterState.build(validate_items(objects(args.workers, args.per_workload, 8)))
    rs = rows(args.workers, args.per_workload, 8, args.minutes)

    def load_and_recommend() -> None:
        ast = AutoscaleState()
        ast.configure(state)
        ast.add_samples(rs)
        recommend(state, ast, NOW)

    def load_only() -> None:
        ast = AutoscaleState()
        ast.configure(state)
        ast.add_samples(rs)

    cols = tuple(rs[0])
    tuples = [tuple(r[c] for c in cols) for r in rs]
    t_fetch = best(lambda: [dict(zip(cols, t, strict=True)) for t in tuples], args.repeat)
    t_read = best(lambda: read_rows(rs), args.repeat)
    t_load = best(load_only, args.repeat)
    t_all = best(load_and_recommend, args.repeat)
    print(f"{len(rs)} rows, {args.workers} workers, {len(state.workloads)} workloads")
    print(f"read rows (7 columns)          {t_read:8.3f} s")
    print(f"materialise rows (dict_row)    {t_fetch:8.3f} s")
    print(f"load into histograms           {t_load:8.3f} s")
    print(f"load + recommend all           {t_all:8.3f} s")
    from _timing import ratio  # bench/ is on sys.path when a script runs

    ratio("load_recommend/read_rows", t_all / t_read, 1.5, "<=")
    ratio("load_recommend/materialise_rows", t_all / t_fetch)  # fetch proxy


if __name__ == "__main__":
    main()
