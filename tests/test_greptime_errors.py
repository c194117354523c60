"""GreptimeMetrics' errors on both metrics stores: one line, the store named, never the password,
never a traceback (wrong password, unreachable port, missing database, table or column, malformed
values, a dropped table, DSNs); a table created after the first look is found.
"""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any

import pytest

from tests.greptime_support import _metrics, make_db
from tests.pg import CAPACITY, NOW, PASSWORD, check_step1, free_port, step1_rows
from tests.stores import MetricsStore
from tftui.model.metrics import NoData
from tftui.sources.greptime import DSN_ENV, GreptimeMetrics, dsn_from_env
from tftui.sources.ports import SourceError

# -- errors: one line, the store named, never the password, never a traceback -----------------------------


def _one_line_error(fn: Any, *needles: str) -> str:
    with pytest.raises(SourceError) as info:
        fn()
    text = str(info.value)
    assert "\n" not in text and "Traceback" not in text
    assert PASSWORD not in text and "wrong-pw-123" not in text
    for needle in needles:
        assert needle in text, text
    return text


def test_wrong_password(store: MetricsStore) -> None:
    store.create("pw_db")
    with _metrics(store.dsn("pw_db", password="wrong-pw-123")) as metrics:
        _one_line_error(
            lambda: metrics.step1(timedelta(hours=1), NOW, CAPACITY),
            f"127.0.0.1:{store.port}/pw_db",
            'password authentication failed for user "tftui"',
            DSN_ENV,
        )


def test_unreachable_port() -> None:
    port = free_port()
    with _metrics(f"host=127.0.0.1 port={port} dbname=public user=u password=wrong-pw-123") as metrics:
        text = _one_line_error(lambda: metrics.alert_rows("EmptyGPU", NOW), f"127.0.0.1:{port}/public")
        assert "connection refused" in text and "4003" in text


def test_missing_database(store: MetricsStore) -> None:
    with _metrics(store.dsn("no_such_db")) as metrics:
        _one_line_error(lambda: metrics.tables(), 'database "no_such_db" does not exist', "public")


def test_missing_table(store: MetricsStore) -> None:
    store.create("missing_table", "ts", tables=("tf_node_metrics", "tf_gpu_usage", "tf_worker_resources"))
    with _metrics(store.dsn("missing_table")) as metrics:
        _one_line_error(
            lambda: metrics.step1(timedelta(hours=1), NOW, CAPACITY),
            "table tf_worker_usage not found",
            "hypervisor",
        )
        with pytest.raises(NoData, match="tf_system_metrics does not exist"):
            metrics.alert_rows("WorkerAllocationFailed", NOW)


def test_missing_column(store: MetricsStore) -> None:
    store.create("missing_col", "ts", overrides={"tf_node_metrics": {"allocated_tflops_percent": None}})
    with _metrics(store.dsn("missing_col")) as metrics:
        _one_line_error(
            lambda: metrics.step1(timedelta(hours=1), NOW, CAPACITY),
            "table tf_node_metrics has no column allocated_tflops_percent",
        )


def test_missing_time_column(store: MetricsStore) -> None:
    """PostgreSQL: found by name only; GreptimeDB: the TIME INDEX column, whatever its name."""
    make_db(store, "no_time", "timestamp", step1_rows())
    with _metrics(store.dsn("no_time")) as metrics:
        if store.kind == "postgres":
            _one_line_error(
                lambda: metrics.step1(timedelta(hours=1), NOW, CAPACITY),
                "table tf_node_metrics has no time column (ts or greptime_timestamp)",
            )
        else:
            check_step1(metrics.step1(timedelta(hours=1), NOW, CAPACITY))
            assert metrics.describe().endswith("(time column timestamp)")


def test_malformed_values(store: MetricsStore) -> None:
    store.create("malformed", "ts", overrides={"tf_gpu_usage": {"compute_percentage": "text"}})
    store.load(
        "malformed", {"tf_gpu_usage": [{"node": "n", "uuid": "g", "compute_percentage": "abc", "ts": NOW}]}
    )
    text = "text" if store.kind == "postgres" else "string"
    with _metrics(store.dsn("malformed")) as metrics:
        _one_line_error(
            lambda: metrics.step1(timedelta(hours=1), NOW, CAPACITY),
            f"tf_gpu_usage.compute_percentage holds {text}, not numbers",
        )
        _one_line_error(lambda: metrics.alert_rows("GPUTFlopsFull", NOW), "tf_gpu_usage.compute_percentage")


