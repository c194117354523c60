"""Benchmark: autoscale history load + recommend for 10,000 workers × 2 h of 1-minute samples (A12).

The rows (1.2 M by default) are COPY'd into `tf_worker_usage` of a throwaway PostgreSQL (the tests'
server, tests/pg.py) standing in for GreptimeDB, shaped as upstream writes them: `compute_tflops`
0 and `compute_percentage` set, so TFLOPS come from each GPU's capacity (`--tflops-column` writes
TFLOPS instead). Then, best of `--repeat` each:

    fetch raw rows   = `GreptimeMetrics.rows` over the 2 h window, every row read (the baseline unit)
    load + recommend = what the runtime does on its first tick: `load_usage` (the store aggregates
                       per pod and TFLOPS bucket) into a fresh `AutoscaleState`, then `recommend`

    RATIO (load + recommend) / fetch_raw_rows = X   (goal <= 1.5)

Secondary figures: the same over a bare psycopg cursor returning tuples (the cheapest possible
fetch), and the row-by-row path (fetch raw rows, `add_samples`, recommend) it replaces.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _timing import best  # bench/ is on sys.path when a script runs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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


COLUMNS = (
    "workload, worker, pod_name, namespace, pool, node, uuid, compute_tflops, compute_percentage, "
    "memory_bytes, memory_percentage, ts"
)


def load(conn: Any, workers: int, per_workload: int, gpus_per_node: int, minutes: int, tflops: bool) -> None:
    """COPY the window's rows in per-minute text chunks (deterministic values)."""
    rng = random.Random(1)
    base = [(rng.uniform(5, 60), rng.uniform(2, 20) * GI) for _ in range(workers)]
    start = NOW - timedelta(minutes=minutes)
    with conn.cursor() as cur, cur.copy(f"COPY tf_worker_usage ({COLUMNS}) FROM STDIN") as copy:
        for m in range(minutes):
            ts = (start + timedelta(minutes=m)).strftime("%Y-%m-%d %H:%M:%S")
            lines = []
            for w in range(workers):
                t, v = base[w]
                node, g = divmod(w, gpus_per_node)
                used = t * (0.8 + 0.4 * ((m * 7 + w) % 11) / 10)
                tfl, pct = (used, 0.0) if tflops else (0.0, round(used / 312 * 100, 3))
                mem = int(v * (0.9 + 0.2 * ((m * 3 + w) % 7) / 6))
                lines.append(f"wl{w // per_workload}\tu{w}\twk{w}\tns\tp\tn{node}\tn{node}-g{g}\t{tfl}\t{pct}\t"
                             f"{mem}\t{mem / (24 * GI) * 100:.2f}\t{ts}\n")  # fmt: skip
            copy.write("".join(lines))
    conn.execute("VACUUM ANALYZE tf_worker_usage")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=10000)
    parser.add_argument("--per-workload", type=int, default=4)
    parser.add_argument("--minutes", type=int, default=120)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tflops-column", action="store_true", help="write compute_tflops, not percentages")
    args = parser.parse_args()

    from tests.pg import USER, create_tables, start_server
    from tftui.engine.autoscale import AutoscaleState, recommend
    from tftui.engine.state import ClusterState
    from tftui.model.dump import validate_items
    from tftui.runtime.history import load_usage
    from tftui.sources.greptime import GreptimeMetrics

    server = start_server()
    try:
        t0 = time.perf_counter()
        state = ClusterState.build(validate_items(objects(args.workers, args.per_workload, 8)))
        server.create_database("bench")
        with server.connect("bench", user=USER) as conn:
            create_tables(conn, "ts", ("tf_worker_usage",))
            load(conn, args.workers, args.per_workload, 8, args.minutes, args.tflops_column)
        print(f"set-up {time.perf_counter() - t0:.1f} s")
        metrics = GreptimeMetrics(server.dsn("bench"), pool_size=2)
        start = NOW - timedelta(minutes=args.minutes)

        def fetch_rows() -> int:
            return sum(1 for _ in metrics.rows("tf_worker_usage", start, NOW))

        def fetch_tuples() -> int:
            with server.connect("bench", user=USER) as conn:
                return len(conn.execute(
                    "SELECT * FROM tf_worker_usage WHERE ts >= %s AND ts < %s ORDER BY ts",
                    (start.replace(tzinfo=None), NOW.replace(tzinfo=None)),
                ).fetchall())  # fmt: skip

        def load_and_recommend() -> None:
            ast = AutoscaleState()
            ast.configure(state)
            load_usage(metrics, ast, start, NOW)
            recommend(state, ast, NOW)

        def load_only() -> None:
            ast = AutoscaleState()
            ast.configure(state)
            load_usage(metrics, ast, start, NOW)

        def row_by_row() -> None:
            ast = AutoscaleState()
            ast.configure(state)
            ast.add_samples(list(metrics.rows("tf_worker_usage", start, NOW)))
            recommend(state, ast, NOW)

        n = fetch_rows()  # connect, detect, warm the cache
        t_rows = best(fetch_rows, args.repeat)
        t_tuples = best(fetch_tuples, args.repeat)
        t_load = best(load_only, args.repeat)
        t_all = best(load_and_recommend, args.repeat)
        t_old = best(row_by_row, 1)
        metrics.close()
        shape = "compute_tflops" if args.tflops_column else "compute_percentage × GPU capacity"
        print(f"{n:,} rows ({shape}), {args.workers} workers, {len(state.workloads)} workloads")
        print(f"fetch raw rows (GreptimeMetrics.rows)     {t_rows:8.3f} s")
        print(f"fetch raw rows (bare cursor, tuples)      {t_tuples:8.3f} s")
        print(f"load (store-aggregated histograms)        {t_load:8.3f} s")
        print(f"load + recommend all                      {t_all:8.3f} s")
        print(
            f"row by row: fetch + add_samples + recommend {t_old:6.3f} s (the path the first load replaces)"
        )
        from _timing import ratio  # bench/ is on sys.path when a script runs

        ratio("load_recommend/fetch_raw_rows", t_all / t_rows, 1.5, "<=")
        ratio("load_recommend/fetch_tuples", t_all / t_tuples)  # bare cursor
    finally:
        server.stop()


if __name__ == "__main__":
    main()
