"""The connection to GreptimeDB: DSN, pool, errors, schema detection and the query helpers."""

from __future__ import annotations

import ipaddress
import logging
import math
import os
import re
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Final, Self

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from tftui.model import redact
from tftui.model.redact import dsn_secrets
from tftui.sources.greptime.deadline import GRACE, QUERY_TIMEOUT, Deadline, keepalive_kwargs, server_timed_out
from tftui.sources.ports import SourceError

DSN_ENV: Final = "TFTUI_METRICS_DSN"
TIME_COLUMNS: Final = ("ts", "greptime_timestamp")  # preference order (M1)
DEFAULT_LOOKBACK: Final = timedelta(minutes=5)

# psycopg_pool logs reconnect failures as warnings; without a handler Python would print them on
# stderr over the console. Errors reach the user as SourceError instead.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())


_TEXT_COLUMNS: Final = frozenset({"node", "pool", "uuid", "namespace", "workload", "worker", "pod_name"})
_NUMERIC_TYPE = re.compile(
    r"\b(u?int\d*|bigint|smallint|integer|tinyint|float\d*|double|real|numeric|decimal|number)\b", re.I
)

_WRITER: Final[Mapping[str, str]] = {
    "tf_node_metrics": "the TensorFusion controller (vector sidecar of the operator pod)",
    "tf_worker_resources": "the TensorFusion controller (vector sidecar of the operator pod)",
    "tf_system_metrics": "the TensorFusion controller (vector sidecar of the operator pod)",
    "tf_gpu_usage": "the hypervisor on each GPU node (its vector sidecar must be enabled)",
    "tf_worker_usage": "the hypervisor on each GPU node (its vector sidecar must be enabled)",
}


def dsn_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """The DSN from `TFTUI_METRICS_DSN`, or None when unset/blank (the CLI flag takes precedence)."""
    value = (os.environ if env is None else env).get(DSN_ENV, "").strip()
    return value or None


@dataclass(frozen=True, slots=True)
class TableInfo:
    """A detected `tf_*` table: where it lives, its time column, its columns → data type."""

    schema: str
    name: str
    time: str
    columns: Mapping[str, str]

    @property
    def ident(self) -> sql.Identifier:
        return sql.Identifier(self.schema, self.name)

    @property
    def ts(self) -> sql.Identifier:
        return sql.Identifier(self.time)

    def has(self, column: str) -> bool:
        return column in self.columns


def _ms(dt: datetime) -> datetime:
    """`dt` floored to whole milliseconds: GreptimeDB reads `'…'::timestamp` at that precision, so
    every bound and `now` is sent as it will be read (a replay's edges and `k` then agree)."""
    return dt.replace(microsecond=dt.microsecond // 1000 * 1000)


def _naive_utc(dt: datetime) -> datetime:
    """Bound as `'…'::timestamp` (whole milliseconds): sessions run in UTC."""
    dt = _ms(dt)
    return dt.replace(tzinfo=None) if dt.tzinfo is None else dt.astimezone(UTC).replace(tzinfo=None)


def _aware(dt: datetime) -> datetime:
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def _f(value: Any) -> float:
    """Numbers arrive as float, int or Decimal (sum of bigint, UInt64); NULL → 0."""
    if value is None:
        return 0.0
    return float(value) if isinstance(value, (int, float, Decimal)) else float(str(value))


def _opt(value: Any) -> float | None:
    """A value, or None for NULL and for a non-finite one: a NaN or ±Infinity in a table (a writer's
    division by zero) is no sample, never a figure a decision or a JSON document could carry."""
    if value is None:
        return None
    number = _f(value)
    return number if math.isfinite(number) else None


def _num(value: Any) -> Any:
    """A value of a raw or alert row: Decimal → float/int, so they compare and serialise like the
    simulator's; a NaN or ±Infinity → None (no sample, as `_opt`)."""
    if type(value) is float:
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        if not value.is_finite():
            return None
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _lookup(hosts: Sequence[str], done: threading.Event) -> None:
    for host in hosts:
        with suppress(OSError):  # the driver says why, in its words
            socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP, type=socket.SOCK_STREAM)
    done.set()


