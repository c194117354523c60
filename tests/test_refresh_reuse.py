"""A console refresh costs what changed: objects seen before are not validated again and the next
state is derived from the previous one (engine.incremental), equal to a full build — on the
console's own refresh path (`data.load` with the app's `StateReader`)."""

from __future__ import annotations

import copy
import random
import re
from datetime import timedelta
from typing import Any

import pytest

from tests.test_state_incremental import _mutations
from tftui.engine import incremental
from tftui.engine.plan import EvictPod
from tftui.engine.state import ClusterState
from tftui.model.dump import DumpError, validate_items
from tftui.model.validated import CHUNK, ValidationCache
from tftui.sources.ports import ActionError
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.ui.app import TfTuiApp
from tftui.ui.load.data import StateReader, load


class Objects:
    """A ClusterPort over a list the test changes copy-on-write, as every source does."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    def describe(self) -> str:
        return "objects"

    def snapshot(self) -> list[dict[str, Any]]:
        return list(self.objects)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many states the incremental path derived (a fallback to the full build counts none)."""
    runs = {"incremental": 0}
    run = incremental._Update.run

    def counting(self: Any) -> ClusterState:
        st = run(self)
        runs["incremental"] += 1
        return st

    monkeypatch.setattr(incremental._Update, "run", counting)
    return runs


def full_build(objects: list[dict[str, Any]]) -> ClusterState:
    return ClusterState.build(validate_items(objects))


def assert_same_state(inc: ClusterState, full: ClusterState) -> None:
    """Equal views in the same dict and list order (the full build validated its own copies, so
    the objects are equal, not the same dicts: `test_state_incremental` checks identity)."""
    assert inc.warnings == full.warnings
    for name in ("workers", "gpus", "nodes", "workloads", "pools", "templates", "claims", "profiles"):
        a, b = getattr(inc, name), getattr(full, name)
        assert list(a) == list(b), name
        for key in b:
            assert a[key] == b[key], f"{name}[{key}]"
    assert inc.gpus_by_pool_label == full.gpus_by_pool_label
    assert inc.compaction_sums == full.compaction_sums
    assert inc.snapshot.objects == full.snapshot.objects
    assert inc == full


def test_an_unchanged_refresh_validates_nothing_and_shares_every_view(counted: dict[str, int]) -> None:
    cluster = ActingSimCluster(seed=3, nodes=12, now=DEFAULT_NOW)
    reader = StateReader()
    first = load(cluster, None, DEFAULT_NOW, reader=reader)
    assert reader.validated == len(cluster.snapshot()) > 100
    second = load(cluster, None, DEFAULT_NOW, reader=reader)
    assert reader.validated == 0
    # the very same objects: the state itself is kept (no incremental build, nothing derived again)
    assert reader.unchanged and second.state is first.state and counted["incremental"] == 0
    assert second.state.snapshot.objects == first.state.snapshot.objects
    assert all(
        a is b for a, b in zip(second.state.snapshot.objects, first.state.snapshot.objects, strict=True)
    )
    assert all(second.state.nodes[n] is first.state.nodes[n] for n in first.state.nodes)
    assert all(second.state.workers[k] is first.state.workers[k] for k in first.state.workers)
    assert_same_state(second.state, full_build(cluster.snapshot()))


def test_refreshes_of_a_working_demo_equal_full_builds(counted: dict[str, int]) -> None:
    """The demo's own changes (evictions, its workers re-created and placed) on the console path."""
    cluster = ActingSimCluster(seed=5, nodes=12, now=DEFAULT_NOW)
    reader = StateReader()
    data = load(cluster, None, cluster.now(), reader=reader)
    total = len(cluster.snapshot())
    changed = 0
    evicted = 0
    for step in range(12):
        for victim in [w for w in data.state.workers.values() if w.node][step::7]:
            try:
                cluster.apply(EvictPod(victim.namespace, victim.name))
                evicted += 1
                break
            except ActionError:  # its disruption budget refuses: the next one
                continue
        cluster.advance(timedelta(minutes=5))
        data = load(cluster, None, cluster.now(), reader=reader)
        assert reader.validated < total / 2  # only what changed went through pydantic
        changed += reader.validated
        assert_same_state(data.state, full_build(cluster.snapshot()))
    assert evicted >= 10 and changed >= evicted and counted["incremental"] >= 10


