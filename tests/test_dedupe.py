"""`model.dedupe.Deduper`: what a cache keeps equals what arrived (minus the two dropped fields),
with strings interned and equal parts shared between objects."""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

from tftui.model.dedupe import Deduper
from tftui.model.dump import validate_items
from tftui.sources.sim.cluster import generate_objects

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def decoded(obj: dict[str, Any]) -> dict[str, Any]:
    """A fresh copy, as `json.loads` hands one (no part shared with anything)."""
    return json.loads(json.dumps(obj))


def pod(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "labels": {"app": "a"}, **extra},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}]},
        "status": {"phase": "Running"},
    }


def test_equal_to_what_arrived_and_a_new_top_level_dict() -> None:
    objects = generate_objects()
    d = Deduper()
    out = [d.object(decoded(o)) for o in objects]
    assert out == objects
    assert len({id(o) for o in out}) == len(out)  # each object its own dict: identity says "changed"
    assert validate_items(out).objects == validate_items(objects).objects


def test_equal_parts_and_strings_are_shared_between_objects() -> None:
    d = Deduper()
    a, b = d.object(pod("a")), d.object(pod("b"))
    assert a is not b and a["metadata"] is not b["metadata"]  # the names differ
    assert a["spec"] is b["spec"]
    assert a["metadata"]["labels"] is b["metadata"]["labels"]
    assert a["status"]["phase"] is b["status"]["phase"]
    x, y = decoded(pod("same-name-text")), decoded(pod("same-name-text"))
    assert x["metadata"]["name"] is not y["metadata"]["name"]
    assert d.object(x)["metadata"]["name"] is d.object(y)["metadata"]["name"]


def test_types_are_never_confused() -> None:
    d = Deduper()
    values: list[Any] = [
        True,
        1,
        1.0,
        "1",
        None,
        0,
        False,
        [],
        {},
        [1],
        [True],
        {"a": 1},
        {"a": True},
        {"a": 1.0},
    ]
    out = [d.object({"kind": "X", "v": v})["v"] for v in values]
    assert out == values
    assert [type(v) for v in out] == [type(v) for v in values]
    for a, b in zip(out[-3:], values[-3:], strict=True):
        assert type(a["a"]) is type(b["a"])
    assert d.object({"kind": "X", "v": [[]]})["v"] == [[]]
    assert d.object({"kind": "X", "v": [{}]})["v"] == [{}]


def test_managed_fields_and_last_applied_are_dropped_and_nothing_else() -> None:
    d = Deduper()
    meta_extra = {
        "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}],
        "annotations": {LAST_APPLIED: '{"big": "copy"}', "keep": "me"},
    }
    out = d.object(decoded(pod("p", **meta_extra)))
    assert "managedFields" not in out["metadata"]
    assert out["metadata"]["annotations"] == {"keep": "me"}
    assert out == {**pod("p"), "metadata": {**pod("p")["metadata"], "annotations": {"keep": "me"}}}
    # not in metadata: kept (a ConfigMap's data may hold any key)
    other = {
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "data": {"managedFields": "x", LAST_APPLIED: "y"},
    }
    assert d.object(decoded(other)) == other
    only_last = d.object(decoded(pod("q", annotations={LAST_APPLIED: "{}"})))
    assert only_last["metadata"]["annotations"] == {}


def test_the_input_is_not_changed() -> None:
    original = pod("p", managedFields=[{"manager": "m"}], annotations={LAST_APPLIED: "{}"})
    given = decoded(original)
    Deduper().object(given)
    assert given == original


def test_a_full_table_is_cleared_and_sharing_starts_again() -> None:
    d = Deduper(limit=20)  # a pod brings 8 parts, 7 of them the same for every pod here
    objects = [d.object(decoded(pod(f"p{i}"))) for i in range(50)]
    assert objects == [pod(f"p{i}") for i in range(50)]
    assert len(d._parts) <= 20
    assert 1 < len({id(o["spec"]) for o in objects}) <= 5  # cleared a few times, shared in between
    d.clear()
    assert not d._parts


def test_an_object_nested_too_deeply_is_kept_as_it_is() -> None:
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(sys.getrecursionlimit() + 100):
        inner["x"] = {}
        inner = inner["x"]
    obj = {"kind": "X", "metadata": {"name": "deep"}, "spec": deep}
    d = Deduper()
    assert d.object(obj) is obj
    assert d.object(pod("after"))["metadata"]["name"] == "after"  # and the next one is deduplicated


def containers(value: Any) -> list[int]:
    """The ids of every dict and list in `value`, once per place it is found."""
    out: list[int] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            out.append(id(v))
            stack.extend(v.values())
        elif isinstance(v, list):
            out.append(id(v))
            stack.extend(v)
    return out


def test_one_object_never_holds_a_part_twice() -> None:
    """Equal parts of one object stay apart, so a deep copy changed in one place (the simulator's
    copy-on-write) changes that place only; parts are shared between objects."""
    d = Deduper()
    same = {"cpu": "1", "memory": "4Gi"}
    obj: dict[str, Any] = {
        "kind": "X",
        "metadata": {"name": "x", "labels": {}, "annotations": {}},
        "spec": {
            "requests": dict(same),
            "limits": dict(same),
            "a": [{}, {}],
            "b": [[1], [1]],
            "c": {"d": {}},
        },
        "status": {},
    }
    for i in range(3):  # the first time, and with every part already in the table
        out = d.object(decoded({**obj, "metadata": {**obj["metadata"], "name": f"x{i}"}}))
        ids = containers(out)
        assert len(ids) == len(set(ids))
        copied = copy.deepcopy(out)
        copied["spec"]["requests"]["cpu"] = "2"
        copied["status"]["phase"] = "Running"
        assert copied["spec"]["limits"]["cpu"] == "1" and copied["metadata"]["labels"] == {}
        assert copied["spec"]["a"] == [{}, {}] and copied["spec"]["c"] == {"d": {}}
    first, second = d.object(decoded(obj)), d.object(decoded(obj))
    assert first["spec"]["limits"] is not first["spec"]["requests"]
    assert first["spec"] is second["spec"]  # between objects: shared, repeated parts included
    assert first["spec"]["limits"] is second["spec"]["limits"]


def test_no_demo_object_holds_a_part_twice() -> None:
    d = Deduper(limit=64)  # cleared often: a kept part's own parts may no longer be the kept ones
    for obj in generate_objects():
        ids = containers(d.object(decoded(obj)))
        assert len(ids) == len(set(ids)), obj["metadata"]["name"]
