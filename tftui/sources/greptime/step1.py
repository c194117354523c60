"""The reference page's four step-1 queries."""

from __future__ import annotations

import math
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, Final

from psycopg import sql

from tftui.model.metrics import (
    GPUUsageSummary,
    NodeAllocation,
    Step1,
    WorkloadRequest,
    WorkloadUsage,
    add_usage_group,
    assemble_step1,
)
from tftui.sources.greptime.store import (
    Store,
    TableInfo,
    _f,
    _ms,
    _naive_utc,
    _opt,
)

#: Columns each step-1 query cannot do without (missing → SourceError) and optional ones
#: (missing → listed in Step1.missing and derived instead).
STEP1_REQUIRED: Final[Mapping[str, tuple[str, ...]]] = {
    "tf_node_metrics": ("node", "pool", "allocated_tflops_percent", "allocated_vram_percent"),
    "tf_gpu_usage": ("node", "uuid", "compute_percentage", "memory_bytes"),
    "tf_worker_resources": ("namespace", "workload", "worker", "tflops_request", "vram_bytes_request"),
    "tf_worker_usage": ("namespace", "workload", "uuid", "compute_percentage", "memory_bytes"),
}
STEP1_OPTIONAL: Final[Mapping[str, tuple[str, ...]]] = {
    "tf_gpu_usage": ("memory_percentage",),
    "tf_worker_resources": ("gpu_count",),
    "tf_worker_usage": ("compute_tflops",),
}


