"""The console's autoscale parts on the demo: the Workloads columns and the workload detail show the
engine's recommendation, and `a` turns autoscaling on/off through a confirmation and `perform`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Static

from tests.waiting import wait_until as _wait_until
from tftui.engine.autoscale import AutoscaleState, recommend
from tftui.engine.histogram import TFLOPS_OPTIONS, DecayingHistogram
from tftui.engine.state import ClusterState
from tftui.runtime.loops import Runtime
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp
from tftui.ui.load.analysis import AUTOSCALE
from tftui.ui.load.autoscale import AutoscaleAnalysis, AutoscaleLoader, Occupied
from tftui.ui.render.autoscaleview import distribution
from tftui.ui.render.format import NO_DATA
from tftui.ui.render.views import layout_candidates
from tftui.ui.screens.metrics import WorkloadScreen
from tftui.ui.screens.modals import ConfirmScreen
from tftui.ui.screens.resource import WorkloadsScreen
from tftui.ui.widgets.table import ResourceTable

NODES = 12


async def wait_until(pilot: Pilot[None], check: Callable[[], bool], timeout: float = 20.0) -> float:
    """`tests.waiting.wait_until` with a longer default: the autoscale analysis runs in a thread."""
    return await _wait_until(pilot, check, timeout)


def _plain(cell: object) -> str:
    assert isinstance(cell, Text | str), cell
    return cell if isinstance(cell, str) else cell.plain


def demo() -> tuple[ActingSimCluster, SimMetrics]:
    sim = ActingSimCluster(seed=7, nodes=NODES, now=DEFAULT_NOW)
    return sim, SimMetrics(sim.snapshot(), seed=7, now=DEFAULT_NOW)


def auto(app: TfTuiApp) -> AutoscaleAnalysis | None:
    a = app.analysis(AUTOSCALE)
    return a.value if a is not None and isinstance(a.value, AutoscaleAnalysis) else None


async def workloads(pilot: Pilot[None], app: TfTuiApp) -> AutoscaleAnalysis:
    await wait_until(pilot, lambda: app.data is not None)
    assert app.switch_view("workloads")
    await wait_until(pilot, lambda: isinstance(app.screen, WorkloadsScreen) and auto(app) is not None)
    await app.workers.wait_for_complete()
    await pilot.pause()
    value = auto(app)
    assert value is not None
    return value


def enabled(sim: ActingSimCluster, key: str) -> Any:
    ns, name = key.split("/")
    for o in sim.snapshot():
        m = o["metadata"]
        if o.get("kind") == "TensorFusionWorkload" and (m.get("namespace"), m["name"]) == (ns, name):
            return ((o["spec"].get("autoScalingConfig") or {}).get("autoSetResources") or {}).get("enable")
    raise KeyError(key)


def off_workload(sim: ActingSimCluster, value: AutoscaleAnalysis) -> str:
    """A workload with an object and history whose autoscaling is off, and that would change."""
    state = ClusterState.build(sim.snapshot())
    for key, rec in sorted(value.result.workloads.items()):
        wv = state.workloads[key]
        if rec.reason == "disabled" and wv.obj is not None and not wv.autoscale:
            return key
    raise AssertionError("the demo has no disabled workload with a recommendation")


async def test_workloads_columns_and_detail_show_the_engines_recommendation() -> None:
    sim, metrics = demo()
    app = TfTuiApp(sim, metrics, clock=sim.clock, refresh_interval=None)
    async with app.run_test(size=(200, 50)) as pilot:
        value = await workloads(pilot, app)
        # the same figures `tftui recommend` prints, from the engine over the same rows
        state = ClusterState.build(sim.snapshot())
        astate = AutoscaleState()
        astate.configure(state)
        astate.add_samples(metrics.rows("tf_worker_usage", DEFAULT_NOW - value.window, DEFAULT_NOW))
        expected = recommend(state, astate, DEFAULT_NOW)
        assert expected.to_json() == value.result.to_json()
        table = app.screen.query_one("#main", ResourceTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert "USED/GPU" in labels and "RECOMMENDED" in labels
        with_rec = [k for k, r in expected.workloads.items() if r.recommendation is not None]
        without = [k for k, r in expected.workloads.items() if r.recommendation is None]
        assert with_rec and without
        key = with_rec[0]
        r = expected.workloads[key].recommendation
        assert r is not None
        cell = table.get_cell(key, "rec")
        assert _plain(cell).split(" TF ")[1].endswith("i")  # e.g. 8.5Gi
        assert isinstance(cell, Text) and (str(cell.style) == "bold") == expected.workloads[key].would_apply
        no_data = [k for k in without if expected.workloads[k].reason == "no-data"]
        if no_data:
            assert _plain(table.get_cell(no_data[0], "rec")) == NO_DATA
        steady = [k for k in without if expected.workloads[k].reason == "below-threshold"]
        assert steady and _plain(table.get_cell(steady[0], "rec")) == "≈ request"
        # the detail: percentiles, bounds, cron rule, verdict and the distribution
        app.open_workload(key)
        await wait_until(pilot, lambda: isinstance(app.screen, WorkloadScreen))
        await app.workers.wait_for_complete()
        await pilot.pause()
        text = str(app.screen.query_one("#wl-autoscale", Static).render())
        rec = expected.workloads[key]
        assert "P50 " in text and "P90 " in text and "P99 " in text
        assert "lower/target/upper" in text and "bounds" in text and "cron rule" in text
        assert ("would apply" if rec.would_apply else "not applied") + f" ({rec.reason}): " in text
        assert "usage distribution" in text and "━" in text and "█" not in text  # not the gauges' glyph


def test_distribution_shares_sum_to_one_and_cover_the_samples() -> None:
    hist = DecayingHistogram(TFLOPS_OPTIONS, 3600.0)
    for i, v in enumerate([1.0, 1.0, 2.0, 8.0, 30.0]):
        hist.add(v, 1.0, 1000.0 + i)
    rows = distribution(hist, bins=4)
    assert 1 <= len(rows) <= 4
    assert abs(sum(s for _, _, s in rows) - 1.0) < 1e-9
    assert rows[0][0] <= 1.0 and rows[-1][1] >= 30.0
    assert distribution(DecayingHistogram(TFLOPS_OPTIONS, 3600.0)) == []


def test_distribution_labels_keep_every_range_apart() -> None:
    """The bins of a narrow distribution (11.2 to 11.9 TF) read `11–11 TF` with the short
    table formatter: labels take the decimals they need."""
    from tftui.ui.render.autoscaleview import _range_labels

    labels = _range_labels([(11.2, 11.4, 0.5), (11.4, 11.9, 0.5)], vram=False)
    assert labels == ["11.2–11.4 TF", "11.4–11.9 TF"]
    assert _range_labels([(0.0, 12.0, 1.0)], vram=False) == ["0–12 TF"]
    gi = 1024**3
    assert _range_labels([(2 * gi, 2.5 * gi, 1.0)], vram=True) == ["2.0–2.5Gi"]


async def test_autoscale_key_asks_then_turns_it_on_and_the_runtime_acts() -> None:
    sim, metrics = demo()
    app = TfTuiApp(sim, metrics, clock=sim.clock, refresh_interval=None)
    async with app.run_test(size=(120, 40)) as pilot:
        value = await workloads(pilot, app)
        key = off_workload(sim, value)
        table = app.screen.query_one("#main", ResourceTable)
        table.move_cursor(row=table.get_row_index(key))
        await pilot.pause()
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.focused is not None and app.focused.id == "confirm-cancel"
        body = str(app.screen.query_one("#confirm-body").render())
        assert 'tensor-fusion.ai/autoscale: "true"' in body
        await pilot.press("enter")  # Cancel
        await wait_until(pilot, lambda: isinstance(app.screen, WorkloadsScreen))
        await app.workers.wait_for_complete()
        assert not enabled(sim, key)
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("tab", "enter")
        await wait_until(pilot, lambda: enabled(sim, key) is True)
        await app.workers.wait_for_complete()
        # the refresh after the write recomputes: the engine now says it would apply
        await wait_until(
            pilot,
            lambda: (v := auto(app)) is not None and v.result.workloads[key].enabled,
        )
        assert any("autoSetResources.enable=true" in e.message for e in app.runtime.journal.entries())  # type: ignore[union-attr]
    # and the runtime's loop now applies the recommendation to the workload's workers
    rt = Runtime(sim, clock=sim.clock, metrics=metrics)
    rt.autoscale_tick()
    assert rt.last_autoscale is not None and rt.last_autoscale.result is not None
    rec = rt.last_autoscale.result.workloads[key]
    assert rec.enabled and rec.would_apply, (rec.reason, rec.detail)
    status = next(
        o["status"]
        for o in sim.snapshot()
        if o.get("kind") == "TensorFusionWorkload"
        and f"{o['metadata']['namespace']}/{o['metadata']['name']}" == key
    )
    assert status["recommendation"] == rec.recommendation.to_json()  # type: ignore[union-attr]


async def test_read_only_demo_has_no_autoscale_key() -> None:
    sim, metrics = demo()
    app = TfTuiApp(sim, metrics, clock=sim.clock, refresh_interval=None, read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        value = await workloads(pilot, app)
        key = off_workload(sim, value)
        assert "workload_autoscale" not in {
            b.binding.action for b in app.screen.active_bindings.values() if app.allows(b.binding.action)
        }
        await pilot.press("a")
        await pilot.pause(0.2)
        assert isinstance(app.screen, WorkloadsScreen)
        assert app.perform("workload_autoscale", pool=key, enable=True) is False
    assert not enabled(sim, key)
    assert timedelta(0) < value.window


def test_cells_say_no_data_and_never_zero() -> None:
    """A workload without usage rows: `—` for used and recommended (no metrics is not idle)."""
    from tests.autoscale_support import asr, cluster
    from tests.fixtures.engine_builders import NOW, build
    from tftui.ui.render.autoscaleview import detail_text, rec_cell, used_cell

    state = build(cluster(spec=asr(enable=True)))
    value = AutoscaleAnalysis(recommend(state, AutoscaleState(), NOW), {}, timedelta(hours=2), 0)
    assert value.result.workloads["default/w"].reason == "no-data"
    assert rec_cell(value, "default/w", False) == NO_DATA
    assert used_cell(value, "default/w", False) == NO_DATA
    assert rec_cell(None, "default/w", True) == "…"  # still computing
    text = detail_text(value, "default/w").plain
    assert "usage: no data in tf_worker_usage over the last 2h" in text
    assert "not applied (no-data): no usage data" in text
    assert detail_text(None, "default/w", error="no metrics source configured").plain.endswith(
        "no metrics source configured"
    )


def test_a_failed_first_load_of_a_new_window_is_tried_again_whole() -> None:
    """A longer historyDataPeriod starts a fresh state; if its first load fails, the next load reads
    the whole new window again (not only the rows since the old state's last load, into nothing)."""
    import copy

    from tftui.model.dump import validate_items
    from tftui.sources.ports import SourceError

    sim, metrics = demo()
    calls: list[tuple[Any, Any]] = []
    down = [False]

    class Flaky:
        def usage_histograms(self, q: Any) -> Any:
            if down[0]:
                raise SourceError("metrics store down")
            calls.append((q.start, q.end))
            return metrics.usage_histograms(q)

        def rows(self, table: Any, start: Any, end: Any) -> Any:
            calls.append((start, end))
            return metrics.rows(table, start, end)

    objs = copy.deepcopy(sim.snapshot())
    state = ClusterState.build(validate_items(objs))
    loader = AutoscaleLoader()
    early = DEFAULT_NOW - timedelta(minutes=30)
    loader.load(Flaky(), state, early)  # type: ignore[arg-type]
    objs = copy.deepcopy(objs)  # new dicts: validation keeps its objects by the source dict
    wl = next(o for o in objs if o["kind"] == "TensorFusionWorkload")
    wl["spec"].setdefault("autoScalingConfig", {}).setdefault("autoSetResources", {})["historyDataPeriod"] = (
        "6h"
    )
    longer = ClusterState.build(validate_items(objs))
    down[0] = True
    with pytest.raises(SourceError):
        loader.load(Flaky(), longer, early + timedelta(minutes=5))  # type: ignore[arg-type]
    down[0] = False
    done = loader.load(Flaky(), longer, early + timedelta(minutes=10))  # type: ignore[arg-type]
    assert done.window == timedelta(hours=6)
    assert calls[-1] == (early + timedelta(minutes=10) - timedelta(hours=6), early + timedelta(minutes=10))


def test_the_loader_reads_only_new_rows_and_matches_a_full_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tftui.runtime.history.RAW_CHUNK", timedelta(days=31))  # each load one call
    sim, metrics = demo()
    calls: list[tuple[Any, Any]] = []

    class Counting:
        def rows(self, table: Any, start: Any, end: Any) -> Any:
            calls.append((start, end))
            return metrics.rows(table, start, end)

    state = ClusterState.build(sim.snapshot())
    loader = AutoscaleLoader()
    early = DEFAULT_NOW - timedelta(minutes=30)
    first = loader.load(Counting(), state, early)  # type: ignore[arg-type]
    assert calls == [(early - first.window, early)]
    again = loader.load(Counting(), state, early)  # type: ignore[arg-type]
    assert len(calls) == 1 and again.rows == 0  # same clock: nothing new to read
    later = loader.load(Counting(), state, DEFAULT_NOW)  # type: ignore[arg-type]
    assert calls[-1] == (early, DEFAULT_NOW)
    # the same rows in one pass give the same recommendations (histograms are additive)
    one = AutoscaleState()
    one.configure(state)
    all_rows = list(metrics.rows("tf_worker_usage", early - first.window, DEFAULT_NOW))
    one.add_samples(all_rows)
    assert 0 < later.rows < len(all_rows)
    assert later.result.to_json() == recommend(state, one, DEFAULT_NOW).to_json()


def test_the_shown_histograms_are_their_occupied_buckets_and_answer_as_the_live_ones() -> None:
    """The analysis keeps each workload's histograms as their occupied buckets only (a whole copy
    per workload was as much memory as the live histograms): every figure the detail shows —
    percentiles, the distribution, emptiness — is the live histogram's, bit for bit."""
    sim, metrics = demo()
    state = ClusterState.build(sim.snapshot())
    loader = AutoscaleLoader()
    analysis = loader.load(metrics, state, DEFAULT_NOW)
    live = loader.state  # the histograms the copies were taken from
    edge = DecayingHistogram(TFLOPS_OPTIONS, 3600.0)
    edge.add(5.0, 1e-6, 0.0)  # weight below epsilon only: empty, its total not 0
    shifted = DecayingHistogram(TFLOPS_OPTIONS, 3600.0)
    shifted.add(5.0, 1.0, 0.0)
    shifted.add(80.0, 2.0, 500 * 3600.0)  # the reference moved: every weight rescaled
    shifted.subtract(80.0, 2.0, 500 * 3600.0)  # VPA's clamp empties the bucket
    cases = [(h.tf, analysis.histograms[k].tf_copy) for k, h in live.workloads.items()]
    cases += [(h.vram, analysis.histograms[k].vram_copy) for k, h in live.workloads.items()]
    cases += [(h, Occupied.of(h)) for h in (edge, shifted, DecayingHistogram(TFLOPS_OPTIONS, 60.0))]
    assert len(cases) > 10 and any(not h.is_empty() for h, _ in cases) and edge.is_empty()
    for h, kept in cases:
        got = kept.histogram()
        assert len(kept.span) == max(0, h.max_bucket - h.min_bucket + 1) < TFLOPS_OPTIONS.num_buckets
        assert got.is_empty() == h.is_empty() and (got.total, got.ref) == (h.total, h.ref)
        assert [got.percentile(p) for p in (0.0, 0.5, 0.9, 0.95, 1.0)] == [
            h.percentile(p) for p in (0.0, 0.5, 0.9, 0.95, 1.0)
        ]
        assert got.percentiles((0.5, 0.9, 0.95)) == h.percentiles((0.5, 0.9, 0.95))
        assert distribution(got) == distribution(h)


@pytest.mark.parametrize("with_metrics", [True, False])
async def test_a_refresh_rebuilds_no_workload_row_when_what_it_shows_is_the_same(with_metrics: bool) -> None:
    """The autoscale analysis is computed again at every refresh (a new object each time, or again
    the "no metrics source" error): the rows compare what their cells show, so an unchanged
    refresh builds no workload row, with or without a store (every row was built twice a refresh:
    once for `…` while it was computed, once for its outcome). The table is built in the refresh
    thread and, for an outcome that shows otherwise, in the analysis' thread: never on the
    interface thread."""
    sim, metrics = demo()
    app = TfTuiApp(sim, metrics if with_metrics else None, clock=sim.clock, refresh_interval=None)
    async with app.run_test(size=(200, 50)) as pilot:
        if with_metrics:
            before = await workloads(pilot, app)
        else:
            await wait_until(pilot, lambda: app.data is not None)
            assert app.switch_view("workloads")
            await wait_until(
                pilot, lambda: app.analysis(AUTOSCALE) is not None and not app.computing(AUTOSCALE)
            )
        screen: Any = app.screen
        table = screen.query_one("#main", ResourceTable)
        shown = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        cache = screen.rows_of("main")
        built_on: list[str] = []
        build = screen.build

        def counted(*args: Any) -> Any:
            built_on.append(threading.current_thread().name)
            return build(*args)

        screen.build = counted
        for _ in range(2):
            seq = app.data_seq

            def done(s: int = seq) -> bool:
                return app.data_seq > s and not app.computing(AUTOSCALE)

            app.action_refresh()
            await wait_until(pilot, done)
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert cache.built == 0 and cache.reused == table.row_count > 0
            assert [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)] == shown
        if with_metrics:
            assert auto(app) is not before  # computed again, and no row built for it
            # the table for each new outcome is built in the analysis' thread, not the interface's
            assert "MainThread" not in built_on and "tftui-autoscale" in built_on, built_on
        else:  # each refresh's table is built in the refresh thread, and the outcome, the same
            # "no metrics" error again, does not build it again on the interface thread
            assert set(built_on) == {"tftui-refresh"}, built_on
            assert screen._layout != layout_candidates(screen.size.width)[0]  # the render tried several
            await pilot.press("slash", "m", "l")  # each key renders every layout tried: none is built
            await pilot.pause()
            assert set(built_on) == {"tftui-refresh"} and screen.needle == "ml", built_on
            assert NO_DATA in {
                row[[str(c.label) for c in table.columns.values()].index("RECOMMENDED")] for row in shown
            }


