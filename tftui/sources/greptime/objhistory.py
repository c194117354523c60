"""A node's or a GPU's 24 h of allocated and used TFLOPS, aggregated per time bucket in the store.

The console's node and GPU sparklines used to stream a day of every GPU's rows into Python to keep
one object's (≈ 5 CPU-s per node on a 2,000-node cluster). Here the store filters the object's rows
and sums them per sample time, then per bucket; a few dozen rows come back. Same semantics as the
row path (`ui.load.objhistory`): a sample time is known only when every row of it carries the figure
(a NULL, or a GPU of unknown capacity, would make a part sum look like a dip) — a count of the
rows against a count of the values — and a bucket without a known sample time is None, never 0.

Written for GreptimeDB's dialect as the other queries are: every output aliased, the inner time is
`min(epoch)` (an aggregate, not an expression of the grouped column), the bucket expression is
repeated in `GROUP BY` (not its alias), and the bucket index is clamped in Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from psycopg import sql

from tftui.model.usage import ObjectHistoryQuery, ObjectSeries, bucket_means
from tftui.sources.greptime.store import Store, _f, _naive_utc, _opt, capacity_case

__all__ = ["ObjectHistoryQueries"]

EPOCH_SLACK = 1e-4
"""Seconds added before flooring to a bucket: the epoch of a nanosecond time index is a rounded
double in DataFusion, and a sample on a bucket's first instant must not fall into the one before."""


class ObjectHistoryQueries(Store):
    def object_history(self, q: ObjectHistoryQuery) -> ObjectSeries:
        """`q`'s buckets of used (`tf_gpu_usage`) and, for a node, allocated (`tf_node_metrics`)."""
        field = "uuid" if q.kind == "GPU" else "node"
        t = self._require("tf_gpu_usage", (field, "uuid", "compute_percentage"))
        params: dict[str, Any] = {
            "start": _naive_utc(q.start),
            "end": _naive_utc(q.end),
            "name": q.name,
            "origin": q.start.timestamp() - EPOCH_SLACK,
            "step": q.bucket.total_seconds(),
        }
        # capacity per GPU, grouped by value: CASE WHEN uuid IN (…) THEN c … END (else NULL: unknown)
        cap_expr = capacity_case(q.gpu_tflops, params)
        bucket = sql.SQL("floor((e - %(origin)s) / %(step)s)")
        used = sql.SQL(
            "SELECT {b} AS b, sum(CASE WHEN n = k AND c > 0 THEN s / c END) AS used_sum, "
            "count(CASE WHEN n = k AND c > 0 THEN 1 END) AS used_n, sum(n) AS row_n FROM ("
            "SELECT min(date_part('epoch', {ts})) AS e, sum(compute_percentage * {cap}) AS s, "
            "sum({cap}) AS c, count(*) AS n, count(compute_percentage * {cap}) AS k "
            "FROM {t} WHERE {f} = %(name)s AND {w} GROUP BY {ts}) m GROUP BY {b}"
        ).format(b=bucket, ts=t.ts, cap=cap_expr, t=t.ident, f=sql.Identifier(field), w=self._window(t))
        used_rows = self._fetch(used, params, "aggregating a usage history", t.name)
        alloc_rows: list[tuple[Any, ...]] = []
        if q.kind != "GPU":
            a = self._require("tf_node_metrics", ("node", "allocated_tflops_percent"))
            alloc = sql.SQL(
                "SELECT {b} AS b, sum(CASE WHEN n = k THEN s / n END) AS alloc_sum, "
                "count(CASE WHEN n = k THEN 1 END) AS alloc_n, sum(n) AS row_n FROM ("
                "SELECT min(date_part('epoch', {ts})) AS e, sum(allocated_tflops_percent) AS s, "
                "count(*) AS n, count(allocated_tflops_percent) AS k "
                "FROM {t} WHERE node = %(name)s AND {w} GROUP BY {ts}) m GROUP BY {b}"
            ).format(b=bucket, ts=a.ts, t=a.ident, w=self._window(a))
            alloc_rows = self._fetch(alloc, params, "aggregating an allocation history", a.name)
        n = q.buckets
        with self._malformed("aggregating a usage history"):
            return ObjectSeries(
                used=bucket_means(n, _known(used_rows)),
                allocated=bucket_means(n, _known(alloc_rows)),
                rows=int(sum(_f(r) for *_, r in used_rows) + sum(_f(r) for *_, r in alloc_rows)),
            )


def _known(rows: Iterable[Sequence[Any]]) -> list[tuple[int, float, int]]:
    """(bucket, Σ, samples) of the buckets whose sum is a number: one with a NaN or ±Infinity among
    its rows is a gap (`_opt`), not a figure."""
    return [(int(_f(b)), total, int(_f(c))) for b, s, c, _ in rows if (total := _opt(s)) is not None]
