"""The JSON fast path of dump loading and the shared validated objects.

A JSON `List` (what `tftui dump` and `kubectl get -o json` write) is decoded by pydantic-core and
validated in chunks; anything it cannot settle goes to the general path. These tests pin that both
paths (and YAML) give the same Snapshot, that errors still name the object by its place in the whole
file, that hostile JSON is refused as hostile YAML is, and that validated objects share the source's
own dicts where nothing was converted or dropped.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures import upstream_demo as demo
from tftui.cli import main
from tftui.model import dump
from tftui.model.dump import DumpError, loads, validate_items
from tftui.model.validated import ValidationCache


def as_list(objs: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}, indent=2)


def test_json_and_yaml_dumps_load_the_same_snapshot() -> None:
    objs = demo.objects()
    from_json = loads(as_list(objs), "d.json")
    from_yaml = loads(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objs}), "d.yaml")
    from_objects = validate_items(copy.deepcopy(objs), "api")
    assert from_json == from_yaml == from_objects
    assert from_json.objects == [json.loads(json.dumps(o)) for o in from_objects.objects]
    # `tftui dump` output reads back to the very same snapshot
    assert loads(dump.dumps(from_json.objects), "again.json") == from_json


def test_fast_path_in_chunks_gives_the_same_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    text = as_list(demo.objects())
    whole = loads(text, "d.json")
    monkeypatch.setattr(dump, "CHUNK", 3)
    chunked = loads(text, "d.json")
    assert chunked == whole
    assert {k: len(v) for k, v in chunked.by_kind.items()} == {k: len(v) for k, v in whole.by_kind.items()}


def test_an_error_in_a_later_chunk_names_the_object_by_its_place_in_the_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objs = copy.deepcopy(demo.objects())
    gpus = [i for i, o in enumerate(objs) if o["kind"] == "GPU"]
    bad = gpus[-1]
    assert bad >= 6, "the demo has GPUs past the second chunk of 3"
    objs[bad]["status"]["capacity"]["tflops"] = "12Gx"
    monkeypatch.setattr(dump, "CHUNK", 3)
    with pytest.raises(DumpError) as err:
        loads(as_list(objs), "d.json")
    name = objs[bad]["metadata"]["name"]
    assert str(err.value) == (
        f"d.json: GPU {name} (item {bad + 1}): status.capacity.tflops: invalid quantity '12Gx'"
    )


def test_nulls_in_a_json_list_take_the_general_path() -> None:
    objs = copy.deepcopy(demo.objects())
    objs[0]["metadata"]["creationTimestamp"] = None
    snap = loads(as_list(objs), "d.json")
    assert "creationTimestamp" not in snap.objects[0]["metadata"]
    assert snap.objects[1:] == loads(as_list(demo.objects()[1:])).objects


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"kind": "List", "items": [}', "not valid JSON: Expecting value at line 1 column 28"),
        ('{"kind": "List", "items": []} {', "not valid JSON: Expecting property name"),
        ('{"kind": "List", "items": {"a": 1}}', "document 1 is not a Kubernetes List"),
    ],
)
def test_bad_json_is_one_line_and_exit_2(
    text: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    assert main(["dump", "--from", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"tftui: {path}: {says}"), err


HUGE = "9" * 5_000  # past Python's 4,300-digit limit on reading an integer


@pytest.mark.parametrize(
    "text",
    [
        '{"kind": "List", "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},'
        f' "data": {{}}, "x": {HUGE}}}]}}',
        f"kind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {{name: a}}\n  x: {HUGE}\n",
    ],
    ids=["json", "yaml"],
)
def test_a_number_too_long_to_read_is_refused_in_one_line(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "huge"
    path.write_text(text)
    assert main(["dump", "--from", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"tftui: {path}: a value cannot be read: Exceeds the limit (4300 digits)"), err


@pytest.mark.parametrize("depth", [250, 900, 200_000])
def test_deep_json_is_read_or_refused_as_yaml_is(depth: int) -> None:
    """Past pydantic-core's depth limit (200) the general path decides, as it does for YAML: a
    depth Python can build is read (the same objects either way), a deeper one refused in a line."""
    nested = "[" * depth + "]" * depth
    item = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "x": ' + nested + "}"
    results: list[dump.Snapshot | str] = []
    for text in ('{"kind": "List", "items": [' + item + "]}", "kind: List\nitems:\n- " + item + "\n"):
        try:
            results.append(loads(text, "d"))
        except DumpError as exc:
            assert "\n" not in str(exc)
            results.append(str(exc))
    as_json, as_yaml = results
    if depth == 250:
        assert isinstance(as_json, dump.Snapshot) and as_json == as_yaml
    else:
        assert isinstance(as_json, str) and "nested too deeply" in as_json
        assert isinstance(as_yaml, str) and ("nested too deeply" in as_yaml or "nesting depth" in as_yaml)


def test_validated_objects_share_the_sources_own_dicts() -> None:
    objs = copy.deepcopy(demo.objects())
    snap = validate_items(objs, "api")
    by_id = {id(o): o for o in objs}
    for raw, valid in zip(objs, snap.objects, strict=True):
        if raw["kind"] in ("GPU", "GPUNode", "GPUPool", "TensorFusionWorkload"):
            assert valid is raw, raw["kind"]  # nothing dropped or converted: the source's dict
        if raw["kind"] == "Pod":
            assert valid is not raw and valid["metadata"] is raw["metadata"]  # slim spec, whole metadata
    assert sum(1 for o in snap.objects if id(o) in by_id) > len(objs) // 2
    # a cache that keeps the snapshot holds no second copy of an unchanged object either
    cache = ValidationCache()
    first = cache.validate(objs, "api")
    assert [o is r for o, r in zip(first.objects, objs, strict=True)] == [
        o is r for o, r in zip(snap.objects, objs, strict=True)
    ]


def test_a_slim_objects_whole_parts_are_the_sources_own() -> None:
    """A Pod loses the spec and status fields tftui never reads, but what it keeps whole (its
    conditions, a container's resources) is the source's object, not a copy; the rest equals it."""
    objs = copy.deepcopy(demo.objects())
    pod = next(o for o in objs if o["kind"] == "Pod")
    pod["spec"]["restartPolicy"] = "Always"  # dropped: the spec is a slim copy
    pod["spec"]["containers"] = [
        {"name": "main", "ports": [{"containerPort": 80}],  # dropped: the container is a copy too
         "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": 2.0}}}
    ]  # fmt: skip
    pod["status"] = {"phase": "Running", "hostIP": "10.0.0.1",
                     "conditions": [{"type": "Ready", "status": "True", "message": "dropped"},
                                    {"type": "PodScheduled", "status": "True"}]}  # fmt: skip
    valid = next(o for o in validate_items(objs, "api").kind("Pod") if o["metadata"] is pod["metadata"])
    assert valid["spec"] is not pod["spec"] and "restartPolicy" not in valid["spec"]
    container = valid["spec"]["containers"][0]
    assert container is not pod["spec"]["containers"][0] and "ports" not in container
    assert container["resources"] is pod["spec"]["containers"][0]["resources"]
    assert valid["status"] is not pod["status"] and "hostIP" not in valid["status"]
    conditions = valid["status"]["conditions"]
    assert (
        conditions[0] == {"type": "Ready", "status": "True"}
        and conditions[1] is pod["status"]["conditions"][1]
    )
    assert valid["status"]["conditions"] is not pod["status"]["conditions"]


def test_a_converted_value_is_not_shared() -> None:
    """Lax validation converts `"2"` to 2 for an int: the validated copy is kept, not the source."""
    objs = copy.deepcopy(demo.objects())
    wl = next(o for o in objs if o["kind"] == "TensorFusionWorkload")
    wl["spec"]["gpuCount"] = "2"
    snap = validate_items(objs, "api")
    out = next(o for o in snap.kind("TensorFusionWorkload") if o["metadata"] == wl["metadata"])
    assert out is not wl and out["spec"]["gpuCount"] == 2 and wl["spec"]["gpuCount"] == "2"
    # `True` where an int is expected equals 1 but is not the same value: never shared as such
    pool = next(o for o in objs if o["kind"] == "GPUPool")
    over = pool["spec"].setdefault("capacityConfig", {}).setdefault("oversubscription", {})
    over["tflopsOversellRatio"] = 1.0
    out_pool = next(
        o for o in validate_items(objs, "api").kind("GPUPool") if o["metadata"] == pool["metadata"]
    )
    assert type(out_pool["spec"]["capacityConfig"]["oversubscription"]["tflopsOversellRatio"]) is int
