"""Missing data is never a decision: NULL rows and rows on a GPU the cluster does not know, on PostgreSQL.

A day of `tf_worker_usage` rows whose compute and memory are NULL (workload `nulls`), or whose `uuid`
matches no GPU (workload `ghost`: compute 0 %, so a reader that derived TFLOPS as % × 0 capacity
would see an idle workload), must never lower a request, never be called `idle-reservation`, never
suggest `replicas: 0`: step 1 and the diagnosis say `no-data`, autoscale holds (plan, recommend,
the daemon's loop with the store-aggregated first load and the raw-row later loads), the console
shows `—`. Workload `busy` has real, low usage on the same cluster and *is* lowered and diagnosed:
the checks below would see a decision if one were made.

All of it runs against the suite's real stores — PostgreSQL (tests/pg.py) and the GreptimeDB-dialect
server — through `GreptimeMetrics`, the adapter the daemon and the console use.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.engine_builders import build, host, pool, worker, workload
from tests.pg import GI, full_rows
from tests.stores import MetricsStore
from tftui.cli import main
from tftui.daemon import Daemon, DaemonOptions
from tftui.engine.autoscale import AutoscaleState, plan_autoscale, recommend
from tftui.engine.plan import AnnotatePod, PatchWorkloadStatus
from tftui.engine.waste import diagnose
from tftui.model.dump import dumps
from tftui.model.quantity import parse_quantity
from tftui.sources.greptime import GreptimeMetrics
from tftui.sources.sim.acting import ActingSimCluster
from tftui.ui.load.analysis import compute_history, compute_waste
from tftui.ui.load.data import load
from tftui.ui.render.format import NO_DATA
from tftui.ui.render.metricsviews import workload_figures
from tftui.ui.render.views import Gauges, layout_for
from tftui.ui.render.workviews import workloads_table

TFK, TFL, VK, VL = (
    f"tensor-fusion.ai/{k}" for k in ("tflops-request", "tflops-limit", "vram-request", "vram-limit")
)
SILENT = ("default/nulls", "default/ghost")
BUSY = "default/busy"
ON = {"autoScalingConfig": {"autoSetResources": {"enable": True}}}


def _objects(now: datetime) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [pool(), *host("n1", gpus=4, tflops=1000, vram="80Gi")]
    for i, name in enumerate(("nulls", "ghost", "busy")):
        objs.append(workload(name, tflops=300, vram="32Gi", spec=ON))
        objs.append(worker(name, [f"n1-gpu-{i}"], workload=name, tflops=300, vram="32Gi"))
    for o in objs:
        o["metadata"]["creationTimestamp"] = (now - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return objs


def _rows(now: datetime) -> dict[str, list[dict[str, Any]]]:
    """A day, one row per minute: `nulls` all NULL, `ghost` on an unknown GPU, `busy` at 3 %."""
    usage, gpus, nodes, requests = [], [], [], []
    for m in range(24 * 60, 0, -1):
        ts = now - timedelta(minutes=m)
        for i, (name, uuid, pct, mem) in enumerate(
            (
                ("nulls", "n1-gpu-0", None, None),
                ("ghost", "gpu-matches-no-gpu", 0.0, None),
                ("busy", "n1-gpu-2", 3.0, 4 * GI),
            )
        ):
            usage.append({"namespace": "default", "workload": name, "worker": name, "pod_name": name,
                          "pool": "p", "node": "n1", "uuid": uuid, "compute_percentage": pct,
                          "compute_tflops": None if pct is None else 0.0, "memory_bytes": mem, "ts": ts})  # fmt: skip
            requests.append({"namespace": "default", "workload": name, "worker": name, "pool": "p",
                             "tflops_request": 300.0, "vram_bytes_request": 32.0 * GI, "gpu_count": 1, "ts": ts})  # fmt: skip
            if i != 1:  # the ghost's GPU reports nothing; n1-gpu-0 reports NULLs
                gpus.append({"node": "n1", "pool": "p", "uuid": f"n1-gpu-{i}", "compute_percentage": pct,
                             "memory_bytes": mem, "memory_percentage": None, "ts": ts})  # fmt: skip
        nodes.append({"node": "n1", "pool": "p", "allocated_tflops_percent": None,
                      "allocated_vram_percent": None, "ts": ts})  # fmt: skip
    return {
        "tf_worker_usage": full_rows("tf_worker_usage", usage),
        "tf_gpu_usage": full_rows("tf_gpu_usage", gpus),
        "tf_node_metrics": full_rows("tf_node_metrics", nodes),
        "tf_worker_resources": full_rows("tf_worker_resources", requests),
    }


class Store:
    def __init__(self, dsn: str, now: datetime, objs: list[dict[str, Any]], dump: Path) -> None:
        self.dsn, self.now, self.objs, self.dump = dsn, now, objs, dump

    def metrics(self) -> GreptimeMetrics:
        return GreptimeMetrics(self.dsn, connect_timeout=3)


@pytest.fixture(scope="module", name="data")
def _data(store: MetricsStore, tmp_path_factory: pytest.TempPathFactory) -> Store:
    """The rows in each metrics store of the suite in turn (PostgreSQL, the GreptimeDB dialect)."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    objs = _objects(now)
    dump = tmp_path_factory.mktemp("missing") / "dump.json"
    dump.write_text(dumps(objs), encoding="utf-8")
    store.create("missing")
    store.load("missing", _rows(now))
    return Store(store.dsn("missing"), now, objs, dump)


