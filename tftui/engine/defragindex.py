"""Defrag's per-call index and context, and the node utilisation figures its decisions start from.

The index is derived once per state (`ClusterState.derived`) and the context once per step, so
eligibility and simulation look pods, PDBs and markers up by node instead of scanning the snapshot;
kept apart from the step so the eligibility and simulation modules use it without importing the step.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from tftui.engine.defragconfig import (
    USED_BY_TF,
    DefragConfig,
    _annotations,
    _aware,
    _labels,
    _meta,
    _selector_matches,
)
from tftui.engine.plan import Action, pool_event
from tftui.engine.state import ClusterState, GPUView, NodeView, Res, WorkerView
from tftui.model import keys
from tftui.model.selectors import pdb_selects

# -- per-call index ------------------------------------------------------------------------------

_Ranked = list[tuple[int, dict[str, Any]]]
_PdbIndex = tuple[dict[str, dict[tuple[str, str], _Ranked]], dict[str, _Ranked]]
_PDBS: Final = "carried/defrag-pdbs"  # `_PdbCarry`: `incremental.CARRIED` keeps it for the next states


@dataclass(slots=True)
class _PdbCarry:
    """The PDBs an index was last built from (the list, whose dicts it keeps alive) and that index:
    kept on the state (`_PDBS`) and carried to the states derived from it, whose index is the same
    one while their PDBs are the very same dicts, and the same one with the changed dicts put in
    while only statuses changed (rank and matchLabels pair come from metadata and spec only)."""

    pdbs: list[dict[str, Any]] | None = None
    index: _PdbIndex | None = None


class _Index:
    """The pool-independent part of a step's index, derived once per `ClusterState` (the state
    never changes after `build`), so the steps of every pool and every quiet reconcile share it.
    What only a due campaign reads (workers per node, PDBs) is built on first use."""

    def __init__(self, state: ClusterState) -> None:
        # the parts of the state read later, not the state: kept in the state's `derived`, an
        # index holding its state would make a reference cycle, and every replaced state (its
        # unshared views) would wait for the cyclic GC instead of being freed at once
        self.nodes, self.workers = state.nodes, state.workers
        self.snapshot, self.state_pdbs = state.snapshot, state.pdbs
        # (every object of a built state has its metadata: the build reads it)
        self.k8s_nodes: dict[str, dict[str, Any]] = {
            n["metadata"].get("name", ""): n for n in state.snapshot.kind("Node")
        }
        # what the safety sweep looks at: pods labelled defrag-evicted (by namespace, name) and the
        # Nodes labelled defrag-source or defrag-evict-skip (by name); the rest cannot carry a marker
        evicted = state.pods_labelled(keys.DEFRAG_EVICTED, keys.TRUE)
        self.evicted_pods = sorted(
            evicted, key=lambda o: (_meta(o).get("namespace", ""), _meta(o).get("name", ""))
        )
        self.marked_nodes = sorted(
            name
            for name, n in self.k8s_nodes.items()
            if _labels(n).get(keys.DEFRAG_SOURCE) == keys.TRUE
            or _labels(n).get(keys.DEFRAG_EVICT_SKIP) == keys.TRUE
        )
        self._workers: dict[str, tuple[list[WorkerView], list[WorkerView]]] = {}
        self._elsewhere: dict[str, tuple[list[WorkerView], list[WorkerView]]] | None = None
        self._terminating: set[str] | None = None
        self._pdbs: _PdbIndex | None = None
        # the PDB index of an earlier state, and where this one's goes (a box, not the state)
        before = state._derived.get(_PDBS)
        self._pdb_carry = (
            _PdbCarry(before.pdbs, before.index) if isinstance(before, _PdbCarry) else _PdbCarry()
        )
        state._derived[_PDBS] = self._pdb_carry

    def workers_on(self, node: str) -> tuple[list[WorkerView], list[WorkerView]]:
        """(live, terminating) workers on `node`, sorted by key."""
        got = self._workers.get(node)
        if got is not None:
            return got
        nv = self.nodes.get(node)
        if nv is not None:  # a GPUNode lists every worker whose spec.nodeName names it
            views = sorted((self.workers[k] for k in nv.workers), key=lambda w: w.key)
            got = ([w for w in views if not w.terminating], [w for w in views if w.terminating])
        else:  # a Node without a GPUNode: found by a scan, once per state
            if self._elsewhere is None:
                self._elsewhere = {}
                for w in sorted(self.workers.values(), key=lambda w: w.key):
                    if w.node and w.node not in self.nodes:
                        live, leaving = self._elsewhere.setdefault(w.node, ([], []))
                        (leaving if w.terminating else live).append(w)
            got = self._elsewhere.get(node, ([], []))
        self._workers[node] = got
        return got

    @property
    def terminating_pods(self) -> set[str]:
        if self._terminating is None:
            metas = map(operator.itemgetter("metadata"), self.snapshot.kind("Pod"))  # (as above)
            self._terminating = {
                f"{m.get('namespace', '')}/{m.get('name')}" for m in metas if m.get("deletionTimestamp")
            }
        return self._terminating

    @property
    def pdbs(self) -> _PdbIndex:
        """PDBs by namespace, then by one of their matchLabels pairs (so a pod only tests PDBs that
        can match it), and PDBs with matchExpressions only, tested for every pod. Values: (rank, PDB)."""
        if self._pdbs is None:
            carry = self._pdb_carry
            got = _carried_pdbs(self.state_pdbs, carry.pdbs, carry.index)
            self._pdbs = got if got is not None else _pdb_index(self.state_pdbs)
            carry.pdbs, carry.index = self.state_pdbs, self._pdbs
        return self._pdbs


def _pdb_index(pdbs: list[dict[str, Any]]) -> _PdbIndex:
    pairs: dict[str, dict[tuple[str, str], _Ranked]] = {}
    scan: dict[str, _Ranked] = {}
    ranked = sorted(pdbs, key=lambda o: (_meta(o).get("namespace", ""), _meta(o).get("name", "")))
    for rank, pdb in enumerate(ranked):
        ns = _meta(pdb).get("namespace", "")
        selector = (pdb.get("spec") or {}).get("selector")
        ml = selector.get("matchLabels") if isinstance(selector, dict) else None
        if isinstance(ml, dict) and ml:
            pair = min(ml.items())
            pairs.setdefault(ns, {}).setdefault(pair, []).append((rank, pdb))
        else:
            scan.setdefault(ns, []).append((rank, pdb))
    return pairs, scan


def _carried_pdbs(
    pdbs: list[dict[str, Any]], before: list[dict[str, Any]] | None, index: _PdbIndex | None
) -> _PdbIndex | None:
    """`_pdb_index(pdbs)` from the index of `before` (None: it cannot be told so): the same index
    while every PDB is the very same dict; while each is one with the very same metadata and spec
    in the same place (a status pass replaced it), that index with the new dicts put in."""
    if before is None or index is None or len(before) != len(pdbs):
        return None
    if all(map(operator.is_, pdbs, before)):
        return index
    swap: dict[int, dict[str, Any]] = {}
    for new, old in zip(pdbs, before, strict=True):
        if new is not old:
            if new.get("metadata") is not old.get("metadata") or new.get("spec") is not old.get("spec"):
                return None
            swap[id(old)] = new
    pairs, scan = index
    get = swap.get
    return (
        {
            ns: {pair: [(r, get(id(p), p)) for r, p in lst] for pair, lst in d.items()}
            for ns, d in pairs.items()
        },
        {ns: [(r, get(id(p), p)) for r, p in lst] for ns, lst in scan.items()},
    )


@dataclass(slots=True)
class _Ctx:
    """What one step needs from the snapshot: the state's shared `_Index` (all lists sorted by
    name; read-only) plus this step's pool, config and time."""

    state: ClusterState
    pool: str
    cfg: DefragConfig
    now: datetime
    max_workers: int
    index: _Index

    @property
    def k8s_nodes(self) -> dict[str, dict[str, Any]]:
        return self.index.k8s_nodes

    @property
    def terminating_pods(self) -> set[str]:
        return self.index.terminating_pods

    def active(self, node: str) -> list[WorkerView]:
        """The node's live workers, sorted by key."""
        return self.index.workers_on(node)[0]

    def leaving(self, node: str) -> list[WorkerView]:
        """The node's terminating workers, sorted by key."""
        return self.index.workers_on(node)[1]

    @classmethod
    def build(
        cls, state: ClusterState, pool: str, cfg: DefragConfig, now: datetime, max_workers: int
    ) -> _Ctx:
        return cls(state, pool, cfg, now.astimezone(UTC), max_workers, state.derived("defrag", _Index))

    def event(self, type_: Literal["Normal", "Warning"], reason: str, message: str) -> Action:
        return pool_event(self.pool, type_, reason, message)

    def covering(self, w: WorkerView) -> list[dict[str, Any]]:
        """PDBs (non-empty selector) in the worker's namespace that select it."""
        labels = _labels(w.obj)
        return [
            p
            for p in self._maybe(w, labels)
            if _selector_matches((p.get("spec") or {}).get("selector"), labels)
        ]

    def checked(self, w: WorkerView) -> list[dict[str, Any]]:
        """PDBs the Eviction API checks for the worker: `covering`, and those with an empty selector."""
        labels = _labels(w.obj)
        return [
            p for p in self._maybe(w, labels) if pdb_selects((p.get("spec") or {}).get("selector"), labels)
        ]

    def _maybe(self, w: WorkerView, labels: dict[str, str]) -> list[dict[str, Any]]:
        """The namespace's PDBs that may select the worker, by rank (name order)."""
        pdb_pairs, pdb_scan = self.index.pdbs
        pairs = pdb_pairs.get(w.namespace, {})
        maybe = list(pdb_scan.get(w.namespace, ()))
        for item in labels.items():
            maybe += pairs.get(item, ())
        maybe.sort(key=lambda rp: rp[0])
        return [p for _, p in maybe]

    def owned(self, obj: dict[str, Any] | None, label: str, pool_key: str) -> bool:
        return _labels(obj).get(label) == keys.TRUE and _annotations(obj).get(pool_key) == self.pool

    def fresh(self, w: WorkerView) -> bool:
        created = _aware(w.created)
        return created is not None and self.now - created < self.cfg.max_duration


