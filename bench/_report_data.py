"""bench/report.py's data and its hand-written baseline (not a benchmark itself: bench/run.py skips `_*`).

`Synthetic` writes a day of 1-minute rows for 1,000 GPUs (125 nodes × 8) and 3,000 workers as COPY
text for PostgreSQL; `dialect_tables` builds the same shape (same counts and groups, values of the
same kind) as Arrow tables with DataFusion's own SQL (Python objects for 10 M rows would take
minutes), in the line-protocol layout GreptimeDB gives them.

`handwritten` is the baseline the report is measured against: the reference page's four step-1
GROUP BYs as the page writes them (bounded window), and the alert replay as a person would write it,
one query per rule over the span grouped by evaluation step, each rule's upstream aggregate and
HAVING (EmptyGPU: and the nodes with a worker per step) — no NoData probes, no counts per step, no
edge rows counted twice.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GIB = 1 << 30
CAP_TFLOPS, CAP_VRAM = 312.0, 80 * GIB


class Synthetic:
    """1,000 GPUs and 3,000 workers (three per GPU), deterministic per-minute values."""

    def __init__(self, nodes: int, gpus_per_node: int, workers: int, minutes: int) -> None:
        self.minutes = minutes
        self.gpus = [(f"gpu-{i:05d}", f"node-{i // gpus_per_node:04d}") for i in range(nodes * gpus_per_node)]
        self.nodes = [f"node-{n:04d}" for n in range(nodes)]
        self.workers = []
        for w in range(workers):
            uuid, node = self.gpus[w % len(self.gpus)]
            wl = f"wl-{w // 3:04d}"
            ns = f"ns-{(w // 3) % 20:02d}"
            self.workers.append((w, f"{wl}-pod-{w % 3}", f"uid-{w:06d}", wl, ns, node, uuid))
        self.curve = [0.55 + 0.45 * math.sin(2 * math.pi * m / 1440) for m in range(1440)]
        start = NOW - timedelta(minutes=minutes)
        self.stamps = [(start + timedelta(minutes=m)).strftime("%Y-%m-%d %H:%M:%S") for m in range(minutes)]

    def _pct(self, w: int, m: int) -> float:
        return round((5 + (w * 37) % 60) * self.curve[(m + w * 7) % 1440], 3)

    def gpu_usage(self) -> Iterator[str]:
        per_gpu = len(self.workers) // len(self.gpus)
        for m, ts in enumerate(self.stamps):
            lines = []
            for g, (uuid, node) in enumerate(self.gpus):
                pct = min(100.0, sum(self._pct(g + k * len(self.gpus), m) for k in range(per_gpu)))
                mem = int(pct / 100 * CAP_VRAM * 0.9)
                lines.append(
                    f"{node}\tbench\t{uuid}\t{pct:.3f}\t0\t{mem}\t0\t{40 + pct / 2:.1f}\t{100 + pct * 3:.1f}\t{ts}\n"
                )
            yield "".join(lines)

    def worker_usage(self) -> Iterator[str]:
        for m, ts in enumerate(self.stamps):
            lines = []
            for w, pod, uid, wl, ns, node, uuid in self.workers:
                pct = self._pct(w, m)
                mem = int(pct / 100 * CAP_VRAM * 0.3)
                lines.append(
                    f"{wl}\t{uid}\t{pod}\t{ns}\tbench\t{node}\t{uuid}\t0\t{pct}\t{mem}\t{pct:.1f}\t{ts}\n"
                )
            yield "".join(lines)

    def worker_resources(self) -> Iterator[str]:
        for ts in self.stamps:
            lines = [
                f"{pod}\t{wl}\tbench\t{ns}\tmedium\t{20 + w % 5 * 10}\t{100}\t{8 * GIB}\t{16 * GIB}\t1\t0.001\tt\t{ts}\n"
                for w, pod, _uid, wl, ns, _node, _uuid in self.workers
            ]
            yield "".join(lines)

    def node_metrics(self) -> Iterator[str]:
        total_t = CAP_TFLOPS * 8
        for ts in self.stamps:
            lines = []
            for n, node in enumerate(self.nodes):
                alloc = 24 * (20 + n % 5 * 10)
                pct = alloc / total_t * 100
                lines.append(
                    f"{node}\tbench\tRunning\t{alloc}\t{pct:.3f}\t{24 * 8 * GIB}\t30.0\t{pct / 3:.3f}\t10.0\t0.5\t8\t{ts}\n"
                )
            yield "".join(lines)


COLUMNS = {
    "tf_gpu_usage": "node, pool, uuid, compute_percentage, memory_percentage, memory_bytes, compute_tflops, "
    "temperature, power_usage, ts",
    "tf_worker_usage": "workload, worker, pod_name, namespace, pool, node, uuid, compute_tflops, "
    "compute_percentage, memory_bytes, memory_percentage, ts",
    "tf_worker_resources": "worker, workload, pool, namespace, qos, tflops_request, tflops_limit, "
    "vram_bytes_request, vram_bytes_limit, gpu_count, raw_cost, ready, ts",
    "tf_node_metrics": "node, pool, phase, allocated_tflops, allocated_tflops_percent, allocated_vram_bytes, "
    "allocated_vram_percent, allocated_tflops_percent_virtual, allocated_vram_percent_virtual, raw_cost, "
    "gpu_count, ts",
}


def dialect_sql(nodes: int, gpus_per_node: int, workers: int, minutes: int) -> dict[str, str]:
    """DataFusion SQL generating each table in the line-protocol layout (Synthetic's shape and kinds)."""
    gpus = nodes * gpus_per_node
    start = int((NOW - timedelta(minutes=minutes)).timestamp())
    ts = f"arrow_cast(to_timestamp_seconds({start} + m.value * 60), 'Timestamp(Nanosecond, None)') AS greptime_timestamp"

    def curve(x: str) -> str:
        return f"(0.55 + 0.45 * sin(2 * pi() * ((m.value + {x} * 7) % 1440) / 1440.0))"

    def pct(x: str) -> str:
        return f"round((5 + ({x} * 37) % 60) * {curve(x)}, 3)"

    def pad(x: str, n: int) -> str:
        return f"lpad(CAST({x} AS VARCHAR), {n}, '0')"

    gpu = "(w.value % " + str(gpus) + ")"
    return {
        "tf_gpu_usage": (
            f"SELECT 'gpu-' || {pad('g.value', 5)} AS uuid, 'node-' || {pad(f'g.value / {gpus_per_node}', 4)} AS node, "
            f"'bench' AS pool, 0.0 AS rx, 0.0 AS tx, 40 + least(100.0, 3 * {pct('g.value')}) / 2 AS temperature, "
            f"CAST(least(100.0, 3 * {pct('g.value')}) / 100 * {CAP_VRAM} * 0.9 AS BIGINT) AS memory_bytes, "
            f"0.0 AS memory_percentage, least(100.0, 3 * {pct('g.value')}) AS compute_percentage, 0.0 AS compute_tflops, "
            f"100 + least(100.0, 3 * {pct('g.value')}) * 3 AS power_usage, {ts} "
            f"FROM range({minutes}) m CROSS JOIN range({gpus}) g"
        ),
        "tf_worker_usage": (
            f"SELECT 'gpu-' || {pad(gpu, 5)} AS uuid, 'node-' || {pad(f'{gpu} / {gpus_per_node}', 4)} AS node, "
            f"'bench' AS pool, 'wl-' || {pad('w.value / 3', 4)} || '-pod-' || CAST(w.value % 3 AS VARCHAR) AS pod_name, "
            f"'ns-' || {pad('(w.value / 3) % 20', 2)} AS namespace, 'wl-' || {pad('w.value / 3', 4)} AS workload, "
            f"'uid-' || {pad('w.value', 6)} AS worker, CAST({pct('w.value')} / 100 * {CAP_VRAM} * 0.3 AS BIGINT) AS memory_bytes, "
            f"{pct('w.value')} AS compute_percentage, 0.0 AS compute_tflops, round({pct('w.value')}, 1) AS memory_percentage, "
            f"{ts} FROM range({minutes}) m CROSS JOIN range({workers}) w"
        ),
        "tf_worker_resources": (
            f"SELECT 'ns-' || {pad('(w.value / 3) % 20', 2)} AS namespace, 'bench' AS pool, 'medium' AS qos, "
            f"'wl-' || {pad('w.value / 3', 4)} || '-pod-' || CAST(w.value % 3 AS VARCHAR) AS worker, "
            f"'wl-' || {pad('w.value / 3', 4)} AS workload, CAST(1 AS BIGINT) AS gpu_count, 100.0 AS tflops_limit, "
            f"CAST(20 + w.value % 5 * 10 AS DOUBLE) AS tflops_request, 0.001 AS raw_cost, {16.0 * GIB} AS vram_bytes_limit, "
            f"{8.0 * GIB} AS vram_bytes_request, true AS ready, {ts} FROM range({minutes}) m CROSS JOIN range({workers}) w"
        ),
        "tf_node_metrics": (
            f"SELECT 'node-' || {pad('n.value', 4)} AS node, 'bench' AS pool, 'Running' AS phase, "
            f"CAST(24 * (20 + n.value % 5 * 10) AS DOUBLE) AS allocated_tflops, "
            f"24 * (20 + n.value % 5 * 10) / {CAP_TFLOPS * 8} * 100 AS allocated_tflops_percent, "
            f"24 * (20 + n.value % 5 * 10) / {CAP_TFLOPS * 8} * 100 / 3 AS allocated_tflops_percent_virtual, "
            f"{24.0 * 8 * GIB} AS allocated_vram_bytes, 30.0 AS allocated_vram_percent, 10.0 AS allocated_vram_percent_virtual, "
            f"CAST(8 AS BIGINT) AS gpu_count, 0.5 AS raw_cost, {ts} FROM range({minutes}) m CROSS JOIN range({nodes}) n"
        ),
    }


def page_queries(ts: str, start: str, end: str) -> list[str]:
    """The reference page's four step-1 queries, as it writes them, over [start, end)."""
    w = f'WHERE "{ts}" >= {start} AND "{ts}" < {end}'
    return [
        f"SELECT node, pool, avg(allocated_tflops_percent) AS tflops_allocated_pct, avg(allocated_vram_percent) "
        f"AS vram_allocated_pct FROM tf_node_metrics {w} GROUP BY node, pool",
        f"SELECT node, uuid, avg(compute_percentage) AS compute_used_pct, max(memory_percentage) AS vram_peak_pct "
        f"FROM tf_gpu_usage {w} GROUP BY node, uuid",
        f"SELECT workload, avg(tflops_request) AS tflops_request, avg(vram_bytes_request) / 1073741824 AS "
        f"vram_request_gib FROM tf_worker_resources {w} GROUP BY workload",
        f"SELECT workload, avg(compute_tflops) AS tflops_avg, max(compute_tflops) AS tflops_peak, max(memory_bytes) "
        f"/ 1073741824 AS vram_peak_gib FROM tf_worker_usage {w} GROUP BY workload",
    ]


#: rule → (table, group keys, aggregate, HAVING on the aggregate, columns read): upstream's rules
RULE_SQL: dict[str, tuple[str, str, str, str, tuple[str, ...]]] = {
    "WorkerTFlopsThrottled": ("tf_worker_usage", "workload, worker, uuid, node",
                              "max(compute_throttled_cnt) - min(compute_throttled_cnt)", "> 0", ("compute_throttled_cnt",)),
    "WorkerVRAMSwitchCountIncreasing": ("tf_worker_usage", "workload, worker, uuid, node",
                                        "max(vram_resumed_cnt) - min(vram_resumed_cnt)", "> 0", ("vram_resumed_cnt",)),
    "WorkerAllocationFailed": ("tf_system_metrics", "pool", "max(total_allocation_fail_cnt) - min(total_allocation_fail_cnt)",
                               "> 0", ("total_allocation_fail_cnt",)),
    "GPUVRAMFull": ("tf_gpu_usage", "node, pool, uuid", "avg(CASE WHEN memory_percentage > 97 THEN memory_percentage END)",
                    "IS NOT NULL", ("memory_percentage",)),
    "GPUTFlopsFull": ("tf_gpu_usage", "node, pool, uuid", "avg(CASE WHEN compute_percentage > 97 THEN compute_percentage END)",
                      "IS NOT NULL", ("compute_percentage",)),
    "GPUTemperatureHigh": ("tf_gpu_usage", "node, pool, uuid", "avg(CASE WHEN temperature > 90 THEN temperature END)",
                           "IS NOT NULL", ("temperature",)),
    "NodeTFlopsAllocationCritical": ("tf_node_metrics", "node, pool", "100 - avg(allocated_tflops_percent)", "< 5", ("allocated_tflops_percent",)),
    "NodeTFlopsAllocationWarning": ("tf_node_metrics", "node, pool", "100 - avg(allocated_tflops_percent)", "< 10", ("allocated_tflops_percent",)),
    "PoolTotalTFlopsAllocationCritical": ("tf_node_metrics", "pool", "100 - avg(allocated_tflops_percent)", "< 5", ("allocated_tflops_percent",)),
    "PoolTotalTFlopsAllocationWarning": ("tf_node_metrics", "pool", "100 - avg(allocated_tflops_percent)", "< 10", ("allocated_tflops_percent",)),
    "NodeVRAMAllocationCritical": ("tf_node_metrics", "node, pool", "100 - avg(allocated_vram_percent)", "< 5", ("allocated_vram_percent",)),
    "NodeVRAMAllocationWarning": ("tf_node_metrics", "node, pool", "100 - avg(allocated_vram_percent)", "< 10", ("allocated_vram_percent",)),
    "PoolVRAMAllocationWarning": ("tf_node_metrics", "pool", "100 - avg(allocated_vram_percent)", "< 10", ("allocated_vram_percent",)),
    "EmptyGPU": ("tf_node_metrics", "node", "count(*)", "> 0", ()),
    "IdleGPU": ("tf_gpu_usage", "node, pool, uuid", "avg(compute_percentage)", "< 1", ("compute_percentage", "memory_percentage")),
}  # fmt: skip


def replay_queries(ts: str, now: datetime, span: timedelta, windows: dict[str, float], has: Any) -> list[str]:
    """One query per rule with its table and columns present: rows of the span tagged with their
    evaluation step k, grouped by (k, keys), the rule's HAVING."""
    out = []
    now_s = now.timestamp()
    for rule, (table, keys, agg, cond, cols) in RULE_SQL.items():
        if not has(table, cols):
            continue
        iv = windows[rule]
        start = (now - span - timedelta(seconds=iv)).strftime("%Y-%m-%d %H:%M:%S")
        end = now.strftime("%Y-%m-%d %H:%M:%S")
        out.append(
            f"SELECT k, {keys}, {agg} AS value FROM (SELECT floor(({now_s} - date_part('epoch', \"{ts}\")) / {iv}) "
            f"AS k, * FROM {table} WHERE \"{ts}\" > '{start}'::timestamp AND \"{ts}\" <= '{end}'::timestamp) s "
            f"GROUP BY k, {keys} HAVING {agg} {cond}"
        )
        if rule == "EmptyGPU" and has(
            "tf_worker_usage", ("node",)
        ):  # upstream: node NOT IN (nodes with a worker)
            out.append(
                f"SELECT k, node FROM (SELECT floor(({now_s} - date_part('epoch', \"{ts}\")) / {iv}) AS k, node "
                f"FROM tf_worker_usage WHERE \"{ts}\" > '{start}'::timestamp AND \"{ts}\" <= '{end}'::timestamp) s "
                "GROUP BY k, node"
            )
    return out
