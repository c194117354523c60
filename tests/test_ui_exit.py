"""Quitting the console is immediate, whatever analysis is still running; a write is never lost.

These run the console in a real Python process (Textual headless), because what delays an exit
lives outside the app: `asyncio.run` joins the default executor's threads and the interpreter joins
every non-daemon thread before it ends. A Pilot test runs inside pytest's loop and would not see it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXIT_BOUND = 5.0
"""Seconds the process may take to end after the exit was asked for (the analysis needs 60)."""

SLOW_ANALYSIS = textwrap.dedent(
    """
    import sys, threading, time
    from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
    from tftui.sources.sim.step1 import SimStep1
    from tftui.sources.sim.usage import SimMetrics
    from tftui.ui.app import TfTuiApp

    started = threading.Event()

    class SlowStore:
        '''The demo's metrics, with a step 1 that computes for a minute in pure Python and never
        looks at cancellation (like SimStep1 over a day of metrics on a loaded machine).'''

        def __init__(self, metrics):
            self.metrics = metrics
            self.step1_port = SimStep1(metrics)

        def describe(self):
            return "slow store"

        def latest_gpu_usage(self, now, lookback=None):
            return self.metrics.latest_gpu_usage(now)

        def latest_worker_usage(self, now, lookback=None):
            return self.metrics.latest_worker_usage(now)

        def rows(self, table, start, end):
            return self.metrics.rows(table, start, end)

        def step1(self, window, now, gpu_capacity):
            started.set()
            end = time.monotonic() + 60
            n = 0
            while time.monotonic() < end:
                n += 1
            print("analysis finished", flush=True)
            return self.step1_port.step1(window, now, gpu_capacity)

        def alert_rows(self, rule, now):
            return self.step1_port.alert_rows(rule, now)

        def alert_history(self, rule, times):
            return self.step1_port.alert_history(rule, times)

    demo = SimCluster(seed=7, nodes=40, now=DEFAULT_NOW)
    app = TfTuiApp(
        demo, SlowStore(SimMetrics(demo.snapshot(), seed=7, now=DEFAULT_NOW)),
        clock=lambda: DEFAULT_NOW, refresh_interval=None,
    )

    def steps():
        loading = time.monotonic() + 60
        while app.data is None:
            assert time.monotonic() < loading, "the console never loaded the cluster"
            time.sleep(0.05)
        app.call_from_thread(app.switch_view, "waste")
        assert started.wait(30), "the waste analysis never started"
        time.sleep(0.3)
        assert app.computing("waste")
        print("exit requested", flush=True)
        app.call_from_thread(app.exit)

    def drive():  # a failed step is the parent's first line (not "exit requested"), then quit
        try:
            steps()
        except BaseException as exc:
            print(f"driver failed: {exc!r}", flush=True)
            app.call_from_thread(app.exit)

    threading.Thread(target=drive, daemon=True).start()
    app.run(headless=True, size=(120, 40))
    print("app returned", flush=True)
    """
)


SLOW_WRITE = textwrap.dedent(
    """
    import sys, threading, time
    from tftui.sources.sim.acting import ActingSimCluster
    from tftui.sources.sim.cluster import DEFAULT_NOW
    from tftui.ui.app import TfTuiApp

    applying = threading.Event()
    closed = threading.Event()

    class SlowCluster(ActingSimCluster):
        # the demo's writable cluster, whose API server answers only once the console has closed

        def apply(self, action):
            applying.set()
            closed.wait(10)
            super().apply(action)
            print("applied", type(action).__name__, flush=True)

    demo = SlowCluster(seed=7, nodes=40, now=DEFAULT_NOW)
    app = TfTuiApp(demo, None, clock=demo.clock, refresh_interval=None)

    def steps():
        loading = time.monotonic() + 60
        while app.data is None:
            assert time.monotonic() < loading, "the console never loaded the cluster"
            time.sleep(0.05)
        assert app.call_from_thread(app.perform, "manual_compaction", pool="demo-dev")
        assert applying.wait(30), "the compaction never started writing"
        print("exit requested", flush=True)
        app.call_from_thread(app.exit)

    def drive():  # a failed step is the parent's first line (not "exit requested"), then quit
        try:
            steps()
        except BaseException as exc:
            print(f"driver failed: {exc!r}", flush=True)
            app.call_from_thread(app.exit)

    threading.Thread(target=drive, daemon=True).start()
    app.run(headless=True, size=(120, 40))
    print("app returned", flush=True)
    closed.set()
    app.wait_for_writes(lambda line: print(line, file=sys.stderr, flush=True))
    released = [e for e in demo.events() if "demo-dev" in str(e)]
    print("journal has demo-dev:", bool(released), flush=True)
    """
)


def console_process(script: str) -> tuple[subprocess.Popen[bytes], float]:
    """Start `script`; return it and the time it printed `exit requested` (its first line).

    Unbuffered binary pipes: a buffered reader's `readline` may take the following lines too, and
    `communicate` (which reads the descriptors) would then never see them."""
    env = {**os.environ, "TEXTUAL_ANIMATIONS": "none", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()  # blocks until the work runs and the exit is asked for
    asked = time.monotonic()
    if line.strip() != "exit requested":
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the console never got to quitting: {line}{out.decode()}{err.decode()}")
    return proc, asked


def finish(proc: subprocess.Popen[bytes], asked: float, bound: float) -> tuple[str, str, float]:
    """Wait at most `bound` seconds for the process to end; (stdout, stderr, seconds it took)."""
    try:
        out, err = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"the console was still running {bound:.0f}s after quitting") from None
    return out.decode(), err.decode(), time.monotonic() - asked


def test_quit_does_not_wait_for_a_running_analysis() -> None:
    proc, asked = console_process(SLOW_ANALYSIS)
    out, err, took = finish(proc, asked, EXIT_BOUND)
    assert proc.returncode == 0, err
    assert "app returned" in out and "analysis finished" not in out, (out, err)
    assert took < EXIT_BOUND


def test_quit_finishes_and_reports_a_write_in_flight() -> None:
    proc, asked = console_process(SLOW_WRITE)
    out, err, took = finish(proc, asked, 30.0)
    assert proc.returncode == 0, err
    assert took < EXIT_BOUND  # the console did not wait for the write before closing
    # the UI closed first, then the write landed, then it was reported on stderr
    assert out.index("app returned") < out.index("applied"), out
    assert "tftui: waiting for manual compaction of demo-dev to finish…" in err, err
    assert "tftui: manual compaction of demo-dev: released dev-4090-03" in err, err
    assert "journal has demo-dev: True" in out, out
