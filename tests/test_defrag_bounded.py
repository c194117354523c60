"""The defrag simulation's bounded search (`defragsim._simulate` tries the targets best bound first
and stops early) against the exhaustive loop it replaced: every target in budget order, the first of
the highest score wins, every rejection reported in budget order."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import timedelta

import pytest

from tests.defrag_support import cfg_of
from tftui.engine.defragconfig import _SHOW
from tftui.engine.defragindex import _Ctx
from tftui.engine.defragsim import (
    _book,
    _budget,
    _simulate,
    _Simulation,
    _Target,
    _try_target,
    _unmovable_summary,
)
from tftui.engine.fit import Request
from tftui.engine.nodefit import node_fit, pod_requests
from tftui.engine.state import ClusterState, WorkerView
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects


def _exhaustive(ctx: _Ctx, source: str, source_util: float, workers: Sequence[WorkerView]) -> _Simulation:
    shared, excluded = _budget(ctx, source)
    own: dict[str, _Target] = {}
    sim = _Simulation({})
    room = node_fit(ctx.state)
    for w in sorted(
        workers, key=lambda w: (-w.request.tflops * w.gpu_count, -w.request.vram * w.gpu_count, w.key)
    ):
        req = Request.of_worker(w)
        pod = pod_requests(w.obj)
        targets = [own.get(t.node, t) for t in shared]
        need_t = (req.tflops or 0.0) if req.compute_percent is None else 0.0
        best = None
        rejects = []
        for t in targets:
            got = _try_target(ctx, t, req, pod, room, source_util, need_t)
            if isinstance(got, list):
                score = sum(t.rank(g) for g in got)
                if best is None or score > best[0]:
                    best = (score, t, got)
            else:
                rejects.append(got)
        if best is None:
            sim.failed = w
            shown = [r if isinstance(r, str) else r.filter_reject(req) for r in rejects[:_SHOW]]
            sim.summary = _unmovable_summary(w, targets, shown, excluded)
            return sim
        _book(sim, own, room, best[1], best[2], req, w, pod)  # booking is shared: the choice is compared
    return sim


@functools.cache
def _state(seed: int, nodes: int) -> ClusterState:
    return ClusterState.build(generate_objects(seed, nodes, DEFAULT_NOW))


@pytest.mark.parametrize(("seed", "nodes"), [(7, 40), (3, 60), (11, 120)])
def test_bounded_search_equals_the_exhaustive_loop(seed: int, nodes: int) -> None:
    state = _state(seed, nodes)
    now = DEFAULT_NOW + timedelta(days=1)
    compared = placed = 0
    for pool in sorted(state.pools):
        for max_workers in (0, 3):
            ctx = _Ctx.build(state, pool, cfg_of(), now, max_workers)
            for node in state.nodes_of(pool):
                workers = ctx.active(node.name)
                if not workers:
                    continue
                for source_util in (0.0, 30.0):
                    want = _exhaustive(ctx, node.name, source_util, workers)
                    got = _simulate(ctx, node.name, source_util, workers)
                    assert (got.placements, got.failed, got.summary) == (
                        want.placements,
                        want.failed,
                        want.summary,
                    )
                    compared += 1
                    placed += got.failed is None
    assert compared > 20 and 0 < placed < compared  # both outcomes were compared
