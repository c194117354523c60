"""Object text reaches the screen as plain text: markup and terminal escapes in every field.

The hostile cluster (`tests/hostile.py`) carries `[/]`, `[bold red]x[/]`, `[link=…]`, OSC 0 (title),
OSC 52 (clipboard), `ESC [2J` and the 8-bit CSI in names, phases, modes, models, messages,
annotations, events, the context name and (through the simulator) the metrics rows' tags. Every
view and dialog is opened; each time the screen as Textual composes it must show the payloads
literally (controls as `\\x1b`-style escapes), contain no raw control character, and the console must
still be running. On the code before the fix the first view already stopped with MarkupError.
"""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

import ast
from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from rich.control import strip_control_codes
from textual.pilot import Pilot

from tests.hostile import (
    ANNOTATION,
    CONTEXT,
    EVENT_NOTE,
    EVENT_REASON,
    MODE,
    MODEL,
    NAMESPACE,
    NODE,
    PHASE,
    POOL,
    WORKLOAD,
    HostileCluster,
    shown,
)
from tftui.model.plaintext import unsafe
from tftui.model.usage import GPUUsage, WorkerUsage
from tftui.sources.ports import SourceError
from tftui.sources.sim.cluster import DEFAULT_NOW
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp
from tftui.ui.load.analysis import AnalysisSettings
from tftui.ui.screens.modals import ConfirmScreen, HelpScreen, ModeScreen, WarningsScreen
from tftui.ui.screens.registry import ROOT_VIEWS
from tftui.ui.screens.text import TextScreen
from tftui.ui.screens.whatif import WhatIfScreen

SIZE = (200, 50)
FAST = AnalysisSettings(waste_window=timedelta(hours=1), history_span=timedelta(hours=1))


@pytest.fixture
def app() -> TfTuiApp:
    cluster = HostileCluster()
    metrics = SimMetrics(cluster.snapshot(), seed=7, now=DEFAULT_NOW)  # its rows carry the names
    return TfTuiApp(cluster, metrics, clock=cluster.clock, refresh_interval=None, analysis=FAST)


def screen_text(app: TfTuiApp) -> str:
    """The current screen exactly as Textual composes it for the terminal (dialogs over their
    background, toasts included), one line per row."""
    strips = app.screen._compositor.render_strips()
    return "\n".join(strip.text for strip in strips)


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(4):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


async def keys(pilot: Pilot[None], *names: str) -> None:
    await pilot.press(*names)
    await settle(pilot)


def check(app: TfTuiApp, *texts: str) -> str:
    """The console still runs, nothing raw is on screen, and each of `texts` shows as escaped.

    Rich itself removes BEL, BS, VT, FF and CR from the text a view styles (`Text`), so where a view
    built styled text those five are absent rather than escaped: either form is plain and inert."""
    assert app.is_running and app.return_code is None, "the console stopped"
    screen = screen_text(app)
    brief = "\n".join(line.rstrip() for line in screen.splitlines() if line.strip())
    raw = sorted({repr(ch) for ch in screen if unsafe(ch, multiline=True)})
    assert not raw, f"raw control characters on screen: {raw}\n{brief}"
    for text in texts:
        forms = {shown(text), shown(strip_control_codes(text))}
        assert any(f in screen for f in forms), f"{shown(text)!r} not on screen:\n{brief}"
    return screen


async def view(pilot: Pilot[None], name: str) -> None:
    await keys(pilot, "escape", "colon", *name, "enter")


