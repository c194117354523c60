"""Node and GPU histories aggregated where the rows are equal the row-by-row reference, on both stores.

`GreptimeMetrics.object_history` (SQL per sample time, then per bucket) and the simulator's
`object_history` (only the object's samples) must give what `rows_object_history` computes from the
raw rows: the same bucket means, the same row count, and None — never 0 — where a bucket has no
sample time whose every row carries the figure. Rows: the simulator's for a small demo, plus a
hand-made node with a NULL compute %, a stretch of NULLs, a GPU of unknown capacity, NULL
allocations and an empty bucket.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.pg import full_rows
from tests.stores import MetricsStore
from tftui.engine.state import ClusterState
from tftui.model.dump import validate_items
from tftui.model.usage import ObjectHistoryQuery, ObjectSeries
from tftui.sources.greptime import GreptimeMetrics
from tftui.sources.sim.cluster import generate_objects
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.load.objhistory import rows_object_history

COL = "greptime_timestamp"
BUCKET = timedelta(minutes=15)
SPAN = timedelta(hours=2)
EDGE_CAPS: tuple[tuple[str, float], ...] = (
    ("edge-g0", 100.0),
    ("edge-g1", 50.0),
)  # edge-g2 has no known capacity


def _edge(end: datetime) -> dict[str, list[dict[str, Any]]]:
    """60 minutes of one node in the last hour of the window: four 15-minute buckets."""
    t0 = end - timedelta(hours=1)
    gpu: list[dict[str, Any]] = []
    node: list[dict[str, Any]] = []
    for m in range(60):
        ts = t0 + timedelta(minutes=m)
        if m < 45:  # bucket 3 has no GPU rows at all
            g1 = None if m == 5 or 15 <= m < 30 else 20.0  # one NULL minute; bucket 1 all NULL
            for uuid, pct in (("edge-g0", 10.0 + m), ("edge-g1", g1)):
                gpu.append({"uuid": uuid, "node": "edge-n", "pool": "p", "compute_percentage": pct, "ts": ts})
            if m == 30:  # a GPU of unknown capacity: that minute is unknown
                gpu.append(
                    {"uuid": "edge-g2", "node": "edge-n", "pool": "p", "compute_percentage": 50.0, "ts": ts}
                )
        alloc = None if 15 <= m < 30 else 40.0 + m % 3
        node.append(
            {"node": "edge-n", "pool": "p", "phase": "Running", "allocated_tflops_percent": alloc, "ts": ts}
        )
    return {
        "tf_gpu_usage": full_rows("tf_gpu_usage", gpu),
        "tf_node_metrics": full_rows("tf_node_metrics", node),
    }


class Data:
    def __init__(self, sim: SimMetrics, state: ClusterState, metrics: GreptimeMetrics, end: datetime) -> None:
        self.sim, self.state, self.metrics, self.end = sim, state, metrics, end

    def query(self, kind: str, name: str) -> ObjectHistoryQuery:
        if name == "edge-n":
            caps = EDGE_CAPS
        else:
            gpus = [name] if kind == "GPU" else sorted(self.state.nodes[name].gpus)
            caps = tuple((g, self.state.gpus[g].capacity.tflops) for g in gpus)
        return ObjectHistoryQuery(kind, name, self.end - SPAN, self.end, BUCKET, caps)


@pytest.fixture(scope="module")
def data(store: MetricsStore) -> Iterator[Data]:
    objs = generate_objects(nodes=6)
    state = ClusterState.build(validate_items(objs))
    sim = SimMetrics(objs, history=timedelta(hours=3))
    end = sim.now - timedelta(seconds=30)  # buckets not on the sample grid
    store.create("objhist", COL, ("tf_gpu_usage", "tf_node_metrics"))
    window = (end - SPAN - timedelta(minutes=5), end + timedelta(minutes=5))  # rows outside too
    store.load("objhist", {t: list(sim.rows(t, *window)) for t in ("tf_gpu_usage", "tf_node_metrics")}, COL)
    store.load("objhist", _edge(end), COL)
    with GreptimeMetrics(store.dsn("objhist"), connect_timeout=3) as metrics:
        yield Data(sim, state, metrics, end)


def _same(a: ObjectSeries, b: ObjectSeries) -> None:
    assert a.rows == b.rows
    for x, y in ((a.used, b.used), (a.allocated, b.allocated)):
        assert [v is None for v in x] == [v is None for v in y]
        assert [v for v in x if v is not None] == pytest.approx([v for v in y if v is not None], rel=1e-9)


def test_store_aggregate_equals_the_rows_for_nodes_and_gpus(data: Data) -> None:
    node = next(
        n
        for n in sorted(data.state.nodes)
        if any(data.state.gpus[g].workers for g in data.state.nodes[n].gpus)
    )
    gpu = next(g for g in sorted(data.state.nodes[node].gpus) if data.state.gpus[g].workers)
    for kind, name in (("GPUNode", node), ("GPU", gpu)):
        q = data.query(kind, name)
        by_rows = rows_object_history(data.metrics, q)
        assert by_rows is not None and by_rows.rows > 0
        agg = data.metrics.object_history(q)
        _same(by_rows, agg)
        assert len(agg.used) == q.buckets == 8
        assert all(v is not None for v in agg.used)  # the simulator's rows cover the window
        # the simulator's own aggregate: the same samples, generated for the object only
        _same(agg, data.sim.object_history(q))
        if kind == "GPU":
            assert agg.allocated == (None,) * q.buckets  # no per-GPU allocation series


def test_store_aggregate_keeps_nulls_as_no_data(data: Data) -> None:
    q = data.query("GPUNode", "edge-n")
    agg = data.metrics.object_history(q)
    by_rows = rows_object_history(data.metrics, q)
    assert by_rows is not None
    _same(by_rows, agg)
    assert agg.rows == 45 * 2 + 1 + 60
    used, alloc = agg.used[4:], agg.allocated[4:]  # the edge node's hour: the window's last 4 buckets
    assert agg.used[:4] == (None,) * 4 and agg.allocated[:4] == (None,) * 4  # no rows: no data
    minutes = [m for m in range(15) if m != 5]  # minute 5 lacks edge-g1's figure
    assert used[0] == pytest.approx(sum(((10.0 + m) * 100 + 20.0 * 50) / 150 for m in minutes) / len(minutes))
    assert used[1] is None  # every minute had a NULL: a gap, not idle
    minutes = list(range(31, 45))  # minute 30 had a GPU of unknown capacity
    assert used[2] == pytest.approx(sum(((10.0 + m) * 100 + 20.0 * 50) / 150 for m in minutes) / len(minutes))
    assert used[3] is None  # no GPU rows
    assert alloc[1] is None and alloc[0] == pytest.approx(sum(40.0 + m % 3 for m in range(15)) / 15)
    assert alloc[3] == pytest.approx(sum(40.0 + m % 3 for m in range(45, 60)) / 15)
