"""The placement filter's per-view memo of the static filters, and the defrag simulation's bounded
search: both must give exactly what the plain per-GPU filter chain and the exhaustive target loop
give."""

from __future__ import annotations

import copy
import functools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tftui.engine import incremental
from tftui.engine.fit import Request, node_level_score, reject_reason
from tftui.engine.isolation import compatible
from tftui.engine.placement import TOP_NODES, apply_placement, place, pool_mode, scheduler_weights
from tftui.engine.placementfilter import STAGES, filter_gpus
from tftui.engine.state import ClusterState, Res
from tftui.sources.sim.cluster import generate_objects

GI = 1024**3
JSON = dict[str, Any]


@functools.cache
def _objects(seed: int) -> tuple[JSON, ...]:
    return tuple(generate_objects(seed, 30))


def _reference(
    state: ClusterState,
    pool: str,
    req: Request,
    available: dict[str, Res],
    exclude: frozenset[str],
) -> tuple[dict[str, tuple[str, ...]], dict[str, int]]:
    """The per-GPU stages as `reject_reason` runs them, one GPU at a time."""
    by_node: dict[str, list[str]] = {}
    rejected: dict[str, int] = {}
    for g in state.gpus_in_pool(pool):
        if g.node in exclude:
            why: str | None = "excluded"
        elif g.node is None or g.node not in state.nodes:
            why = "no-node"
        else:
            why = reject_reason(g, available.get(g.name, g.available), req, state.providers)
        if why is None:
            assert g.node is not None
            by_node.setdefault(g.node, []).append(g.name)
        else:
            rejected[why] = rejected.get(why, 0) + 1
    if req.count > 1:
        for n in [n for n, names in by_node.items() if len(names) < req.count]:
            rejected["same-node"] = rejected.get("same-node", 0) + len(by_node.pop(n))
    return {n: tuple(v) for n, v in sorted(by_node.items())}, {
        s: rejected[s] for s in STAGES if s in rejected
    }


@st.composite
def _requests(draw: st.DrawFn) -> Request:
    percent = draw(st.booleans())
    return Request(
        vram=draw(st.integers(0, 90)) * GI,
        tflops=None if percent else float(draw(st.integers(0, 400))),
        compute_percent=float(draw(st.integers(0, 100))) if percent else None,
        count=draw(st.sampled_from([1, 1, 2, 4])),
        model=draw(st.sampled_from([None, None, "H100", "A100", "L40S", "RTX 4090"])),
        vendor=draw(st.sampled_from([None, None, "NVIDIA", "AMD"])),
        isolation=draw(st.sampled_from(["soft", "hard", "soft", "shared"])),
        indices=draw(st.sampled_from([(), (), (0,), (1, 3)])),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2),
    pool_index=st.integers(0, 4),
    reqs=st.lists(_requests(), min_size=1, max_size=3),
    booked=st.integers(0, 40),
    excluded=st.integers(0, 3),
)
def test_filter_equals_the_per_gpu_chain(
    seed: int, pool_index: int, reqs: list[Request], booked: int, excluded: int
) -> None:
    state = ClusterState.build(list(_objects(seed)))
    pool = sorted(state.pools)[pool_index % len(state.pools)]
    gpus = state.gpus_in_pool(pool)
    available = {g.name: Res(g.available.tflops / 2, g.available.vram / 3) for g in gpus[:booked]}
    exclude = frozenset(sorted({g.node for g in gpus if g.node})[:excluded])
    for req in reqs:  # several requests over one state: the memo is read again
        got = filter_gpus(state, pool, req, available=available, exclude_nodes=exclude, node_filters=False)
        if "quota" in got.rejected:
            continue
        assert (got.by_node, got.rejected) == _reference(state, pool, req, available, exclude)


def test_the_memo_follows_a_changed_gpu_view() -> None:
    """A GPU whose object changed gets a new view in the next state: its verdicts are made again."""
    objs = [copy.deepcopy(o) for o in _objects(0)]
    state = ClusterState.build(objs)
    pool = sorted(state.pools)[0]
    req = Request(vram=GI, tflops=1.0)
    first = filter_gpus(state, pool, req, node_filters=False)
    name = next(n for names in first.by_node.values() for n in names)
    i = next(i for i, o in enumerate(objs) if o.get("kind") == "GPU" and o["metadata"]["name"] == name)
    changed = copy.deepcopy(objs[i])
    changed["status"]["phase"] = "Pending"
    objs = [*objs[:i], changed, *objs[i + 1 :]]
    later = incremental.update_state(state, objs)
    assert later.gpus[name].phase == "Pending"
    second = filter_gpus(later, pool, req, node_filters=False)
    assert all(name not in names for names in second.by_node.values())
    assert second.rejected.get("phase", 0) == first.rejected.get("phase", 0) + 1
    assert filter_gpus(later, pool, req, node_filters=False) == second


