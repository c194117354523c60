"""The What-if screen: `:whatif` opens it, a thread worker runs the comparison, the chart draws it."""

from __future__ import annotations

import re
import threading
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tftui.runtime.whatif import SimConfig, parse_policy, simulate
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW
from tftui.ui.app import TfTuiApp
from tftui.ui.render.whatif import chart_lines
from tftui.ui.screens import whatif as whatif_ui
from tftui.ui.screens.whatif import NodeChart, WhatIfScreen
from tftui.ui.widgets.table import ResourceTable

POLICIES = ("CompactFirst+defrag", "LowLoadFirst+defrag")


def make_app() -> TfTuiApp:
    cluster = ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW)
    return TfTuiApp(cluster, None, clock=lambda: DEFAULT_NOW, refresh_interval=None)


def test_chart_lines_scale_each_series_and_label_the_axis() -> None:
    lines = chart_lines([("a", [10, 10, 4]), ("b", [2, 6, 8])], width=30, height=6)
    assert len(lines) == 6  # five rows of dots and the legend
    assert all(len(line.plain) == 30 for line in lines[:-1])
    assert lines[0].plain.startswith("10┤") and lines[4].plain.startswith(" 0┤")
    assert "■ a" in lines[-1].plain and "■ b" in lines[-1].plain
    dots = "".join(line.plain[3:] for line in lines[:-1])
    assert dots.strip() and all(c == " " or 0x2800 < ord(c) <= 0x28FF for c in dots)
    # the first column: a at 10 (the maximum) in the top row; b at 2 of 0-10 in the fourth of five
    first = [line.plain[3] for line in lines[:-1]]
    assert first[0] != " " and first[3] != " " and first[1] == first[2] == first[4] == " "
    assert chart_lines([], 30, 6)[0].plain == "no data"


async def test_whatif_view_runs_the_comparison_in_a_thread_and_plots_it() -> None:
    app = make_app()
    threads: list[str] = []
    screen = WhatIfScreen(policies=POLICIES, duration=timedelta(hours=3), churn=0)
    original = screen.config
    screen.config = SimConfig(
        duration=original.duration,
        churn=0,
        on_sample=lambda now: threads.append(threading.current_thread().name),
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await app.push_screen(screen)
        for _ in range(3):
            await app.workers.wait_for_complete()
            await pilot.pause()
        assert screen.results is not None and [r.policy for r in screen.results] == list(POLICIES)
        assert threads and threading.main_thread().name not in threads
        table = screen.query_one(ResourceTable)
        assert table.row_count == 2
        chart = screen.query_one(NodeChart)
        assert [name for name, _ in chart.series] == list(POLICIES)
        assert len(chart.series[0][1]) == 7  # 3 h sampled every 30 min, both ends
        # the figures are the simulator's, for the same start and configuration
        direct = simulate(
            list(app.data.state.snapshot.objects) if app.data else [],
            parse_policy(POLICIES[0]),
            app.data.refreshed_at.replace(microsecond=0) if app.data else DEFAULT_NOW,
            SimConfig(duration=timedelta(hours=3), churn=0),
        )
        assert screen.results[0].summary() == direct.summary()
        rendered = str(chart.render())
        assert "■ CompactFirst+defrag" in rendered


@pytest.mark.parametrize("typed", ["whatif", "what-if"])
async def test_colon_whatif_switches_and_leaving_cancels_the_run(
    typed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a day of the 40-node demo takes well under a second: hold the run at its first sample until
    # the view is left, so leaving is seen while it runs
    gate, stopped = threading.Event(), threading.Event()
    real = whatif_ui.compare

    def held(objects: Any, policies: Any, start: Any, config: SimConfig) -> Any:
        def hook(now: Any) -> None:
            gate.wait(10)
            assert config.on_sample is not None
            try:
                config.on_sample(now)  # the screen's check: raises once the run is cancelled
            except BaseException:
                stopped.set()
                raise

        return real(objects, policies, start, replace(config, on_sample=hook))

    monkeypatch.setattr(whatif_ui, "compare", held)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("colon", *typed, "enter")
        await pilot.pause()
        assert isinstance(app.screen, WhatIfScreen)
        assert re.search(r"simulating 3 policies over 24 h", app.screen.status)
        (run,) = [w for w in app.workers if w.group == "whatif"]
        assert app.switch_view("pools")  # leaving must stop it
        await pilot.pause()
        assert run.is_cancelled
        gate.set()  # the thread sees the cancellation at its next sample and returns
    assert stopped.wait(10)


def test_chart_axes_have_ticks_and_identical_lines_are_named_together() -> None:
    """Only 0 and the maximum on the y axis, no x ticks, and two equal policies drawn on top of
    each other under two legend entries (one of them invisible)."""
    same = [38, 38, 30, 25]
    lines = chart_lines(
        [("A", same), ("B", [38, 38, 35, 35]), ("C", list(same))],
        width=60,
        height=12,
        x_labels=["12:00", "18:00", "00:00", "06:00", "12:00"],
    )
    plot, axis, under, legend = lines[:-3], lines[-3], lines[-2], lines[-1]
    ys = [line.plain.split("┤")[0].strip() for line in plot if "┤" in line.plain]
    assert ys[0] == "38" and ys[-1] == "0" and len(ys) >= 4, ys  # values between 0 and the top
    assert [int(y) for y in ys] == sorted((int(y) for y in ys), reverse=True)
    assert axis.plain.count("┬") == 5 and "└" in axis.plain
    # every label sits under its tick, none runs into another
    ticks = [i for i, ch in enumerate(axis.plain) if ch == "┬"]
    assert under.plain.split() == ["12:00", "18:00", "00:00", "06:00", "12:00"]
    assert under.plain.index("18:00") <= ticks[1] < under.plain.index("18:00") + 5
    assert "■ A = C" in legend.plain and "■ B" in legend.plain and "■ C" not in legend.plain
    assert "lines cross" in legend.plain  # A and B share their first stretch
    assert all(len(line.plain) == 60 for line in lines[:-1])


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_whatif_keeps_policies_whole_and_shows_active_over_bound(size: tuple[int, int]) -> None:
    app = make_app()
    policies = (*POLICIES, "NodeCompactGPULowLoad+defrag")
    screen = WhatIfScreen(policies=policies, duration=timedelta(hours=1), churn=0)
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await app.push_screen(screen)
        for _ in range(3):
            await app.workers.wait_for_complete()
            await pilot.pause()
        assert screen.results is not None
        table = screen.query_one(ResourceTable)
        labels = [c.label for c in screen.shown_tables["main"].columns]
        assert labels[:2] == ["POLICY", "ACTIVE/LB"], labels
        for policy in policies:
            assert str(table.get_cell(policy, "policy")) == policy  # not `Com…ag`
            assert "/" in str(table.get_cell(policy, "ratio"))
        widths = sum(c.width + 2 for c in table.columns.values())
        assert widths <= size[0], widths