def test_structural_changes_on_the_console_path_equal_full_builds(counted: dict[str, int]) -> None:
    objs = generate_objects(3, 24, DEFAULT_NOW)
    cluster = Objects(objs)
    reader = StateReader()
    load(cluster, None, DEFAULT_NOW, reader=reader)
    done = []
    for what in _mutations(objs, random.Random(4)):
        before = counted["incremental"]
        data = load(cluster, None, DEFAULT_NOW, reader=reader)
        assert reader.validated <= 2, what  # the changed or added object, never the rest
        assert_same_state(data.state, full_build(objs))
        done.append((what, counted["incremental"] > before))
    assert len(done) == 10
    assert sum(inc for _, inc in done) >= 7  # most changes did not fall back to the full build


def test_a_relist_with_the_same_resource_versions_validates_nothing() -> None:
    """After a dropped watch the cache holds new dicts of the same objects: uid + resourceVersion."""
    objs = generate_objects(2, 10, DEFAULT_NOW)
    for n, o in enumerate(objs):
        o["metadata"]["uid"] = f"uid-{n}"
        o["metadata"]["resourceVersion"] = str(1000 + n)
    cache = ValidationCache()
    first = cache.validate(objs)
    relisted = copy.deepcopy(objs)
    relisted[0]["metadata"]["resourceVersion"] = "99999"  # written since: validated again
    relisted[0]["metadata"]["labels"] = {"changed": "yes"}
    again = cache.validate(relisted)
    assert cache.validated == 1
    assert again.objects[0]["metadata"]["labels"] == {"changed": "yes"}
    assert all(a is b for a, b in zip(again.objects[1:], first.objects[1:], strict=True))
    assert again == validate_items(relisted)


def test_a_bad_object_fails_as_the_full_validation_does_and_keeps_the_cache() -> None:
    objs = generate_objects(2, 10, DEFAULT_NOW)
    cache = ValidationCache()
    good = cache.validate(objs)
    bad = list(objs)
    broken = copy.deepcopy(bad[-1])
    broken["metadata"]["name"] = 42
    bad[-1] = broken
    with pytest.raises(DumpError) as err:
        cache.validate(bad)
    with pytest.raises(DumpError) as full:
        validate_items(bad)
    assert str(err.value) == str(full.value) and f"(item {len(bad)})" in str(err.value)
    again = cache.validate(objs)
    assert cache.validated == 0 and all(a is b for a, b in zip(again.objects, good.objects, strict=True))


