"""Incremental `ClusterState`: the state of a new snapshot, derived from the previous state.

A simulated cluster (and a watch cache) replaces the dict of an object that changed and hands the
same dict again for one that did not, so the views of unchanged objects can be shared with the
previous state (a state is never changed after it is built) and only what a change reaches is
recomputed: a changed pod's worker, the GPUs it names, their nodes, its workload, then every pool's
sums. Each recomputed figure is summed over the same objects in the same order as `build` does, so
the result is **equal** to `ClusterState.build(snapshot)` — same views, same list and dict order,
same floats. Whatever this path does not handle (any warning but a GPU's over-allocation, which
it recomputes and writes as the full build does, a changed pool configuration, duplicate names)
falls back to the full build. Cost: a few dict operations per object instead of
parsing every object again.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from tftui.engine.incremental_sums import WorkloadsAndSums, _Fallback, _label_pool
from tftui.engine.snapdelta import DeltaSnapshot, KindDelta, appended_in_order, identity_changes
from tftui.engine.snapdelta import in_order as _in_order
from tftui.engine.snapdelta import ordered as _ordered
from tftui.engine.snapdelta import positions as _positions
from tftui.engine.state.cluster import ClusterState
from tftui.engine.state.derive import (
    add_partition,
)
from tftui.engine.state.views import (
    OVER_ALLOCATED,
    Res,
    StateWarning,
    WorkerView,
    _ref,
    over_allocated,
    over_allocated_gpus,
)
from tftui.model import keys
from tftui.model.gcpause import gc_paused
from tftui.model.giveway import checkpoint, paced
from tftui.model.snapshot import Snapshot

__all__ = ["update_state"]


CARRIED = "carried/"
"""Prefix of the `ClusterState.derived` keys an incremental state takes over from the state it is
derived from when it has none of its own: a module's counts that hold no state and stay valid for
any later snapshot of the same objects (`nodefit`'s pods per node, diffed by identity)."""


def update_state(prev: ClusterState, source: Snapshot | Iterable[dict[str, Any]]) -> ClusterState:
    """The `ClusterState` of `source`, equal to `ClusterState.build(source)`, reusing `prev`'s views
    of the objects that are the very same dicts in both snapshots."""
    snap = source if isinstance(source, Snapshot) else Snapshot.of(source)
    delta = snap.take(prev.snapshot) if isinstance(snap, DeltaSnapshot) else None
    over = over_allocated_gpus(prev.warnings, prev.gpus)
    if over is None:
        return ClusterState.build(snap)
    with gc_paused():
        try:
            state = _Update(prev, snap, delta, over).run()
            state.derived_from(prev)
            for key, value in prev._derived.items():  # counts a module derives the next ones from
                if key.startswith(CARRIED):  # (`nodefit.rooms`), kept through the states without
                    state._derived.setdefault(key, value)
            return state
        except _Fallback:
            pass
    return ClusterState.build(snap)


def _changes(
    old: list[dict[str, Any]], new: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, int]]:
    """`snapdelta.identity_changes`; unchanged objects that changed places make every
    order-dependent list differ: the full build instead."""
    found = identity_changes(old, new)
    if found is None:
        raise _Fallback
    return found


def _worker_views_of(prev: ClusterState, pods: list[dict[str, Any]]) -> list[WorkerView]:
    """`prev`'s worker views of these pod objects (pods that were not live workers have none)."""
    out = []
    for p in pods:
        meta = p["metadata"]
        w = prev.workers.get(f"{meta.get('namespace', '')}/{meta['name']}")
        if w is not None and w.obj is p:
            out.append(w)
    return out


_NATIVE_PODS = "incremental-native-gpu-pods"
"""Derived key: node → the pod objects of its native-GPU pods (kept for the next update)."""


