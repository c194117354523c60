"""The reference page's four step-1 queries."""

from __future__ import annotations

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
    assemble_step1,
)
from tftui.sources.greptime.store import (
    Store,
    TableInfo,
    _div,
    _f,
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
}


class Step1Queries(Store):
    """`Step1Port.step1`."""

    # -- Step1Port -------------------------------------------------------------------------------

    def step1(
        self, window: timedelta, now: datetime, gpu_capacity: Mapping[str, tuple[float, float]]
    ) -> Step1:
        """The four reference-page queries over [now − window, now) (behaviour M2, M3)."""
        nodes_t = self._require("tf_node_metrics", STEP1_REQUIRED["tf_node_metrics"])
        gpus_t = self._require("tf_gpu_usage", STEP1_REQUIRED["tf_gpu_usage"], STEP1_OPTIONAL["tf_gpu_usage"])
        req_t = self._require(
            "tf_worker_resources",
            STEP1_REQUIRED["tf_worker_resources"],
            STEP1_OPTIONAL["tf_worker_resources"],
        )
        use_t = self._require("tf_worker_usage", STEP1_REQUIRED["tf_worker_usage"])
        params = {"start": _naive_utc(now - window), "end": _naive_utc(now)}
        missing: set[str] = set()
        # The four scans are independent: they run at once on the pool's connections (the store
        # then uses all its cores while one query is in a serial phase). Largest first.
        with self._malformed("computing step 1"), ThreadPoolExecutor(max_workers=self._pool_size) as ex:
            f_requests = ex.submit(self._requests, req_t, params, missing)
            f_usage = ex.submit(self._usage, use_t, params, gpu_capacity, missing)
            f_gpus = ex.submit(self._gpus, gpus_t, params, gpu_capacity, missing)
            f_nodes = ex.submit(self._nodes, nodes_t, params)
            nodes, gpus = f_nodes.result(), f_gpus.result()
            requests, usage = f_requests.result(), f_usage.result()
        return assemble_step1(now, window, nodes, gpus, requests, usage, missing)

    def _nodes(self, t: TableInfo, params: Mapping[str, Any]) -> list[NodeAllocation]:
        """Query 1: average allocation % per node (page: `GROUP BY node, pool`)."""
        query = sql.SQL(
            "SELECT node, pool, sum(allocated_tflops_percent), count(allocated_tflops_percent), "
            "sum(allocated_vram_percent), count(allocated_vram_percent), count(*) "
            "FROM {t} WHERE {w} GROUP BY node, pool"
        ).format(t=t.ident, w=self._window(t))
        rows = self._fetch(query, params, "reading allocation per node", t.name)
        return [
            NodeAllocation(node=str(node), pool=str(pool), tflops_allocated_pct=_div(_f(ts_), _f(tn)),
                           vram_allocated_pct=_div(_f(vs), _f(vn)), samples=int(n))
            for node, pool, ts_, tn, vs, vn, n in rows
        ]  # fmt: skip

    def _gpus(
        self,
        t: TableInfo,
        params: Mapping[str, Any],
        capacity: Mapping[str, tuple[float, float]],
        missing: set[str],
    ) -> list[GPUUsageSummary]:
        """Query 2: per GPU average compute %, VRAM peak — % from bytes where the column is 0 (M3)."""
        pct = sql.SQL("max(memory_percentage)") if t.has("memory_percentage") else sql.SQL("NULL")
        query = sql.SQL(
            "SELECT node, uuid, sum(compute_percentage), count(compute_percentage), {pct}, "
            "max(memory_bytes), count(*) FROM {t} WHERE {w} GROUP BY node, uuid"
        ).format(pct=pct, t=t.ident, w=self._window(t))
        rows = self._fetch(query, params, "reading usage per GPU", t.name)
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
                GPUUsageSummary(node=str(node), uuid=str(uuid), compute_used_pct=_div(_f(c_sum), _f(c_n)),
                                vram_peak_pct=peak, vram_peak_bytes=_f(peak_bytes), samples=int(samples))
            )  # fmt: skip
        if rows and not written:
            missing.add("tf_gpu_usage.memory_percentage")
        return out

    def _requests(self, t: TableInfo, params: Mapping[str, Any], missing: set[str]) -> list[WorkloadRequest]:
        """Query 3: average request per workload, from per-worker partial sums (exact row averages)."""
        if t.has("gpu_count"):
            gpu = sql.SQL("sum(gpu_count), count(gpu_count)")
        else:
            gpu = sql.SQL("count(*), count(*)")  # absent: upstream treats 0/invalid as 1 device
            missing.add("tf_worker_resources.gpu_count")
        query = sql.SQL(
            "SELECT namespace, workload, sum(tflops_request), count(tflops_request), "
            "sum(vram_bytes_request), count(vram_bytes_request), {gpu}, count(*) "
            "FROM {t} WHERE {w} GROUP BY namespace, workload, worker"
        ).format(gpu=gpu, t=t.ident, w=self._window(t))
        rows = self._fetch(query, params, "reading requests per workload", t.name)
        acc: dict[tuple[str, str], list[float]] = {}
        for ns, wl, *sums in rows:
            a = acc.setdefault((str(ns), str(wl)), [0.0] * 8)
            for i, v in enumerate((*sums, 1)):
                a[i] += _f(v)
        return [
            WorkloadRequest(namespace=ns, workload=wl, tflops_request=_div(a[0], a[1]),
                            vram_request_bytes=_div(a[2], a[3]), gpu_count=_div(a[4], a[5]),
                            workers=int(a[7]), samples=int(a[6]))
            for (ns, wl), a in acc.items()
        ]  # fmt: skip

    def _usage(
        self,
        t: TableInfo,
        params: Mapping[str, Any],
        capacity: Mapping[str, tuple[float, float]],
        missing: set[str],
    ) -> list[WorkloadUsage]:
        """Query 4: per workload TFLOPS average/peak and VRAM peak, per GPU in SQL, finished here.

        TFLOPS = compute % / 100 × the GPU's capacity, always: upstream writes `compute_tflops` as 0
        (upstream-model §0.5), so the column is not read. A GPU of unknown capacity counts 0 TFLOPS
        and is named in `missing` as `capacity of <uuid>`.
        """
        query = sql.SQL(
            "SELECT namespace, workload, uuid, sum(compute_percentage), count(compute_percentage), "
            "max(compute_percentage), max(memory_bytes), count(*) "
            "FROM {t} WHERE {w} GROUP BY namespace, workload, uuid"
        ).format(t=t.ident, w=self._window(t))
        rows = self._fetch(query, params, "reading usage per workload", t.name)
        acc: dict[tuple[str, str], list[float]] = {}  # Σ tflops, n, peak tflops, peak bytes, samples
        for ns, wl, uuid, pct_sum, pct_n, pct_max, mem_max, n in rows:
            cap = capacity.get(str(uuid), (0.0, 0.0))[0]
            if cap <= 0:
                missing.add(f"capacity of {uuid}")
            a = acc.setdefault((str(ns), str(wl)), [0.0, 0.0, 0.0, 0.0, 0.0])
            a[0] += _f(pct_sum) / 100.0 * cap
            a[1] += _f(pct_n)
            a[2] = max(a[2], _f(pct_max) / 100.0 * cap)
            a[3] = max(a[3], _f(mem_max))
            a[4] += _f(n)
        return [
            WorkloadUsage(namespace=ns, workload=wl, tflops_avg=_div(a[0], a[1]), tflops_peak=a[2],
                          vram_peak_bytes=a[3], samples=int(a[4]))
            for (ns, wl), a in acc.items()
        ]  # fmt: skip
