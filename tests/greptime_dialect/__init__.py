"""A GreptimeDB-dialect test server: GreptimeDB's PostgreSQL port, with Apache DataFusion as the engine.

GreptimeDB's query engine *is* DataFusion behind the `pgwire` protocol, so a DataFusion
`SessionContext` behind a PostgreSQL-wire server, with GreptimeDB's own layers reproduced on top
(as read in GreptimeDB's source), accepts and refuses what GreptimeDB does where tftui's SQL is
concerned. PostgreSQL, the other test server, accepts much that GreptimeDB refuses.

Reproduced (module that does it):

- pgwire start-up (wire.py): SSL declined, database checked before authentication (`Database not
  found: <db>`, 3D000), cleartext password (28P01 when wrong), GreptimeDB's ParameterStatus set.
- Simple and extended query protocol (wire.py), text and binary parameters bound to DataFusion
  placeholders, the empty query answered with EmptyQueryResponse (psycopg_pool's check).
- Fixtures (sqltext.py): BEGIN/START TRANSACTION/COMMIT/ROLLBACK answered and ignored (with
  GreptimeDB's warning notice), `SHOW` of four variables, `SET TRANSACTION`; `SET TIME ZONE`.
- `SET statement_timeout` (engine.py) as GreptimeDB reads it on its PostgreSQL port (a bare number
  is milliseconds, a quoted one may carry ms/s/min/h/d); a statement that outlives it fails with
  57000 "Canceling statement due to statement timeout". Other `SET`s answer with GreptimeDB's
  "Unsupported set variable" warning; `engine.refused_variables` makes them fail (0A000) as
  GreptimeDB before v0.9 did. `DialectServer.stall` holds the queries naming a table, as an
  overloaded store (the timeout ends them) or a wedged one (nothing does) would.
- SQL rewrites (sqltext.py): `::timestamp`/`CAST(… AS TIMESTAMP)` at millisecond precision;
  interval shorthands (`'1d'::INTERVAL`, `'1h30m'`).
- DataFusion's planner and function set as they are: duplicate projection names rejected ("Projections
  require unique expression names"), no `generate_series`, `HAVING <alias>` accepted, …
- `information_schema.columns` in GreptimeDB's shape (engine.py): `data_type` in GreptimeDB's
  names (`string`, `double`, `bigint`, `bigint unsigned`, `timestamp(9)`), `greptime_data_type`,
  `semantic_type` (`TAG`, `FIELD`, `TIMESTAMP`), `column_key`, `table_schema` = database.
- Tables (tables.py) in the two shapes TensorFusion's data arrives in: created by line-protocol
  ingestion (`greptime_timestamp` TIMESTAMP(9), writers' columns only) and by upstream's migration
  DDL (`ts` TIMESTAMP(3)); rows deduplicated on (tags, time index) with the table's merge mode.
- Error SQLSTATEs as GreptimeDB maps its status codes: 42P01 table not found, 42601 syntax,
  P0000 other planning/execution errors; result types as GreptimeDB's pgwire layer sends them
  (UInt64 as NUMERIC, strings as VARCHAR, timestamps as TIMESTAMP).

Not reproduced: GreptimeDB's own SQL extensions (`RANGE … ALIGN`, TQL, `ALTER`/`CREATE TABLE`
options), its extra scalar functions, writes over SQL (data is loaded through the Python API:
`insert_rows`, `insert_arrow`), TTL, regions and storage (tables are in-memory Arrow batches),
time zones other than UTC, TLS, SCRAM, binary result columns, query cancellation, GreptimeDB's
own tables in information_schema, and the extended protocol's server-side parameter type inference
(parameters take the client's OID, timestamps at microsecond precision; GreptimeDB converts them to
the planned column's unit).
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tests.greptime_dialect.engine import Engine, Stall
from tests.greptime_dialect.tables import LAYOUTS, LINE_PROTOCOL, MIGRATION_DDL, Layout, TableSchema
from tests.greptime_dialect.wire import WireServer

__all__ = ["LAYOUTS", "LINE_PROTOCOL", "MIGRATION_DDL", "DialectServer", "Layout", "start_dialect_server"]

USER = "tftui"
PASSWORD = "tf-pw-7Qx"  # the same as the PostgreSQL server's, so the password-leak checks apply


@dataclass
class DialectServer:
    """A running server; `stop()` closes it (also registered at exit)."""

    engine: Engine
    wire: WireServer
    _stopped: bool = field(default=False, repr=False)

    @property
    def port(self) -> int:
        return self.wire.port

    def dsn(self, dbname: str, *, user: str = USER, password: str = PASSWORD, port: int | None = None) -> str:
        return (
            f"host=127.0.0.1 port={port or self.port} dbname={dbname} user={user} "
            f"password={password} connect_timeout=5"
        )

    def create_database(
        self,
        name: str,
        layout: Layout | str = LINE_PROTOCOL,
        tables: Iterable[str] | None = None,
        *,
        overrides: Mapping[str, Mapping[str, str | None]] | None = None,
        time_column: str | None = None,
    ) -> None:
        """A fresh database with `tables` of `layout` (all by default), altered by `overrides`.

        `layout` is a Layout or a time-column name (`greptime_timestamp`: line protocol, `ts`:
        migration DDL); `time_column` renames the time index (to build a table without a known one).
        """
        lay = LAYOUTS[layout] if isinstance(layout, str) else layout
        self.engine.create_database(name)
        for t in lay.tables if tables is None else tables:
            schema: TableSchema = lay.tables[t]
            if overrides and t in overrides:
                schema = schema.altered(overrides[t])
            if time_column is not None:
                schema = schema.renamed_time_index(time_column)
            self.engine.create_table(name, schema)

    def insert_rows(self, db: str, table: str, rows: Iterable[Mapping[str, Any]]) -> int:
        """Dict rows with the time under `ts` (what the simulator and the test datasets write)."""
        return self.engine.insert_rows(db, table, rows)

    def load(self, db: str, data: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, int]:
        return {table: self.insert_rows(db, table, rows) for table, rows in data.items()}

    def insert_arrow(self, db: str, table: str, data: pa.Table) -> None:
        self.engine.insert_arrow(db, table, data)

    def drop_table(self, db: str, table: str) -> None:
        self.engine.drop_table(db, table)

    @contextmanager
    def stall(self, table: str, *, honour_timeout: bool = True) -> Iterator[Stall]:
        """While inside, every query naming `table` waits: until the block ends, or (with
        `honour_timeout`) until its session's statement timeout fails it."""
        stall = Stall(threading.Event(), honour_timeout)
        self.engine.stalls[table] = stall
        try:
            yield stall
        finally:
            del self.engine.stalls[table]
            stall.released.set()

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            for stall in self.engine.stalls.values():
                stall.released.set()
            self.wire.stop()


def start_dialect_server(port: int = 0) -> DialectServer:
    """Start a server on 127.0.0.1 (a free port unless `port`); it has no database until one is created."""
    engine = Engine()
    server = DialectServer(engine, WireServer(engine, USER, PASSWORD, port).start())
    atexit.register(server.stop)
    return server
