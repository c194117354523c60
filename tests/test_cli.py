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
    assert set(a.pools) == {"demo-inference", "demo-training", "demo-dev"}
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
