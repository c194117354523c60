"""kube-scheduler's default preemption over a packing (`engine.preempt`) and `+preempt` in a replay."""

from __future__ import annotations

from random import Random

import pytest

from tftui.engine.arrivals import Node, PolicyError, Task, packing_of, parse_trace_policy, ptask, run_arrivals
from tftui.engine.packing import Packing
from tftui.engine.preempt import QOS_PRIORITY, Preempter, candidates_wanted
from tftui.sources.trace import protocol_input, read_trace

HIGH = QOS_PRIORITY["high"]


def _packing(nodes: int, pods: list[tuple[str, int, int, int]]) -> Packing:
    """One-GPU nodes n0…; `pods` as (key, node, milli-GPUs, CPU milli) bound in that order."""
    pk = packing_of([Node(f"n{i}", 8000, 8000, 1, "T4") for i in range(nodes)])
    for key, node, milli, cpu in pods:
        pk.bind(key, ptask(Task(key, cpu, 0, 1, milli, None)), node, (0,))
    return pk


def _find(pk: Packing, milli: int, priorities: dict[str, int], started: dict[str, int] | None = None):  # type: ignore[no-untyped-def]
    task = ptask(Task("new", 0, 0, 1, milli, None))
    order = started if started is not None else {k: i for i, k in enumerate(pk.pods)}
    return Preempter(pk, Random(1)).find(task, HIGH, priorities, order)


def test_only_pods_of_lower_priority_are_victims() -> None:
    pk = _packing(2, [("low", 0, 600, 0), ("high", 1, 600, 0)])
    got = _find(pk, 1000, {"high": HIGH})
    assert got is not None and (got.node, got.victims, got.pdb_violations) == (0, ("low",), 0)
    assert pk.pods.keys() == {"low", "high"}  # the search leaves the packing as it was
    assert _find(_packing(1, [("high", 0, 600, 0)]), 1000, {"high": HIGH}) is None  # equal: never


def test_the_more_important_pod_is_given_back_first_so_the_younger_one_goes() -> None:
    # 400 + 400 on one GPU, 200 free: a 500 needs one of them gone; the older one is reprieved
    pk = _packing(1, [("old", 0, 400, 0), ("young", 0, 400, 0)])
    got = _find(pk, 500, {}, {"old": 0, "young": 5})
    assert got is not None and got.victims == ("young",)
    got = _find(pk, 500, {}, {"old": 9, "young": 5})
    assert got is not None and got.victims == ("old",)
    mid = _find(pk, 500, {"old": 5000}, {"old": 0, "young": 5})  # higher priority reprieved first
    assert mid is not None and mid.victims == ("young",)


def test_the_node_with_the_lowest_highest_victim_priority_then_the_fewest_victims() -> None:
    # n0: one victim of priority 5000; n1: two victims of priority 0 → n1 (lower highest priority)
    pk = _packing(2, [("mid", 0, 1000, 0), ("a", 1, 500, 0), ("b", 1, 500, 0)])
    got = _find(pk, 1000, {"mid": 5000})
    assert got is not None and got.node == 1 and set(got.victims) == {"a", "b"}
    # all of priority 0: n0 needs one victim, n1 two → n0
    got = _find(pk, 1000, {})
    assert got is not None and (got.node, got.victims) == (0, ("mid",))


def test_a_victim_whose_pdb_allows_no_disruption_is_avoided_where_another_node_can_do_without() -> None:
    pk = _packing(2, [("guarded", 0, 1000, 0), ("a", 1, 500, 0), ("b", 1, 500, 0)])
    pk.pods["guarded"].pdb = "pdb-g"
    pk.budgets["pdb-g"] = 0
    got = _find(pk, 1000, {})
    assert got is not None and got.node == 1 and got.pdb_violations == 0  # two victims, no violation
    alone = _packing(1, [("guarded", 0, 1000, 0)])
    alone.pods["guarded"].pdb = "pdb-g"
    alone.budgets["pdb-g"] = 0
    forced = _find(alone, 1000, {})
    assert forced is not None and forced.victims == ("guarded",) and forced.pdb_violations == 1


def test_no_candidate_where_evicting_every_lower_pod_still_leaves_no_room() -> None:
    # the GPU's other 500 is held by a pod of the same priority; CPU is also checked
    pk = _packing(1, [("low", 0, 500, 0), ("high", 0, 500, 0)])
    assert _find(pk, 1000, {"high": HIGH}) is None
    cpu = _packing(1, [("low", 0, 500, 7000)])  # freeing the GPU frees its 7000 milli-CPU too
    task = ptask(Task("new", 7500, 0, 1, 1000, None))
    got = Preempter(cpu, Random(1)).find(task, HIGH, {}, {"low": 0})
    assert got is not None and got.victims == ("low",)
    task = ptask(Task("new", 8500, 0, 1, 1000, None))  # more than the node has at all
    assert Preempter(cpu, Random(1)).find(task, HIGH, {}, {"low": 0}) is None


