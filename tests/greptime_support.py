"""Helpers of the GreptimeMetrics tests (tests/test_greptime*.py): the two time-column variants, a
database made and loaded on a metrics store, and comparisons of reports within float tolerance.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tests.stores import MetricsStore
from tftui.model.metrics import Step1
from tftui.sources.greptime import GreptimeMetrics

VARIANTS = ("ts", "greptime_timestamp")


def _metrics(dsn: str, **kw: Any) -> GreptimeMetrics:
    """Closed by `with` (or the fixture): the pool's connections must not outlive the test."""
    return GreptimeMetrics(dsn, connect_timeout=3, **kw)


def held(
    store: MetricsStore, col: str, data: dict[str, list[dict[str, Any]]]
) -> dict[str, list[dict[str, Any]]]:
    """`data` as the store holds it: without the columns its tables lack (the simulator's side of a test)."""
    return {
        t: [{k: v for k, v in r.items() if k == "ts" or store.has(col, t, k)} for r in rows]
        for t, rows in data.items()
    }


def make_db(
    store: MetricsStore, name: str, col: str, data: dict[str, list[dict[str, Any]]], **kw: Any
) -> str:
    store.create(name, col, **kw)
    store.load(name, data, col)
    return store.dsn(name)


def _same(a: Any, b: Any, path: str = "") -> None:
    """Equal, floats within 1e-9 relative (SQL and Python add in different orders)."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, int | float) and isinstance(b, int | float), path
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), f"{path}: {a} != {b}"
    elif dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, tuple | list):
        assert len(a) == len(b), f"{path}: {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def _keyed(s: Step1) -> dict[str, Any]:
    """Step1 with its tuples keyed (near-equal averages may sort differently in SQL and Python)."""
    return {
        "nodes": {(n.node, n.pool): n for n in s.nodes},
        "gpus": {(g.node, g.uuid): g for g in s.gpus},
        "requests": {(r.namespace, r.workload): r for r in s.workload_requests},
        "usage": {(u.namespace, u.workload): u for u in s.workload_usage},
        "missing": s.missing,
        "now": s.now,
        "window": s.window,
    }
