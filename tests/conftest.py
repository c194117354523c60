"""Shared fixtures: the two metrics stores of the metrics tests (PostgreSQL, tests/pg.py, and the
GreptimeDB-dialect server, tests/greptime_dialect; `store` is parametrized over both); the test
Kubernetes API server seeded with the demo cluster plus a kubeconfig pointing at it; the console
tests' demo cluster and metrics (one per module); a still text cursor for every test."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from tests.greptime_dialect import DialectServer, start_dialect_server
from tests.kubeapi import KubeApiServer, write_kubeconfig
from tests.pg import PgServer, PgUnavailable, start_server
from tests.stores import STORES, DialectStore, MetricsStore, PgStore
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster, generate_objects
from tftui.sources.sim.usage import SimMetrics


@pytest.fixture(autouse=True)
def _still_cursor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Input cursor blinks on a timer; still, console tests and snapshots are deterministic."""
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)


SILENT_HOST = "metrics.example"
"""A host name whose DNS lookup never answers while a test that asks for `silent_resolver` runs."""


@pytest.fixture
def silent_resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """`SILENT_HOST`'s lookups hang until the test ends, then fail; they never reach the real
    resolver (the lookup threads outlive the test). Other names resolve as usual."""
    answered, real = threading.Event(), socket.getaddrinfo

    def silent(host: str | None, *args: Any, **kwargs: Any) -> Any:
        if host == SILENT_HOST:
            answered.wait(120)
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", silent)
    try:
        yield SILENT_HOST
    finally:
        answered.set()


@pytest.fixture(scope="module")
def demo() -> SimCluster:
    """The 40-node demo cluster (seed 7), one per test module: modules that act on it stay apart."""
    return SimCluster(seed=7, nodes=40, now=DEFAULT_NOW)


@pytest.fixture(scope="module")
def metrics(demo: SimCluster) -> SimMetrics:
    return SimMetrics(demo.snapshot(), seed=7, now=DEFAULT_NOW)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One server per test process (per xdist worker); missing binaries fail, never skip."""
    server: PgServer | None = None
    problem = ""
    try:
        server = start_server()
    except PgUnavailable as exc:
        problem = str(exc)
    if server is None:
        pytest.fail(problem, pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def dialect_server() -> Iterator[DialectServer]:
    """One GreptimeDB-dialect server per test process (DataFusion behind pgwire), started in ~0.2 s."""
    server = start_dialect_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module", params=STORES)
def store(request: pytest.FixtureRequest) -> MetricsStore:
    """Each metrics store in turn: PostgreSQL, then the GreptimeDB-dialect server."""
    if request.param == "postgres":
        return PgStore(request.getfixturevalue("pg_server"))
    return DialectStore(request.getfixturevalue("dialect_server"))


@pytest.fixture
def server() -> Iterator[KubeApiServer]:
    """A fresh API server per test, seeded with the demo cluster (bookmarks every 0.2 s)."""
    srv = KubeApiServer(bookmark_interval=0.2).start()
    srv.seed(generate_objects())
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def kubeconfig(server: KubeApiServer, tmp_path: Path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", server.url)


#: Fixtures that start a server of their own (PostgreSQL, the GreptimeDB-dialect server, the test
#: Kubernetes API server). A test that uses one, directly or through another fixture, is marked
#: `integration`; a Hypothesis test is marked `property`. `make check` leaves both out (see the
#: Makefile) without a list of test names to keep up to date.
SERVER_FIXTURES = frozenset({"pg_server", "dialect_server", "store", "server", "kubeconfig"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: uses a server fixture (set by tests/conftest.py)")
    config.addinivalue_line("markers", "property: a Hypothesis property test (set by tests/conftest.py)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.property)
