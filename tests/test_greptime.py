"""GreptimeMetrics against both metrics stores (tests/stores.py): PostgreSQL and the GreptimeDB-dialect
server (DataFusion behind pgwire, tables shaped as GreptimeDB holds them).

Every database exists twice per store, once per time-column name (`ts`, `greptime_timestamp`:
behaviour M1; on the dialect server the migration-DDL and the line-protocol layouts). Figures are
exact on hand-made rows (the same rows and numbers as tests/test_sim_step1.py), and the simulator's
history loaded into the store gives the same Step1 and alert rows as sim/step1.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import socket
from collections.abc import Iterator
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from tests.alert_oracle import PerStepAlerts
from tests.pg import (
    A100_1,
    A100_2,
    CAPACITY,
    EXPECTED_ALERTS,
    GI,
    H100_5,
    INJECTION,
    MI,
    NOW,
    PASSWORD,
    SIM_TABLES,
    UNKNOWN_GPU,
    DictRows,
    alert_rows_data,
    check_step1,
    free_port,
    full_rows,
    rounded,
    step1_rows,
)
from tests.stores import MetricsStore
from tftui.engine.alerts import RULES, AlertHistory, evaluate_history, evaluation_times, render
from tftui.model.metrics import ALERT_RULES, AlertResult, NoData, Step1, history_by_step
from tftui.model.quantity import quantity_float
from tftui.runtime.whatif_usage import recorded_usage
from tftui.sources.greptime import DSN_ENV, GreptimeMetrics, dsn_from_env
from tftui.sources.ports import SourceError
from tftui.sources.sim.cluster import generate_objects
from tftui.sources.sim.step1 import SimStep1
from tftui.sources.sim.usage import SimMetrics

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


@pytest.fixture(scope="module", params=VARIANTS)
def tiny(request: pytest.FixtureRequest, store: MetricsStore) -> Iterator[GreptimeMetrics]:
    col = request.param
    with _metrics(make_db(store, f"tiny_{col}", col, step1_rows())) as metrics:
        yield metrics


@dataclasses.dataclass
class Alerts:
    metrics: GreptimeMetrics
    store: MetricsStore
    col: str

    def expected(self, rule: str) -> list[dict[str, Any]] | str:
        """EXPECTED_ALERTS, or the NoData text where the layout lacks the rule's counter column."""
        col = {
            "WorkerTFlopsThrottled": "compute_throttled_cnt",
            "WorkerVRAMSwitchCountIncreasing": "vram_resumed_cnt",
        }
        if rule in col and not self.store.has(self.col, "tf_worker_usage", col[rule]):
            return f"{rule}: column tf_worker_usage.{col[rule]} does not exist (never written)"
        return EXPECTED_ALERTS[rule]


@pytest.fixture(scope="module", params=VARIANTS)
def alerts(request: pytest.FixtureRequest, store: MetricsStore) -> Iterator[Alerts]:
    col = request.param
    with _metrics(make_db(store, f"alerts_{col}", col, alert_rows_data())) as metrics:
        yield Alerts(metrics, store, col)


@dataclasses.dataclass
class Sim:
    metrics: SimMetrics
    capacity: dict[str, tuple[float, float]]
    dsn: dict[str, str]
    store: MetricsStore


@pytest.fixture(scope="module")
def sim(store: MetricsStore) -> Sim:
    """12 nodes, 3 h of the simulator's rows, loaded into both variants (no tf_system_metrics)."""
    objects = generate_objects(nodes=12)
    capacity = {
        o["metadata"]["name"]: (
            quantity_float(o["status"]["capacity"]["tflops"]),
            quantity_float(o["status"]["capacity"]["vram"]),
        )
        for o in objects
        if o["kind"] == "GPU"
    }
    metrics = SimMetrics(objects, history=timedelta(hours=3))
    dsn = {}
    start, end = metrics.now - timedelta(hours=4), metrics.now + timedelta(minutes=1)
    rows = {t: list(metrics.rows(t, start, end)) for t in SIM_TABLES}
    assert all(rows.values())
    for col in VARIANTS:
        dsn[col] = make_db(store, f"sim_{col}", col, rows, tables=(*SIM_TABLES, "tf_gpu_metrics"))
    return Sim(metrics, capacity, dsn, store)


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