def _stored_but_refused(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects with two values an API server stores and our schema refuses: a GPU capacity of
    `1e999` (the CRD's quantity pattern allows it) and a pool's `lastDefragTime` in year 1."""
    out = list(objs)
    gpu = next(i for i, o in enumerate(out) if o["kind"] == "GPU")
    pool = next(i for i, o in enumerate(out) if o["kind"] == "GPUPool")
    out[gpu] = copy.deepcopy(out[gpu])
    out[gpu]["status"]["capacity"]["tflops"] = "1e999"
    out[pool] = copy.deepcopy(out[pool])
    out[pool].setdefault("status", {})["lastDefragTime"] = "0001-01-01T00:00:00Z"
    return out


def test_a_lenient_cache_keeps_a_stored_object_it_refuses_and_says_so() -> None:
    objs = _stored_but_refused(generate_objects(2, 10, DEFAULT_NOW))
    with pytest.raises(DumpError):  # the strict cache (and a dump) refuses them, as before
        ValidationCache().validate(objs)
    cache = ValidationCache(lenient=True)
    snap = cache.validate(objs)
    gpu = next(o for o in objs if o["kind"] == "GPU" and o["status"]["capacity"]["tflops"] == "1e999")
    assert any(o is gpu for o in snap.objects)  # kept as stored: what the daemon reads
    problems = dict(cache.problems())
    assert problems[f"GPU {gpu['metadata']['name']}"].startswith(
        "status.capacity.tflops: '1e999': out of range"
    )
    assert any(
        k.startswith("GPUPool ") and v.startswith("status.lastDefragTime: ") for k, v in problems.items()
    )
    assert len(problems) == 2 and len(snap.objects) == len(objs)
    cache.validate(objs)  # an unchanged refresh validates nothing and still says so
    assert cache.validated == 0 and dict(cache.problems()) == problems
    fixed = [o for o in objs if o is not gpu]  # the GPU deleted: its problem goes with it
    cache.validate(fixed)
    assert [k for k, _ in cache.problems()] == [k for k in problems if k.startswith("GPUPool ")]


def test_a_value_problem_is_a_refused_value_of_the_right_type() -> None:
    """What a lenient cache keeps as stored: values out of what our schema takes, never a shape."""
    from tftui.model.dump import value_problem

    objs = generate_objects(2, 10, DEFAULT_NOW)
    gpu = copy.deepcopy(next(o for o in objs if o["kind"] == "GPU"))
    assert value_problem(gpu) is None
    gpu["status"]["capacity"]["tflops"] = "1e999"
    assert (value_problem(gpu) or "").startswith("status.capacity.tflops: '1e999': out of range")
    pod = copy.deepcopy(next(o for o in objs if o["kind"] == "Pod"))
    pod["metadata"]["creationTimestamp"] = "0001-01-01T00:00:00Z"  # refused after the schema
    assert (value_problem(pod) or "").startswith("metadata.creationTimestamp: ")
    for path, value in (("status.gpuModel", ["H100"]), ("status.capacity", "989"), ("status.index", 1.5)):
        wrong = copy.deepcopy(gpu)
        *parents, leaf = path.split(".")
        node = wrong
        for key in parents:
            node = node[key]
        node[leaf] = value
        with pytest.raises(DumpError, match=re.escape(path)):
            value_problem(wrong)


def test_a_lenient_cache_still_refuses_what_no_api_server_hands_out() -> None:
    """A name that is not a string is no stored object: the refresh fails naming it, as before."""
    objs = generate_objects(2, 10, DEFAULT_NOW)
    cache = ValidationCache(lenient=True)
    good = cache.validate(objs)
    bad = list(objs)
    bad[-1] = copy.deepcopy(bad[-1])
    bad[-1]["metadata"]["name"] = 42
    with pytest.raises(DumpError, match=rf"\(item {len(bad)}\)"):
        cache.validate(bad)
    again = cache.validate(objs)
    assert cache.validated == 0 and all(a is b for a, b in zip(again.objects, good.objects, strict=True))
    assert cache.problems() == []


def test_the_console_reads_a_live_cluster_with_a_refused_object(tmp_path: Any) -> None:
    """One object our schema refuses no longer fails every refresh: the state is built from it as
    stored (the engine's own warning and blocked pool, as the daemon sees it) and the object's
    problem is listed with the warnings; a dump with it is still refused."""

    objs = _stored_but_refused(generate_objects(2, 10, DEFAULT_NOW))
    reader = StateReader()
    data = load(Objects(objs), None, DEFAULT_NOW, None, reader)
    warned = [str(w) for w in data.warnings]
    gpu = next(o for o in objs if o["kind"] == "GPU" and o["status"]["capacity"]["tflops"] == "1e999")
    pool = gpu["metadata"]["labels"]["tensor-fusion.ai/gpupool"]
    assert pool in data.state.blocked_pools()  # the engine's blocking warning: not acted on
    assert sum("status.capacity.tflops" in w for w in warned) == 1  # the engine's, not twice
    assert any(
        w.startswith("GPUPool ") and "status.lastDefragTime" in w and "kept as stored" in w for w in warned
    )
    assert len(data.state.pools) == len({o["metadata"]["name"] for o in objs if o["kind"] == "GPUPool"})
    again = load(Objects(objs), None, DEFAULT_NOW, None, reader)
    assert reader.validated == 0 and [str(w) for w in again.warnings] == warned
    from tftui.model.dump import dumps
    from tftui.sources.dumpfile import DumpCluster

    path = tmp_path / "dump.json"
    path.write_text(dumps(objs))
    with pytest.raises(DumpError, match=r"status\.capacity\.tflops"):
        DumpCluster(path)


def test_a_big_snapshot_is_validated_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """pydantic-core holds the GIL for a whole call: chunks let the UI thread in between."""
    from tftui.model import validated

    sizes: list[int] = []
    real = validated.validate_items

    def spy(items: Any, source: str = "<objects>") -> Any:
        sizes.append(len(items))
        return real(items, source)

    monkeypatch.setattr(validated, "validate_items", spy)
    objs = generate_objects(30, 400, DEFAULT_NOW)
    assert len(objs) > CHUNK
    snap = ValidationCache().validate(objs)
    assert max(sizes) == CHUNK and sum(sizes) == len(objs)
    assert snap == validate_items(objs)


async def test_the_consoles_refresh_reuses_what_it_validated() -> None:
    cluster = ActingSimCluster(seed=3, nodes=12, now=DEFAULT_NOW)
    app = TfTuiApp(cluster, None, clock=lambda: DEFAULT_NOW, refresh_interval=None, read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        first = app.data
        assert first is not None and app._reader.validated == len(cluster.snapshot())
        await pilot.press("ctrl+r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.data is not first and app._reader.validated == 0
        assert app.data is not None
        assert all(app.data.state.gpus[g] is first.state.gpus[g] for g in first.state.gpus)


def test_objects_replaced_in_place_give_the_full_validations_snapshot() -> None:
    """The usual refresh (a few objects replaced at their place) takes the cheap path; a place
    whose kind changed falls back to the general one. Both equal a full validation, by kind too."""
    objs = generate_objects(2, 10, DEFAULT_NOW)
    cache = ValidationCache()
    cache.validate(objs)
    pods = [i for i, o in enumerate(objs) if o["kind"] == "Pod"]
    for step, i in enumerate(pods[:3]):
        changed = copy.deepcopy(objs[i])
        changed["metadata"]["labels"] = {"step": str(step)}
        objs[i] = changed
        snap = cache.validate(objs)
        assert cache.validated == 1
        full = validate_items(objs)
        assert snap.objects == full.objects and snap.by_kind == full.by_kind
    gpu = next(i for i, o in enumerate(objs) if o["kind"] == "GPU")
    objs[gpu] = copy.deepcopy(objs[pods[-1]])  # a GPU's place now holds a pod
    snap = cache.validate(objs)
    full = validate_items(objs)
    assert snap.objects == full.objects and snap.by_kind == full.by_kind


def test_an_unchanged_refresh_keeps_usage_and_operations_until_their_inputs_change() -> None:
    """Same objects and instant: the same usage join and operations; a later instant (compaction
    periods and defrag windows fall due with the clock) or a changed object: built again, equal
    to what a refresh without kept results builds."""
    objs = generate_objects(3, 30, DEFAULT_NOW)
    cluster = Objects(objs)
    reader = StateReader()
    first = load(cluster, None, DEFAULT_NOW, reader=reader)
    again = load(cluster, None, DEFAULT_NOW, reader=reader)
    assert again.state is first.state and again.usage is first.usage and again.ops is first.ops
    later = DEFAULT_NOW + timedelta(hours=5)
    moved = load(cluster, None, later, reader=reader)
    assert moved.ops is not first.ops
    assert moved.ops == load(cluster, None, later).ops
    pod = next(i for i, o in enumerate(objs) if o["kind"] == "Pod")
    objs[pod] = changed = copy.deepcopy(objs[pod])
    changed["status"]["phase"] = "Succeeded"
    after = load(cluster, None, later, reader=reader)
    assert after.state is not moved.state and after.ops is not moved.ops
    fresh = load(cluster, None, later)
    assert after.ops == fresh.ops and after.usage == fresh.usage
