"""Defrag's PDB index of a state derived incrementally is its basis's, with the PDBs a status pass
replaced put in: on every state of a churny what-if run it equals the index built afresh, and a
changed selector (or a PDB added) builds it afresh."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from tftui.engine import defragindex, incremental
from tftui.engine.defragindex import _Index, _pdb_index
from tftui.engine.state import ClusterState
from tftui.runtime.whatif import SimConfig, parse_policy, simulate
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects


def test_the_carried_index_equals_a_fresh_one_on_every_state(monkeypatch: pytest.MonkeyPatch) -> None:
    real = defragindex._carried_pdbs
    seen = {"same": 0, "swapped": 0, "fresh": 0}

    def checked(
        pdbs: list[dict[str, Any]], before: list[dict[str, Any]] | None, index: Any
    ) -> defragindex._PdbIndex | None:
        got = real(pdbs, before, index)
        if got is None:
            seen["fresh"] += 1
            return None
        assert got == _pdb_index(pdbs)
        want_pairs, want_scan = _pdb_index(pdbs)
        for ns, d in want_pairs.items():  # the very dicts of this state, not the basis's
            for pair, lst in d.items():
                assert all(a[1] is b[1] for a, b in zip(got[0][ns][pair], lst, strict=True))
        for ns, lst in want_scan.items():
            assert all(a[1] is b[1] for a, b in zip(got[1][ns], lst, strict=True))
        seen["same" if got is index else "swapped"] += 1
        return got

    monkeypatch.setattr(defragindex, "_carried_pdbs", checked)
    objects = generate_objects(7, 40, DEFAULT_NOW)
    simulate(
        objects, parse_policy("CompactFirst+defrag"), DEFAULT_NOW, SimConfig(timedelta(hours=23), churn=2.0)
    )
    assert seen["swapped"] > 0 and seen["same"] + seen["swapped"] > seen["fresh"]


def _pdb(objs: list[dict[str, Any]]) -> int:
    return next(i for i, o in enumerate(objs) if o["kind"] == "PodDisruptionBudget")


def test_a_changed_selector_builds_the_index_afresh() -> None:
    objs = generate_objects(5, 20, DEFAULT_NOW)
    first = ClusterState.build(objs)
    _Index(first).pdbs  # noqa: B018 - built and kept for the states derived from this one
    objs = list(objs)
    i = _pdb(objs)
    status_only = {**objs[i], "status": {"disruptionsAllowed": 0}}
    objs[i] = status_only
    second = incremental.update_state(first, objs)
    idx = _Index(second)
    assert idx.pdbs == _pdb_index(second.pdbs)
    assert any(p is status_only for lst in idx.pdbs[0].values() for v in lst.values() for _, p in v) or any(
        p is status_only for v in idx.pdbs[1].values() for _, p in v
    )
    moved = copy.deepcopy(objs[i])
    moved["spec"]["selector"] = {"matchLabels": {"app": "elsewhere"}}
    objs[i] = moved
    third = incremental.update_state(second, objs)
    assert defragindex._carried_pdbs(third.pdbs, second.pdbs, idx.pdbs) is None
    assert _Index(third).pdbs == _pdb_index(third.pdbs)
