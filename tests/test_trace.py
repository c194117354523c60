"""The trace what-if on small traces the tests write: import, node fit, the paper's protocol, FGD,
defrag-to-admit, the placement modes against `placement.place`, and sweeps (processes, Dask)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from tftui.cli import main
from tftui.engine.admit import Admitter
from tftui.engine.arrivals import (
    ArrivalResult,
    Node,
    Task,
    arrival_order,
    packing_of,
    parse_trace_policy,
    ptask,
    run_arrivals,
)
from tftui.engine.fgd import FGD, TaskClass, fragmentation, workload_classes
from tftui.engine.fit import MODES, Request
from tftui.engine.nodefit import node_fit, pod_requests
from tftui.engine.packing import Packing, PTask, task_of_worker
from tftui.engine.placement import apply_placement, place
from tftui.engine.state import ClusterState, Res
from tftui.model.dump import validate_items
from tftui.runtime.sweep import Run, summarize, sweep
from tftui.sources.trace import read_trace, task_objects, trace_objects

NODES = """sn,cpu_milli,memory_mib,gpu,model
n-a,16000,65536,2,T4
n-b,16000,65536,2,T4
n-c,8000,32768,1,V100M32
"""
PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p-0,4000,8192,1,500,,LS,Running,0,100,0
p-1,4000,8192,1,1000,,BE,Running,10,200,10
p-2,2000,4096,0,0,,LS,Running,20,300,20
p-3,4000,8192,2,1000,,LS,Running,30,400,30
p-4,1000,1024,1,250,V100M32,BE,Pending,40,500,
"""


def _write(tmp_path: Path, nodes: str = NODES, pods: str = PODS) -> tuple[str, str]:
    n, p = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    n.write_text(nodes)
    p.write_text(pods)
    return str(n), str(p)


# -- import ---------------------------------------------------------------------------------------


def test_import_reads_nodes_and_tasks_into_tensorfusion_objects(tmp_path: Path) -> None:
    tr = read_trace(*_write(tmp_path))
    assert [n.name for n in tr.nodes] == ["n-a", "n-b", "n-c"]
    assert tr.gpu_milli == 5000
    p4 = tr.tasks[4]
    assert (p4.gpu_spec, p4.scheduled, p4.milli_total) == (("V100M32",), None, 250)
    objs = trace_objects(tr, mode="CompactFirst")
    wl, pod = task_objects(tr.tasks[0], tr.models())
    assert wl is not None
    _, cpu_pod = task_objects(tr.tasks[2], tr.models())
    st = ClusterState.build(validate_items([*objs, wl, pod, cpu_pod]).objects)
    assert st.warnings == []
    assert sorted(st.pools["trace"].nodes) == ["n-a", "n-b", "n-c"]
    assert st.pools["trace"].gpu_count == 5
    w = st.workers["trace/p-0-tf-worker-0"]
    assert w.phase == "Pending" and w.gpu_count == 1
    # the mapping: half of one GPU's compute, half of the smallest VRAM of the cluster's models (16 GiB)
    req = Request.of_worker(w)
    assert (req.compute_percent, req.vram) == (50.0, 8 * 1024**3)
    assert pod_requests(pod).cpu == 4000.0
    assert "trace/p-2" not in st.workers  # CPU-only: a plain pod
    m = tr.mapping()
    assert m["models"]["T4"]["tflops"] == 65.0 and "gpu_milli/1000" in m["gpu_share"]
    _, multi = task_objects(tr.tasks[3], tr.models())
    assert multi["metadata"]["annotations"]["tensor-fusion.ai/gpu-count"] == "2"


