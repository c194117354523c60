"""Metrics from GreptimeDB over its PostgreSQL wire protocol (docs/behaviour.md M1–M12).

`GreptimeMetrics` answers the reference page's four step-1 queries and the 15 built-in alert rules
(M5, M8; replayed over a span in a few queries per table) with SQL that aggregates in the
database; Python only finishes what needs the GPU capacities the tables lack (TFLOPS from
compute %, VRAM % from bytes). The code is split by what it reads: `store` (connection, errors,
detection), `step1`, `alerts`, `usage` (latest samples, autoscale histograms, raw rows) and
`objhistory` (a node's or a GPU's bucketed allocated and used TFLOPS for the console's sparklines).

Every query is tested on PostgreSQL and on a GreptimeDB-dialect server (DataFusion, GreptimeDB's
engine, behind pgwire), which refuses what GreptimeDB refuses: two output expressions of one name
(every output is aliased), and reads `'…'::timestamp` at millisecond precision (`now` and every
bound are floored to whole milliseconds before they are sent).

Why it is written the way it is:

- **Time column (M1).** Current upstream tables use `ts`; the reference page (and newer GreptimeDB
  line-protocol ingestion) writes `greptime_timestamp`. The column is found per table on first use
  from `information_schema.columns`: the one GreptimeDB marks `semantic_type = 'TIMESTAMP'` (its
  time index, whatever its name) where that column exists; by name on PostgreSQL, which has none.
- **Bound values, composed identifiers.** Every value (window start/end, thresholds, names) is a
  bound parameter; identifiers (schema, table, the detected time column) are composed with
  `psycopg.sql.Identifier`. Nothing is formatted into SQL text by hand, so a workload called
  `'; DROP TABLE tf_worker_usage; --` is just a string.
- **Client-side binding.** Cursors are `psycopg.ClientCursor`: psycopg merges the escaped literals
  itself and sends one simple-protocol query. GreptimeDB's extended protocol has had parameter-type
  bugs (int4/int8/float8 OIDs rejected at Parse, greptimedb#8050; binary date params hanging,
  #7819), which this sidesteps. Times are sent as naive UTC `'…'::timestamp` literals (sessions run
  `SET TIME ZONE 'UTC'`); `::timestamptz` is avoided.
- **Grouping.** The page groups workloads by `workload` only; the same name in two namespaces is two
  workloads, so every query here groups by `namespace, workload`.
- **Partial aggregates.** Averages are `sum(x)` and `count(x)` (cheaper than `avg`, and exactly
  SQL's NULL-ignoring average once divided). Query 3 is grouped per worker and query 4 per
  (namespace, workload, GPU) in SQL; Python adds up those few thousand rows. That keeps "average
  over rows" semantics without `count(DISTINCT …)` (which forces a sort in PostgreSQL) and lets
  TFLOPS follow the data per (workload, GPU): `compute_tflops` where it is written (non-zero in the
  window), compute % × capacity where it is all zero (upstream writes 0 when its device plugin
  reports no TFLOPS). GPUs missing from the caller's capacities (released with their node, or no
  cluster) take theirs from `tf_gpu_metrics`, read only when there is such a GPU.

- **Concurrency.** `step1`'s four scans are independent and run at once on the pool's
  connections, so the store keeps its cores busy while one query is in a serial phase.
- **Autoscale history in the store (A12).** `usage_histograms` returns the decaying-histogram
  sums per (worker, TFLOPS bucket) instead of one row per sample. It needs `date_part('epoch', …)`,
  `power`, `ln`, `floor`, `nullif`, `coalesce`, `CASE` and `IN (…)` lists, all in GreptimeDB's
  (DataFusion's) function set; `least`/`greatest` are avoided (the bucket clamp is done in Python).

- **Alert replay in a few queries (M8).** `alert_histories` evaluates rules at every instant
  of their grid at once. Rules reading the same table at the same instants (the three GPU rules,
  the seven node/pool allocation rules) share a *family*: one probe of the last window (a rule
  with nothing to read now is not replayed), one count per evaluation (NoData of an empty window)
  and one rows query per set of group keys computing every live rule's aggregate. Each row is
  tagged with its evaluation `k = floor((now − epoch(ts)) / interval)` and rows on a window edge
  (`ts IN (…)` the bound edge instants) are repeated with `k − 1` by a UNION ALL branch, since both
  ends of a window are included (`k` gets 0.1 ms of slack: the epoch of a nanosecond time index is
  a rounded double in DataFusion). A rule's row filter becomes a CASE inside its aggregate and its
  HAVING is re-tested per rule in Python on the returned values. Families run at once on the pool.
  Avoided for it: `generate_series`, `date_bin`/`RANGE … ALIGN`, window
  functions, interval arithmetic, `VALUES` lists and joins against a grid of instants.

GreptimeDB SQL features deliberately avoided (M9):

- `HAVING <select alias>` (upstream's rules rely on it; GreptimeDB accepts both forms, PostgreSQL
  only the repeated expression) → the expression is repeated.
- `DISTINCT ON`, `LATERAL`, window functions for "latest per series" → a `max(ts)` sub-select join,
  with the time window on both sides (the outer side would scan the whole retention).
- `RANGE … ALIGN`, `TQL`, `date_bin` without origin, `now()` in queries (the window comes from the
  caller, so tests and the simulator agree), interval arithmetic and timestamp − timestamp (#5911),
  `::timestamptz`, `E'…'` strings, `= ANY(array)`, `count(DISTINCT …)`, server-side cursors
  (`DECLARE`), transactions (connections are `autocommit`), prepared statements.
- naming `information_schema.columns.semantic_type` (absent in PostgreSQL): `SELECT *` tells.

Errors: anything the server or network does wrong becomes one `SourceError` line naming the store
(host:port/database, never the password), the table/column involved, and what to do.
"""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

from tftui.sources.greptime.alerts import RULES, AlertQueries, RuleSpec, alert_row_key
from tftui.sources.greptime.objhistory import ObjectHistoryQueries
from tftui.sources.greptime.step1 import Step1Queries
from tftui.sources.greptime.store import (
    _WRITER,
    DSN_ENV,
    TIME_COLUMNS,
    TableInfo,
    _f,
    _naive_utc,
    _num,
    dsn_from_env,
)
from tftui.sources.greptime.usage import UsageQueries

__all__ = [
    "DSN_ENV",
    "RULES",
    "TIME_COLUMNS",
    "_WRITER",
    "GreptimeMetrics",
    "RuleSpec",
    "TableInfo",
    "_f",
    "_naive_utc",
    "_num",
    "alert_row_key",
    "dsn_from_env",
]


class GreptimeMetrics(Step1Queries, AlertQueries, UsageQueries, ObjectHistoryQueries):
    """`Step1Port` and `MetricsPort` over GreptimeDB (or any PostgreSQL with the same tables).

    The pool is opened on first use, after a probe connection has proven the DSN works — so a bad
    DSN fails fast with the server's reason instead of a pool timeout. `gpu_capacity` (GPU name →
    (TFLOPS, VRAM bytes)) is only needed by `latest_worker_usage` to derive TFLOPS.
    """

    REMOTE: ClassVar[bool] = True
    """Reads wait on a server over the network: the console reads them outside its cluster lock."""
    INGEST_LAG: ClassVar[timedelta] = timedelta(seconds=60)
    """How long after its timestamp a row may still reach the store: the hypervisor appends it to a
    file and a Vector sidecar ships the file in batches. An incremental usage load stops this long
    before now (`runtime.history.settled`), so a row that arrives late is read by the next load
    instead of never."""
