"""What makes a workload's autoscaling configuration unusable, named by object and field.

The autoscaler reads `autoScalingConfig` from four places (the WorkloadProfile, the workload, its
pods' annotations, the pool template's `verticalScalingRules`) plus the workload's requests and
`status.recommendation`. On a live cluster any of them can hold what the model would refuse in a
dump (a string where an object belongs, `NaN`, `1e999`), and one such object must not stop the
autoscale loop for everyone: `problems(state, key)` lists what is wrong with one workload, and the
autoscaler then leaves that workload alone (`invalid-config`, with a Warning event naming the
field) while the others go on. Computed once per `ClusterState`.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from itertools import compress
from typing import Any, Final

from tftui.engine.state import ClusterState, WorkloadView
from tftui.model import keys
from tftui.model.numbers import finite_float_problem
from tftui.model.quantity import QuantityError, parse_bounded

__all__ = ["FLOAT_FIELDS", "carried", "problems"]

#: autoSetResources fields read as Go floats (strings in the CRD; numbers tolerated)
FLOAT_FIELDS: Final = (
    "lowerBoundComputePercentile",
    "targetComputePercentile",
    "upperBoundComputePercentile",
    "lowerBoundVRAMPercentile",
    "targetVRAMPercentile",
    "upperBoundVRAMPercentile",
    "marginFraction",
    "updateThreshold",
    "minVRAMResourcesRatio",
    "maxVRAMResourcesRatio",
    "minComputeResourcesRatio",
    "maxComputeResourcesRatio",
)
_QUANTITY_ANNOTATIONS: Final = (
    keys.TFLOPS_REQUEST,
    keys.TFLOPS_LIMIT,
    keys.VRAM_REQUEST,
    keys.VRAM_LIMIT,
    keys.COMPUTE_PERCENT_REQUEST,
    keys.COMPUTE_PERCENT_LIMIT,
)


def problems(state: ClusterState, key: str) -> list[str]:
    """What is wrong with workload `key`'s autoscaling inputs ([] when nothing is)."""
    return state.derived("autoscale-problems", _all).get(key, [])


#: workload key → (names, objects, problems) of the last check: the objects of a `ClusterState` are
#: never mutated (a change is a new dict: copy-on-write in the demo, a new watch event live), so a
#: workload whose own object, workers and profile are the very same dicts as last time has the same
#: problems — the autoscale loop then re-checks only what changed since its last run.
_MEMO: dict[str, tuple[tuple[str, ...], tuple[object, ...], list[str]]] = {}
_MEMO_MAX: Final = 1 << 17


def _inputs(state: ClusterState, wv: WorkloadView) -> tuple[tuple[str, ...], tuple[object, ...]]:
    """What `_workload` reads: names (compared by value) and the parts of the objects it reads
    (compared by identity): the workload's spec and `status.recommendation`, the workers'
    annotations and the profile. Parts, not whole objects: a write copies only the dicts it changes
    (a status condition, another annotation) and shares the rest, which stays the very same dict."""
    names = [wv.namespace, wv.name]
    obj = wv.obj or {}
    spec, status = obj.get("spec"), obj.get("status")
    objs: list[object] = [spec, status.get("recommendation") if isinstance(status, Mapping) else status]
    profile = spec.get("workloadProfile") if isinstance(spec, Mapping) else None
    for wkey in sorted(wv.workers):
        w = state.workers.get(wkey)
        names.append(wkey)
        raw = None if w is None else (w.obj.get("metadata") or {}).get("annotations")
        objs.append(raw)
        if w is not None:
            ann = raw or {}
            profile = profile or ann.get(keys.WORKLOAD_PROFILE)
    objs.append(
        state.profiles.get(f"{wv.namespace}/{profile}") if isinstance(profile, str) and profile else None
    )
    return tuple(names), tuple(objs)


