"""A metrics store that stops answering is an error within the query timeout, never a hang.

Before, every exchange with the store waited without a limit once connected: a locked table, an
overloaded GreptimeDB or a wedged one held `tftui report` (and a daemon tick, until its liveness
probe restarted it) for good. On both stores: a query on a held table (PostgreSQL: a table lock; the
dialect server: a stall that honours the session's statement timeout, as GreptimeDB's does) fails
at the server's limit with one line, and the store answers again once released. On the dialect
server, a wedged server (the stall ignores the timeout) is cut by the client's deadline. The CLI
takes `--metrics-timeout`; the daemon pauses autoscale and its other loops go on.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

import psycopg
import pytest

from tests.daemon_support import _free_port, _start, _stopped
from tests.greptime_dialect import DialectServer
from tests.greptime_dialect.engine import TIMED_OUT
from tests.kubeapi import KubeApiServer
from tests.pg import CAPACITY, NOW, PASSWORD, check_step1, step1_rows
from tests.stores import MetricsStore
from tests.test_report_store import report
from tftui.sources.greptime import GreptimeMetrics
from tftui.sources.greptime import store as store_module
from tftui.sources.greptime.deadline import Deadline
from tftui.sources.ports import SourceError

T = TypeVar("T")
HOUR = timedelta(hours=1)


def returns(fn: Callable[[], T], limit: float = 60) -> T:
    """`fn()`, run in a thread: fails the test if it is still waiting after `limit` seconds (the
    hang this module is about), instead of hanging the suite. A guard, not a speed check."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # handed back to the test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"still waiting on the metrics store after {limit:g} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


def no_answer(fn: Callable[[], object], seconds: str) -> str:
    with pytest.raises(SourceError) as info:
        returns(fn)
    text = str(info.value)
    assert "\n" not in text and PASSWORD not in text
    assert f"no result within {seconds} s while" in text and "--metrics-timeout" in text, text
    return text


@pytest.fixture
def quick_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's deadline half a second past the server's limit (5 s in use)."""
    monkeypatch.setattr(store_module, "GRACE", 0.5)


def _db(store: MetricsStore, name: str) -> str:
    store.create(name, "ts")
    store.load(name, step1_rows(), "ts")
    return store.dsn(name)


def test_a_held_query_fails_at_the_servers_limit_and_the_store_recovers(
    store: MetricsStore, quick_grace: None
) -> None:
    with GreptimeMetrics(_db(store, "held"), connect_timeout=3, query_timeout=1) as metrics:
        check_step1(metrics.step1(HOUR, NOW, CAPACITY))  # connected, tables known
        with store.hold("held", "tf_worker_usage"):
            text = no_answer(lambda: metrics.step1(HOUR, NOW, CAPACITY), "1")
            assert "(tf_worker_usage)" in text
            no_answer(lambda: list(metrics.rows("tf_worker_usage", NOW - HOUR, NOW)), "1")
        check_step1(returns(lambda: metrics.step1(HOUR, NOW, CAPACITY)))
        assert len(list(metrics.rows("tf_worker_usage", NOW - HOUR, NOW))) > 0


def test_a_wedged_server_is_cut_by_the_client_and_the_pool_moves_on(
    dialect_server: DialectServer, quick_grace: None
) -> None:
    dialect_server.create_database("wedged", "ts")
    dialect_server.load("wedged", step1_rows())
    with GreptimeMetrics(dialect_server.dsn("wedged"), connect_timeout=3, query_timeout=1) as metrics:
        check_step1(metrics.step1(HOUR, NOW, CAPACITY))
        with dialect_server.stall("tf_worker_usage", honour_timeout=False):
            no_answer(lambda: metrics.step1(HOUR, NOW, CAPACITY), "1")
        check_step1(returns(lambda: metrics.step1(HOUR, NOW, CAPACITY)))  # cut connections discarded


def test_a_long_stream_that_keeps_coming_is_not_cut(
    store: MetricsStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client's limit counts from the last row: a reader slower than the limit in total still
    gets every row (the console's usage views stream a window of raw rows; the server, which has
    sent them all, is done)."""
    monkeypatch.setattr(store_module, "GRACE", 0.0)
    with GreptimeMetrics(_db(store, "stream"), connect_timeout=3, query_timeout=0.4) as metrics:
        expected = list(metrics.rows("tf_worker_usage", NOW - HOUR, NOW))
        assert len(expected) >= 4
        got = []
        for row in metrics.rows("tf_worker_usage", NOW - HOUR, NOW):
            got.append(row)
            threading.Event().wait(0.15)  # in total longer than the limit, each row well within it
        assert got == expected
        check_step1(metrics.step1(HOUR, NOW, CAPACITY))


def test_report_ends_with_one_line_when_the_store_does_not_answer(
    store: MetricsStore, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    dsn = _db(store, "report_held")
    with store.hold("report_held", "tf_worker_usage"):
        done = report(dsn, home, "--metrics-timeout", "1s")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tftui: metrics store "), done.stderr
    assert "no result within 1 s while" in lines[0] and "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("flag", "problem"),
    [
        (("--metrics-timeout", "0s"), "must be more than 0"),
        (("--metrics-timeout=-5s",), "must be more than 0"),
        (("--metrics-timeout", "soon"), "--metrics-timeout: "),
    ],
)
def test_a_bad_metrics_timeout_is_one_line(tmp_path: Path, flag: tuple[str, ...], problem: str) -> None:
    done = report("host=127.0.0.1 port=1 dbname=public user=tftui", tmp_path, *flag)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tftui: --metrics-timeout"), lines
    assert problem in lines[0]


