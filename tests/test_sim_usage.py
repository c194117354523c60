"""The demo cluster's usage history (`SimMetrics`): the tables' columns, a day of minute samples, the
sums, the usage profiles' shapes, the latest samples and determinism."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from tests.sim_support import NOW, TF, Index, Obj, q, ts

# fixtures, imported under their own names (which marks them as used) for pytest to find them here
from tests.sim_support import ix as ix
from tests.sim_support import objs as objs
from tftui.model.gpuinfo import lookup
from tftui.sources.sim.scenarios import PROFILE_ANNOTATION, PROFILES, local_hour, pool_timezone
from tftui.sources.sim.usage import GPU_DRIVER_OVERHEAD_BYTES, SimMetrics


@pytest.fixture(scope="module")
def metrics(objs: list[Obj]) -> SimMetrics:
    return SimMetrics(objs)


# -- usage history ------------------------------------------------------------------------------

COLUMNS = {
    "tf_gpu_usage": {"uuid", "node", "pool", "compute_percentage", "memory_bytes", "memory_percentage",
                     "compute_tflops", "temperature", "power_usage", "rx", "tx", "ts"},
    "tf_worker_usage": {"workload", "worker", "pod_name", "namespace", "pool", "node", "uuid",
                        "compute_percentage", "memory_bytes", "memory_percentage", "compute_tflops", "ts"},
    "tf_node_metrics": {"node", "pool", "phase", "allocated_tflops", "allocated_tflops_percent",
                        "allocated_vram_bytes", "allocated_vram_percent", "allocated_tflops_percent_virtual",
                        "allocated_vram_percent_virtual", "raw_cost", "gpu_count", "ts"},
    "tf_worker_resources": {"worker", "workload", "pool", "namespace", "qos", "tflops_request", "tflops_limit",
                            "vram_bytes_request", "vram_bytes_limit", "gpu_count", "raw_cost", "ready", "ts"},
}  # fmt: skip


def at(metrics: SimMetrics, table: str, when: datetime) -> list[dict[str, Any]]:
    return list(metrics.rows(table, when, when + timedelta(seconds=1)))  # type: ignore[arg-type]


@pytest.mark.parametrize("table", sorted(COLUMNS))
def test_row_columns(metrics: SimMetrics, table: str) -> None:
    rows = at(metrics, table, NOW)
    assert rows
    for row in rows:
        assert set(row) == COLUMNS[table]
        assert row["ts"] == NOW
    assert isinstance(rows[0].get("memory_bytes", 0), int)


def test_rows_are_lazy_and_unknown_table_fails(metrics: SimMetrics) -> None:
    gen = metrics.rows("tf_gpu_usage", NOW - timedelta(days=30), NOW + timedelta(days=30))
    assert next(gen)["ts"] == NOW - timedelta(hours=24) + timedelta(minutes=1)
    with pytest.raises(ValueError):
        list(metrics.rows("tf_nope", NOW, NOW + timedelta(minutes=1)))  # type: ignore[arg-type]


def test_a_day_of_minute_samples_per_gpu(metrics: SimMetrics, ix: Index) -> None:
    counts: Counter[str] = Counter()
    last: dict[str, datetime] = {}
    for row in metrics.rows("tf_gpu_usage", NOW - timedelta(hours=24), NOW + timedelta(minutes=1)):
        uuid = row["uuid"]
        assert row["ts"] > last.get(uuid, NOW - timedelta(days=2))
        last[uuid] = row["ts"]
        counts[uuid] += 1
        assert 0 <= row["compute_percentage"] <= 100
        assert row["memory_percentage"] == 0.0 and row["compute_tflops"] == 0.0
    for name, g in ix.gpus.items():
        created = ts(g["metadata"]["creationTimestamp"])
        if created <= NOW - timedelta(hours=24):
            assert counts[name] == 24 * 60, name
        else:  # young nodes: rows only since the GPU exists
            assert 0 < counts[name] < 24 * 60
            first = created + (timedelta(seconds=60 - created.second) if created.second else timedelta())
            assert counts[name] == (NOW - first) // timedelta(minutes=1) + 1


def test_gpu_is_the_sum_of_its_workers(metrics: SimMetrics, ix: Index) -> None:
    for when in (NOW, NOW - timedelta(hours=9, minutes=17)):
        per_gpu: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in at(metrics, "tf_worker_usage", when):
            per_gpu[row["uuid"]].append(row)
        for row in at(metrics, "tf_gpu_usage", when):
            g = ix.gpus[row["uuid"]]
            cap_v = int(q(g["status"]["capacity"]["vram"]))
            workers = per_gpu.get(row["uuid"], [])
            if g["status"]["usedBy"] == "nvidia-device-plugin":
                assert not workers and row["compute_percentage"] > 1 and row["memory_bytes"] > 0
            elif workers:
                assert row["compute_percentage"] == pytest.approx(
                    min(100.0, sum(w["compute_percentage"] for w in workers)), abs=1e-6
                )
                assert row["memory_bytes"] == min(
                    cap_v, sum(w["memory_bytes"] for w in workers) + GPU_DRIVER_OVERHEAD_BYTES
                )
            else:
                assert row["compute_percentage"] == 0 and row["memory_bytes"] == 0
            assert row["memory_bytes"] <= cap_v


def test_worker_rows_match_pods(metrics: SimMetrics, ix: Index) -> None:
    rows = at(metrics, "tf_worker_usage", NOW)
    pods = {p["metadata"]["uid"]: p for p in ix.workers}
    per_pod = Counter(r["worker"] for r in rows)
    assert set(per_pod) == set(pods)
    for r in rows:
        p = pods[r["worker"]]
        ann = p["metadata"]["annotations"]
        assert per_pod[r["worker"]] == int(ann[f"{TF}/gpu-count"])
        assert r["pod_name"] == p["metadata"]["name"] and r["node"] == p["spec"]["nodeName"]
        assert r["uuid"] in ann[f"{TF}/gpu-ids"] and r["pool"] == ann[f"{TF}/gpupool"]
        assert r["memory_bytes"] < q(ann[f"{TF}/vram-limit"])
    resources = {r["worker"]: r for r in at(metrics, "tf_worker_resources", NOW)}
    assert set(resources) == {p["metadata"]["name"] for p in ix.workers}
    for p in ix.workers:
        r = resources[p["metadata"]["name"]]
        ann = p["metadata"]["annotations"]
        cap_t = q(ix.gpus[ann[f"{TF}/gpu-ids"].split(",")[0]]["status"]["capacity"]["tflops"])
        want = (
            q(ann[f"{TF}/tflops-request"])
            if f"{TF}/tflops-request" in ann
            else q(ann[f"{TF}/compute-percent-request"]) * cap_t / 100  # converted as the recorder does
        )
        assert r["tflops_request"] == pytest.approx(float(want)) and r["gpu_count"] == int(
            ann[f"{TF}/gpu-count"]
        )
        assert (
            r["vram_bytes_limit"] == q(ann[f"{TF}/vram-limit"]) and r["ready"] is True and r["raw_cost"] > 0
        )


def test_workers_have_no_rows_before_creation(metrics: SimMetrics, ix: Index) -> None:
    young = [p for p in ix.workers if ts(p["metadata"]["creationTimestamp"]) > NOW - timedelta(hours=2)]
    assert young
    before = NOW - timedelta(hours=2)
    uids = {r["worker"] for r in at(metrics, "tf_worker_usage", before)}
    assert not uids & {p["metadata"]["uid"] for p in young}
    assert (ix.workers[0]["metadata"]["uid"] in uids) == (
        ts(ix.workers[0]["metadata"]["creationTimestamp"]) <= before
    )


def test_node_metrics_match_status(metrics: SimMetrics, ix: Index) -> None:
    for row in at(metrics, "tf_node_metrics", NOW):
        gn = ix.gpunodes[row["node"]]["status"]
        alloc_t = q(gn["totalTFlops"]) - q(gn["availableTFlops"])
        alloc_v = q(gn["totalVRAM"]) - q(gn["availableVRAM"])
        assert row["allocated_tflops"] == pytest.approx(float(alloc_t))
        assert row["allocated_vram_bytes"] == pytest.approx(float(alloc_v))
        assert row["allocated_tflops_percent"] == pytest.approx(
            float(alloc_t / q(gn["totalTFlops"]) * 100), abs=1e-3
        )
        assert row["gpu_count"] == gn["totalGPUs"] and row["pool"] == ix.pool_of_node(row["node"])
        price = sum(price_of(g["status"]["gpuModel"]) for g in ix.gpus_of_node[row["node"]])
        assert row["raw_cost"] == pytest.approx(price * 60 / 3600)


def price_of(model: str) -> float:
    info = lookup(model)
    assert info is not None, model
    return info.price_per_hour


def worker_series(metrics: SimMetrics, start: datetime, end: datetime) -> dict[str, list[dict[str, Any]]]:
    series: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in metrics.rows("tf_worker_usage", start, end):
        series[row["worker"]].append(row)
    return series


@pytest.fixture(scope="module")
def day(metrics: SimMetrics) -> dict[str, list[dict[str, Any]]]:
    return worker_series(metrics, NOW - timedelta(hours=24), NOW + timedelta(minutes=1))


def profile_of(ix: Index, pod: Obj) -> tuple[str, Obj]:
    wl = ix.workloads[(pod["metadata"]["namespace"], pod["metadata"]["labels"][f"{TF}/workload"])]
    return wl["metadata"]["annotations"][PROFILE_ANNOTATION], wl


def request_tflops(wl: Obj, cap: Decimal) -> Decimal:
    """A workload's TFLOPS request per device (a compute percent, given beside a zero `tflops` as
    TensorFusion stores it, converted with the GPU's capacity)."""
    req = wl["spec"]["resources"]["requests"]
    tflops = q(req.get("tflops") or "0")
    return tflops if tflops or not req.get("compute") else q(req["compute"]) * cap / 100


