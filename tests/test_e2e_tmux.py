"""End to end: the real `tftui --demo` console in a detached tmux session, driven by keystrokes.

What the operator sees is read back with `capture-pane`, so this covers the terminal driver, the
CLI wiring and the real refresh loop that the pilot and snapshot tests replace with fakes.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.greptime_dialect import DialectServer
from tftui.engine.state import ClusterState
from tftui.model.dump import validate_items
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
WIDTH, HEIGHT = 160, 45
NODE = "inf-h100-03"
EXIT_MARK = "tftui exited with"


class Tmux:
    """One tmux server on its own socket (`-L`), so parallel runs and the user's tmux never meet."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.socket = f"tftui-e2e-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.env = {**os.environ, "TERM": "xterm-256color", "TEXTUAL_ANIMATIONS": "none"}
        for name in ("TMUX", "COLUMNS", "LINES"):  # COLUMNS/LINES would override the pane size
            self.env.pop(name, None)

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            [self.binary, "-L", self.socket, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return done.stdout

    def start(self, command: str) -> None:
        self(
            "new-session", "-d", "-s", "tftui", "-x", str(WIDTH), "-y", str(HEIGHT),
            "-c", str(ROOT), "-e", "TERM=xterm-256color", "-e", "TEXTUAL_ANIMATIONS=none",
            command,
        )  # fmt: skip

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "tftui")

    def keys(self, *keys: str, literal: bool = False) -> None:
        self("send-keys", "-t", "tftui", *(["-l"] if literal else []), *keys)

    def wait_for(self, predicate: Callable[[str], bool], what: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if predicate(text):
                return text
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; screen was:\n{text}")

    def wait_text(self, needle: str, timeout: float = 20.0) -> str:
        return self.wait_for(lambda s: needle in s, repr(needle), timeout)

    def open_prompt(self, sigil: str) -> None:
        """Type `:` or `/` until the prompt shows (a key sent while Textual still reads the
        terminal's replies to its start-up queries can be swallowed)."""
        hint = "pools  nodes  gpus  workloads" if sigil == ":" else "filter rows"
        for attempt in range(5):
            if attempt:
                self.keys("Escape")  # in case the last try opened it late: start from closed
            self.keys(sigil, literal=True)
            try:
                self.wait_text(hint, timeout=2.0)
                return
            except AssertionError:
                continue
        raise AssertionError(f"the {sigil!r} prompt never opened; screen was:\n{self.screen()}")

    def press_until(
        self, keys: tuple[str, ...], needle: str, *, literal: bool = False, tries: int = 5
    ) -> str:
        """Send `keys` until `needle` shows: a key sent right after a screen change can be swallowed
        while Textual reads the terminal's replies to its queries (as at start-up)."""
        for _ in range(tries):
            self.keys(*keys, literal=literal)
            try:
                return self.wait_text(needle, timeout=2.0)
            except AssertionError:
                continue
        raise AssertionError(f"{needle!r} never showed after {keys}; screen was:\n{self.screen()}")

    def kill(self) -> None:
        subprocess.run(
            [self.binary, "-L", self.socket, "kill-server"], env=self.env, capture_output=True, timeout=10
        )


def demo_console(*flags: str) -> str:
    """`make demo`'s command: the virtualenv's `tftui` script with `--demo` (and `flags`)."""
    script = Path(sys.executable).with_name("tftui")
    if not script.exists():
        pytest.fail(f"{script} is missing: run `make install`")
    return " ".join(shlex.quote(a) for a in (str(script), "--demo", *flags))


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    binary = shutil.which("tmux")
    if binary is None:
        pytest.fail("tmux is required for the end-to-end console test: apt-get install tmux")
    session = Tmux(binary)
    try:
        yield session
    finally:
        session.kill()


def test_demo_console_in_tmux(tmux: Tmux) -> None:
    state = ClusterState.build(validate_items(SimCluster(seed=7, nodes=40, now=DEFAULT_NOW).snapshot()))
    node_gpus = state.nodes[NODE].gpus
    console = demo_console()
    # The shell stays after the console exits and prints its status, so the exit can be asserted.
    tmux.start(f"{console}; echo '{EXIT_MARK}' $?; sleep 60")

    # the table and the header are drawn in separate updates: wait for both (under load a capture
    # once caught the header half-written)
    pools = tmux.wait_for(
        lambda s: "demo-inference" in s and "refreshed 12:00:00 UTC" in s, "the pools table and its header"
    )
    assert "pools (4)" in pools and "demo-training" in pools and "demo-dev" in pools

    tmux.open_prompt(":")
    tmux.keys("nodes", literal=True)
    tmux.keys("Enter")
    nodes = tmux.wait_text(f"nodes ({len(state.nodes)})")
    assert "dev-4090-01" in nodes and "POOL" in nodes

    tmux.open_prompt("/")
    tmux.keys("h100-03", literal=True)
    tmux.keys("Enter")
    filtered = tmux.wait_text(f"nodes (1/{len(state.nodes)})   /h100-03")
    assert NODE in filtered and "dev-4090-01" not in filtered

    tmux.keys("Enter")
    # the crumb and the GPU rows are drawn in separate updates (under load a capture caught the
    # crumb alone): wait for both; GPU names are cut in the middle to fit the column
    node = tmux.wait_for(
        lambda s: f"nodes › {NODE} ({len(node_gpus)} GPUs" in s and all(g[:8] in s for g in node_gpus),
        "the node's drill-down and its GPU rows",
    )
    assert node.count("H100 80GB HBM3") == len(node_gpus)
    assert "do-not-disrupt" in node  # the node's flag, spelled out in the summary

    tmux.keys("Escape")
    tmux.wait_text(f"nodes (1/{len(state.nodes)})")

    # k9s keys from the registry: shift+letter sorts (the breadcrumb says how), y shows the YAML
    tmux.press_until(("G",), "sort gpus↑", literal=True)
    tmux.press_until(("G",), "sort gpus↓", literal=True)
    tmux.press_until(("y",), f"nodes › {NODE} › yaml", literal=True)
    assert "kind: GPUNode" in tmux.screen()
    tmux.keys("Escape")
    tmux.wait_text("sort gpus↓")

    # a pool (through the command palette), its placement preview, a submitted request
    tmux.press_until(("C-p",), "Search for commands")
    tmux.keys("View :pools", literal=True)
    tmux.wait_text("Switch to the pools view")
    tmux.keys("Enter")
    tmux.wait_text("pools (4)")
    tmux.press_until(("p",), "pools › demo-dev › place")  # the cursor is on demo-dev
    tmux.wait_text("1 × (10 TFLOPS, 8Gi VRAM) in pool demo-dev")
    # the compute field has the focus: 10 → 105 TFLOPS (one key, sent again only while the field
    # still reads 10: a key that arrived but is not drawn yet must not be typed twice)
    for _ in range(5):
        field = tmux.wait_for(lambda s: re.search(r"compute\s+10(5)?\b", s) is not None, "the compute field")
        if re.search(r"compute\s+105\b", field):
            break
        tmux.keys("5", literal=True)
        with contextlib.suppress(AssertionError):
            tmux.wait_for(lambda s: re.search(r"compute\s+10\b", s) is None, "the key drawn", timeout=5.0)
    screen = tmux.screen()
    assert re.search(r"compute\s+105\b", screen), f"the compute field never read 105; screen was:\n{screen}"
    tmux.keys("Enter")
    place = tmux.wait_text("1 × (105 TFLOPS, 8Gi VRAM) in pool demo-dev")
    for mode in ("CompactFirst", "LowLoadFirst", "NodeCompactGPULowLoad"):
        assert mode in place
    assert "▶ LowLoadFirst" in place  # demo-dev's current mode

    # manual compaction: c, the dialog (Cancel focused), tab to Compact, enter
    tmux.keys("Escape")
    tmux.wait_text("pools (4)")
    released = "released dev-4090-03"  # the notification (it may wrap after the first node)
    for _ in range(3):
        dialog = tmux.press_until(("c",), "Manual compaction · pool demo-dev")
        assert "dev-4090-03" in dialog and "dev-4090-04" in dialog and "warm ≥" in dialog
        time.sleep(0.3)  # let the dialog settle so tab is not swallowed (enter alone would cancel)
        tmux.keys("Tab")
        time.sleep(0.2)
        tmux.keys("Enter")
        try:
            tmux.wait_text(released, timeout=5.0)
            break
        except AssertionError:
            if "Manual compaction" in tmux.screen():
                tmux.keys("Escape")
    else:
        raise AssertionError(f"the manual compaction never ran; screen was:\n{tmux.screen()}")
    tmux.open_prompt(":")
    tmux.keys("events", literal=True)
    tmux.keys("Enter")
    events = tmux.wait_text("runtime journal, newest first")
    assert "Compaction" in events and "GPUPool/demo-dev" in events
    tmux.open_prompt("/")
    tmux.keys("release dev", literal=True)
    tmux.keys("Enter")
    tmux.wait_text("release dev-4090-03")  # the journal line of the released node

    # the metrics views: computed in the background from the demo's simulated metrics
    tmux.open_prompt(":")
    tmux.keys("alerts", literal=True)
    tmux.keys("Enter")
    alerts = tmux.wait_text("rules firing", timeout=30)
    assert "? no-data" in alerts and "✓ ok" in alerts
    tmux.open_prompt(":")
    tmux.keys("waste", literal=True)
    tmux.keys("Enter")
    waste = tmux.wait_text("findings from demo (simulated metrics)", timeout=60)  # a day of rows
    assert "wasted" in waste and "GPU-h" in waste and "over 1d" in waste

    tmux.keys("q")
    # quitting abandons an analysis still computing (the next refresh's day of waste): no wait
    tmux.wait_text(f"{EXIT_MARK} 0", timeout=5)


def test_read_only_production_console_in_tmux(tmux: Tmux, tmp_path: Path) -> None:
    """`--read-only` on a context matching the config's production patterns: the header says both,
    the write keys are neither in the footer nor obeyed, and `?` lists no write."""
    config = tmp_path / "config.yaml"
    config.write_text("production: ['dem*']\n")
    tmux.env["TFTUI_CONFIG"] = str(config)
    tmux.start(
        f"TFTUI_CONFIG={shlex.quote(str(config))} {demo_console('--read-only')}; echo '{EXIT_MARK}' $?; sleep 60"
    )
    pools = tmux.wait_for(
        lambda s: "demo-inference" in s and "PRODUCTION" in (s.splitlines() or [""])[0] and "p Place" in s,
        "the pools table, the production header and the footer",
    )
    header = pools.splitlines()[0]
    assert "read-only" in header and "PRODUCTION" in header
    footer = pools.rstrip().splitlines()[-1]
    assert "p Place" in footer and "Compact" not in footer
    tmux.keys("c")
    time.sleep(1.0)
    assert "Manual compaction" not in tmux.screen()
    help_screen = tmux.press_until(("?",), "Help · pools", literal=True)
    assert "Place" in help_screen and "Compact !" not in help_screen and "Mode !" not in help_screen
    tmux.keys("Escape")
    tmux.wait_for(lambda s: "Help · pools" not in s, "help to close")  # esc+q at once reads as alt+q
    tmux.keys("q")
    tmux.wait_text(f"{EXIT_MARK} 0", timeout=10)


SGR = re.compile(r"\x1b\[([0-9;]*)m")
RGB = tuple[int, int, int]


def styled_cells(line: str) -> list[tuple[str, RGB | None, RGB | None]]:
    """The characters of a `capture-pane -e` line with the 24-bit foreground and background each is
    drawn in (None: the terminal's default)."""
    out: list[tuple[str, RGB | None, RGB | None]] = []
    fg: RGB | None = None
    bg: RGB | None = None
    pos = 0
    for m in [*SGR.finditer(line), None]:
        end = m.start() if m is not None else len(line)
        out += [(ch, fg, bg) for ch in line[pos:end]]
        if m is None:
            break
        pos = m.end()
        codes = [int(c) if c else 0 for c in m.group(1).split(";")]
        i = 0
        while i < len(codes):
            c = codes[i]
            if c in (38, 48) and i + 4 < len(codes) + 1 and codes[i + 1] == 2:
                rgb = (codes[i + 2], codes[i + 3], codes[i + 4])
                fg, bg = (rgb, bg) if c == 38 else (fg, rgb)
                i += 5
                continue
            if c == 0:
                fg = bg = None
            elif c == 39:
                fg = None
            elif c == 49:
                bg = None
            i += 1
    return out


def luminance(rgb: RGB) -> float:
    r, g, b = rgb
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_speed_light_theme_and_numeric_export_in_tmux(tmux: Tmux, tmp_path: Path) -> None:
    """`--speed 120`: the clock runs and usage keeps coming; ctrl+t: the light theme draws the free
    dots readable from its first frame; ctrl+s: a new file each time, parsed as CSV, numbers."""
    exports = tmp_path / "exports"
    config = tmp_path / "config.yaml"
    config.write_text(f"export_dir: {exports}\n")
    tmux.env["COLORTERM"] = "truecolor"
    tmux.start(
        f"COLORTERM=truecolor TFTUI_CONFIG={shlex.quote(str(config))} {demo_console('--speed', '120')}; "
        f"echo '{EXIT_MARK}' $?; sleep 60"
    )
    tmux.wait_for(lambda s: "demo-inference" in s and "clock ×120" in s, "the pools table and 'clock ×120'")
    tmux.open_prompt(":")
    tmux.keys("nodes", literal=True)
    tmux.keys("Enter")
    tmux.wait_text("nodes (")

    # the simulated clock passes a quarter of an hour (8 s at ×120: the first periodic refresh, 10 s
    # in, shows 12:20); usage is still measured then
    def later(screen: str) -> bool:
        m = re.search(r"refreshed (\d\d):(\d\d):\d\d UTC", screen)
        return m is not None and (int(m.group(1)), int(m.group(2))) >= (12, 16)

    screen = tmux.wait_for(later, "the demo clock to pass 12:16", timeout=60)
    used = re.findall(r"\d+%/ *(\S+)", screen)
    assert used and sum(1 for u in used if u != "—") >= len(used) * 0.9, used  # '—' is no data

    def dots(capture: str) -> list[tuple[RGB | None, RGB | None]]:
        return [(fg, bg) for line in capture.splitlines() for ch, fg, bg in styled_cells(line) if ch == "·"]

    dark = dots(tmux("capture-pane", "-p", "-e", "-t", "tftui"))
    assert dark and all(bg is None or luminance(bg) < 128 for _, bg in dark)
    # with the automatic refresh paused only the theme switch itself can redraw the free dots
    tmux.press_until(("R",), "⏸ paused", literal=True)
    tmux.keys("C-t")

    def readable(capture: str) -> bool:
        light = [(fg, bg) for fg, bg in dots(capture) if bg is not None and luminance(bg) > 160]
        return bool(light) and all(
            fg is not None and abs(luminance(fg) - luminance(bg)) > 60 for fg, bg in light
        )

    deadline = time.monotonic() + 10.0  # the redraw follows the new CSS by a frame or so
    while not readable(tmux("capture-pane", "-p", "-e", "-t", "tftui")):
        assert time.monotonic() < deadline, "the light theme's free dots never became readable"
        time.sleep(0.05)
    tmux.press_until(("R",), "clock ×120", literal=True)
    tmux.wait_for(lambda s: "⏸ paused" not in s, "the refresh to resume")

    paths: list[Path] = []
    for _ in range(2):  # the same (simulated) second or not, each export is a new file
        before = set(exports.glob("*.csv")) if exports.exists() else set()
        tmux.keys("C-s")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (
            set(exports.glob("*.csv")) - before if exports.exists() else set()
        ):
            time.sleep(0.1)
        (new,) = set(exports.glob("*.csv")) - before
        paths.append(new)
    assert paths[0] != paths[1]
    with paths[1].open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) >= 30 and rows[0]["NAME"]
    numeric = [
        "TFLOPS allocated (TFLOPS)",
        "TFLOPS capacity (TFLOPS)",
        "TFLOPS allocated %",
        "VRAM used (bytes)",
    ]
    for row in rows:
        for column in numeric:
            float(row[column])  # numbers, not gauge glyphs
        assert 0 <= float(row["TFLOPS allocated %"]) <= 100
    assert any(float(r["TFLOPS used %"]) > 0 for r in rows if r["TFLOPS used %"])
    tmux.keys("q")
    tmux.wait_text(f"{EXIT_MARK} 0", timeout=10)


