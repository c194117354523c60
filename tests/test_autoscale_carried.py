"""A refresh re-derives the autoscaling configuration and checks of the workloads it changed only:
a state derived from the previous one (`engine.incremental.update_state`) takes the previous
state's values for every workload whose view and workers' views it shares, and re-derives the rest.
Every figure equals a fresh derivation on a full build of the same objects."""

from __future__ import annotations

import copy
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from tftui.engine import autoscale_checks, autoscale_config
from tftui.engine.autoscale_config import effective_autoscaling
from tftui.engine.incremental import update_state
from tftui.engine.state import ClusterState, WorkloadView
from tftui.model import keys
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects

BASE = generate_objects(10, 40, DEFAULT_NOW)


@pytest.fixture
def derived(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Empty memos (nothing derived earlier in the process is re-used) and the workloads whose
    configuration is derived from their inputs (not carried), in order."""
    monkeypatch.setattr(autoscale_config, "_EFFECTIVE", {})
    monkeypatch.setattr(autoscale_checks, "_MEMO", {})
    seen: list[str] = []
    inputs = autoscale_config._effective_inputs

    def counted(state: ClusterState, wv: WorkloadView) -> Any:
        seen.append(wv.key)
        return inputs(state, wv)

    monkeypatch.setattr(autoscale_config, "_effective_inputs", counted)
    yield seen


def _all_of(state: ClusterState) -> tuple[dict[str, Any], dict[str, list[str]]]:
    return (
        {k: effective_autoscaling(state, wv) for k, wv in state.workloads.items()},
        {k: autoscale_checks.problems(state, k) for k in state.workloads},
    )


def _fresh(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The figures of a full build, merged and checked from scratch (no memo, no basis)."""
    st = ClusterState.build(objects)
    problems = {}
    for k, wv in st.workloads.items():
        found = autoscale_checks._workload(st, wv)
        pool = st.pools.get(wv.pool) if wv.pool else None
        if pool is not None and pool.template:
            found += autoscale_checks._template(pool.template, st.templates.get(pool.template))
        problems[k] = found
    return {k: autoscale_config._effective(st, wv) for k, wv in st.workloads.items()}, problems


def _enabled(figures: dict[str, Any]) -> set[str]:
    return {k for k, asc in figures.items() if (asc.get("autoSetResources") or {}).get("enable")}


def _worker_pod(objects: list[dict[str, Any]]) -> int:
    """Index of the first pod of a workload with an object and autoscaling off."""
    st = ClusterState.build(objects)
    off = {k for k, wv in st.workloads.items() if wv.obj is not None} - _enabled(_fresh(objects)[0])
    for i, o in enumerate(objects):
        meta = o["metadata"]
        if (
            o["kind"] == "Pod"
            and f"{meta.get('namespace')}/{(meta.get('labels') or {}).get(keys.WORKLOAD)}" in off
        ):
            return i
    raise AssertionError("the generated cluster has no pod of a workload with autoscaling off")


def _replaced(objects: list[dict[str, Any]], i: int, change: Any) -> list[dict[str, Any]]:
    """The objects with object `i` replaced by a changed copy (copy on write, as the sources do)."""
    out = list(objects)
    out[i] = copy.deepcopy(objects[i])
    change(out[i])
    return out


def _annotate(pod: dict[str, Any]) -> None:
    pod["metadata"].setdefault("annotations", {})[keys.AUTOSCALE] = keys.TRUE


def test_a_refresh_re_derives_only_the_workload_whose_pod_changed(derived: list[str]) -> None:
    before = ClusterState.build(BASE)
    _all_of(before)
    assert len(derived) == len(before.workloads)
    i = _worker_pod(BASE)
    after = _replaced(BASE, i, _annotate)
    state = update_state(before, after)
    derived.clear()
    figures = _all_of(state)
    meta = after[i]["metadata"]
    changed = f"{meta['namespace']}/{meta['labels'][keys.WORKLOAD]}"
    assert derived == [changed]
    assert figures == _fresh(after)
    assert changed in _enabled(figures[0]) - _enabled(_fresh(BASE)[0])


def test_a_changed_template_or_profile_re_derives_every_workload(derived: list[str]) -> None:
    """A pool template's vertical scaling rule or a profile reaches workloads through no view
    of theirs: every workload is derived again, and a pod then changed is carried on top."""
    before = ClusterState.build(BASE)
    _all_of(before)
    t = next(i for i, o in enumerate(BASE) if o["kind"] == "SchedulingConfigTemplate")
    rule = {
        "name": "all",
        "selector": {},
        "autoScaling": {"autoSetResources": {"enable": True, "targetResource": "all"}},
    }
    after = _replaced(BASE, t, lambda o: o["spec"].__setitem__("verticalScalingRules", [rule]))
    state = update_state(before, after)
    derived.clear()
    figures = _all_of(state)
    assert sorted(derived) == sorted(state.workloads)
    assert figures == _fresh(after)
    assert _enabled(figures[0]) > _enabled(_fresh(BASE)[0])

    p = next(i for i, o in enumerate(after) if o["kind"] == "WorkloadProfile")
    ns, name = after[p]["metadata"]["namespace"], after[p]["metadata"]["name"]
    w = next(
        i
        for i, o in enumerate(after)
        if o["kind"] == "TensorFusionWorkload" and o["metadata"]["namespace"] == ns
    )
    using = _replaced(after, w, lambda o: o["spec"].__setitem__("workloadProfile", name))
    state2 = update_state(state, using)
    _all_of(state2)
    bad = _replaced(using, p, lambda o: o["spec"].__setitem__("autoScalingConfig", "nonsense"))
    state3 = update_state(state2, bad)
    derived.clear()
    figures3 = _all_of(state3)
    assert sorted(derived) == sorted(state3.workloads)
    assert figures3 == _fresh(bad)
    key = f"{ns}/{using[w]['metadata']['name']}"
    assert [k for k, found in figures3[1].items() if found] == [key]  # the profile is named for its user
    assert "WorkloadProfile" in figures3[1][key][0]


def test_problems_are_carried_and_follow_a_fix(derived: list[str]) -> None:
    """A malformed workload keeps its problems through a refresh that did not touch it, and loses
    them (and gets its configuration back) on the refresh that fixed it."""
    pod = _worker_pod(BASE)
    pod_meta = BASE[pod]["metadata"]
    w = next(
        i
        for i, o in enumerate(BASE)
        if o["kind"] == "TensorFusionWorkload" and o["metadata"]["name"] != pod_meta["labels"][keys.WORKLOAD]
    )
    broken = _replaced(
        BASE,
        w,
        lambda o: o["spec"].__setitem__("autoScalingConfig", {"autoSetResources": {"marginFraction": "NaN"}}),
    )
    key = f"{broken[w]['metadata']['namespace']}/{broken[w]['metadata']['name']}"
    first = ClusterState.build(broken)
    problems = _all_of(first)[1][key]
    assert problems and "marginFraction" in problems[0]
    other = _replaced(broken, pod, lambda o: o["metadata"]["labels"].__setitem__("x", "y"))
    second = update_state(first, other)
    derived.clear()
    figures = _all_of(second)
    assert key not in derived and figures[1][key] is problems  # carried, not checked again
    assert figures == _fresh(other)
    fixed = list(other)
    fixed[w] = BASE[w]
    third = update_state(second, fixed)
    assert _all_of(third) == _fresh(fixed)
    assert autoscale_checks.problems(third, key) == []


def test_without_its_basis_a_state_derives_every_workload(derived: list[str]) -> None:
    """The basis is held weakly (no chain of states is kept alive): once it is gone the state
    derives everything itself, with the same figures."""
    before = ClusterState.build(BASE)
    _all_of(before)
    after = _replaced(BASE, _worker_pod(BASE), _annotate)
    state = update_state(before, after)
    del before
    gc.collect()
    derived.clear()
    assert _all_of(state) == _fresh(after)
    assert sorted(derived) == sorted(state.workloads)


def _kept(state: ClusterState) -> dict[str, Any]:
    """The configurations `state` keeps (what `effective_autoscaling_all` derived into it)."""
    cache: dict[str, Any] = state.derived("effective-autoscaling", lambda _st: {})
    return {k: cache[k][1] for k in state.workloads}


def test_all_at_once_carries_the_unchanged_and_derives_the_changed(derived: list[str]) -> None:
    """`effective_autoscaling_all` (the console's refresh derives every workload's configuration
    with it): the workload whose pod changed is derived, every other is the basis's, and the
    configurations are a fresh derivation's of the same objects."""
    before = ClusterState.build(BASE)
    assert autoscale_config.effective_autoscaling_all(before) == 0
    assert sorted(derived) == sorted(before.workloads)
    i = _worker_pod(BASE)
    after = _replaced(BASE, i, _annotate)
    state = update_state(before, after)
    derived.clear()
    assert autoscale_config.effective_autoscaling_all(state) == 0
    meta = after[i]["metadata"]
    assert derived == [f"{meta['namespace']}/{meta['labels'][keys.WORKLOAD]}"]
    assert _kept(state) == _fresh(after)[0]
    derived.clear()
    assert _all_of(state)[0] == _kept(state) and derived == []  # read, never derived again


def test_a_worker_gone_or_added_re_derives_its_workload(derived: list[str]) -> None:
    """A pod deleted (its workload's first worker may change, with its annotations) and a pod
    added are both seen by the carried path, which compares every worker with the basis's."""
    before = ClusterState.build(BASE)
    autoscale_config.effective_autoscaling_all(before)
    i = _worker_pod(BASE)
    meta = BASE[i]["metadata"]
    owner = f"{meta['namespace']}/{meta['labels'][keys.WORKLOAD]}"
    gone = BASE[:i] + BASE[i + 1 :]
    state = update_state(before, gone)
    derived.clear()
    autoscale_config.effective_autoscaling_all(state)
    assert owner in derived and len(derived) < len(state.workloads) // 2
    assert _kept(state) == _fresh(gone)[0]
    twin = copy.deepcopy(BASE[i])
    twin["metadata"].update(name=meta["name"] + "-twin", uid="twin")
    _annotate(twin)
    added = [*gone, twin]
    state2 = update_state(state, added)
    derived.clear()
    autoscale_config.effective_autoscaling_all(state2)
    assert owner in derived
    assert _kept(state2) == _fresh(added)[0]


def _one_failing(monkeypatch: pytest.MonkeyPatch) -> tuple[ClusterState, str]:
    """The demo's state, with one workload whose configuration cannot be derived (and its key)."""
    monkeypatch.setattr(autoscale_config, "_EFFECTIVE", {})
    state = ClusterState.build(BASE)
    bad = sorted(state.workloads)[3]
    effective = autoscale_config._effective

    def failing(st: ClusterState, wv: WorkloadView) -> Any:
        if wv.key == bad:
            raise RuntimeError("boom")
        return effective(st, wv)

    monkeypatch.setattr(autoscale_config, "_effective", failing)
    return state, bad


def test_one_workload_that_fails_leaves_the_others_derived(monkeypatch: pytest.MonkeyPatch) -> None:
    """One bad object never stops the others: the failure is counted, every other workload is
    derived, and the failing one is left to whoever reads it (who then meets the error)."""
    state, bad = _one_failing(monkeypatch)
    assert autoscale_config.effective_autoscaling_all(state) == 1
    cache: dict[str, Any] = state.derived("effective-autoscaling", lambda _st: {})
    assert set(cache) == set(state.workloads) - {bad}
    with pytest.raises(RuntimeError, match="boom"):
        effective_autoscaling(state, state.workloads[bad])


def _enabled_fresh(objects: list[dict[str, Any]]) -> dict[str, bool]:
    return {
        k: autoscale_config.AutoConfig.parse(asc.get("autoSetResources")).enable
        for k, asc in _fresh(objects)[0].items()
    }


def test_enabled_all_carries_the_unchanged_and_follows_a_change(derived: list[str]) -> None:
    """`enabled_all` (the workloads view's AUTOSCALE column on every refresh): the basis's answers
    for the unchanged workloads, the changed one's from its new configuration (here turned on),
    the same answers as a fresh derivation on every state."""
    before = ClusterState.build(BASE)
    assert autoscale_config.enabled_all(before) == _enabled_fresh(BASE)
    i = _worker_pod(BASE)
    meta = BASE[i]["metadata"]
    owner = f"{meta['namespace']}/{meta['labels'][keys.WORKLOAD]}"
    assert autoscale_config.enabled_all(before)[owner] is False
    after = _replaced(BASE, i, _annotate)
    state = update_state(before, after)
    derived.clear()
    got = autoscale_config.enabled_all(state)
    assert derived == [owner] and got[owner] is True
    assert got == _enabled_fresh(after)
    gone = after[:i] + after[i + 1 :]  # the pod deleted: its workload's answer is asked again
    state2 = update_state(state, gone)
    assert autoscale_config.enabled_all(state2) == _enabled_fresh(gone)


def test_enabled_all_leaves_out_a_workload_that_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """A workload whose configuration cannot be derived has no answer (the view asks it and meets
    the error); every other workload has its answer."""
    state, bad = _one_failing(monkeypatch)
    got = autoscale_config.enabled_all(state)
    assert set(got) == set(state.workloads) - {bad}