async def test_without_a_metrics_source_the_workloads_show_no_data_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No metrics source: the autoscale and waste outcomes are known (`—`), so the view opens
    with them instead of `…`, and the outcomes arriving after build no table again (every row was
    built twice on opening: 0.5 s more of the interface thread at 5,000 nodes)."""
    builds: list[tuple[tuple[object, ...], object]] = []
    build = WorkloadsScreen.build

    def recorded(self: WorkloadsScreen, table_id: str, data: Any, gauges: Any) -> Any:
        builds.append((self.analyses_shown(), gauges.scope))
        return build(self, table_id, data, gauges)

    monkeypatch.setattr(WorkloadsScreen, "build", recorded)
    sim, _ = demo()
    app = TfTuiApp(sim, None, clock=sim.clock, refresh_interval=None)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_until(pilot, lambda: app.data is not None)
        assert app.switch_view("workloads")
        await wait_until(
            pilot, lambda: any(t.row_count for t in app.screen.query("#main").results(ResourceTable))
        )
        await wait_until(pilot, lambda: app.analysis(AUTOSCALE) is not None and not app.computing(AUTOSCALE))
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = app.screen.query_one("#main", ResourceTable)
        labels = [str(c.label) for c in table.columns.values()]
        columns = [labels.index(name) for name in ("USED/GPU", "RECOMMENDED", "WASTE $") if name in labels]
        assert len(columns) >= 2
        assert {str(table.get_row_at(i)[c]).strip() for i in range(table.row_count) for c in columns} == {
            NO_DATA
        }
    assert builds, "the view was built"
    assert not any(pending or loading for (pending, _, loading, _), _ in builds), builds  # never `…`
    assert len(builds) == len({scope for _, scope in builds})  # each layout built once, not again