# -- alerts ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", ALERT_RULES)
def test_alert_rules_fire_on_crafted_rows_only(alerts: Alerts, rule: str) -> None:
    expected = alerts.expected(rule)
    if isinstance(expected, str):
        with pytest.raises(NoData) as info:
            alerts.metrics.alert_rows(rule, NOW)
        assert str(info.value) == expected
    else:
        assert rounded(alerts.metrics.alert_rows(rule, NOW)) == expected


def test_alerts_empty_window_is_no_data(alerts: Alerts) -> None:
    rule = "WorkerTFlopsThrottled"
    if isinstance(alerts.expected(rule), str):  # no counter column: the engine-side GPU rule instead
        rule = "GPUTFlopsFull"
    with pytest.raises(NoData, match="no rows in tf_"):
        alerts.metrics.alert_rows(rule, NOW + timedelta(seconds=60))
    expected = [] if rule == "WorkerTFlopsThrottled" else EXPECTED_ALERTS[rule]
    assert rounded(alerts.metrics.alert_rows(rule, NOW + timedelta(seconds=10))) == expected


def test_alerts_never_written_columns_are_no_data(store: MetricsStore, sim: Sim) -> None:
    with _metrics(sim.dsn["ts"]) as metrics:
        for rule, pattern in (
            ("WorkerTFlopsThrottled", r"tf_worker_usage\.compute_throttled_cnt is never written"),
            ("WorkerVRAMSwitchCountIncreasing", r"tf_worker_usage\.vram_resumed_cnt is never written"),
            ("GPUVRAMFull", r"tf_gpu_usage\.memory_percentage is never written"),
            ("WorkerAllocationFailed", "table tf_system_metrics does not exist"),
        ):
            with pytest.raises(NoData, match=pattern):
                metrics.alert_rows(rule, sim.metrics.now)
    store.create("alerts_nocol", "ts", overrides={"tf_worker_usage": {"compute_throttled_cnt": None}})
    with (
        _metrics(store.dsn("alerts_nocol")) as metrics,
        pytest.raises(NoData, match=r"column tf_worker_usage\.compute_throttled_cnt does not exist"),
    ):
        metrics.alert_rows("WorkerTFlopsThrottled", NOW)


# -- same data, same report ------------------------------------------------------------------------------


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


@pytest.mark.parametrize("col", VARIANTS)
def test_same_step1_as_simulator(sim: Sim, col: str) -> None:
    port = SimStep1(sim.metrics)
    with _metrics(sim.dsn[col]) as metrics:
        for window, now in (
            (timedelta(hours=2), sim.metrics.now),
            (timedelta(minutes=37), sim.metrics.now - timedelta(minutes=50)),
        ):
            sql_result = metrics.step1(window, now, sim.capacity)
            sim_result = port.step1(window, now, sim.capacity)
            assert len(sql_result.workload_usage) > 20 and len(sql_result.gpus) > 50
            _same(_keyed(sql_result), _keyed(sim_result))
        assert metrics.describe().endswith(f"(time column {col})")


def test_same_alert_rows_as_simulator(sim: Sim) -> None:
    port = SimStep1(sim.metrics)
    with _metrics(sim.dsn["greptime_timestamp"]) as metrics:
        for now in (sim.metrics.now, sim.metrics.now - timedelta(minutes=7, seconds=30)):
            for rule in ALERT_RULES:
                try:
                    expected: Any = port.alert_rows(rule, now)
                except NoData:
                    expected = NoData
                try:
                    got: Any = metrics.alert_rows(rule, now)
                except NoData:
                    got = NoData
                if expected is NoData or got is NoData:
                    assert got is expected, rule
                else:
                    _same(got, expected, rule)


def test_latest_usage_and_rows_as_simulator(sim: Sim) -> None:
    col = "ts" if sim.store.has("ts", "tf_worker_usage", "pod_name") else "greptime_timestamp"  # pods by name
    with _metrics(sim.dsn[col], gpu_capacity=sim.capacity) as metrics:
        now = sim.metrics.now - timedelta(seconds=30)
        _same(metrics.latest_gpu_usage(now), sim.metrics.latest_gpu_usage(now))
        _same(metrics.latest_worker_usage(now), sim.metrics.latest_worker_usage(now))
        assert metrics.latest_gpu_usage(now + timedelta(days=1)) == {}
        start, end = now - timedelta(minutes=3), now
        got = list(metrics.rows("tf_node_metrics", start, end))
        want = list(sim.metrics.rows("tf_node_metrics", start, end))
        key = lambda r: (r["ts"], r["node"])  # noqa: E731
        assert [r["ts"] for r in got] == sorted(r["ts"] for r in got)  # ordered by time
        _same(sorted(({k: r[k] for k in want[0]} for r in got), key=key), sorted(want, key=key))


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


