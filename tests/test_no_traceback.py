"""No traceback on any input: each hostile or careless input is exit 2 and one line naming what.

Every case crashed with a traceback before (a TypeError from an unhashable `kind`, OverflowError
from `1e999`, RecursionError from deep JSON, IsADirectoryError from a zone name, UnicodeDecodeError
from the config file, and a YAML alias bomb that grew a 1 KB file to gigabytes). The cases run
through `main()` like the command line does; the alias bomb and the console run as subprocesses
(the bomb under an address-space limit, so the old behaviour fails the test instead of the host).
"""

from __future__ import annotations

import copy
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tftui.cli import main

JSON = dict[str, Any]
Mutation = Callable[[JSON], None]


@pytest.fixture(scope="module")
def demo_dump(tmp_path_factory: pytest.TempPathFactory) -> JSON:
    path = tmp_path_factory.mktemp("dump") / "demo.json"
    assert main(["dump", "--demo", "--nodes", "4", "-o", str(path)]) == 0
    doc: JSON = json.loads(path.read_text())
    return doc


def _first(doc: JSON, kind: str) -> JSON:
    return next(o for o in doc["items"] if o["kind"] == kind)


def _workload_asc(doc: JSON) -> JSON:
    asc: JSON = _first(doc, "TensorFusionWorkload")["spec"].setdefault("autoScalingConfig", {})
    return asc


def _kind_object(doc: JSON) -> None:
    doc["items"][0]["kind"] = {"name": "GPU"}


def _kind_list(doc: JSON) -> None:
    doc["items"][0]["kind"] = ["GPU"]


def _gpu_capacity(doc: JSON) -> None:
    _first(doc, "GPU")["status"]["capacity"]["tflops"] = "1e999"


def _gpu_capacity_number(doc: JSON) -> None:
    _first(doc, "GPU")["status"]["capacity"]["vram"] = 1e300


def _requests(doc: JSON) -> None:
    _first(doc, "TensorFusionWorkload")["spec"]["resources"]["requests"]["tflops"] = "1e999"


def _recommendation(doc: JSON) -> None:
    big = {"tflops": "1e999", "vram": "1Gi"}
    _first(doc, "TensorFusionWorkload").setdefault("status", {})["recommendation"] = {
        "requests": big,
        "limits": big,
    }


def _rule_as_string(doc: JSON) -> None:
    _first(doc, "SchedulingConfigTemplate")["spec"]["verticalScalingRules"] = [
        {"name": "r", "selector": {}, "autoScaling": "enable"}
    ]


def _desired_as_string(doc: JSON) -> None:
    _workload_asc(doc)["cronScalingRules"] = [
        {"enable": True, "name": "r", "start": "0 9 * * *", "end": "0 17 * * *", "desiredResources": "lots"}
    ]


def _nan(doc: JSON) -> None:
    _workload_asc(doc)["autoSetResources"] = {"enable": True, "targetComputePercentile": float("nan")}


def _nan_text(doc: JSON) -> None:
    _workload_asc(doc)["autoSetResources"] = {"enable": True, "marginFraction": "NaN"}


def _annotation(doc: JSON) -> None:
    pod = next(
        o
        for o in doc["items"]
        if o["kind"] == "Pod" and "tensor-fusion.ai/vram-request" in o["metadata"]["annotations"]
    )
    pod["metadata"]["annotations"]["tensor-fusion.ai/vram-request"] = "1e999"


def _last_defrag(doc: JSON) -> None:
    _first(doc, "GPUPool").setdefault("status", {})["lastDefragTime"] = "9999-12-31T23:59:59Z"


CASES: dict[str, tuple[Mutation, list[str], str]] = {
    # name: (mutation, command, what the line must name)
    "kind-object": (_kind_object, ["plan"], "kind"),
    "kind-list": (_kind_list, ["report", "--demo"], "kind"),
    "gpu-capacity-1e999": (_gpu_capacity, ["plan"], "status.capacity.tflops"),
    "gpu-capacity-1e300-number": (
        _gpu_capacity_number,
        ["place", "--tflops", "1", "--vram", "1Gi"],
        "status.capacity.vram",
    ),
    "requests-1e999": (_requests, ["plan"], "spec.resources.requests.tflops"),
    "recommendation-1e999": (
        _recommendation,
        ["simulate", "--duration", "1h"],
        "status.recommendation.requests.tflops",
    ),
    "verticalScalingRules-autoScaling-string": (
        _rule_as_string,
        ["plan"],
        "spec.verticalScalingRules[0].autoScaling",
    ),
    "cron-desiredResources-string": (_desired_as_string, ["plan"], "cronScalingRules[0].desiredResources"),
    "autoSetResources-NaN": (_nan, ["dump"], "autoSetResources.targetComputePercentile"),
    "autoSetResources-NaN-text": (_nan_text, ["plan"], "autoSetResources.marginFraction"),
    "annotation-1e999": (_annotation, ["plan"], "metadata.annotations[tensor-fusion.ai/vram-request]"),
    "lastDefragTime-9999": (_last_defrag, ["plan"], "status.lastDefragTime"),
}


