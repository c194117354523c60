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
from tftui.engine.fit import Request, reject_reason
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