def test_profiles_shape_usage(ix: Index, day: dict[str, list[dict[str, Any]]]) -> None:
    seen: Counter[str] = Counter()
    for pod in ix.workers:
        profile, wl = profile_of(ix, pod)
        cap = q(
            ix.gpus[pod["metadata"]["annotations"][f"{TF}/gpu-ids"].split(",")[0]]["status"]["capacity"][
                "tflops"
            ]
        )
        req = request_tflops(wl, cap)
        used = [Decimal(str(r["compute_percentage"])) / 100 * cap / req for r in day[pod["metadata"]["uid"]]]
        assert used
        if profile == "idle":
            assert all(r["compute_percentage"] < 1 for r in day[pod["metadata"]["uid"]])
        elif profile == "over-request":
            assert max(used) < Decimal("0.25") and min(used) >= Decimal("0.099")
        elif profile == "right-sized":
            assert Decimal("0.69") <= min(used) and max(used) <= Decimal("0.951")
        seen[profile] += 1
    assert set(seen) == set(PROFILES)


def test_bursty_peaks_mid_afternoon(ix: Index, day: dict[str, list[dict[str, Any]]]) -> None:
    above_request = 0
    checked = 0
    for pod in ix.workers:
        profile, wl = profile_of(ix, pod)
        rows = day[pod["metadata"]["uid"]]
        if profile != "bursty" or len(rows) < 24 * 60:
            continue
        tz = pool_timezone(ix.pools[wl["spec"]["poolName"]])
        by_hour: dict[int, list[float]] = defaultdict(list)
        for r in rows:
            by_hour[int(local_hour(int(r["ts"].timestamp()), tz))].append(r["compute_percentage"])
        means = {h: sum(v) / len(v) for h, v in by_hour.items()}
        peak = max(means, key=lambda h: means[h])
        assert 13 <= peak <= 17, (pod["metadata"]["name"], peak)
        assert means[peak] > 3 * min(means.values())
        cap = q(ix.gpus[rows[0]["uuid"]]["status"]["capacity"]["tflops"])
        req = request_tflops(wl, cap)
        if max(Decimal(str(r["compute_percentage"])) / 100 * cap for r in rows) > req:
            above_request += 1
        checked += 1
    assert checked >= 5 and above_request >= 1