async def test_resource_views_show_names_phases_modes_and_models_literally(app: TfTuiApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        check(app, POOL, MODE, CONTEXT)  # the pools table and the header (the context name)

        await view(pilot, "nodes")
        check(app, POOL, shown(NODE)[:10])  # the name column cuts the middle of a long name
        await keys(pilot, "slash", *"bold", "enter")  # the hostile node (its name has `[bold`)
        await keys(pilot, "n")  # copy its name: a newline or ESC in it must not reach a shell
        assert app.clipboard == shown(NODE)
        await keys(pilot, "enter")  # its drill-down: the full name and phase in crumbs and summary
        screen = check(app, NODE, PHASE, POOL, MODEL)
        assert screen.count(shown(MODEL)) == 4  # its four GPUs

        await view(pilot, "gpus")
        check(app, MODEL)

        await view(pilot, "workloads")
        check(app, f"quota {NAMESPACE}")  # the namespace quotas above the table
        await keys(pilot, "slash", *"link", "enter")
        check(app, WORKLOAD, POOL)
        await keys(pilot, "enter")  # the workload detail: summary, figures, sparklines, workers
        check(app, WORKLOAD)


async def test_operation_views_show_details_and_events_literally(app: TfTuiApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await view(pilot, "compaction")
        check(app, POOL)
        await keys(pilot, "down", "down", "down")  # the hostile pool (last by name): its nodes, why they stay
        check(app, POOL, f"GPUNode phase {PHASE}")

        await view(pilot, "defrag")
        await keys(pilot, "down", "down", "down")
        check(app, POOL)

        await view(pilot, "events")
        check(app, EVENT_REASON, f"GPUPool/{POOL}", EVENT_NOTE[:20])


async def test_metrics_views_show_tags_from_the_metrics_rows_literally(
    app: TfTuiApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `:whatif` opens the same screen over one simulated hour instead of a day: the text paths are
    # the same, the day only costs the suite ≈ 15 CPU-seconds
    monkeypatch.setitem(ROOT_VIEWS, "whatif", partial(WhatIfScreen, duration=timedelta(hours=1)))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await view(pilot, "waste")
        check(app, POOL, NODE)  # the diagnosis reads the simulator's rows tagged with the names
        await keys(pilot, "slash", *"bold", "enter", "enter")  # the hostile node's finding in full
        check(app, NODE, POOL)
        await keys(pilot, "c")  # its fixes to the clipboard: pasted into a shell, so escaped too
        assert shown(POOL) in app.clipboard and not unsafe(app.clipboard, multiline=True)

        await view(pilot, "alerts")
        check(app)
        await keys(pilot, "down")  # EmptyGPU: its alerts name the empty nodes
        check(app, NODE)

        await view(pilot, "whatif")
        screen = app.screen
        assert isinstance(screen, WhatIfScreen) and screen.results, "the what-if never finished"
        check(app)


async def test_dialogs_text_views_and_notifications_show_object_text_literally(app: TfTuiApp) -> None:
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await keys(pilot, "down", "down", "down")  # the hostile pool (last by name)
        await keys(pilot, "p")  # its placement preview: the pool select, the request line
        check(app, POOL)
        await keys(pilot, "escape", "escape")

        await keys(pilot, "y")
        assert isinstance(app.screen, TextScreen)
        check(app, ANNOTATION.split("\x1b")[0])  # YAML quotes the rest of it with its own escapes
        await keys(pilot, "escape", "d")
        check(app, MODE)
        await keys(pilot, "escape", "enter", "slash", *"bold", "enter", "y")
        check(app, NODE)  # the crumbs name the node; the YAML body escapes it the YAML way
        await keys(pilot, "escape", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        check(app, POOL)  # the help's title is the breadcrumb
        await keys(pilot, "escape", "w")
        assert isinstance(app.screen, WarningsScreen)
        check(app, f"GPUNode {NODE}")
        await keys(pilot, "escape")

        await view(pilot, "pools")
        await keys(pilot, "down", "down", "down", "m")
        assert isinstance(app.screen, ModeScreen)
        await keys(pilot, "tab")  # the first mode: its description names the pool
        check(app, POOL)
        await keys(pilot, "escape")

        await view(pilot, "workloads")
        await keys(pilot, "slash", *"link", "enter", "a")
        assert isinstance(app.screen, ConfirmScreen)
        check(app, WORKLOAD)
        await keys(pilot, "escape")

        await view(pilot, "pools")
        await keys(pilot, "down", "down", "down", "c")
        assert isinstance(app.screen, ConfirmScreen)
        check(app, POOL, f"{POOL}-")  # the GPUNodeClaim it deletes is named after the pool
        await keys(pilot, "tab", "enter")  # compact: the notification names the pool
        screen = check(app, f"manual compaction of {POOL}")
        assert "released" in screen
        await view(pilot, "events")
        check(app, POOL)  # the runtime journal


class FailingMetrics:
    """A metrics store whose error message carries a payload (as a server's error text can)."""

    def latest_gpu_usage(
        self, now: datetime, lookback: timedelta = timedelta(minutes=5)
    ) -> dict[str, GPUUsage]:
        raise SourceError(f"greptime: {MODE} {PHASE}")

    def latest_worker_usage(
        self, now: datetime, lookback: timedelta = timedelta(minutes=5)
    ) -> dict[tuple[str, str], WorkerUsage]:
        raise SourceError(f"greptime: {MODE} {PHASE}")

    def rows(self, table: str, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        raise SourceError(f"greptime: {MODE} {PHASE}")


async def test_header_status_shows_a_source_error_literally() -> None:
    cluster = HostileCluster()
    app = TfTuiApp(cluster, FailingMetrics(), clock=cluster.clock, refresh_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        check(app, CONTEXT, f"greptime: {MODE} {PHASE}"[:60])


# -- the guard: no module reaches past the plain widgets --------------------------------------------

UI = Path(__file__).resolve().parents[1] / "tftui" / "ui"
MARKUP_PARSERS = {"from_markup", "from_ansi", "render_str", "render_markup"}


def test_console_code_builds_no_markup_and_no_raw_widget() -> None:
    """Every `Static`/`Label` is a `PlainStatic`/`PlainLabel`, every DataTable a `ResourceTable`,
    every Tree a `PlainTree`,
    nothing parses markup or ANSI, nothing asks for `markup=True` (widgets/plain.py is the door)."""
    bad: list[str] = []
    for path in sorted(UI.rglob("*.py")):
        rel = path.relative_to(UI.parent.parent)
        # the doors: plain.py makes every widget's content plain; table.py is the one DataTable the
        # console uses, and tabledraw.py the drawing it inherits (it keeps lines, adds no content)
        door = path.name == "plain.py" or (
            path.name in ("table.py", "tabledraw.py") and path.parent.name == "widgets"
        )
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                name = (
                    func.id
                    if isinstance(func, ast.Name)
                    else func.attr
                    if isinstance(func, ast.Attribute)
                    else ""
                )
                if name in ("Static", "Label", "DataTable", "Tree") and not door:
                    bad.append(f"{rel}:{node.lineno} calls {name}()")
                if name in MARKUP_PARSERS:
                    bad.append(f"{rel}:{node.lineno} calls {name}()")
                for kw in node.keywords:
                    if kw.arg == "markup" and not (
                        isinstance(kw.value, ast.Constant) and kw.value.value is False
                    ):
                        bad.append(f"{rel}:{node.lineno} passes markup={ast.unparse(kw.value)}")
            if isinstance(node, ast.ClassDef) and not door:
                for base in node.bases:
                    base_name = ast.unparse(base)
                    if base_name.split("[")[0] in ("Static", "Label", "DataTable", "Tree"):
                        bad.append(f"{rel}:{node.lineno} subclasses {base_name}")
    assert bad == []