def test_the_dialect_server_reads_statement_timeout_as_greptimedb_does(dialect_server: DialectServer) -> None:
    dialect_server.create_database("settings", "ts")
    with psycopg.connect(dialect_server.dsn("settings"), autocommit=True) as conn:
        for text in (
            "SET statement_timeout = 150",
            "SET statement_timeout TO '2s'",
            "SET statement_timeout = '1min'",
        ):
            conn.execute(text)
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="Unsupported timeout expr"):
            conn.execute("SET statement_timeout = 'soon'")
        conn.execute("SET statement_timeout = '300ms'")
        with dialect_server.stall("tf_worker_usage"), pytest.raises(psycopg.Error) as info:
            returns(lambda: conn.execute("SELECT count(*) FROM tf_worker_usage").fetchall())
        assert info.value.sqlstate == "57000" and TIMED_OUT in str(info.value)
        conn.execute("SET statement_timeout = 0")  # 0: no limit
        assert conn.execute("SELECT count(*) FROM tf_worker_usage").fetchall() == [(0,)]


def test_a_greptimedb_that_refuses_statement_timeout_still_connects_and_is_cut_by_the_client(
    dialect_server: DialectServer, quick_grace: None
) -> None:
    """GreptimeDB before v0.9 refused a SET of a variable it did not know (0A000, read in its
    source): the connection must still work, the client's deadline being the only limit."""
    dialect_server.create_database("old_greptime", "ts")
    dialect_server.load("old_greptime", step1_rows())
    dialect_server.engine.refused_variables.add("statement_timeout")
    try:
        with GreptimeMetrics(
            dialect_server.dsn("old_greptime"), connect_timeout=3, query_timeout=1
        ) as metrics:
            check_step1(metrics.step1(HOUR, NOW, CAPACITY))
            with dialect_server.stall("tf_worker_usage"):  # honours a timeout this server never got
                no_answer(lambda: metrics.step1(HOUR, NOW, CAPACITY), "1")
            check_step1(returns(lambda: metrics.step1(HOUR, NOW, CAPACITY)))
    finally:
        dialect_server.engine.refused_variables.discard("statement_timeout")


def _conn(fd: int) -> Any:
    """What `Deadline` touches of a connection: the socket's descriptor."""
    return SimpleNamespace(pgconn=SimpleNamespace(socket=fd))


def test_deadlines_cut_only_what_outlives_them_from_one_thread() -> None:
    """A deadline cuts its connection once due (the peer then reads end-of-stream), a finished one
    never does, `alive()` moves the limit; a thousand deadlines start no thread of their own."""
    pairs = [socket.socketpair() for _ in range(3)]
    try:
        late, done, streaming = (
            Deadline(_conn(a.fileno()), t) for (a, _), t in zip(pairs, (0.3, 0.3, 1.0), strict=True)
        )
        before = threading.active_count()
        with contextlib.ExitStack() as stack:
            for _ in range(1000):
                stack.enter_context(Deadline(_conn(pairs[1][0].fileno()), 60))
        assert threading.active_count() <= before + 1
        with done:
            pass
        with late, streaming:
            for _ in range(15):  # 1.5 s of rows every 0.1 s: each one moves the 1 s limit
                streaming.alive()
                threading.Event().wait(0.1)
            returns(lambda: pairs[0][1].recv(1))  # the late one's peer sees the shutdown
            assert late.fired and not streaming.fired
        assert not done.fired
        for sock in (pairs[1][1], pairs[2][1]):
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):  # still open: nothing to read, no end-of-stream
                sock.recv(1)
    finally:
        for a, b in pairs:
            a.close()
            b.close()


def test_a_daemon_stop_cuts_a_query_waiting_on_the_store(
    server: KubeApiServer, kubeconfig: Path, dialect_server: DialectServer
) -> None:
    """SIGTERM while the daemon's autoscale waits on a stalled store: the stop cuts the query
    (`GreptimeMetrics.interrupt`) instead of waiting out its limit (here 120 s; the chart's grace
    period is 45 s), exits 0, and journals no pause for it."""
    dialect_server.create_database("stop_store", "greptime_timestamp")
    port = _free_port()
    args = ["--daemon", "--kubeconfig", str(kubeconfig), "--dry-run", "--listen", f"127.0.0.1:{port}",
            "--metrics-dsn", dialect_server.dsn("stop_store"), "--metrics-timeout", "120s"]  # fmt: skip
    with dialect_server.stall("tf_worker_usage") as stall:
        proc = _start(args)
        try:
            assert stall.entered.wait(60), "the daemon never read the usage"
            out, _ = _stopped(proc, signal.SIGTERM)
        finally:
            if proc.poll() is None:
                proc.kill()
    messages = [json.loads(line)["msg"] for line in out.splitlines()]
    assert "daemon stopped" in messages
    assert not [m for m in messages if "autoscale paused" in m or "no result within" in m], messages
