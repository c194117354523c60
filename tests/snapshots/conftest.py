"""Snapshot harness: deterministic console screenshots stored in the repository's `snapshots/`.

Determinism kit: animations off before Textual is imported, no cursor blink, a
fixed clock, no periodic refresh, and every screenshot taken after the refresh worker finished.
"""

from __future__ import annotations

import os

os.environ["TEXTUAL_ANIMATIONS"] = "none"  # read by textual.constants at import time

from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pytest_textual_snapshot import SVGImageExtension
from textual.pilot import Pilot

from tftui.config import ConsoleConfig
from tftui.sources.ports import MetricsPort
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp
from tftui.ui.load.analysis import AnalysisSettings
from tftui.ui.screens.resource import NodeScreen

if TYPE_CHECKING:
    from syrupy.location import PyTestLocation

SNAPSHOT_ROOT = Path(__file__).resolve().parents[2] / "snapshots"
"""Top-level `snapshots/`, one sub-folder per test module (e.g. `snapshots/test_screens/`)."""


def _snapshot_dirname(cls: type[SVGImageExtension], *, test_location: PyTestLocation) -> str:
    return str(SNAPSHOT_ROOT / test_location.basename)


# pytest-textual-snapshot 1.1.0 pins syrupy 4.8, which has no setting for the folder.
SVGImageExtension.dirname = classmethod(_snapshot_dirname)

SIZES = [(80, 24), (120, 40), (200, 50)]
LIGHT_SIZE = (120, 40)
"""The light theme is shot at one size: the layout at each size is the dark shots' business, the
light ones check the colours, which do not depend on the size (each shot is a console start-up)."""


def cases(names: list[str], light: Callable[[str], bool]) -> list[Any]:
    """`(screen, size)` parameters: every size for a dark screen, `LIGHT_SIZE` for a light one; the
    ids (`name-WxH`) are the ones the SVG files are named after."""
    return [
        pytest.param(name, size, id=f"{name}-{size[0]}x{size[1]}")
        for name in names
        for size in ([LIGHT_SIZE] if light(name) else SIZES)
    ]
RunBefore = Callable[[Pilot[Any]], Awaitable[None]]
"""What `snap_compare` runs before the shot (`view`, `steps`)."""
ANALYSIS = AnalysisSettings(waste_window=timedelta(hours=1))
"""The waste view over 1 h instead of a day: SimStep1 streams every row of the window (a day takes
about 4 s on the 40-node demo, an hour 0.2 s). The alert replay and the 24 h sparklines are as shipped."""


@pytest.fixture(scope="session")
def demo_cluster() -> SimCluster:
    return SimCluster(seed=7, nodes=40, now=DEFAULT_NOW)


@pytest.fixture(scope="session")
def demo_metrics(demo_cluster: SimCluster) -> SimMetrics:
    return SimMetrics(demo_cluster.snapshot(), seed=7, now=DEFAULT_NOW)


def fixed_clock() -> datetime:
    return DEFAULT_NOW


def demo_app(
    metrics: MetricsPort | None,
    *,
    config: ConsoleConfig | None = None,
    read_only: bool = False,
    sim_speed: float = 0.0,
) -> TfTuiApp:
    """The console as `tftui --demo` opens it on a fresh writable demo cluster (runtime attached),
    on the fixed clock and without periodic refresh. `sim_speed` only changes what the header says
    of the clock: with no periodic refresh the one refresh of a snapshot moves no simulated time."""
    return TfTuiApp(
        ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW),
        metrics,
        clock=fixed_clock,
        refresh_interval=None,
        analysis=ANALYSIS,
        read_only=read_only,
        sim_speed=sim_speed,
        config=config,
    )


@pytest.fixture
def make_app(demo_metrics: SimMetrics) -> Iterator[Callable[[], TfTuiApp]]:
    """The console as `tftui --demo` opens it: a fresh writable demo cluster (runtime attached)."""

    def make() -> TfTuiApp:
        return demo_app(demo_metrics)

    yield make


async def settle(pilot: Pilot[Any]) -> None:
    """Let the workers finish (a refresh, a preview, a write and the refresh after it) and render."""
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def view(name: str, *presses: str, node: str | None = None) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """A `run_before`: wait for data, open a view (and a node), press keys, wait again.

    Views are opened directly rather than typed: the key paths are covered by the pilot and tmux
    tests, and each typed key costs a Textual idle wait.
    """

    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, TfTuiApp)
        await settle(pilot)
        if name != "pools":
            assert app.switch_view(name)
            await settle(pilot)
        if node is not None:
            await app.push_screen(NodeScreen(node, trail=(name, node)))
            await settle(pilot)
        if presses:
            await pilot.press(*presses)
            await settle(pilot)

    return run_before


def steps(
    *presses: str,
    command: str | None = None,
    view: str | None = None,
    push: Callable[[], Any] | None = None,
    workload: str | None = None,
    then_view: str | None = None,
) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """A `run_before` for the screens past the root views, each step waited for: a `:` command, a
    view, a pushed screen, a workload's detail, key presses, then another view. Toasts are cleared
    before the shot (they time out on the wall clock)."""

    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, TfTuiApp)
        await settle(pilot)
        if command is not None:
            assert app.run_command(command)
            await settle(pilot)
        if view is not None and view != "pools":
            assert app.switch_view(view)
            await settle(pilot)
        if push is not None:
            await app.push_screen(push())
            await settle(pilot)
        if workload is not None:
            app.open_workload(workload)
            await settle(pilot)
        if presses:
            await pilot.press(*presses)
            await settle(pilot)
        if then_view is not None:
            assert app.switch_view(then_view)
            await settle(pilot)
        app.clear_notifications()
        await pilot.pause()

    return run_before
