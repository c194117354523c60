"""Per-node values derived from a `ClusterState`, re-used from an earlier state where a node did
not change. A mixin of `ClusterState`, split from `state/cluster.py` to keep each module small.

A state derived incrementally (`engine.incremental`) shares the views of unchanged objects with the
state it was derived from, and views are never changed. A value that reads nothing but a node's view
and its GPUs' views is therefore the same for every node whose views are the very objects of an
earlier state that computed it. The earlier state is found two ways: the basis itself, while it is
alive (a weak reference: no chain of states is kept alive), and a carried basis — the node and GPU
dicts of the last state that computed the value, with its values — that `carry_bases` hands from
each state to the next (`ClusterState.derived_from`). The simulators replace a state at every
change (a scheduler pass, a status pass) and compute these values only on the states a reconcile
reads, so the weak reference alone almost never found its basis. (This module imports no state
module: `ClusterState` mixes it in.)"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from tftui.engine.state.views import GPUView, NodeView
from tftui.model.giveway import paced

T = TypeVar("T")

BASES = "per-node-bases"
"""`_derived` key: value key → (nodes, GPUs, values) of the last earlier state that computed it."""

MADE = "per-node-made"
"""`_derived` key: the value keys this state computed with `derived_per_node`."""

Basis = tuple[dict[str, NodeView], dict[str, GPUView], dict[str, Any]]


class PerNodeDerived:
    """`derived_per_node` and the bases it re-uses (a mixin of `ClusterState`, whose fields these are)."""

    __slots__ = ()

    nodes: dict[str, NodeView]
    gpus: dict[str, GPUView]
    _derived: dict[str, Any]

    def derived_per_node(
        self, key: str, names: Iterable[str], make: Callable[[Any, NodeView], T]
    ) -> dict[str, T]:
        """Node name → `make(self, node)` for the nodes `names`, computed once per state under
        `key`. `make` may read nothing but the node's view and its GPUs' views: a state derived
        from a basis then re-uses the basis's value for every node whose view and GPU views are
        the very objects of the basis (a refresh changes a few nodes of thousands)."""
        got: dict[str, T] | None = self._derived.get(key)
        if got is not None:
            return got
        basis = self._node_basis(key)
        out: dict[str, T] = {}
        state: Any = self  # (the `ClusterState` this mixes into: `make` takes it)
        for name in paced(names):  # on a refresh thread: a key waits for a stride, not every node
            node = self.nodes[name]
            if (
                basis is not None
                and name in basis[2]
                and basis[0].get(name) is node
                and all(
                    map(operator.is_, map(self.gpus.__getitem__, node.gpus), map(basis[1].get, node.gpus))
                )
            ):
                out[name] = basis[2][name]
            else:
                out[name] = make(state, node)
        self._derived[key] = out
        self._derived.setdefault(MADE, set()).add(key)
        return out

    def _node_basis(self, key: str) -> Basis | None:
        got = self.basis_derived(key)
        if got is not None:
            return got[0].nodes, got[0].gpus, got[1]
        bases: dict[str, Basis] | None = self._derived.get(BASES)
        return bases.get(key) if bases is not None else None

    def carry_bases(self, basis: PerNodeDerived) -> None:
        """Hand this state, derived from `basis`, the per-node values `basis` computed or was
        handed (the latest for each key)."""
        bases: dict[str, Basis] = dict(basis._derived.get(BASES) or {})
        for key in basis._derived.get(MADE) or ():
            bases[key] = (basis.nodes, basis.gpus, basis._derived[key])
        if bases:
            self._derived[BASES] = bases

    def basis_derived(self, key: str) -> tuple[Any, Any] | None:
        """(the basis state, its value under `key`): see `ClusterState.basis_derived`."""
        raise NotImplementedError