def test_table_dropped_after_detection(store: MetricsStore) -> None:
    with _metrics(make_db(store, "dropped", "ts", step1_rows())) as metrics:
        metrics.step1(timedelta(hours=1), NOW, CAPACITY)
        store.drop_table("dropped", "tf_gpu_usage")
        _one_line_error(lambda: metrics.step1(timedelta(hours=1), NOW, CAPACITY), "tf_gpu_usage", "retry")
        _one_line_error(
            lambda: metrics.step1(timedelta(hours=1), NOW, CAPACITY), "table tf_gpu_usage not found"
        )


def test_dsn_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert dsn_from_env({DSN_ENV: "  host=h dbname=public "}) == "host=h dbname=public"
    assert dsn_from_env({DSN_ENV: " "}) is None
    monkeypatch.delenv(DSN_ENV, raising=False)
    with pytest.raises(SourceError, match=f"pass --metrics-dsn or set {DSN_ENV}"):
        GreptimeMetrics()
    monkeypatch.setenv(DSN_ENV, "host=example.invalid port=4003 dbname=public")
    assert GreptimeMetrics().describe() == "greptime example.invalid:4003/public"
    with pytest.raises(SourceError, match="invalid metrics DSN"):
        GreptimeMetrics("host=h port")


@pytest.mark.parametrize(
    "dsn",
    ["postgresql://u:Pa@ss-tail@127.0.0.1:4003/public", "host=127.0.0.1,tail@h port=4003,4003 dbname=public"],
)
def test_a_raw_at_sign_in_the_password_is_refused_before_any_lookup(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver splits user info at the first "@": the password's tail would become a host name,
    sent to DNS and printed in the error. Refused at once, without echoing it."""

    def no_lookup(*_a: object, **_k: object) -> None:
        raise AssertionError("a DNS lookup for a DSN that is refused")

    monkeypatch.setattr(socket, "getaddrinfo", no_lookup)
    with pytest.raises(
        SourceError, match="host contains '@' — write an '@' in the user or password as %40"
    ) as exc:
        GreptimeMetrics(dsn).describe()
    assert "tail" not in str(exc.value)
    assert GreptimeMetrics("postgresql://u:Pa%40ss-tail@127.0.0.1:4003/public").describe() == (
        "greptime 127.0.0.1:4003/public"
    )


def test_a_resolver_that_does_not_answer_costs_the_connect_timeout(silent_resolver: str) -> None:
    """The driver's connect timeout starts after its DNS lookup: a silent resolver would hold the
    caller (the daemon's loop, its SIGTERM) for as long as the resolver's own retries."""
    metrics = GreptimeMetrics(f"host={silent_resolver} port=4003 dbname=public", connect_timeout=1)
    try:
        with pytest.raises(
            SourceError, match=rf"cannot connect \(no DNS answer for {silent_resolver} within 1 s\)"
        ):
            metrics.tables()
    finally:
        metrics.close()


# -- GreptimeDB creates a table on its first write ---------------------------------------------


def test_a_table_created_after_the_first_look_is_found(store: MetricsStore) -> None:
    """GreptimeDB creates a table on its first write: "not found" once must not stick."""
    store.create("late_tables", "greptime_timestamp", tables=("tf_node_metrics",))
    with _metrics(store.dsn("late_tables")) as metrics:
        _one_line_error(
            lambda: metrics.step1(timedelta(hours=1), NOW, CAPACITY), "table tf_gpu_usage not found"
        )
        with pytest.raises(NoData, match="tf_gpu_usage does not exist"):
            metrics.alert_rows("GPUTFlopsFull", NOW)
        store.add_tables(
            "late_tables", "greptime_timestamp", ("tf_gpu_usage", "tf_worker_resources", "tf_worker_usage")
        )
        store.load("late_tables", step1_rows(), "greptime_timestamp")
        check_step1(metrics.step1(timedelta(hours=1), NOW, CAPACITY))
