"""The query side of the GreptimeDB-dialect server: databases of Arrow tables, planned by DataFusion.

A *database* is a GreptimeDB schema of catalog `greptime` (the DSN's dbname, `public` by default);
each has its own DataFusion `SessionContext` (default catalog/schema `greptime.<db>`, the
PostgreSQL SQL dialect) in which its tables are registered as in-memory record batches, plus an
`information_schema.columns` table in GreptimeDB's shape (see `_COLUMNS_SCHEMA`).

Every statement goes through `execute`: GreptimeDB's canned answers (sqltext.fixture), `SET`
(the time zone: only UTC is modelled, as GreptimeDB's default; `statement_timeout`, enforced as
GreptimeDB does on its PostgreSQL port), then GreptimeDB's text rewrites
(sqltext.rewrite) and DataFusion's planner and executor. DataFusion's errors come back with the
SQLSTATE GreptimeDB maps its status codes to (src/servers/src/postgres/types/error.rs): a table
not found 42P01, a syntax error 42601, any other planning or execution error P0000.

Results are encoded as GreptimeDB's pgwire layer does (types.rs `type_gt_to_pg`): strings VARCHAR,
Int64 INT8, UInt64 NUMERIC, Float64 FLOAT8, timestamps TIMESTAMP (text with microseconds).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from datafusion import SessionConfig, SessionContext

from tests.greptime_dialect.sqltext import fixture, rewrite
from tests.greptime_dialect.tables import SQL_TYPES, Column, TableSchema

__all__ = ["CATALOG", "DialectError", "Engine", "Result", "Session"]

CATALOG: Final = "greptime"

# pg type OIDs
BOOL, INT2, INT4, INT8, FLOAT4, FLOAT8 = 16, 21, 23, 20, 700, 701
VARCHAR, TIMESTAMP, DATE, INTERVAL, NUMERIC, UNKNOWN = 1043, 1114, 1082, 1186, 1700, 705


class DialectError(Exception):
    """An error to send as ErrorResponse: SQLSTATE and message (and severity)."""

    def __init__(self, code: str, message: str, severity: str = "ERROR") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.severity = severity


@dataclass(slots=True)
class Session:
    """One connection's state: its database and the notices to send with the next answer."""

    database: str
    timezone: str = "UTC"
    notices: list[str] = field(default_factory=list)
    timeout_ms: int = 0  # `SET statement_timeout`; 0: none


@dataclass(frozen=True, slots=True)
class Stall:
    """A test's hold on the queries that name a table (`Engine.stall`): they wait until `released`;
    with `honour_timeout` the session's statement timeout ends the wait as GreptimeDB's does (an
    overloaded store), without it nothing does (a wedged server). `entered` is set once a query
    waits."""

    released: threading.Event
    honour_timeout: bool
    entered: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True, slots=True)
class Result:
    """`fields` (name, type OID) and text-encoded `rows` for a query; just `tag` for a command."""

    tag: str
    fields: tuple[tuple[str, int], ...] | None = None
    rows: tuple[tuple[bytes | None, ...], ...] = ()


_COLUMNS_SCHEMA: Final = pa.schema([
    ("table_catalog", pa.string()), ("table_schema", pa.string()), ("table_name", pa.string()),
    ("column_name", pa.string()), ("ordinal_position", pa.int64()), ("character_maximum_length", pa.int64()),
    ("character_octet_length", pa.int64()), ("numeric_precision", pa.int64()), ("numeric_scale", pa.int64()),
    ("datetime_precision", pa.int64()), ("character_set_name", pa.string()), ("collation_name", pa.string()),
    ("column_key", pa.string()), ("extra", pa.string()), ("privileges", pa.string()),
    ("generation_expression", pa.string()), ("greptime_data_type", pa.string()), ("data_type", pa.string()),
    ("semantic_type", pa.string()), ("column_default", pa.string()), ("is_nullable", pa.string()),
    ("column_type", pa.string()), ("column_comment", pa.string()), ("srs_id", pa.int64()),
])  # fmt: skip
_NUMERIC_PRECISION: Final = {"double": 53, "float": 24, "bigint": 19, "bigint unsigned": 20, "int": 10}


