"""The demo's aggregate queries (sim/columns.py, sim/aggregate.py) against its per-sample rows.

Step 1, every alert rule's replay, the autoscaler's histograms and the latest samples are answered
from numpy blocks; the row generator (`SimMetrics.rows`, one dict per sample) is the reference.
Both must give the same figures, the same groups and the same NoData — on a demo doctored so the
alert rules fire and some objects are younger than the window (missing samples stay missing).
"""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest

from tftui.engine.alerts import evaluation_times
from tftui.engine.autoscale import TFLOPS_OPTIONS
from tftui.engine.report import RULES as ALERT_SPECS
from tftui.model.metrics import NoData
from tftui.model.quantity import quantity_float
from tftui.model.usage import HistogramQuery
from tftui.sources.histograms import pod_buckets
from tftui.sources.sim import aggregate, columns
from tftui.sources.sim.cluster import generate_objects
from tftui.sources.sim.columns import jitter_v, smooth_v, unit_v
from tftui.sources.sim.scenarios import jitter, smooth, unit
from tftui.sources.sim.step1 import SimStep1
from tftui.sources.sim.usage import SimMetrics

TF = "tensor-fusion.ai"


class RowsOnly:
    """The same simulator seen only through `rows`: SimStep1 then takes its per-sample path."""

    def __init__(self, metrics: SimMetrics) -> None:
        self.metrics = metrics

    def rows(self, table: Any, start: datetime, end: datetime) -> Any:
        return self.metrics.rows(table, start, end)


