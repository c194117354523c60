"""Shared fixtures: the throwaway PostgreSQL server of the metrics tests (tests/pg.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pg import PgServer, PgUnavailable, start_server


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
