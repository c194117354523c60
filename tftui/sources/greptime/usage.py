"""Usage for the console and the autoscaler: latest samples, store-side histograms, raw rows."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar, cast

import psycopg
from psycopg import sql

from tftui.model.usage import HistogramQuery, PodBucket, VramWindow
from tftui.sources.greptime.store import (
    DEFAULT_LOOKBACK,
    Store,
    TableInfo,
    _aware,
    _f,
    _naive_utc,
    _num,
    _opt,
    capacity_case,
    finite,
)
from tftui.sources.ports import GPUUsage, MetricsTable, SourceError, WorkerUsage

R = TypeVar("R")
T = TypeVar("T")

STREAM_CHUNK: Final = 4096
"""Rows libpq takes off the wire at a time while an aggregate is streamed (`_stream_into`)."""


class UsageQueries(Store):
    """The `MetricsPort` reads."""

    # -- MetricsPort -----------------------------------------------------------------------------

    def latest_gpu_usage(self, now: datetime, lookback: timedelta = DEFAULT_LOOKBACK) -> dict[str, GPUUsage]:
        """GPU → its newest sample in [now − lookback, now] (max(ts) join; no DISTINCT ON).

        Both sides of the join carry the window: the outer side would otherwise scan the table's
        whole retention (30 days upstream) on every refresh.
        """
        t = self._require("tf_gpu_usage", ("node", "uuid", "compute_percentage", "memory_bytes"))
        query = sql.SQL(
            "SELECT g.uuid, g.node, g.compute_percentage, g.memory_bytes, g.{ts} AS sample_ts FROM {t} g JOIN "
            "(SELECT uuid, max({ts}) AS last_ts FROM {t} WHERE {w} GROUP BY uuid) m "
            "ON g.uuid = m.uuid AND g.{ts} = m.last_ts WHERE {gw}"
        ).format(ts=t.ts, t=t.ident, w=self._window(t, upper="<="), gw=self._window(t, upper="<=", alias="g"))
        params = {"start": _naive_utc(now - lookback), "end": _naive_utc(now)}
        rows = self._fetch(query, params, "reading the latest GPU usage", t.name)
        with self._malformed("reading the latest GPU usage"):
            return {
                str(u): GPUUsage(
                    gpu=str(u), node=str(n), compute_percent=_opt(c), memory_bytes=_opt(m), ts=_aware(ts)
                )
                for u, n, c, m, ts in rows
            }

    def latest_worker_usage(
        self, now: datetime, lookback: timedelta = DEFAULT_LOOKBACK
    ) -> dict[tuple[str, str], WorkerUsage]:
        """(namespace, pod) → newest sample summed over the worker's devices.

        TFLOPS per device: `compute_tflops` where it is written (non-zero), else compute % ×
        `gpu_capacity` (as step 1). Without `pod_name` (not in upstream's DDL) the pod UID
        (`worker`) stands in. Both sides of the join carry the window. A figure is None unless
        every device row has it (NULL compute %, a device of unknown capacity or NULL bytes would
        make the sum look lower than the use).
        """
        t = self._require("tf_worker_usage", ("namespace", "workload", "worker", "uuid", "compute_percentage",
                                               "memory_bytes"))  # fmt: skip
        pod = sql.Identifier("pod_name" if t.has("pod_name") else "worker")
        tflops = sql.SQL("u.compute_tflops") if t.has("compute_tflops") else sql.SQL("NULL")
        query = sql.SQL(
            "SELECT u.namespace, u.{pod} AS pod_key, u.workload, u.uuid, u.compute_percentage, {tf} AS tflops, "
            "u.memory_bytes, u.{ts} AS sample_ts "
            "FROM {t} u JOIN (SELECT namespace, {pod} AS pod, max({ts}) AS last_ts FROM {t} WHERE {w} "
            "GROUP BY namespace, {pod}) m "
            "ON u.namespace = m.namespace AND u.{pod} = m.pod AND u.{ts} = m.last_ts WHERE {uw}"
        ).format(pod=pod, tf=tflops, ts=t.ts, t=t.ident, w=self._window(t, upper="<="),
                 uw=self._window(t, upper="<=", alias="u"))  # fmt: skip
        params = {"start": _naive_utc(now - lookback), "end": _naive_utc(now)}
        rows = self._fetch(query, params, "reading the latest worker usage", t.name)
        # workload, Σ %, Σ TFLOPS, Σ bytes, devices, ts (a None sum stays None: a device lacked it)
        acc: dict[tuple[str, str], list[Any]] = {}
        with self._malformed("reading the latest worker usage"):
            for ns, name, workload, uuid, pct, tf, mem, ts in rows:
                a = acc.setdefault((str(ns), str(name)), [str(workload), 0.0, 0.0, 0.0, 0, _aware(ts)])
                p, b, written = _opt(pct), _opt(mem), _opt(tf) or 0.0
                cap = self.gpu_capacity.get(str(uuid), (0.0, 0.0))[0]
                device = written or (None if p is None or cap <= 0 else p / 100.0 * cap)
                a[1] = None if a[1] is None or p is None else a[1] + p
                a[2] = None if a[2] is None or device is None else a[2] + device
                a[3] = None if a[3] is None or b is None else a[3] + b
                a[4] += 1
        return {
            key: WorkerUsage(namespace=key[0], pod=key[1], workload=a[0],
                             compute_percent=None if a[1] is None else a[1] / a[4],
                             tflops=a[2], memory_bytes=a[3], ts=a[5])
            for key, a in acc.items()
        }  # fmt: skip

    def usage_histograms(self, q: HistogramQuery) -> list[PodBucket]:
        """`usage_histograms_into(q, list)`: the groups as a list."""
        return self.usage_histograms_into(q, list)

    def usage_histograms_into(self, q: HistogramQuery, consume: Callable[[Iterator[PodBucket]], R]) -> R:
        """A history window of `tf_worker_usage` aggregated per (worker pod, TFLOPS bucket) (A12).

        The autoscaler's decaying histograms only need, per bucket, the sum of each sample's decay
        weight 2^((t − ref)/half-life), and per pod its first/last time and VRAM peak; the store
        computes those (bucket index with the engine's own floats, so the same index), and a few
        rows per pod come back instead of one per sample. Same row semantics as `add_samples`:
        TFLOPS = `compute_tflops`, or `compute_percentage` / 100 × the GPU's TFLOPS when it is 0;
        pod = `pod_name`, else `worker`. A missing value is no sample, never 0: NULL compute (or a
        GPU of unknown capacity) puts the row in bucket −1 (no TFLOPS), NULL memory is left out of
        the VRAM count, times and peak. Rows are grouped by the `worker` tag (the pod UID, always
        written by the hypervisor); groups of one pod name are merged by the caller.

        The groups reach `consume` as they come off the wire (`_stream_into`): at 5,000 nodes a
        2-hour window is 180,000 groups, and a result taken whole held them twice (libpq's copy and
        the groups) until the last one came: 180 MiB of a console's or a daemon's peak.
        """
        t = self._require("tf_worker_usage", ("namespace", "workload", "worker", "memory_bytes"),
                          ("compute_tflops", "compute_percentage"))  # fmt: skip
        params: dict[str, Any] = {
            "start": _naive_utc(q.start),
            "end": _naive_utc(q.end),
            "ref": q.ref_unix,
            "first": q.tflops.first,
            "r1": q.tflops.ratio1,
            "lr": q.tflops.log_ratio,
        }
        value = self._tflops_value(t, q.gpu_tflops, params)
        # half-life per workload: the default, and CASE branches for workloads configured otherwise
        by_hl: dict[float, dict[str, list[str]]] = {}
        for ns, wl, hl in q.half_lives:
            by_hl.setdefault(float(hl), {}).setdefault(ns, []).append(wl)
        params["hl"] = float(q.default_half_life)
        hl_expr: sql.Composable = sql.Placeholder("hl")
        if by_hl:
            whens = []
            for i, (hl, spaces) in enumerate(sorted(by_hl.items())):
                params[f"hl{i}"] = hl
                for j, (ns, wls) in enumerate(sorted(spaces.items())):
                    names = [f"w{i}_{j}_{k}" for k in range(len(wls))]
                    params.update(zip(names, wls, strict=True))
                    params[f"n{i}_{j}"] = ns
                    whens.append(sql.SQL("WHEN namespace = {} AND workload IN ({}) THEN {}").format(
                        sql.Placeholder(f"n{i}_{j}"), sql.SQL(", ").join(sql.Placeholder(n) for n in names),
                        sql.Placeholder(f"hl{i}")))  # fmt: skip
            hl_expr = sql.SQL("CASE {} ELSE %(hl)s END").format(sql.SQL(" ").join(whens))
        pod = sql.SQL("min(pod_name)") if t.has("pod_name") else sql.SQL("NULL")
        # a NaN or ±Infinity (`finite`) is no TFLOPS sample, as a NULL
        bucket = sql.SQL(
            "CASE WHEN {fv} IS NULL OR v < 0 THEN -1 WHEN v < %(first)s THEN 0 "
            "ELSE floor(ln(v * %(r1)s / %(first)s + 1) / %(lr)s) END"
        ).format(fv=finite(sql.Identifier("v")))
        # a sample more than 1,000 half-lives before the reference (a long window) weighs 2^-1000:
        # nothing beside any later sample, and PostgreSQL raises on a float underflow
        decay = sql.SQL("CASE WHEN (e - %(ref)s) / hl < -1000 THEN -1000 ELSE (e - %(ref)s) / hl END")
        # grouped by the one identifying tag (the pod UID): every extra text key costs a hash and
        # compare per row (measured: 3 keys ≈ 2.5× the time of 1); the other tags come with min()
        query = sql.SQL(
            "SELECT worker, min(namespace) AS ns, min(workload) AS wl, {pod} AS pod, {b} AS bucket, "
            "sum(power(2.0, {decay})) AS weight, count(*) AS samples, min(e) AS first_e, "
            "max(e) AS last_e, max(mem) AS peak_mem, count(mem) AS mem_n, "
            "min(CASE WHEN mem IS NOT NULL THEN e END) AS mem_first, "
            "max(CASE WHEN mem IS NOT NULL THEN e END) AS mem_last FROM (SELECT worker, namespace, workload, "
            "{pods} date_part('epoch', {ts}) AS e, {v} AS v, {hl} AS hl, memory_bytes AS mem "
            "FROM {t} WHERE {w}) s GROUP BY worker, {b}"
        ).format(b=bucket, pod=pod, decay=decay, pods=sql.SQL("pod_name," if t.has("pod_name") else ""),
                 ts=t.ts, v=value, hl=hl_expr, t=t.ident, w=self._window(t))  # fmt: skip
        return self._stream_into(query, params, "aggregating the usage history", t.name, _pod_bucket, consume)

    def vram_windows(self, q: HistogramQuery) -> list[VramWindow]:
        """Each pod's VRAM peak per window of `q.vram_window` seconds from its first VRAM sample in
        [q.start, q.end): what a history load longer than one window needs besides the TFLOPS
        groups (one row per pod and day instead of one per sample). The pod is `pod_name` (else the
        `worker` tag) within its namespace, as the autoscaler's samplers are keyed; a NULL, NaN or
        ±Infinity memory value is no sample."""
        t = self._require("tf_worker_usage", ("namespace", "workload", "worker", "memory_bytes"))
        pod = (
            sql.SQL("COALESCE(NULLIF(pod_name, ''), worker)")
            if t.has("pod_name")
            else sql.Identifier("worker")
        )
        params: dict[str, Any] = {
            "start": _naive_utc(q.start),
            "end": _naive_utc(q.end),
            "win": q.vram_window,
        }
        samples = sql.SQL(
            "SELECT namespace, workload, pod, e, mem FROM (SELECT namespace, workload, {pod} AS pod, "
            "date_part('epoch', {ts}) AS e, {mem} AS mem FROM {t} WHERE {w}) r WHERE mem IS NOT NULL"
        ).format(pod=pod, ts=t.ts, mem=finite(sql.Identifier("memory_bytes")), t=t.ident, w=self._window(t))
        # each pod's windows are anchored at its first sample (e0), as the autoscaler's sampler opens them
        query = sql.SQL(
            "SELECT namespace, pod, min(workload) AS wl, k, max(mem) AS peak, count(*) AS samples, "
            "min(e) AS first_e, max(e) AS last_e FROM (SELECT v.namespace, v.pod, v.workload, v.mem, v.e, "
            "floor((v.e - f.e0) / %(win)s) AS k FROM ({s}) v JOIN (SELECT namespace, pod, min(e) AS e0 "
            "FROM ({s}) a GROUP BY namespace, pod) f ON v.namespace = f.namespace AND v.pod = f.pod) j "
            "GROUP BY namespace, pod, k"
        ).format(s=samples)
        return self._stream_into(query, params, "reading the VRAM peaks per day", t.name, _vram_window, list)

    def _tflops_value(
        self, t: TableInfo, gpu_tflops: Iterable[tuple[str, float]], params: dict[str, Any]
    ) -> sql.Composable:
        """A row's TFLOPS: `compute_tflops`, or compute % / 100 × the GPU's TFLOPS where it is 0;
        NULL (no sample) for a NULL compute % or a GPU of unknown capacity."""
        # capacity per GPU, grouped by value: CASE WHEN uuid IN (…) THEN c … END (else NULL: unknown)
        cap_expr = capacity_case(gpu_tflops if t.has("uuid") else (), params)
        pct = sql.SQL("compute_percentage / 100.0 * {}").format(cap_expr)
        if t.has("compute_tflops") and t.has("compute_percentage"):
            return sql.SQL("CASE WHEN compute_tflops <> 0 THEN compute_tflops ELSE {} END").format(pct)
        if t.has("compute_tflops"):
            return sql.SQL("compute_tflops")
        if t.has("compute_percentage"):
            return pct
        raise SourceError(
            f"metrics store {self._where}: table tf_worker_usage has neither compute_tflops nor "
            "compute_percentage — not TensorFusion's schema (see docs/behaviour.md M12)"
        )

    def hourly_usage(
        self, start: datetime, end: datetime, gpu_tflops: Iterable[tuple[str, float]]
    ) -> list[tuple[str, str, int, float, int]]:
        """(namespace, workload, UTC hour of day, Σ TFLOPS, samples) over [start, end): what the
        what-if replays per workload (`whatif.recorded_usage`), summed by the store instead of every
        row of the window streamed to Python (a day at 5,000 nodes is tens of millions of rows).
        A row's TFLOPS as `usage_histograms` reads them; a row without one (or a NaN, ±Infinity) is
        no sample."""
        t = self._require(
            "tf_worker_usage", ("namespace", "workload"), ("compute_tflops", "compute_percentage")
        )
        params: dict[str, Any] = {"start": _naive_utc(start), "end": _naive_utc(end)}
        value = self._tflops_value(t, gpu_tflops, params)
        query = sql.SQL(
            "SELECT namespace, workload, h, sum(v) AS tflops, count(v) AS samples FROM (SELECT namespace, "
            "workload, h, {fx} AS v FROM (SELECT namespace, workload, date_part('hour', {ts}) AS h, "
            "{v} AS x FROM {t} WHERE {w}) r) s GROUP BY namespace, workload, h"
        ).format(fx=finite(sql.Identifier("x")), ts=t.ts, v=value, t=t.ident, w=self._window(t))
        rows = self._fetch(query, params, "summing usage per hour of day", t.name)
        with self._malformed("summing usage per hour of day"):
            return [
                (str(ns), str(wl), int(_f(h)), _f(v), int(_f(n))) for ns, wl, h, v, n in rows if int(_f(n))
            ]

    def rows(self, table: MetricsTable, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        """Raw rows with start <= ts < end, ordered by time, streamed (constant memory).

        The time column is returned as `ts` (timezone-aware UTC) whatever its name in the store.
        """
        return self._stream(table, start, end, {})

    def workload_rows(
        self, namespace: str, workload: str, start: datetime, end: datetime
    ) -> Iterator[dict[str, Any]]:
        """`rows("tf_worker_usage", …)` of one workload: its tags are in the WHERE clause, so the
        store reads that workload's series, not every worker's window (a workload's 24 h history
        read the whole cluster's: 86 million rows at 5,000 nodes)."""
        return self._stream("tf_worker_usage", start, end, {"namespace": namespace, "workload": workload})

    def _stream_into(
        self,
        query: sql.Composed,
        params: Mapping[str, Any],
        doing: str,
        table: str,
        convert: Callable[[tuple[Any, ...]], T],
        consume: Callable[[Iterator[T]], R],
    ) -> R:
        """`consume(rows converted)`, the rows taken off the wire `STREAM_CHUNK` at a time while
        `consume` runs, inside the query's deadline (each chunk counts as the server answering);
        every failure is one SourceError, raised out of `consume` (which must keep what it read to
        itself until it has read it all: a store failing mid-result leaves nothing half-applied)."""
        chunk = STREAM_CHUNK if psycopg.capabilities.has_stream_chunked() else 1  # libpq 17+

        def converted(rows: Iterator[tuple[Any, ...]], alive: Callable[[], None]) -> Iterator[T]:
            with self._malformed(doing):
                for i, row in enumerate(rows):
                    if not i % chunk:  # a chunk came: the server is answering
                        alive()
                    yield convert(row)

        try:
            with (
                self._connection() as conn,
                conn.cursor() as cur,
                self._answering(conn, doing, table) as deadline,
            ):
                rows = cast(Generator[tuple[Any, ...]], cur.stream(query, params, size=chunk))
                try:
                    return consume(converted(rows, deadline.alive))
                finally:
                    rows.close()  # `consume` stopped early: cancel the rest (psycopg drains it)
        except SourceError:
            raise
        except psycopg.Error as exc:
            raise self._error(exc, doing, table) from None

    def _stream(
        self, table: MetricsTable, start: datetime, end: datetime, tags: Mapping[str, str]
    ) -> Iterator[dict[str, Any]]:
        t = self._require(table, tuple(tags))
        names = [c for c in t.columns if c != t.time]
        where = sql.SQL(" AND ").join(
            [
                self._window(t),
                *(sql.SQL("{} = %({})s").format(sql.Identifier(k), sql.SQL("tag_" + k)) for k in tags),
            ]
        )
        query = sql.SQL("SELECT {cols}, {ts} FROM {t} WHERE {w} ORDER BY {ts}").format(
            cols=sql.SQL(", ").join(map(sql.Identifier, names)), ts=t.ts, t=t.ident, w=where
        )
        params = {
            "start": _naive_utc(start),
            "end": _naive_utc(end),
            **{"tag_" + k: v for k, v in tags.items()},
        }
        try:
            with (
                self._connection() as conn,
                conn.cursor() as cur,
                self._answering(conn, f"reading {table}", table) as deadline,
            ):
                alive = deadline.alive
                for rec in cur.stream(query, params):
                    alive()
                    row = {k: _num(v) for k, v in zip(names, rec, strict=False)}
                    row["ts"] = _aware(rec[-1])
                    yield row
        except SourceError:
            raise
        except psycopg.Error as exc:
            raise self._error(exc, f"reading {table}", table) from None


def _pod_bucket(row: tuple[Any, ...]) -> PodBucket:
    uid, ns, wl, p, b, w, n, lo, hi, mem, vn, vlo, vhi = row
    return PodBucket(namespace=str(ns), workload=str(wl), pod=str(p or uid or ""), bucket=int(b), weight=_f(w),
                     count=int(n), first=_f(lo), last=_f(hi), peak_memory=_opt(mem), vram_count=int(_f(vn)),
                     vram_first=_opt(vlo), vram_last=_opt(vhi))  # fmt: skip


def _vram_window(row: tuple[Any, ...]) -> VramWindow:
    ns, p, wl, k, peak, n, lo, hi = row
    return VramWindow(namespace=str(ns), workload=str(wl), pod=str(p), index=int(_f(k)), peak=_f(peak),
                      count=int(_f(n)), first=_f(lo), last=_f(hi))  # fmt: skip
