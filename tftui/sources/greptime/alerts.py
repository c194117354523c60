"""The 15 built-in alert rules, replayed over a span in a few queries per table."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from psycopg import sql

from tftui.model.metrics import (
    ALERT_RULES,
    AlertResult,
    AlertRow,
    NoData,
)
from tftui.sources.greptime.store import (
    _NUMERIC_TYPE,
    _TEXT_COLUMNS,
    _WRITER,
    TIME_COLUMNS,
    Store,
    TableInfo,
    _aware,
    _f,
    _ms,
    _naive_utc,
    _num,
    finite,
)
from tftui.sources.ports import SourceError


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """One built-in alert rule (M5, M8): look-back window = evaluationInterval."""

    window: timedelta
    threshold: float
    consecutive: int
    severity: str


def _s(seconds: int) -> timedelta:
    return timedelta(seconds=seconds)


#: Upstream's values.yaml defaults, in ALERT_RULES order.
RULES: Final[Mapping[str, RuleSpec]] = {
    "WorkerTFlopsThrottled": RuleSpec(_s(15), 0, 3, "P1"),
    "WorkerVRAMSwitchCountIncreasing": RuleSpec(_s(120), 0, 1, "P1"),
    "WorkerAllocationFailed": RuleSpec(_s(30), 0, 1, "P1"),
    "GPUVRAMFull": RuleSpec(_s(30), 97, 2, "P1"),
    "GPUTFlopsFull": RuleSpec(_s(30), 97, 4, "P1"),
    "GPUTemperatureHigh": RuleSpec(_s(30), 90, 3, "P1"),
    "NodeTFlopsAllocationCritical": RuleSpec(_s(60), 5, 2, "P0"),
    "NodeTFlopsAllocationWarning": RuleSpec(_s(60), 10, 2, "P1"),
    "PoolTotalTFlopsAllocationCritical": RuleSpec(_s(60), 5, 2, "P0"),
    "PoolTotalTFlopsAllocationWarning": RuleSpec(_s(60), 10, 2, "P1"),
    "NodeVRAMAllocationCritical": RuleSpec(_s(60), 5, 2, "P1"),
    "NodeVRAMAllocationWarning": RuleSpec(_s(60), 10, 2, "P1"),
    "PoolVRAMAllocationWarning": RuleSpec(_s(60), 10, 2, "P1"),
    "EmptyGPU": RuleSpec(_s(300), 0, 2, "P2"),
    "IdleGPU": RuleSpec(_s(600), 5, 3, "P2"),
}
assert tuple(RULES) == ALERT_RULES


@dataclass(frozen=True, slots=True)
class _Replay:
    """One rule's share of a replay family (`alert_histories`): what it reads, computes and fires on.

    `outputs` are the rule's columns (alias, aggregate); `keep` its row filter and `having` its
    group filter, in SQL; `fires` the same test on the returned values, for rules that share a query.
    """

    rule: str
    spec: RuleSpec
    threshold: float
    param: str  # the threshold's placeholder
    table: TableInfo
    keys: tuple[str, ...]
    reads: tuple[str, ...]
    sentinel: str | None  # NoData when NULL or 0 all through a window
    outputs: tuple[tuple[str, sql.Composable], ...]
    keep: sql.Composable | None
    having: sql.Composable | None
    fires: Callable[[Mapping[str, Any]], bool]
    busy: TableInfo | None = None  # EmptyGPU: the table of nodes with a worker


class AlertQueries(Store):
    """`alert_rows`, `alert_history`, `alert_histories`."""

    # -- alerts (M5) -----------------------------------------------------------------------------

    def alert_rows(self, rule: str, now: datetime) -> list[AlertRow]:
        """Rows firing `rule` in [now − evaluationInterval, now]: one evaluation of `alert_history`."""
        (result,) = self.alert_history(rule, [now])
        if isinstance(result, NoData):
            raise result
        return result

    def alert_history(self, rule: str, times: Sequence[datetime]) -> list[AlertResult]:
        """`rule` evaluated at each of `times` (its evaluation grid up to `now`): `alert_histories` of one rule.

        Raises NoData when the rule's table or a column it reads is absent.
        """
        result = self.alert_histories({rule: times})[rule]
        if isinstance(result, NoData):
            raise result
        return result

    def alert_histories(
        self, grid: Mapping[str, Sequence[datetime]]
    ) -> dict[str, list[AlertResult] | NoData]:
        """Each rule of `grid` evaluated at its instants (its evaluation grid up to `now`, oldest first).

        Each evaluation at t reads [t − evaluationInterval, t], both ends included, as upstream's
        query does. Rules reading the same table at the same instants form one *family* and share
        their queries:

        1. a probe of the last window (count, and the peak of each never-written sentinel column):
           a rule with nothing to read at `now` is NoData at every instant and is not replayed (the
           engine replays nothing then), so a dead family costs one short read;
        2. a count of the rows (and sentinel peaks) per evaluation `k`, for the NoData of an empty
           window between evaluations;
        3. one rows query per set of group keys, computing every live rule's aggregate per
           (k, keys): a rule's row filter becomes a CASE inside its aggregate (GPU rules: average of
           the samples above the threshold), its HAVING an OR of the rules' conditions that Python
           re-tests per rule on the same returned values, so each rule gets exactly its own rows.

        Every row of the span is tagged with its evaluation `k = floor((now − ts) / interval)`
        (t = now − k·interval), computed on the epoch; a row exactly on a window edge belongs to two
        windows, so a UNION ALL branch repeats just those rows (`ts IN (<edge instants>)`, exact
        timestamp equality) with k − 1. `now` and every bound are whole milliseconds, and so are the
        times TensorFusion writes; the epoch is a double, which is not exact for a nanosecond column
        (DataFusion, and so GreptimeDB, converts nanoseconds to a double before dividing: an edge row
        comes out a fraction of a microsecond off), so `k` is computed with 0.1 ms of slack towards
        the newer window: exact for rows of millisecond precision. Families run at once on the
        pool's connections.

        Per rule: a list with one result per instant (NoData where that window had no rows or the
        sentinel was NULL or 0 all through it: `compute_throttled_cnt`, `vram_resumed_cnt`,
        `tf_gpu_usage.memory_percentage`), or NoData when its table or a column it reads is absent.
        IdleGPU still runs when memory_percentage is 0 (it then tests compute only, as upstream
        does) and adds `memory_bytes` (window average) so VRAM can be judged from bytes (M3).
        """
        out: dict[str, list[AlertResult] | NoData] = {}
        families: dict[tuple[str, timedelta, tuple[datetime, ...]], list[_Replay]] = {}
        for n, (rule, times) in enumerate(grid.items()):
            spec = RULES.get(rule)
            if spec is None:
                raise ValueError(f"unknown alert rule {rule!r}; known: {', '.join(ALERT_RULES)}")
            if not times:
                out[rule] = []
                continue
            now, steps = times[-1], len(times) - 1
            if any(t != now - spec.window * (steps - i) for i, t in enumerate(times)):
                raise ValueError(f"{rule}: evaluation times must be {spec.window} apart, oldest first")
            try:
                part = self._replay_part(rule, spec, n)
            except NoData as exc:
                out[rule] = exc
                continue
            families.setdefault((part.table.name, spec.window, tuple(times)), []).append(part)
        jobs = [(parts, list(times)) for (_name, _window, times), parts in families.items()]
        if len(jobs) > 1 and self._pool_size > 1:
            with ThreadPoolExecutor(max_workers=self._pool_size) as ex:
                for done in list(ex.map(lambda job: self._replay_family(*job), jobs)):
                    out.update(done)
        else:
            for parts, times in jobs:
                out.update(self._replay_family(parts, times))
        return {rule: out[rule] for rule in grid}

    def _replay_part(self, rule: str, spec: RuleSpec, n: int) -> _Replay:
        """What `rule` reads and computes, with its threshold bound as `t<n>` (NoData: table/column absent)."""
        th = sql.Placeholder(f"t{n}")
        thr = float(spec.threshold)
        if rule in ("WorkerTFlopsThrottled", "WorkerVRAMSwitchCountIncreasing", "WorkerAllocationFailed"):
            col, alias, table, keys = {
                "WorkerTFlopsThrottled": ("compute_throttled_cnt", "throttled_increase", "tf_worker_usage",
                                          ("workload", "worker", "uuid", "node")),
                "WorkerVRAMSwitchCountIncreasing": ("vram_resumed_cnt", "switch_increase", "tf_worker_usage",
                                                    ("workload", "worker", "uuid", "node")),
                "WorkerAllocationFailed": ("total_allocation_fail_cnt", "failure_increase", "tf_system_metrics",
                                           ("pool",)),
            }[rule]  # fmt: skip
            t = self._alert_table(rule, table, (*keys, col))
            c = sql.Identifier(col)
            increase = sql.SQL("max({c}) - min({c})").format(c=c)
            return _Replay(rule, spec, thr, f"t{n}", t, keys, (col,), None if table == "tf_system_metrics" else col,
                           ((alias, increase),), None, sql.SQL("{} > {}").format(increase, th),
                           lambda r: r[alias] is not None and r[alias] > thr)  # fmt: skip
        if rule in ("GPUVRAMFull", "GPUTFlopsFull", "GPUTemperatureHigh"):
            col, alias = {
                "GPUVRAMFull": ("memory_percentage", "memory_used"),
                "GPUTFlopsFull": ("compute_percentage", "compute_used"),
                "GPUTemperatureHigh": ("temperature", "avg_temperature"),
            }[rule]
            keys = ("node", "pool", "uuid")
            t = self._alert_table(rule, "tf_gpu_usage", (*keys, col))
            # a NaN would pass `> threshold` (ordered above every number) and turn the average into
            # NaN, a GPU firing on garbage: `finite` makes it no sample
            above = sql.SQL("{c} > {th}").format(c=finite(sql.Identifier(col)), th=th)
            # upstream filters the samples before averaging: the average of those above the threshold
            mean = sql.SQL("avg(CASE WHEN {a} THEN {c} END)").format(a=above, c=sql.Identifier(col))
            return _Replay(rule, spec, thr, f"t{n}", t, keys, (col,), col if col == "memory_percentage" else None,
                           ((alias, mean),), above, None, lambda r: r[alias] is not None)  # fmt: skip
        if rule.startswith(("Node", "Pool")):
            col = "allocated_tflops_percent" if "TFlops" in rule else "allocated_vram_percent"
            alias = "tflops_available" if "TFlops" in rule else "vram_available"
            keys = ("node", "pool") if rule.startswith("Node") else ("pool",)
            t = self._alert_table(rule, "tf_node_metrics", (*keys, col))
            left = sql.SQL("100 - avg({c})").format(c=finite(sql.Identifier(col)))
            return _Replay(rule, spec, thr, f"t{n}", t, keys, (col,), None, ((alias, left),), None,
                           sql.SQL("{} < {}").format(left, th),
                           lambda r: r[alias] is not None and r[alias] < thr)  # fmt: skip
        if rule == "EmptyGPU":
            t = self._alert_table(rule, "tf_node_metrics", ("node",))
            busy = self._alert_table(rule, "tf_worker_usage", ("node",))
            return _Replay(
                rule, spec, thr, f"t{n}", t, ("node",), (), None, (), None, None, lambda r: True, busy
            )
        # IdleGPU
        keys = ("node", "pool", "uuid")
        t = self._alert_table(rule, "tf_gpu_usage", (*keys, "compute_percentage", "memory_percentage",
                                                     "memory_bytes"))  # fmt: skip
        outputs = tuple(
            (alias, sql.SQL("avg({})").format(finite(sql.Identifier(col))))
            for alias, col in (("compute", "compute_percentage"), ("vram", "memory_percentage"),
                               ("memory_bytes", "memory_bytes"))
        )  # fmt: skip
        having = sql.SQL("avg({}) < 1 AND avg({}) < {}").format(
            finite(sql.Identifier("compute_percentage")), finite(sql.Identifier("memory_percentage")), th
        )
        return _Replay(
            rule, spec, thr, f"t{n}", t, keys, ("compute_percentage", "memory_percentage", "memory_bytes"), None, outputs,
            None, having,
            lambda r: r["compute"] is not None and r["compute"] < 1 and r["vram"] is not None and r["vram"] < thr,
        )  # fmt: skip

    def _replay_family(
        self, parts: Sequence[_Replay], times: Sequence[datetime]
    ) -> dict[str, list[AlertResult]]:
        """The rules of one table evaluated at the same `times`: probe, counts per k, rows (alert_histories)."""
        t, spec = parts[0].table, parts[0].spec
        now, steps = times[-1], len(times) - 1
        doing = f"evaluating {', '.join(p.rule for p in parts)}"
        params: dict[str, Any] = {
            "start": _naive_utc(now - spec.window * (steps + 1)),
            "end": _naive_utc(now),
            "now_s": _aware(_ms(now)).timestamp(),  # as the bounds are read: whole milliseconds
            "iv": spec.window.total_seconds(),
            "last": _naive_utc(now - spec.window),
        }
        params.update((p.param, p.threshold) for p in parts)
        # the instants that are window edges: a row exactly there belongs to two windows
        edges = [f"e{m}" for m in range(1, steps + 2)]
        params.update((e, _naive_utc(now - spec.window * m)) for m, e in enumerate(edges, 1))
        sentinels = sorted({p.sentinel for p in parts if p.sentinel})
        peaks = sql.SQL("").join(
            sql.SQL(", max(abs({})) AS {}").format(sql.Identifier(s), sql.Identifier(f"peak_{i}"))
            for i, s in enumerate(sentinels)
        )

        def no_data(
            rule: str, sentinel: str | None, seen: Mapping[int, Sequence[Any]], k: int
        ) -> NoData | None:
            n, *peak = seen.get(k, (0, *(0.0 for _ in sentinels)))
            if not n:
                at = now - spec.window * k
                start, end = _naive_utc(at - spec.window), _naive_utc(at)
                return NoData(f"{rule}: no rows in {t.name} between {start} and {end} UTC")
            if sentinel and not peak[sentinels.index(sentinel)]:
                return NoData(
                    f"{rule}: {t.name}.{sentinel} is never written (NULL or 0 throughout the window)"
                )
            return None

        out: dict[str, list[AlertResult]] = {}
        # 1. the last window: a rule with nothing to read now is not replayed
        probe = sql.SQL("SELECT count(*) AS n{p} FROM {t} WHERE {ts} >= %(last)s AND {ts} <= %(end)s").format(
            p=peaks, t=t.ident, ts=t.ts
        )
        with self._malformed(doing):
            (n, *peak), *_ = self._fetch(probe, params, doing, t.name)
            last = {0: (int(n), *(abs(_f(v)) for v in peak))}
        live = []
        for p in parts:
            if (dead := no_data(p.rule, p.sentinel, last, 0)) is not None:
                out[p.rule] = [dead] * len(times)
            else:
                live.append(p)
        if not live:
            return out
        # 2. rows (and sentinel peaks) per evaluation
        counted = self._fetch(
            sql.SQL("SELECT k, count(*) AS n{p} FROM {s} GROUP BY k").format(
                p=peaks, s=self._by_step(t, sentinels, edges)
            ),
            params, doing, t.name,
        )  # fmt: skip
        seen: dict[int, list[Any]] = {}  # k → [rows, sentinel peaks…]
        with self._malformed(doing):
            for k, n, *peak in counted:
                acc = seen.setdefault(int(k), [0, *(0.0 for _ in sentinels)])
                acc[0] += int(n)
                for i, v in enumerate(peak, 1):
                    acc[i] = max(acc[i], abs(_f(v)))
        # 3. the firing rows, one query per set of group keys
        rows: dict[str, dict[int, list[AlertRow]]] = {p.rule: {} for p in live}
        by_keys: dict[tuple[str, ...], list[_Replay]] = {}
        for p in live:
            by_keys.setdefault(p.keys, []).append(p)
        for keys, group in by_keys.items():
            for p, found in self._replay_rows(t, keys, group, edges, params, doing):
                rows[p.rule].setdefault(found[0], []).append(found[1])
        for p in live:
            out[p.rule] = [
                no_data(p.rule, p.sentinel, seen, steps - i)
                or sorted(rows[p.rule].get(steps - i, []), key=alert_row_key)
                for i in range(len(times))
            ]
        return out

    def _replay_rows(
        self,
        t: TableInfo,
        keys: tuple[str, ...],
        parts: Sequence[_Replay],
        edges: Sequence[str],
        params: Mapping[str, Any],
        doing: str,
    ) -> Iterator[tuple[_Replay, tuple[int, AlertRow]]]:
        """(rule, (k, row)) for every row firing one of `parts`, from one query grouped by (k, keys)."""
        reads = tuple(dict.fromkeys(c for p in parts for c in p.reads if c not in keys))
        # a row filter or HAVING applies only when every rule has one (then: any of them)
        where: sql.Composable | None = None
        if all(p.keep is not None for p in parts):
            where = sql.SQL("({})").format(sql.SQL(" OR ").join(p.keep for p in parts if p.keep is not None))
        having: sql.Composable = sql.SQL("")
        if all(p.having is not None for p in parts):
            having = sql.SQL(" HAVING {}").format(
                sql.SQL(" OR ").join(sql.SQL("({})").format(p.having) for p in parts if p.having is not None)
            )
        group = sql.SQL(", ").join(map(sql.Identifier, keys))
        # every output aliased: two rules may compute the same expression (DataFusion, and so
        # GreptimeDB, refuses duplicate projection names)
        outputs = [expr for p in parts for _alias, expr in p.outputs]
        query = sql.SQL("SELECT k, {g}{o} FROM {s} GROUP BY k, {g}{h}").format(
            g=group,
            o=sql.SQL("").join(
                sql.SQL(", {} AS {}").format(e, sql.Identifier(f"v{i}")) for i, e in enumerate(outputs)
            ),
            s=self._by_step(t, (*keys, *reads), edges, where),
            h=having,
        )
        found = self._fetch(query, params, doing, t.name)
        busy: dict[int, set[Any]] = {}
        for p in parts:
            if p.busy is not None:  # EmptyGPU: `node NOT IN (nodes with a worker in the window)`
                empty = sql.SQL("SELECT k, node FROM {s} GROUP BY k, node").format(
                    s=self._by_step(p.busy, ("node",), edges, sql.SQL("node IS NOT NULL"))
                )
                for k, node in self._fetch(empty, params, doing, p.busy.name):
                    busy.setdefault(int(k), set()).add(node)
        with self._malformed(doing):
            for k, *values in found:
                k = int(k)
                named = {key: _num(v) for key, v in zip(keys, values, strict=False)}
                at = len(keys)
                for p in parts:
                    row = {
                        **named,
                        **{a: _num(v) for (a, _e), v in zip(p.outputs, values[at:], strict=False)},
                    }
                    at += len(p.outputs)
                    if not p.fires(row):  # a NaN or ±Infinity is None here (`_num`): it fires nothing
                        continue
                    if p.busy is not None:  # NULL passes `NOT IN` only an empty list
                        others = busy.get(k, set())
                        if row["node"] in others or (row["node"] is None and others):
                            continue
                    yield p, (k, row)

    @staticmethod
    def _by_step(
        t: TableInfo, columns: Sequence[str], edges: Sequence[str], where: sql.Composable | None = None
    ) -> sql.Composed:
        """`(…) s`: the span's rows with the evaluation `k` of each window they fall in (see alert_history).

        `edges` name the bound edge instants (now − m·interval, m ≥ 1): the rows there come again
        with k − 1. Plain arithmetic on `date_part('epoch', ts)`, `floor`, `IN (…)` and UNION ALL:
        no `generate_series`, `date_bin`, window functions, interval arithmetic or `VALUES` lists.
        """
        # 0.1 ms of slack: the epoch of a nanosecond column is a rounded double (see alert_histories)
        k = sql.SQL("floor((%(now_s)s - date_part('epoch', {ts}) + 0.0001) / %(iv)s)").format(ts=t.ts)
        cond = Store._window(t, upper="<=")
        if where is not None:
            cond = sql.SQL("{} AND {}").format(cond, where)
        cols = sql.SQL("").join(sql.SQL(", {}").format(sql.Identifier(c)) for c in columns)
        on_edge = sql.SQL("{ts} IN ({e})").format(ts=t.ts, e=sql.SQL(", ").join(map(sql.Placeholder, edges)))
        return sql.SQL(
            "(SELECT {k} AS k{c} FROM {t} WHERE {w} UNION ALL SELECT {k} - 1 AS k{c} FROM {t} WHERE {w} AND {e}) s"
        ).format(k=k, c=cols, t=t.ident, w=cond, e=on_edge)

    def _alert_table(self, rule: str, name: str, columns: Sequence[str]) -> TableInfo:
        """The rule's table, or NoData when it or a column it reads is absent (SourceError: not numbers)."""
        table = self.tables().get(name)
        if table is None:
            self._tables = None  # detect again next time (a table appears with its first write)
            raise NoData(
                f"{rule}: table {name} does not exist (written by {_WRITER.get(name, 'TensorFusion')})"
            )
        if not table.time:
            raise NoData(f"{rule}: table {name} has no time column ({' or '.join(TIME_COLUMNS)})")
        for column in columns:
            if not table.has(column):
                raise NoData(f"{rule}: column {name}.{column} does not exist (never written)")
            dtype = table.columns[column]
            if column not in _TEXT_COLUMNS and not _NUMERIC_TYPE.search(dtype):
                raise SourceError(
                    f"metrics store {self._where}: {name}.{column} holds {dtype}, not numbers — "
                    "malformed values; recreate the table from TensorFusion's schema"
                )
        return table


def alert_row_key(row: AlertRow) -> tuple[str, ...]:
    """Alert rows are ordered by their text columns (the group keys), whatever the engine returned."""
    return tuple(v for v in row.values() if isinstance(v, str))
