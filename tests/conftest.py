"""Shared fixtures: the throwaway PostgreSQL server of the metrics tests (tests/pg.py), and the
test Kubernetes API server seeded with the demo cluster plus a kubeconfig pointing at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubeapi import KubeApiServer, write_kubeconfig
from tests.pg import PgServer, PgUnavailable, start_server
from tftui.sources.sim.cluster import generate_objects


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
