"""The placement index and the admission search's caches give the answers of a search without them.

`Packing.place_mode` looks only at the nodes whose free figures could take a task (an array per
node, kept by every bind and unbind), `Admitter` keeps per node its move-count bounds, move sets and
movable workers' shapes while the node and the PDB budgets are unchanged (and passes over a node
none of whose movable workers can be placed), and `Preempter` keeps each node's victims. All are
speed only: these tests replay seeded random pools — arrivals, departures, cordons, PDBs with small
budgets, do-not-disrupt pods — in lockstep through the cached code and through a search that
forgets everything before each question, and require the same choice, the same moves and the same
packing at every step; and whole `+admit+preempt` runs of small generated traces, with the caches
and computed afresh, give the same records.
"""

from __future__ import annotations

from random import Random
from typing import Any

import pytest

from tftui.engine import packing as packing_mod
from tftui.engine.admit import Admitter, _shape
from tftui.engine.arrivals import Node, Task, packing_of, parse_trace_policy, ptask, run_arrivals
from tftui.engine.fit import MODES
from tftui.engine.packing import Packing, PNode, PTask
from tftui.engine.preempt import QOS_PRIORITY, Preempter

HIGH = QOS_PRIORITY["high"]


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
    a._movers.clear()


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


def _from_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every admission search and preemption search computed as without their caches: no bound,
    move set, worker shape or victim list kept between questions, no node skipped as hopeless, and
    the placeable filter asked pod by pod as a plain `all`."""
    find = Preempter.find

    def find_afresh(self: Preempter, *args: Any, **kw: Any) -> Any:
        self._victims.clear()
        return find(self, *args, **kw)

    def subsets_plain(
        self: Admitter,
        task: PTask,
        node: PNode,
        k: int,
        movable: dict[Any, bool],
        chain: bool = False,
        shape: Any = None,
    ) -> list[tuple[str, ...]]:
        combos = self._combos_now(task, node, k)
        if chain or not combos:
            return list(combos)
        pods = self.pk.pods
        return [
            c for c in combos if all(self._placeable(_shape(pods[p].task), pods[p].task, movable) for p in c)
        ]

    def order_plain(self: Admitter, task: PTask, shape: Any) -> list[tuple[int, int]]:
        return sorted(
            (b, n.idx)
            for n in self.pk.nodes
            if (b := self._bound_now(task, n)) is not None and b <= self.max_moves
        )

    monkeypatch.setattr(Preempter, "find", find_afresh)
    monkeypatch.setattr(Admitter, "_subsets", subsets_plain)
    monkeypatch.setattr(Admitter, "_hopeless", lambda self, node, movable: False)
    monkeypatch.setattr(Admitter, "_bound", lambda self, task, node, shape=None: self._bound_now(task, node))
    monkeypatch.setattr(Admitter, "_order", order_plain)


def _trace(rng: Random) -> tuple[list[Node], list[Task]]:
    nodes = [
        Node(f"n{i:02d}", rng.choice((8000, 16000, 32000)), rng.choice((32768, 65536)), rng.choice((1, 2, 4)),
             rng.choice(("T4", "A10")))
        for i in range(20)
    ]  # fmt: skip
    tasks = []
    for i in range(90):
        count = rng.choice((0, 1, 1, 1, 1, 1, 2))
        milli = 1000 if count > 1 else rng.choice((100, 190, 250, 500, 810, 810, 1000))
        pick = rng.choice((None, None, None, "T4", "A10"))
        tasks.append(
            Task(f"t{i:03d}", rng.choice((500, 1000, 4000, 6000)), rng.choice((1024, 4096, 16384)), count,
                 milli, None if pick is None else frozenset({pick}), priority=rng.choice((0, 0, HIGH)))
        )  # fmt: skip
    return nodes, tasks


@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("victims", ["preempt", "evict"])
def test_admit_preempt_run_with_the_caches_equals_the_run_computed_afresh(
    seed: int, mode: str, victims: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`+admit+preempt` and `+admit+evict` (whose evictions come after a failed admission search,
    so most searches follow an eviction)."""
    nodes, tasks = _trace(Random(seed))
    policy = parse_trace_policy(f"{mode}+admit+{victims}")
    cached = run_arrivals(nodes, tasks, policy, seed=seed)
    with monkeypatch.context() as m:
        _from_scratch(m)
        afresh = run_arrivals(nodes, tasks, policy, seed=seed)
    figures = ("tasks", "failed", "moves", "admitted", "preemptions", "evicted", "preempted", "searches")
    assert [getattr(cached, f) for f in figures] == [getattr(afresh, f) for f in figures]
    assert (cached.arrived, cached.allocated) == (afresh.arrived, afresh.allocated)
    assert cached.preemptions > 0 and cached.admitted > 0  # both searches did run
