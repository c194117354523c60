"""The acting simulator's shortcuts for many small writes give what the reference paths give: a
merge patch copies only the dicts it reaches (`_merged`, `_mut_merge`) instead of the whole object,
and the event store trims its oldest events without rebuilding its series index."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from tftui.engine.plan import AnnotatePod, Event, PatchWorkloadStatus
from tftui.model import keys
from tftui.runtime.whatif import WhatIfCluster
from tftui.sources.sim import acting, acting_store
from tftui.sources.sim.acting_objects import _merge_patch, _merged
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects

OBJECTS = generate_objects(5, 40, DEFAULT_NOW)


def test_copy_on_write_merge_equals_a_deep_copy_merged() -> None:
    obj: dict[str, Any] = {
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"a": "1", "b": "2"}, "labels": {"x": "y"}},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready"}]},
    }
    before = json.dumps(obj)
    for patch in (
        {"metadata": {"annotations": {"a": "3", "b": None, "c": "4"}}},
        {"metadata": {"newfield": {"k": "v"}}},
        {"status": {"recommendation": {"requests": {"tflops": "1"}}, "conditions": [{"type": "X"}]}},
        {"spec": None, "extra": [1, {"n": 2}]},
    ):
        want = copy.deepcopy(obj)
        _merge_patch(want, patch)
        got = _merged(obj, patch)
        assert json.dumps(got) == json.dumps(want)  # the same keys in the same order
        assert json.dumps(obj) == before  # the original is untouched
        if "spec" not in patch:
            assert got["spec"] is obj["spec"]  # what the patch does not reach is shared


def _canonical(objs: list[dict[str, Any]]) -> str:
    return json.dumps(objs)


def test_patched_objects_leave_the_snapshots_alone_and_equal_deep_copies() -> None:
    """Annotating pods and patching workload statuses copy only what they change: an earlier
    snapshot is unchanged, and the objects are those of the deep-copying writes."""
    sims = [WhatIfCluster(OBJECTS, DEFAULT_NOW, 2) for _ in range(2)]
    pods = [o for o in sims[0].snapshot() if o["kind"] == "Pod"][:30]
    workloads = [o for o in sims[0].snapshot() if o["kind"] == "TensorFusionWorkload"][:30]
    old_snap = sims[0].snapshot()
    old_text = _canonical(old_snap)
    actions: list[Any] = []
    for i, p in enumerate(pods):
        meta = p["metadata"]
        actions.append(
            AnnotatePod(meta["namespace"], meta["name"], {keys.TFLOPS_REQUEST: f"{i + 1}", "x": None})
        )
    for i, w in enumerate(workloads):
        meta = w["metadata"]
        fields = {
            "conditions": [{"type": "ResourceUpdate", "message": str(i)}],
            "recommendation": {"a": str(i)},
        }
        actions.append(PatchWorkloadStatus(meta["namespace"], meta["name"], fields))
    for a in actions * 2:  # twice: the second write finds an object this change already copied
        sims[0].apply(a)
    with pytest.MonkeyPatch.context() as mp:  # the reference: a deep copy, then the patch in place

        def deep(self: Any, key: Any, patch: Any) -> None:
            _merge_patch(self._mut(key), patch)

        mp.setattr(acting_store._ActingStore, "_mut_merge", deep)
        for a in actions * 2:
            sims[1].apply(a)
    assert _canonical(old_snap) == old_text
    assert _canonical(sims[0].snapshot()) == _canonical(sims[1].snapshot())


def _reference_events(records: list[tuple[int, tuple[str, str, str, str, str]]], cap: int) -> list[Any]:
    """The event store as it was: a series index rebuilt from every kept event after each trim."""
    events: list[dict[str, Any]] = []
    series: dict[tuple[str, ...], int] = {}
    for now, ident in records:
        idx = series.get(ident)
        if idx is not None and now - events[idx]["last"] <= 300:
            events[idx] = {**events[idx], "count": events[idx]["count"] + 1, "last": now}
            continue
        events.append({"ident": ident, "count": 1, "last": now, "at": now})
        if len(events) > cap:
            del events[: len(events) - cap]
            series = {e["ident"]: i for i, e in enumerate(events)}
        else:
            series[ident] = len(events) - 1
    return [(e["ident"][1], e["ident"][4], e["count"], e["at"]) for e in events]


def test_event_trim_keeps_the_series_of_a_full_rebuild(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acting, "MAX_EVENTS", 7)
    sim = acting.ActingSimCluster(seed=1, nodes=4, now=DEFAULT_NOW)
    records: list[tuple[int, tuple[str, str, str, str, str]]] = []
    t = 0
    for i in range(200):
        name, note = f"w{(i * 7) % 5}", f"m{(i * 3) % 4}"
        sim.apply(Event(f"TensorFusionWorkload/ns/{name}", "Normal", "R", note))
        records.append((t, ("TensorFusionWorkload", f"ns/{name}", "Normal", "R", note)))
        step = (0, 60, 400)[i % 3]
        sim.advance(timedelta(seconds=step))
        t += step
    got = [
        (
            e["regarding"]["name"],
            e["note"],
            (e.get("series") or {}).get("count", 1),
            int((_parse(e["eventTime"]) - DEFAULT_NOW).total_seconds()),
        )
        for e in sim.events()
    ]
    assert got == _reference_events(records, 7)
    assert len(got) == 7


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)
