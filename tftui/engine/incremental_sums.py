"""The last steps of an incremental state build (`engine.incremental`): every pool's node list and
sums, the workload views, and the compaction sums by pool label. Split from `incremental` to keep
each module small; `_Update` inherits these steps and provides `prev`, `st`, `_diff` and `_known`.
Equal to the full build for the same reasons as the rest of the path (same objects, same order)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from tftui.engine.snapdelta import KindDelta, appended_in_order
from tftui.engine.snapdelta import in_order as _in_order
from tftui.engine.snapdelta import ordered as _ordered
from tftui.engine.state.cluster import ClusterState
from tftui.engine.state.derive import add_compaction_sums, add_node_to_pool, convert_percent, virtual_capacity
from tftui.engine.state.views import GPUView, Res, WorkerView, WorkloadView
from tftui.model import keys
from tftui.model.giveway import paced


class _Fallback(Exception):
    """A change the incremental path does not handle: build from scratch instead."""


def _label_pool(gpu: GPUView) -> str | None:
    return (gpu.obj["metadata"].get("labels") or {}).get(keys.GPUPOOL)


class WorkloadsAndSums:
    """The steps after the nodes, GPUs, workers and allocations are derived (a mixin of `_Update`)."""

    prev: ClusterState
    st: ClusterState
    delta: dict[str, KindDelta | None] | None

    def _kept_order(self, kind: str, views: dict[str, Any], appended: int, pos: dict[int, int]) -> bool:
        """Whether `views` (the previous views with some replaced or dropped, then `appended` new
        ones added in snapshot order) are in snapshot order without a pass over them: the source's
        change set says no key of `kind` moved (a replaced object keeps its place, new objects come
        last), so the kept views are in order, and the new ones need only come after them."""
        return (
            self.delta is not None
            and self.delta.get(kind) is not None
            and appended_in_order(views, appended, pos)
        )

    def _diff(self, kind: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, int]]:
        raise NotImplementedError

    def _known(self, w: WorkerView) -> list[str]:
        raise NotImplementedError

    def _pools(self) -> None:
        """Every pool's node list and sums, and every node's allocation and virtual figures, as
        `_aggregate` does (nodes whose GPUs did not change keep theirs: recomputed, equal). A pool
        whose nodes are the previous state's very views, in the same order, keeps its sums (summed
        over the same figures in the same order: equal); the others are summed again."""
        st = self.st
        for name, node in paced(st.nodes.items()):
            pool = st.pools.get(node.pool) if node.pool else None
            if pool is not None:
                pool.nodes.append(name)
        prev_nodes = self.prev.nodes
        fresh: set[str] = set()  # pools with a fresh node view
        for node in paced(st.nodes.values()):
            if prev_nodes.get(node.name) is not node:  # a fresh view: its sums are still to do
                for g in node.gpus:
                    node.allocated.add(st.gpus[g].allocated)
                pool = st.pools.get(node.pool) if node.pool else None
                node.virtual = virtual_capacity(node, pool)
                if node.pool:
                    fresh.add(node.pool)
        prev_pools = self.prev.pools
        for pool in st.pools.values():
            old = prev_pools.get(pool.name)
            if pool.name not in fresh and old is not None and old.nodes == pool.nodes:
                pool.capacity, pool.allocated = old.capacity.copy(), old.allocated.copy()
                pool.limits, pool.virtual = old.limits.copy(), old.virtual.copy()
                pool.gpu_count, pool.worker_count = old.gpu_count, old.worker_count
                continue
            for name in paced(pool.nodes):
                add_node_to_pool(pool, st.nodes[name])

    # -- workloads ---------------------------------------------------------------------------------

    def _workloads(self, gone: list[WorkerView], new: list[WorkerView], order: Callable[[str], int]) -> None:
        prev, st = self.prev, self.st
        gone_keys = {w.key for w in gone}
        touched: dict[str, set[str]] = {}  # workload → its new workers
        for w in gone:
            if w.workload:
                touched.setdefault(f"{w.namespace}/{w.workload}", set())
        for w in new:
            if w.workload:
                touched.setdefault(f"{w.namespace}/{w.workload}", set()).add(w.key)
        added, removed, pos = self._diff("TensorFusionWorkload")
        views = dict(prev.workloads)
        prev_local = [k for k, v in views.items() if v.obj is None]
        for key in prev_local:
            del views[key]  # local-GPU workloads come after the others: re-added below
        removed_ids = {id(o) for o in removed}
        fresh: set[str] = set()
        appended = 0  # views of keys not among the kept ones: added last
        for wl in paced(_in_order(added, pos)):
            view = st._workload_view(wl)
            old = views.get(view.key)
            if view.key in fresh or (old is not None and id(old.obj) not in removed_ids):
                raise _Fallback  # two workloads of one name
            appended += old is None
            views[view.key] = view
            fresh.add(view.key)
        for wl in removed:
            meta = wl["metadata"]
            key = f"{meta.get('namespace', '')}/{meta['name']}"
            old = views.get(key)
            if old is not None and old.obj is wl:
                del views[key]
                prev_local.append(key)  # its workers (if any) now make it a local-GPU workload
        kept = self._kept_order("TensorFusionWorkload", views, appended, pos)
        st.workloads = views if kept else _ordered(views, pos)
        local: dict[str, set[str]] = {}
        for key in prev_local:
            if key not in st.workloads:  # no object (any more): made from its first worker
                local[key] = {k for k in prev.workloads[key].workers if k not in gone_keys}
        for key, members in touched.items():
            if key not in st.workloads:
                local.setdefault(key, set()).update(members)
        for key in paced(fresh | touched.keys()):
            cur = st.workloads.get(key)
            if cur is None:
                continue
            old = prev.workloads.get(key)
            members = {k for k in (old.workers if old is not None else ()) if k not in gone_keys}
            members |= touched.get(key, set())
            if cur is old or cur.workers:
                cur = replace(cur, workers=[], allocated=Res())
            self._fill(cur, members, order)
            st.workloads[key] = cur
        firsts = []
        for key, members in paced(local.items()):
            if not members:
                continue
            ranked = sorted(members, key=order)
            old = prev.workloads.get(key)
            if old is not None and old.obj is None and old.workers == ranked and key not in touched:
                view = old
            else:
                view = st._local_workload(st.workers[ranked[0]], key)
                self._fill(view, members, order)
            firsts.append((order(ranked[0]), key, view))
        for _, key, view in sorted(firsts):
            st.workloads[key] = view

    def _fill(self, view: WorkloadView, members: set[str], order: Callable[[str], int]) -> None:
        st = self.st
        if view.percent != (None, None) and view.obj is not None:  # TFLOPS follow the first worker's GPU
            base = st._workload_view(view.obj)
            view.request, view.limit = base.request, base.limit
        for k in sorted(members, key=order):
            w = st.workers[k]
            view.workers.append(k)
            booked = Res()
            known = self._known(w)
            for g in known:
                booked.add(st.booking(w, st.gpus[g]) or w.request)
            view.allocated.add(booked)
            if len(view.workers) == 1 and known:
                convert_percent(view, st.gpus[known[0]].capacity.tflops, None)

    # -- labels and compaction sums ------------------------------------------------------------------

    def _labels_and_sums(self, labels_dirty: bool, node_dirty: set[str | None]) -> None:
        prev, st = self.prev, self.st
        if labels_dirty:
            for name, gpu in paced(st.gpus.items()):
                label = _label_pool(gpu)
                if label:
                    st.gpus_by_pool_label.setdefault(label, []).append(name)
        else:
            st.gpus_by_pool_label = prev.gpus_by_pool_label  # the same lists (read-only)
        sums: dict[str, dict[str, list[int]]] = {}
        if labels_dirty:
            nodes: Iterable[str | None] = st.nodes
            for label in st.gpus_by_pool_label:
                sums[label] = {}
        else:
            nodes = node_dirty
            for label, per_node in prev.compaction_sums.items():
                sums[label] = {n: acc for n, acc in per_node.items() if n not in node_dirty}
        for n in paced(nodes):
            nv = st.nodes.get(n or "")
            if nv is None:
                continue
            for g in nv.gpus:  # every GPU naming a node is on a GPUNode's list (else: a warning)
                gpu = st.gpus[g]
                label = _label_pool(gpu)
                if label:
                    add_compaction_sums(sums[label], gpu)
        st.compaction_sums = sums