def _columns_row(db: str, table: str, pos: int, c: Column) -> dict[str, Any]:
    """One row of GreptimeDB's information_schema.columns (columns.rs `add_column`)."""
    is_string = c.sql_type == "string"
    prec = c.sql_type.startswith("timestamp")
    return {
        "table_catalog": CATALOG, "table_schema": db, "table_name": table, "column_name": c.name,
        "ordinal_position": pos, "character_maximum_length": 2147483647 if is_string else None,
        "character_octet_length": 2147483647 if is_string else None,
        "numeric_precision": _NUMERIC_PRECISION.get(c.sql_type), "numeric_scale": 0 if c.sql_type in (
            "bigint", "bigint unsigned", "int") else None,
        "datetime_precision": int(c.sql_type[10]) if prec else None,
        "character_set_name": "utf8" if is_string else None, "collation_name": "utf8_bin" if is_string else None,
        "column_key": {"TAG": "PRI", "TIMESTAMP": "TIME INDEX"}.get(c.semantic, ""), "extra": "",
        "privileges": "select,insert", "generation_expression": "", "greptime_data_type": SQL_TYPES[c.sql_type][1],
        "data_type": c.sql_type, "semantic_type": c.semantic, "column_default": None,
        "is_nullable": "NO" if c.semantic == "TIMESTAMP" else "YES", "column_type": c.sql_type,
        "column_comment": None, "srs_id": None,
    }  # fmt: skip


@dataclass
class _Table:
    schema: TableSchema
    data: pa.Table


class _Database:
    def __init__(self, name: str) -> None:
        self.name = name
        cfg = (
            SessionConfig()
            .with_default_catalog_and_schema(CATALOG, name)
            .with_create_default_catalog_and_schema(True)
            .with_information_schema(False)
            .set("datafusion.sql_parser.dialect", "PostgreSQL")
        )
        self.ctx = SessionContext(cfg)
        self.ctx.sql("CREATE SCHEMA information_schema").collect()
        self.tables: dict[str, _Table] = {}
        self.columns_version = -1