class Step1Queries(Store):
    """`Step1Port.step1`: the page's four GROUP BYs, finished in Python with the GPU capacities."""

    def step1(
        self, window: timedelta, now: datetime, gpu_capacity: Mapping[str, tuple[float, float]]
    ) -> Step1:
        """The four reference-page queries over [now − window, now) (behaviour M2, M3).

        Bounds are whole milliseconds (GreptimeDB reads `'…'::timestamp` at that precision).
        GPUs that report usage but are not in `gpu_capacity` (released with their node, or no
        cluster at all) take their capacity from `tf_gpu_metrics`, where the controller wrote it.
        """
        now = _ms(now)
        nodes_t = self._require("tf_node_metrics", STEP1_REQUIRED["tf_node_metrics"])
        gpus_t = self._require("tf_gpu_usage", STEP1_REQUIRED["tf_gpu_usage"], STEP1_OPTIONAL["tf_gpu_usage"])
        req_t = self._require(
            "tf_worker_resources",
            STEP1_REQUIRED["tf_worker_resources"],
            STEP1_OPTIONAL["tf_worker_resources"],
        )
        use_t = self._require(
            "tf_worker_usage", STEP1_REQUIRED["tf_worker_usage"], STEP1_OPTIONAL["tf_worker_usage"]
        )
        params = {"start": _naive_utc(now - window), "end": _naive_utc(now)}
        missing: set[str] = set()
        # The four scans are independent: they run at once on the pool's connections (the store
        # then uses all its cores while one query is in a serial phase). Largest first.
        with self._malformed("computing step 1"), ThreadPoolExecutor(max_workers=self._pool_size) as ex:
            f_requests = ex.submit(self._requests, req_t, params, missing)
            f_usage = ex.submit(self._fetch_usage, use_t, params)
            f_gpus = ex.submit(self._fetch_gpus, gpus_t, params)
            f_nodes = ex.submit(self._nodes, nodes_t, params)
            nodes, gpu_rows = f_nodes.result(), f_gpus.result()
            requests, usage_rows = f_requests.result(), f_usage.result()
            unknown = {str(r[1]) for r in gpu_rows} | {str(r[2]) for r in usage_rows}
            capacity = {**self._metrics_capacity(unknown - set(gpu_capacity), params), **gpu_capacity}
            gpus = self._gpus(gpu_rows, capacity, missing)
            usage = self._usage(usage_rows, capacity, missing)
        return assemble_step1(now, window, nodes, gpus, requests, usage, missing)

    def _metrics_capacity(self, gpus: set[str], params: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
        """(TFLOPS, VRAM bytes) of `gpus` as `tf_gpu_metrics` last recorded them in the window.

        GPU object names are the lower-cased UUIDs the hypervisor writes; matched case-insensitively.
        """
        if not gpus:
            return {}
        t = self.tables().get("tf_gpu_metrics")
        if (
            t is None
            or not t.time
            or not all(t.has(c) for c in ("gpu", "capacity_tflops", "capacity_vram_bytes"))
        ):
            return {}  # older TensorFusion: those GPUs stay `capacity of <uuid>` in Step1.missing
        names = sorted(gpus)
        wanted = {g.lower(): g for g in names}
        values = {f"g{i}": g.lower() for i, g in enumerate(names)}
        query = sql.SQL(
            "SELECT lower(gpu) AS gpu_name, max(capacity_tflops) AS cap_tflops, "
            "max(capacity_vram_bytes) AS cap_vram FROM {t} WHERE {w} AND lower(gpu) IN ({v}) GROUP BY lower(gpu)"
        ).format(t=t.ident, w=self._window(t), v=sql.SQL(", ").join(map(sql.Placeholder, values)))
        rows = self._fetch(query, {**params, **values}, "reading GPU capacities", t.name)
        return {wanted[str(g)]: (_f(tf), _f(vram)) for g, tf, vram in rows if str(g) in wanted}

    def _nodes(self, t: TableInfo, params: Mapping[str, Any]) -> list[NodeAllocation]:
        """Query 1: average allocation % per node (page: `GROUP BY node, pool`)."""
        query = sql.SQL(
            "SELECT node, pool, sum(allocated_tflops_percent) AS tflops_sum, "
            "count(allocated_tflops_percent) AS tflops_n, sum(allocated_vram_percent) AS vram_sum, "
            "count(allocated_vram_percent) AS vram_n, count(*) AS samples "
            "FROM {t} WHERE {w} GROUP BY node, pool"
        ).format(t=t.ident, w=self._window(t))
        rows = self._fetch(query, params, "reading allocation per node", t.name)
        return [
            NodeAllocation(node=str(node), pool=str(pool), tflops_allocated_pct=_mean(ts_, tn),
                           vram_allocated_pct=_mean(vs, vn), samples=int(n))
            for node, pool, ts_, tn, vs, vn, n in rows
        ]  # fmt: skip

    def _fetch_gpus(self, t: TableInfo, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Query 2's rows: per GPU compute % sum and count, VRAM peak (% and bytes), samples."""
        pct = sql.SQL("max(memory_percentage)") if t.has("memory_percentage") else sql.SQL("NULL")
        query = sql.SQL(
            "SELECT node, uuid, sum(compute_percentage) AS pct_sum, count(compute_percentage) AS pct_n, "
            "{pct} AS mem_pct_max, max(memory_bytes) AS mem_max, count(*) AS samples "
            "FROM {t} WHERE {w} GROUP BY node, uuid"
        ).format(pct=pct, t=t.ident, w=self._window(t))
        return self._fetch(query, params, "reading usage per GPU", t.name)

    @staticmethod
    def _gpus(
        rows: list[tuple[Any, ...]], capacity: Mapping[str, tuple[float, float]], missing: set[str]
    ) -> list[GPUUsageSummary]:
        """Query 2 finished: VRAM % from bytes ÷ capacity where `memory_percentage` is 0 (M3)."""
        out: list[GPUUsageSummary] = []
        written = False
        for node, uuid, c_sum, c_n, peak_pct, peak_bytes, samples in rows:
            peak = _opt(peak_pct)
            if peak:
                written = True
            else:
                cap = capacity.get(str(uuid), (0.0, 0.0))[1]
                peak = _f(peak_bytes) / cap * 100.0 if cap > 0 and peak_bytes is not None else None
            out.append(
                GPUUsageSummary(node=str(node), uuid=str(uuid), compute_used_pct=_mean(c_sum, c_n),
                                vram_peak_pct=peak, vram_peak_bytes=_opt(peak_bytes), samples=int(samples))
            )  # fmt: skip
        if rows and not written:
            missing.add("tf_gpu_usage.memory_percentage")
        return out

    def _requests(self, t: TableInfo, params: Mapping[str, Any], missing: set[str]) -> list[WorkloadRequest]:
        """Query 3: average request per workload, from per-worker partial sums (exact row averages).

        `gpu_count` is summed as a double (exact for any integer sum below 2⁵³, and the result is
        read as a float anyway): PostgreSQL sums a bigint into a separately allocated 128-bit state
        per group, one more cache line per row for each of a day's thousands of workers (see
        `_fetch_usage`); a double's sum is kept in the group's own states.
        """
        if t.has("gpu_count"):
            gpu = sql.SQL("sum(CAST(gpu_count AS DOUBLE PRECISION)) AS gpu_sum, count(gpu_count) AS gpu_n")
        else:  # absent: upstream treats 0/invalid as 1 device
            gpu = sql.SQL("count(*) AS gpu_sum, count(*) AS gpu_n")
            missing.add("tf_worker_resources.gpu_count")
        query = sql.SQL(
            "SELECT namespace, workload, sum(tflops_request) AS tflops_sum, count(tflops_request) AS tflops_n, "
            "sum(vram_bytes_request) AS vram_sum, count(vram_bytes_request) AS vram_n, {gpu}, count(*) AS samples "
            "FROM {t} WHERE {w} GROUP BY namespace, workload, worker"
        ).format(gpu=gpu, t=t.ident, w=self._window(t))
        rows = self._fetch(query, params, "reading requests per workload", t.name)
        acc: dict[tuple[str, str], list[float]] = {}
        for ns, wl, *sums in rows:
            a = acc.setdefault((str(ns), str(wl)), [0.0] * 8)
            for i, v in enumerate((*sums, 1)):
                a[i] += _f(v)
        return [
            WorkloadRequest(namespace=ns, workload=wl, tflops_request=_mean(a[0], a[1]),
                            vram_request_bytes=_mean(a[2], a[3]), gpu_count=_mean(a[4], a[5]),
                            workers=int(a[7]), samples=int(a[6]))
            for (ns, wl), a in acc.items()
        ]  # fmt: skip

    def _fetch_usage(self, t: TableInfo, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Query 4's rows per (namespace, workload, GPU): compute % and `compute_tflops` partial sums.

        Eight aggregates, not nine: whether `compute_tflops` is written comes from its max and sum
        (`tflops_written`), not from a `max(abs(…))` of its own. PostgreSQL keeps a hashed group's
        transition states in one allocation rounded up to a power of two (9 × 16 bytes take 256,
        8 take 128), and with a group per (workload, GPU) — thousands in a day — every input row
        reads and writes its group's states: half the memory is fewer cache misses per row.
        """
        tflops = (
            sql.SQL("sum(compute_tflops) AS tf_sum, count(compute_tflops) AS tf_n, max(compute_tflops) AS tf_max")
            if t.has("compute_tflops")
            else sql.SQL("NULL AS tf_sum, NULL AS tf_n, NULL AS tf_max")
        )  # fmt: skip
        query = sql.SQL(
            "SELECT namespace, workload, uuid, sum(compute_percentage) AS pct_sum, "
            "count(compute_percentage) AS pct_n, max(compute_percentage) AS pct_max, {tflops}, "
            "max(memory_bytes) AS mem_max, count(*) AS samples "
            "FROM {t} WHERE {w} GROUP BY namespace, workload, uuid"
        ).format(tflops=tflops, t=t.ident, w=self._window(t))
        return self._fetch(query, params, "reading usage per workload", t.name)

    @staticmethod
    def _usage(
        rows: list[tuple[Any, ...]],
        capacity: Mapping[str, tuple[float, float]],
        missing: set[str],
    ) -> list[WorkloadUsage]:
        """Query 4 finished: per workload TFLOPS average/peak and VRAM peak.

        Per (workload, GPU): `compute_tflops` where it is written (non-zero somewhere in the window),
        else compute % / 100 × the GPU's capacity (upstream's hypervisor writes 0 where its device
        plugin reports no TFLOPS). A derived GPU of unknown capacity is no TFLOPS sample — never 0 —
        and is named in `missing` as `capacity of <uuid>`; NULL values are no sample either
        (`add_usage_group`, shared with the simulator).
        """
        acc: dict[tuple[str, str], list[Any]] = {}  # Σ tflops, n, peak tflops, peak bytes, samples
        for ns, wl, uuid, pct_sum, pct_n, pct_max, tf_sum, tf_n, tf_max, mem_max, n in rows:
            a = acc.setdefault((str(ns), str(wl)), [0.0, 0.0, None, None, 0])
            direct = _direct(tf_sum, tf_n, tf_max) if tflops_written(tf_max, tf_sum) else None
            cap = capacity.get(str(uuid), (0.0, 0.0))[0]
            if direct is None and cap <= 0:
                missing.add(f"capacity of {uuid}")
            add_usage_group(
                a, cap, _opt(pct_sum), int(_f(pct_n)), _opt(pct_max), _opt(mem_max), int(_f(n)), direct
            )
        return [
            WorkloadUsage(namespace=ns, workload=wl, tflops_avg=a[0] / a[1] if a[1] else None,
                          tflops_peak=a[2], vram_peak_bytes=a[3], samples=int(a[4]))
            for (ns, wl), a in acc.items()
        ]  # fmt: skip


def _direct(total: Any, n: Any, peak: Any) -> tuple[float, int, float | None]:
    """A group's written `compute_tflops` (Σ, count, max); a non-finite sum is no sample."""
    finite = _opt(total)
    return (finite, int(_f(n)), _opt(peak)) if finite is not None else (0.0, 0, None)


def tflops_written(peak: Any, total: Any) -> bool:
    """Whether a group holds a non-zero `compute_tflops`, from its `max` and `sum` — the same answer
    as `max(abs(compute_tflops)) > 0`, without a ninth aggregate (see `_fetch_usage`).

    max > 0 or max < 0: a non-zero value. max = 0: every value is ≤ 0, and a sum of values ≤ 0 is
    0 only when all of them are (rounding is monotone: it cannot carry a negative partial sum up to
    0). max NaN: `max(abs(…))` is NaN too (both engines order NaN above every number), which is not
    > 0. max NULL: no value at all.
    """
    if peak is None:
        return False
    hi = _f(peak)
    if math.isnan(hi):
        return False
    return hi != 0 or _f(total) != 0


def _mean(total: Any, n: Any) -> float | None:
    """sum ÷ count of a column; None when no row had a value (a missing sample is not 0) or the
    sum is not finite (a NaN or ±Infinity among the rows: no figure, as `_opt`)."""
    count = _f(n)
    return _opt(_f(total) / count) if count else None
