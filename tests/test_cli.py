"""The `tftui` command as a user runs it: real processes, exit codes, stderr lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tftui.engine.state import ClusterState
from tftui.model.dump import load


def tftui(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tftui", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        input=stdin,
        timeout=120,
    )


def test_dump_demo_then_from_shows_the_same_cluster(tmp_path: Path) -> None:
    out = tftui("dump", "--demo")
    assert out.returncode == 0, out.stderr
    path = tmp_path / "d.json"
    path.write_text(out.stdout)
    doc = json.loads(out.stdout)
    assert doc["kind"] == "List" and len(doc["items"]) > 500
    again = tftui("--from", str(path), "dump")
    assert again.returncode == 0, again.stderr
    assert again.stdout == out.stdout
    a = ClusterState.build(load(path))
    assert set(a.pools) == {"demo-inference", "demo-training", "demo-dev", "demo-isolation"}
    assert a.warnings == []


def test_dump_to_file_flag_order_does_not_matter(tmp_path: Path) -> None:
    p1, p2 = tmp_path / "a.json", tmp_path / "b.json"
    assert tftui("--demo", "dump", "-o", str(p1)).returncode == 0
    assert tftui("dump", "--demo", "--output", str(p2)).returncode == 0
    assert p1.read_text() == p2.read_text()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("this is { not json", "not a Kubernetes List"),
        (
            '{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {}}]}',
            "Node <no name> (item 1): metadata.name: required field is missing",
        ),
        (
            '{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "tensor-fusion.ai/v1", "kind": "GPU",'
            ' "metadata": {"name": "g1"}, "status": {"capacity": {"tflops": "12Gx"}}}]}',
            "GPU g1 (item 1): status.capacity.tflops: invalid quantity '12Gx'",
        ),
        ('{"kind": "List", "items": [', "not valid JSON"),
    ],
)
def test_bad_dump_exits_2_with_one_line(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    out = tftui("--from", str(path), "dump")
    assert out.returncode == 2
    assert expected in out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert out.stdout == ""


def test_missing_file_exits_2(tmp_path: Path) -> None:
    out = tftui("--from", str(tmp_path / "nope.json"), "dump")
    assert out.returncode == 2
    assert out.stderr.strip() == f"tftui: {tmp_path / 'nope.json'}: cannot read: No such file or directory"


def test_no_cluster_suggests_demo(tmp_path: Path) -> None:
    out = tftui(
        env={"KUBECONFIG": str(tmp_path / "none"), "HOME": str(tmp_path), "KUBERNETES_SERVICE_HOST": ""}
    )
    assert out.returncode == 2
    assert "no Kubernetes cluster reachable" in out.stderr and "tftui --demo" in out.stderr
    assert "Traceback" not in out.stderr


def test_conflicting_sources() -> None:
    out = tftui("--demo", "--from", "x.json", "dump")
    assert out.returncode == 2 and "mutually exclusive" in out.stderr


def test_place_previews_every_mode_and_json_is_reproducible() -> None:
    args = ("place", "--demo", "--tflops", "100", "--vram", "20Gi", "--pool", "demo-inference")
    text = tftui(*args)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("Request: 1 × (100 TFLOPS, 20Gi VRAM) in pool demo-inference")
    assert any(line.startswith("CompactFirst ") and "inf-h100-04" in line for line in lines)
    assert any(line.startswith("NodeCompactGPULowLoad *") for line in lines)
    a, b = tftui(*args, "--json"), tftui(*args, "--json")
    assert a.returncode == 0 and a.stdout == b.stdout
    doc = json.loads(a.stdout)
    assert set(doc["modes"]) == {"CompactFirst", "LowLoadFirst", "NodeCompactGPULowLoad"}
    assert doc["modes"]["LowLoadFirst"]["node"] == "inf-l40s-06"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--tflops", "12Gx", "--vram", "1Gi"), "tftui: --tflops: invalid quantity '12Gx'"),
        (
            ("--tflops", "1", "--vram", "1Gi", "--count", "0"),
            "tftui: request: gpu count must be 1..128, got 0",
        ),
        (("--tflops", "1", "--vram", "1Gi", "--pool", "nope"), "tftui: --pool: no GPUPool named 'nope'"),
    ],
)
def test_place_rejects_bad_input(args: tuple[str, ...], message: str) -> None:
    out = tftui("place", "--demo", *args)
    assert out.returncode == 2
    assert out.stderr.startswith(message) and "Traceback" not in out.stderr


def test_plan_json_is_byte_identical_for_the_same_now() -> None:
    args = ("plan", "--demo", "--now", "2026-12-01T08:30:00Z", "--json")
    a, b = tftui(*args), tftui(*args)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    doc = json.loads(a.stdout)
    assert doc["now"] == "2026-12-01T08:30:00Z"
    dev = doc["pools"]["demo-dev"]
    assert {r["node"] for r in dev["compaction"]["released"]} == {"dev-4090-03", "dev-4090-04", "dev-4090-20"}
    assert dev["defrag"]["state"] == "evict" and dev["defrag"]["evict"]["node"] == "dev-4090-01"
    assert doc["pools"]["demo-inference"]["defrag"]["state"] == "disabled"
    kinds = [a["kind"] for a in doc["actions"]]
    assert kinds.count("evict-pod") == 1 and kinds.count("delete-gpunodeclaim") == 3


def test_plan_table_and_pool_filter() -> None:
    out = tftui("plan", "--demo", "--now", "2026-12-01T08:30:00Z", "--pool", "demo-dev")
    assert out.returncode == 0, out.stderr
    assert "== pool demo-dev" in out.stdout and "== pool demo-inference" not in out.stdout
    assert "dev-4090-03  release" in out.stdout
    assert "defrag: evict window 2026-12-01T08:00:00Z → 2026-12-01T10:00:00Z" in out.stdout


def test_plan_rejects_bad_now() -> None:
    out = tftui("plan", "--demo", "--now", "yesterday")
    assert out.returncode == 2
    assert out.stderr.startswith("tftui: --now: not an RFC 3339 time with offset: 'yesterday'")


def test_read_only_flag_reaches_the_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--read-only` is passed to the console; the demo source is the writable (acting) cluster."""
    import tftui.ui.app
    from tftui.cli import main

    seen: dict[str, object] = {}

    def fake_run(cluster: object, metrics: object, **kwargs: object) -> int:
        seen.update(kwargs, cluster=cluster)
        return 0

    monkeypatch.setattr(tftui.ui.app, "run", fake_run)
    assert main(["--demo", "--read-only"]) == 0
    assert seen["read_only"] is True
    assert callable(getattr(seen["cluster"], "apply", None))
    assert main(["--demo"]) == 0
    assert seen["read_only"] is False


