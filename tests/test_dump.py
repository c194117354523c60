"""Dump loading and writing: formats, unknown fields, and one-line errors naming object and field."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from tests.fixtures import upstream_demo as demo
from tftui.model.dump import DumpError, Snapshot, dumps, loads, validate_items


def as_list(objs: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})


def test_json_list_round_trips_exactly() -> None:
    snap = loads(as_list(demo.objects()))
    assert len(snap.objects) == len(demo.objects())
    assert loads(dumps(snap.objects)) == snap
    assert [o["kind"] for o in snap.kind("GPUNode")] == ["GPUNode"] * 3


def test_unknown_fields_are_kept_on_crds_and_other_kinds() -> None:
    objs = copy.deepcopy(demo.objects())
    gpu = next(o for o in objs if o["kind"] == "GPU")
    gpu["status"]["futureField"] = {"x": [1, 2]}
    gpu["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "c", "namespace": "d"},
            "spec": {"ports": [{"port": 80}]},
        }
    )
    snap = loads(as_list(objs))
    out = next(o for o in snap.kind("GPU") if o["metadata"]["name"] == gpu["metadata"]["name"])
    assert out["status"]["futureField"] == {"x": [1, 2]}
    assert out["metadata"]["managedFields"] == [{"manager": "kubectl"}]
    assert snap.kind("other") == [objs[-1]]


def test_a_gpus_running_apps_are_kept_as_given_not_judged() -> None:
    """Nothing reads `runningApps` (the pods are the record): an odd entry there does not refuse
    the dump, and the field is written back as it came."""
    objs = copy.deepcopy(demo.objects())
    gpu = next(o for o in objs if o["kind"] == "GPU")
    apps = [{"name": "w", "count": "two", "pods": [{"requests": {"tflops": "12Gx"}}]}]
    gpu["status"]["runningApps"] = apps
    snap = loads(as_list(objs), "d.json")
    out = next(o for o in snap.kind("GPU") if o["metadata"]["name"] == gpu["metadata"]["name"])
    assert out["status"]["runningApps"] == apps
    assert json.loads(dumps(snap.objects))["items"][objs.index(gpu)]["status"]["runningApps"] == apps


def test_slim_pod_view_drops_unused_spec() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "n", "labels": {"a": "b"}},
        "spec": {
            "nodeName": "x",
            "volumes": [{"name": "v"}],
            "containers": [{"name": "c", "image": "i", "env": []}],
        },
    }
    (out,) = loads(as_list([pod])).objects
    assert out["spec"] == {"nodeName": "x", "containers": [{"name": "c", "image": "i"}]}
    assert out["metadata"]["labels"] == {"a": "b"}


def test_concatenated_json_documents() -> None:
    objs = demo.objects()
    text = as_list(objs[:5]) + "\n" + as_list(objs[5:]) + json.dumps(objs[0])
    snap = loads(text)
    assert len(snap.objects) == len(objs) + 1


def test_multi_document_yaml() -> None:
    objs = demo.objects()
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objs[:4]}) + "---\n"
    text += "---\n".join(yaml.safe_dump(o) for o in objs[4:])
    assert loads(text).objects == loads(as_list(objs)).objects


def test_numbers_are_accepted_as_quantities() -> None:
    objs = copy.deepcopy(demo.objects())
    gpu = next(o for o in objs if o["kind"] == "GPU")
    gpu["status"]["capacity"]["tflops"] = 312
    assert loads(as_list(objs)).kind("GPU")[0]["status"]["capacity"]["tflops"] == 312


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "{not json",
            "d.json: not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        ("", "d.json: empty file"),
        ('{"kind": "ConfigMap", "data": {}}', "d.json: document 1 is not a Kubernetes List"),
        (
            "[1, 2]",
            "d.json: document 1 is not a Kubernetes List (kind: List with items) or a single object: got list",
        ),
        (
            as_list([{"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ml"}}]),
            "d.json: Pod ml/<no name> (item 1): metadata.name: required field is missing",
        ),
    ],
)
def test_bad_dumps_give_one_line(text: str, message: str) -> None:
    with pytest.raises(DumpError) as err:
        loads(text, "d.json")
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_garbage_quantity_names_object_and_field() -> None:
    objs = copy.deepcopy(demo.objects())
    gpu = next(o for o in objs if o["kind"] == "GPU")
    gpu["status"]["capacity"]["tflops"] = "12Gx"
    with pytest.raises(DumpError) as err:
        loads(as_list(objs), "d.json")
    index = objs.index(gpu) + 1
    assert str(err.value) == (
        f"d.json: GPU {gpu['metadata']['name']} (item {index}): status.capacity.tflops: invalid quantity '12Gx'"
    )


def test_garbage_annotation_type_names_field() -> None:
    objs = copy.deepcopy(demo.objects())
    pod = next(o for o in objs if o["kind"] == "Pod")
    pod["metadata"]["annotations"]["tensor-fusion.ai/gpu-count"] = 2
    with pytest.raises(DumpError) as err:
        validate_items(objs, "api")
    assert "Pod ml-serving/llama3-8b-infer-tf-worker-7xk2p" in str(err.value)
    assert "metadata.annotations.tensor-fusion.ai/gpu-count: Input should be a valid string (got 2)" in str(
        err.value
    )


def test_yaml_error_is_one_line() -> None:
    with pytest.raises(DumpError) as err:
        loads("kind: List\nitems: [\n  - a: b: c\n", "d.yaml")
    assert str(err.value).startswith("d.yaml: neither JSON nor YAML at line")


def test_snapshot_of_groups_by_kind() -> None:
    snap = Snapshot.of(demo.objects())
    assert len(snap.kind("Pod")) == 6 and len(snap.kind("GPU")) == 6 and snap.kind("Nope") == []


def _gpu(tflops: Any) -> dict[str, Any]:
    return {"apiVersion": "tensor-fusion.ai/v1", "kind": "GPU", "metadata": {"name": "g1"},
            "status": {"capacity": {"tflops": tflops, "vram": "80Gi"}}}  # fmt: skip


@pytest.mark.parametrize("value", ["9E", "9223372036854775807", "2113568512Ki", "312500m", 312, 0.5, "1e18"])
def test_quantities_up_to_the_kubernetes_limit_pass(value: Any) -> None:
    assert validate_items([_gpu(value)]).objects[0]["status"]["capacity"]["tflops"] == value


@pytest.mark.parametrize(
    ("value", "says"),
    [("10E", "out of range"), ("1e19", "out of range"), ("-1e999", "out of range"), (1e300, "less than or equal"),
     (float("inf"), "finite number"), ("12Gx", "invalid quantity")],
)  # fmt: skip
def test_quantities_beyond_the_limit_name_object_and_field(value: Any, says: str) -> None:
    with pytest.raises(
        DumpError, match=rf"^<objects>: GPU g1 \(item 1\): status\.capacity\.tflops: .*{says}"
    ):
        validate_items([_gpu(value)])


def test_autoscaling_types_are_checked_never_coerced() -> None:
    """`enable: "true"` is not read as true (upstream would not enable it either): the field is named."""
    asc: dict[str, Any] = {"autoSetResources": {"enable": "true", "targetComputePercentile": "0.9"}}
    wl = {"apiVersion": "tensor-fusion.ai/v1", "kind": "TensorFusionWorkload",
          "metadata": {"name": "w", "namespace": "n"}, "spec": {"autoScalingConfig": asc}}  # fmt: skip
    with pytest.raises(
        DumpError, match=r"autoSetResources\.enable: Input should be a valid boolean \(got 'true'\)"
    ):
        validate_items([wl])
    asc["autoSetResources"]["enable"] = True
    asc["cronScalingRules"] = [{"enable": 1, "name": "r"}]
    with pytest.raises(DumpError, match=r"cronScalingRules\[0\]\.enable: Input should be a valid boolean"):
        validate_items([wl])
    asc["cronScalingRules"] = []
    assert validate_items([wl]).objects[0]["spec"]["autoScalingConfig"]["autoSetResources"]["enable"] is True
    asc["autoSetResources"]["marginFraction"] = "Inf"
    with pytest.raises(DumpError, match=r"autoSetResources\.marginFraction: 'Inf': must be a finite number"):
        validate_items([wl])


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "yesterday"])
def test_object_times_out_of_range_or_unreadable_are_refused(stamp: str) -> None:
    gpu = _gpu("312")
    gpu["metadata"]["creationTimestamp"] = stamp
    with pytest.raises(DumpError, match=r"GPU g1 \(item 1\): metadata\.creationTimestamp: "):
        validate_items([gpu])


# -- hand-written YAML as kubectl accepts it ------------------------------------------------------


def test_empty_spec_loads_as_unset() -> None:
    """Upstream config/samples/v1_gpunode.yaml (and v1_gpunodeclass, v1_schedulingconfigtemplate,
    v1_tensorfusionworkload): `spec:` with only a comment under it is null, i.e. not set."""
    text = "apiVersion: tensor-fusion.ai/v1\nkind: GPUNode\nmetadata:\n  name: n\nspec:\n  # to fill in\n"
    snap = loads(text, "gpunode.yaml")
    assert snap.kind("GPUNode") == [
        {"apiVersion": "tensor-fusion.ai/v1", "kind": "GPUNode", "metadata": {"name": "n"}}
    ]


def test_nulls_inside_json_are_dropped_too() -> None:
    """`kubectl create --dry-run=client -o json` writes `creationTimestamp: null`."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "creationTimestamp": None},
        "spec": None,
    }
    snap = loads(as_list([pod]), "d.json")
    assert snap.kind("Pod") == [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}]