@pytest.mark.parametrize(
    ("which", "text", "error"),
    [
        (
            "nodes",
            NODES.replace("n-b,16000", "n-b,16k"),
            "nodes.csv: row 3: column cpu_milli: not an integer: '16k'",
        ),
        ("nodes", NODES.replace("V100M32", "X9"), "nodes.csv: row 4: column model: unknown GPU model 'X9'"),
        ("nodes", NODES.replace("sn,", "name,"), "nodes.csv: row 1: column sn: missing from the header"),
        (
            "pods",
            PODS.replace("p-3,4000,8192,2,1000", "p-3,4000,8192,2,500"),
            "pods.csv: row 5: column gpu_milli",
        ),
        (
            "pods",
            PODS.replace("p-1,4000,8192,1,1000", "p-1,4000,8192,1,1200"),
            "pods.csv: row 3: column gpu_milli: must be 0..1000",
        ),
        (
            "pods",
            PODS.replace("0,100,0", "50,10,0"),
            "pods.csv: row 2: column deletion_time: 10 is before creation_time 50",
        ),
    ],
)
def test_a_bad_row_is_one_line_naming_file_row_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str, text: str, error: str
) -> None:
    nodes, pods = (text, PODS) if which == "nodes" else (NODES, text)
    n, p = _write(tmp_path, nodes, pods)
    assert main(["simulate", "--trace-nodes", n, "--trace-pods", p, "--policy", "FGD"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and error in err


# -- the protocol ---------------------------------------------------------------------------------


def _tasks(specs: list[tuple[int, int, int, int]]) -> list[Task]:
    return [Task(f"t{i:02d}", c, m, n, milli, None) for i, (c, m, n, milli) in enumerate(specs)]


def test_inflation_with_a_seed_is_reproducible_and_stops_before_passing_the_target() -> None:
    tasks = _tasks([(1000, 1000, 1, 300), (1000, 1000, 1, 700), (1000, 1000, 1, 1000), (1000, 1000, 0, 0)])
    cap = 4000  # demand of the list: 2000 milli-GPUs
    one = arrival_order(tasks, cap, seed=42, inflate=1.3)
    assert one == arrival_order(tasks, cap, seed=42, inflate=1.3)
    assert [t.name for t in one] != [t.name for t in arrival_order(tasks, cap, seed=43, inflate=1.3)]
    assert sorted(t.name for t in one[:4]) == ["t00", "t01", "t02", "t03"]  # the list itself first
    demand = sum(t.demand for t in one)
    assert demand <= 1.3 * cap and all(
        t.name.split("-tuned-")[0] in {"t00", "t01", "t02", "t03"} for t in one
    )
    assert demand > 1.3 * cap - 1000  # the draw that stopped it would have passed the target
    assert [t.name for t in arrival_order(tasks, cap, 1, 1.3, order="creation")[:4]] == [
        "t00",
        "t01",
        "t02",
        "t03",
    ]
    trimmed = arrival_order(tasks, cap, seed=42, inflate=0.25)
    assert sum(t.demand for t in trimmed) <= 1000


def test_the_curve_is_the_mean_of_records_by_rounded_arrived_percent() -> None:
    r = ArrivalResult("x", 1, capacity=1000)
    r.arrived = [4, 6, 10, 500, 1000]  # 0.4 % → 0, 0.6 % → 1, 1 % → 1, 50 %, 100 %
    r.allocated = [4, 6, 6, 400, 900]
    assert r.curve() == pytest.approx({0: 0.4, 1: 0.6, 50: 40.0, 100: 90.0})
    assert r.to_json()["allocated_pct_at"] == {"100": 90.0, "130": None}


def test_a_run_counts_failed_tasks_as_arrived_and_records_after_every_task() -> None:
    nodes = [Node("a", 8000, 8000, 1, "T4")]
    tasks = _tasks([(1000, 1000, 1, 600), (1000, 1000, 1, 600)])
    r = run_arrivals(nodes, tasks, parse_trace_policy("CompactFirst"), seed=1, inflate=1.2)
    assert r.tasks == 2 and r.failed == 1  # the second 600 does not fit the 400 left
    assert r.arrived == [600, 1200] and r.allocated == [600, 600]
    assert r.curve() == {60: 60.0, 120: 60.0}


def test_cpu_fit_refuses_a_node_whose_cpu_is_taken() -> None:
    nodes = [Node("a", 4000, 64000, 2, "T4"), Node("b", 4000, 64000, 2, "T4")]
    pk = packing_of(nodes)
    big = ptask(Task("cpu-hog", 4000, 1000, 0, 0, None))
    pk.bind("cpu-hog", big, 0, ())
    gpu_task = ptask(Task("g", 1000, 1000, 1, 500, None))
    assert pk.node_refusal(gpu_task, pk.nodes[0]) == "cpu"
    for mode in MODES:
        got = pk.place_mode(gpu_task, mode)
        assert got is not None and pk.nodes[got[0]].name == "b"
    pk.bind("hog2", big, 1, ())
    assert all(pk.place_mode(gpu_task, m) is None for m in MODES)


# -- FGD ------------------------------------------------------------------------------------------


def test_fgd_picks_the_gpu_that_grows_fragmentation_least_by_hand() -> None:
    """Workload: half of the tasks want 500 milli, half 1000. Node a has GPUs free (1000, 500),
    node b (1000, 1000). A 500-milli task:
    - on a's 500 GPU: a → (1000, 0): fragments 0 for both classes; before (1000, 500): the 1000 class
      cannot use the 500 (weight 1 × 500) → growth −500
    - on a's 1000 GPU: a → (500, 500): 500 class 0, 1000 class 1000 → growth +500
    - on b: (500, 1000): the 1000 class loses 500 → growth +500
    so FGD takes a's half-free GPU."""
    classes = workload_classes([(0, 0, 1, 500, None), (0, 0, 1, 1000, None)])
    assert [c.weight for c in classes] == [1, 1]
    assert fragmentation(1, 1, "T4", [1000, 500], classes) == 500
    assert fragmentation(1, 1, "T4", [1000, 0], classes) == 0
    assert fragmentation(1, 1, "T4", [500, 1000], classes) == 500
    pk = packing_of([Node("a", 10, 10, 2, "T4"), Node("b", 10, 10, 2, "T4")])
    pk.bind("x", ptask(Task("x", 0, 0, 1, 500, None)), 0, (1,))
    fgd = FGD(pk, classes)
    assert fgd.place(ptask(Task("t", 0, 0, 1, 500, None))) == (0, (1,))
    # a CPU-only class counts every free GPU as a fragment (it can use none)
    assert fragmentation(1, 1, "T4", [300], [TaskClass(0, 0, 0, 0, None, 2)]) == 600


def test_fgd_refuses_only_when_no_node_fits() -> None:
    pk = packing_of([Node("a", 1000, 1000, 1, "T4")])
    fgd = FGD(pk, workload_classes([(0, 0, 1, 1000, None)]))
    assert fgd.place(ptask(Task("t", 2000, 0, 1, 100, None))) is None  # CPU
    assert fgd.place(ptask(Task("t", 0, 0, 1, 100, frozenset({"A10"})))) is None  # model
    assert fgd.place(ptask(Task("t", 0, 0, 1, 100, None))) == (0, (0,))


# -- defrag to admit ------------------------------------------------------------------------------


def _admit_packing() -> Packing:
    """Three 1-GPU nodes. a: two 400s (a1, a2); b: one 600 (b1); c: one 300 (c1).
    A 1000 task fits nowhere. One move suffices: b1 (600) → a? no (200 left); c1 (300) → a (200)? no;
    moving b1 to c (700 free) empties b: one move. Two moves would empty a (a1 → c, a2 → …)."""
    pk = packing_of([Node("a", 10, 10, 1, "T4"), Node("b", 10, 10, 1, "T4"), Node("c", 10, 10, 1, "T4")])
    for key, node, milli in (("a1", 0, 400), ("a2", 0, 400), ("b1", 1, 600), ("c1", 2, 300)):
        pk.bind(key, ptask(Task(key, 0, 0, 1, milli, None)), node, (0,))
    return pk


def test_admit_finds_the_smallest_move_set_and_carries_it_out() -> None:
    pk = _admit_packing()
    admitter = Admitter(pk, lambda t, ex: pk.place_mode(t, "CompactFirst", ex))
    task = ptask(Task("big", 0, 0, 1, 1000, None))
    assert pk.place_mode(task, "CompactFirst") is None
    got = admitter.admit(task)
    assert got is not None
    choice, adm = got
    assert [(m.pod, m.source, m.target) for m in adm.moves] == [("b1", "b", "c")]
    assert pk.nodes[choice[0]].name == "b" and adm.node == "b"
    assert pk.pods["b1"].node == 2  # carried out in the packing
    pk.bind("big", task, *choice)
    assert pk.nodes[1].gpus[0].free_t == 0


def test_admit_never_moves_a_pdb_blocked_pod() -> None:
    pk = _admit_packing()
    pk.pods["b1"].pdb = "pdb-b"
    pk.budgets["pdb-b"] = 0  # b1's PDB allows no disruption
    pk.pods["c1"].blocked = "do-not-disrupt"
    admitter = Admitter(pk, lambda t, ex: pk.place_mode(t, "CompactFirst", ex))
    got = admitter.admit(ptask(Task("big", 0, 0, 1, 1000, None)))
    # b1 may not go (its PDB) and c1 is do-not-disrupt: the smallest set left empties a (two moves)
    assert got is not None
    assert sorted((m.pod, m.target) for m in got[1].moves) == [("a1", "b"), ("a2", "c")]
    assert pk.pods["b1"].node == 1 and pk.pods["c1"].node == 2
    pk = _admit_packing()
    pk.pods["b1"].pdb = "pdb-b"
    pk.budgets["pdb-b"] = 0
    for key in ("a1", "a2", "c1"):
        pk.pods[key].blocked = "do-not-disrupt"
    assert (
        Admitter(pk, lambda t, ex: pk.place_mode(t, "CompactFirst", ex)).admit(
            ptask(Task("big", 0, 0, 1, 1000, None))
        )
        is None
    )
    assert [pk.nodes[i].gpus[0].free_t for i in range(3)] == [200, 400, 700]  # nothing half-done
    pk.budgets["pdb-b"] = 1
    got = Admitter(pk, lambda t, ex: pk.place_mode(t, "CompactFirst", ex)).admit(
        ptask(Task("big", 0, 0, 1, 1000, None))
    )
    assert got is not None and [m.pod for m in got[1].moves] == ["b1"]
    assert pk.budgets["pdb-b"] == 0


def _chain_packing() -> Packing:
    """One GPU per node, 1000 each: a holds 600 (400 free), b 700 (300 free), c three 200s (400
    free). A 1000 fits nowhere; no single move frees a GPU whose worker fits elsewhere. The smallest
    set is two moves, a chain: c1 from c to b, then a1 into the 600 on c, and the 1000 takes a.
    Without chains the only set empties c (three moves)."""
    pk = packing_of([Node("a", 10, 10, 1, "T4"), Node("b", 10, 10, 1, "T4"), Node("c", 10, 10, 1, "T4")])
    for key, node, milli in (("a1", 0, 600), ("b1", 1, 700), ("c1", 2, 200), ("c2", 2, 200), ("c3", 2, 200)):
        pk.bind(key, ptask(Task(key, 0, 0, 1, milli, None)), node, (0,))
    return pk


def test_admit_chain_makes_room_for_the_evicted_worker_and_is_the_smallest_set() -> None:
    big = ptask(Task("big", 0, 0, 1, 1000, None))
    pk = _chain_packing()
    got = Admitter(pk, lambda t, ex: pk.place_mode(t, "CompactFirst", ex)).admit(big)
    assert got is not None
    choice, adm = got
    assert [(m.pod, m.source, m.target) for m in adm.moves] == [("c1", "c", "b"), ("a1", "a", "c")]
    assert adm.node == "a" and pk.nodes[choice[0]].name == "a"
    assert (pk.pods["c1"].node, pk.pods["a1"].node) == (1, 2)  # carried out in the packing
    pk.bind("big", big, *choice)
    assert [pk.nodes[i].gpus[0].free_t for i in range(3)] == [0, 100, 0]
    pk = _chain_packing()
    plain = Admitter(pk, lambda t, ex: pk.place_mode(t, "CompactFirst", ex), max_chain=0).admit(big)
    assert plain is not None and sorted(m.pod for m in plain[1].moves) == ["c1", "c2", "c3"]


def test_admit_chain_never_moves_a_pdb_blocked_pod() -> None:
    big = ptask(Task("big", 0, 0, 1, 1000, None))
    pk = _chain_packing()
    pk.pods["c1"].blocked = "do-not-disrupt"
    pk.pods["c2"].pdb = "pdb-c"
    pk.budgets["pdb-c"] = 0
    got = Admitter(pk, lambda t, ex: pk.place_mode(t, "CompactFirst", ex)).admit(big)
    assert got is not None
    assert [(m.pod, m.source, m.target) for m in got[1].moves] == [("c3", "c", "b"), ("a1", "a", "c")]
    assert pk.pods["c1"].node == 2 and pk.pods["c2"].node == 2
    # a1 and every c pod under one PDB that allows one disruption: a chain would need two
    pk = _chain_packing()
    for key in ("a1", "c1", "c2", "c3"):
        pk.pods[key].pdb = "pdb-x"
    pk.budgets["pdb-x"] = 1
    assert Admitter(pk, lambda t, ex: pk.place_mode(t, "CompactFirst", ex)).admit(big) is None
    assert [pk.nodes[i].gpus[0].free_t for i in range(3)] == [400, 300, 400]  # nothing half-done
    assert sorted(pk.on_node[2]) == ["c1", "c2", "c3"] and pk.budgets["pdb-x"] == 1


def test_admit_in_a_run_places_what_the_mode_alone_fails() -> None:
    """LowLoadFirst spreads 600, 600 and 300 over three GPUs, so the 1000 finds none free; moving
    the 300 next to a 600 makes room."""
    nodes = [Node(f"n{i}", 64000, 64000, 1, "T4") for i in range(3)]
    tasks = _tasks([(100, 100, 1, 600), (100, 100, 1, 600), (100, 100, 1, 300), (100, 100, 1, 1000)])
    kw = {"seed": 3, "inflate": 0.84, "order": "creation"}
    plain = run_arrivals(nodes, tasks, parse_trace_policy("LowLoadFirst"), **kw)  # type: ignore[arg-type]
    admit = run_arrivals(nodes, tasks, parse_trace_policy("LowLoadFirst+admit"), **kw)  # type: ignore[arg-type]
    assert (plain.failed, admit.failed, admit.moves, admit.admitted) == (1, 0, 1, 1)
    assert admit.allocated[-1] == 2500


# -- the modes are the scheduler's -----------------------------------------------------------------

EQ_NODES = """sn,cpu_milli,memory_mib,gpu,model
e-0,16000,65536,4,G2
e-1,16000,65536,4,G2
e-2,12000,65536,2,G2
e-3,64000,262144,8,G2
"""


def test_packing_modes_choose_as_placement_place(tmp_path: Path) -> None:
    """Every task of a replay goes to the node and GPUs `placement.place` picks, in every mode.
    (G2 is 125 TFLOPS: the shares here are whole percents of it, so truncation keeps them exact.)"""
    specs = [(4000, 8192, 1, 400), (2000, 4096, 1, 1000), (8000, 8192, 1, 200), (2000, 2048, 2, 1000),
             (4000, 4096, 1, 800), (1000, 1024, 1, 600), (6000, 8192, 1, 400), (2000, 2048, 4, 1000)] * 3  # fmt: skip
    rows = [f"q-{i:02d},{c},{m},{n},{milli},,LS,Running,{i},,{i}" for i, (c, m, n, milli) in enumerate(specs)]
    n, p = _write(tmp_path, EQ_NODES, PODS.splitlines()[0] + "\n" + "\n".join(rows) + "\n")
    tr = read_trace(n, p)
    for mode in MODES:
        objs = [*trace_objects(tr, mode=mode)]
        pods = [task_objects(t, tr.models()) for t in tr.tasks]
        st = ClusterState.build(
            validate_items(objs + [o for wl, pod in pods for o in (wl, pod) if o]).objects
        )
        pk = Packing.from_state(st, "trace")
        available: dict[str, Res] = {}
        counts: dict[str, int] = {}
        room = node_fit(st)
        for wl, pod in pods:
            if wl is None:
                continue
            w = st.workers[f"trace/{pod['metadata']['name']}"]
            req, pr = Request.of_worker(w), pod_requests(pod)
            want = place(
                st, "trace", req, mode=mode, available=available, worker_counts=counts, pod=pr, fit=room
            )
            task = task_of_worker(w)
            got = pk.place_mode(task, mode)
            if want.node is None:
                assert got is None, (mode, w.key)
                continue
            assert got is not None, (mode, w.key, want)
            assert (pk.nodes[got[0]].name, tuple(pk.nodes[got[0]].gpus[i].name for i in got[1])) == (
                want.node,
                want.gpus,
            ), (mode, w.key)
            apply_placement(available, st, want, req)
            counts[want.node] = counts.get(want.node, 0) + 1
            room.book(want.node, pr)
            pk.bind(task.key, task, *got)


# -- sweeps and the command -------------------------------------------------------------------------


def test_sweep_in_processes_and_on_a_dask_cluster_equals_the_local_runs() -> None:
    from distributed import Client, LocalCluster

    nodes = [Node(f"n{i}", 32000, 65536, 2, "T4") for i in range(6)]
    tasks = _tasks([(2000, 2048, 1, m) for m in (200, 300, 500, 700, 1000)] + [(1000, 1024, 0, 0)])
    runs = [Run(p, s) for p in ("FGD", "CompactFirst+admit") for s in (1, 2)]
    local = sweep(nodes, tasks, runs, workers=1)
    procs = sweep(nodes, tasks, runs, workers=2)
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, Client(cluster) as client:
        remote = sweep(nodes, tasks, runs, dask=client)

    def key(rs: list[ArrivalResult]) -> list[tuple[str, int, list[int], list[int], int]]:
        return [(r.policy, r.seed, r.arrived, r.allocated, r.failed) for r in rs]

    assert key(local) == key(procs) == key(remote)
    summary = summarize(local)
    assert [s.policy for s in summary] == ["FGD", "CompactFirst+admit"] and summary[0].seeds == [1, 2]


def test_simulate_trace_json_has_the_figures_and_the_mapping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n, p = _write(tmp_path)
    args = ["simulate", "--trace-nodes", n, "--trace-pods", p, "--seeds", "1-2", "--workers", "1"]
    assert main([*args, "--policy", "FGD", "--policy", "CompactFirst+admit", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["policies"]) == {"FGD", "CompactFirst+admit"}
    fgd = doc["policies"]["FGD"]
    assert set(fgd["allocated_pct_at"]) == {"100", "130"} and fgd["curve"] and fgd["seeds"] == [1, 2]
    assert "failed_tasks" in fgd and set(doc["failed_tasks"]) == {"FGD", "CompactFirst+admit"}
    assert "gpu_milli/1000" in doc["mapping"]["gpu_share"]
    assert main([*args, "--policy", "LowLoadFirst"]) == 0
    text = capsys.readouterr().out
    assert "alloc % @130" in text and "mapping (the trace has no VRAM per task)" in text
    assert main([*args, "--policy", "FGD+defrag"]) == 2
    assert "need --protocol lifetimes" in capsys.readouterr().err


def test_packing_task_keys_are_unique_per_arrival() -> None:
    t = PTask("k", count=1, tflops=10, vram=10)
    assert t.take(packing_of([Node("a", 1, 1, 1, "T4")]).nodes[0].gpus[0]) == (10, 10)


def test_lifetimes_replays_creation_and_deletion_through_the_whatif_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tftui.runtime.lifetimes import START, TraceFeed, run_lifetimes

    pods = PODS.replace(",0,100,0", ",0,3600,0").replace(",10,200,10", ",600,7200,600")
    tr = read_trace(*_write(tmp_path, NODES, pods))
    feed = TraceFeed(tr, timedelta(hours=2))
    sched = [(c.kind, c.name, (c.at - START).total_seconds()) for c in feed.schedule(START)]
    assert ("arrive", "p-0", 0.0) in sched and ("depart", "p-0", 3600.0) in sched
    assert ("depart", "p-1", 7200.0) not in sched  # outside the window
    (res,) = run_lifetimes(tr, ["LowLoadFirst+nodefrag"], timedelta(hours=2))
    assert res.arrivals == 5 and res.departures >= 1
    assert res.gpu_hours_allocated > 0 and res.active["trace"]
    n, p = _write(tmp_path, NODES, pods)
    argv = ["simulate", "--trace-nodes", n, "--trace-pods", p, "--protocol", "lifetimes", "--duration", "2h"]
    assert main([*argv, "--policy", "CompactFirst+nodefrag"]) == 0
    assert "lifetimes: active nodes ÷ lower bound over time" in capsys.readouterr().out
    assert main([*argv, "--policy", "FGD"]) == 2
    assert "yardstick" in capsys.readouterr().err
