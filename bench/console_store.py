"""Benchmark: the console's memory at 5,000 nodes with a metrics store, over a dozen refreshes.

`bench/console.py` measures the console's peak RSS without a metrics store. An operator of a
cluster this size has one, and then every refresh also reads the latest samples and recomputes
the analyses `:workloads` shows (autoscale recommendations from the usage histograms, the waste
diagnosis, the alert replay). This script loads `--minutes` of the cluster's four metrics tables
(the simulator's rows for the same generated cluster) into the tests' PostgreSQL (tests/pg.py),
then, in a fresh process, opens the console on the generated objects (held as the live watch
cache holds them, as `bench/console.py` does) with `GreptimeMetrics` on that database, opens
`:gpus`, `:nodes` and `:workloads`, and runs `--refreshes` refreshes with 1 % of the pods changed,
each until its data and analyses are on screen. Printed: the peak RSS after the views, RSS after
each refresh, the peak over all of it (goal ≤ 1 GiB, as without a store) and RSS after a full
collection with the frozen objects released and the heap trimmed (what is live, or held by the
allocator's partly used arenas, at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _frames import FrameDriver, key_to_frame
from _timing import ratio
from console import Churning, hwm_mib, listed, one_refresh, status_mib, switches, wait_data

from tests.pg import SIM_TABLES, copy_rows, database, start_server

DSN_VAR = "TFTUI_BENCH_STORE_DSN"


def rss_mib() -> float:
    return status_mib("VmRSS")


def load(dsn_out: list[str], minutes: int) -> tuple[Any, dict[str, int]]:
    """Start the server and load the generated cluster's last `minutes` of the four tables."""
    from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
    from tftui.sources.sim.usage import SimMetrics

    server = start_server()
    metrics = SimMetrics(generate_objects(nodes=5000, gpus_per_node=8, workers=60000), now=DEFAULT_NOW)
    start = DEFAULT_NOW - timedelta(minutes=minutes)
    with database(server, "bench") as conn:
        counts = {t: copy_rows(conn, t, metrics.rows(t, start, DEFAULT_NOW)) for t in SIM_TABLES}
        conn.execute("ANALYZE")
    dsn_out.append(server.dsn("bench"))
    return server, counts


async def measure(dsn: str, refreshes: int) -> dict[str, Any]:
    """The console with the store at `dsn` (run in a process of its own: its peak is its own)."""
    from tftui.model.dedupe import Deduper
    from tftui.sources.greptime import GreptimeMetrics
    from tftui.sources.sim.cluster import DEFAULT_NOW
    from tftui.ui.app import TfTuiApp
    from tftui.ui.screens.resource import WorkloadsScreen

    shape = argparse.Namespace(source="cache", nodes=5000, gpus_per_node=8, workers=60000)
    dedupe = Deduper().object
    cluster = Churning(listed(shape, dedupe), dedupe)
    out: dict[str, Any] = {"source_mib": hwm_mib(), "refreshes": []}
    app = TfTuiApp(
        cluster, GreptimeMetrics(dsn), clock=lambda: DEFAULT_NOW, refresh_interval=None, read_only=True
    )
    app.driver_class = FrameDriver

    async def settled() -> None:  # the refresh and every analysis it asked for are on screen
        await wait_data(app, 0)
        while app.data is None or app.data.pending or app._refreshing():
            await asyncio.sleep(0.05)

    async with app.run_test(headless=False, size=(200, 50)):
        await settled()
        out["first_mib"] = hwm_mib()
        await switches(app, 2, 0.05)  # :gpus, :nodes
        await key_to_frame(
            app, ("colon", *"workloads", "enter"), lambda: isinstance(app.screen, WorkloadsScreen)
        )
        while not any(t.row_count for t in app.screen.query("#main")):
            await asyncio.sleep(0.01)
        await settled()
        await asyncio.sleep(1.0)
        out["views_mib"] = hwm_mib()
        for _ in range(refreshes):
            cluster.churn(0.01)
            t = time.perf_counter()
            await one_refresh(app)
            await settled()
            out["refreshes"].append((time.perf_counter() - t, rss_mib()))
        out["peak_mib"] = hwm_mib()
        gc.unfreeze()
        gc.collect()
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        out["end_trimmed_mib"] = rss_mib()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=int, default=60, help="minutes of metrics loaded")
    parser.add_argument("--refreshes", type=int, default=12)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # the console's process
    args = parser.parse_args()
    if args.measure:  # the DSN comes in the environment: no password in a command line or an error
        result = asyncio.run(measure(os.environ[DSN_VAR], args.refreshes))
        print(json.dumps(result))
        return
    t = time.perf_counter()
    dsn: list[str] = []
    server, counts = load(dsn, args.minutes)
    try:
        print(
            f"loaded {sum(counts.values()):,} rows ({args.minutes} min of the four tables) in "
            f"{time.perf_counter() - t:.0f} s",
            flush=True,
        )
        cmd = [sys.executable, __file__, "--measure", "--refreshes", str(args.refreshes)]
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, DSN_VAR: dsn[0]})
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"the console's process failed (exit {done.returncode})")
        r = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        server.stop()
    each = ", ".join(f"{mib:.0f}" for _s, mib in r["refreshes"])
    slowest = max((s for s, _m in r["refreshes"]), default=0.0)
    print(
        f"console with a metrics store (PostgreSQL): source objects {r['source_mib']:.0f} MiB; first "
        f"screen {r['first_mib']:.0f}; after :gpus, :nodes, :workloads {r['views_mib']:.0f} (peaks)"
    )
    print(f"RSS after each of {len(r['refreshes'])} refreshes (MiB): {each}; slowest refresh {slowest:.1f} s")
    print(
        f"peak RSS {r['peak_mib']:.0f} MiB; at the end, frozen objects released, collected and "
        f"trimmed: {r['end_trimmed_mib']:.0f} MiB"
    )
    ratio("console_with_store_peak_rss_mib/1024", r["peak_mib"] / 1024, 1, "<=")
    ratio("console_with_store_views_rss_mib/1024", r["views_mib"] / 1024, 1, "<=")


if __name__ == "__main__":
    main()
