"""`ClusterState.build(..., previous=...)` (engine.incremental) gives exactly the full build's state:
checked on every state a what-if run with churn, defrag evictions and node releases builds."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tftui.engine import incremental
from tftui.engine.state import ClusterState
from tftui.runtime.whatif import SimConfig, parse_policy, simulate
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects


def assert_same_state(inc: ClusterState, full: ClusterState) -> None:
    """Equal views, the same dict and list order, and views over the very same objects."""
    assert inc.warnings == full.warnings
    for name in ("workers", "gpus", "nodes", "workloads", "pools", "templates", "claims", "profiles"):
        a, b = getattr(inc, name), getattr(full, name)
        assert list(a) == list(b), name
        for key in b:
            assert a[key] == b[key], f"{name}[{key}]"
    for name in ("nodes", "gpus", "workers", "pools"):
        a, b = getattr(inc, name), getattr(full, name)
        assert all(a[k].obj is b[k].obj for k in b), name
    assert all(inc.nodes[n].node_obj is full.nodes[n].node_obj for n in full.nodes)
    assert all(inc.workloads[k].obj is full.workloads[k].obj for k in full.workloads)
    assert inc.clusters == full.clusters and inc.pdbs == full.pdbs
    assert {k: list(v) for k, v in inc.gpus_by_pool_label.items()} == full.gpus_by_pool_label
    assert inc.compaction_sums == full.compaction_sums
    assert inc.snapshot.objects == full.snapshot.objects
    assert inc == full


@pytest.mark.parametrize("policy", ["CompactFirst+defrag", "LowLoadFirst+defrag=60"])
def test_incremental_state_equals_the_full_build_at_every_step(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = incremental.update_state
    runs = {"checked": 0, "incremental": 0}
    run = incremental._Update.run

    def counted(self: Any) -> ClusterState:
        st = run(self)
        runs["incremental"] += 1
        return st

    def checked(prev: ClusterState, source: Any) -> ClusterState:
        objs = list(source)
        inc = original(prev, objs)
        assert_same_state(inc, ClusterState.build(objs))
        runs["checked"] += 1
        return inc

    monkeypatch.setattr(incremental, "update_state", checked)
    monkeypatch.setattr(incremental._Update, "run", counted)
    objects = generate_objects(7, 60, DEFAULT_NOW)
    cfg = SimConfig(duration=timedelta(days=2), churn=0.5, seed=11)
    res = simulate(objects, parse_policy(policy), DEFAULT_NOW, cfg)
    # the run changed what the incremental path must follow, and it did follow it
    assert res.arrivals > 20 and res.departures > 20
    assert res.evictions > 5 and res.releases > 0
    assert runs["checked"] > 100
    assert runs["incremental"] > 0.9 * runs["checked"]  # almost never fell back to the full build