def test_unquoted_timestamps_stay_strings() -> None:
    text = (
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n  creationTimestamp: 2026-01-01T00:00:00Z\n"
        "status:\n  conditions:\n  - {type: Ready, status: 'True', lastTransitionTime: 2026-01-02}\n"
    )
    node = loads(text, "node.yaml").kind("Node")[0]
    assert node["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"
    assert node["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-02"


def test_every_upstream_sample_loads() -> None:
    """Every manifest of upstream config/samples (kustomization resources, the per-vendor
    ProviderConfigs and TensorFusionClusters, the workload examples) loads, each on its own and all
    together; kinds tftui does not read are kept as they are."""
    from tests.fixtures.upstream_samples import SAMPLES, documents

    for name, text in SAMPLES.items():
        assert loads(text, name).objects, name
    snap = loads(documents(), "all.yaml")
    assert {o["kind"] for o in snap.kind("other")} == {
        "TensorFusionConnection",
        "GPUNodeClass",
        "Deployment",
        "Job",
        "RuntimeClass",
    }
    assert [q["metadata"]["name"] for q in snap.kind("GPUResourceQuota")] == ["team-a", "team-b"]
    assert len(snap.kind("ProviderConfig")) == 4 and len(snap.kind("ConfigMap")) == 1
    assert snap.kind("SchedulingConfigTemplate")[0] == {
        "apiVersion": "tensor-fusion.ai/v1",
        "kind": "SchedulingConfigTemplate",
        "metadata": {"name": "schedulingconfigtemplate-sample"},
    }
