"""The node lower bound: never above a feasible packing, exact on simple cases, per-resource and LP."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tftui.engine.lowerbound import Item, NodeCap, lower_bound, pool_bound
from tftui.engine.state import ClusterState
from tftui.sources.sim.cluster import generate_objects

GI = float(1 << 30)
GPU_KINDS = [(165.0, 24 * GI), (312.0, 80 * GI), (91.0, 48 * GI)]


def first_fit(nodes: list[NodeCap], items: list[Item]) -> int | None:
    """A feasible GPU-level packing (each device slot inside one GPU, `count` distinct GPUs of one
    node); the number of nodes it uses, or None if an item does not fit anywhere."""
    free = [[list(g) for g in n.gpus] for n in nodes]
    used: set[int] = set()
    for it in sorted(items, key=lambda i: (-i.tflops * i.count, -i.vram)):
        placed = False
        for order in (sorted(used), [i for i in range(len(nodes)) if i not in used]):
            for ni in order:
                fits = [g for g in free[ni] if g[0] >= it.tflops and g[1] >= it.vram]
                if len(fits) >= it.count:
                    for g in fits[: it.count]:
                        g[0] -= it.tflops
                        g[1] -= it.vram
                    used.add(ni)
                    placed = True
                    break
            if placed:
                break
        if not placed:
            return None
    return len(used)


node_st = st.builds(
    lambda kind, n: NodeCap(tuple([GPU_KINDS[kind]] * n)),
    st.integers(0, len(GPU_KINDS) - 1),
    st.sampled_from([1, 2, 4, 8]),
)
item_st = st.builds(
    Item,
    st.floats(1.0, 160.0),
    st.floats(1 * GI, 24 * GI),
    st.sampled_from([1, 1, 1, 2]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(node_st, min_size=1, max_size=12), st.lists(item_st, max_size=40))
def test_bound_never_exceeds_a_feasible_packing(nodes: list[NodeCap], items: list[Item]) -> None:
    packed = first_fit(nodes, items)
    bound = lower_bound(nodes, items)
    if packed is not None:
        assert bound.fits
        assert bound.nodes <= packed
        assert max(bound.per_resource.values()) <= bound.nodes
        assert bound.lp <= packed


@settings(max_examples=200, deadline=None)
@given(st.lists(node_st, min_size=1, max_size=8), st.lists(item_st, max_size=30))
def test_lp_bound_is_at_least_every_per_resource_bound(nodes: list[NodeCap], items: list[Item]) -> None:
    b = lower_bound(nodes, items)
    if b.fits:
        assert b.lp >= max(b.per_resource.values())


def test_whole_gpu_workers_count_gpus() -> None:
    # eight workers each wanting more than half a GPU need eight GPUs: two 4-GPU nodes, although
    # their TFLOPS and VRAM would fit on one and a half
    nodes = [NodeCap(((165.0, 24 * GI),) * 4)] * 4
    b = lower_bound(nodes, [Item(90.0, 4 * GI)] * 8)
    assert b.per_resource == {"tflops": 2, "vram": 1, "gpus": 2}
    assert b.nodes == 2


def test_resources_together_bind_harder_than_each_alone() -> None:
    # half the nodes are TFLOPS-rich, half VRAM-rich: each resource alone is covered by 2 nodes,
    # both together need 3 (the LP's mixed direction finds it)
    nodes = [
        NodeCap(((100.0, 10.0),)),
        NodeCap(((100.0, 10.0),)),
        NodeCap(((10.0, 100.0),)),
        NodeCap(((10.0, 100.0),)),
    ]
    items = [Item(50.0, 5.0)] * 3 + [Item(5.0, 50.0)] * 3
    b = lower_bound(nodes, items)
    assert max(b.per_resource.values()) == 2
    assert b.lp == 3
    assert b.nodes == 3


def test_empty_pool_and_unfittable_demand() -> None:
    nodes = [NodeCap(((100.0, 10.0),))]
    assert lower_bound(nodes, []).nodes == 0
    b = lower_bound(nodes, [Item(80.0, 1.0), Item(80.0, 1.0)])
    assert not b.fits
    assert b.nodes == 1


def test_configured_bound_adds_warm_headroom_and_min_floor() -> None:
    nodes = [NodeCap(((100.0, 10.0),))] * 5
    items = [Item(50.0, 1.0)]
    assert lower_bound(nodes, items).nodes == 1
    assert lower_bound(nodes, items, headroom=(100.0, 0.0)).nodes == 2
    assert lower_bound(nodes, items, floor=(300.0, 0.0)).nodes == 3


def test_demo_pools_bound_below_their_node_counts() -> None:
    state = ClusterState.build(generate_objects(7, 40))
    for name, pv in state.pools.items():
        packing = pool_bound(state, name, configured=False)
        configured = pool_bound(state, name)
        assert 0 < packing.nodes <= configured.nodes <= len(pv.nodes), name
