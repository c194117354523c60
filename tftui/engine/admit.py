"""Defrag to admit: the smallest set of PDB-safe moves that makes room for a worker that does not fit.

A move is one eviction whose worker the scheduler places again (the workload controller recreates
it Pending). The search frees room on one node: for each node where the waiting worker could fit,
the subsets of its movable workers, smallest first, whose removal makes the worker fit there; each
subset is tried in the packing — evict the subset, place the waiting worker with the policy, then
place each evicted worker again (largest first) with the same policy — and kept only if everything
found a place. *Chains*: an evicted worker that fits nowhere may get its room from one more move —
a worker of a node where a single eviction lets it fit goes first (and must itself find a place
with the policy), then the evicted worker takes the room. Set sizes count every move, chain moves
included, and are tried smallest first, so a chain is used only when no smaller set exists. A
worker is movable unless it is blocked (not a TensorFusion worker, do-not-disrupt,
covered by more than one PDB) or its PDB would allow fewer disruptions than the set needs.

Bounds (stated, so the search cost is known): at most `max_moves` moves, the `CANDIDATES_PER_NODE`
largest movable workers of a node, and `max_trials` tried subsets per search; at most `max_chain`
chain moves per set, `max_chain_trials` tried chain moves per search, on the first `CHAIN_NODES` nodes
where one eviction would do among the `CHAIN_SCAN` with the most free GPU. A search that finds
nothing is remembered until a pod leaves the packing or a PDB budget changes: a task asking no less
then finds nothing either (a packing that only gained pods has no more room anywhere). Per node,
the move-count bound and the candidate move sets of a task shape are kept while the node's version
(every bind and unbind), its cordon and the PDB budgets are unchanged: a replay asks them of every
node for few distinct shapes, and few nodes change between two searches. A node is passed over
without its move sets when the search already knows that none of the workers they are drawn from
can be placed (near saturation, most nodes); the placeable answers are asked in the same order as
a plain filter would (they are kept for the search, and the chain moves look them up).

`explain` is the console's answer to "why is this worker pending": which filter stage stopped it
(capacity, fragmentation, quota, model, CPU, nodes) and the move set that would admit it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tftui.engine.packing import Packing, PNode, PPod, PTask

CANDIDATES_PER_NODE: Final = 8
MAX_MOVES: Final = 3
MAX_TRIALS: Final = 24
MAX_CHAIN: Final = 1  # chain moves per admission
MAX_CHAIN_TRIALS: Final = 24  # chain moves tried per search
CHAIN_NODES: Final = 6  # nodes a chain move is looked for on, per evicted worker
CHAIN_SCAN: Final = 96  # of the nodes with the most free GPU (where one eviction would do)

Choice = tuple[int, tuple[int, ...]]
Placer = Callable[[PTask, Collection[int]], Choice | None]
# a node's move sets for a task shape, the distinct shapes they move (one task each), and which of
# those each set moves
Combos = tuple[
    tuple[tuple[str, ...], ...], tuple[tuple[tuple[object, ...], PTask], ...], tuple[tuple[int, ...], ...]
]


@dataclass(frozen=True, slots=True)
class Move:
    pod: str
    source: str
    target: str
    gpus: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"pod": self.pod, "from": self.source, "to": self.target, "gpus": list(self.gpus)}


@dataclass(frozen=True, slots=True)
class Admission:
    """Where the worker goes after `moves`, carried out in that order before it."""

    node: str
    gpus: tuple[str, ...]
    moves: tuple[Move, ...]
    trials: int

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "gpus": list(self.gpus),
            "moves": [m.to_json() for m in self.moves],
            "trials": self.trials,
        }


@dataclass(slots=True)
class Admitter:
    """The search over one packing with one placement policy; `failed` remembers shapes that found
    nothing at a packing version."""

    pk: Packing
    place: Placer
    max_moves: int = MAX_MOVES
    max_trials: int = MAX_TRIALS
    max_chain: int = MAX_CHAIN
    max_chain_trials: int = MAX_CHAIN_TRIALS
    failed: dict[int, list[PTask]] = field(
        default_factory=dict
    )  # tasks that found nothing since pods last left
    searches: int = 0
    trials: int = 0
    _movable: tuple[int, dict[tuple[object, ...], bool]] = (-1, {})
    _epoch: tuple[int, int] = (-1, -1)
    _chain_left: int = 0
    _chain_order: dict[tuple[object, ...], list[int]] = field(default_factory=dict)
    _near: list[int] = field(default_factory=list)
    # _bound per (task shape, node): valid while the node's version and the PDB budgets are the same
    # (a search asks it of every node; few shapes recur and few nodes change between searches)
    # (a row per shape, by node: node version, PDB epoch, cordon, bound)
    _bounds: dict[tuple[object, ...], list[tuple[int, int, bool, int | None] | None]] = field(
        default_factory=dict
    )
    _combo_cache: dict[int, tuple[tuple[int, int, bool], dict[tuple[object, ...], Combos]]] = field(
        default_factory=dict
    )
    _movers: dict[int, tuple[tuple[int, int], tuple[tuple[object, ...], ...]]] = field(default_factory=dict)

    def admit(self, task: PTask) -> tuple[Choice, Admission] | None:
        """Make room for `task` and place it (the packing keeps the moves), or leave the packing as
        it was and return None."""
        if (self.pk.freed, self.pk.budgets.epoch) != self._epoch:  # pods left or PDBs changed since
            # the last search: what failed may not now
            self.failed = {}
        if any(_dominates(task, t) for t in self.failed.get(0, ())):
            return None  # a task no larger found nothing, and the packing has only filled up since
        self.searches += 1
        if self._movable[0] != self.pk.version:
            self._movable = (self.pk.version, {})
        movable = self._movable[1]  # shape → it could be placed somewhere now
        shape = _shape(task)
        order = self._order(task, shape)
        trials = 0
        got: tuple[Choice, Admission] | None = None
        self._chain_left = self.max_chain_trials
        self._chain_order = {}
        self._near = []
        # s moves in all: k evictions from the target node, s - k of them chain moves (at most one
        # per evicted worker), so a set of s moves is tried only once every smaller one failed
        for s in range(1, self.max_moves + 1):
            for b, i in order:
                if b > s or got is not None or trials >= self.max_trials:
                    break
                for k in range(s, max(b, (s + 1) // 2) - 1, -1):
                    chain = s - k
                    if chain > self.max_chain or (chain and self._chain_left <= 0):
                        continue
                    if not chain and self._hopeless(self.pk.nodes[i], movable):
                        continue
                    for subset in self._subsets(task, self.pk.nodes[i], k, movable, chain > 0, shape):
                        trials += 1
                        self.trials += 1
                        got = self._try(task, self.pk.nodes[i], subset, trials, chain)
                        if got is not None or trials >= self.max_trials:
                            break
                    if got is not None or trials >= self.max_trials:
                        break
        if got is None:
            self.failed.setdefault(0, []).append(task)
        else:
            self.failed = {}
        self._epoch = (self.pk.freed, self.pk.budgets.epoch)
        return got

    def _order(self, task: PTask, shape: tuple[object, ...]) -> list[tuple[int, int]]:
        """(bound, node) of every node whose bound is within `max_moves`, the smallest first (the
        node's order breaks ties): `_bound` over all nodes, its cache looked up in line."""
        rows = self._bounds.get(shape)
        if rows is None:
            rows = self._bounds[shape] = [None] * len(self.pk.nodes)
        epoch = self.pk.budgets.epoch
        out = []
        for n in self.pk.nodes:
            got = rows[n.idx]
            if got is None or got[0] != n.version or got[1] != epoch or got[2] != n.unschedulable:
                got = rows[n.idx] = (n.version, epoch, n.unschedulable, self._bound_now(task, n))
            b = got[3]
            if b is not None and b <= self.max_moves:
                out.append((b, n.idx))
        out.sort()
        return out

    def _bound(self, task: PTask, node: PNode, shape: tuple[object, ...] | None = None) -> int | None:
        """At least how many of the node's movable workers must go for `task` to fit there (None:
        never: cordoned, no acceptable GPU, or not even with all of them gone)."""
        key = _shape(task) if shape is None else shape
        rows = self._bounds.get(key)
        if rows is None:
            rows = self._bounds[key] = [None] * len(self.pk.nodes)
        got = rows[node.idx]
        epoch = self.pk.budgets.epoch
        if got is None or got[0] != node.version or got[1] != epoch or got[2] != node.unschedulable:
            got = rows[node.idx] = (node.version, epoch, node.unschedulable, self._bound_now(task, node))
        return got[3]

    def _bound_now(self, task: PTask, node: PNode) -> int | None:
        if node.unschedulable:
            return None
        pods = [
            p
            for _, p in self.pk.pods_on(node.idx)
            if p.blocked is None and p.task.count and (p.pdb is None or self.pk.budgets.get(p.pdb, 0) > 0)
        ]
        kc = _cover(task.cpu - node.cpu, [p.task.cpu for p in pods])
        km = _cover(task.mem - node.mem, [p.task.mem for p in pods])
        if kc is None or km is None:
            return None
        kg = 0
        if task.count:
            usable = [pos for pos, g in enumerate(node.gpus) if self.pk.gpu_fits_free(task, g)]
            if len(usable) < task.count:
                return None
            if task.count == 1 and task.request is None:
                need = task.tflops if task.pct is None else 0.0
                per: dict[int, list[float]] = {}
                for p in pods:
                    for pos, (t, _) in zip(p.gpus, p.taken, strict=True):
                        per.setdefault(pos, []).append(t)
                covers = [_cover(need - node.gpus[pos].free_t, per.get(pos, [])) for pos in usable]
                known = [c for c in covers if c is not None]
                if not known:
                    return None
                kg = min(known)
        return max(1, kc, km, kg)

    def _placeable(
        self, shape: tuple[object, ...], task: PTask, memo: dict[tuple[object, ...], bool]
    ) -> bool:
        got = memo.get(shape)
        if got is None:
            got = memo[shape] = self.place(task, ()) is not None
        return got

    def _subsets(
        self,
        task: PTask,
        node: PNode,
        k: int,
        movable: dict[tuple[object, ...], bool],
        chain: bool = False,
        shape: tuple[object, ...] | None = None,
    ) -> list[tuple[str, ...]]:
        """Subsets of `k` movable workers of `node` whose removal would let `task` fit there."""
        combos, shapes, needs = self._combos(task, node, k, shape)
        if chain or not combos:
            return list(combos)
        # a worker that fits nowhere now will not fit anywhere once this task is placed (without a
        # chain move making room for it); asked set by set, worker by worker, up to the first that
        # fits nowhere (the answers are kept for the whole search: which are asked, and when,
        # matters to the chain moves, which look them up with workers evicted)
        known: list[bool | None] = [None] * len(shapes)
        out = []
        for c, need in zip(combos, needs, strict=True):
            for j in need:
                ok = known[j]
                if ok is None:
                    sh, t = shapes[j]
                    ok = known[j] = self._placeable(sh, t, movable)
                if not ok:
                    break
            else:
                out.append(c)
        return out

    def _combos(self, task: PTask, node: PNode, k: int, shape: tuple[object, ...] | None = None) -> Combos:
        """`_subsets` before the placeable filter, kept while the node and the PDB budgets are the
        same (one search asks it of many nodes, and the next search of the same shape again); with
        the distinct shapes of the workers they move (one task of each) and each set's workers'
        shapes in order (as positions in that list)."""
        key = (_shape(task) if shape is None else shape, k)
        kept = self._combo_cache.get(node.idx)
        at = (node.version, self.pk.budgets.epoch, node.unschedulable)
        if kept is None or kept[0] != at:
            kept = self._combo_cache[node.idx] = (at, {})
        got = kept[1].get(key)
        if got is None:
            combos = self._combos_now(task, node, k)
            pods = self.pk.pods
            index: dict[tuple[object, ...], int] = {}
            shapes: list[tuple[tuple[object, ...], PTask]] = []
            needs = []
            for c in combos:
                need = []
                for p in c:
                    t = pods[p].task
                    sh = _shape(t)
                    i = index.get(sh)
                    if i is None:
                        i = index[sh] = len(shapes)
                        shapes.append((sh, t))
                    need.append(i)
                needs.append(tuple(need))
            got = kept[1][key] = (combos, tuple(shapes), tuple(needs))
        return got

    def _candidates(self, node: PNode) -> list[tuple[str, PPod]]:
        """The node's movable workers (within their PDB budgets)."""
        budgets = self.pk.budgets
        return [
            (key, p)
            for key, p in self.pk.pods_on(node.idx)
            if p.blocked is None and p.task.count and (p.pdb is None or budgets.get(p.pdb, 0) > 0)
        ]

    def _hopeless(self, node: PNode, movable: dict[tuple[object, ...], bool]) -> bool:
        """The search already knows that none of the `CANDIDATES_PER_NODE` workers move sets of
        `node` are drawn from could be placed now, so `_subsets` would return none (for any task and
        size) and ask nothing new. The workers' shapes are kept while the node and the PDB budgets
        are the same."""
        at = (node.version, self.pk.budgets.epoch)
        kept = self._movers.get(node.idx)
        if kept is None or kept[0] != at:
            cands = sorted(self._candidates(node), key=lambda kp: (-sum(t for t, _ in kp[1].taken), kp[0]))
            shapes = {_shape(p.task) for _, p in cands[:CANDIDATES_PER_NODE]}
            kept = self._movers[node.idx] = (at, tuple(shapes))
        known = list(map(movable.get, kept[1]))  # each True, False or None (not asked yet)
        return known.count(False) == len(known)

    def _combos_now(self, task: PTask, node: PNode, k: int) -> tuple[tuple[str, ...], ...]:
        if node.unschedulable or not self.pk.on_node[node.idx]:
            return ()
        if task.count and not any(self.pk.gpu_fits_free(task, g) for g in node.gpus):
            return ()  # no GPU of the node could ever take it (model, capacity)
        cands = self._candidates(node)
        if len(cands) < k:
            return ()
        if task.count == 1 and task.request is None:  # quick bound: some GPU must reach the share
            back: dict[int, float] = {}
            for _, p in cands:
                for pos, (t, _) in zip(p.gpus, p.taken, strict=True):
                    back[pos] = back.get(pos, 0.0) + t
            need = task.tflops if task.pct is None else 0.0
            if not any(g.free_t + back.get(pos, 0.0) >= need for pos, g in enumerate(node.gpus) if g.ok):
                return ()
        cands = sorted(cands, key=lambda kp: (-sum(t for t, _ in kp[1].taken), kp[0]))[:CANDIDATES_PER_NODE]
        if not fits_without(self.pk, task, node, [p for _, p in cands]):
            return ()  # not even with all of them gone
        out = []
        for combo in itertools.combinations(cands, k):
            pods = [p for _, p in combo]
            if not _pdb_ok(self.pk, pods):
                continue
            if fits_without(self.pk, task, node, pods):
                out.append(tuple(key for key, _ in combo))
        # the least GPU moved first: small workers are the easiest to place again
        out.sort(key=lambda keys: (sum(sum(t for t, _ in self.pk.pods[k].taken) for k in keys), keys))
        return tuple(out)

    def _try(
        self, task: PTask, node: PNode, subset: Sequence[str], trials: int, chain: int = 0
    ) -> tuple[Choice, Admission] | None:
        """Evict `subset`, place `task`, re-place the evicted (largest first); an evicted worker that
        fits nowhere may get room by one chain move while `chain` lasts. Undone unless all placed."""
        pk = self.pk
        journal: list[tuple[str, PPod | None]] = []  # (key, evicted pod) or (key, None): bound
        for key in subset:
            journal.append((key, pk.unbind(key)))
        removed = [(key, old) for key, old in journal if old is not None]
        choice = self.place(task, ())
        if choice is not None:
            pk.bind(task.key, task, *choice)
            journal.append((task.key, None))
            frozen = {task.key, *subset}
            moves: list[Move] = []
            for key, old in sorted(removed, key=lambda kp: (-sum(t for t, _ in kp[1].taken), kp[0])):
                to = self.place(old.task, ())
                if to is None and chain > 0:
                    done = self._chain(old, frozen, journal, moves)
                    if done is not None:
                        chain -= 1
                        to = done
                if to is None:
                    break
                pk.bind(key, old.task, *to, blocked=old.blocked, pdb=old.pdb)
                journal.append((key, None))
                moves.append(self._move(key, old, to))
            else:
                for _, gone in journal:
                    if gone is not None and gone.pdb is not None:
                        pk.budgets[gone.pdb] = pk.budgets.get(gone.pdb, 0) - 1
                pk.unbind(task.key)  # the caller binds the task itself
                n = pk.nodes[choice[0]]
                return choice, Admission(
                    n.name, tuple(n.gpus[p].name for p in choice[1]), tuple(moves), trials
                )
        for key, gone in reversed(journal):
            if gone is None:
                pk.unbind(key)
            else:
                pk.restore(key, gone)
        return None

    def _move(self, key: str, old: PPod, to: Choice) -> Move:
        target = self.pk.nodes[to[0]]
        return Move(key, self.pk.nodes[old.node].name, target.name, tuple(target.gpus[p].name for p in to[1]))

    def _chain(
        self, old: PPod, frozen: set[str], journal: list[tuple[str, PPod | None]], moves: list[Move]
    ) -> Choice | None:
        """Room for the evicted `old` by one more move: a worker of a node where one eviction lets
        `old` fit goes first (and must find a place itself). Returns where `old` goes (not bound);
        the chain move is bound, journalled and listed in `moves`."""
        pk = self.pk
        key0 = _shape(old.task)
        order = self._chain_order.get(key0)
        if order is None:
            if not self._near:  # the nodes with the most free GPU first, once per search
                self._near = [i for _, i in sorted((-n.max_t, n.idx) for n in pk.nodes)]
            order = []
            for i in self._near[:CHAIN_SCAN]:
                if self._bound(old.task, pk.nodes[i], key0) == 1:
                    order.append(i)
                    if len(order) >= CHAIN_NODES:
                        break
            self._chain_order[key0] = order
        tried = 0
        evicted = [o for _, o in journal if o is not None]
        for i in order:
            if tried >= CHAIN_NODES or self._chain_left <= 0:
                break
            subsets = [
                s
                for s in self._subsets(old.task, pk.nodes[i], 1, self._movable[1], False, key0)
                if s[0] not in frozen
            ]
            if not subsets:
                continue
            tried += 1
            for (qkey,) in subsets[:2]:
                q = pk.pods[qkey]
                if not _pdb_ok(pk, [*evicted, q]):
                    continue
                self._chain_left -= 1
                self.trials += 1
                pk.unbind(qkey)
                to = self.place(old.task, ())
                if to is not None:
                    pk.bind("\0chain", old.task, *to)  # old takes the room, then q is placed again
                    back = self.place(q.task, ())
                    if back is not None:
                        pk.bind(qkey, q.task, *back, blocked=q.blocked, pdb=q.pdb)
                    pk.unbind("\0chain")
                    if back is not None:
                        journal.append((qkey, q))
                        journal.append((qkey, None))
                        frozen.add(qkey)
                        moves.append(self._move(qkey, q, back))
                        return to
                pk.restore(qkey, q)
                if self._chain_left <= 0:
                    break
        return None


def _pdb_ok(pk: Packing, pods: Sequence[PPod]) -> bool:
    need: dict[str, int] = {}
    for p in pods:
        if p.pdb is not None:
            need[p.pdb] = need.get(p.pdb, 0) + 1
    return all(pk.budgets.get(b, 0) >= n for b, n in need.items())


def fits_without(pk: Packing, task: PTask, node: PNode, pods: Sequence[PPod]) -> bool:
    """Whether `task` would pass the node's filters with `pods` gone (GPU shares given back)."""
    back: dict[int, tuple[float, float]] = {}
    cpu = mem = 0.0
    workers = 0
    for p in pods:
        cpu += p.task.cpu
        mem += p.task.mem
        workers += 1 if p.task.count else 0
        for pos, (t, v) in zip(p.gpus, p.taken, strict=True):
            bt, bv = back.get(pos, (0.0, 0.0))
            back[pos] = (bt + t, bv + v)
    if task.cpu > node.cpu + cpu + 1e-9 or task.mem > node.mem + mem + 0.5 or node.pods + len(pods) < 1:
        return False
    if node.unschedulable:
        return False
    if task.count and pk.max_workers > 0 and node.workers - workers >= pk.max_workers:
        return False
    if not task.count:
        return True
    ok = 0
    if task.request is None:  # the plain filter (`Packing.gpu_fits`), without touching the GPUs
        models = task.models
        for pos, g in enumerate(node.gpus):
            if not g.ok or (models is not None and g.model not in models):
                continue
            bt, bv = back.get(pos, (0.0, 0.0))
            t, v = task.take(g)
            ok += g.free_t + bt >= t and g.free_v + bv >= v
        return ok >= task.count
    for pos, g in enumerate(node.gpus):
        bt, bv = back.get(pos, (0.0, 0.0))
        g.free_t += bt
        g.free_v += bv
        try:
            ok += pk.gpu_fits(task, g)
        finally:
            g.free_t -= bt
            g.free_v -= bv
    return ok >= task.count


def _shape(t: PTask) -> tuple[object, ...]:
    return (t.cpu, t.mem, t.count, t.tflops, t.vram, t.pct, t.models, t.request, t.pod)


def _dominates(task: PTask, smaller: PTask) -> bool:
    """`task` asks for at least what `smaller` asks, with the same constraints."""
    return (
        task.count == smaller.count
        and task.models == smaller.models
        and task.pct == smaller.pct
        and task.request == smaller.request
        and task.pod == smaller.pod
        and task.cpu >= smaller.cpu
        and task.mem >= smaller.mem
        and task.tflops >= smaller.tflops
        and task.vram >= smaller.vram
    )


def _cover(deficit: float, amounts: list[float]) -> int | None:
    """The fewest of `amounts` (largest first) that reach `deficit` (0 if none is needed)."""
    if deficit <= 1e-9:
        return 0
    total = 0.0
    for i, a in enumerate(sorted(amounts, reverse=True)):
        total += a
        if total >= deficit - 1e-9:
            return i + 1
    return None
