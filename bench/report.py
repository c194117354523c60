"""Benchmark: `tftui report` on a day of 1-minute metrics, as a ratio of a count(*) scan (issue 4).

Loads 24 h × 1 min for 1,000 GPUs (125 nodes × 8) and 3,000 workers into a throwaway PostgreSQL
(the tests' server, tests/pg.py) with GreptimeDB-shaped tables, then prints

    RATIO report/count_scan = X (goal <= 3)
    RATIO step1/count_scan = Y

where report = everything `tftui report` reads from the store: `GreptimeMetrics.step1(1d)` (its
four queries run at once on the adapter's default pool) plus the alert replay (`evaluate_history`
over the last hour: per table and interval a probe of the last window, then counts per evaluation
and the shared rows queries of the rules with data now), and step1 = the four queries alone;
count_scan = `SELECT count(*)` over the same four tables, one after the other (best of `--repeat`
each, warm cache, the same server and settings). Peak memory (VmHWM) is reset before
each report and read after it, for a 1-hour and a 1-day window: the process streams aggregates,
not rows, so the peak must not grow with the 24× more rows.

The rows come from a synthetic generator (deterministic, shaped like the simulator's) written to
COPY in per-minute text chunks: the simulator would need minutes for 10 M rows. Issue 4 counts
"about 5.8 M rows" (1,000 GPU + 3,000 worker series × 1,440); step 1 also reads tf_worker_resources
(another 4.3 M) and tf_node_metrics, so 10.3 M rows are loaded and counted.

PostgreSQL stands in for GreptimeDB. Settings of the stand-in (tests/pg.py), which the count(*)
baseline runs under too: JIT off, work_mem 64 MB, a BRIN index on the time column (GreptimeDB's
time index; it is what keeps the alert replay's short windows cheap), and, after loading, `ndistinct` statistics on the tag columns — without them the planner assumes independent
tags, expects ~400 k groups instead of 3 k and gives up parallel aggregation.

Secondary figures: step 1 against count(*) with the same time filter (the cheapest way to find the
window's rows), the four queries one after the other, and the alert replay alone.

Where step 1's time goes (measured on the stand-in without parallel workers, the request query on
tf_worker_resources' 4.3 M rows, best of 5): count(*) 0.25 s; + the time filter, which deforms
every row to its last column, 0.28 s; + hash aggregation on one key 0.42 s; + the two other keys
(namespace, workload, worker) 0.26 s; + the eight aggregates 0.26 s. Every step is the page's
semantics; the other three queries split alike, so step 1 costs about 3.5 count(*) scans. Grouping
by the pod alone (namespace, worker; worker, uuid) would save about 10 % but assumes a pod never
changes workload; JIT saves about 9 % and would slow the count(*) baseline: neither is done.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.pg import PgServer, create_tables, start_server
from tftui.engine.alerts import RULES, evaluate_history
from tftui.engine.report import ALERT_SPAN
from tftui.sources.greptime import GreptimeMetrics

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GIB = 1 << 30
CAP_TFLOPS, CAP_VRAM = 312.0, 80 * GIB


def vm_hwm_kib() -> int:
    """Peak resident set size of this process (VmHWM), KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


