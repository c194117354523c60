"""load(dump(x)) == x for generated clusters, and the state derived from both is the same."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tftui.engine.state import ClusterState
from tftui.model.dump import dumps, loads, validate_items
from tftui.model.quantity import quantity_float
from tftui.sources.sim.cluster import generate_objects


def figures(state: ClusterState) -> dict[str, object]:
    return {
        "pools": {
            n: (p.capacity, p.allocated, p.virtual, p.limits, sorted(p.nodes)) for n, p in state.pools.items()
        },
        "gpus": {n: (g.node, g.capacity, g.allocated, g.workers) for n, g in state.gpus.items()},
        "workers": {k: (w.node, w.gpu_ids, w.request, w.limit) for k, w in state.workers.items()},
        "warnings": [str(w) for w in state.warnings],
    }


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), nodes=st.integers(min_value=1, max_value=60))
def test_dump_round_trip_of_generated_clusters(seed: int, nodes: int) -> None:
    x = validate_items(generate_objects(seed=seed, nodes=nodes))
    y = loads(dumps(x.objects))
    assert y == x
    assert figures(ClusterState.build(y)) == figures(ClusterState.build(x))


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(min_value=0, max_value=1000))
def test_generated_clusters_are_consistent(seed: int) -> None:
    state = ClusterState.build(validate_items(generate_objects(seed=seed, nodes=40)))
    assert state.warnings == []
    for pool in state.pools.values():  # what the generator reports == what the engine derives
        reported = pool.obj["status"]
        assert quantity_float(reported["totalTFlops"]) == pytest.approx(pool.capacity.tflops, rel=1e-12)
        assert quantity_float(reported["availableTFlops"]) == pytest.approx(pool.available.tflops, rel=1e-12)
        assert quantity_float(reported["availableVRAM"]) == pool.available.vram
        assert quantity_float(reported["virtualVRAM"]) == pool.virtual.vram
        assert quantity_float(reported["virtualAvailableVRAM"]) == pool.virtual_available.vram