_QUERY_START: Final = re.compile(r"(?is)^\s*(\(\s*)*(select|with|values|explain)\b")
_SET: Final = re.compile(
    r"(?is)^\s*set\s+(session\s+|local\s+)?(time\s+zone|timezone|time_zone)\s*(to|=)?\s*(.*?)\s*;?\s*$"
)
_OTHER_SET: Final = re.compile(r"(?is)^\s*set\s+(session\s+|local\s+)?([A-Za-z_.@]+)")
_TIMEOUT_SET: Final = re.compile(
    r"(?is)^\s*set\s+(session\s+|local\s+)?statement_timeout\s*(to|=)\s*(.*?)\s*;?\s*$"
)
_TIMEOUT_TEXT: Final = re.compile(r"^(\d+)(ms|s|min|h|d)$")
_UNIT_MS: Final = {"ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
TIMED_OUT: Final = "Canceling statement due to statement timeout"
"""GreptimeDB's message when its statement timeout ends a query (SQLSTATE 57000, `Cancelled`)."""


def _timeout_ms(value: str) -> int:
    """GreptimeDB's `set_query_timeout` on the PostgreSQL port: a bare number is milliseconds, a
    quoted one a number or a number with a unit (ms, s, min, h, d)."""
    if value.isdigit():
        return int(value)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        if inner.isdigit():
            return int(inner)
        if m := _TIMEOUT_TEXT.match(inner):
            return int(m[1]) * _UNIT_MS[m[2]]
    raise DialectError("0A000", f"Not supported: Unsupported timeout expr {value} in set variable statement")


_UTC: Final = frozenset({"utc", "'utc'", "'etc/utc'", "'+00:00'", "'+0000'", "'z'", "local", "default"})


class Engine:
    """Databases and tables (thread-safe); `execute` answers one statement of a session."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._dbs: dict[str, _Database] = {}
        self.stalls: dict[str, Stall] = {}  # table → the test's hold on queries naming it
        # variables a SET of which fails as GreptimeDB before v0.9 failed any it did not know
        self.refused_variables: set[str] = set()
        self._version = 0  # bumped on every schema change: information_schema is rebuilt lazily

    # -- set-up (the tests' side; not reachable over the wire) ----------------------------------

    def create_database(self, name: str) -> None:
        """A fresh empty database (an existing one of that name is dropped)."""
        with self._lock:
            self._dbs[name] = _Database(name)
            self._version += 1

    def has_database(self, name: str) -> bool:
        with self._lock:
            return name in self._dbs

    def _db(self, name: str) -> _Database:
        with self._lock:
            db = self._dbs.get(name)
        if db is None:
            raise DialectError("3D000", f"Database not found: {name}", "FATAL")
        return db

    def create_table(self, db_name: str, schema: TableSchema) -> None:
        db = self._db(db_name)
        with self._lock:
            self._register(db, _Table(schema, schema.arrow_schema().empty_table()))
            self._version += 1

    def drop_table(self, db_name: str, table: str) -> None:
        db = self._db(db_name)
        with self._lock:
            db.tables.pop(table)
            db.ctx.deregister_table(table)
            self._version += 1

    def table_schema(self, db_name: str, table: str) -> TableSchema:
        return self._db(db_name).tables[table].schema

    def insert_rows(
        self, db_name: str, table: str, rows: Iterable[Mapping[str, Any]], time_key: str = "ts"
    ) -> int:
        """Dict rows (the time under `time_key`), deduplicated on (tags, time) as GreptimeDB does.

        Keys that are not columns of the table are dropped: the table has what its writers emit.
        """
        db = self._db(db_name)
        with self._lock:
            t = db.tables[table]
            s = t.schema
            ts = s.time_index
            names = [c.name for c in s.columns]
            merged: dict[tuple[Any, ...], dict[str, Any]] = {}
            existing = t.data.to_pylist()
            n = 0
            fresh = (
                {c: _coerce(s, c, row.get(time_key) if c == ts else row.get(c)) for c in names}
                for row in rows
            )
            for r in (*existing, *fresh):
                stamp = r[ts]
                if isinstance(stamp, datetime) and stamp.tzinfo is not None:
                    r[ts] = stamp.astimezone(UTC).replace(tzinfo=None)
                key = (*(r[k] for k in s.tags), r[ts])
                old = merged.get(key)
                if old is not None and s.merge == "last_non_null":
                    r = {k: (v if v is not None else old[k]) for k, v in r.items()}
                merged[key] = r
                n += 1
            data = pa.Table.from_pylist(list(merged.values()), schema=s.arrow_schema())
            self._register(db, _Table(s, data))
        return n - len(existing)

    def insert_arrow(self, db_name: str, table: str, data: pa.Table) -> None:
        """Arrow data appended as it is (no deduplication: for generated data unique by construction)."""
        db = self._db(db_name)
        with self._lock:
            t = db.tables[table]
            add = data.select([c.name for c in t.schema.columns]).cast(t.schema.arrow_schema())
            self._register(db, _Table(t.schema, pa.concat_tables([t.data, add])))

    def _register(self, db: _Database, table: _Table) -> None:
        name = table.schema.name
        if name in db.tables:
            db.ctx.deregister_table(name)
        db.tables[name] = table
        data = table.data
        if data.num_rows == 0:
            partitions = [[pa.RecordBatch.from_pylist([], schema=data.schema)]]
        else:  # a few partitions, so DataFusion scans on every core
            data = data.combine_chunks()
            parts = max(1, min(4, data.num_rows // 250_000))
            step = -(-data.num_rows // parts)
            partitions = [p for p in (data.slice(i * step, step).to_batches() for i in range(parts)) if p]
        db.ctx.register_record_batches(name, partitions)

    def _information_schema(self, db: _Database) -> None:
        with self._lock:
            if db.columns_version == self._version:
                return
            rows = [
                _columns_row(d.name, t.schema.name, pos, c)
                for d in self._dbs.values()
                for t in d.tables.values()
                for pos, c in enumerate(t.schema.columns, 1)
            ]
            data = pa.Table.from_pylist(rows, schema=_COLUMNS_SCHEMA)
            with contextlib.suppress(Exception):  # not registered yet
                db.ctx.deregister_table("information_schema.columns")
            batch = data.to_batches() or [pa.RecordBatch.from_pylist([], schema=_COLUMNS_SCHEMA)]
            db.ctx.register_record_batches("information_schema.columns", [batch])
            db.columns_version = self._version

    # -- statements -------------------------------------------------------------------------------

    def execute(self, session: Session, sql: str, params: Sequence[Any] = ()) -> Result:
        """One statement of `session`; raises DialectError with GreptimeDB's SQLSTATE."""
        if (fx := fixture(sql)) is not None:
            if fx.warning:
                session.notices.append(fx.warning)
            if fx.column is not None:
                return Result("SELECT 1", ((fx.column, VARCHAR),), (((fx.value or "").encode(),),))
            return Result(fx.tag)
        if m := _SET.match(sql):
            value = m.group(4).strip()
            if value.lower() not in _UTC:
                raise DialectError(
                    "0A000", f"Unsupported time zone {value}: this test server models UTC only"
                )
            session.timezone = "UTC"
            return Result("OK 0")
        if (m := _OTHER_SET.match(sql)) and m.group(2).lower() in self.refused_variables:
            raise DialectError("0A000", f"Not supported: Unsupported set variable {m.group(2).upper()}")
        if m := _TIMEOUT_SET.match(sql):
            session.timeout_ms = _timeout_ms(m.group(3).strip())
            return Result("OK 0")
        if m := _OTHER_SET.match(sql):
            session.notices.append(f"Unsupported set variable {m.group(2).upper()}")
            return Result("OK 0")
        if not _QUERY_START.match(sql):
            raise DialectError(
                "0A000", f"not supported by the GreptimeDB-dialect test server: {sql.split()[0]}"
            )
        db = self._db(session.database)
        if "information_schema" in sql.lower():
            self._information_schema(db)
        text = rewrite(sql)
        values = {str(i): v for i, v in enumerate(params, 1)}
        started = time.monotonic()
        self._wait_for_stalls(session, sql)
        try:
            df = db.ctx.sql(text, param_values=values) if values else db.ctx.sql(text)
            batches = df.collect()
            schema = df.schema()
        except Exception as exc:
            raise _error(exc, session.database) from None
        if session.timeout_ms and time.monotonic() - started > session.timeout_ms / 1000:
            raise DialectError("57000", TIMED_OUT)  # GreptimeDB would have cancelled it by now
        try:  # a partition's batch may carry a narrower type than the plan (a CASE of ints and floats)
            table = pa.Table.from_batches([b.cast(schema) for b in batches], schema=schema)
            return _encode(table)
        except (pa.ArrowException, ValueError, TypeError) as exc:
            raise DialectError("XX000", f"Failed to encode the result: {exc}") from None

    def _wait_for_stalls(self, session: Session, sql: str) -> None:
        for table, stall in list(self.stalls.items()):
            if table not in sql:
                continue
            limit = session.timeout_ms / 1000 if stall.honour_timeout and session.timeout_ms else None
            stall.entered.set()
            if not stall.released.wait(limit):
                raise DialectError("57000", TIMED_OUT)


def _coerce(schema: TableSchema, column: str, value: Any) -> Any:
    """A written value in its column's type, as GreptimeDB's row writer stores it (bool → 'true')."""
    if value is None:
        return None
    typ = next(c.sql_type for c in schema.columns if c.name == column)
    if typ == "string" and not isinstance(value, str):
        return str(value).lower() if isinstance(value, bool) else str(value)
    if typ in ("double", "float") and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def _error(exc: BaseException, db: str) -> DialectError:
    text = " ".join(str(exc).split())
    m = re.search(r"table '([^']+)' not found", text)
    if m:
        name = m.group(1).split(".")[-1]
        return DialectError("42P01", f"Failed to plan SQL: Table not found: {CATALOG}.{db}.{name}")
    if "ParserError" in text or "SQL error" in text:
        return DialectError("42601", f"Invalid SQL syntax: {text}")
    return DialectError("P0000", f"Failed to plan or execute SQL: {text}")


def _oid(t: pa.DataType) -> int:
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return VARCHAR
    if pa.types.is_boolean(t):
        return BOOL
    if pa.types.is_floating(t):
        return FLOAT4 if t.bit_width <= 32 else FLOAT8
    if pa.types.is_integer(t):
        signed = pa.types.is_signed_integer(t)
        width = t.bit_width if signed else t.bit_width * 2  # UInt8→INT2, UInt16→INT4, UInt32→INT8
        return {16: INT2, 8: INT2, 32: INT4, 64: INT8}.get(width, NUMERIC)
    if pa.types.is_timestamp(t):
        return TIMESTAMP
    if pa.types.is_date(t):
        return DATE
    if pa.types.is_interval(t) or pa.types.is_duration(t):
        return INTERVAL
    if pa.types.is_decimal(t):
        return NUMERIC
    return UNKNOWN


def _text(col: pa.ChunkedArray) -> list[bytes | None]:
    t = col.type
    if pa.types.is_boolean(t):
        return [None if v is None else (b"t" if v else b"f") for v in col.to_pylist()]
    if pa.types.is_timestamp(t):
        if t.tz is not None:
            col = pc.cast(col, pa.timestamp(t.unit))
        col = pc.cast(col, pa.timestamp("us"), safe=False)
        return [None if v is None else v.encode() for v in pc.cast(col, pa.string()).to_pylist()]
    if pa.types.is_floating(t):
        return [None if v is None else repr(float(v)).encode() for v in col.to_pylist()]
    if pa.types.is_interval(t):
        out: list[bytes | None] = []
        for v in col.to_pylist():
            if v is None:
                out.append(None)
                continue
            secs, ns = divmod(int(v.nanoseconds), 1_000_000_000)
            h, rest = divmod(secs, 3600)
            mi, s = divmod(rest, 60)
            out.append(f"{v.months} mons {v.days} days {h:02d}:{mi:02d}:{s:02d}.{ns // 1000:06d}".encode())
        return out
    if pa.types.is_null(t):
        return [None] * len(col)
    return [None if v is None else str(v).encode() for v in col.to_pylist()]


def _encode(table: pa.Table) -> Result:
    fields = tuple((f.name, _oid(f.type)) for f in table.schema)
    columns = [_text(c) for c in table.columns]
    rows = tuple(zip(*columns, strict=True)) if columns else ()
    return Result(f"SELECT {table.num_rows}", fields, rows)
