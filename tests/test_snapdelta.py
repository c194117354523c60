"""The acting simulator's change sets (`DeltaSnapshot`) are the identity differences that
`engine.incremental` would otherwise compute object by object: checked at every state a what-if run
with churn, defrag evictions, node releases and provisioned nodes builds."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tftui.engine import incremental, snapdelta
from tftui.engine.snapdelta import DeltaSnapshot, identity_changes, increasing, positions
from tftui.engine.state import ClusterState
from tftui.model import giveway
from tftui.runtime.whatif import SimConfig, WhatIfCluster, parse_policy, simulate
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects


def _ids(objs: list[dict[str, Any]]) -> list[int]:
    return sorted(map(id, objs))


@pytest.mark.parametrize("policy", ["CompactFirst+defrag", "LowLoadFirst+defrag=60"])
def test_change_sets_are_the_identity_differences(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    diff = incremental._Update._diff
    seen = {
        "from the change set": 0,
        "changed kinds": 0,
        "structural": 0,
        "order kept": 0,
        "new views last": 0,
    }

    def checked(self: Any, kind: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, int]]:
        fast = diff(self, kind)
        if self.delta is not None:
            seen["from the change set"] += 1
            old, new = self.prev.snapshot.kind(kind), self.snap.kind(kind)
            plain = incremental._changes(old, new)  # raises if unchanged objects changed places
            assert _ids(fast[0]) == _ids(plain[0]), kind
            assert _ids(fast[1]) == _ids(plain[1]), kind
            assert fast[2].keys() == plain[2].keys(), kind  # positions: the same order
            assert sorted(fast[2], key=fast[2].__getitem__) == sorted(plain[2], key=plain[2].__getitem__)
            if plain[0]:
                seen["changed kinds"] += 1
            if len(old) != len(new):
                seen["structural"] += 1
        return fast

    def same(self: Any, kind: str) -> bool:
        answer = bool(same_(self, kind))
        if answer:
            assert self.snap.kind(kind) == self.prev.snapshot.kind(kind)
            assert not incremental._changes(self.prev.snapshot.kind(kind), self.snap.kind(kind))[0]
        return answer

    same_ = incremental._Update._same
    kept_ = incremental._Update._kept_order

    def kept(self: Any, kind: str, views: dict[str, Any], appended: int, pos: dict[int, int]) -> bool:
        answer = bool(kept_(self, kind, views, appended, pos))
        if answer:
            seen["order kept"] += 1
            seen["new views last"] += appended > 0  # told by the new views alone, no pass over all
            pos = incremental._positions(self.snap.kind(kind))
            assert list(incremental._ordered(views, pos)) == list(views), kind
        return answer

    monkeypatch.setattr(incremental._Update, "_kept_order", kept)
    monkeypatch.setattr(incremental._Update, "_diff", checked)
    monkeypatch.setattr(incremental._Update, "_same", same)
    objects = generate_objects(7, 60, DEFAULT_NOW)
    cfg = SimConfig(duration=timedelta(days=2), churn=0.5, seed=11)
    res = simulate(objects, parse_policy(policy), DEFAULT_NOW, cfg)
    assert res.arrivals > 20 and res.departures > 20 and res.evictions > 5 and res.releases > 0
    assert seen["from the change set"] > 300
    assert seen["changed kinds"] > 100 and seen["structural"] > 20 and seen["order kept"] > 100
    assert seen["new views last"] > 50


def test_a_state_from_change_sets_equals_the_full_build_and_drops_its_predecessor() -> None:
    sim = WhatIfCluster(generate_objects(7, 40, DEFAULT_NOW), DEFAULT_NOW, 3)
    first = sim.state()
    pods = [o for o in sim.snapshot() if o["kind"] == "Pod"]
    victim = next(p for p in pods if (p.get("spec") or {}).get("nodeName"))
    sim._delete(("Pod", victim["metadata"]["namespace"], victim["metadata"]["name"]))
    sim.add_node_like(first.pools[sorted(first.pools)[0]].nodes[0], "extra")
    second = sim.state()
    assert second is not first
    full = ClusterState.build(list(sim.snapshot()))
    assert second == full and list(second.workers) == list(full.workers)
    assert list(second.gpus) == list(full.gpus) and list(second.nodes) == list(full.nodes)
    snap = second.snapshot
    assert isinstance(snap, DeltaSnapshot)  # built from a change set, which went with the update
    assert snap.base is None and snap.changed is None


def _naive_changes(old: list[Any], new: list[Any]) -> Any:
    """`identity_changes` written plainly: one pass each, no slices."""
    if len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True)):
        return [], [], {}
    pos = {id(o): i for i, o in enumerate(new)}
    old_ids, new_ids = {id(o) for o in old}, {id(o) for o in new}
    added = [o for o in new if id(o) not in old_ids]
    removed = [o for o in old if id(o) not in new_ids]
    kept = [pos[id(o)] for o in old if id(o) in pos]
    if any(a >= b for a, b in itertools.pairwise(kept)):
        return None
    return added, removed, pos


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(0, 14),
    ops=st.lists(
        st.tuples(st.sampled_from(["replace", "add", "drop", "swap"]), st.integers(0, 20)), max_size=5
    ),
    slice_size=st.integers(1, 4),
)
def test_identity_changes_in_slices_equal_one_pass(
    size: int, ops: list[tuple[str, int]], slice_size: int
) -> None:
    """Slicing the passes (so a key waits for a slice, not a pass) changes no answer, whatever the
    slice size against the lists' lengths."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(giveway, "SLICE", slice_size)
        patch.setattr(snapdelta, "SLICE", slice_size)
        old: list[Any] = [{"n": i} for i in range(size)]
        new = list(old)
        for op, at in ops:
            if op == "replace" and new:
                new[at % len(new)] = {"n": -at}
            elif op == "add":
                new.append({"n": 100 + at})
            elif op == "drop" and new:
                del new[at % len(new)]
            elif op == "swap" and len(new) > 1:
                i = at % (len(new) - 1)
                new[i], new[i + 1] = new[i + 1], new[i]
        got, want = identity_changes(old, new), _naive_changes(old, new)
        if want is None or got is None:
            assert got is want
        else:
            assert sorted(map(id, got[0])) == sorted(map(id, want[0]))
            assert sorted(map(id, got[1])) == sorted(map(id, want[1]))
            assert got[2] == want[2]
        assert positions(new) == {id(o): i for i, o in enumerate(new)}
        seq = [o["n"] for o in new]
        assert increasing(seq) == all(a < b for a, b in itertools.pairwise(seq))
