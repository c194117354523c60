"""GreptimeMetrics against both metrics stores (tests/stores.py): PostgreSQL and the GreptimeDB-dialect
server (DataFusion behind pgwire, tables shaped as GreptimeDB holds them).

Every database exists twice per store, once per time-column name (`ts`, `greptime_timestamp`:
behaviour M1; on the dialect server the migration-DDL and the line-protocol layouts). Here: Step1's
figures, exact on hand-made rows (the same rows and numbers as tests/test_sim_step1.py), rows read
per workload and per hour, usage figures that follow the data, and names that try SQL injection.
Alerts are in tests/test_greptime_alerts.py, errors in tests/test_greptime_errors.py, the
simulator's history in the store in tests/test_greptime_simulator.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from tests.greptime_support import VARIANTS, _keyed, _metrics, _same, held, make_db
from tests.pg import (
    A100_1,
    A100_2,
    CAPACITY,
    GI,
    H100_5,
    INJECTION,
    MI,
    NOW,
    PASSWORD,
    UNKNOWN_GPU,
    DictRows,
    check_step1,
    full_rows,
    step1_rows,
)
from tests.stores import MetricsStore
from tftui.model.metrics import ALERT_RULES, NoData, Step1
from tftui.runtime.whatif_usage import recorded_usage
from tftui.sources.greptime import GreptimeMetrics
from tftui.sources.sim.step1 import SimStep1


@pytest.fixture(scope="module", params=VARIANTS)
def tiny(request: pytest.FixtureRequest, store: MetricsStore) -> Iterator[GreptimeMetrics]:
    col = request.param
    with _metrics(make_db(store, f"tiny_{col}", col, step1_rows())) as metrics:
        yield metrics


# -- step 1: exact figures ----------------------------------------------------------------------------


def test_step1_exact_figures(tiny: GreptimeMetrics) -> None:
    check_step1(tiny.step1(timedelta(hours=1), NOW, CAPACITY))


def test_describe_names_store_and_time_column(tiny: GreptimeMetrics) -> None:
    tiny.tables()
    text = tiny.describe()
    assert text.startswith("greptime 127.0.0.1:") and "/tiny_" in text
    col = "greptime_timestamp" if "greptime_timestamp" in text else "ts"
    assert text.endswith(f"(time column {col})")
    assert PASSWORD not in text


def test_step1_window_is_bound_and_half_open(tiny: GreptimeMetrics) -> None:
    # [NOW − 2 h, NOW + 1 min) now includes the rows at NOW − 2 h and at NOW
    result = tiny.step1(timedelta(hours=2, minutes=1), NOW + timedelta(minutes=1), CAPACITY)
    h100 = next(n for n in result.nodes if n.node == "gpu-h100-1")
    assert h100.samples == 3 and h100.tflops_allocated_pct == pytest.approx((40.44 + 99.0 + 0.0) / 3)
    empty = tiny.step1(timedelta(hours=1), NOW + timedelta(days=3), CAPACITY)
    assert empty.nodes == () and "tf_node_metrics" in empty.missing


# -- rows per workload and per hour; a pool that lost its connections ----------------------


def test_workload_rows_are_the_rows_of_that_workload(tiny: GreptimeMetrics) -> None:
    """The tags go to the WHERE clause (the store reads one workload's series); the same rows as
    filtering every row, in time order, for every workload and for one that does not exist."""
    start, end = NOW - timedelta(hours=2), NOW + timedelta(minutes=1)
    every = list(tiny.rows("tf_worker_usage", start, end))
    keys = {(r["namespace"], r["workload"]) for r in every}
    assert len(keys) >= 2
    for ns, wl in sorted(keys):
        mine = [r for r in every if (r["namespace"], r["workload"]) == (ns, wl)]
        got = list(tiny.workload_rows(ns, wl, start, end))
        assert sorted(got, key=repr) == sorted(mine, key=repr) and [r["ts"] for r in got] == sorted(
            r["ts"] for r in got
        )
    assert list(tiny.workload_rows("nobody", "nothing", start, end)) == []


def test_the_stores_hourly_usage_gives_the_what_ifs_recorded_usage(store: MetricsStore) -> None:
    """`simulate --metrics-dsn` replays each workload's mean TFLOPS per hour of day: the store sums
    them (`hourly_usage`) and the result is what reading every row gives — `compute_tflops` where
    non-zero, else compute % × capacity, an unknown GPU or a NULL compute % no sample."""

    def use(
        ns: str, wl: str, gpu: str, hours_ago: float, pct: float | None, tflops: float | None
    ) -> dict[str, Any]:
        return {"namespace": ns, "workload": wl, "worker": f"{wl}-w", "pod_name": f"{wl}-p", "pool": "p",
                "node": "n", "uuid": gpu, "compute_percentage": pct, "compute_tflops": tflops,
                "memory_bytes": 1, "ts": NOW - timedelta(hours=hours_ago)}  # fmt: skip

    rows = [
        use("a", "infer", A100_1, 0.5, 50.0, 0.0),  # derived: 156
        use("a", "infer", A100_1, 0.6, 10.0, 100.0),  # written: 100
        use("a", "infer", H100_5, 3.2, 20.0, 0.0),  # another hour, another GPU
        use("a", "infer", UNKNOWN_GPU, 3.3, 90.0, 0.0),  # unknown capacity: no sample
        use("b", "infer", A100_2, 7.1, None, 0.0),  # NULL compute %: no sample
        use("b", "infer", A100_2, 7.2, 25.0, None),
        use("b", "train", A100_1, 30.0, 80.0, 0.0),  # outside the window
    ]
    store.create("hourly", "ts")
    store.load("hourly", {"tf_worker_usage": full_rows("tf_worker_usage", rows)}, "ts")
    state: Any = SimpleNamespace(
        gpus={g: SimpleNamespace(capacity=SimpleNamespace(tflops=c[0])) for g, c in CAPACITY.items()}
    )

    class RowsOnly:
        def __init__(self, metrics: GreptimeMetrics) -> None:
            self.rows = metrics.rows

    with _metrics(store.dsn("hourly")) as metrics:
        summed = recorded_usage(metrics, state, NOW, timedelta(hours=24))
        read = recorded_usage(RowsOnly(metrics), state, NOW, timedelta(hours=24))  # type: ignore[arg-type]
    assert set(summed) == {"a/infer", "b/infer"}
    for key, hours in read.items():
        assert summed[key] == pytest.approx(hours), key
    hour = (NOW - timedelta(hours=0.5)).hour
    assert summed["a/infer"][hour] == pytest.approx((156.0 + 100.0) / 2)
    assert summed["b/infer"][(NOW - timedelta(hours=7.2)).hour] == pytest.approx(0.25 * 312.0)


def test_pool_recovers_from_killed_connections(store: MetricsStore, tiny: GreptimeMetrics) -> None:
    tiny.step1(timedelta(hours=1), NOW, CAPACITY)
    store.kill_connections()
    check_step1(tiny.step1(timedelta(hours=1), NOW, CAPACITY))


# -- injection ------------------------------------------------------------------------------------------


def test_sql_injection_in_names_is_harmless(store: MetricsStore) -> None:
    data = step1_rows()
    for table in ("tf_worker_usage", "tf_worker_resources"):
        data[table] += full_rows(table, [{**data[table][0], "workload": INJECTION, "namespace": INJECTION,
                                           "worker": INJECTION, "pod_name": INJECTION}])  # fmt: skip
    with _metrics(make_db(store, "inject", "ts", data), gpu_capacity=CAPACITY) as metrics:
        result = metrics.step1(timedelta(hours=1), NOW, CAPACITY)
        assert (INJECTION, INJECTION) in {(u.namespace, u.workload) for u in result.workload_usage}
        assert (INJECTION, INJECTION) in {(r.namespace, r.workload) for r in result.workload_requests}
        expected = SimStep1(DictRows(held(store, "ts", data))).step1(timedelta(hours=1), NOW, CAPACITY)
        _same(_keyed(result), _keyed(expected))
        for rule in ALERT_RULES:
            with contextlib.suppress(NoData):
                metrics.alert_rows(rule, NOW - timedelta(minutes=25))
        assert (INJECTION, INJECTION) in metrics.latest_worker_usage(NOW - timedelta(minutes=29))
        assert any(
            r["workload"] == INJECTION for r in metrics.rows("tf_worker_usage", NOW - timedelta(hours=1), NOW)
        )
        mine = list(metrics.workload_rows(INJECTION, INJECTION, NOW - timedelta(hours=1), NOW))
        assert [(r["namespace"], r["workload"]) for r in mine] == [(INJECTION, INJECTION)]
    with psycopg.connect(store.dsn("inject"), autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM tf_worker_usage WHERE workload = %s", (INJECTION,)
        ).fetchone()
        assert row == (1,)


# -- usage figures that follow the data ------------------------------------------------------------


def _by_workload(s: Step1) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    return {(u.namespace, u.workload): (u.tflops_avg, u.tflops_peak) for u in s.workload_usage}


def test_compute_tflops_is_used_where_written_and_derived_where_all_zero(store: MetricsStore) -> None:
    data = step1_rows()  # compute_tflops written as 0.0 everywhere: derived from compute % × capacity
    for r in data["tf_worker_usage"]:
        if r["uuid"] == A100_1:  # llama's pod on A100_1 reports TFLOPS
            r["compute_tflops"] = {4.0: 11.0, 8.0: 23.0}[r["compute_percentage"]]
    for col in VARIANTS:
        with _metrics(make_db(store, f"tflops_{col}", col, data)) as metrics:
            got = metrics.step1(timedelta(hours=1), NOW, CAPACITY)
            use = _by_workload(got)
            # A100_1's group from compute_tflops; A100_3's (2 % of 312) still derived
            assert use[("ml-serving", "llama3-8b-infer")] == (
                pytest.approx((11.0 + 23.0 + 0.02 * 312.0) / 3),
                pytest.approx(23.0),
            )
            assert use[("ml-serving", "qwen2-72b-infer")] == (pytest.approx(385.71), pytest.approx(385.71))
            expected = SimStep1(DictRows(held(store, col, data))).step1(timedelta(hours=1), NOW, CAPACITY)
            _same(_keyed(got), _keyed(expected))
            latest = metrics.latest_worker_usage(NOW - timedelta(minutes=20), timedelta(minutes=1))
            assert [w.tflops for w in latest.values()] == [23.0]  # the written figure, not 8 % × 312


def test_gpu_known_only_to_the_metrics_takes_its_capacity_from_tf_gpu_metrics(store: MetricsStore) -> None:
    data = step1_rows()
    data["tf_gpu_metrics"] = full_rows("tf_gpu_metrics", [
        {"gpu": g, "node": "gpu-a100-1", "pool": "demo-shared", "gpu_model": "A100", "phase": "Running",
         "capacity_tflops": t, "capacity_vram_bytes": float(v), "ts": NOW - timedelta(minutes=m)}
        for g, t, v, m in ((A100_1, 312.0, 80 * GI, 30), (A100_1, 312.0, 80 * GI, 20),
                           (UNKNOWN_GPU, 100.0, 16 * GI, 30), (H100_5, 1.0, 1.0, 30))
    ])  # fmt: skip
    released = {g: c for g, c in CAPACITY.items() if g != A100_1}  # A100_1's GPU object is gone
    for col in VARIANTS:
        with _metrics(make_db(store, f"gpumetrics_{col}", col, data)) as metrics:
            got = metrics.step1(timedelta(hours=1), NOW, released)
            gpus = {g.uuid: g.vram_peak_pct for g in got.gpus}
            assert gpus[A100_1] == pytest.approx(15.0)  # 12 GiB of its 80 GiB, from memory_bytes
            assert gpus[UNKNOWN_GPU] == pytest.approx(12.5)  # 2 GiB of 16 GiB
            assert gpus[H100_5] == pytest.approx(
                73014444032 / (81559 * MI) * 100
            )  # the cluster's figure wins
            assert got.missing == ()  # no GPU of unknown capacity left
            use = _by_workload(got)
            assert use[("research", "llama3-8b-infer")] == (
                pytest.approx(1.0),
                pytest.approx(1.0),
            )  # 1 % of 100
            expected = SimStep1(DictRows(held(store, col, data))).step1(timedelta(hours=1), NOW, released)
            _same(_keyed(got), _keyed(expected))


# -- GreptimeDB's reading of the SQL ----------------------------------------------------------------


def test_latest_usage_joins_carry_the_window_on_both_sides(dialect_server: Any) -> None:
    from tests.stores import DialectStore

    store = DialectStore(dialect_server)
    with _metrics(
        make_db(store, "latest_window", "greptime_timestamp", step1_rows()), gpu_capacity=CAPACITY
    ) as metrics:
        sent = len(dialect_server.wire.queries)
        assert set(metrics.latest_gpu_usage(NOW - timedelta(minutes=29))) == {
            A100_1,
            A100_2,
            H100_5,
            UNKNOWN_GPU,
        }
        assert len(metrics.latest_worker_usage(NOW - timedelta(minutes=29))) == 4
        queries = [q for q in dialect_server.wire.queries[sent:] if "JOIN" in q]
        assert len(queries) == 2
        for q in queries:  # the window's two bounds on the inner (max) side and on the outer side
            assert q.count("greptime_timestamp\" >= '2026-11-30 11:26:00'::timestamp") == 2, q
