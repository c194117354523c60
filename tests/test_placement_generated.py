"""Placement on generated clusters: every placement satisfies the filters, whatever the order of the
objects."""

from __future__ import annotations

import functools
import random

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.fixtures.engine_builders import GI
from tests.placement_support import JSON
from tftui.engine.fit import MODES, Mode, Request, reject_reason
from tftui.engine.placement import apply_placement, place, pool_mode, preview, select_from_store
from tftui.engine.state import ClusterState, Res
from tftui.model.dump import validate_items
from tftui.sources.sim.cluster import generate_objects

# -- properties on generated clusters ------------------------------------------------------------


@functools.cache
def sim_objects(seed: int, nodes: int) -> tuple[JSON, ...]:
    return tuple(generate_objects(seed, nodes))


@functools.cache
def sim_state(seed: int, nodes: int) -> ClusterState:
    return ClusterState.build(validate_items(list(sim_objects(seed, nodes))))


@st.composite
def requests(draw: st.DrawFn) -> Request:
    """Mostly modest requests (so most of them fit somewhere), some large or picky ones."""
    percent = draw(st.integers(0, 3)) == 0
    big = draw(st.integers(0, 4)) == 0
    return Request(
        vram=draw(st.integers(0, 96 if big else 20)) * GI,
        tflops=None if percent else float(draw(st.integers(0, 600 if big else 120))),
        compute_percent=float(draw(st.integers(0, 100 if big else 40))) if percent else None,
        count=draw(st.sampled_from([1, 1, 1, 1, 2, 2, 3, 4, 8])),
        model=draw(st.sampled_from([None] * 6 + ["H100", "A100", "L40S", "NVIDIA H100 80GB HBM3"])),
        vendor=draw(st.sampled_from([None] * 6 + ["NVIDIA", "AMD"])),
        isolation=draw(st.sampled_from(["soft"] * 5 + ["shared"])),
    )


def eligible(state: ClusterState, pool_: str, req: Request, max_workers: int) -> dict[str, list[str]]:
    """Brute force: per usable node of the pool, the GPUs that pass every per-GPU filter."""
    out: dict[str, list[str]] = {}
    for g in state.gpus.values():
        nv = state.nodes.get(g.node or "")
        if g.pool != pool_ or nv is None or nv.unschedulable or len(nv.workers) >= max_workers:
            continue
        if reject_reason(g, g.available, req) is None:
            out.setdefault(nv.name, []).append(g.name)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 3),
    nodes=st.sampled_from([6, 12]),
    pool_index=st.integers(0, 2),
    req=requests(),
    mode=st.sampled_from([None, *MODES]),
    max_workers=st.sampled_from([256, 256, 8]),
)
def test_property_placements_satisfy_the_filters(
    seed: int, nodes: int, pool_index: int, req: Request, mode: Mode | None, max_workers: int
) -> None:
    state = sim_state(seed, nodes)
    pool_ = sorted(state.pools)[pool_index % len(state.pools)]
    p = place(state, pool_, req, mode=mode, max_worker_per_node=max_workers)
    ok = {n: gs for n, gs in eligible(state, pool_, req, max_workers).items() if len(gs) >= req.count}
    assert p.mode == (mode or pool_mode(state, pool_))
    event("placed" if p.node else f"unplaceable: {p.reason.split(' in pool')[0] if p.reason else None}")
    if p.node is None:
        assert p.reason
        assert ok == {}
        assert p.gpus == ()
        return
    assert p.reason is None
    assert p.node in ok
    assert len(p.gpus) == req.count == len(set(p.gpus))
    for name in p.gpus:
        g = state.gpus[name]
        assert g.node == p.node and g.pool == pool_
        assert reject_reason(g, g.available, req) is None
    assert set(n for n, _ in p.node_scores) <= set(ok)
    assert p.node_scores[0][0] == p.node
    keys = [(-s, n) for n, s in p.node_scores]
    assert keys == sorted(keys)
    assert len(p.node_scores) == min(5, len(ok))
    # booking never drives a chosen GPU negative
    avail: dict[str, Res] = {}
    apply_placement(avail, state, p, req)
    assert all(r.tflops >= 0 and r.vram >= 0 for r in avail.values())
    # the selector (P8) also only returns valid, co-located GPUs
    s = select_from_store(state, pool_, req, mode=mode)
    if s.node is not None:
        assert all(state.gpus[n].node == s.node for n in s.gpus) and len(s.gpus) == req.count


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 3), shuffle=st.integers(0, 2**32 - 1), req=requests())
def test_property_object_order_does_not_matter(seed: int, shuffle: int, req: Request) -> None:
    objs = list(sim_objects(seed, 6))
    random.Random(shuffle).shuffle(objs)
    shuffled = ClusterState.build(validate_items(objs))
    state = sim_state(seed, 6)
    for pool_ in sorted(state.pools):
        assert preview(shuffled, pool_, req).dumps() == preview(state, pool_, req).dumps()
