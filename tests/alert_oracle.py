"""The per-evaluation alert queries: the oracle the batched `GreptimeMetrics.alert_history` is tested against.

This is the adapter's SQL as it was before the replay was batched (M8): one query per rule and
evaluation instant over [t − evaluationInterval, t], plus a probe for NoData. Product code no longer
needs it (a single evaluation is `alert_history` with one instant), so it lives with the tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from psycopg import sql

from tftui.model.metrics import ALERT_RULES, AlertResult, AlertRow, NoData, history_by_step
from tftui.sources.greptime import (
    RULES,
    GreptimeMetrics,
    TableInfo,
    _f,
    _naive_utc,
    _num,
    alert_row_key,
)


class PerStepAlerts:
    """`alert_rows` / `alert_history` of a `GreptimeMetrics`, one query per instant (the old path)."""

    def __init__(self, metrics: GreptimeMetrics) -> None:
        self.m = metrics
        self.queries = 0

    def alert_history(self, rule: str, times: Sequence[datetime]) -> list[AlertResult]:
        return history_by_step(self.alert_rows, rule, times)

    def alert_rows(self, rule: str, now: datetime) -> list[AlertRow]:
        """Rows firing `rule` in [now − evaluationInterval, now]; NoData when there is nothing to read.

        NoData (not healthy, M5) when the rule's table or a column it reads is absent, the window
        has no rows, or the column it fires on is never written (NULL or 0 throughout:
        `compute_throttled_cnt`, `vram_resumed_cnt`, `tf_gpu_usage.memory_percentage`). IdleGPU
        still runs when memory_percentage is 0 (it then tests compute only, as upstream does) and
        adds `memory_bytes` (window average) so VRAM can be judged from bytes (M3).
        """
        spec = RULES.get(rule)
        if spec is None:
            raise ValueError(f"unknown alert rule {rule!r}; known: {', '.join(ALERT_RULES)}")
        params = {
            "start": _naive_utc(now - spec.window),
            "end": _naive_utc(now),
            "threshold": float(spec.threshold),
        }
        if rule in ("WorkerTFlopsThrottled", "WorkerVRAMSwitchCountIncreasing"):
            col, alias = (
                ("compute_throttled_cnt", "throttled_increase")
                if rule == "WorkerTFlopsThrottled"
                else ("vram_resumed_cnt", "switch_increase")
            )
            t = self._table(rule, "tf_worker_usage", ("workload", "worker", "uuid", "node", col), params, col)
            query = sql.SQL(
                "SELECT workload, worker, uuid, node, max({c}) - min({c}) AS {a} FROM {t} WHERE {w} "
                "GROUP BY workload, worker, uuid, node HAVING max({c}) - min({c}) > %(threshold)s"
            ).format(
                c=sql.Identifier(col), a=sql.Identifier(alias), t=t.ident, w=self.m._window(t, upper="<=")
            )
        elif rule == "WorkerAllocationFailed":
            col = "total_allocation_fail_cnt"
            t = self._table(rule, "tf_system_metrics", ("pool", col), params)
            query = sql.SQL(
                "SELECT pool, max({c}) - min({c}) AS failure_increase FROM {t} WHERE {w} "
                "GROUP BY pool HAVING max({c}) - min({c}) > %(threshold)s"
            ).format(c=sql.Identifier(col), t=t.ident, w=self.m._window(t, upper="<="))
        elif rule in ("GPUVRAMFull", "GPUTFlopsFull", "GPUTemperatureHigh"):
            col, alias = {
                "GPUVRAMFull": ("memory_percentage", "memory_used"),
                "GPUTFlopsFull": ("compute_percentage", "compute_used"),
                "GPUTemperatureHigh": ("temperature", "avg_temperature"),
            }[rule]
            sentinel = col if col == "memory_percentage" else None
            t = self._table(rule, "tf_gpu_usage", ("node", "pool", "uuid", col), params, sentinel)
            query = sql.SQL(
                "SELECT node, pool, uuid, avg({c}) AS {a} FROM {t} WHERE {c} > %(threshold)s AND {w} "
                "GROUP BY node, pool, uuid"
            ).format(
                c=sql.Identifier(col), a=sql.Identifier(alias), t=t.ident, w=self.m._window(t, upper="<=")
            )
        elif rule.startswith(("Node", "Pool")):
            col = "allocated_tflops_percent" if "TFlops" in rule else "allocated_vram_percent"
            alias = "tflops_available" if "TFlops" in rule else "vram_available"
            keys = ("node", "pool") if rule.startswith("Node") else ("pool",)
            t = self._table(rule, "tf_node_metrics", (*keys, col), params)
            group = sql.SQL(", ").join(map(sql.Identifier, keys))
            query = sql.SQL(
                "SELECT {g}, 100 - avg({c}) AS {a} FROM {t} WHERE {w} GROUP BY {g} "
                "HAVING 100 - avg({c}) < %(threshold)s"
            ).format(g=group, c=sql.Identifier(col), a=sql.Identifier(alias), t=t.ident,
                     w=self.m._window(t, upper="<="))  # fmt: skip
        elif rule == "EmptyGPU":
            t = self._table(rule, "tf_node_metrics", ("node",), params)
            u = self._table(rule, "tf_worker_usage", ("node",), params, empty_ok=True)
            wu = sql.SQL("{ts} >= %(start)s AND {ts} <= %(end)s").format(ts=u.ts)
            query = sql.SQL(
                "SELECT DISTINCT node FROM {t} WHERE {w} AND node NOT IN "
                "(SELECT DISTINCT node FROM {u} WHERE {wu} AND node IS NOT NULL)"
            ).format(t=t.ident, w=self.m._window(t, upper="<="), u=u.ident, wu=wu)
        else:  # IdleGPU
            t = self._table(
                rule, "tf_gpu_usage", ("node", "pool", "uuid", "compute_percentage", "memory_percentage",
                                       "memory_bytes"), params
            )  # fmt: skip
            query = sql.SQL(
                "SELECT node, pool, uuid, avg(compute_percentage) AS compute, "
                "avg(memory_percentage) AS vram, avg(memory_bytes) AS memory_bytes FROM {t} WHERE {w} "
                "GROUP BY node, pool, uuid "
                "HAVING avg(compute_percentage) < 1 AND avg(memory_percentage) < %(threshold)s"
            ).format(t=t.ident, w=self.m._window(t, upper="<="))
        self.queries += 1
        names, rows = self.m._run(query, params, f"evaluating {rule}", t.name)
        out = [{k: _num(v) for k, v in zip(names, row, strict=True)} for row in rows]
        return sorted(out, key=alert_row_key)

    def _table(
        self,
        rule: str,
        name: str,
        columns: Sequence[str],
        params: Mapping[str, Any],
        sentinel: str | None = None,
        *,
        empty_ok: bool = False,
    ) -> TableInfo:
        """The rule's table, or NoData: absent table/column, empty window, never-written sentinel."""
        table = self.m._alert_table(rule, name, columns)  # absent table/column, not numbers
        if empty_ok:
            return table
        probe = sql.SQL("max(abs({c}))").format(c=sql.Identifier(sentinel)) if sentinel else sql.SQL("NULL")
        query = sql.SQL("SELECT count(*), {p} FROM {t} WHERE {w}").format(
            p=probe, t=table.ident, w=self.m._window(table, upper="<=")
        )
        self.queries += 1
        (count, peak), *_ = self.m._fetch(query, params, f"evaluating {rule}", name)
        if not count:
            raise NoData(f"{rule}: no rows in {name} between {params['start']} and {params['end']} UTC")
        if sentinel and not _f(peak):
            raise NoData(f"{rule}: {name}.{sentinel} is never written (NULL or 0 throughout the window)")
        return table