def _one_line(text: str) -> str:
    return " ".join(text.split())


class Store:
    """The connection half of `GreptimeMetrics`: DSN, pool, errors, table detection, query helpers.

    The pool is opened on first use, after a probe connection has proven the DSN works — so a bad
    DSN fails fast with the server's reason instead of a pool timeout. `gpu_capacity` (GPU name →
    (TFLOPS, VRAM bytes)) is only needed by `latest_worker_usage` to derive TFLOPS. No exchange with
    the server waits longer than `query_timeout` (plus `deadline.GRACE` for a server that does not
    answer at all): a store that hangs is an error, never a hung command or daemon tick.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool_size: int = 4,
        connect_timeout: float = 5,
        query_timeout: float = QUERY_TIMEOUT,
        gpu_capacity: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        dsn = dsn or dsn_from_env()
        if not dsn:
            raise SourceError(f"no metrics store configured: pass --metrics-dsn or set {DSN_ENV}")
        if not query_timeout > 0:
            raise SourceError(f"metrics query timeout must be positive, got {query_timeout:g} s")
        secrets = dsn_secrets(dsn)
        redact.register(*secrets)  # masked in every later message and log line, whoever writes it
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.Error as exc:  # the driver's text may quote the DSN: never echo it
            message = redact.scrub(_one_line(str(exc)), *secrets)
            raise SourceError(f"invalid metrics DSN: {message}") from None
        hosts = [h for h in str(params.get("host") or "").split(",") if h]
        if any("@" in h for h in hosts):
            # the driver splits user info at the first "@": the rest of a password holding a raw "@"
            # became the host, and would be looked up in DNS and printed in the error
            raise SourceError(
                "invalid metrics DSN: its host contains '@' — write an '@' in the user or password as %40"
            )
        self._dsn = dsn
        # the names the driver looks up in DNS (not a socket directory, an address, or a hostaddr)
        self._names = (
            ()
            if params.get("hostaddr")
            else tuple(h for h in hosts if not h.startswith("/") and not _is_ip(h))
        )
        self._secret = str(params.get("password") or "")
        self._secrets = (*secrets, self._secret)
        redact.register(self._secret)
        host = str(params.get("host") or params.get("hostaddr") or "localhost")
        self._where = (
            f"{host}:{params.get('port') or 5432}/{params.get('dbname') or params.get('user') or ''}"
        )
        self._dbname = str(params.get("dbname") or "")
        self._user = str(params.get("user") or "")
        self._pool_size = max(1, pool_size)
        self._timeout = float(connect_timeout)
        self.query_timeout = float(query_timeout)
        self.gpu_capacity: Mapping[str, tuple[float, float]] = dict(gpu_capacity or {})
        self._pool: ConnectionPool | None = None
        self._lookup: threading.Event | None = None  # the last DNS lookup; set once it answered
        self._tables: dict[str, TableInfo] | None = None
        self._lock = threading.Lock()
        self._active: set[Deadline] = set()  # the exchanges in flight (`interrupt`)
        self._active_lock = threading.Lock()  # not `_lock`: `_open` holds that while it configures
        self._interrupted = False

    # -- lifecycle -------------------------------------------------------------------------------

    def describe(self) -> str:
        """`greptime host:port/db`, plus the detected time column(s) once known (M1)."""
        text = f"greptime {self._where}"
        if self._tables:
            cols = sorted({t.time for t in self._tables.values() if t.time})
            if len(cols) == 1:
                text += f" (time column {cols[0]})"
            else:
                text += (
                    " (time columns "
                    + ", ".join(f"{n}.{t.time}" for n, t in sorted(self._tables.items()) if t.time)
                    + ")"
                )
        return text

    def close(self) -> None:
        """Close the pool (idempotent); a later query reopens it."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect_kwargs(self) -> dict[str, Any]:
        return {
            "autocommit": True,
            "cursor_factory": psycopg.ClientCursor,
            "connect_timeout": max(1, round(self._timeout)),
            **keepalive_kwargs(self.query_timeout + GRACE),
        }

    @contextmanager
    def _answering(self, conn: psycopg.Connection[Any], doing: str, table: str = "") -> Iterator[Deadline]:
        """The block's exchanges with the server, within the client's deadline (`deadline`): a
        connection cut there is one SourceError saying the store did not answer (or that
        `interrupt` cut it)."""
        if self._interrupted:
            raise self._stopping_error(doing)
        deadline = Deadline(conn, self.query_timeout + GRACE)
        with self._active_lock:
            self._active.add(deadline)
        try:
            with deadline:
                yield deadline
        except psycopg.OperationalError:
            if deadline.fired:
                raise (
                    self._stopping_error(doing) if self._interrupted else self._no_answer(doing, table)
                ) from None
            raise
        finally:
            with self._active_lock:
                self._active.discard(deadline)

    def interrupt(self) -> None:
        """Cut every exchange in flight and refuse new ones: the process is stopping, and a query
        that waits on a slow store must not hold its stop (up to the query limit)."""
        with self._active_lock:
            self._interrupted = True
            active = list(self._active)
        for deadline in active:
            deadline.cut()

    def _stopping_error(self, doing: str) -> SourceError:
        return SourceError(f"metrics store {self._where}: interrupted while {doing}: tftui is stopping")

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """UTC, and the server's own limit on each statement (`deadline`; whole milliseconds, as
        both PostgreSQL and GreptimeDB read a bare number). GreptimeDB before v0.9 refuses a SET of
        a variable it does not know (0A000): the client's deadline is then the only limit."""
        with self._answering(conn, "connecting"):
            conn.execute("SET TIME ZONE 'UTC'")
            with suppress(psycopg.errors.FeatureNotSupported):
                conn.execute(f"SET statement_timeout = {max(1, round(self.query_timeout * 1000))}")

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """The pool's check of a connection it hands out, within the deadline too (a failed check
        makes the pool discard the connection and take another)."""
        with Deadline(conn, self.query_timeout + GRACE):
            ConnectionPool.check_connection(conn)

    def _resolve_within_timeout(self) -> None:
        """The driver's connect timeout starts after its DNS lookup, which a resolver that does not
        answer holds for tens of seconds (the daemon's loop and its SIGTERM with it). Look the hosts
        up first, in a thread, for at most the timeout. The driver then looks them up again: a
        caching resolver answers at once, any other as fast as it just did (within the timeout).
        While a lookup is still unanswered, the next attempt fails at once rather than start (and
        wait for) another."""
        pending = self._names
        if not pending:
            return
        done = self._lookup
        if done is None or done.is_set():
            done = self._lookup = threading.Event()
            threading.Thread(
                target=_lookup, args=(pending, done), name="tftui-metrics-dns", daemon=True
            ).start()
            done.wait(self._timeout)
        if not done.is_set():
            raise SourceError(
                f"metrics store {self._where}: cannot connect (no DNS answer for "
                f"{', '.join(pending)} within {self._timeout:g} s) — check the host in --metrics-dsn "
                "and the resolver"
            )

    def _open(self) -> ConnectionPool:
        """Probe, detect the tables on the probe connection, then open the pool (first use only)."""
        with self._lock:
            if self._pool is not None:
                return self._pool
            self._resolve_within_timeout()
            try:
                with psycopg.connect(self._dsn, **self._connect_kwargs()) as probe:
                    self._configure(probe)
                    if self._tables is None:
                        with self._answering(probe, "reading information_schema.columns"):
                            self._tables = self._detect(probe)
            except psycopg.Error as exc:
                raise self._error(exc, "connecting") from None
            pool: ConnectionPool = ConnectionPool(
                self._dsn,
                min_size=1,
                max_size=self._pool_size,
                kwargs=self._connect_kwargs(),
                configure=self._configure,
                check=self._check,
                timeout=self._timeout,
                name="tftui-metrics",
                open=False,
            )
            pool.open(wait=False)
            self._pool = pool
            return pool

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; the pool discards it on return if it broke."""
        pool = self._pool or self._open()
        try:
            conn = pool.getconn(timeout=self._timeout)
        except PoolTimeout:
            raise self._unreachable() from None
        try:
            yield conn
        finally:
            pool.putconn(conn)

    def _unreachable(self) -> SourceError:
        """The pool could not deliver: ask the server directly why, for a precise message."""
        try:
            self._resolve_within_timeout()
        except SourceError as exc:
            return exc
        try:
            with psycopg.connect(self._dsn, **self._connect_kwargs()):
                pass
        except psycopg.Error as exc:
            return self._error(exc, "connecting")
        return SourceError(
            f"metrics store {self._where}: no free connection after {self._timeout:g} s "
            f"(pool of {self._pool_size}) — the store is overloaded; retry or raise the pool size"
        )

    # -- errors ----------------------------------------------------------------------------------

    def _no_answer(self, doing: str, table: str = "") -> SourceError:
        subject = f" ({table})" if table else ""
        return SourceError(
            f"metrics store {self._where}: no result within {self.query_timeout:g} s while {doing}{subject} "
            "— the store is overloaded or unreachable; retry, or allow longer with --metrics-timeout"
        )

    def _scrub(self, text: str) -> str:
        return redact.scrub(_one_line(text), *self._secrets)

    def _error(self, exc: BaseException, doing: str, table: str = "") -> SourceError:
        """One line: which store, what failed, what to do. Never the password, never a traceback."""
        raw = str(exc)
        first = self._scrub(raw.splitlines()[0] if raw.strip() else type(exc).__name__)
        first = first.removeprefix("connection failed: ")
        low = raw.lower()
        where = f"metrics store {self._where}"
        subject = f" ({table})" if table else ""
        if server_timed_out(exc):
            return self._no_answer(doing, table)
        if isinstance(exc, psycopg.OperationalError) and doing == "connecting":
            if "authentication" in low or "password" in low:
                user = f' for user "{self._user}"' if self._user else ""
                return SourceError(
                    f"{where}: password authentication failed{user} — check the user and password "
                    f"in --metrics-dsn or {DSN_ENV}"
                )
            if "database" in low and (
                "does not exist" in low or "not found" in low
            ):  # PostgreSQL, GreptimeDB
                return SourceError(
                    f'{where}: database "{self._dbname}" does not exist — TensorFusion writes its '
                    "metrics to GreptimeDB database `public`; fix the database name in the DSN"
                )
            if "timeout" in low or "timed out" in low:
                return SourceError(
                    f"{where}: no answer within {self._timeout:g} s — is GreptimeDB up and its "
                    "PostgreSQL port (default 4003) reachable from here?"
                )
            if "refused" in low or "could not" in low or "no route" in low or "name or service" in low:
                reason = "connection refused" if "refused" in low else first
                return SourceError(
                    f"{where}: cannot connect ({reason}) — is GreptimeDB running and its "
                    "PostgreSQL port (default 4003) reachable from here?"
                )
            return SourceError(f"{where}: cannot connect: {first} — check --metrics-dsn or {DSN_ENV}")
        if isinstance(exc, psycopg.OperationalError):
            return SourceError(f"{where}: connection lost while {doing}{subject}: {first} — retry")
        if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedColumn):
            self._tables = None  # the schema changed under us: detect again next time
            return SourceError(f"{where}: {first} while {doing}{subject} — the table changed; retry")
        if isinstance(
            exc,
            psycopg.DataError | psycopg.errors.UndefinedFunction | psycopg.errors.DatatypeMismatch,
        ):
            return SourceError(
                f"{where}: malformed values while {doing}{subject}: {first} — the table holds "
                "values of the wrong type; recreate it from TensorFusion's schema"
            )
        return SourceError(f"{where}: query failed while {doing}{subject}: {first}")

    # -- schema detection (M1) -------------------------------------------------------------------

    def _detect(self, conn: psycopg.Connection[Any]) -> dict[str, TableInfo]:
        """`tf_*` tables of the metrics schema, each with its time column (M1).

        GreptimeDB marks its time index `semantic_type = 'TIMESTAMP'` in information_schema.columns:
        where that column exists, it names the time column whatever its name. PostgreSQL has no such
        column; there (and for a table without a marked column) the time column is found by name.
        `SELECT *` tells which of the two it is from the result's columns, in one round trip.
        """
        with conn.cursor() as cur:
            cur.execute("SELECT * FROM information_schema.columns WHERE table_name LIKE %(p)s", {"p": "tf_%"})
            names = [d.name for d in cur.description or ()]
            rows = cur.fetchall()
        at = {n: i for i, n in enumerate(names)}
        semantic = at.get("semantic_type")
        by_schema: dict[str, dict[str, dict[str, str]]] = {}
        marked: dict[tuple[str, str], str] = {}
        for row in rows:
            schema, table, column = (
                str(row[at["table_schema"]]),
                str(row[at["table_name"]]),
                str(row[at["column_name"]]),
            )
            by_schema.setdefault(schema, {}).setdefault(table, {})[column] = str(row[at["data_type"]]).lower()
            if semantic is not None and str(row[semantic]).upper() == "TIMESTAMP":
                marked[(schema, table)] = column
        # GreptimeDB: schema = the database in the DSN; PostgreSQL: `public` inside that database
        for schema in (self._dbname, "public", *sorted(by_schema)):
            if schema in by_schema:
                break
        else:
            return {}
        tables: dict[str, TableInfo] = {}
        for name, columns in by_schema[schema].items():
            time = marked.get((schema, name)) or next((c for c in TIME_COLUMNS if c in columns), "")
            tables[name] = TableInfo(schema, name, time, columns)  # time "": none, said on use
        return tables

    def tables(self) -> Mapping[str, TableInfo]:
        """Detected tables (connects on first use); raises SourceError when unreachable."""
        if self._tables is None:
            if self._pool is None:
                self._open()
            if self._tables is None:
                with self._connection() as conn:
                    try:
                        with self._answering(conn, "reading information_schema.columns"):
                            self._tables = self._detect(conn)
                    except psycopg.Error as exc:
                        raise self._error(exc, "reading information_schema.columns") from None
        return self._tables or {}

    def _require(self, name: str, columns: Sequence[str], optional: Sequence[str] = ()) -> TableInfo:
        """The table, checked: present, with a time column, the columns, numeric where they must be."""
        tables = self.tables()
        table = tables.get(name)
        if table is None:
            # detect again next time: GreptimeDB creates a table on its first write, so a store
            # that was empty (or half set up) when first asked must not stay "without tables"
            self._tables = None
            writer = _WRITER.get(name, "TensorFusion")
            raise SourceError(
                f"metrics store {self._where}: table {name} not found — it is written by {writer}; "
                "check the database name in the DSN (GreptimeDB `public`) and that metrics are shipped"
            )
        if not table.time:
            raise SourceError(
                f"metrics store {self._where}: table {name} has no time column "
                f"({' or '.join(TIME_COLUMNS)}) — not TensorFusion's schema (see docs/behaviour.md M12)"
            )
        for column in columns:
            if not table.has(column):
                raise SourceError(
                    f"metrics store {self._where}: table {name} has no column {column} — not "
                    "TensorFusion's schema (see docs/behaviour.md M12); check the TensorFusion version or "
                    "recreate the table"
                )
        for column in (*columns, *optional):
            dtype = table.columns.get(column)
            if dtype is not None and column not in _TEXT_COLUMNS and not _NUMERIC_TYPE.search(dtype):
                raise SourceError(
                    f"metrics store {self._where}: {name}.{column} holds {dtype}, not numbers — "
                    "malformed values; recreate the table from TensorFusion's schema"
                )
        return table

    # -- queries ---------------------------------------------------------------------------------

    def _run(
        self, query: sql.Composed, params: Mapping[str, Any], doing: str, table: str
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Column names and rows of one query; every failure becomes one SourceError line."""
        try:
            with self._connection() as conn, conn.cursor() as cur, self._answering(conn, doing, table):
                cur.execute(query, params)
                return [d.name for d in cur.description or ()], cur.fetchall()
        except SourceError:
            raise
        except psycopg.Error as exc:
            raise self._error(exc, doing, table) from None
        except (ValueError, ArithmeticError) as exc:  # a value the type loaders could not parse
            raise SourceError(
                f"metrics store {self._where}: malformed values while {doing} ({table}): "
                f"{self._scrub(str(exc))}"
            ) from None

    def _fetch(
        self, query: sql.Composed, params: Mapping[str, Any], doing: str, table: str
    ) -> list[tuple[Any, ...]]:
        return self._run(query, params, doing, table)[1]

    @contextmanager
    def _malformed(self, doing: str) -> Iterator[None]:
        """Values the finishing arithmetic cannot use become one SourceError line, not a traceback."""
        try:
            yield
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise SourceError(
                f"metrics store {self._where}: malformed values while {doing}: {self._scrub(str(exc))}"
            ) from None

    @staticmethod
    def _window(table: TableInfo, *, upper: str = "<", alias: str | None = None) -> sql.Composed:
        """`<ts> >= %(start)s AND <ts> < %(end)s` (or `<=` for alert windows), `alias.<ts>` if given."""
        ts = sql.Identifier(alias, table.time) if alias else table.ts
        return sql.SQL("{ts} >= %(start)s AND {ts} " + upper + " %(end)s").format(ts=ts)