def test_latest_samples(metrics: SimMetrics, ix: Index) -> None:
    gpus = metrics.latest_gpu_usage(NOW + timedelta(seconds=30))
    assert set(gpus) == set(ix.gpus)
    rows = {r["uuid"]: r for r in at(metrics, "tf_gpu_usage", NOW)}
    for name, gu in gpus.items():
        assert gu.ts == NOW and gu.compute_percent == rows[name]["compute_percentage"]
        assert gu.memory_bytes == rows[name]["memory_bytes"] and gu.node == rows[name]["node"]
    assert metrics.latest_gpu_usage(NOW + timedelta(minutes=10)) == {}  # older than the lookback
    assert metrics.latest_gpu_usage(NOW + timedelta(minutes=10), lookback=timedelta(minutes=15))
    assert metrics.latest_gpu_usage(NOW - timedelta(days=2)) == {}  # before the history

    workers = metrics.latest_worker_usage(NOW)
    assert set(workers) == {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in ix.workers}
    by_pod: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in at(metrics, "tf_worker_usage", NOW):
        by_pod[(r["namespace"], r["pod_name"])].append(r)
    for key, u in workers.items():
        rows_w = by_pod[key]
        cap = float(q(ix.gpus[rows_w[0]["uuid"]]["status"]["capacity"]["tflops"]))
        assert (u.namespace, u.pod) == key and u.ts == NOW
        assert u.memory_bytes == sum(r["memory_bytes"] for r in rows_w)
        assert u.tflops == pytest.approx(sum(r["compute_percentage"] for r in rows_w) / 100 * cap)
        assert u.compute_percent == pytest.approx(sum(r["compute_percentage"] for r in rows_w) / len(rows_w))
    earlier = metrics.latest_worker_usage(NOW - timedelta(hours=1, seconds=20))
    assert earlier and len(earlier) < len(workers)
    assert {u.ts for u in earlier.values()} == {NOW - timedelta(hours=1, minutes=1)}


def test_metrics_are_deterministic(objs: list[Obj]) -> None:
    window = (NOW - timedelta(minutes=3), NOW + timedelta(minutes=1))
    first = list(SimMetrics(objs).rows("tf_gpu_usage", *window))
    assert first == list(SimMetrics(objs).rows("tf_gpu_usage", *window))
    assert first != list(SimMetrics(objs, seed=8).rows("tf_gpu_usage", *window))