SCALE_NODES = 2000


def test_view_switch_typed_while_a_refresh_runs_at_scale(tmux: Tmux) -> None:
    """At a few thousand nodes a refresh is nearly always running; `:nodes` + enter typed as one
    burst then must switch the view: no letter after `:` may reach the table as a hotkey (`n`
    sorts, `d` describes, `e` admits), which happened when the prompt took the focus only after
    the keys already queued behind `:`."""
    console = demo_console("--nodes", str(SCALE_NODES))
    tmux.start(f"{console}; echo '{EXIT_MARK}' $?; sleep 60")
    # the first screen: pools drawn while metrics and operations still load (a refresh running)
    first = tmux.wait_for(
        lambda s: "pools (4)" in s and "loading metrics" in s, "the first screen, still loading", 240
    )
    assert "⟳" in first
    tmux.keys(":nodes", literal=True)
    tmux.keys("Enter")
    nodes = tmux.wait_text("nodes (showing 1,000 of ", timeout=120)  # the demo adds its isolation pool
    assert "sort" not in nodes and "describe" not in nodes
    # a periodic refresh: the header's ⟳ without anything pending
    tmux.wait_for(
        lambda s: "⟳" in s and "loading" not in s and "nodes (showing" in s, "a periodic refresh", 120
    )
    tmux.keys(":gpus", literal=True)
    tmux.keys("Enter")
    gpus = tmux.wait_text("gpus (showing 1,000 of", timeout=120)
    assert "sort" not in gpus and "describe" not in gpus
    tmux.keys(":q", literal=True)
    tmux.keys("Enter")
    tmux.wait_text(f"{EXIT_MARK} 0", timeout=60)


def test_a_hung_metrics_store_holds_neither_the_refresh_nor_the_exit_in_tmux(
    tmux: Tmux, dialect_server: DialectServer
) -> None:
    """The demo cluster with a GreptimeDB-dialect store that stops answering (`tf_gpu_usage` held,
    its statement timeout ignored, as a wedged server): the header says the store is slow within a
    refresh, the pools keep refreshing, and `q` ends the console at once, not after the query limit."""
    dialect_server.create_database("hung_e2e", "greptime_timestamp")
    dsn = dialect_server.dsn("hung_e2e")
    with dialect_server.stall("tf_gpu_usage", honour_timeout=False) as stall:
        tmux.start(
            f"{demo_console('--metrics-dsn', dsn, '--metrics-timeout', '120s')}; echo '{EXIT_MARK}' $?; sleep 60"
        )
        screen = tmux.wait_text("slow, no answer since", timeout=60)
        assert "demo-inference" in screen and "latest samples still loading" in screen
        assert stall.entered.is_set() and not stall.released.is_set()
        tmux.press_until(("q",), f"{EXIT_MARK} 0", literal=True)