def _pod_key(pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _pool_config(st: ClusterState) -> list[tuple[str, int, int, int]]:
    return [(p.name, p.tflops_oversell, p.vram_expand_mem, p.vram_expand_disk) for p in st.pools.values()]


class _Update(WorkloadsAndSums):
    """One incremental build (see the module docstring); `run` raises `_Fallback` when it cannot."""

    def __init__(
        self, prev: ClusterState, snap: Snapshot, delta: dict[str, KindDelta | None] | None, over: set[str]
    ) -> None:
        self.prev = prev
        self.over = over  # the over-allocated GPUs (the previous state's, then as reallocated here)
        self.snap = snap
        self.delta = delta  # what the source says changed (`DeltaSnapshot`), else None
        self.st = ClusterState(snapshot=snap)
        self.pods_pos: dict[int, int] = {}  # position of each pod in the snapshot, by id (pods changed)
        self.pods_removed: set[int] = set()  # ids of the pod objects that went
        self.native_added: list[dict[str, Any]] = []  # new non-worker pods, in snapshot order
        self.node_struct = False  # a node came, went or moved: every pod's native node is redone

    def _diff(self, kind: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, int]]:
        """`_changes` of one kind, from the source's change set when it handed one (O(changed))."""
        got = self._source_changes(kind)
        if got is not None:
            return got if got[0] or got[1] else ([], [], {})
        return _changes(self.prev.snapshot.kind(kind), self.snap.kind(kind))

    def _rank(self) -> Callable[[str], int]:
        """Worker key → a number that grows with its place in `st.workers` (members are sorted by
        it): its pod's position in the snapshot, which the workers follow, when the pods changed
        (positions then cover every pod); else its index, from a pass over every worker."""
        workers, pos = self.st.workers, self.pods_pos
        if pos:
            return lambda key: pos[id(workers[key].obj)]
        return dict(zip(workers, itertools.count())).__getitem__

    def _same(self, kind: str) -> bool:
        """Whether the source says no object of `kind` changed (its list is the previous one)."""
        return (
            self.delta is not None
            and kind not in self.delta
            and self.snap.kind(kind) is self.prev.snapshot.kind(kind)
        )

    def run(self) -> ClusterState:
        prev, snap, st = self.prev, self.snap, self.st
        st.index_raw_kinds(snap)  # as a full build does (a handful of objects)
        if st.warnings or _pool_config(st) != _pool_config(prev) or st.providers != prev.providers:
            raise _Fallback  # node figures depend on the pools' oversubscription, bookings on the catalogue

        node_struct, node_dirty = self._nodes()
        checkpoint()
        changed_gpus, gpu_list_dirty, recheck, labels_dirty, left = self._gpus(node_struct)
        checkpoint()
        gone, new, native_dirty = self._workers(recheck, node_struct)
        checkpoint()
        order = self._rank()
        alloc_dirty = self._allocations(changed_gpus, gone, new, order)
        checkpoint()
        for g in changed_gpus | alloc_dirty:
            node_dirty.add(st.gpus[g].node)
            old_gpu = prev.gpus.get(g)
            if old_gpu is not None:
                node_dirty.add(old_gpu.node)
        node_dirty |= left
        for w in gone:
            node_dirty.add(w.node)
        for w in new:
            node_dirty.add(w.node)
        node_dirty |= native_dirty
        node_dirty.discard(None)
        self._node_views(
            {n for n in node_dirty if n in st.nodes}, gpu_list_dirty, gone, new, order, native_dirty
        )
        checkpoint()
        self._pools()
        checkpoint()
        self._workloads(gone, new, order)
        checkpoint()
        self._labels_and_sums(labels_dirty, node_dirty)
        if st.warnings:
            raise _Fallback  # warnings come in build order; let the full build write them
        if self.over:  # the full build's only warnings, written last in GPU order
            over = self.over
            st.warnings = [StateWarning(_ref(g.obj), OVER_ALLOCATED) for n, g in st.gpus.items() if n in over]
        if _NATIVE_PODS not in st._derived and _NATIVE_PODS in prev._derived and not self.node_struct:
            # kept for the next update (no node of this one needed it): the same pods, or a few
            # new or gone ones to carry over
            if self.pods_pos:
                self._native_pods()
            else:
                st._derived[_NATIVE_PODS] = prev._derived[_NATIVE_PODS]
        return st

    # -- nodes -------------------------------------------------------------------------------------

    def _nodes(self) -> tuple[set[str], set[str | None]]:
        """GPUNode views: the previous one while its objects are the same dicts, else a fresh one.
        Returns (nodes added, removed or moved to another pool; nodes whose objects changed)."""
        prev, st = self.prev, self.st
        if self._same("Node") and self._same("GPUNode"):
            st.nodes = dict(prev.nodes)  # the same objects: the same views, in the same order
            return set(), set()
        got = self._nodes_from_changes()
        if got is not None:
            return got
        k8s_nodes = self._k8s_nodes()
        struct: set[str] = set()
        dirty: set[str | None] = set()
        for gn in paced(self.snap.kind("GPUNode")):
            name = gn["metadata"]["name"]
            if name in st.nodes:
                raise _Fallback
            old = prev.nodes.get(name)
            k8s = k8s_nodes.get(name)
            if old is not None and old.obj is gn and old.node_obj is k8s:
                st.nodes[name] = old
                continue
            view = st._node_view(gn, k8s)
            st.nodes[name] = view
            dirty.add(name)
            if old is None or old.pool != view.pool:
                struct.add(name)
        struct.update(n for n in prev.nodes if n not in st.nodes)
        return struct, dirty

    def _k8s_nodes(self) -> dict[str, dict[str, Any]]:
        """Name → the snapshot's Node of that name (the last, as the full build finds it)."""
        return {n["metadata"]["name"]: n for n in self.snap.kind("Node")}

    def _source_changes(self, kind: str) -> KindDelta | None:
        """The source's change set of `kind` (empty: its list is the previous one); None when the
        source handed none for it (it must be found by comparing the objects)."""
        if self.delta is None:
            return None
        if kind in self.delta:
            return self.delta[kind]
        return ([], [], {}) if self.snap.kind(kind) is self.prev.snapshot.kind(kind) else None

    def _nodes_from_changes(self) -> tuple[set[str], set[str | None]] | None:
        """`_nodes` from the source's change sets of GPUNodes and Nodes: a fresh view for each
        GPUNode that changed or came and for each whose Node changed, the previous views in their
        places for the rest (GPUNodes that came are last), without a pass over every GPUNode
        unless a Node changed. None: no change sets, or two GPUNodes of one name (the pass says so)."""
        gpunodes, k8s_nodes = self._source_changes("GPUNode"), self._source_changes("Node")
        if gpunodes is None or k8s_nodes is None:
            return None
        prev, st = self.prev, self.st
        added, removed, pos = gpunodes
        by_name: dict[str, dict[str, Any]] | None = None  # name → Node, as the full pass finds it
        if k8s_nodes[0] or k8s_nodes[1]:
            by_name = self._k8s_nodes()
        nodes = dict(prev.nodes)
        removed_ids = {id(o) for o in removed}
        struct: set[str] = set()
        dirty: set[str | None] = set()
        appended = 0
        for gn in _in_order(added, pos):
            name = gn["metadata"]["name"]
            cur, old = nodes.get(name), prev.nodes.get(name)
            if cur is not None and id(cur.obj) not in removed_ids:
                return None
            if by_name is None and old is not None:
                k8s = old.node_obj  # no Node changed: the one its previous view has
            else:
                if by_name is None:  # a new GPUNode: its Node found as the full pass does
                    by_name = self._k8s_nodes()
                k8s = by_name.get(name)
            view = st._node_view(gn, k8s)
            appended += cur is None
            nodes[name] = view
            dirty.add(name)
            if old is None or old.pool != view.pool:
                struct.add(name)
        for gn in removed:
            name = gn["metadata"]["name"]
            cur = nodes.get(name)
            if cur is not None and cur.obj is gn:  # went, not replaced
                del nodes[name]
                struct.add(name)
        if by_name is not None:  # Nodes changed: the GPUNodes that did not, whose Node did
            for name in {n["metadata"]["name"] for n in (*k8s_nodes[0], *k8s_nodes[1])}:
                cur = nodes.get(name)
                k8s = by_name.get(name)
                if cur is None or name in dirty or cur.node_obj is k8s:
                    continue
                view = nodes[name] = st._node_view(cur.obj, k8s)
                dirty.add(name)
                if cur.pool != view.pool:
                    struct.add(name)
        if not appended_in_order(nodes, appended, pos):
            return None
        st.nodes = nodes
        return struct, dirty

    # -- GPUs --------------------------------------------------------------------------------------

    def _gpus(self, node_struct: set[str]) -> tuple[set[str], set[str], set[str], bool, set[str | None]]:
        """GPU views (allocations still to come). Returns (GPUs with a fresh view, nodes whose GPU
        list or capacity changed, workers to re-derive, whether the pool-label lists changed, the
        nodes of GPUs that went)."""
        prev, st = self.prev, self.st
        added, removed, pos = self._diff("GPU")
        gpus = st.gpus = dict(prev.gpus)
        changed: set[str] = set()
        list_dirty: set[str] = set(node_struct)
        recheck: set[str] = set()
        labels_dirty = False
        left: set[str | None] = set()
        removed_ids = {id(o) for o in removed}
        redo = [
            gpus[g].obj
            for n in node_struct
            if n in prev.nodes
            for g in prev.nodes[n].gpus
            if id(gpus[g].obj) not in removed_ids
        ]
        if redo and not pos:
            pos = _positions(self.snap.kind("GPU"))
        appended = 0  # views of names the previous state did not have: added last
        for gpu in paced(_in_order([*added, *redo], pos)):
            name = gpu["metadata"]["name"]
            old = prev.gpus.get(name)
            if name in changed or (old is not None and old.obj is not gpu and id(old.obj) not in removed_ids):
                raise _Fallback  # two GPUs of one name
            appended += name not in gpus
            view = gpus[name] = st._gpu_view(gpu)
            changed.add(name)
            if old is None:
                labels_dirty = True
                list_dirty.add(view.node or "")
            elif old.node != view.node or old.capacity != view.capacity:
                list_dirty.update((old.node or "", view.node or ""))
                recheck.update(old.workers)
            if old is not None and _label_pool(old) != _label_pool(view):
                labels_dirty = True
        for gpu in removed:
            name = gpu["metadata"]["name"]
            old = prev.gpus.get(name)
            if old is not None and old.obj is gpu and name not in changed:
                del gpus[name]
                labels_dirty = True
                list_dirty.add(old.node or "")
                left.add(old.node)
                recheck.update(old.workers)
        st.gpus = gpus if self._kept_order("GPU", gpus, appended, pos) else _ordered(gpus, pos)
        return changed, list_dirty, recheck, labels_dirty, left

    # -- workers -----------------------------------------------------------------------------------

    def _workers(
        self, recheck: set[str], node_struct: set[str]
    ) -> tuple[list[WorkerView], list[WorkerView], set[str | None]]:
        """Worker views in pod order. Returns (previous views dropped, views made, nodes whose
        native-GPU pod list may have changed)."""
        prev, st, snap = self.prev, self.st, self.snap
        added, removed, pos = self._diff("Pod")
        checkpoint()
        self._labelled_pods(added, removed, pos)
        checkpoint()
        workers = st.workers = dict(prev.workers)
        checkpoint()
        prev_by_id = {id(w.obj): w for w in (prev.workers[k] for k in recheck if k in prev.workers)}
        removed_ids = {id(o) for o in removed}
        redo = [w.obj for w in prev_by_id.values() if id(w.obj) not in removed_ids]
        for w in _worker_views_of(prev, removed):
            prev_by_id[id(w.obj)] = w
        new: list[WorkerView] = []
        made: set[str] = set()
        appended = 0  # views of keys the previous state did not have: added last
        native_dirty: set[str | None] = set()
        if redo and not pos:
            pos = _positions(snap.kind("Pod"))
        self.pods_pos, self.pods_removed, self.node_struct = pos, removed_ids, bool(node_struct)
        checkpoint()
        for pod in paced(_in_order([*added, *redo], pos), 64):
            meta = pod["metadata"]
            if (meta.get("labels") or {}).get(keys.COMPONENT) != keys.COMPONENT_WORKER:
                native_dirty.add(st._native_gpu_node(pod))
                self.native_added.append(pod)
                continue
            got = st._worker_view(pod)
            if got is None:
                continue
            w, known = got
            old = workers.get(w.key)
            if w.key in made or (old is not None and id(old.obj) not in prev_by_id):
                raise _Fallback  # two pods of one name
            if w.node is not None and any(st.gpus[g].node != w.node for g in known):
                raise _Fallback  # a warning of the full build
            if w.node and w.node not in st.nodes and w.gpu_ids:
                raise _Fallback
            appended += old is None
            workers[w.key] = w
            made.add(w.key)
            new.append(w)
        gone = []
        for old in prev_by_id.values():
            if workers.get(old.key) is old:
                del workers[old.key]
            gone.append(old)
        for p in removed:
            if id(p) not in prev_by_id:  # not a live worker: a native-GPU pod may have gone
                native_dirty.add(prev._native_gpu_node(p))
        if node_struct:  # a node came or went: pods on it may start or stop counting
            native_dirty.update(node_struct)
        checkpoint()
        st.workers = workers if self._kept_order("Pod", workers, appended, pos) else _ordered(workers, pos)
        return gone, new, native_dirty

    def _labelled_pods(
        self, added: list[dict[str, Any]], removed: list[dict[str, Any]], pos: dict[int, int]
    ) -> None:
        """Carry `prev`'s `pods_labelled` answers over: drop the pods that went, add the new ones
        that carry the label, in pod order (instead of a scan of every pod on first use)."""
        gone = {id(p) for p in removed}
        for (key, value), pods in self.prev.labelled_pods().items():
            kept = [p for p in pods if id(p) not in gone] if gone else list(pods)
            kept += [p for p in added if ((p.get("metadata") or {}).get("labels") or {}).get(key) == value]
            if added and pos:
                kept.sort(key=lambda p: pos[id(p)])
            self.st.labelled_pods()[(key, value)] = kept

    def _known(self, w: WorkerView) -> list[str]:
        return [g for g in w.gpu_ids if g in self.st.gpus]

    # -- allocations -------------------------------------------------------------------------------

    def _allocations(
        self, changed: set[str], gone: list[WorkerView], new: list[WorkerView], order: Callable[[str], int]
    ) -> set[str]:
        """Fresh views, with allocations summed in pod order, for the GPUs whose workers changed."""
        prev, st = self.prev, self.st
        gpus = st.gpus
        gone_keys = {w.key for w in gone}
        adds: dict[str, set[str]] = {}
        for w in new:
            for g in w.gpu_ids:
                if g in gpus:
                    adds.setdefault(g, set()).add(w.key)
        dirty = set(changed) | set(adds)
        dirty.update(g for w in gone for g in w.gpu_ids if g in gpus)
        for g in paced(dirty):
            view = gpus[g]
            old = prev.gpus.get(g)
            if view is old:
                view = gpus[g] = replace(view, allocated=Res(), workers=[], partitions=[])
            members = {k for k in (old.workers if old is not None else ()) if k not in gone_keys}
            members |= adds.get(g, set())
            for k in sorted(members, key=order):
                w = st.workers[k]
                for x in w.gpu_ids:
                    if x == g:
                        take = st.booking(w, view)
                        if take is None:
                            raise _Fallback  # an unknown partition template: a warning of the full build
                        view.allocated.add(take)
                        view.workers.append(k)
                        add_partition(view, w)
            if over_allocated(view):
                self.over.add(g)
            else:
                self.over.discard(g)
        self.over &= gpus.keys()  # GPUs that went
        return dirty

    # -- node figures ------------------------------------------------------------------------------

    def _node_views(
        self,
        dirty: set[str],
        gpu_list_dirty: set[str],
        gone: list[WorkerView],
        new: list[WorkerView],
        order: Callable[[str], int],
        native_dirty: set[str | None],
    ) -> None:
        prev, st = self.prev, self.st
        gone_keys = {w.key for w in gone}
        arrivals: dict[str, list[str]] = {}
        for w in new:
            if w.node is not None:
                arrivals.setdefault(w.node, []).append(w.key)
        native: dict[str, list[str]] | None = None
        by_node: dict[str | None, list[str]] | None = None  # every node's GPUs, grouped once if needed
        for n in paced(dirty, 32):  # ≈ 0.13 ms a node: a check-point every ≈ 4 ms, not 33
            view = st.nodes[n]
            old = prev.nodes.get(n)
            if view is old:
                view = replace(view)
            view.capacity, view.allocated, view.limits = Res(), Res(), Res()
            if n in gpu_list_dirty or old is None:  # GPUs came, went or moved: in GPU order
                if by_node is None:  # one pass over the GPUs, not one per such node
                    by_node = {}
                    for g, gv in st.gpus.items():
                        by_node.setdefault(gv.node, []).append(g)
                view.gpus = list(by_node.get(n, ()))
            else:
                view.gpus = list(old.gpus)
            members = {k for k in (old.workers if old is not None else ()) if k not in gone_keys}
            members.update(arrivals.get(n, ()))
            view.workers = sorted(members, key=order)
            if n in native_dirty or old is None:  # a non-worker pod on it changed, or it is new
                if native is None:
                    native = self._native_pods()
                view.native_gpu_pods = list(native.get(n, ()))
            else:
                view.native_gpu_pods = list(old.native_gpu_pods)
            for g in view.gpus:
                view.capacity.add(st.gpus[g].capacity)
            for k in view.workers:
                view.limits.add(st.workers[k].limit)
            st.nodes[n] = view

    def _native_pods(self) -> dict[str, list[str]]:
        """Node → its live non-worker pods that use GPUs outside TensorFusion, in pod order.

        From the previous state's answer when it kept one and no node came or went: the pods
        that went are dropped and the new non-worker pods added, in snapshot order (a pod's
        native node depends on its own object, the node list and the providers, and a change of
        the providers never reaches this path); otherwise every pod is scanned."""
        st = self.st
        before: dict[str, list[dict[str, Any]]] | None = self.prev._derived.get(_NATIVE_PODS)
        if before is not None and not self.node_struct and self.pods_pos:
            index = dict(before)
            gone, pos = self.pods_removed, self.pods_pos
            touched: set[str] = set()
            for n, pods in before.items():
                if gone and any(id(p) in gone for p in pods):
                    index[n] = [p for p in pods if id(p) not in gone]
                    touched.add(n)
            for pod in self.native_added:
                on = st._native_gpu_node(pod)
                if on is not None:
                    index[on] = [*index.get(on, ()), pod]
                    touched.add(on)
            for n in touched:
                index[n].sort(key=lambda p: pos[id(p)])
                if not index[n]:
                    del index[n]
        else:
            index = {}
            for pod in self.snap.kind("Pod"):
                meta = pod["metadata"]
                if (meta.get("labels") or {}).get(keys.COMPONENT) == keys.COMPONENT_WORKER:
                    continue
                on = st._native_gpu_node(pod)
                if on is not None:
                    index.setdefault(on, []).append(pod)
        st._derived[_NATIVE_PODS] = index
        return {n: [_pod_key(p) for p in pods] for n, pods in index.items()}
