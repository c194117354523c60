"""The simulator's `Step1Port`: the GreptimeDB adapter's step-1 and alert queries, in Python.

Same data → same report (docs/behaviour.md M11): every figure is computed with the semantics of the
SQL in `tftui/sources/greptime.py` — the same grouping (namespace, workload), the same window
bounds ([now − window, now) for step 1, [now − interval, now] for alerts), the same partial
aggregates (per worker for requests; per (namespace, workload, GPU) for usage, so TFLOPS are derived
per GPU capacity exactly as there), the same M3 rule and the same NoData cases. The rows are
streamed from `SimMetrics.rows`; memory grows with the number of groups, never with rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

from tftui.model.metrics import (
    ALERT_RULES,
    AlertResult,
    AlertRow,
    GPUUsageSummary,
    NoData,
    NodeAllocation,
    Step1,
    WorkloadRequest,
    WorkloadUsage,
    add_usage_group,
    assemble_step1,
    history_by_step,
)
from tftui.sources.greptime import RULES, alert_row_key
from tftui.sources.sim import aggregate
from tftui.sources.sim.columns import SimColumns

_EPS: Final = timedelta(microseconds=1)  # rows(start, end) is half-open; alert windows include `now`


def _v(x: Any) -> float | None:
    return None if x is None else float(x)


def _max(a: float | None, b: float | None) -> float | None:
    if b is None:
        return a
    return b if a is None or b > a else a


class _Avg:
    """avg/max/count of one column over a group, NULL-aware like SQL aggregates."""

    __slots__ = ("hi", "mag", "n", "total")

    def __init__(self) -> None:
        self.total = 0.0
        self.n = 0
        self.hi: float | None = None
        self.mag = 0.0  # max |x|: 0 when never written (NULL or 0 throughout)

    def add(self, x: Any) -> None:
        if x is not None:
            x = float(x)
            self.total += x
            self.n += 1
            self.mag = max(self.mag, abs(x))
            if self.hi is None or x > self.hi:
                self.hi = x

    @property
    def avg(self) -> float | None:
        return self.total / self.n if self.n else None


class _Capacity(Mapping[str, tuple[float, float]]):
    """The cluster's GPU capacities, then (read once, on the first GPU it lacks) `tf_gpu_metrics`'."""

    def __init__(
        self, known: Mapping[str, tuple[float, float]], load: Callable[[], dict[str, tuple[float, float]]]
    ) -> None:
        self.known = known
        self.load = load
        self.recorded: dict[str, tuple[float, float]] | None = None

    def __getitem__(self, gpu: str) -> tuple[float, float]:
        if gpu in self.known:
            return self.known[gpu]
        if self.recorded is None:
            self.recorded = self.load()
        return self.recorded[gpu.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self.known)

    def __len__(self) -> int:
        return len(self.known)


class RowSource(Protocol):
    """What SimStep1 reads: `SimMetrics.rows` (or any source of GreptimeDB-shaped rows)."""

    def rows(self, table: Any, start: datetime, end: datetime) -> Iterator[dict[str, Any]]: ...


class SimStep1:
    """`Step1Port` over a `SimMetrics` (describe / step1 / alert_rows / alert_history).

    Tables the source does not know (`rows` raises ValueError, e.g. tf_system_metrics for the
    simulator) are absent → NoData for the rules that read them.
    """

    def __init__(self, metrics: RowSource) -> None:
        self.metrics = metrics
        # the simulator answers the aggregates from numpy blocks (aggregate.py); other sources stream rows
        columns = getattr(metrics, "columns", None)
        self.columns: SimColumns | None = columns if isinstance(columns, SimColumns) else None

    def describe(self) -> str:
        return "demo (simulated metrics)"

    # -- step 1 ----------------------------------------------------------------------------------

    def step1(
        self, window: timedelta, now: datetime, gpu_capacity: Mapping[str, tuple[float, float]]
    ) -> Step1:
        """The four reference-page aggregates over [now − window, now)."""
        start = now - window
        missing: set[str] = set()
        if self.columns is not None:
            known = _Capacity(gpu_capacity, lambda: self._metrics_capacity(start, now))
            parts = aggregate.step1_parts(self.columns, start, now, known, missing)
            return assemble_step1(now, window, *parts, missing)
        nodes = self._nodes(self.metrics.rows("tf_node_metrics", start, now))
        capacity = _Capacity(gpu_capacity, lambda: self._metrics_capacity(start, now))
        gpus = self._gpus(self.metrics.rows("tf_gpu_usage", start, now), capacity, missing)
        requests = self._requests(self.metrics.rows("tf_worker_resources", start, now), missing)
        usage = self._usage(self.metrics.rows("tf_worker_usage", start, now), capacity, missing)
        return assemble_step1(now, window, nodes, gpus, requests, usage, missing)

    def _metrics_capacity(self, start: datetime, end: datetime) -> dict[str, tuple[float, float]]:
        """GPU (lower-cased) → capacities from `tf_gpu_metrics`, where the source has it (the adapter's rule)."""
        try:
            rows = self.metrics.rows("tf_gpu_metrics", start, end)
            out: dict[str, list[float | None]] = {}
            for r in rows:
                acc = out.setdefault(str(r.get("gpu") or "").lower(), [None, None])
                acc[0] = _max(acc[0], _v(r.get("capacity_tflops")))
                acc[1] = _max(acc[1], _v(r.get("capacity_vram_bytes")))
        except (ValueError, KeyError):  # a source without the table (the simulator writes none)
            return {}
        return {g: (t or 0.0, v or 0.0) for g, (t, v) in out.items()}

    @staticmethod
    def _nodes(rows: Iterable[dict[str, Any]]) -> list[NodeAllocation]:
        acc: dict[tuple[str, str], tuple[_Avg, _Avg, list[int]]] = {}
        for r in rows:
            t, v, n = acc.setdefault((r["node"], r["pool"]), (_Avg(), _Avg(), [0]))
            t.add(r.get("allocated_tflops_percent"))
            v.add(r.get("allocated_vram_percent"))
            n[0] += 1
        return [
            NodeAllocation(node=node, pool=pool, tflops_allocated_pct=t.avg, vram_allocated_pct=v.avg,
                           samples=n[0])
            for (node, pool), (t, v, n) in acc.items()
        ]  # fmt: skip

    @staticmethod
    def _gpus(
        rows: Iterable[dict[str, Any]], capacity: Mapping[str, tuple[float, float]], missing: set[str]
    ) -> list[GPUUsageSummary]:
        acc: dict[tuple[str, str], tuple[_Avg, list[Any]]] = {}  # compute; [peak %, peak bytes, n]
        for r in rows:
            c, a = acc.setdefault((r["node"], r["uuid"]), (_Avg(), [None, None, 0]))
            c.add(r.get("compute_percentage"))
            a[0] = _max(a[0], _v(r.get("memory_percentage")))
            a[1] = _max(a[1], _v(r.get("memory_bytes")))
            a[2] += 1
        out: list[GPUUsageSummary] = []
        written = False
        for (node, uuid), (c, (peak_pct, peak_bytes, n)) in acc.items():
            peak = peak_pct
            if peak:
                written = True
            else:
                cap = capacity.get(uuid, (0.0, 0.0))[1]
                peak = peak_bytes / cap * 100.0 if cap > 0 and peak_bytes is not None else None
            out.append(
                GPUUsageSummary(node=node, uuid=uuid, compute_used_pct=c.avg, vram_peak_pct=peak,
                                vram_peak_bytes=peak_bytes, samples=n)
            )  # fmt: skip
        if acc and not written:
            missing.add("tf_gpu_usage.memory_percentage")
        return out

    @staticmethod
    def _requests(rows: Iterable[dict[str, Any]], missing: set[str]) -> list[WorkloadRequest]:
        acc: dict[tuple[str, str], tuple[_Avg, _Avg, _Avg, set[str], list[int]]] = {}
        has_gpu_count = True
        for r in rows:
            t, v, g, workers, n = acc.setdefault(
                (r["namespace"], r["workload"]), (_Avg(), _Avg(), _Avg(), set(), [0])
            )
            t.add(r.get("tflops_request"))
            v.add(r.get("vram_bytes_request"))
            if "gpu_count" in r:
                g.add(r["gpu_count"])
            else:
                has_gpu_count = False
                g.add(1)
            workers.add(r["worker"])
            n[0] += 1
        if not has_gpu_count:
            missing.add("tf_worker_resources.gpu_count")
        return [
            WorkloadRequest(namespace=ns, workload=wl, tflops_request=t.avg, vram_request_bytes=v.avg,
                            gpu_count=g.avg, workers=len(workers), samples=n[0])
            for (ns, wl), (t, v, g, workers, n) in acc.items()
        ]  # fmt: skip

    @staticmethod
    def _usage(
        rows: Iterable[dict[str, Any]], capacity: Mapping[str, tuple[float, float]], missing: set[str]
    ) -> list[WorkloadUsage]:
        """TFLOPS per (workload, GPU): `compute_tflops` where written (non-zero in the window), else
        compute % × the GPU's capacity — the adapter's rule. A NULL value, or compute % on a GPU of
        unknown capacity, is no sample (`add_usage_group`, shared with the SQL adapter)."""
        groups: dict[tuple[str, str, str], tuple[_Avg, _Avg, list[Any]]] = {}  # pct, tflops; [peak bytes, n]
        for r in rows:
            p, tf, a = groups.setdefault(
                (r["namespace"], r["workload"], r["uuid"]), (_Avg(), _Avg(), [None, 0])
            )
            p.add(r.get("compute_percentage"))
            tf.add(r.get("compute_tflops"))
            a[0] = _max(a[0], _v(r.get("memory_bytes")))
            a[1] += 1
        acc: dict[tuple[str, str], list[Any]] = {}  # Σ tflops, n, peak tflops, peak bytes, samples
        for (ns, wl, uuid), (p, tf, (mem, n)) in groups.items():
            w = acc.setdefault((ns, wl), [0.0, 0.0, None, None, 0])
            direct = (tf.total, tf.n, tf.hi) if tf.mag > 0 else None
            cap = capacity.get(uuid, (0.0, 0.0))[0]
            if direct is None and cap <= 0:
                missing.add(f"capacity of {uuid}")
            add_usage_group(w, cap, p.total if p.n else None, p.n, p.hi, mem, n, direct)
        return [
            WorkloadUsage(namespace=ns, workload=wl, tflops_avg=w[0] / w[1] if w[1] else None,
                          tflops_peak=w[2], vram_peak_bytes=w[3], samples=int(w[4]))
            for (ns, wl), w in acc.items()
        ]  # fmt: skip

    # -- alerts ----------------------------------------------------------------------------------

    def _window(
        self, rule: str, table: str, columns: Iterable[str], now: datetime, sentinel: str | None = None
    ) -> list[dict[str, Any]]:
        """The rule's window rows, or NoData exactly where the SQL adapter raises it.

        Alert windows are seconds to minutes long, so holding their rows is fine.
        """
        try:
            rows = list(self.metrics.rows(table, now - RULES[rule].window, now + _EPS))
        except ValueError:
            raise NoData(f"{rule}: table {table} does not exist (the simulator does not write it)") from None
        if not rows:
            start = (now - RULES[rule].window).replace(tzinfo=None)
            raise NoData(f"{rule}: no rows in {table} between {start} and {now.replace(tzinfo=None)} UTC")
        for column in columns:
            if column not in rows[0]:
                raise NoData(f"{rule}: column {table}.{column} does not exist (never written)")
        if sentinel and not any(abs(r[sentinel] or 0) for r in rows):
            raise NoData(f"{rule}: {table}.{sentinel} is never written (NULL or 0 throughout the window)")
        return rows

    def alert_history(self, rule: str, times: Sequence[datetime]) -> list[AlertResult]:
        """`alert_rows` at each instant: the per-evaluation semantics the SQL adapter batches.

        The simulator reads its in-memory rows per window, so there is no round trip to save; it is
        the reference the batched GreptimeDB replay is tested against.
        """
        if rule not in RULES:
            raise ValueError(f"unknown alert rule {rule!r}; known: {', '.join(ALERT_RULES)}")
        if self.columns is not None:
            return aggregate.alert_history(self.columns, rule, times)
        return history_by_step(self.alert_rows, rule, times)

    def alert_rows(self, rule: str, now: datetime) -> list[AlertRow]:
        """Rows firing `rule` in [now − evaluationInterval, now]; NoData as in the SQL adapter."""
        spec = RULES.get(rule)
        if spec is None:
            raise ValueError(f"unknown alert rule {rule!r}; known: {', '.join(ALERT_RULES)}")
        if self.columns is not None:
            (result,) = aggregate.alert_history(self.columns, rule, [now])
            if isinstance(result, NoData):
                raise result
            return result
        thr = float(spec.threshold)
        out: list[AlertRow]
        if rule in ("WorkerTFlopsThrottled", "WorkerVRAMSwitchCountIncreasing"):
            col, alias = (
                ("compute_throttled_cnt", "throttled_increase")
                if rule == "WorkerTFlopsThrottled"
                else ("vram_resumed_cnt", "switch_increase")
            )
            rows = self._window(
                rule, "tf_worker_usage", ("workload", "worker", "uuid", "node", col), now, col
            )
            spans = _spans(rows, ("workload", "worker", "uuid", "node"), col)
            out = [
                {"workload": k[0], "worker": k[1], "uuid": k[2], "node": k[3], alias: hi - lo}
                for k, (lo, hi) in spans.items()
                if hi - lo > thr
            ]
        elif rule == "WorkerAllocationFailed":
            col = "total_allocation_fail_cnt"
            rows = self._window(rule, "tf_system_metrics", ("pool", col), now)  # NoData for SimMetrics
            out = [
                {"pool": k[0], "failure_increase": hi - lo}
                for k, (lo, hi) in _spans(rows, ("pool",), col).items()
                if hi - lo > thr
            ]
        elif rule in ("GPUVRAMFull", "GPUTFlopsFull", "GPUTemperatureHigh"):
            col, alias = {
                "GPUVRAMFull": ("memory_percentage", "memory_used"),
                "GPUTFlopsFull": ("compute_percentage", "compute_used"),
                "GPUTemperatureHigh": ("temperature", "avg_temperature"),
            }[rule]
            sentinel = col if col == "memory_percentage" else None
            rows = self._window(rule, "tf_gpu_usage", ("node", "pool", "uuid", col), now, sentinel)
            avgs = _avgs(
                (r for r in rows if r[col] is not None and r[col] > thr), ("node", "pool", "uuid"), (col,)
            )
            out = [{"node": k[0], "pool": k[1], "uuid": k[2], alias: a[0].avg} for k, a in avgs.items()]
        elif rule.startswith(("Node", "Pool")):
            col = "allocated_tflops_percent" if "TFlops" in rule else "allocated_vram_percent"
            alias = "tflops_available" if "TFlops" in rule else "vram_available"
            keys = ("node", "pool") if rule.startswith("Node") else ("pool",)
            rows = self._window(rule, "tf_node_metrics", (*keys, col), now)
            out = []
            for k, (a,) in _avgs(rows, keys, (col,)).items():
                if a.avg is not None and 100 - a.avg < thr:
                    out.append({**dict(zip(keys, k, strict=True)), alias: 100 - a.avg})
        elif rule == "EmptyGPU":
            rows = self._window(rule, "tf_node_metrics", ("node",), now)
            start, end = now - spec.window, now + _EPS
            busy = {
                r["node"] for r in self.metrics.rows("tf_worker_usage", start, end) if r["node"] is not None
            }
            out = [{"node": n} for n in sorted({r["node"] for r in rows if r["node"] is not None} - busy)]
        else:  # IdleGPU
            cols = ("compute_percentage", "memory_percentage", "memory_bytes")
            rows = self._window(rule, "tf_gpu_usage", ("node", "pool", "uuid", *cols), now)
            out = []
            for k, (c, v, m) in _avgs(rows, ("node", "pool", "uuid"), cols).items():
                if c.avg is not None and v.avg is not None and c.avg < 1 and v.avg < thr:
                    out.append(
                        {"node": k[0], "pool": k[1], "uuid": k[2], "compute": c.avg, "vram": v.avg,
                         "memory_bytes": m.avg}
                    )  # fmt: skip
        return sorted(out, key=alert_row_key)


def _avgs(
    rows: Iterable[dict[str, Any]], keys: tuple[str, ...], cols: tuple[str, ...]
) -> dict[tuple[Any, ...], tuple[_Avg, ...]]:
    acc: dict[tuple[Any, ...], tuple[_Avg, ...]] = {}
    for r in rows:
        group = acc.get(k := tuple(r[c] for c in keys))
        if group is None:
            group = acc[k] = tuple(_Avg() for _ in cols)
        for a, c in zip(group, cols, strict=True):
            a.add(r[c])
    return acc


def _spans(
    rows: Iterator[dict[str, Any]] | list[dict[str, Any]], keys: tuple[str, ...], col: str
) -> dict[tuple[Any, ...], tuple[float, float]]:
    """(min, max) of a counter per group (the rules' MAX − MIN), NULLs ignored."""
    out: dict[tuple[Any, ...], tuple[float, float]] = {}
    for r in rows:
        x = r[col]
        if x is None:
            continue
        k = tuple(r[c] for c in keys)
        lo, hi = out.get(k, (x, x))
        out[k] = (min(lo, x), max(hi, x))
    return out
