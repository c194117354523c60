"""The arrivals protocol of the FGD paper's published runs, over a trace, for one policy and seed.

No task leaves. The task list (sorted by name) is put in a seeded random order (`order="shuffle"`;
`"creation"` sorts by creation time instead) and extended with tasks drawn with replacement from
the original list until the next draw would take the GPU demand past `inflate` × the cluster's GPU
capacity (a list already above it loses random tasks until it is not). Tasks arrive one by one; one
that cannot be placed is counted as failed and skipped, but as arrived. After every task the run
records the GPU allocation ratio (allocated milli-GPUs ÷ capacity, %) against the arrived workload
(cumulative requested milli-GPUs ÷ capacity, %); the value at X % is the mean of the records whose
arrived % rounds to X.

Units are the trace's: milli-GPUs per GPU (1000 each, whatever the model), milli-CPU and MiB per
node. A task's share is exact (no TFLOPS truncation): the protocol's ratios are in milli-GPUs.

Policies: a placement mode (`CompactFirst`, `LowLoadFirst`, `NodeCompactGPULowLoad`: the
TensorFusion scheduler's choice, `engine.packing`; pods without GPUs by kube-scheduler's default)
or `FGD` (`engine.fgd`), each optionally `+admit` (`engine.admit`: when a task does not fit, the
smallest set of moves that makes room, carried out) and `+preempt` (`engine.preempt`: then, as
kube-scheduler does for a pod of higher priority, evict the lower-priority pods its default
preemption picks; each victim is re-created and placed again if it fits anywhere, else it is
counted as preempted), or `+evict` instead (tftui's own eviction of lower-priority pods for a pod
left pending: after the moves of `+admit`, which lose nothing; only PDB-safe victims; every node
looked at, the one whose victims hold the least GPU share first; victims placed again as with
`+preempt`). A task's priority is its QoS's PriorityClass (the trace's LS and Guaranteed are QoS
high: 10000; the rest 0).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from random import Random
from typing import Any, Final

from tftui.engine.admit import MAX_MOVES, Admitter
from tftui.engine.fgd import FGD, POPULARITY, workload_classes
from tftui.engine.fit import MODES, Mode
from tftui.engine.packing import PGPU, Packing, PNode, PTask
from tftui.engine.preempt import Preempter

FULL: Final = 1000
REFERENCE: Final = "FGD"
POLICIES: Final = (REFERENCE, *MODES)


class PolicyError(ValueError):
    """A trace policy that does not exist (the message names it)."""


@dataclass(frozen=True, slots=True)
class TracePolicy:
    name: str
    placement: str  # a mode or FGD
    admit: bool = False
    preempt: bool = False
    evict: bool = False


def parse_trace_policy(text: str) -> TracePolicy:
    """`FGD` or a placement mode, optionally `+admit` and `+preempt`."""
    head, *flags = [p.strip() for p in text.split("+")]
    match = [p for p in POLICIES if p.lower() == head.lower()]
    if not match:
        raise PolicyError(f"policy {text!r}: unknown placement {head!r} (one of {', '.join(POLICIES)})")
    chosen = {f.lower() for f in flags}
    for f in flags:
        if f.lower() not in ("admit", "preempt", "evict"):
            raise PolicyError(
                f"policy {text!r}: option {f!r} is not one of the arrivals protocol (only +admit, "
                "+preempt and +evict; +defrag, +autoscale and the like need --protocol lifetimes)"
            )
    if {"preempt", "evict"} <= chosen:
        raise PolicyError(
            f"policy {text!r}: +preempt and +evict are two choices of the same victims (one of them)"
        )
    return TracePolicy(text, match[0], "admit" in chosen, "preempt" in chosen, "evict" in chosen)


@dataclass(frozen=True, slots=True)
class Task:
    """One arriving task in the protocol's units."""

    name: str
    cpu: int
    mem: int
    count: int
    milli: int
    models: frozenset[str] | None
    creation: int = 0
    priority: int = 0  # the pod's priority (its QoS's PriorityClass value)

    @property
    def demand(self) -> int:
        return self.count * self.milli

    @property
    def shape(self) -> tuple[int, int, int, int, frozenset[str] | None]:
        return (self.cpu, self.mem, self.count, self.milli, self.models)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    cpu: int
    mem: int
    gpus: int
    model: str
    pods: int = 1001


def arrival_order(
    tasks: Sequence[Task], capacity: int, seed: int, inflate: float, order: str = "shuffle"
) -> list[Task]:
    """The protocol's task list: ordered, then inflated (or trimmed) to `inflate` × `capacity`."""
    if order not in ("shuffle", "creation"):
        raise ValueError(f"order must be shuffle or creation, got {order!r}")
    rng = Random(seed)
    base = sorted(tasks, key=lambda t: t.name)
    out = list(base)
    if order == "shuffle":
        rng.shuffle(out)
    else:
        out.sort(key=lambda t: (t.creation, t.name))
    target = inflate * capacity
    demand = sum(t.demand for t in out)
    while demand > target and out:
        demand -= out.pop(rng.randrange(len(out))).demand
    i = 0
    while demand < target and base:
        t = base[rng.randrange(len(base))]
        if demand + t.demand > target:
            break
        out.append(
            Task(f"{t.name}-tuned-{i}", t.cpu, t.mem, t.count, t.milli, t.models, t.creation, t.priority)
        )
        demand += t.demand
        i += 1
    return out