# -- batched alert replay ---------------------------------------------------------------------------------

REPLAY_SPAN = timedelta(minutes=20)


def replay_rows(offset: timedelta = timedelta(0)) -> dict[str, list[dict[str, Any]]]:
    """25 minutes before NOW (+ `offset`) shaped to corner the batched replay.

    Samples fall exactly on window edges (every 15/30 s against 15/30/60 s…10 min windows), plus
    off-grid ones; every table has a gap (windows with no rows: NoData between evaluations); values
    sit on thresholds (allocation 95 % = 5 % left, not < 5; compute 97 %, temperature 90 °C,
    compute 1 % for IdleGPU: not above/below); the throttle counter is 0 for a while (sentinel
    NoData per window); g1 reports from two pools and n1 from two pools (duplicate fingerprints in
    one evaluation); a tf_worker_usage row has a NULL node; n3 never has a worker (EmptyGPU); n4's
    one worker reports every 10 min on the grid, so some 5 min windows see it only on their edge.
    """
    end = NOW + offset

    def at(seconds: float) -> datetime:
        return end - timedelta(seconds=seconds)

    def gap(seconds: float, lo: float, hi: float) -> bool:
        return lo <= seconds <= hi

    nm: list[dict[str, Any]] = []
    for i in range(0, 25 * 60 + 1, 30):
        if gap(i, 9 * 60 + 10, 12 * 60 - 10):
            continue
        k = i // 30
        nm += [
            {"node": "n1", "pool": "p1", "allocated_tflops_percent": 94.0 if k % 2 else 96.0,
             "allocated_vram_percent": 95.0, "ts": at(i)},
            {"node": "n2", "pool": "p1", "allocated_tflops_percent": 91.0 if i > 600 else 85.0,
             "allocated_vram_percent": 99.5 if 300 <= i <= 480 else 60.0, "ts": at(i)},
            {"node": "n3", "pool": "p2", "allocated_tflops_percent": 50.0, "allocated_vram_percent": 50.0,
             "ts": at(i)},
            {"node": "n4", "pool": "p2", "allocated_tflops_percent": 50.0, "allocated_vram_percent": 50.0,
             "ts": at(i)},
        ]  # fmt: skip
        if k % 5 == 0:
            nm.append({"node": "n1", "pool": "p2", "allocated_tflops_percent": 99.0,
                       "allocated_vram_percent": 92.0, "ts": at(i + 7.5)})  # fmt: skip
    gu: list[dict[str, Any]] = []
    for i in range(0, 25 * 60 + 1, 15):
        if gap(i, 4 * 60 + 5, 6 * 60 - 5):
            continue
        k = i // 15
        hot = 97.0 if k % 3 == 0 else 99.0
        gu += [
            {"node": "n1", "pool": "p1", "uuid": "g1", "compute_percentage": hot, "memory_percentage": hot,
             "memory_bytes": 70 * GI, "temperature": 90.0 if k % 2 else 91.0, "ts": at(i)},
            {"node": "n2", "pool": "p1", "uuid": "g2", "compute_percentage": 20.0, "memory_percentage": 97.0,
             "memory_bytes": 8 * GI, "temperature": 60.0, "ts": at(i)},
            {"node": "n3", "pool": "p2", "uuid": "g3", "compute_percentage": 0.5 if i < 900 else 3.0,
             "memory_percentage": 2.0, "memory_bytes": GI, "temperature": 40.0, "ts": at(i)},
            {"node": "n3", "pool": "p2", "uuid": "g4", "compute_percentage": 1.0, "memory_percentage": 0.0,
             "memory_bytes": 0, "temperature": 40.0, "ts": at(i)},
        ]  # fmt: skip
        if k % 4 == 1:
            gu.append({"node": "n1", "pool": "p9", "uuid": "g1", "compute_percentage": 98.0,
                       "memory_percentage": 98.0, "memory_bytes": 70 * GI, "temperature": 95.0,
                       "ts": at(i + 3.25)})  # fmt: skip
    wu: list[dict[str, Any]] = []
    for i in range(0, 25 * 60 + 1, 15):
        if gap(i, 7 * 60 + 5, 8 * 60 - 5):
            continue
        k = i // 15
        throttled = 0 if i < 3 * 60 else (25 * 60 - i) // 45  # restarted 3 min ago
        wu += [
            {"workload": "wl", "worker": "A", "pod_name": "pod-A", "namespace": "ns", "pool": "p1", "node": "n1",
             "uuid": "g1", "compute_percentage": 10.0, "memory_bytes": GI, "memory_percentage": 10.0,
             "compute_tflops": 0.0, "compute_throttled_cnt": throttled, "vram_resumed_cnt": k // 7,
             "ts": at(i)},
            {"workload": "wl", "worker": "B", "pod_name": "pod-B", "namespace": "ns", "pool": "p1",
             "node": "n2" if i < 20 * 60 else None, "uuid": "g2", "compute_percentage": 10.0,
             "memory_bytes": GI, "memory_percentage": 10.0, "compute_tflops": 0.0,
             "compute_throttled_cnt": 0, "vram_resumed_cnt": 0, "ts": at(i)},
        ]  # fmt: skip
    wu += [
        {"workload": "wl", "worker": "C", "pod_name": "pod-C", "namespace": "ns", "pool": "p2", "node": "n4",
         "uuid": "g5", "compute_percentage": 10.0, "memory_bytes": GI, "memory_percentage": 10.0,
         "compute_tflops": 0.0, "compute_throttled_cnt": 0, "vram_resumed_cnt": 0, "ts": at(i)}
        for i in range(0, 25 * 60 + 1, 600)
    ]  # fmt: skip
    sm = [
        {"pool": "p1", "total_allocation_fail_cnt": i // 100, "ts": at(i)}
        for i in range(0, 25 * 60 + 1, 20)
        if not gap(i, 2 * 60 + 5, 3 * 60 - 5)
    ]
    return {
        "tf_node_metrics": full_rows("tf_node_metrics", nm),
        "tf_gpu_usage": full_rows("tf_gpu_usage", gu),
        "tf_worker_usage": full_rows("tf_worker_usage", wu),
        "tf_system_metrics": full_rows("tf_system_metrics", sm),
    }


OFFSETS = {"ts": timedelta(0), "greptime_timestamp": timedelta(milliseconds=123)}


@dataclasses.dataclass
class Replay:
    metrics: GreptimeMetrics
    offset: timedelta
    store: MetricsStore
    col: str

    def __iter__(self) -> Iterator[Any]:
        return iter((self.metrics, self.offset))

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        """The rows as the store holds them (without the columns its layout lacks)."""
        return held(self.store, self.col, replay_rows(self.offset))


@pytest.fixture(scope="module", params=VARIANTS)
def replay(request: pytest.FixtureRequest, store: MetricsStore) -> Iterator[Replay]:
    """`replay_rows` in each variant; the second one off the whole second (`now` and rows .123 s)."""
    col = request.param
    with _metrics(make_db(store, f"replay_{col}", col, replay_rows(OFFSETS[col]))) as metrics:
        yield Replay(metrics, OFFSETS[col], store, col)


def _results(results: list[AlertResult]) -> list[Any]:
    return [("NoData", str(r)) if isinstance(r, NoData) else rounded(r) for r in results]


def test_batched_replay_equals_the_per_step_queries(replay: Replay) -> None:
    metrics, offset = replay
    oracle = PerStepAlerts(metrics)
    gaps = firing = duplicates = 0
    for now in (NOW + offset, NOW + offset - timedelta(minutes=3, seconds=15)):
        grid = {rule.name: evaluation_times(rule, now, REPLAY_SPAN) for rule in RULES}
        together = metrics.alert_histories(grid)  # rules of one table and interval share queries
        for rule in RULES:
            times = grid[rule.name]
            if isinstance(together[rule.name], NoData):  # a column the layout lacks: nothing to replay
                with pytest.raises(NoData):
                    metrics.alert_history(rule.name, times)
                continue
            got = metrics.alert_history(rule.name, times)  # the rule alone
            expected = [r for t in times for r in history_by_step(oracle.alert_rows, rule.name, [t])]
            if isinstance(expected[-1], NoData):  # not evaluable now: the replay is skipped
                expected = [expected[-1]] * len(times)
            assert _results(got) == _results(expected), (rule.name, now)
            assert _results(_listed(together[rule.name])) == _results(expected), (rule.name, now)
            gaps += sum(isinstance(r, NoData) for r in got[:-1])
            for r in got:
                if not isinstance(r, NoData):
                    firing += len(r)
                    duplicates += len(r) - len({render(rule.instance, x) for x in r})
    assert gaps > 20 and firing > 200 and duplicates > 10  # the data does corner the replay


def test_batched_replay_gives_the_same_alerts(replay: Replay) -> None:
    metrics, offset = replay
    now = NOW + offset
    batched = evaluate_history(metrics, RULES, now=now, span=REPLAY_SPAN)
    per_step = evaluate_history(PerStepAlerts(metrics), RULES, now=now, span=REPLAY_SPAN)
    sim = evaluate_history(SimStep1(DictRows(replay.rows())), RULES, now=now, span=REPLAY_SPAN)
    _same(batched, per_step)
    _same(batched, sim)
    states = {s.rule: s.state for s in batched.statuses}
    assert states["WorkerTFlopsThrottled"] == "no-data"  # counter 0 all through the last window
    assert {a.rule for a in batched.firing} >= {
        "GPUTFlopsFull", "GPUVRAMFull", "GPUTemperatureHigh", "NodeTFlopsAllocationWarning", "EmptyGPU",
    }  # fmt: skip
    assert any(t.kind == "resolved" for t in batched.transitions)
    assert len(batched.transitions) > 5


def test_batched_replay_costs_a_few_queries_per_rule(replay: Replay) -> None:
    metrics, offset = replay
    calls: list[str] = []
    run = metrics._run

    def counted(query: Any, params: Any, doing: str, table: str) -> Any:
        calls.append(doing)
        return run(query, params, doing, table)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(metrics, "_run", counted)
        for span in (timedelta(minutes=5), REPLAY_SPAN):
            calls.clear()
            evaluate_history(metrics, RULES, now=NOW + offset, span=span)
            # per family (table × interval): a probe of the last window, counts per step, one rows
            # query per set of group keys (EmptyGPU: + busy nodes); only the probe when no data now
            counters = replay.store.has(replay.col, "tf_worker_usage", "compute_throttled_cnt")
            families = {  # without the counter columns (line protocol) those rules read nothing
                "worker_usage@15s": 1
                if counters
                else 0,  # WorkerTFlopsThrottled: counter 0 in the last window
                "worker_usage@2m": 3 if counters else 0,
                "system_metrics@30s": 3,
                "gpu_usage@30s": 3,  # GPUVRAMFull, GPUTFlopsFull, GPUTemperatureHigh: one rows query
                "node_metrics@1m": 4,  # 7 rules: one rows query per node, one per pool
                "node_metrics@5m": 4,  # EmptyGPU
                "gpu_usage@10m": 3,  # IdleGPU
            }
            assert len(calls) == sum(families.values()), span
    oracle = PerStepAlerts(metrics)
    evaluate_history(oracle, RULES, now=NOW + offset, span=REPLAY_SPAN)
    assert oracle.queries > 500  # what the replay used to cost over 20 min (× 3 per hour)


def _either(result: list[AlertResult] | NoData) -> Any:
    """A rule's results, or the reason it has none at all (its table or column is absent)."""
    return ("absent", str(result)) if isinstance(result, NoData) else _results(result)


def _listed(result: list[AlertResult] | NoData) -> list[AlertResult]:
    """A rule's results from `alert_histories`: a list (NoData as a whole means an absent table)."""
    assert not isinstance(result, NoData), result
    return result


def test_rules_asked_together_get_their_own_rows(alerts: Alerts, replay: Replay) -> None:
    """One instant each: rules of one table with other intervals, keys or filters are not mixed up."""
    got = alerts.metrics.alert_histories({rule: [NOW] for rule in ALERT_RULES})
    for rule in ALERT_RULES:
        expected = alerts.expected(rule)
        if isinstance(expected, str):
            assert isinstance(got[rule], NoData) and str(got[rule]) == expected
        else:
            assert _results(_listed(got[rule])) == [expected], rule
    metrics, offset = replay
    for back in (0, 5 * 60, 10 * 60):
        now = NOW + offset - timedelta(seconds=back)
        together = metrics.alert_histories({rule: [now] for rule in ALERT_RULES})
        for rule in ALERT_RULES:
            alone = metrics.alert_histories({rule: [now]})[rule]
            assert _either(together[rule]) == _either(alone), (rule, back)
    # 5 min ago the 30 s GPU windows fall in the data's gap, IdleGPU's 10 min window does not
    gap = metrics.alert_histories(
        {r: [NOW + offset - timedelta(minutes=5)] for r in ("GPUTFlopsFull", "IdleGPU")}
    )
    assert isinstance(_listed(gap["GPUTFlopsFull"])[0], NoData)
    assert not isinstance(_listed(gap["IdleGPU"])[0], NoData)


def test_batched_replay_rejects_times_off_the_grid(alerts: Alerts) -> None:
    with pytest.raises(ValueError, match="must be 0:00:30 apart"):
        alerts.metrics.alert_history("GPUVRAMFull", [NOW - timedelta(seconds=20), NOW])
    assert alerts.metrics.alert_history("GPUVRAMFull", []) == []


def _without_details(h: AlertHistory) -> AlertHistory:
    return dataclasses.replace(h, statuses=tuple(dataclasses.replace(s, detail="") for s in h.statuses))


def test_same_alert_history_as_simulator(sim: Sim) -> None:
    with _metrics(sim.dsn["ts"]) as metrics:
        for now in (sim.metrics.now, sim.metrics.now - timedelta(minutes=7, seconds=30)):
            got = evaluate_history(metrics, RULES, now=now, span=timedelta(hours=1))
            expected = evaluate_history(SimStep1(sim.metrics), RULES, now=now, span=timedelta(hours=1))
            # a column the simulator never writes is absent there and NULL in the table: both NoData
            _same(_without_details(got), _without_details(expected))
            assert {s.rule for s in got.statuses if s.state == "no-data"} == {
                "WorkerTFlopsThrottled", "WorkerVRAMSwitchCountIncreasing", "WorkerAllocationFailed", "GPUVRAMFull",
            }  # fmt: skip
            assert got.transitions or got.firing or got.pending


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


def test_all_fifteen_rules_together_through_evaluate_history(alerts: Alerts) -> None:
    """The whole replay (every family at once, as `tftui report` runs it) gets a result for every rule."""
    history = evaluate_history(alerts.metrics, RULES, now=NOW, span=timedelta(minutes=2))
    states = {s.rule: s.state for s in history.statuses}
    assert list(states) == list(ALERT_RULES)
    for rule in ALERT_RULES:
        expected = alerts.expected(rule)
        if isinstance(expected, str):
            assert states[rule] == "no-data", rule
        else:
            assert states[rule] != "no-data", rule
            last = alerts.metrics.alert_history(
                rule, evaluation_times(RULES[ALERT_RULES.index(rule)], NOW, timedelta(minutes=2))
            )[-1]
            assert not isinstance(last, NoData) and rounded(last) == expected, rule
    seen = {a.rule for a in (*history.firing, *history.pending)}
    assert seen >= {
        "WorkerAllocationFailed",
        "NodeTFlopsAllocationCritical",
        "PoolVRAMAllocationWarning",
        "EmptyGPU",
    }


def test_now_and_bounds_are_read_at_whole_milliseconds(replay: Replay) -> None:
    """A `now` with microseconds reads what the store reads: the windows of `now` floored to the millisecond."""
    metrics, offset = replay
    extra = timedelta(microseconds=456)
    now = NOW + offset + extra
    oracle = SimStep1(DictRows({**replay.rows(), "tf_worker_resources": []}))
    for rule in RULES:
        times = evaluation_times(rule, now, REPLAY_SPAN)
        got = metrics.alert_histories({rule.name: times})[rule.name]
        if isinstance(got, NoData):
            continue
        expected = oracle.alert_history(rule.name, [t - extra for t in times])
        if isinstance(expected[-1], NoData):  # not evaluable now: the replay is skipped
            expected = [expected[-1]] * len(times)
        assert _results(got) == _results(expected), rule.name
    step1 = metrics.step1(timedelta(minutes=20), now, CAPACITY)
    _same(_keyed(dataclasses.replace(step1, now=now - extra)),
          _keyed(oracle.step1(timedelta(minutes=20), now - extra, CAPACITY)))  # fmt: skip


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