def same_inputs(
    names: tuple[object, ...],
    objs: tuple[object, ...],
    now_names: tuple[object, ...],
    now_objs: tuple[object, ...],
) -> bool:
    """Whether a memo's inputs are the current ones: the names equal, the objects the very same
    (a state's objects are never changed in place, so the same dicts mean the same content)."""
    return names == now_names and len(objs) == len(now_objs) and all(map(operator.is_, objs, now_objs))


def _checked(state: ClusterState, wv: WorkloadView) -> list[str]:
    """`_workload(state, wv)`, reused from the last check when none of its inputs changed."""
    names, objs = _inputs(state, wv)
    hit = _MEMO.get(wv.key)
    if hit is not None and same_inputs(hit[0], hit[1], names, objs):
        return list(hit[2])
    found = _workload(state, wv)
    if len(_MEMO) >= _MEMO_MAX:
        _MEMO.clear()
    _MEMO[wv.key] = (names, objs, list(found))
    return found


def carried(state: ClusterState, key: str) -> tuple[Any, frozenset[str]] | None:
    """(the basis's per-workload value under `key`, the workloads unchanged since the basis) when
    `state` was derived from a basis that computed `key` (`ClusterState.basis_derived`): an
    unchanged workload has the basis's autoscaling inputs, so a refresh re-derives only the
    workloads it changed (~600 of 37,000 at 5,000 nodes) instead of gathering every workload's
    inputs to compare them with the memo."""
    got = state.basis_derived(key)
    if got is None:
        return None
    basis, before = got
    return before, state.derived("autoscale-unchanged", lambda st: _unchanged(st, basis))


def _unchanged(state: ClusterState, basis: ClusterState) -> frozenset[str]:
    """The workloads whose view and workers' views are the very views of `basis` (views are never
    changed: the same view, the same objects), when the profiles, templates and each pool's
    template are the very ones of `basis` too (else none: they reach every workload)."""
    if not (
        _same_entries(state.profiles, basis.profiles)
        and _same_entries(state.templates, basis.templates)
        and {n: p.template for n, p in state.pools.items()} == {n: p.template for n, p in basis.pools.items()}
    ):
        return frozenset()
    workers, before, was = state.workers, basis.workers, basis.workloads
    # the workers that are not the basis's very views (new, changed or gone), found by passes in C:
    # a refresh changes a few hundred of 60,000, and a generator per workload cost 40 ms a refresh
    names = list(workers)
    changed = set(
        compress(names, map(operator.is_not, map(workers.__getitem__, names), map(before.get, names)))
    )
    changed.update(before.keys() - workers.keys())
    keys, views = list(state.workloads), list(state.workloads.values())
    same = compress(zip(keys, views, strict=True), map(operator.is_, views, map(was.get, keys)))
    return frozenset(key for key, wv in same if changed.isdisjoint(wv.workers))


def _same_entries(now: Mapping[str, object], before: Mapping[str, object]) -> bool:
    return now.keys() == before.keys() and all(v is before[k] for k, v in now.items())


def _all(state: ClusterState) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    templates: dict[str, list[str]] = {}
    before, same = carried(state, "autoscale-problems") or ({}, frozenset())
    for key, wv in state.workloads.items():
        if key in same:
            if key in before:
                out[key] = before[key]
            continue
        found = _checked(state, wv)
        pool = state.pools.get(wv.pool) if wv.pool else None
        if pool is not None and pool.template:
            if pool.template not in templates:
                templates[pool.template] = _template(pool.template, state.templates.get(pool.template))
            found += templates[pool.template]
        if found:
            out[key] = found
    return out


