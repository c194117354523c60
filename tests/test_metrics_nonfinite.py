"""A NaN or ±Infinity in a metrics table (a writer's division by zero) is no sample, on both stores.

Before: the report printed `nan%` and `inf`, its JSON held `NaN`/`Infinity` tokens (a document `jq`
and other strict readers refuse), and one such TFLOPS sample made the autoscaler's history query
fail to convert its bucket, pausing autoscale for every workload. Now a figure that a non-finite
value reaches is unknown (as NULL is), the others are untouched, and JSON never carries one.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.pg import A100_1, A100_2, CAPACITY, H100_5, NOW, alert_rows_data, full_rows, step1_rows
from tests.stores import MetricsStore
from tests.test_report_store import shifted
from tftui.engine.autoscale import AutoscaleState
from tftui.model.usage import ObjectHistoryQuery
from tftui.sources.greptime import GreptimeMetrics

NAN, INF = math.nan, math.inf


def poisoned() -> dict[str, list[dict[str, Any]]]:
    """`step1_rows()` with non-finite values in one group of each step-1 query."""
    data = step1_rows()
    gpu = [r for r in data["tf_gpu_usage"] if r["uuid"] == A100_1]
    gpu[0]["compute_percentage"] = NAN  # A100_1's compute % is unknown; A100_2's is not
    node = [r for r in data["tf_node_metrics"] if r["node"] == "gpu-a100-2"]
    node[0]["allocated_tflops_percent"] = INF
    req = [r for r in data["tf_worker_resources"] if r["namespace"] == "research"]
    req[0]["tflops_request"] = -INF
    use = [r for r in data["tf_worker_usage"] if r["uuid"] == H100_5]
    use[0]["compute_percentage"] = NAN
    return data


def _strict(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_step1_and_latest_usage_take_a_non_finite_value_as_no_sample(store: MetricsStore) -> None:
    store.create("nonfinite", "ts")
    store.load("nonfinite", poisoned(), "ts")
    with GreptimeMetrics(store.dsn("nonfinite"), connect_timeout=3, gpu_capacity=CAPACITY) as metrics:
        result = metrics.step1(timedelta(hours=1), NOW, CAPACITY)
        gpus = {g.uuid: g.compute_used_pct for g in result.gpus}
        assert gpus[A100_1] is None and gpus[A100_2] == pytest.approx(0.0)  # the clean GPU keeps its figure
        nodes = {n.node: (n.tflops_allocated_pct, n.vram_allocated_pct) for n in result.nodes}
        assert nodes["gpu-a100-2"][0] is None and nodes["gpu-a100-2"][1] == pytest.approx(18.75)
        assert nodes["gpu-a100-1"][0] == pytest.approx(20.23)
        reqs = {(r.namespace, r.workload): r.tflops_request for r in result.workload_requests}
        assert reqs[("research", "llama3-8b-infer")] is None
        assert reqs[("ml-serving", "qwen2-72b-infer")] == pytest.approx(400.0)
        for usage in result.workload_usage:
            for value in (usage.tflops_avg, usage.tflops_peak, usage.vram_peak_bytes):
                assert value is None or math.isfinite(value), usage
        latest = metrics.latest_gpu_usage(NOW - timedelta(minutes=29), timedelta(hours=1))
        assert all(u.compute_percent is None or math.isfinite(u.compute_percent) for u in latest.values())


def test_a_non_finite_tflops_sample_does_not_stop_the_autoscalers_history(store: MetricsStore) -> None:
    """The history query puts such a sample in no TFLOPS bucket (as a NULL): the load succeeds."""
    store.create("nonfinite_hist", "ts")
    store.load("nonfinite_hist", poisoned(), "ts")
    astate = AutoscaleState()
    astate.gpu_tflops = {g: c[0] for g, c in CAPACITY.items()}
    query = astate.history_query(NOW - timedelta(hours=1), NOW)
    assert query is not None
    with GreptimeMetrics(store.dsn("nonfinite_hist"), connect_timeout=3) as metrics:
        groups = metrics.usage_histograms(query)
        assert groups and all(math.isfinite(g.weight) for g in groups)
        assert astate.add_pod_buckets(query, groups) > 0
        series = metrics.object_history(
            ObjectHistoryQuery(kind="GPUNode", name="gpu-a100-1", start=NOW - timedelta(hours=1), end=NOW,
                               bucket=timedelta(minutes=15), gpu_tflops=((A100_1, 312.0), (A100_2, 312.0)))
        )  # fmt: skip
        assert all(v is None or math.isfinite(v) for v in (*series.used, *series.allocated))


def test_report_json_is_strict_json_and_says_no_data(store: MetricsStore, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    now = datetime.now(UTC).replace(microsecond=0)
    store.create("nonfinite_report", "greptime_timestamp")
    store.load(
        "nonfinite_report", shifted(poisoned(), now - timedelta(minutes=1) - NOW), "greptime_timestamp"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "TFTUI_METRICS_DSN")}
    env["HOME"] = str(home)
    base = [sys.executable, "-m", "tftui", "report", "--metrics-dsn", store.dsn("nonfinite_report")]
    done = subprocess.run([*base, "--window", "1h", "--json"], capture_output=True, text=True, env=env,
                          cwd=home, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = _strict(done.stdout)
    gpus = {g["name"]: g for g in report["gpus"]}
    assert gpus[A100_1]["compute_used_pct"] is None
    text = subprocess.run([*base, "--window", "1h"], capture_output=True, text=True, env=env, cwd=home,
                          timeout=120).stdout  # fmt: skip
    assert re.search(r"(?<![a-z])(nan|inf)(?![a-z])", text.lower()) is None, text


def test_no_alert_fires_on_a_non_finite_value(store: MetricsStore) -> None:
    """Both engines order NaN above every number: a NaN temperature passed `> 90`, averaged to NaN
    and fired GPUTemperatureHigh (GPUTFlopsFull likewise). Now such a sample is no sample: a GPU
    with only those does not fire, and one with real hot samples beside one fires on their mean;
    a node's allocation rules average the finite samples (a NaN made the node's figure unknown)."""
    data = alert_rows_data()
    for r in data["tf_gpu_usage"]:
        if r["uuid"] == "g3":  # cool and idle otherwise
            r["temperature"], r["compute_percentage"] = NAN, INF
    g1 = next(r for r in data["tf_gpu_usage"] if r["uuid"] == "g1")
    extra = {**g1, "temperature": NAN, "compute_percentage": NAN, "ts": NOW - timedelta(seconds=10)}
    data["tf_gpu_usage"] = [*data["tf_gpu_usage"], *full_rows("tf_gpu_usage", [extra])]
    n1 = next(r for r in data["tf_node_metrics"] if r["node"] == "n1")
    nan_node = {**n1, "allocated_tflops_percent": NAN, "ts": NOW - timedelta(seconds=10)}
    data["tf_node_metrics"] = [*data["tf_node_metrics"], *full_rows("tf_node_metrics", [nan_node])]
    store.create("nonfinite_alerts", "ts")
    store.load("nonfinite_alerts", data, "ts")
    store.create("finite_alerts", "ts")
    store.load("finite_alerts", alert_rows_data(), "ts")
    node_rules = ("NodeTFlopsAllocationWarning", "NodeTFlopsAllocationCritical")
    with GreptimeMetrics(store.dsn("finite_alerts"), connect_timeout=3) as clean:
        expected = {rule: clean.alert_rows(rule, NOW) for rule in node_rules}
        assert [r["uuid"] for r in clean.alert_rows("IdleGPU", NOW)] == ["g3"]
    with GreptimeMetrics(store.dsn("nonfinite_alerts"), connect_timeout=3) as metrics:
        hot = metrics.alert_rows("GPUTemperatureHigh", NOW)
        full = metrics.alert_rows("GPUTFlopsFull", NOW)
        # averages skip the NaN as they skip a NULL: n1 still fires on its finite samples
        assert {rule: metrics.alert_rows(rule, NOW) for rule in node_rules} == expected
        assert metrics.alert_rows("IdleGPU", NOW) == []  # g3's compute is all Infinity: no sample, not idle
    assert any(r["node"] == "n1" for r in expected["NodeTFlopsAllocationWarning"])
    assert [r["uuid"] for r in hot] == ["g1"] and hot[0]["avg_temperature"] == pytest.approx(94.0)
    assert "g3" not in {r["uuid"] for r in full} and "g1" in {r["uuid"] for r in full}
    assert all(math.isfinite(v) for r in (*hot, *full) for v in r.values() if isinstance(v, float))


def test_raw_rows_carry_no_non_finite_value_and_the_autoscaler_skips_one(store: MetricsStore) -> None:
    """The daemon's incremental autoscale load reads raw rows: an Infinity there raised OverflowError
    in the histogram after part of the rows were applied, and the next run re-read the same window
    (the load never advanced): autoscale failed for good and would have counted rows twice."""
    data = step1_rows()
    use = data["tf_worker_usage"]
    use[0]["compute_percentage"], use[1]["compute_tflops"] = INF, NAN
    store.create("nonfinite_rows", "ts")
    store.load("nonfinite_rows", data, "ts")
    with GreptimeMetrics(store.dsn("nonfinite_rows"), connect_timeout=3) as metrics:
        raw = list(metrics.rows("tf_worker_usage", NOW - timedelta(hours=2), NOW + timedelta(minutes=1)))
    assert len(raw) == len(use)
    assert not [v for r in raw for v in r.values() if isinstance(v, float) and not math.isfinite(v)]
    assert any(r["compute_percentage"] is None for r in raw)  # the Infinity: no sample
    poisoned = [{**r, "compute_percentage": INF, "memory_bytes": NAN} for r in raw]  # another port's rows
    astate = AutoscaleState()
    astate.gpu_tflops = {g: c[0] for g, c in CAPACITY.items()}
    assert astate.add_samples(sorted(raw + poisoned, key=lambda r: r["ts"])) == 2 * len(raw)
    clean = AutoscaleState()
    clean.gpu_tflops = astate.gpu_tflops
    clean.add_samples(sorted(raw, key=lambda r: r["ts"]))
    assert {k: (h.samples, h.vram_samples) for k, h in astate.workloads.items()} == {
        k: (h.samples, h.vram_samples) for k, h in clean.workloads.items()
    }