def _close(a: Any, b: Any, path: str = "") -> None:
    if is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), path
        for f in fields(a):
            _close(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, NoData):
        assert isinstance(b, NoData) and str(a) == str(b), (path, a, b)
    elif isinstance(a, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (path, a, b)
    else:
        assert a == b, (path, a, b)


def _objects() -> list[dict[str, Any]]:
    """A small demo where node, pool and GPU alerts fire and a few objects start mid-window."""
    objs = generate_objects(nodes=10)
    nodes = [o for o in objs if o["kind"] == "GPUNode"]
    for node in nodes[:2]:  # allocated beyond 95 %: the node and pool allocation rules fire
        node["status"]["totalTFlops"] = "10"
        node["status"]["totalVRAM"] = "10Gi"
    pods = [
        o
        for o in objs
        if o["kind"] == "Pod" and o["metadata"].get("labels", {}).get(f"{TF}/component") == "worker"
    ]
    for pod in pods[:3]:  # asks for more than the device: runs at 100 % → GPUTFlopsFull
        ann = pod["metadata"]["annotations"]
        ann[f"{TF}/tflops-request"] = "1000000"
        ann[f"{TF}/tflops-limit"] = "1000000"
    young = "2026-11-30T11:10:00Z"  # younger than the 2 h window: fewer samples, never zeros
    for obj in (pods[3], pods[4], [o for o in objs if o["kind"] == "GPU"][-1], nodes[-1]):
        obj["metadata"]["creationTimestamp"] = young
    return objs


@pytest.fixture(scope="module")
def sim() -> tuple[SimMetrics, dict[str, tuple[float, float]]]:
    objs = _objects()
    capacity = {
        o["metadata"]["name"]: (
            quantity_float(o["status"]["capacity"]["tflops"]),
            quantity_float(o["status"]["capacity"]["vram"]),
        )
        for o in objs
        if o["kind"] == "GPU"
    }
    return SimMetrics(objs, history=timedelta(hours=4)), capacity


def test_noise_functions_match_bit_for_bit() -> None:
    keys = np.array([0, 1, 2**63 + 5, 2**64 - 1, 0x1234_5678_9ABC_DEF0], dtype=np.uint64)
    times = np.array([0, 59, 60, 899, 900, 1_796_040_000, 1_796_040_437], dtype=np.int64)
    for k in keys.tolist():
        for t in times.tolist():
            key, ts = np.array([k], dtype=np.uint64), np.array([t], dtype=np.int64)
            assert float(unit_v(key, ts)[0]) == unit(k, t)
            assert float(smooth_v(key, ts, 900)[0]) == pytest.approx(smooth(k, t, 900), abs=1e-15)
            assert float(jitter_v(key, ts)[0]) == jitter(k, t)


def test_step1_equals_the_row_path(sim: tuple[SimMetrics, dict[str, tuple[float, float]]]) -> None:
    metrics, capacity = sim
    fast, slow = SimStep1(metrics), SimStep1(RowsOnly(metrics))
    assert fast.columns is not None and slow.columns is None
    for window in (timedelta(minutes=30), timedelta(hours=2), timedelta(hours=6)):
        a = fast.step1(window, metrics.now, capacity)
        _close(a, slow.step1(window, metrics.now, capacity))
        assert a.gpus and a.workload_usage
    unknown = {metrics.workers[0].gpus[0].name, metrics.workers[-1].gpus[0].name}
    partial = {g: c for g, c in capacity.items() if g not in unknown}  # GPUs unknown: named missing
    a = fast.step1(timedelta(hours=2), metrics.now, partial)
    _close(a, slow.step1(timedelta(hours=2), metrics.now, partial))
    assert any(m.startswith("capacity of ") for m in a.missing)


def test_young_objects_have_fewer_samples_not_zeros(sim: tuple[SimMetrics, Any]) -> None:
    metrics, capacity = sim
    result = SimStep1(metrics).step1(timedelta(hours=2), metrics.now, capacity)
    assert max(g.samples for g in result.gpus) == 120  # one a minute over [10:00, 12:00)
    young_gpu = next(g for g in result.gpus if g.uuid == metrics.gpus[-1].name)
    young_node = next(n for n in result.nodes if n.node == metrics.nodes[-1].name)
    assert young_gpu.samples == young_node.samples == 50  # created 11:10: no samples before, not zeros


def test_an_empty_window_is_missing_not_zero(sim: tuple[SimMetrics, Any]) -> None:
    metrics, capacity = sim
    before = metrics.now - timedelta(days=3)  # before the history: no rows at all
    a = SimStep1(metrics).step1(timedelta(hours=1), before, capacity)
    _close(a, SimStep1(RowsOnly(metrics)).step1(timedelta(hours=1), before, capacity))
    assert not a.gpus and {"tf_gpu_usage", "tf_node_metrics", "tf_worker_usage"} <= set(a.missing)
    with pytest.raises(NoData, match="no rows in tf_gpu_usage"):
        SimStep1(metrics).alert_rows("IdleGPU", before)


def test_every_alert_rule_replays_as_the_row_path(sim: tuple[SimMetrics, Any]) -> None:
    metrics, _capacity = sim
    fast, slow = SimStep1(metrics), SimStep1(RowsOnly(metrics))
    fired: set[str] = set()
    for rule in ALERT_SPECS:
        times = evaluation_times(rule, metrics.now, timedelta(hours=1))
        a = fast.alert_history(rule.name, times)
        _close(list(a), list(slow.alert_history(rule.name, times)), rule.name)
        if any(isinstance(r, list) and r for r in a):
            fired.add(rule.name)
        try:
            now_rows: Any = fast.alert_rows(rule.name, metrics.now)
        except NoData as exc:
            now_rows = exc
        _close(now_rows, a[-1], rule.name)
    assert {"GPUTFlopsFull", "NodeTFlopsAllocationCritical", "PoolTotalTFlopsAllocationWarning",
            "NodeVRAMAllocationCritical", "EmptyGPU", "IdleGPU"} <= fired  # fmt: skip


def test_histograms_equal_the_row_stream(sim: tuple[SimMetrics, Any]) -> None:
    metrics, capacity = sim
    q = HistogramQuery(
        start=metrics.now - timedelta(hours=2),
        end=metrics.now,
        ref_unix=float(int(metrics.now.timestamp())),
        tflops=TFLOPS_OPTIONS.layout(),
        default_half_life=3600.0,
        half_lives=(("default", "nonexistent", 60.0),),
        gpu_tflops=tuple(
            sorted((g, c[0]) for g, c in capacity.items() if g != metrics.workers[1].gpus[0].name)
        ),
    )
    a = aggregate.pod_buckets(metrics.columns, q)
    b = pod_buckets(q, metrics.rows("tf_worker_usage", q.start, q.end))
    assert len({p.bucket for p in a}) > 3
    _close(a, b)  # the same groups, in the order the stream first met them


def test_latest_samples_equal_the_rows(sim: tuple[SimMetrics, Any]) -> None:
    metrics, _capacity = sim
    now = metrics.now
    gpus = metrics.latest_gpu_usage(now)
    workers = metrics.latest_worker_usage(now)
    t = now - timedelta(seconds=int(now.timestamp()) % metrics.step)
    gpu_rows = list(metrics.rows("tf_gpu_usage", t, t + timedelta(seconds=1)))
    assert {r["uuid"] for r in gpu_rows} == set(gpus)
    for r in gpu_rows:
        assert gpus[r["uuid"]].compute_percent == r["compute_percentage"]
        assert gpus[r["uuid"]].memory_bytes == r["memory_bytes"]
    by_pod: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in metrics.rows("tf_worker_usage", t, t + timedelta(seconds=1)):
        by_pod.setdefault((r["namespace"], r["pod_name"]), []).append(r)
    assert by_pod.keys() == workers.keys()
    for key, rows in by_pod.items():
        assert workers[key].compute_percent == rows[0]["compute_percentage"]
        assert workers[key].memory_bytes == sum(r["memory_bytes"] for r in rows)
    assert metrics.latest_gpu_usage(now - timedelta(days=3)) == {}  # before the history: no data


def test_the_aggregates_read_no_rows(sim: tuple[SimMetrics, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo at scale: nothing generates a dict per sample for step 1, alerts or histograms."""
    metrics, capacity = sim

    def refuse(*_args: Any) -> Any:
        raise AssertionError("per-sample rows generated")

    monkeypatch.setattr(metrics, "rows", refuse)
    port = SimStep1(metrics)
    port.step1(timedelta(hours=2), metrics.now, capacity)
    for rule in ALERT_SPECS:
        port.alert_history(rule.name, evaluation_times(rule, metrics.now, timedelta(hours=1)))


def test_the_alert_frame_in_blocks_is_the_frame_in_one(
    sim: tuple[SimMetrics, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The alert replay's frame makes the samples a few times at a time (as step 1 does) and keeps
    the GPUs' samples and the workers' presence: the same arrays, bit for bit, as one block over
    the whole span, with objects created inside it (their first samples fall in a later block)."""
    metrics, _capacity = sim
    c = metrics.columns
    start, end = metrics.now - timedelta(hours=2), metrics.now
    whole = aggregate._Frame(c, start, end)
    monkeypatch.setattr(columns, "BLOCK_CELLS", 3 * max(len(c.w_key), len(c.g_key)))  # 3 samples
    widths: list[int] = []
    made = c.workers

    def counted(ts: Any, hours: Any) -> Any:
        widths.append(len(ts))
        return made(ts, hours)

    monkeypatch.setattr(c, "workers", counted)
    blocks = aggregate._Frame(c, start, end)
    assert widths == [3] * 40  # the workers' samples made 3 times at a time, never whole
    for name in ("ts", "w_alive", "n_alive", "n_tp", "n_vp", "temperature"):
        a, b = getattr(whole, name), getattr(blocks, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for name in ("alive", "pct", "mem"):
        a, b = getattr(whole.g, name), getattr(blocks.g, name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
    young = [i for i, w in enumerate(metrics.workers) if w.created > int(whole.ts[0])]
    assert young and not whole.w_alive[young, 0].any() and whole.w_alive[young, -1].all()