def test_candidates_wanted_is_kube_schedulers_ten_percent_at_least_a_hundred() -> None:
    assert [candidates_wanted(n) for n in (5, 100, 1000, 1213, 5000)] == [5, 100, 100, 121, 500]


def test_preempt_in_a_run_evicts_the_low_priority_pod_and_places_it_again_where_it_fits() -> None:
    """n0 and n1 (one GPU each): a low 600 lands on one, a high 600 on the other, then a high 1000
    fits nowhere: it evicts the low 600, which finds no room again (both GPUs hold 1000 and 600)."""
    nodes = [Node("n0", 8000, 8000, 1, "T4"), Node("n1", 8000, 8000, 1, "T4")]
    tasks = [
        Task("t0", 100, 100, 1, 600, None, creation=0, priority=0),
        Task("t1", 100, 100, 1, 600, None, creation=1, priority=HIGH),
        Task("t2", 100, 100, 1, 1000, None, creation=2, priority=HIGH),
    ]
    kw = {"seed": 3, "inflate": 1.1, "order": "creation"}
    plain = run_arrivals(nodes, tasks, parse_trace_policy("LowLoadFirst"), **kw)  # type: ignore[arg-type]
    pre = run_arrivals(nodes, tasks, parse_trace_policy("LowLoadFirst+preempt"), **kw)  # type: ignore[arg-type]
    assert (plain.failed, plain.allocated[-1]) == (1, 1200)
    assert (pre.failed, pre.preemptions, pre.evicted, pre.preempted) == (0, 1, 1, 1)
    assert pre.allocated == [600, 1200, 1600]  # 600 + 1000: the evicted 600 is arrived, not placed
    j = pre.to_json()
    assert (j["preemptions"], j["evicted_by_preemption"], j["preempted_tasks"]) == (1, 1, 1)
    # a low-priority task never preempts, and a victim that fits elsewhere is placed again
    nodes3 = [*nodes, Node("n2", 8000, 8000, 1, "T4")]
    tasks3 = [*tasks[:2], Task("t1b", 100, 100, 1, 400, None, creation=1, priority=HIGH), tasks[2]]
    kw3 = {**kw, "inflate": 0.87}  # 2600 of 3000 milli-GPUs: no task drawn on top
    again = run_arrivals(nodes3, tasks3, parse_trace_policy("LowLoadFirst+preempt"), **kw3)  # type: ignore[arg-type]
    assert (again.tasks, again.failed, again.preemptions, again.preempted) == (4, 0, 1, 0)
    assert again.allocated[-1] == 2600


def test_policy_flags_and_trace_priorities() -> None:
    p = parse_trace_policy("lowloadfirst+Admit+preempt")
    assert (p.placement, p.admit, p.preempt) == ("LowLoadFirst", True, True)
    assert not parse_trace_policy("FGD").preempt
    with pytest.raises(PolicyError, match=r"\+preempt"):
        parse_trace_policy("CompactFirst+drain")