def _not_lowered(res: dict[str, Any], current: str = "300", vram: str = "32Gi") -> None:
    """A recommendation (upstream JSON) that keeps both requests at least where they are."""
    assert parse_quantity(res["requests"]["tflops"]) >= parse_quantity(current), res
    assert parse_quantity(res["requests"]["vram"]) >= parse_quantity(vram), res


# -- step 1 and the diagnosis ------------------------------------------------------------------------


def test_step1_figures_are_none_not_zero(data: Store) -> None:
    state = build(data.objs)
    with data.metrics() as m:
        s = m.step1(
            timedelta(days=1),
            data.now,
            {n: (g.capacity.tflops, g.capacity.vram) for n, g in state.gpus.items()},
        )
    use = {u.workload: u for u in s.workload_usage}
    assert (use["nulls"].tflops_avg, use["nulls"].tflops_peak, use["nulls"].vram_peak_bytes) == (
        None,
        None,
        None,
    )
    assert (use["ghost"].tflops_avg, use["ghost"].tflops_peak) == (None, None)
    assert use["nulls"].samples == use["ghost"].samples == 24 * 60  # the rows were there
    assert use["busy"].tflops_avg == pytest.approx(30.0)
    gpus = {g.uuid: g for g in s.gpus}
    assert gpus["n1-gpu-0"].compute_used_pct is None and gpus["n1-gpu-0"].vram_peak_bytes is None
    (node,) = s.nodes
    assert (node.tflops_allocated_pct, node.vram_allocated_pct) == (None, None)
    assert "capacity of gpu-matches-no-gpu" in s.missing


def test_diagnosis_says_no_data_never_idle(data: Store) -> None:
    state = build(data.objs)
    with data.metrics() as m:
        s = m.step1(
            timedelta(days=1),
            data.now,
            {n: (g.capacity.tflops, g.capacity.vram) for n, g in state.gpus.items()},
        )
    d = diagnose(s, state)
    wl = {w.key: w for w in d.workloads}
    for key in SILENT:
        assert wl[key].classes == ("no-data",), key
    assert wl[BUSY].classes != ("no-data",) and "over-request" in wl[BUSY].classes  # the control
    assert {g.name: g.classes for g in d.gpus}["n1-gpu-0"] == ("no-data",)
    assert {n.name: n.classes for n in d.nodes}["n1"] == ("no-data",)
    silent = [f for f in d.findings if f.name in SILENT or f.name in ("n1-gpu-0", "n1-gpu-1")]
    assert silent == []
    assert not any("replicas: 0" in fix for f in d.findings for fix in f.fixes if f.name in SILENT)