def packing_of(nodes: Sequence[Node]) -> Packing:
    """The empty cluster in milli-GPUs."""
    out = []
    for n in nodes:
        gpus = [PGPU(f"{n.name}-gpu{i}", FULL, FULL, FULL, FULL, n.model) for i in range(n.gpus)]
        cpu, mem = float(n.cpu), float(n.mem)
        out.append(PNode(n.name, 0, n.model, cpu, mem, float(n.pods), cpu, mem, gpus))
    return Packing(out)


def ptask(t: Task) -> PTask:
    return PTask(t.name, float(t.cpu), float(t.mem), t.count, float(t.milli), float(t.milli), None, t.models)


@dataclass(slots=True)
class ArrivalResult:
    """One policy and seed: every record, the curve and counts."""

    policy: str
    seed: int
    capacity: int  # milli-GPUs
    tasks: int = 0
    failed: int = 0
    moves: int = 0
    admitted: int = 0  # tasks placed only thanks to moves
    preemptions: int = 0  # tasks placed only by evicting pods of lower priority
    evicted: int = 0  # pods those preemptions evicted
    preempted: int = 0  # evicted pods that found no room again (counted as arrived, not placed)
    searches: int = 0
    arrived: list[int] = field(default_factory=list, repr=False)  # milli-GPUs after each task
    allocated: list[int] = field(default_factory=list, repr=False)
    cpu_seconds: float = 0.0

    def curve(self) -> dict[int, float]:
        """Arrived % (rounded) → mean allocation % of the records there."""
        sums: dict[int, float] = {}
        counts: dict[int, int] = {}
        for a, b in zip(self.arrived, self.allocated, strict=True):
            x = round(100.0 * a / self.capacity)
            sums[x] = sums.get(x, 0.0) + 100.0 * b / self.capacity
            counts[x] = counts.get(x, 0) + 1
        return {x: sums[x] / counts[x] for x in sorted(sums)}

    def at(self, pct: int) -> float | None:
        return self.curve().get(pct)

    def to_json(self) -> dict[str, Any]:
        curve = self.curve()
        return {
            "seed": self.seed,
            "tasks": self.tasks,
            "failed_tasks": self.failed,
            "moves": self.moves,
            "admitted_by_moves": self.admitted,
            "preemptions": self.preemptions,
            "evicted_by_preemption": self.evicted,
            "preempted_tasks": self.preempted,
            "allocated_pct_at": {str(x): _r(curve.get(x)) for x in (100, 130)},
            "final_allocated_pct": _r(100.0 * self.allocated[-1] / self.capacity) if self.allocated else None,
            "curve": [[x, round(v, 3)] for x, v in curve.items()],
            "cpu_seconds": round(self.cpu_seconds, 2),
        }