def _ref(kind: str, namespace: str | None, name: str) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _mapping(where: str, value: Any, problems: list[str]) -> Mapping[str, Any]:
    """`value` if it is an object (or absent), else a problem and {}."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    problems.append(f"{where}: expected an object, got {type(value).__name__} {_short(value)}")
    return {}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _quantities(where: str, res: Any, problems: list[str]) -> None:
    """requests/limits of tflops, vram (and compute): objects holding valid, bounded quantities."""
    res = _mapping(where, res, problems)
    for part in ("requests", "limits"):
        values = _mapping(f"{where}.{part}", res.get(part), problems)
        for name in ("tflops", "vram", "compute"):
            raw = values.get(name)
            if raw is None or raw == "":
                continue
            try:
                if isinstance(raw, bool) or not isinstance(raw, str | int | float):
                    raise QuantityError(raw, f"expected a quantity, not {type(raw).__name__}")
                parse_bounded(raw)
            except QuantityError as exc:
                problems.append(f"{where}.{part}.{name}: {exc}")


def _asc(where: str, asc: Any, problems: list[str]) -> None:
    """An `autoScalingConfig` object: its shape, finite numbers, cron rules' desired resources."""
    asc = _mapping(where, asc, problems)
    asr = _mapping(f"{where}.autoSetResources", asc.get("autoSetResources"), problems)
    for name in FLOAT_FIELDS:
        why = finite_float_problem(asr.get(name))
        if why is not None:
            problems.append(f"{where}.autoSetResources.{name}: {why}")
    rules = asc.get("cronScalingRules")
    if rules is not None and not isinstance(rules, list):
        problems.append(f"{where}.cronScalingRules: expected a list, got {type(rules).__name__}")
        rules = []
    for i, rule in enumerate(rules or ()):
        r = _mapping(f"{where}.cronScalingRules[{i}]", rule, problems)
        if r.get("desiredResources") is not None:
            _quantities(
                f"{where}.cronScalingRules[{i}].desiredResources", r.get("desiredResources"), problems
            )
    _mapping(f"{where}.externalScaler", asc.get("externalScaler"), problems)


def _workload(state: ClusterState, wv: WorkloadView) -> list[str]:
    found: list[str] = []
    obj = wv.obj or {}
    ref = _ref("TensorFusionWorkload", wv.namespace, wv.name)
    spec = _mapping(f"{ref} spec", obj.get("spec"), found)
    if found:
        return found
    _asc(f"{ref} spec.autoScalingConfig", spec.get("autoScalingConfig"), found)
    _quantities(f"{ref} spec.resources", spec.get("resources"), found)
    status = _mapping(f"{ref} status", obj.get("status"), found)
    if status.get("recommendation"):
        _quantities(f"{ref} status.recommendation", status.get("recommendation"), found)
    profile = spec.get("workloadProfile")
    for wkey in sorted(wv.workers):
        w = state.workers.get(wkey)
        if w is None:
            continue
        ann = (w.obj.get("metadata") or {}).get("annotations") or {}
        for k in _QUANTITY_ANNOTATIONS:
            raw = ann.get(k)
            if raw:
                try:
                    parse_bounded(raw)
                except QuantityError as exc:
                    found.append(f"{_ref('Pod', w.namespace, w.name)} metadata.annotations[{k}]: {exc}")
        profile = profile or ann.get(keys.WORKLOAD_PROFILE)
    if isinstance(profile, str) and profile:
        prof = state.profiles.get(f"{wv.namespace}/{profile}") or {}
        pref = _ref("WorkloadProfile", wv.namespace, profile)
        pspec = _mapping(f"{pref} spec", prof.get("spec"), found)
        _asc(f"{pref} spec.autoScalingConfig", pspec.get("autoScalingConfig"), found)
    return found


def _template(name: str, tpl: Mapping[str, Any] | None) -> list[str]:
    found: list[str] = []
    ref = _ref("SchedulingConfigTemplate", None, name)
    spec = _mapping(f"{ref} spec", (tpl or {}).get("spec"), found)
    rules = spec.get("verticalScalingRules")
    if rules is not None and not isinstance(rules, list):
        return [f"{ref} spec.verticalScalingRules: expected a list, got {type(rules).__name__}"]
    for i, rule in enumerate(rules or ()):
        r = _mapping(f"{ref} spec.verticalScalingRules[{i}]", rule, found)
        _mapping(f"{ref} spec.verticalScalingRules[{i}].selector", r.get("selector"), found)
        if r.get("autoScaling") is not None:
            _asc(f"{ref} spec.verticalScalingRules[{i}].autoScaling", r.get("autoScaling"), found)
    return found
