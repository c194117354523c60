"""`tftui recommend`, the workload autoscaler's CLI: stable JSON that explains every workload, one
workload as text, and one-line errors (exit 2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# -- CLI -----------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tftui", *args], capture_output=True, text=True, timeout=120)


def test_cli_recommend_demo_json_is_stable_and_explains() -> None:
    a, b = _cli("recommend", "--demo", "--json"), _cli("--demo", "recommend", "--json")
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    doc = json.loads(a.stdout)
    reasons = {w["reason"] for w in doc["workloads"]}
    assert len(doc["workloads"]) > 10
    assert {"disabled", "applied"} <= reasons
    assert all(w["reason"] for w in doc["workloads"])


def test_cli_recommend_one_workload_text_and_errors() -> None:
    doc = json.loads(_cli("recommend", "--demo", "--json").stdout)
    key = doc["workloads"][0]["workload"]
    out = _cli("recommend", "--demo", "--workload", key)
    assert out.returncode == 0, out.stderr
    assert key in out.stdout and ("would apply" in out.stdout or "not applied" in out.stdout)
    bad = _cli("recommend", "--demo", "--workload", "nope/nope")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    bad_now = _cli("recommend", "--demo", "--now", "yesterday")
    assert bad_now.returncode == 2 and bad_now.stderr.startswith("tftui: --now")


def test_cli_recommend_without_metrics_source_is_one_line_exit_2(tmp_path: Path) -> None:
    dump = _cli("dump", "--demo")
    path = tmp_path / "d.json"
    path.write_text(dump.stdout)
    out = subprocess.run(
        [sys.executable, "-m", "tftui", "recommend", "--from", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "TFTUI_METRICS_DSN"},
    )
    assert out.returncode == 2 and out.stderr.startswith("tftui: no metrics source")
    assert len(out.stderr.strip().splitlines()) == 1
