"""`tftui report --metrics-dsn` on both metrics stores, with no cluster at all (the reference page's way).

The command runs as a user would run it from a clean environment: a subprocess whose HOME is an
empty directory (no ~/.kube), KUBECONFIG and TFTUI_METRICS_DSN unset. The rows are the hand-made
datasets of tests/pg.py moved to end a minute before the real clock (the CLI reports up to now).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.pg import (
    A100_1,
    A100_2,
    A100_3,
    GI,
    H100_5,
    NOW,
    UNKNOWN_GPU,
    alert_rows_data,
    full_rows,
    step1_rows,
)
from tests.stores import MetricsStore
from tftui.engine.report import NO_CLUSTER, load


def shifted(data: dict[str, list[dict[str, Any]]], delta: timedelta) -> dict[str, list[dict[str, Any]]]:
    return {t: [{**r, "ts": r["ts"] + delta} for r in rows] for t, rows in data.items()}


def capacities(pool: str = "demo-shared") -> list[dict[str, Any]]:
    """What the controller writes to tf_gpu_metrics for the dataset's GPUs (one row a minute, 1 h)."""
    gpus = ((A100_1, "gpu-a100-1", 312.0, 80 * GI), (A100_2, "gpu-a100-1", 312.0, 80 * GI),
            (A100_3, "gpu-a100-2", 312.0, 80 * GI),
            (H100_5, "gpu-h100-1", 989.0, 80 * GI), (UNKNOWN_GPU, "gpu-h100-1", 100.0, 16 * GI))  # fmt: skip
    return full_rows("tf_gpu_metrics", [
        {"gpu": g, "node": n, "pool": pool, "gpu_model": "x", "phase": "Running", "capacity_tflops": t,
         "capacity_vram_bytes": float(v), "ts": NOW - timedelta(minutes=m)}
        for g, n, t, v in gpus for m in range(1, 60, 10)
    ])  # fmt: skip


def report(dsn: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KUBECONFIG", "TFTUI_METRICS_DSN", "KUBERNETES_SERVICE_HOST")
    }
    env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "tftui", "report", "--metrics-dsn", dsn, "--window", "1h", *args],
        capture_output=True, text=True, env=env, cwd=home, timeout=120,
    )  # fmt: skip


def test_report_without_a_cluster_from_the_metrics_alone(store: MetricsStore, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    now = datetime.now(UTC).replace(microsecond=0)
    delta = now - timedelta(minutes=1) - NOW
    before = {**step1_rows(), "tf_gpu_metrics": capacities(), **alert_rows_data()}
    before["tf_node_metrics"] = step1_rows()["tf_node_metrics"]  # one pool's nodes: verify compares it
    before["tf_gpu_usage"] = step1_rows()["tf_gpu_usage"] + alert_rows_data()["tf_gpu_usage"]
    before["tf_worker_usage"] = step1_rows()["tf_worker_usage"] + alert_rows_data()["tf_worker_usage"]
    store.create("report_before", "greptime_timestamp")
    store.load("report_before", shifted(before, delta), "greptime_timestamp")

    saved = home / "before.json"
    first = report(store.dsn("report_before"), home, "--save", str(saved))
    assert first.returncode == 0, first.stderr
    assert not (home / ".kube").exists()
    text = first.stdout
    assert f"cluster {NO_CLUSTER}" in text.splitlines()[0]
    assert "no cluster: figures from the metrics alone" in text and "(not in cluster)" in text
    r = load(saved.read_text())
    assert r.metrics_only and not any(n.in_cluster for n in r.nodes) and r.findings == ()
    nodes = {n.name: n.tflops_allocated_pct for n in r.nodes}
    # the dataset's row at NOW is a minute old here: inside the window
    assert nodes["gpu-a100-1"] == pytest.approx(20.23) and nodes["gpu-h100-1"] == pytest.approx(
        (40.44 + 0.0) / 2
    )
    gpus = {g.name: g.vram_peak_pct for g in r.gpus}
    assert gpus[A100_1] == pytest.approx(15.0)  # 12 GiB of 80 GiB: capacity from tf_gpu_metrics
    assert gpus[UNKNOWN_GPU] == pytest.approx(12.5)
    use = {w.key: w.tflops_avg for w in r.workloads}
    assert use["ml-serving/llama3-8b-infer"] == pytest.approx(14.56)  # compute % × recorded capacity
    states = {x.rule: x.state for x in r.rules}
    assert len(states) == 15 and "not-evaluated" not in states.values()  # the replay ran, every rule
    assert states["IdleGPU"] in ("pending", "firing")
    pool = {p.name: p for p in r.pools}["demo-shared"]
    assert pool.nodes == 3 and pool.tflops_allocated_pct == pytest.approx(
        (20.23 + 16.03 + 20.22) / 3, abs=1e-4
    )  # 4 decimals

    # after a compaction period: gpu-a100-2 gone from the metrics, the others fuller
    after = step1_rows()
    after["tf_node_metrics"] = [
        {**r, "allocated_tflops_percent": r["allocated_tflops_percent"] + 30, "allocated_vram_percent": 90.0}
        for r in after["tf_node_metrics"] if r["node"] != "gpu-a100-2"
    ]  # fmt: skip
    store.create("report_after", "greptime_timestamp")
    store.load(
        "report_after", shifted({**after, "tf_gpu_metrics": capacities()}, delta), "greptime_timestamp"
    )
    second = report(store.dsn("report_after"), home, "--compare", str(saved), "--json")
    assert second.returncode == 0, second.stderr
    verify = json.loads(second.stdout)["verify"]
    checks = {c["name"]: c["result"] for c in verify["checks"]}
    assert checks["allocation ratio of remaining nodes up"] == "pass"
    assert checks["node count down"] == "pass"
    changes = {n["node"]: n["change"] for n in verify["nodes"]}
    assert changes == {"gpu-a100-1": "kept", "gpu-a100-2": "removed", "gpu-h100-1": "kept"}


def test_a_configured_but_unreachable_cluster_is_still_an_error(store: MetricsStore, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
    store.create("report_kube")
    done = report(store.dsn("report_kube"), home)
    assert done.returncode == 2 and done.stderr.startswith("tftui: no Kubernetes cluster reachable")