def _reference_scores(
    state: ClusterState, pool: str, req: Request, available: dict[str, Res]
) -> tuple[tuple[str, int], ...]:
    """Node scores as the scheduler computes them, every GPU looked at on every call."""
    mode = pool_mode(state, pool)
    weights = scheduler_weights(state)
    cands = filter_gpus(state, pool, req, available=available)
    out = []
    for n, matched in cands.by_node.items():
        total = counted = 0
        for g in state.gpus_of(n):
            if g.name not in matched and not compatible(g, req.isolation):
                continue
            s = node_level_score(mode, g.capacity, available.get(g.name, g.available), weights)
            if g.name not in matched and g.phase == "Pending":
                s //= 4
            total += s
            counted += 1
        out.append((n, total // counted if counted else 0))
    out.sort(key=lambda t: (-t[1], t[0]))
    return tuple(out[:TOP_NODES])


def test_node_scores_follow_bookings_and_changed_views() -> None:
    """The per-node score memo: a node with a booking is scored afresh, a node whose GPU views
    changed in a later state too; the rest read the memo."""
    objs = [copy.deepcopy(o) for o in _objects(1)]
    state = ClusterState.build(objs)
    req = Request(vram=2 * GI, tflops=5.0)
    pools = [p for p in sorted(state.pools) if place(state, p, req).node is not None]
    assert pools
    for pool in pools:
        available: dict[str, Res] = {}
        for _ in range(6):  # book one placement after another, as the simulated scheduler does
            p = place(state, pool, req, available=available)
            assert p.node_scores == _reference_scores(state, pool, req, available)
            if p.node is None:
                break
            apply_placement(available, state, p, req)
    # a later state: a scored GPU of a top node goes Pending (a quarter of its score); the node
    # keeps other matched GPUs, so it is scored again, and its score must follow
    mode, weights = pool_mode(state, pools[0]), scheduler_weights(state)
    top = dict(place(state, pools[0], req).node_scores)
    name = next(
        g
        for n, names in filter_gpus(state, pools[0], req).by_node.items()
        if n in top and len(names) >= 2
        for g in names
        if node_level_score(mode, state.gpus[g].capacity, state.gpus[g].available, weights) >= 4
    )
    i = next(i for i, o in enumerate(objs) if o.get("kind") == "GPU" and o["metadata"]["name"] == name)
    changed = copy.deepcopy(objs[i])
    changed["status"]["phase"] = "Pending"
    objs = [*objs[:i], changed, *objs[i + 1 :]]
    later = incremental.update_state(state, objs)
    for pool in pools:
        assert place(later, pool, req).node_scores == _reference_scores(later, pool, req, {})


def test_gpus_without_their_gpunode_count_as_no_node() -> None:
    objs = list(_objects(2))
    state = ClusterState.build(objs)
    pool = sorted(state.pools)[0]
    node = next(g.node for g in state.gpus_in_pool(pool) if g.node)
    state = ClusterState.build(
        [o for o in objs if not (o.get("kind") == "GPUNode" and o["metadata"]["name"] == node)]
    )
    req = Request(vram=GI, tflops=1.0)
    for _ in range(2):  # made, then read from the state's memo
        got = filter_gpus(state, pool, req, node_filters=False)
        assert got.rejected.get("no-node", 0) > 0
        assert (got.by_node, got.rejected) == _reference(state, pool, req, {}, frozenset())


def test_the_carried_memos_never_outgrow_the_cluster() -> None:
    """Entries of GPUs and nodes gone from the cluster (a cloud pool's churn) are forgotten: the
    memos carried from state to state hold at most about twice what the cluster has."""
    state = ClusterState.build([copy.deepcopy(o) for o in _objects(0)])
    fresh = ClusterState.build([copy.deepcopy(o) for o in _objects(0)])
    req = Request(vram=GI, tflops=1.0)
    pool = next(p for p in sorted(fresh.pools) if place(fresh, p, req).node is not None)
    static: dict[str, object] = state.derived("carried/placement-static", lambda st: {})
    scores: dict[str, object] = state.derived("carried/placement-node-scores", lambda st: {})
    for i in range(2 * len(state.gpus) + 100):
        static[f"gone-gpu-{i}"] = scores[f"gone-node-{i}"] = None
    assert place(state, pool, req) == place(fresh, pool, req)
    assert 0 < len(static) <= len(state.gpus) and not any(k.startswith("gone-") for k in static)
    assert 0 < len(scores) <= len(state.nodes) and not any(k.startswith("gone-") for k in scores)
