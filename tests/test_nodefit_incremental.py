"""Node rooms of a state derived incrementally are counted from its basis's counts and the pods that
changed; they equal the full pass in snapshot order on every state of a churny what-if run, and a
request that is not a whole number falls back to that pass."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from tftui.engine import incremental, nodefit
from tftui.engine.state import ClusterState
from tftui.runtime.whatif import SimConfig, parse_policy, simulate
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects


def _derived(state: ClusterState) -> bool:
    """Whether the state carries counts to derive its rooms from (before they are computed)."""
    return nodefit._CARRY in state._derived


def test_rooms_equal_the_full_pass_on_every_state_of_a_churny_run(monkeypatch: pytest.MonkeyPatch) -> None:
    real = nodefit._rooms
    seen = {"states": 0, "derived": 0, "changed": 0}
    last: dict[str, nodefit.Room] = {}

    def checked(state: ClusterState) -> dict[str, nodefit.Room]:
        seen["derived"] += _derived(state)
        got = real(state)
        want = nodefit._full(state)
        assert got == want
        assert list(got) == list(want)
        seen["states"] += 1
        seen["changed"] += bool(last) and got != last
        last.clear()
        last.update(got)
        return got

    monkeypatch.setattr(nodefit, "_rooms", checked)
    objects = generate_objects(7, 40, DEFAULT_NOW)
    cfg = SimConfig(duration=timedelta(hours=12), churn=2.0)
    simulate(objects, parse_policy("CompactFirst+defrag"), DEFAULT_NOW, cfg)
    assert seen["states"] > 10
    assert seen["derived"] > seen["states"] // 2  # the derivation was taken, not the full count
    assert seen["changed"] > 0  # and pods came and went between the states it derived


def _pods_on(objs: list[dict[str, Any]]) -> list[int]:
    return [i for i, o in enumerate(objs) if o["kind"] == "Pod" and (o.get("spec") or {}).get("nodeName")]


def test_a_pod_that_ends_or_asks_a_fraction_of_a_milli_cpu_is_counted_as_the_full_pass() -> None:
    objs = generate_objects(5, 20, DEFAULT_NOW)
    first = ClusterState.build(objs)
    before = nodefit.rooms(first)
    i = _pods_on(objs)[0]
    node = objs[i]["spec"]["nodeName"]
    objs = list(objs)
    ended = copy.deepcopy(objs[i])
    ended["status"]["phase"] = "Succeeded"
    objs[i] = ended
    second = incremental.update_state(first, objs)
    assert _derived(second)  # carried from the first state
    got = nodefit.rooms(second)
    assert got == nodefit._full(second)
    assert got[node].pod_count == before[node].pod_count - 1
    # an unchanged node keeps the very same room
    other = next(n for n in got if n != node)
    assert got[other] is before[other]

    j = _pods_on(objs)[1]
    frac = copy.deepcopy(objs[j])
    frac["spec"]["containers"][0].setdefault("resources", {}).setdefault("requests", {})["cpu"] = "1.5m"
    objs = list(objs)
    objs[j] = frac
    third = incremental.update_state(second, objs)
    assert _derived(third)
    assert nodefit.rooms(third) == nodefit._full(third)
    assert not _derived(third)  # summed in snapshot order, nothing to carry


def test_pods_without_containers_or_requests_are_counted_as_the_full_pass() -> None:
    objs = generate_objects(5, 20, DEFAULT_NOW)
    first = ClusterState.build(objs)
    nodefit.rooms(first)
    objs = list(objs)
    i = _pods_on(objs)[0]
    bare = copy.deepcopy(objs[i])
    bare["spec"]["containers"] = []  # asks for nothing (an int 0 from an empty sum)
    bare["metadata"]["name"] += "-bare"
    objs.append(bare)
    second = incremental.update_state(first, objs)
    got = nodefit.rooms(second)
    assert got == nodefit._full(second)
    assert nodefit._CARRY in second._derived  # counted from the carried sums, not the full pass