# -- node figures ----------------------------------------------------------------------------------


def _pool_gpus(state: ClusterState, node: NodeView, pool: str) -> list[GPUView]:
    """The node's GPUs that count for `pool` (D3, as upstream): labelled for the pool
    (`tensor-fusion.ai/gpupool`, as compaction counts them), TF-usable, capacity set.
    Derived once per state and pool (read-only)."""
    pv = state.pools.get(pool)
    per_node = state.derived_per_node(
        f"defrag-pool-gpus/{pool}", pv.nodes if pv else (), lambda st, n: _node_pool_gpus(st, n, pool)
    )
    got = per_node.get(node.name)
    return got if got is not None else _node_pool_gpus(state, node, pool)


def _node_pool_gpus(state: ClusterState, node: NodeView, pool: str) -> list[GPUView]:
    out = []
    for g in sorted(state.gpus_of(node.name), key=lambda g: g.name):
        cap = (g.obj.get("status") or {}).get("capacity") or {}
        if (
            (g.obj["metadata"].get("labels") or {}).get(keys.GPUPOOL) == pool
            and g.used_by in ("", USED_BY_TF)
            and cap.get("tflops") is not None
            and cap.get("vram") is not None
        ):
            out.append(g)
    return out


def _is_used(capacity: Res, available: Res) -> bool:
    """D3 (upstream's definition): used when available < capacity in TFLOPS or VRAM."""
    return available.tflops < capacity.tflops or available.vram < capacity.vram


def _util(used: int, total: int) -> float:
    return used * 100.0 / total if total else 0.0


def gpu_utilization(state: ClusterState, node: NodeView, pool: str) -> tuple[int, int]:
    """(GPUs in use, GPUs that count) of `node` for `pool`: the utilization defrag compares with
    its threshold (the share of the node's pool GPUs with something allocated, not TFLOPS)."""
    pv = state.pools.get(pool)
    per_node = state.derived_per_node(
        f"defrag-utilization/{pool}", pv.nodes if pv else (), lambda st, n: _node_utilization(st, n, pool)
    )
    got = per_node.get(node.name)
    return got if got is not None else _node_utilization(state, node, pool)


def _node_utilization(state: ClusterState, node: NodeView, pool: str) -> tuple[int, int]:
    gpus = _pool_gpus(state, node, pool)
    return sum(1 for g in gpus if _is_used(g.capacity, g.available)), len(gpus)
