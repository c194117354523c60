"""The console's workload detail through Textual's pilot: request vs use figures, the 24 h sparklines
and the workers; the history's per-bucket figures (`compute_history`) and where its rows come from."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from textual.widgets import Label, Sparkline

from tests.ui_metrics_support import WINDOW, WORKLOAD, Store, crumbs, make_app, settle, static_text, table
from tests.ui_metrics_support import data as data  # a fixture (re-exported for pytest)
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.load.analysis import HISTORY, AnalysisSettings, WorkloadHistory, compute_history
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.format import fmt_num
from tftui.ui.render.metricsviews import spark_values
from tftui.ui.screens.metrics import WorkloadScreen
from tftui.ui.screens.resource import NodeScreen


async def test_workload_detail_request_vs_use_sparklines_and_workers(
    demo: SimCluster, metrics: SimMetrics, data: ConsoleData
) -> None:
    store = Store(metrics)
    settings = AnalysisSettings(waste_window=WINDOW)  # the history over the full 24 h
    expected = compute_history(metrics, data, WORKLOAD)
    wl = data.state.workloads[WORKLOAD]
    app = make_app(demo, store, settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.switch_view("workloads")
        await settle(pilot)
        await pilot.press("slash", *"bert-ner", "enter", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, WorkloadScreen) and screen.key == WORKLOAD
        assert crumbs(app) == f"workloads › {WORKLOAD} (3 workers)"
        history = app.analysis(HISTORY, WORKLOAD)
        assert history is not None and history.value == expected
        # one pass over tf_worker_usage for the history and one for the autoscale window (asked by
        # the Workloads view, reused by the detail), in worker threads
        assert store.rows_calls == 2
        assert "MainThread" not in store.threads

        figures = static_text(app, "#wl-figures")
        assert "REQUEST" in figures and "AVG 24h" in figures and "PEAK 24h" in figures
        assert expected.tflops_avg is not None and expected.tflops_peak is not None
        tf_row = next(line for line in figures.splitlines() if line.startswith("TFLOPS"))
        assert tf_row.split()[1:3] == ["90", "200"]  # request and limit per device (spec)
        assert tf_row.split()[3:5] == [f"{expected.tflops_avg:.0f}", f"{expected.tflops_peak:.0f}"]
        assert wl.request.tflops == 90
        verdict = static_text(app, "#wl-verdict")
        assert verdict.startswith("diagnosis: over-request over 1h · wasted")

        spark = screen.query_one("#spark-tflops", Sparkline)
        assert spark.display
        assert list(spark.data or []) == spark_values(expected.tflops)[0]
        assert len(expected.tflops) == 96 and all(v is not None for v in expected.tflops)  # 15 min
        vram = screen.query_one("#spark-vram", Sparkline)
        assert list(vram.data or []) == spark_values(expected.vram)[0]
        label = str(screen.query_one("#spark-tflops-label", Label).render())
        assert label.startswith("TFLOPS used (workload total, 15m means) · min")
        # the bars run from 0 to what the running workers requested, not min..max of the use
        assert getattr(spark, "ceiling", None) == wl.allocated.tflops > 0
        assert f"scale 0–{fmt_num(wl.allocated.tflops)} (request)" in label
        assert str(screen.query_one("#spark-axis", Label).render()).endswith("12:00 UTC")

        workers = table(app, "#workers")
        assert workers.row_keys == sorted(wl.workers)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        assert app.screen.node == data.state.workers[workers.row_keys[0]].node


def test_history_buckets_exact_figures(data: ConsoleData) -> None:
    """Per-bucket workload totals are the mean of per-minute sums; per-device figures over rows."""
    wl = data.state.workloads[WORKLOAD]
    w1, w2 = (data.state.workers[k] for k in wl.workers[:2])
    gpu1, gpu2 = w1.gpu_ids[0], w2.gpu_ids[0]
    cap1, cap2 = data.state.gpus[gpu1].capacity.tflops, data.state.gpus[gpu2].capacity.tflops
    now = data.refreshed_at
    gi = 1024**3

    def row(minutes_ago: int, worker: Any, gpu: str, pct: float, mem: int) -> dict[str, Any]:
        return {"namespace": wl.namespace, "workload": wl.name, "worker": worker.uid, "uuid": gpu,
                "compute_percentage": pct, "memory_bytes": mem, "ts": now - timedelta(minutes=minutes_ago)}  # fmt: skip

    rows = [
        row(50, w1, gpu1, 10.0, 2 * gi),  # bucket 0 (of 4 × 15 min)
        row(50, w2, gpu2, 20.0, 4 * gi),
        row(49, w1, gpu1, 30.0, 2 * gi),
        {**row(48, w1, gpu1, 99.0, 9 * gi), "workload": "someone-else"},  # filtered out
        row(5, w1, gpu1, 50.0, 6 * gi),  # bucket 3
    ]

    class Rows:
        def rows(self, table: Any, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
            assert (table, start, end) == ("tf_worker_usage", now - timedelta(hours=1), now)
            return iter(rows)

    h = compute_history(Rows(), data, WORKLOAD, span=timedelta(hours=1))  # type: ignore[arg-type]
    assert isinstance(h, WorkloadHistory) and h.rows == 4 and h.workers == 2
    t50 = 0.10 * cap1 + 0.20 * cap2
    t49 = 0.30 * cap1
    assert h.tflops[0] == pytest.approx((t50 + t49) / 2)
    assert h.tflops[1] is None and h.tflops[2] is None  # no rows: no data, not 0
    assert h.tflops[3] == pytest.approx(0.5 * cap1)
    assert h.vram == ((6 * gi + 2 * gi) / 2, None, None, 6 * gi)
    assert h.tflops_avg == pytest.approx((0.1 * cap1 + 0.2 * cap2 + 0.3 * cap1 + 0.5 * cap1) / 4)
    assert h.tflops_peak == pytest.approx(0.5 * cap1)
    assert h.vram_avg == (2 + 4 + 2 + 6) * gi / 4 and h.vram_peak == 6 * gi
    values, first = spark_values(h.tflops)
    assert first == 0 and values[1:3] == [0.0, 0.0]


def test_workload_history_takes_compute_tflops_where_it_is_written(data: ConsoleData) -> None:
    """As step 1 does, per GPU: `compute_tflops` where it is non-zero somewhere in the span (a NULL
    row of that GPU is no sample), compute % × capacity where it is always 0. The history used to
    derive every figure from compute %, so a workload on a GPU whose writer fills compute_tflops
    showed other figures in its detail than in the waste report."""
    wl = data.state.workloads[WORKLOAD]
    w1, w2 = (data.state.workers[k] for k in wl.workers[:2])
    gpu1, gpu2 = w1.gpu_ids[0], w2.gpu_ids[0]
    cap2 = data.state.gpus[gpu2].capacity.tflops
    now = data.refreshed_at

    def row(minutes_ago: int, worker: Any, gpu: str, pct: float, tflops: float | None) -> dict[str, Any]:
        return {"namespace": wl.namespace, "workload": wl.name, "worker": worker.uid, "uuid": gpu,
                "compute_percentage": pct, "compute_tflops": tflops, "memory_bytes": 1,
                "ts": now - timedelta(minutes=minutes_ago)}  # fmt: skip

    rows = [
        row(50, w1, gpu1, 10.0, 0.0),  # gpu1 writes compute_tflops (non-zero at minute 40): taken, 0
        row(50, w2, gpu2, 20.0, 0.0),  # gpu2 never does: compute % × capacity
        row(40, w1, gpu1, 30.0, 55.0),
        row(30, w1, gpu1, 30.0, None),  # NULL: no sample, not the derived figure
    ]
    seen: list[tuple[str, str]] = []

    class OfWorkload:
        def rows(self, table: Any, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
            raise AssertionError("a port with workload_rows is asked for the workload's rows only")

        def workload_rows(
            self, ns: str, name: str, start: datetime, end: datetime
        ) -> Iterator[dict[str, Any]]:
            seen.append((ns, name))
            return iter(rows)

    h = compute_history(OfWorkload(), data, WORKLOAD, span=timedelta(hours=1))  # type: ignore[arg-type]
    assert seen == [(wl.namespace, wl.name)]
    assert h.tflops_avg == pytest.approx((0.0 + 0.2 * cap2 + 55.0) / 3)
    assert h.tflops_peak == pytest.approx(max(55.0, 0.2 * cap2))
    assert h.rows == 4 and h.unknown_gpus == ()


def test_the_simulators_workload_rows_are_its_rows_of_that_workload(metrics: SimMetrics) -> None:
    start, end = DEFAULT_NOW - timedelta(hours=2), DEFAULT_NOW
    ns, _, name = WORKLOAD.partition("/")
    every = [
        r
        for r in metrics.rows("tf_worker_usage", start, end)
        if (r["namespace"], r["workload"]) == (ns, name)
    ]
    assert len(every) > 100
    assert list(metrics.workload_rows(ns, name, start, end)) == every
