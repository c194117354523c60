"""The CLI's text, CSV and JSON never carry a raw control character from the objects or the metrics.

`plan`, `place`, `report`, `recommend`, `simulate` and `dump` run on the hostile dump
(`tests/hostile.py`); `report` and `recommend` read the simulator's rows for it from the real
PostgreSQL the suite starts, so the metrics tags carry the payloads too. Text output shows them as
`\\x1b`-style escapes, JSON as `\\u001b`-style escapes that parse back to the very same values.
Before the fix `plan` printed the OSC sequences of a GPUNode phase as they were.
"""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.hostile import MESSAGE, MODE, NODE, PHASE, POOL, WORKLOAD, hostile_objects, shown
from tests.pg import PgServer, database, load_sim
from tftui.cli import main
from tftui.model.dump import dumps
from tftui.model.plaintext import unsafe
from tftui.sources.sim.cluster import DEFAULT_NOW
from tftui.sources.sim.usage import SimMetrics

NOW = "2026-11-30T12:00:00Z"


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return hostile_objects()


@pytest.fixture
def dump(tmp_path: Path, objects: list[dict[str, Any]]) -> str:
    path = tmp_path / "hostile.json"
    path.write_text(dumps(objects))
    return str(path)


@pytest.fixture(scope="module")
def dsn(pg_server: PgServer, objects: list[dict[str, Any]]) -> str:
    """Two hours of the simulator's rows for the hostile cluster (tags: its names)."""
    with database(pg_server, "hostile_text") as conn:
        metrics = SimMetrics(objects, seed=7, now=DEFAULT_NOW)
        loaded = load_sim(conn, metrics, DEFAULT_NOW - timedelta(hours=2), DEFAULT_NOW)
        assert all(loaded.values())
    return pg_server.dsn("hostile_text")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    for stream, text in (("stdout", out), ("stderr", err)):
        raw = sorted({repr(ch) for ch in text if unsafe(ch, multiline=True)})
        assert not raw, f"{args[0]} {stream} has raw control characters {raw}"
    return out


def test_plan_text_and_json(capsys: pytest.CaptureFixture[str], dump: str) -> None:
    text = run(capsys, "--from", dump, "plan", "--now", NOW)
    assert f"GPUNode phase {shown(PHASE)}" in text  # the compaction DETAIL cell (G6: plain text)
    assert f"== pool {shown(POOL)}" in text and shown(NODE) in text
    doc = json.loads(run(capsys, "--from", dump, "plan", "--now", NOW, "--json"))
    details = [
        k["detail"] for p in doc["pools"].values() for k in (p.get("compaction") or {}).get("kept", [])
    ]
    assert f"GPUNode phase {PHASE}" in details  # the JSON means exactly the object's text


def test_place_text_and_json(capsys: pytest.CaptureFixture[str], dump: str) -> None:
    args = ("--from", dump, "place", "--pool", POOL, "--vram", "1Gi", "--tflops", "10", "--model", MODE)
    text = run(capsys, *args)
    assert f"in pool {shown(POOL)}" in text and f"model {shown(MODE)}" in text
    doc = json.loads(run(capsys, *args, "--json"))
    assert doc["pool"] == POOL


def test_report_text_csv_and_json(capsys: pytest.CaptureFixture[str], dump: str, dsn: str) -> None:
    base = ("--from", dump, "report", "--metrics-dsn", dsn, "--window", "1h")
    text = run(capsys, *base)
    assert shown(POOL) in text and shown(NODE) in text
    rows = list(csv.reader(run(capsys, *base, "--csv").splitlines()))
    cells = {c for r in rows for c in r}
    assert shown(POOL) in cells and shown(NODE) in cells
    doc = json.loads(run(capsys, *base, "--json"))
    assert POOL in {p["name"] for p in doc["pools"]}


def test_recommend_text_and_json(capsys: pytest.CaptureFixture[str], dump: str, dsn: str) -> None:
    base = ("--from", dump, "recommend", "--metrics-dsn", dsn, "--now", NOW)
    text = run(capsys, *base)
    assert shown(WORKLOAD) in text
    doc = json.loads(run(capsys, *base, "--json"))
    assert any(WORKLOAD in w["workload"] for w in doc["workloads"])


def test_simulate_text_csv_and_json(capsys: pytest.CaptureFixture[str], dump: str) -> None:
    base = ("--from", dump, "simulate", "--start", NOW, "--duration", "1h", "--churn", "0")
    text = run(capsys, *base, "--policy", "configured")
    assert shown(POOL) in text
    run(capsys, *base, "--policy", "configured", "--csv")
    json.loads(run(capsys, *base, "--policy", "configured", "--json"))


def test_dump_json_is_escaped_and_means_the_same(capsys: pytest.CaptureFixture[str], dump: str) -> None:
    out = run(capsys, "--from", dump, "dump")
    assert "\\u001b]0;pwned\\u0007" in out
    items = json.loads(out)["items"]
    node = next(o for o in items if o["kind"] == "GPUNode" and o["metadata"]["name"] == NODE)
    assert node["status"]["phase"] == PHASE and node["status"]["conditions"][0]["message"] == MESSAGE


def test_an_error_naming_hostile_input_is_one_escaped_line(
    capsys: pytest.CaptureFixture[str], dump: str
) -> None:
    code = main(["--from", dump, "place", "--pool", "nope" + PHASE, "--vram", "1Gi", "--tflops", "1"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("tftui: --pool: no GPUPool named ")
    assert not unsafe(err, multiline=True)
