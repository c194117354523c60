"""The GreptimeDB-dialect test server itself: what it reproduces of GreptimeDB, over psycopg 3 and its pool."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from tests.greptime_dialect import MIGRATION_DDL, DialectServer
from tests.greptime_dialect.sqltext import expand_interval, rewrite

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def db(dialect_server: DialectServer) -> str:
    dialect_server.create_database("dialect")
    rows = [
        {"uuid": "g1", "node": "n1", "pool": "p", "compute_percentage": 5.0, "memory_bytes": 7, "ts": T0},
        {
            "uuid": "g1",
            "node": "n1",
            "pool": "p",
            "compute_percentage": 9.0,
            "memory_bytes": 8,
            "ts": T0,
        },  # same key
        {
            "uuid": "g2",
            "node": "n1",
            "pool": "p",
            "compute_percentage": 1.0,
            "ts": T0 + timedelta(microseconds=1500),
        },
    ]
    assert dialect_server.insert_rows("dialect", "tf_gpu_usage", rows) == 3
    dialect_server.create_database("dialect_ddl", MIGRATION_DDL, ("tf_gpu_usage",))
    dialect_server.insert_rows("dialect_ddl", "tf_gpu_usage", [{"uuid": "g", "memory_bytes": 5, "ts": T0}])
    return dialect_server.dsn("dialect")


@pytest.fixture
def conn(db: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(db, autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
        yield c


def test_timestamp_literals_are_read_at_millisecond_precision(conn: psycopg.Connection[Any]) -> None:
    row = conn.execute("SELECT %s::timestamp AS t", (datetime(2026, 1, 1, 0, 0, 0, 123456),)).fetchone()
    assert row == (datetime(2026, 1, 1, 0, 0, 0, 123000),)
    assert rewrite("SELECT CAST(x AS TIMESTAMP), y AS timestamp FROM t") == (
        "SELECT CAST(x AS TIMESTAMP(3)), y AS timestamp FROM t"
    )


def test_interval_shorthands_are_expanded(conn: psycopg.Connection[Any]) -> None:
    assert expand_interval("1h30m") == "1 hours 30 minutes" and expand_interval("2mon") == "2 months"
    row = conn.execute(
        "SELECT '1d'::INTERVAL AS a, INTERVAL '1h30m' AS b, CAST('5m' AS INTERVAL) AS c"
    ).fetchone()
    assert row == (timedelta(days=1), timedelta(minutes=90), timedelta(minutes=5))


def test_information_schema_columns_in_greptimedb_shape(conn: psycopg.Connection[Any]) -> None:
    rows = conn.execute(
        "SELECT table_schema, column_name, data_type, semantic_type, greptime_data_type, column_key "
        "FROM information_schema.columns WHERE table_name = 'tf_gpu_usage' ORDER BY table_schema, ordinal_position"
    ).fetchall()
    line = {r[1]: r[2:] for r in rows if r[0] == "dialect"}
    assert line["uuid"] == ("string", "TAG", "String", "PRI")
    assert line["memory_bytes"] == ("bigint", "FIELD", "Int64", "")
    assert line["compute_percentage"] == ("double", "FIELD", "Float64", "")
    assert line["greptime_timestamp"] == ("timestamp(9)", "TIMESTAMP", "TimestampNanosecond", "TIME INDEX")
    assert "graphics_clock_mhz" not in line  # the hypervisor never writes it
    ddl = {r[1]: r[2:] for r in rows if r[0] == "dialect_ddl"}
    assert ddl["memory_bytes"][:2] == ("bigint unsigned", "FIELD") and ddl["ts"][0] == "timestamp(3)"


def test_rows_of_one_series_and_time_replace_each_other(conn: psycopg.Connection[Any]) -> None:
    rows = conn.execute(
        "SELECT uuid, compute_percentage, memory_bytes FROM tf_gpu_usage ORDER BY uuid"
    ).fetchall()
    assert rows == [("g1", 9.0, 8), ("g2", 1.0, None)]
    # nanosecond time index: the sub-millisecond time is kept; UInt64 comes back as NUMERIC
    assert conn.execute("SELECT max(greptime_timestamp) AS t FROM tf_gpu_usage").fetchone() == (
        datetime(2026, 11, 30, 12, 0, 0, 1500),
    )


def test_uint64_is_numeric(dialect_server: DialectServer, db: str) -> None:
    with psycopg.connect(dialect_server.dsn("dialect_ddl"), autocommit=True) as c:
        assert c.execute("SELECT memory_bytes FROM tf_gpu_usage").fetchone() == (Decimal(5),)


def test_duplicate_projection_names_are_refused(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.Error, match="Projections require unique expression names") as info:
        conn.execute("SELECT count(*), count(*) FROM tf_gpu_usage")
    assert info.value.sqlstate == "P0000"
    assert conn.execute("SELECT count(*) AS a, count(*) AS b FROM tf_gpu_usage").fetchone() == (
        2,
        2,
    )  # g1's two rows are one
    with pytest.raises(psycopg.errors.UndefinedTable, match=r"Table not found: greptime\.dialect\.nope"):
        conn.execute("SELECT * FROM nope")


def test_empty_query_and_transactions_answered_and_ignored(db: str) -> None:
    notices: list[str] = []
    with psycopg.connect(db) as c:  # not autocommit: psycopg sends BEGIN first
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        assert c.execute("SELECT count(*) AS n FROM tf_gpu_usage").fetchone() == (2,)
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        c.commit()
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        c.autocommit = True
        assert (
            c.execute("").pgresult is not None
            and c.execute("").pgresult.status == psycopg.pq.ExecStatus.EMPTY_QUERY
        )
        assert c.execute("SHOW standard_conforming_strings").fetchone() == ("on",)
    assert "Please note transaction is not supported in GreptimeDB." in notices


def test_extended_protocol_binds_parameters(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as c:  # server-side binding: Parse/Bind/Describe/Execute
        row = c.execute(
            "SELECT uuid, compute_percentage + %s AS x, %s AS s, %s AS n, %s AS b FROM tf_gpu_usage "
            "WHERE uuid = %s AND greptime_timestamp >= %s",
            (1.5, "it's", 41, True, "g1", datetime(2026, 11, 30, 11, 0)),
        ).fetchall()
        assert row == [("g1", 10.5, "it's", 41, True)]
        assert c.execute("SELECT %b::bigint + 1 AS y", (41,)).fetchone() == (42,)  # binary parameter


def test_pool_checks_with_the_empty_query_and_recovers(dialect_server: DialectServer, db: str) -> None:
    with ConnectionPool(db, min_size=1, max_size=2, check=ConnectionPool.check_connection,
                        kwargs={"autocommit": True}, open=True) as pool:  # fmt: skip
        with pool.connection() as c:
            assert c.execute("SELECT 1 AS one").fetchone() == (1,)
        assert dialect_server.wire.kill_connections() >= 1
        with pool.connection() as c:
            assert c.execute("SELECT 2 AS two").fetchone() == (2,)


def test_start_up_errors_are_greptimedbs(dialect_server: DialectServer, db: str) -> None:
    with pytest.raises(psycopg.OperationalError, match="Database not found: nodb"):
        psycopg.connect(dialect_server.dsn("nodb"))
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(dialect_server.dsn("dialect", password="wrong"))
    with psycopg.connect(db, autocommit=True) as c:
        c.execute("SET TIME ZONE 'UTC'")
        with pytest.raises(psycopg.Error, match="UTC only"):
            c.execute("SET TIME ZONE 'Europe/Paris'")