def test_report_cli_says_no_data(data: Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--from", str(data.dump), "--metrics-dsn", data.dsn, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {f"{w['namespace']}/{w['name']}": w for w in doc["workloads"]}
    for key in SILENT:
        assert rows[key]["classes"] == ["no-data"], rows[key]
        assert rows[key]["tflops_avg"] is None and rows[key]["tflops_peak"] is None
    assert all(f["name"] not in SILENT for f in doc["findings"])
    assert main(["report", "--from", str(data.dump), "--metrics-dsn", data.dsn]) == 0
    text = capsys.readouterr().out
    assert "idle-reservation" not in text and "replicas: 0" not in text
    assert "over-request" in text  # busy


# -- autoscale ----------------------------------------------------------------------------------------


def _state_and_history(data: Store, *, aggregated: bool) -> tuple[Any, AutoscaleState]:
    state = build(data.objs)
    ast = AutoscaleState()
    ast.configure(state)
    start = data.now - timedelta(hours=2)
    with data.metrics() as m:
        if aggregated:
            q = ast.history_query(start, data.now)
            assert q is not None
            ast.add_pod_buckets(q, m.usage_histograms(q))
        else:
            ast.add_samples(list(m.rows("tf_worker_usage", start, data.now)))
    return state, ast


@pytest.mark.parametrize("aggregated", [True, False], ids=["store-aggregated", "raw-rows"])
def test_autoscale_never_lowers_on_missing_samples(data: Store, aggregated: bool) -> None:
    state, ast = _state_and_history(data, aggregated=aggregated)
    for key in SILENT:
        h = ast.workloads[key]
        assert h.samples == 0 and h.tf.is_empty() and h.first == math.inf, key
    assert ast.workloads["default/nulls"].vram_samples == 0
    ap = plan_autoscale(state, ast, data.now)
    assert ap.result is not None
    for key in SILENT:
        rec = ap.result.workloads[key]
        assert rec.reason == "no-data" and not rec.would_apply and rec.recommendation is None, rec.to_json()
    patched = {a.name for a in ap.actions() if isinstance(a, AnnotatePod)}
    assert patched == {"busy"}  # the control is lowered: 3 % of 1000 TFLOPS
    busy = ap.result.workloads[BUSY].recommendation
    assert busy is not None and busy.tf_req < parse_quantity("300")
    statuses = {
        s.name for s in ap.actions() if isinstance(s, PatchWorkloadStatus) and "recommendation" in s.fields
    }
    assert statuses == {"busy"}


def test_autoscale_with_vram_but_no_tflops_keeps_tflops(data: Store) -> None:
    """Real memory but no TFLOPS sample (unknown GPU): TFLOPS stays, never the ratio floor (30)."""
    state = build(data.objs)
    ast = AutoscaleState()
    ast.configure(state)
    rows = [
        dict(r, memory_bytes=2 * GI) for r in _rows(data.now)["tf_worker_usage"] if r["workload"] == "ghost"
    ]
    ast.add_samples(rows[-120:])
    rec = recommend(state, ast, data.now).workloads["default/ghost"]
    assert rec.recommendation is not None and rec.would_apply
    assert (str(rec.recommendation.tf_req), str(rec.recommendation.tf_lim)) == ("300", "300")
    assert rec.recommendation.vram_req < parse_quantity("32Gi")  # VRAM was measured: it may go down


def test_plan_and_recommend_cli(data: Store, capsys: pytest.CaptureFixture[str]) -> None:
    stamp = data.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    args = ["--from", str(data.dump), "--metrics-dsn", data.dsn, "--now", stamp, "--json"]
    assert main(["plan", *args]) == 0
    plan = json.loads(capsys.readouterr().out)
    for key in SILENT:
        s = plan["autoscale"][key]
        assert not s["wouldApply"] and s["reason"] == "no-data", s
        assert s["recommendation"] is None
    assert {a["name"] for a in plan["actions"] if a["kind"] == "annotate-pod"} == {"busy"}
    assert main(["recommend", *args]) == 0
    recs = {w["workload"]: w for w in json.loads(capsys.readouterr().out)["workloads"]}
    for key in SILENT:
        assert recs[key]["reason"] == "no-data" and recs[key]["samples"] == 0 and not recs[key]["wouldApply"]
    assert recs[BUSY]["wouldApply"]
    assert main(["recommend", *args[:-1]]) == 0
    text = capsys.readouterr().out
    block = text.split("default/nulls")[1].split("default/")[0]
    assert block.count("no data") == 2  # TFLOPS and VRAM


def test_daemon_loop_holds_missing_workloads(data: Store) -> None:
    """The daemon's autoscale loop on the store: first load aggregated in SQL, then raw rows."""
    sim = ActingSimCluster(objects=json.loads(json.dumps(data.objs)), now=data.now - timedelta(minutes=3))
    with data.metrics() as m:
        opts = DaemonOptions(listen=None, speed=math.inf, stop_at=data.now)
        daemon = Daemon(sim, m, opts, clock=sim.clock, advance=sim.advance)
        assert daemon.run() == 0
        rt_calls = daemon.ticks
    assert rt_calls >= 2
    pods = {p["metadata"]["name"]: p for p in sim.snapshot() if p["kind"] == "Pod"}
    for name in ("nulls", "ghost"):
        ann = pods[name]["metadata"]["annotations"]
        assert (ann[TFK], ann[VK]) == ("300", "32Gi"), ann
    assert parse_quantity(pods["busy"]["metadata"]["annotations"][TFK]) < parse_quantity("300")
    wls = {w["metadata"]["name"]: w for w in sim.snapshot() if w["kind"] == "TensorFusionWorkload"}
    for name in ("nulls", "ghost"):
        rec = (wls[name].get("status") or {}).get("recommendation")
        if rec is not None:
            _not_lowered(rec)


# -- console ------------------------------------------------------------------------------------------


def test_console_shows_a_dash(data: Store) -> None:
    sim = ActingSimCluster(objects=json.loads(json.dumps(data.objs)), now=data.now)
    with data.metrics() as m:
        console = load(sim, m, data.now - timedelta(minutes=1))
        for key in SILENT:
            used = console.usage.workloads[key]
            assert not used.has_tflops, key
        assert not console.usage.workloads["default/nulls"].has_vram
        assert console.usage.workloads[BUSY].has_tflops and console.usage.workloads[BUSY].has_vram
        table = workloads_table(console, Gauges(layout_for(200)), None)
        cells = {r.key: r.cells for r in table.rows}
        nulls = cells["default/nulls"]
        assert NO_DATA in str(nulls["tflops"]) and NO_DATA in str(nulls["vram"])
        history = compute_history(m, console, "default/nulls", span=timedelta(hours=2))
        assert history.rows > 0 and set(history.tflops) == {None} and set(history.vram) == {None}
        assert history.tflops_avg is None and history.vram_peak is None
        figures = workload_figures(console, "default/nulls", history)
        waste = compute_waste(m, console, timedelta(days=1))
    rendered = str([c for col in figures.columns for c in col._cells])
    assert rendered.count(NO_DATA) >= 4
    rows = {w.key: w for w in waste.report.workloads}
    assert rows["default/nulls"].classes == rows["default/ghost"].classes == ("no-data",)
