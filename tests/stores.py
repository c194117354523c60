"""The two metrics stores every metrics test runs against, behind one set-up interface.

- `postgres`: the throwaway PostgreSQL 15 of tests/pg.py, with the superset schema of `TABLES`
  (every column of upstream's DDL and `pod_name`), time column `ts` or `greptime_timestamp`.
- `greptime`: the GreptimeDB-dialect server of tests/greptime_dialect (DataFusion behind pgwire),
  whose tables have the shape GreptimeDB gives them: `greptime_timestamp` selects the layout that
  line-protocol ingestion creates (TIMESTAMP(9), only the columns the writers emit), `ts` the
  layout of upstream's migration DDL (TIMESTAMP(3), counters, no `pod_name`).

A test asks for `store` (conftest: parametrized over both) and uses `create`/`load`/`dsn`; what
differs between the stores for a test (a column one layout lacks) it reads from `has`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any, Final, Protocol

from tests import pg
from tests.greptime_dialect import LAYOUTS, LINE_PROTOCOL, DialectServer

__all__ = ["STORES", "DialectStore", "MetricsStore", "PgStore"]

STORES: Final = ("postgres", "greptime")


class MetricsStore(Protocol):
    kind: str
    port: int

    def dsn(self, db: str, *, password: str = ...) -> str: ...

    def create(
        self,
        db: str,
        time_column: str = "ts",
        tables: Iterable[str] | None = None,
        *,
        overrides: Mapping[str, Mapping[str, str | None]] | None = None,
    ) -> None: ...

    def load(
        self, db: str, data: Mapping[str, Iterable[Mapping[str, Any]]], time_column: str = "ts"
    ) -> None: ...

    def add_tables(self, db: str, time_column: str, tables: Iterable[str]) -> None: ...

    def has(self, time_column: str, table: str, column: str) -> bool: ...

    def drop_table(self, db: str, table: str) -> None: ...

    def kill_connections(self) -> None: ...

    def hold(self, db: str, table: str) -> AbstractContextManager[None]:
        """While inside, queries that read `table` wait (an overloaded store); the server's own
        statement timeout still ends them."""
        ...


class PgStore:
    kind = "postgres"

    def __init__(self, server: pg.PgServer) -> None:
        self.server = server
        self.port = server.port

    def dsn(self, db: str, *, password: str = pg.PASSWORD) -> str:
        return self.server.dsn(db, password=password)

    def create(
        self,
        db: str,
        time_column: str = "ts",
        tables: Iterable[str] | None = None,
        *,
        overrides: Mapping[str, Mapping[str, str | None]] | None = None,
    ) -> None:
        self.server.create_database(db)
        with self.server.connect(db, user=pg.USER) as conn:
            pg.create_tables(conn, time_column, pg.TABLES if tables is None else tables, overrides=overrides)

    def load(self, db: str, data: Mapping[str, Iterable[Mapping[str, Any]]], time_column: str = "ts") -> None:
        with self.server.connect(db, user=pg.USER) as conn:
            for table, rows in data.items():
                pg.copy_rows(conn, table, rows, time_column)

    def add_tables(self, db: str, time_column: str, tables: Iterable[str]) -> None:
        with self.server.connect(db, user=pg.USER) as conn:
            pg.create_tables(conn, time_column, tables)

    def has(self, time_column: str, table: str, column: str) -> bool:
        return any(c == column for c, _t in pg.TABLES[table])

    def drop_table(self, db: str, table: str) -> None:
        with self.server.connect(db, user=pg.USER) as conn:
            conn.execute(f'DROP TABLE "{table}"')

    def kill_connections(self) -> None:
        with self.server.connect() as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'tftui'")
            for _ in range(100):  # termination is asynchronous: wait until the backends are gone
                row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = 'tftui'").fetchone()
                if row == (0,):
                    break
                import time

                time.sleep(0.02)

    @contextlib.contextmanager
    def hold(self, db: str, table: str) -> Iterator[None]:
        with self.server.connect(db, user=pg.USER) as conn:  # a lock held open in a transaction
            conn.autocommit = False
            conn.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
            try:
                yield
            finally:
                conn.rollback()


#: PostgreSQL column types of the tests' overrides → GreptimeDB's names
_GREPTIME_TYPES: Final = {
    "text": "string",
    "double precision": "double",
    "bigint": "bigint",
    "boolean": "boolean",
}


class DialectStore:
    kind = "greptime"

    def __init__(self, server: DialectServer) -> None:
        self.server = server
        self.port = server.port

    def dsn(self, db: str, *, password: str = pg.PASSWORD) -> str:
        return self.server.dsn(db, password=password)

    def create(
        self,
        db: str,
        time_column: str = "ts",
        tables: Iterable[str] | None = None,
        *,
        overrides: Mapping[str, Mapping[str, str | None]] | None = None,
    ) -> None:
        layout = LAYOUTS.get(time_column, LINE_PROTOCOL)
        changes = {
            t: {c: None if v is None else _GREPTIME_TYPES.get(v, v) for c, v in cols.items()}
            for t, cols in (overrides or {}).items()
        }
        self.server.create_database(
            db, layout, tables, overrides=changes, time_column=None if time_column in LAYOUTS else time_column
        )

    def load(self, db: str, data: Mapping[str, Iterable[Mapping[str, Any]]], time_column: str = "ts") -> None:
        self.server.load(db, data)

    def add_tables(self, db: str, time_column: str, tables: Iterable[str]) -> None:
        layout = LAYOUTS.get(time_column, LINE_PROTOCOL)
        for t in tables:
            self.server.engine.create_table(db, layout.tables[t])

    def has(self, time_column: str, table: str, column: str) -> bool:
        layout = LAYOUTS.get(time_column, LINE_PROTOCOL)
        return any(c.name == column for c in layout.tables[table].columns)

    def drop_table(self, db: str, table: str) -> None:
        self.server.drop_table(db, table)

    def kill_connections(self) -> None:
        self.server.wire.kill_connections()

    def hold(self, db: str, table: str) -> AbstractContextManager[Any]:
        return self.server.stall(table)
