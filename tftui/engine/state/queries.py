"""The lookups of a `ClusterState` (a pool's nodes and GPUs, a node's or a GPU's workers, pods by
label): read-only answers over the indexes `ClusterState.build` made. A mixin, split from
`state/cluster.py` to keep each module small; the fields are the state's own."""

from __future__ import annotations

from typing import Any

from tftui.engine.state.views import GPUView, NodeView, PoolView, WorkerView, WorkloadView
from tftui.model.snapshot import Snapshot


class StateQueries:
    """Lookups over a built state (a mixin of `ClusterState`, whose fields these are)."""

    __slots__ = ()

    pools: dict[str, PoolView]
    nodes: dict[str, NodeView]
    gpus: dict[str, GPUView]
    workers: dict[str, WorkerView]
    workloads: dict[str, WorkloadView]
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
