"""Property: whatever a real API server would store, the console shows and the daemon's loop goes on.

`test_property_inputs` judges which mutated objects a cluster could hold by tftui's own schema (a
wrong shape there is refused with one line). That is circular where our schema and the CRDs
disagree: an object the API server stores but our schema calls a wrong shape would leave the
console without a cluster. Here "stored" is decided by what nobody here wrote: the CRD's
OpenAPI schema, after the API server's pruning and defaults (`tests/kubeapi`), for every custom
resource, and ObjectMeta's own rules (names, labels and annotations as strings, times in RFC
3339, an integer generation) for every object. Built-in kinds keep tftui's shape check (the API
server validates them in Go code, which no schema here reproduces). JSON has no NaN, no infinity,
and Kubernetes no integer beyond int64.

For each mutated set of objects that passes, as a live cluster's watch cache hands them: the
console loads and renders its main tables (never the one-line refusal of a wrong shape), and one
dry-run tick of the daemon's loop fails no pool and no autoscale run.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.kubeapi.schema import rfc3339, schema_errors
from tests.kubeapi.server import crd_shape, load_crds
from tests.test_property_inputs import (
    NOW,
    PROFILE,
    Mutation,
    _bounded_memory,
    _mutated,
    _Objects,
    _render_tables,
    mutation,
)
from tftui.model.dump import DumpError, value_problem
from tftui.runtime.loops import Runtime
from tftui.ui.load.data import load

JSON = dict[str, Any]
CRDS = {rt.kind: rt for rt in load_crds()}


def _json_value(v: Any) -> bool:
    """What JSON and the API server's decoder carry: finite numbers, integers within int64."""
    if isinstance(v, float):
        return math.isfinite(v)
    if v is None or isinstance(v, bool | str):
        return True
    if isinstance(v, int):
        return -(2**63) <= v < 2**63
    if isinstance(v, list):
        return all(_json_value(x) for x in v)
    return isinstance(v, dict) and all(isinstance(k, str) and _json_value(x) for k, x in v.items())


def _strings(v: Any, kind: type[dict[str, Any]] | type[list[Any]]) -> bool:
    if not isinstance(v, kind):
        return False
    return all(isinstance(x, str) for x in (v.values() if isinstance(v, dict) else v))


def _meta(meta: Any) -> bool:
    """ObjectMeta as the API server validates it (the fields a mutation can reach)."""
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return False
    if any(k in meta and not _strings(meta[k], dict) for k in ("labels", "annotations")):
        return False
    if any(k in meta and not isinstance(meta[k], str) for k in ("uid", "namespace", "resourceVersion")):
        return False
    if "finalizers" in meta and not _strings(meta["finalizers"], list):
        return False
    refs = meta.get("ownerReferences", [])
    return (
        ("generation" not in meta or type(meta["generation"]) is int)
        and all(
            meta.get(k) is None or (isinstance(meta[k], str) and rfc3339(meta[k]))
            for k in ("creationTimestamp", "deletionTimestamp")
        )
        and isinstance(refs, list)
        and all(_owner(r) for r in refs)
    )


def _owner(ref: Any) -> bool:
    """An OwnerReference: its four identifying strings, its two flags booleans when given."""
    return (
        isinstance(ref, dict)
        and all(isinstance(ref.get(k), str) for k in ("apiVersion", "kind", "name", "uid"))
        and all(isinstance(ref.get(k, False), bool) for k in ("controller", "blockOwnerDeletion"))
    )


def as_stored(doc: list[Any]) -> list[JSON] | None:
    """The objects as an API server would hold them (pruned, defaulted), or None if it refuses one."""
    out = []
    for obj in doc:
        if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str) or not _json_value(obj):
            return None
        if not _meta(obj.get("metadata")):
            return None
        rt = CRDS.get(obj["kind"])
        if rt is None or rt.schema is None:
            try:
                value_problem(obj)
            except DumpError:
                return None
            out.append(obj)
            continue
        shaped = copy.deepcopy(obj)
        crd_shape(rt, shaped)
        if next(schema_errors(rt.schema, shaped), None) is not None:
            return None
        out.append(shaped)
    return out


@settings(**{**PROFILE, "max_examples": 3 * PROFILE["max_examples"]})  # two in three are refused
@given(mutations=st.lists(mutation(), min_size=1, max_size=3))
def test_what_an_api_server_stores_is_shown_and_acted_on(mutations: list[Mutation]) -> None:
    doc = as_stored(_mutated(mutations))
    event("stored" if doc is not None else "refused by the API server")
    if doc is None:
        return
    with _bounded_memory():
        data = load(_Objects(doc), None, NOW)  # a ClusterLoadError here: our schema refuses it
        _render_tables(data)
        rt = Runtime(_Objects(doc), clock=lambda: NOW, dry_run=True)
        assert rt.tick_due() is not None
    failed = [e.message for e in rt.journal.entries() if not e.ok and " failed: " in e.message]
    assert not failed, failed


def test_the_gate_refuses_what_an_api_server_refuses() -> None:
    """The judge of "stored" is not a check that cannot fail: each refusal below is the API
    server's, and the unmutated demo passes."""
    base = _mutated([])
    assert as_stored(base) is not None
    gpu = next(i for i, o in enumerate(base) if o["kind"] == "GPU")
    pool = next(i for i, o in enumerate(base) if o["kind"] == "GPUPool")
    refused: list[list[Mutation]] = [
        [(gpu, ("status", "capacity", "tflops"), "lots")],  # the quantity pattern
        [(gpu, ("status", "phase"), "Burning")],  # the enum
        [(pool, ("metadata", "labels"), {"a": 1})],  # ObjectMeta: label values are strings
        [(pool, ("metadata", "creationTimestamp"), "yesterday")],
        [(gpu, ("status", "capacity", "tflops"), float("nan"))],  # not JSON
    ]
    for mutations in refused:
        assert as_stored(_mutated(mutations)) is None, mutations
    assert as_stored(_mutated([(gpu, ("status", "capacity", "tflops"), "1e999")])) is not None
