"""The placement index and the admission search's caches give the answers of a search without them.

`Packing.place_mode` looks only at the nodes whose free figures could take a task (an array per
node, kept by every bind and unbind), and `Admitter` keeps per node its move-count bounds and move
sets while the node and the PDB budgets are unchanged. Both are speed only: these tests replay
seeded random pools — arrivals, departures, cordons, PDBs with small budgets, do-not-disrupt pods —
in lockstep through the cached code and through a search that forgets everything before each
question, and require the same choice, the same moves and the same packing at every step.
"""

from __future__ import annotations

from random import Random

import pytest

from tftui.engine import packing as packing_mod
from tftui.engine.admit import Admitter
from tftui.engine.arrivals import Node, Task, packing_of, ptask
from tftui.engine.fit import MODES
from tftui.engine.packing import Packing, PTask


def _pool(rng: Random) -> Packing:
    nodes = [
        Node(f"n{i:02d}", rng.choice((8000, 16000, 32000)), rng.choice((32768, 65536)), rng.choice((1, 2, 4)),
             rng.choice(("T4", "A10")))
        for i in range(14)
    ]  # fmt: skip
    return packing_of(nodes)


def _task(rng: Random, key: str) -> PTask:
    count = rng.choice((0, 1, 1, 1, 1, 2))
    milli = 1000 if count > 1 else rng.choice((100, 200, 250, 300, 470, 500, 650, 810, 1000))
    pick = rng.choice((None, None, "T4", "A10"))
    model = None if pick is None else frozenset({pick})
    return ptask(
        Task(key, rng.choice((500, 1000, 4000)), rng.choice((1024, 4096, 16384)), count, milli, model)
    )


def _state(pk: Packing) -> list[tuple[str, int, tuple[int, ...]]]:
    return sorted((k, p.node, p.gpus) for k, p in pk.pods.items())


def _forget(a: Admitter) -> None:
    a._bounds.clear()
    a._combo_cache.clear()


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_admission_with_its_caches_equals_a_search_that_forgets_them(seed: int) -> None:
    rng = Random(seed)
    mode = MODES[seed % len(MODES)]
    pools = [_pool(Random(seed)), _pool(Random(seed))]
    admitters = [Admitter(pk, lambda t, ex, pk=pk: pk.place_mode(t, mode, ex)) for pk in pools]  # type: ignore[misc]
    admissions = 0
    for step in range(260):
        roll = rng.random()
        if roll < 0.12 and pools[0].pods:  # a departure
            key = rng.choice(sorted(pools[0].pods))
            for pk in pools:
                pk.unbind(key)
            continue
        if roll < 0.15:  # a cordon flips (no bind or unbind touches the node)
            i = rng.randrange(len(pools[0].nodes))
            for pk in pools:
                pk.nodes[i].unschedulable = not pk.nodes[i].unschedulable
            continue
        task = _task(rng, f"t{step}")
        blocked = "do-not-disrupt" if rng.random() < 0.1 else None
        pdb = rng.choice((None, None, "pdb-a", "pdb-b"))
        answers = []
        for pk, adm in zip(pools, admitters, strict=True):
            if pk is pools[1]:
                _forget(adm)
            choice = pk.place_mode(task, mode)
            moves: tuple[tuple[str, str, str], ...] = ()
            if choice is None:
                got = adm.admit(task)
                if got is not None:
                    choice, admission = got
                    moves = tuple((m.pod, m.source, m.target) for m in admission.moves)
            if choice is not None:
                pk.bind(task.key, task, *choice, blocked=blocked, pdb=pdb)
            answers.append((choice, moves, _state(pk), dict(pk.budgets)))
        assert answers[0] == answers[1], f"step {step}"
        admissions += bool(answers[0][1])
        if step == 60:  # from here PDBs allow one or two disruptions: admissions spend them
            for pk in pools:
                pk.budgets.update({"pdb-a": 1, "pdb-b": 2})
    assert admissions > 0  # the replay did exercise move sets, not only plain placements


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_placement_over_the_candidate_index_equals_walking_the_whole_ranking(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = Random(seed)
    pk = _pool(Random(seed))
    for step in range(300):
        if rng.random() < 0.2 and pk.pods:
            pk.unbind(rng.choice(sorted(pk.pods)))
            continue
        task = _task(rng, f"t{step}")
        mode = rng.choice(MODES)
        exclude = {rng.randrange(len(pk.nodes))} if rng.random() < 0.3 else set()
        if rng.random() < 0.05:
            n = pk.nodes[rng.randrange(len(pk.nodes))]
            n.unschedulable = not n.unschedulable
        if not task.count:  # kube-scheduler's scores over all nodes at once = node by node
            assert pk.place_kube(task, exclude) == pk._place_kube_walk(task, exclude), f"step {step}"
        indexed = pk.place_mode(task, mode, exclude)
        monkeypatch.setattr(packing_mod, "FEW", -1)  # never the index: the whole ranking walked
        walked = pk.place_mode(task, mode, exclude)
        monkeypatch.setattr(packing_mod, "FEW", 64)
        assert indexed == walked, f"step {step}"
        assert pk.maxima() == (
            max(n.max_t for n in pk.nodes),
            max(n.max_v for n in pk.nodes),
            max(n.cpu for n in pk.nodes),
            max(n.mem for n in pk.nodes),
        )
        if indexed is not None:
            pk.bind(task.key, task, *indexed)


def test_one_search_sees_a_pdb_budget_raised_after_it_failed() -> None:
    """Three 1-GPU nodes: a 400 + 400 (both do-not-disrupt), b 600 under a PDB that allows no
    disruption, c 300 (do-not-disrupt). A 1000 finds no move set; once the PDB allows one, the same
    search (its answers kept per node) moves b's worker to c."""
    pk = packing_of([Node("a", 10, 10, 1, "T4"), Node("b", 10, 10, 1, "T4"), Node("c", 10, 10, 1, "T4")])
    for key, node, milli in (("a1", 0, 400), ("a2", 0, 400), ("b1", 1, 600), ("c1", 2, 300)):
        pk.bind(key, ptask(Task(key, 0, 0, 1, milli, None)), node, (0,))
    for key in ("a1", "a2", "c1"):
        pk.pods[key].blocked = "do-not-disrupt"
    pk.pods["b1"].pdb = "pdb-b"
    pk.budgets["pdb-b"] = 0
    admitter = Admitter(pk, lambda t, ex: pk.place_mode(t, "CompactFirst", ex))
    big = ptask(Task("big", 0, 0, 1, 1000, None))
    assert admitter.admit(big) is None
    pk.budgets["pdb-b"] = 1
    got = admitter.admit(big)
    assert got is not None and [(m.pod, m.target) for m in got[1].moves] == [("b1", "c")]
    assert pk.budgets["pdb-b"] == 0