def reset_hwm() -> bool:
    """Reset VmHWM to the current RSS (Linux: write 5 to clear_refs); False where not permitted."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


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

GROUP_KEYS = {
    "tf_gpu_usage": "node, uuid",
    "tf_worker_usage": "namespace, workload, uuid",
    "tf_worker_resources": "namespace, workload, worker",
    "tf_node_metrics": "node, pool",
}


def load(server: PgServer, db: str, data: Synthetic) -> dict[str, int]:
    server.create_database(db)
    counts: dict[str, int] = {}
    with server.connect(db, user="tftui") as conn:
        create_tables(conn, "ts", COLUMNS)
        for table, chunks in (
            ("tf_gpu_usage", data.gpu_usage()),
            ("tf_worker_usage", data.worker_usage()),
            ("tf_worker_resources", data.worker_resources()),
            ("tf_node_metrics", data.node_metrics()),
        ):
            with conn.cursor() as cur, cur.copy(f"COPY {table} ({COLUMNS[table]}) FROM STDIN") as copy:
                for chunk in chunks:
                    copy.write(chunk)
        # The stand-in needs to know the group counts (tags are correlated, the planner assumes
        # independence and then plans a serial aggregation); GreptimeDB always aggregates in parallel.
        for table, keys in GROUP_KEYS.items():
            conn.execute(f"CREATE STATISTICS {table}_groups (ndistinct) ON {keys} FROM {table}")
        for table in COLUMNS:
            conn.execute(f"VACUUM ANALYZE {table}")
            row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            counts[table] = int(row[0]) if row else 0
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=125)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--workers", type=int, default=3000)
    parser.add_argument("--minutes", type=int, default=1440)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    server = start_server()
    try:
        t = time.perf_counter()
        data = Synthetic(args.nodes, args.gpus_per_node, args.workers, args.minutes)
        counts = load(server, "bench", data)
        total = sum(counts.values())
        print(f"loaded {total:,} rows in {time.perf_counter() - t:.1f} s: "
              + ", ".join(f"{k} {v:,}" for k, v in counts.items()))  # fmt: skip

        capacity = {uuid: (CAP_TFLOPS, float(CAP_VRAM)) for uuid, _node in data.gpus}
        del data
        metrics = GreptimeMetrics(server.dsn("bench"))
        serial = GreptimeMetrics(server.dsn("bench"), pool_size=1)

        conns = [server.connect("bench", user="tftui") for _ in COLUMNS]

        def count_scan(where: str = "") -> None:
            for table in COLUMNS:
                conns[0].execute(f"SELECT count(*) FROM {table} {where}").fetchone()

        def count_at_once() -> None:  # the four counts at once, as step1 runs its four queries
            with ThreadPoolExecutor(max_workers=len(conns)) as ex:
                list(ex.map(lambda ct: ct[0].execute(f"SELECT count(*) FROM {ct[1]}").fetchone(),
                            zip(conns, COLUMNS, strict=True)))  # fmt: skip

        def count_window() -> None:  # the rows step1(1d) has to find, counted
            count_scan(f"WHERE ts >= '{NOW - timedelta(days=1):%Y-%m-%d %H:%M:%S}'::timestamp "
                       f"AND ts < '{NOW:%Y-%m-%d %H:%M:%S}'::timestamp")  # fmt: skip

        metrics.step1(timedelta(hours=1), NOW, capacity)  # connect, detect, warm up
        count_scan()
        can_reset = reset_hwm()
        before = vm_hwm_kib()
        small = metrics.step1(timedelta(hours=1), NOW, capacity)
        after_hour = vm_hwm_kib()
        if can_reset:
            reset_hwm()
        report_s = best(lambda: metrics.step1(timedelta(days=1), NOW, capacity), args.repeat)
        after_day = vm_hwm_kib()
        day = metrics.step1(timedelta(days=1), NOW, capacity)
        scan_s = best(count_scan, args.repeat)
        window_s = best(count_window, args.repeat)
        together_s = best(count_at_once, args.repeat)
        for conn in conns:
            conn.close()
        serial.step1(timedelta(hours=1), NOW, capacity)
        serial_s = best(lambda: serial.step1(timedelta(days=1), NOW, capacity), args.repeat)
        t = time.perf_counter()
        evaluate_history(metrics, RULES, now=NOW, span=ALERT_SPAN)  # first run, then the best
        first_alerts_s = time.perf_counter() - t
        alerts_s = best(lambda: evaluate_history(metrics, RULES, now=NOW, span=ALERT_SPAN), args.repeat)
        alerts = evaluate_history(metrics, RULES, now=NOW, span=ALERT_SPAN)
        metrics.close()
        serial.close()

        rows_hour = sum(n.samples for n in small.nodes) + sum(g.samples for g in small.gpus)
        rows_hour += sum(r.samples for r in small.workload_requests) + sum(
            u.samples for u in small.workload_usage
        )
        rows_day = sum(n.samples for n in day.nodes) + sum(g.samples for g in day.gpus)
        rows_day += sum(r.samples for r in day.workload_requests) + sum(u.samples for u in day.workload_usage)
        print(f"step1(1d): {report_s:.3f} s over {rows_day:,} rows "
              f"({len(day.nodes)} nodes, {len(day.gpus)} GPUs, {len(day.workload_usage)} workloads); "
              f"count(*) scan: {scan_s:.3f} s; count(*) of the window's rows: {window_s:.3f} s")  # fmt: skip
        note = "" if can_reset else " (VmHWM could not be reset: figures include loading)"
        print(f"peak memory (VmHWM): {before / 1024:.1f} MiB before the report; "
              f"{after_hour / 1024:.1f} MiB after step1(1h) over {rows_hour:,} rows; "
              f"{after_day / 1024:.1f} MiB after step1(1d) over {rows_day:,} rows{note}")  # fmt: skip
        from _timing import ratio  # bench/ is on sys.path when a script runs

        print(f"alert replay over {ALERT_SPAN}: {alerts_s:.3f} s ({len(alerts.statuses)} rules, "
              f"{len(alerts.firing)} firing; first run {first_alerts_s:.3f} s); step1(1d) with the four "
              f"queries one after the other: {serial_s:.3f} s; count(*) of the four tables at once: "
              f"{together_s:.3f} s")  # fmt: skip
        # the whole `tftui report` data path: step1(1d) + the alert replay
        ratio("report/count_scan", (report_s + alerts_s) / scan_s, 3, "<=")
        ratio("step1/count_scan", report_s / scan_s)  # the four step-1 queries alone
        ratio("alert_replay/count_scan", alerts_s / scan_s)  # 15 rules over ALERT_SPAN
        ratio("step1/count_scan_window", report_s / window_s)  # count(*) with the same ts filter
        ratio("step1/count_scan_at_once", report_s / together_s)  # like for like: four scans at once
        ratio("step1_serial/count_scan", serial_s / scan_s)  # like for like: one after the other
        ratio("peak_memory_1d/1h", after_day / after_hour, 1.2, "<=")  # memory independent of rows
    finally:
        server.stop()


if __name__ == "__main__":
    main()