def test_trace_qos_maps_to_upstreams_priority_classes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    nodes = tmp_path / "n.csv"
    pods = tmp_path / "p.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,8000,8000,1,T4\n")
    head = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    rows = [
        f"p{i},100,100,1,500,,{q},Running,0,10,0\n"
        for i, q in enumerate(("LS", "BE", "Burstable", "Guaranteed"))
    ]
    pods.write_text(head + "".join(rows))
    _, tasks = protocol_input(read_trace(nodes, pods))
    assert [t.priority for t in tasks] == [HIGH, 0, 0, HIGH]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_victims_kept_per_node_give_the_answers_of_a_search_that_forgets_them(seed: int) -> None:
    """A seeded pool where pods come and go, cordons flip and PDB budgets change, asked for the
    preemption of tasks that differ in GPU share, CPU and memory (several questions per state, as
    a replay asks): the kept victims and a search that forgets them before every question agree."""
    rng = Random(seed)
    pk = packing_of(
        [Node(f"n{i:02d}", rng.choice((8000, 16000)), rng.choice((16384, 65536)), rng.choice((1, 2)), "T4")
         for i in range(12)]
    )  # fmt: skip
    kept, afresh = Preempter(pk, Random(seed)), Preempter(pk, Random(seed))
    priorities: dict[str, int] = {}
    started: dict[str, int] = {}
    found = 0
    for step in range(400):
        roll = rng.random()
        if roll < 0.1 and pk.pods:
            key = rng.choice(sorted(pk.pods))
            pk.unbind(key)
            priorities.pop(key, None)
        elif roll < 0.13:
            n = pk.nodes[rng.randrange(len(pk.nodes))]
            n.unschedulable = not n.unschedulable
        elif roll < 0.16:
            pk.budgets[rng.choice(("pdb-a", "pdb-b"))] = rng.choice((0, 1, 2))
        elif roll < 0.6:
            t = ptask(Task(f"p{step}", rng.choice((500, 2000, 6000)), rng.choice((1024, 8192)), 1,
                           rng.choice((190, 250, 500, 810, 1000)), None))  # fmt: skip
            choice = pk.place_mode(t, "LowLoadFirst")
            if choice is not None:
                pk.bind(t.key, t, *choice, pdb=rng.choice((None, None, "pdb-a", "pdb-b")))
                started[t.key] = step
                if rng.random() < 0.3:
                    priorities[t.key] = rng.choice((5000, HIGH))
        task = ptask(Task("new", rng.choice((500, 2000, 6000, 9000)), rng.choice((1024, 8192, 30000)), 1,
                          rng.choice((250, 500, 810, 1000)), None))  # fmt: skip
        prio = rng.choice((5000, HIGH))
        if rng.random() < 0.8 and pk.place_mode(task, "LowLoadFirst") is not None:
            continue  # callers ask only for a pod that fits nowhere (a few are asked all the same)
        afresh._victims.clear()
        a = kept.find(task, prio, priorities, started)
        b = afresh.find(task, prio, priorities, started)
        assert a == b, f"step {step}"
        found += a is not None
    assert found > 20  # preemptions were found, not only refusals


def _run(policy: str, rows: list[tuple[int, int]], nodes: int, inflate: float):  # type: ignore[no-untyped-def]
    """One-GPU nodes; `rows` as (milli-GPUs, priority) arriving in that order."""
    ns = [Node(f"n{i}", 64000, 64000, 1, "T4") for i in range(nodes)]
    tasks = [Task(f"t{i}", 100, 100, 1, m, None, creation=i, priority=p) for i, (m, p) in enumerate(rows)]
    return run_arrivals(ns, tasks, parse_trace_policy(policy), seed=3, inflate=inflate, order="creation")


def test_evict_takes_the_node_whose_victims_hold_the_least_share_and_places_them_again() -> None:
    """LowLoadFirst puts a low 810 on n0, low 200 and 300 on n1, a high 500 on n2; a high 1000 fits
    nowhere. kube-scheduler's choice (+preempt) is n0 (one victim): the 810 finds no room again.
    +evict takes n1 (500 evicted, not 810): the 200 and the 300 both fit on n2 again."""
    rows = [(810, 0), (200, 0), (500, HIGH), (300, 0), (1000, HIGH)]
    kube = _run("LowLoadFirst+preempt", rows, 3, 0.94)
    own = _run("LowLoadFirst+evict", rows, 3, 0.94)
    assert (kube.tasks, kube.preemptions, kube.evicted, kube.preempted, kube.allocated[-1]) == (
        5,
        1,
        1,
        1,
        2000,
    )
    assert (own.tasks, own.preemptions, own.evicted, own.preempted, own.allocated[-1]) == (5, 1, 2, 0, 2810)


def test_evict_never_breaks_a_pdb_and_comes_after_the_moves() -> None:
    # a victim whose PDB allows no disruption: kube-scheduler evicts it when nothing else helps,
    # tftui's eviction does not
    pk = _packing(1, [("guarded", 0, 1000, 0)])
    pk.pods["guarded"].pdb = "pdb-g"
    pk.budgets["pdb-g"] = 0
    task = ptask(Task("new", 0, 0, 1, 1000, None))
    assert Preempter(pk, Random(1)).find(task, HIGH, {}, {"guarded": 0}) is not None
    assert Preempter(pk, Random(1), least_share=True).find(task, HIGH, {}, {"guarded": 0}) is None
    # 600, 600, 300 spread over three GPUs, then a high 1000: kube-scheduler preempts before tftui
    # sees the pod pending; tftui's own policy moves the 300 first and evicts nobody
    rows = [(600, 0), (600, 0), (300, 0), (1000, HIGH)]
    kube = _run("LowLoadFirst+admit+preempt", rows, 3, 0.84)
    own = _run("LowLoadFirst+admit+evict", rows, 3, 0.84)
    assert (kube.preemptions, kube.moves) == (1, 0)
    assert (own.preemptions, own.moves, own.failed, own.allocated[-1]) == (0, 1, 0, 2500)
    with pytest.raises(PolicyError, match=r"\+evict"):
        parse_trace_policy("LowLoadFirst+preempt+evict")
    assert parse_trace_policy("LowLoadFirst+admit+Evict").evict