def _div(a: float, b: float) -> float:
    return a / b if b else 0.0


def finite(expr: sql.Composable) -> sql.Composable:
    """`expr`, NULL where it is a NaN or ±Infinity (a writer's division by zero): no sample, as a
    NULL is, for every aggregate and filter over it. Both engines order NaN above every number, so
    `BETWEEN` is false for it."""
    return sql.SQL("CASE WHEN {e} BETWEEN -1e308 AND 1e308 THEN {e} END").format(e=expr)


def capacity_case(gpu_tflops: Iterable[tuple[str, float]], params: dict[str, Any]) -> sql.Composable:
    """`CASE WHEN uuid IN (…) THEN c … END` over the GPUs of known (positive) TFLOPS, grouped by
    value, with its parameters added to `params`; NULL for any other GPU (unknown is no sample)."""
    by_cap: dict[float, list[str]] = {}
    for gpu, cap in gpu_tflops:
        if cap > 0:
            by_cap.setdefault(float(cap), []).append(gpu)
    if not by_cap:
        return sql.SQL("nullif(0.0, 0.0)")  # a typed NULL
    whens = []
    for i, (cap, gpus) in enumerate(sorted(by_cap.items())):
        names = [f"g{i}_{j}" for j in range(len(gpus))]
        params.update(zip(names, gpus, strict=True))
        params[f"c{i}"] = cap
        whens.append(sql.SQL("WHEN uuid IN ({}) THEN {}").format(
            sql.SQL(", ").join(sql.Placeholder(n) for n in names), sql.Placeholder(f"c{i}")))  # fmt: skip
    return sql.SQL("CASE {} END").format(sql.SQL(" ").join(whens))