def _one_line(capsys: pytest.CaptureFixture[str], code: int) -> str:
    out = capsys.readouterr()
    assert code == 2, out.err
    lines = out.err.splitlines()
    assert len(lines) == 1 and "Traceback" not in out.err, out.err
    return lines[0]


@pytest.mark.parametrize("case", list(CASES))
def test_bad_dump_is_exit_2_and_one_line(
    case: str, demo_dump: JSON, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mutate, command, field = CASES[case]
    doc = copy.deepcopy(demo_dump)
    mutate(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))  # NaN is written as the JSON extension `NaN`, as Python reads it
    command = [c for c in command if c != "--demo"]
    line = _one_line(capsys, main([command[0], "--from", str(path), *command[1:]]))
    assert line.startswith(f"tftui: {path}: "), line
    assert f": {field}" in line or f".{field}" in line, line


def test_deep_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.json"
    depth = 200_000
    path.write_text('{"kind": "List", "items": [{"kind": "X", "apiVersion": "v1", "metadata": {"name": "a"}, "x": '
                    + "[" * depth + "]" * depth + "}]}")  # fmt: skip
    line = _one_line(capsys, main(["dump", "--from", str(path)]))
    assert "nested too deeply" in line and str(path) in line


def test_deep_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("kind: List\nitems:\n- " + "[" * 200_000 + "]" * 200_000 + "\n")
    line = _one_line(capsys, main(["plan", "--from", str(path)]))
    assert str(path) in line


def test_invalid_defrag_timezone_in_simulate(
    demo_dump: JSON, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = copy.deepcopy(demo_dump)
    pool = _first(doc, "GPUPool")
    defrag = (
        pool["spec"]
        .setdefault("nodeManagerConfig", {})
        .setdefault("nodeCompaction", {})
        .setdefault("defrag", {})
    )
    defrag.update(enabled=True, schedule="0 3 * * *")
    defrag["timezone"] = "America"  # a directory of the zone database: IsADirectoryError
    path = tmp_path / "tz.json"
    path.write_text(json.dumps(doc))
    line = _one_line(capsys, main(["simulate", "--from", str(path), "--duration", "1h"]))
    assert (
        f"GPUPool {pool['metadata']['name']}: spec.nodeManagerConfig.nodeCompaction.defrag.timezone" in line
    )
    # `plan` reports it the way upstream does (a DefragConfigInvalid event), exit 0
    assert main(["plan", "--from", str(path), "--json", "--no-autoscale"]) == 0
    assert "DefragConfigInvalid" in capsys.readouterr().out


def _limited(gib: int) -> Callable[[], None]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (gib << 30, gib << 30))

    return limit


def _tftui(*args: str, env: dict[str, str] | None = None, gib: int = 2) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tftui", *args],
        capture_output=True, text=True, timeout=240, env={**os.environ, **(env or {})},
        preexec_fn=_limited(gib), stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_yaml_alias_bomb_is_refused(tmp_path: Path) -> None:
    laughs = ", ".join(['"lol"'] * 9)
    text = f"a: &a [{laughs}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        text += f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    text += "kind: List\nitems:\n- {kind: ConfigMap, apiVersion: v1, metadata: {name: x}, data: *i}\n"
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    assert len(text) < 1024
    proc = _tftui("dump", "--from", str(path))
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "aliases expand to more than" in lines[0] and str(path) in lines[0]
    assert proc.stdout == ""


def test_a_few_anchors_are_still_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "anchors.yaml"
    path.write_text(
        "kind: List\nitems:\n"
        "- {kind: ConfigMap, apiVersion: v1, metadata: &m {name: x, labels: {a: b}}}\n"
        "- {kind: Secret, apiVersion: v1, metadata: *m}\n"
    )
    assert main(["dump", "--from", str(path)]) == 0
    assert len(json.loads(capsys.readouterr().out)["items"]) == 2


def test_non_utf8_config_file(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes(b"theme: d\xe9faut\n")  # Latin-1, not UTF-8
    proc = _tftui("--demo", "--nodes", "2", env={"TFTUI_CONFIG": str(config)})
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "not UTF-8" in lines[0] and str(config) in lines[0], proc.stderr
