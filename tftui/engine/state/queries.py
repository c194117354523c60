"""The lookups of a `ClusterState` (a pool's nodes and GPUs, a node's or a GPU's workers, pods by
label): read-only answers over the indexes `ClusterState.build` made. A mixin, split from
`state/cluster.py` to keep each module small; the fields are the state's own."""

from __future__ import annotations

from typing import Any

from tftui.engine.state.derive import blocked_pools_of
from tftui.engine.state.views import GPUView, NodeView, PoolView, StateWarning, WorkerView, WorkloadView
from tftui.model.snapshot import Snapshot


class StateQueries:
    """Lookups over a built state (a mixin of `ClusterState`, whose fields these are)."""

    __slots__ = ()

    pools: dict[str, PoolView]
    nodes: dict[str, NodeView]
    gpus: dict[str, GPUView]
    workers: dict[str, WorkerView]
    workloads: dict[str, WorkloadView]
    warnings: list[StateWarning]
    snapshot: Snapshot
    _derived: dict[str, Any]

    def labelled_pods(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """(label, value) → the pods carrying it, in snapshot order: the answers `pods_labelled`
        gave so far (an incremental build carries them over to the next state)."""
        got: dict[tuple[str, str], list[dict[str, Any]]] = self._derived.setdefault("labelled-pods", {})
        return got

    def pods_labelled(self, key: str, value: str) -> list[dict[str, Any]]:
        """The pods (any pod, not only workers) whose label `key` is `value`, in snapshot order.
        Read-only."""
        known = self.labelled_pods()
        got = known.get((key, value))
        if got is None:
            got = known[(key, value)] = [
                p
                for p in self.snapshot.kind("Pod")
                if ((p.get("metadata") or {}).get("labels") or {}).get(key) == value
            ]
        return got

    def nodes_of(self, pool: str) -> list[NodeView]:
        pv = self.pools.get(pool)
        return [self.nodes[n] for n in pv.nodes] if pv else []

    def gpus_of(self, node: str) -> list[GPUView]:
        nv = self.nodes.get(node)
        return [self.gpus[g] for g in nv.gpus] if nv else []

    def workers_of_node(self, node: str) -> list[WorkerView]:
        nv = self.nodes.get(node)
        return [self.workers[w] for w in nv.workers] if nv else []

    def workers_of_gpu(self, gpu: str) -> list[WorkerView]:
        gv = self.gpus.get(gpu)
        return [self.workers[w] for w in gv.workers] if gv else []

    def workers_of_workload(self, key: str) -> list[WorkerView]:
        wv = self.workloads.get(key)
        return [self.workers[w] for w in wv.workers] if wv else []

    def blocked_pools(self) -> dict[str, StateWarning]:
        """Pool → the first blocking warning on one of its objects (its pool, nodes, GPUs, workers,
        workloads): the engine's figures for that pool are not to be trusted, so it is not acted on.
        Computed once per state (see `ClusterState.derived`)."""
        got: dict[str, StateWarning] | None = self._derived.get("blocked-pools")
        if got is None:
            got = self._derived["blocked-pools"] = blocked_pools_of(
                self.warnings, self.pools, self.nodes, self.gpus, self.workers, self.workloads
            )
        return got

    def gpus_in_pool(self, pool: str) -> list[GPUView]:
        """The GPUs whose pool is `pool`, sorted by name (every placement starts from them; computed
        once per state, the state is never changed after `build`). Treat as read-only."""
        by_pool: dict[str | None, list[GPUView]] | None = self._derived.get("pool-gpus")
        if by_pool is None:  # built aside, then published whole: safe if two threads race here
            by_pool = {}
            for g in self.gpus.values():
                by_pool.setdefault(g.pool, []).append(g)
            for lst in by_pool.values():
                lst.sort(key=lambda g: g.name)
            self._derived["pool-gpus"] = by_pool
        return by_pool.get(pool, [])