def test_speed_must_not_be_negative() -> None:
    out = tftui("--demo", "--speed", "-1")
    assert out.returncode == 2 and out.stderr.strip() == "tftui: --speed: must be 0 or more, got -1"


def test_subcommand_help_lists_no_console_only_flags() -> None:
    """`place`/`plan`/`report --help` listed --read-only and --speed, which only the console uses."""
    for command in ("place", "plan", "report", "dump", "recommend", "simulate"):
        out = tftui(command, "--help")
        assert out.returncode == 0, out.stderr
        assert "--read-only" not in out.stdout and "--speed" not in out.stdout, command
        assert "--demo" in out.stdout, command
    top = tftui("--help").stdout
    assert "--read-only" in top and "--speed" in top
    # still accepted after the subcommand (flag order never matters)
    assert tftui("dump", "--demo", "--read-only", "--speed", "0").returncode == 0


def test_report_counts_ok_rows_and_all_lists_them() -> None:
    """`tftui report --demo` printed 1,250 lines, mostly rows diagnosed ok."""
    short, full = tftui("report", "--demo"), tftui("report", "--demo", "--all")
    assert short.returncode == 0 and full.returncode == 0, short.stderr + full.stderr

    def section_rows(text: str, head: str) -> list[str]:
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith(head))
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("== "))
        return [line for line in lines[start + 2 : end] if line.strip()]

    for head, what in (("== nodes", "nodes"), ("== GPUs", "GPUs"), ("== workloads", "workloads")):
        all_rows = section_rows(full.stdout, head)
        ok_rows = [r for r in all_rows if r.rstrip().endswith(" ok")]
        assert ok_rows, head
        shown = section_rows(short.stdout, head)
        assert shown[-1] == f"({len(ok_rows)} {what} diagnosed ok not shown; --all lists them)"
        assert not [r for r in shown if r.rstrip().endswith(" ok")]
        assert len(shown) - 1 == len(all_rows) - len(ok_rows)
    assert len(short.stdout.splitlines()) < len(full.stdout.splitlines()) - 200
