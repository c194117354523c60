"""kube-scheduler's default preemption over a `Packing`: which pods a higher-priority pod evicts.

When a pod cannot be placed, kube-scheduler's PostFilter (the DefaultPreemption plugin) looks for a
node where evicting pods of lower priority makes room, and upstream TensorFusion takes part: its GPU
filter is re-run with the victims' GPU shares given back. TensorFusion's webhook gives workers of
QoS high and critical a PriorityClass (`tensor-fusion-high` 10000, `tensor-fusion-critical`
100000); the others keep priority 0 and can be preempted by them (`QOS_PRIORITY`).

What is modelled, as the plugin does it:
- the nodes looked at: every node the pod's GPU model constraint and cordon do not rule out (a
  refusal removing pods cannot resolve), walked from a random offset (seeded here) until at least
  one candidate without a PDB violation and max(10 % of the nodes, 100) candidates in all are found;
- per node: every pod of lower priority removed; no fit then, no candidate; else the pods are given
  back one by one — those whose eviction would break their PDB first, then the others, each group
  the more important first (higher priority, then the earlier start) — and each stays if the pod
  still fits; the rest are the victims;
- the node: fewest PDB violations, then the lowest highest-victim priority, the smallest sum of
  victim priorities, the fewest victims, the latest earliest start among the highest-priority
  victims, then the first found.
`least_share=True` is not kube-scheduler's but tftui's own choice (`+evict` in the arrivals
protocol): only nodes whose victims break no PDB, every node looked at, the one whose victims hold
the least GPU share first (then kube-scheduler's order). tftui can carry it out itself, as PDB-safe
evictions of lower-priority pods for a pod left pending (its PriorityClass then has
`preemptionPolicy: Never`, so kube-scheduler does not preempt first).
Not modelled: pods nominated by other preemptors (the callers place one task at a time), graceful
termination (victims leave at once), extenders, inter-pod affinity. Pure: no I/O, no clock.

Speed: a node's victims and rank for a task shape and priority depend only on the node's pods (its
`version` counts every bind and unbind), its cordon and the PDB budgets (`epoch`), so `Preempter`
keeps them per (shape, priority, node) while those are unchanged: one search walks hundreds of
nodes, and between two searches few of them change. That needs what the caller passes to stay put
while a pod stays bound: a pod's priority and start are set when it is bound (as a replay does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from random import Random
from typing import Final

from tftui.engine.admit import fits_without
from tftui.engine.packing import Packing, PNode, PPod, PTask

QOS_PRIORITY: Final[Mapping[str, int]] = {"critical": 100_000, "high": 10_000}
"""Pod priority by TensorFusion QoS (the PriorityClasses upstream's chart installs); others: 0."""

MIN_CANDIDATES_PCT: Final = 10
MIN_CANDIDATES_ABS: Final = 100


@dataclass(frozen=True, slots=True)
class Preemption:
    """Where the pod goes once `victims` (pod keys) are evicted."""

    node: int
    victims: tuple[str, ...]  # PDB-breaking ones first, each group the more important first
    pdb_violations: int


def candidates_wanted(nodes: int) -> int:
    """kube-scheduler's number of candidates: 10 % of the nodes, at least 100, at most all."""
    return min(nodes, max(nodes * MIN_CANDIDATES_PCT // 100, MIN_CANDIDATES_ABS))


Rank = tuple[int, int, int, int, int]
# a node's rank, victims, PDB violations and the GPU share the victims hold
Entry = tuple[Rank, tuple[str, ...], int, float] | None


class Preempter:
    """`find` for one packing: the nodes a task shape could use at all are kept per shape (GPU
    models and sizes do not change; cordons are checked each time), and each node's victims per
    shape and priority while the node, its cordon and the PDB budgets are unchanged."""

    def __init__(self, pk: Packing, rng: Random, least_share: bool = False) -> None:
        self.pk, self.rng = pk, rng
        self.least_share = least_share  # tftui's own choice (`+evict`), not kube-scheduler's
        self._potential: dict[tuple[object, ...], list[PNode]] = {}
        # (shape, priority) → node → (node version, PDB epoch, cordon, entry)
        self._victims: dict[tuple[object, ...], dict[int, tuple[int, int, bool, Entry]]] = {}

    def find(
        self, task: PTask, priority: int, priorities: Mapping[str, int], started: Mapping[str, int]
    ) -> Preemption | None:
        """The preemption kube-scheduler would carry out for `task` of `priority`, or None.

        `priorities` and `started` give each bound pod's priority (default 0) and start order; the
        walk's offset is drawn from `rng`. The packing is left as it was."""
        pk = self.pk
        shape = (task.count, task.tflops, task.vram, task.pct, task.models, task.request)
        usable = self._potential.get(shape)
        if usable is None:
            usable = self._potential[shape] = [n for n in pk.nodes if _gpus_could_fit(pk, task, n)]
        potential = [n for n in usable if not n.unschedulable]
        if not potential:
            return None
        want = candidates_wanted(len(potential))
        offset = self.rng.randrange(len(potential))
        kept = self._victims.setdefault((shape, task.cpu, task.mem, task.pod, priority), {})
        epoch = pk.budgets.epoch
        found: list[tuple[Rank, int, Preemption]] = []
        clean = 0
        for step in range(len(potential)):
            n = potential[(offset + step) % len(potential)]
            was = kept.get(n.idx)
            if was is not None and was[0] == n.version and was[1] == epoch and was[2] == n.unschedulable:
                entry = was[3]
            else:
                entry = _entry(pk, task, n, priority, priorities, started)
                kept[n.idx] = (n.version, epoch, n.unschedulable, entry)
            if entry is None:
                continue
            rank, victims, violations, share = entry
            if self.least_share:
                if not violations:  # every node looked at; the least GPU share evicted first
                    found.append(((int(share), *rank[1:]), step, Preemption(n.idx, victims, 0)))
                continue
            found.append((rank, step, Preemption(n.idx, victims, violations)))
            clean += violations == 0
            if clean and len(found) >= want:
                break
        if not found:
            return None
        return min(found, key=lambda f: (f[0], f[1]))[2]


def _entry(
    pk: Packing,
    task: PTask,
    n: PNode,
    priority: int,
    priorities: Mapping[str, int],
    started: Mapping[str, int],
) -> Entry:
    """The node's rank, victims and PDB violations (None: no eviction makes room there)."""
    got = _victims_on(pk, task, n, priority, priorities, started)
    if got is None:
        return None
    victims, violations = got
    if not victims:  # it fits there as it is: kube-scheduler takes the first such node at once
        return (0, -(1 << 62), 0, 0, 0), victims, 0, 0.0
    prios = [priorities.get(k, 0) for k in victims]
    top = max(prios)
    earliest = min(started.get(k, 0) for k, p in zip(victims, prios, strict=True) if p == top)
    share = sum(t for k in victims for t, _ in pk.pods[k].taken)
    return (violations, top, sum(prios), len(victims), -earliest), victims, violations, share


def _gpus_could_fit(pk: Packing, task: PTask, n: PNode) -> bool:
    """Whether `n` has enough GPUs that would take `task` were they free (models, sizes)."""
    if not task.count:
        return True
    return sum(1 for g in n.gpus if pk.gpu_fits_free(task, g)) >= task.count


def _victims_on(
    pk: Packing,
    task: PTask,
    n: PNode,
    priority: int,
    priorities: Mapping[str, int],
    started: Mapping[str, int],
) -> tuple[tuple[str, ...], int] | None:
    """The victims on `n` and how many of them break their PDB, or None when no eviction helps."""
    lower = [(k, pk.pods[k]) for k in pk.on_node[n.idx] if priorities.get(k, 0) < priority]
    if not lower or not fits_without(pk, task, n, [p for _, p in lower]):
        return None
    lower.sort(key=lambda kp: (-priorities.get(kp[0], 0), started.get(kp[0], 0), kp[0]))
    allowed = dict(pk.budgets)
    violating: list[tuple[str, PPod]] = []
    keeping: list[tuple[str, PPod]] = []
    for k, p in lower:
        if p.pdb is not None and allowed.get(p.pdb, 0) <= 0:
            violating.append((k, p))
        else:
            if p.pdb is not None:
                allowed[p.pdb] -= 1
            keeping.append((k, p))
    gone = dict(lower)
    victims: list[str] = []
    violations = 0
    for group, breaks in ((violating, True), (keeping, False)):
        for k, p in group:
            del gone[k]  # given back: it stays if the pod still fits
            if not fits_without(pk, task, n, list(gone.values())):
                gone[k] = p
                victims.append(k)
                violations += breaks
    return tuple(victims), violations