def _r(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else round(x, 3)


def run_arrivals(
    nodes: Sequence[Node],
    tasks: Sequence[Task],
    policy: TracePolicy,
    *,
    seed: int = 42,
    inflate: float = 1.3,
    order: str = "shuffle",
    popularity: float = POPULARITY,
    max_moves: int = MAX_MOVES,
) -> ArrivalResult:
    """The protocol for one policy and seed (see the module docstring)."""
    cpu0 = time.process_time()
    if policy.placement == REFERENCE:  # FGD's ties go to the first node: a seeded order, as the
        nodes = list(nodes)  # paper's runs name their nodes with a random prefix
        Random(f"nodes-{seed}").shuffle(nodes)
    pk = packing_of(nodes)
    capacity = FULL * sum(n.gpus for n in nodes)
    arrivals = arrival_order(tasks, capacity, seed, inflate, order)
    if policy.placement == REFERENCE:
        fgd = FGD(pk, workload_classes((t.shape for t in tasks), popularity))

        def place(t: PTask, exclude: Any = ()) -> tuple[int, tuple[int, ...]] | None:
            return fgd.place(t, exclude)

        def place_on(t: PTask, node: int) -> tuple[int, tuple[int, ...]] | None:
            return fgd.place(t, [i for i in range(len(pk.nodes)) if i != node])
    else:
        mode: Mode = policy.placement  # type: ignore[assignment]

        def place(t: PTask, exclude: Any = ()) -> tuple[int, tuple[int, ...]] | None:
            return pk.place_mode(t, mode, exclude)

        def place_on(t: PTask, node: int) -> tuple[int, tuple[int, ...]] | None:
            fitting = pk.fitting_gpus(t, pk.nodes[node])
            return None if fitting is None else (node, pk.pick_gpus(mode, t, pk.nodes[node], fitting))

    admitter = Admitter(pk, place, max_moves=max_moves) if policy.admit else None
    res = ArrivalResult(policy.name, seed, capacity, tasks=len(arrivals))
    demand: dict[str, int] = {}  # bound pod → milli-GPUs
    priorities: dict[str, int] = {}  # bound pod → priority (absent: 0)
    started: dict[str, int] = {}  # bound pod → when it was (last) placed
    preempter = Preempter(pk, Random(f"preempt-{seed}")) if policy.preempt else None
    if policy.evict:
        preempter = Preempter(pk, Random(f"preempt-{seed}"), least_share=True)
    arrived = allocated = 0
    for i, t in enumerate(arrivals):
        arrived += t.demand
        pt = ptask(t)
        key = f"{i}/{t.name}"
        pt = PTask(key, pt.cpu, pt.mem, pt.count, pt.tflops, pt.vram, None, pt.models)
        choice = place(pt)
        # kube-scheduler's preemption runs in the same scheduling attempt (upstream keeps
        # DefaultPreemption on); what stays pending is then tftui's to admit by moves. tftui's
        # own eviction (+evict) acts on a pending pod, after the moves it prefers (they lose nothing)
        if choice is None and admitter is not None and policy.evict:
            choice = _admitted(admitter, pt, res)
        if choice is None and preempter is not None and t.priority > 0:
            found = preempter.find(pt, t.priority, priorities, started)
            if found is not None:
                evicted = [(k, pk.unbind(k)) for k in found.victims]
                choice = place_on(pt, found.node)
                if choice is None:  # cannot happen: the same fit as the search's; undo all the same
                    for k, p in reversed(evicted):
                        pk.restore(k, p)
                else:
                    pk.bind(key, pt, *choice)
                    _note(key, t.demand, t.priority, i, demand, priorities, started)
                    allocated += t.demand
                    res.preemptions += 1
                    res.evicted += len(evicted)
                    for k, p in evicted:  # re-created by its controller; no preemption of its own
                        allocated -= demand[k]
                        again = place(p.task)
                        if again is None:
                            res.preempted += 1
                            for d in (demand, priorities, started):
                                d.pop(k, None)
                        else:
                            pk.bind(k, p.task, *again)
                            started[k] = i
                            allocated += demand[k]
                    res.arrived.append(arrived)
                    res.allocated.append(allocated)
                    continue
        if choice is None and admitter is not None and not policy.evict:
            choice = _admitted(admitter, pt, res)
        if choice is None:
            res.failed += 1
        else:
            pk.bind(key, pt, *choice)
            _note(key, t.demand, t.priority, i, demand, priorities, started)
            allocated += t.demand
        res.arrived.append(arrived)
        res.allocated.append(allocated)
    if admitter is not None:
        res.searches = admitter.searches
    res.cpu_seconds = time.process_time() - cpu0
    return res


def _admitted(admitter: Admitter, task: PTask, res: ArrivalResult) -> tuple[int, tuple[int, ...]] | None:
    """Where `task` goes once the admission search's moves are carried out (counted), or None."""
    got = admitter.admit(task)
    if got is None:
        return None
    choice, admission = got
    res.moves += len(admission.moves)
    res.admitted += 1
    return choice


def _note(
    key: str,
    milli: int,
    priority: int,
    at: int,
    demand: dict[str, int],
    priorities: dict[str, int],
    started: dict[str, int],
) -> None:
    demand[key] = milli
    started[key] = at
    if priority:
        priorities[key] = priority


def protocol_input_of_state(state: Any) -> tuple[list[Node], list[Task]]:
    """A cluster's nodes and running GPU workers in the protocol's units, to replay them per policy
    (the console's `:whatif`): a worker's share is the larger of its TFLOPS and VRAM share of its
    GPU, in milli-GPUs; CPU and memory from its pod's requests (MiB)."""
    from tftui.engine.nodefit import pod_requests, rooms

    room = rooms(state)
    nodes: list[Node] = []
    for name in sorted(state.nodes):
        nv = state.nodes[name]
        gpus = [state.gpus[g] for g in nv.gpus if g in state.gpus]
        if not gpus:
            continue
        r = room.get(name)
        cpu = int(r.cpu) if r is not None and r.cpu is not None else 1 << 40
        mem = int(r.memory // (1 << 20)) if r is not None and r.memory is not None else 1 << 40
        nodes.append(Node(name, cpu, mem, len(gpus), gpus[0].model or "gpu", 1 << 20))
    tasks: list[Task] = []
    for key in sorted(state.workers):
        w = state.workers[key]
        gpu = state.gpus.get(w.gpu_ids[0]) if w.gpu_ids else None
        if w.terminating or gpu is None or gpu.capacity.tflops <= 0 or gpu.capacity.vram <= 0:
            continue
        share = max(w.request.tflops / gpu.capacity.tflops, w.request.vram / gpu.capacity.vram)
        milli = max(1, min(FULL, round(share * FULL)))
        pod = pod_requests(w.obj)
        count = max(1, w.gpu_count)
        tasks.append(
            Task(key, int(pod.cpu), int(pod.memory // (1 << 20)), count, FULL if count > 1 else milli, None)
        )
    return nodes, tasks
