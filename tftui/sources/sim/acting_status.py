"""The acting simulator's status pass: GPU, GPUNode, GPUPool, cluster, workload and PDB statuses.

Recomputed from the pods with the generator's arithmetic before the next read after a change,
incrementally; separate from the writes because it only reads what they changed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from operator import itemgetter
from typing import Any

from tftui.engine.partitions import mig_start
from tftui.engine.state import PartitionUse
from tftui.model import keys
from tftui.model.provider import PartitionTemplate, ProviderCatalog
from tftui.model.selectors import pdb_selects
from tftui.sources.sim.acting_objects import (
    _DEFAULT_OVERSUB,
    _SUM_FIELDS,
    JSON,
    Key,
    _annotations,
    _controller,
    _GpuAcc,
    _int,
    _int_str,
    _labels,
    _meta,
    _milli,
    _PodIndex,
    _scaled,
    _ts,
    _units,
    same_for_pdbs,
)
from tftui.sources.sim.acting_store import _ActingStore
from tftui.sources.sim.demo_layout import capacity_status, format_bytes, format_tflops

_HW_KINDS = ("GPU", "GPUNode", "PodDisruptionBudget")  # a change to one made the next pass a full one


def _forget(idx: _PodIndex, gone: list[Key]) -> tuple[set[Key], set[str | None]]:
    """Take deleted GPUs and GPUNodes out of the pod index as a reset would leave it (the other
    GPUs keep their order); returns the pods that named a deleted GPU (to index again) and the
    nodes whose GPU lists changed (to recompute)."""
    again: set[Key] = set()
    reach: set[str | None] = set()
    for k in gone:
        if k[0] == "GPUNode":
            idx.pool_of.pop(k[2], None)
        elif k[2] in idx.gpu_node:
            node = idx.gpu_node.pop(k[2])
            names = idx.gpus_of[node]
            names.remove(k[2])
            if not names:
                del idx.gpus_of[node]
            reach.add(node)
            again.update(p for p in idx.on_node.get(node, ()) if k[2] in idx.recs[p].gpus)
    return again, reach


_WorkerFigures = tuple[str, int, int, int, int, tuple[Any, str, str, str, str, str], str, str]


class _ActingStatus(_ActingStore):
    """Statuses summed from the pods, before the next read after a change."""

    # -- statuses -------------------------------------------------------------------------------------

    def _set_status(self, key: Key, status: JSON) -> None:
        """Replace an object's status if it changed, without touching objects a snapshot holds."""
        obj = self._objs[key]
        if obj.get("status") == status:
            return
        if key in self._owned:
            obj["status"] = status
        else:
            self._record(key)
            self._objs[key] = {**obj, "status": status}  # shares metadata/spec, so stays un-owned
            self._kinds_changed.add(key[0])

    def _refresh(self) -> None:
        """Recompute the derived statuses from the pods.

        A full pass re-indexes every pod; otherwise only the pods changed since the last pass are
        re-indexed (`_PodIndex`) and only the statuses they reach are recomputed: GPUs and GPUNodes
        of the nodes they touch (before or after the change) or whose pool's oversubscription
        changed, the workloads they count in, the PDBs whose selectors they carry (and those of a
        changed workload's pods: a PDB counts their replicas, so not after a change of its status only).
        The result is the same as a full pass."""
        self._dirty = False
        self._cache = None
        full = self._hw_changed
        wanted, self._hw_changed, self._full_wanted = self._full_wanted, False, False
        touched, self._touched = self._touched, set()
        objs = self._objs
        idx = self._pods
        nodes: set[str | None] = {None}  # GPUs on no node: always recomputed
        gone = self._only_deleted(touched) if full and not wanted else None
        if gone is not None:  # GPUs and GPUNodes went, nothing else of them changed: no full pass
            full = False
            again, reach = _forget(idx, gone)
            pods = {k: None for k in touched if k[0] == "Pod"} | dict.fromkeys(again)
            nodes |= reach
            for n in reach:
                self._node_cache.pop(n or "", None)
        elif full:
            self._node_cache.clear()
            idx.reset(objs, self._by_kind)
            pods = self._by_kind.get("Pod", {})
            nodes.update(idx.gpus_of)
            self._indexed = True
        else:
            pods = {k: None for k in touched if k[0] == "Pod"}
        memo = self._worker_memo()  # a pod changed in place is touched: its figures are made again
        if full:
            memo.clear()
        else:
            for k in pods:
                memo.pop(k, None)
        workloads: set[tuple[str, str]] = set()
        pdbs: set[Key] = set()
        owners: set[tuple[str, str]] = set()  # workloads whose pods' PDBs need a look
        for k in pods:
            old = idx.drop(k)
            new = idx.add(k, objs.get(k))
            pdb_same = old is not None and new is not None and same_for_pdbs(old, new)
            for rec in (old, new):
                if rec is not None:
                    nodes.update(rec.nodes)
                    if rec.counted:
                        workloads.add((k[1], rec.workload))
                    if not pdb_same:
                        pdbs.update(idx.pdbs_selecting(k[1], rec.labels))
        parts = self._wl_parts
        if full:
            parts.clear()
        for k in touched:
            if k[0] == "TensorFusionWorkload":
                workloads.add((k[1], k[2]))
                wl = objs.get(k)
                now = (wl.get("spec"), wl.get("metadata")) if wl is not None else None
                before = parts.get(k)
                if now is None or before is None or now[0] is not before[0] or now[1] is not before[1]:
                    owners.add((k[1], k[2]))  # a PDB reads its name and spec.replicas: not a status
        for k in self._by_kind.get("TensorFusionWorkload", ()) if full else touched:
            if k[0] == "TensorFusionWorkload" and (wl := objs.get(k)) is not None:
                parts[k] = (wl.get("spec"), wl.get("metadata"))
            elif k in parts:
                del parts[k]
        by_kind = self._by_kind
        oversub: dict[str, tuple[int, int, int]] = {}
        for k in by_kind.get("GPUPool", ()):
            over = ((objs[k].get("spec") or {}).get("capacityConfig") or {}).get("oversubscription") or {}
            oversub[k[2]] = (
                _int(over.get("tflopsOversellRatio"), _DEFAULT_OVERSUB[0]),
                _int(over.get("vramExpandToHostMem"), _DEFAULT_OVERSUB[1]),
                _int(over.get("vramExpandToHostDisk"), _DEFAULT_OVERSUB[2]),
            )
        pool_of = idx.pool_of
        for k in by_kind.get("GPUNode", ()):
            pool = pool_of[k[2]]
            cached = self._node_cache.get(k[2])
            if full or cached is None or cached[0] != oversub.get(pool or "", _DEFAULT_OVERSUB):
                nodes.add(k[2])
        gpus: dict[str, _GpuAcc] = {}
        for n in nodes:
            for g in idx.gpus_of.get(n, ()):
                status = objs[("GPU", "", g)].get("status") or {}
                cap = status.get("capacity") or {}
                gpus[g] = _GpuAcc(_milli(str(cap.get("tflops", "0"))), _units(str(cap.get("vram", "0"))))
        node_lim: dict[str, list[int]] = {}
        node_pods: dict[str, int] = {}
        accounted: set[Key] = set()
        for n in nodes:
            accounted.update(idx.on_node.get(n, ()))
        for k in sorted(accounted, key=self._order.__getitem__):
            for g in idx.recs[k].gpus:  # a worker may name GPUs of a clean node too
                if g not in gpus:
                    status = objs[("GPU", "", g)].get("status") or {}
                    cap = status.get("capacity") or {}
                    gpus[g] = _GpuAcc(_milli(str(cap.get("tflops", "0"))), _units(str(cap.get("vram", "0"))))
            self._account_worker(k, objs[k], gpus, node_lim, node_pods)
        for n in nodes:
            for g in idx.gpus_of.get(n, ()):
                self._gpu_status(("GPU", "", g), gpus[g])
        pool_sums = self._node_statuses(by_kind, gpus, node_lim, node_pods, nodes, oversub, pool_of)
        self._pool_statuses(by_kind, pool_sums)
        wl_keys = by_kind.get("TensorFusionWorkload", {})
        for ns, name in [(k[1], k[2]) for k in wl_keys] if full else workloads:
            k = ("TensorFusionWorkload", ns, name)
            if k not in objs:
                continue
            count, ready = idx.workload_counts(ns, name)
            old_status = objs[k].get("status") or {}
            replicas = _int((objs[k].get("spec") or {}).get("replicas"), count)
            phase = "Running" if ready >= replicas else "Pending"
            self._set_status(k, {**old_status, "workerCount": count, "readyWorkers": ready, "phase": phase})
        pdb_keys = by_kind.get("PodDisruptionBudget", {})
        if not full:  # a PDB counts the replicas of its pods' workloads
            for ns, name in owners:
                for p in idx.by_owner.get((ns, name), ()):
                    pdbs.update(idx.pdbs_selecting(ns, idx.recs[p].labels))
        for k in pdb_keys if full else pdbs:
            if k in objs:
                cands = idx.candidates(objs[k], k[1])
                self._pdb_status(k, [objs[p] for p in cands], {id(objs[p]): idx.recs[p].ready for p in cands})

    def _only_deleted(self, touched: set[Key]) -> list[Key] | None:
        """The GPUs and GPUNodes deleted since the last pass when that is the only change to a GPU,
        GPUNode or PDB (a node released), else None (a full pass: the first one, something added or
        changed, a PDB, or no such key at all). `recompute_statuses` never takes this shortcut."""
        if not getattr(self, "_indexed", False):
            return None
        hw = [k for k in touched if k[0] in _HW_KINDS]
        if not hw or any(k[0] == "PodDisruptionBudget" or k in self._objs for k in hw):
            return None
        return hw

    def _account_worker(
        self,
        key: Key,
        pod: JSON,
        gpus: dict[str, _GpuAcc],
        node_lim: dict[str, list[int]],
        node_pods: dict[str, int],
    ) -> None:
        ann = _annotations(pod)
        ids = [g for g in (ann.get(keys.GPU_IDS) or "").split(",") if g]
        if not ids:
            return
        first = gpus.get(ids[0])
        memo = self._worker_memo()
        got = memo.get(key)
        if got is None or got[0] is not pod or got[1] != (first.cap_t if first is not None else None):
            got = memo[key] = (
                pod,
                first.cap_t if first is not None else None,
                self._worker_figures(pod, first),
            )
        wl, req_t, lim_t, req_v, lim_v, texts, isolation, partition = got[2]
        info = {
            "name": key[2],
            "namespace": key[1],
            "uid": texts[0],
            "qos": texts[1],
            "requests": {"tflops": texts[2], "vram": texts[3]},
            "limits": {"tflops": texts[4], "vram": texts[5]},
        }
        for gid in ids:
            acc = gpus.get(gid)
            if acc is None:
                continue
            take_t, take_v = req_t, req_v
            if isolation == "shared":  # a shared worker holds its whole GPU
                take_t, take_v = acc.cap_t, acc.cap_v
            elif partition and (template := self._template(gid, partition)) is not None:
                t, v = template.resources(acc.cap_t / 1000)
                take_t, take_v = round(t * 1000), int(v)
            acc.avail_t -= take_t
            acc.avail_v -= take_v
            acc.apps.setdefault((key[1], wl), []).append(info)
            acc.pods.append(info)
            if partition:
                acc.parts.append((str(texts[0]), key[2], key[1], partition))
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            lim = node_lim.setdefault(node, [0, 0])
            lim[0] += lim_t
            lim[1] += lim_v
            node_pods[node] = node_pods.get(node, 0) + 1

    def _worker_memo(self) -> dict[Key, tuple[JSON, int | None, _WorkerFigures]]:
        """Pod key → (the pod dict, its first GPU's capacity, `_worker_figures`), kept between
        passes: a status pass accounts every worker of a touched node, most of them unchanged."""
        try:
            return self._worker_figures_memo
        except AttributeError:
            self._worker_figures_memo: dict[Key, tuple[JSON, int | None, _WorkerFigures]] = {}
            return self._worker_figures_memo

    def _worker_figures(self, pod: JSON, first: _GpuAcc | None) -> _WorkerFigures:
        """What accounting a worker reads of its pod: workload label, request and limit (milli-TFLOPS
        per device, a compute percentage on its first GPU; bytes), its texts (uid, QoS, formatted
        request and limit), isolation and partition."""
        ann = _annotations(pod)
        req_t = self._tflops(ann, keys.TFLOPS_REQUEST, keys.COMPUTE_PERCENT_REQUEST, first)
        lim_t = self._tflops(ann, keys.TFLOPS_LIMIT, keys.COMPUTE_PERCENT_LIMIT, first)
        req_v = _units(ann.get(keys.VRAM_REQUEST) or "0")
        lim_v = _units(ann.get(keys.VRAM_LIMIT) or "0")
        texts = (
            _meta(pod).get("uid", ""),
            ann.get(keys.QOS) or "medium",
            format_tflops(req_t),
            format_bytes(req_v),
            format_tflops(lim_t),
            format_bytes(lim_v),
        )
        isolation = ann.get(keys.ISOLATION) or ""
        partition = (ann.get(keys.PARTITION_ID) or "") if isolation == "partitioned" else ""
        return _labels(pod).get(keys.WORKLOAD, ""), req_t, lim_t, req_v, lim_v, texts, isolation, partition

    def _catalog(self) -> ProviderCatalog:
        """The ProviderConfigs' catalogue, rebuilt when one of them changed."""
        objs = [self._objs[k] for k in self._by_kind.get("ProviderConfig", ())]
        ident = tuple(map(id, objs))
        if self._catalog_key != ident:
            self._catalog_key, self._catalog_value = ident, ProviderCatalog.of(objs)
        return self._catalog_value

    def _template(self, gpu: str, partition: str) -> PartitionTemplate | None:
        model = ((self._objs.get(("GPU", "", gpu)) or {}).get("status") or {}).get("gpuModel") or ""
        hw = self._catalog().model(model)
        return hw.template(partition) if hw is not None else None

    @staticmethod
    def _tflops(ann: Mapping[str, str], tflops_key: str, pct_key: str, gpu: _GpuAcc | None) -> int:
        """Milli-TFLOPS per device; a compute percentage is truncated to whole TFLOPS (upstream)."""
        if ann.get(tflops_key):
            return _milli(ann[tflops_key])
        if ann.get(pct_key) and gpu is not None:
            return math.trunc(_milli(ann[pct_key]) * gpu.cap_t / 100_000_000) * 1000
        return 0

    def _gpu_status(self, key: Key, acc: _GpuAcc) -> None:
        old = self._objs[key].get("status") or {}
        status = dict(old)
        status["available"] = {"tflops": format_tflops(acc.avail_t), "vram": format_bytes(acc.avail_v)}
        status["runningApps"] = [
            {"name": wl, "namespace": ns, "count": len(pods), "pods": pods}
            for (ns, wl), pods in acc.apps.items()
        ]
        if acc.parts or old.get("allocatedPartitions"):
            status["allocatedPartitions"] = self._partitions(
                key[2], old.get("allocatedPartitions") or {}, acc
            )
        self._set_status(key, status)

    def _partitions(self, gpu: str, old: Mapping[str, JSON], acc: _GpuAcc) -> dict[str, JSON]:
        """`status.allocatedPartitions` as the allocator keeps it: one entry per partitioned pod, its
        MIG slot kept where it was recorded, a new one at the first free start of its template."""
        model = ((self._objs.get(("GPU", "", gpu)) or {}).get("status") or {}).get("gpuModel") or ""
        hw = self._catalog().model(model)
        out: dict[str, JSON] = {}
        uses: list[PartitionUse] = []
        for uid, name, ns, tid in acc.parts:
            prev = old.get(uid)
            if prev is not None:
                out[uid] = dict(prev)
                start, end = prev.get("allocatedSlotStart"), prev.get("allocatedSlotEnd")
                slot = (start, end) if isinstance(start, int) and isinstance(end, int) else None
                uses.append(PartitionUse(f"{ns}/{name}", tid, slot))
        for uid, name, ns, tid in acc.parts:
            if uid in out:
                continue
            entry: JSON = {"templateId": tid, "podUid": uid, "podName": name, "namespace": ns,
                           "allocatedAt": _ts(self._now)}  # fmt: skip
            t = hw.template(tid) if hw is not None else None
            if hw is not None and t is not None and t.placement_limit and t.placement_offset:
                start = mig_start(hw, t, uses)
                if start is not None:
                    entry["allocatedSlotStart"], entry["allocatedSlotEnd"] = start, start + t.placement_offset
                    uses.append(PartitionUse(f"{ns}/{name}", tid, (start, start + t.placement_offset)))
            out[uid] = entry
        return out

    def _node_statuses(
        self,
        by_kind: dict[str, dict[Key, None]],
        gpus: dict[str, _GpuAcc],
        node_lim: dict[str, list[int]],
        node_pods: dict[str, int],
        dirty: set[str | None],
        oversub: dict[str, tuple[int, int, int]],
        pool_of: dict[str, str | None],
    ) -> dict[str, dict[str, int]]:
        """Recompute the dirty GPUNodes' statuses; every pool's sums. While the GPUNodes and their
        pools are the last pass's, those sums are the last pass's moved by each dirty node's change
        (integers: exact, and no pass over every node's figures); else they are summed again over
        every node (clean nodes' from the cache)."""
        node_keys = list(by_kind.get("GPUNode", ()))
        pools = list(map(pool_of.__getitem__, map(itemgetter(2), node_keys)))
        memo, self._pool_memo = self._pool_memo, None
        pool_sums = memo[2] if memo is not None and memo[0] == node_keys and memo[1] == pools else None
        for k, pool in zip(node_keys, pools, strict=True):
            name = k[2]
            if name not in dirty:
                continue
            before = self._node_cache.get(name)
            over = oversub.get(pool or "", _DEFAULT_OVERSUB)
            sums = self._node_status(k, self._pods.gpus_of.get(name, []), over, gpus, node_lim, node_pods)
            self._node_cache[name] = (over, sums)
            if pool_sums is None or pool is None:
                continue
            acc = pool_sums.get(pool)
            if before is None or acc is None or before[1].keys() != sums.keys():
                pool_sums = None  # (a full pass cleared the cache) summed again below
                continue
            for f, v in sums.items():
                acc[f] += v - before[1][f]
        if pool_sums is None:
            pool_sums = {}
            for k, pool in zip(node_keys, pools, strict=True):
                if pool is not None:
                    sums = self._node_cache[k[2]][1]
                    acc = pool_sums.setdefault(pool, dict.fromkeys(sums, 0))
                    for f, v in sums.items():
                        acc[f] += v
        self._pool_memo = (node_keys, pools, pool_sums)
        return {pool: dict(sums) for pool, sums in pool_sums.items()}  # the memo's stay unchanged

    def _node_status(
        self,
        k: Key,
        names: list[str],
        over: tuple[int, int, int],
        gpus: dict[str, _GpuAcc],
        node_lim: dict[str, list[int]],
        node_pods: dict[str, int],
    ) -> dict[str, int]:
        """Set one GPUNode's status from its GPUs and pods; returns its sums for the pool."""
        gn = self._objs[k]
        name = k[2]
        accs = [gpus[g] for g in names]
        total_t, total_v = sum(a.cap_t for a in accs), sum(a.cap_v for a in accs)
        old = gn.get("status") or {}
        info = old.get("nodeInfo") or {}
        ratio, mem, disk = over
        virt_t = total_t * ratio // 100
        ram_b, disk_b = _int_str(info.get("ramSize")), _int_str(info.get("dataDiskSize"))
        virt_v = total_v + ram_b * mem // 100 + disk_b * disk // 100
        lim_t, lim_v = node_lim.get(name, [0, 0])
        sums = {
            "nodes": 1,
            "gpus": len(names),
            "total_t": total_t,
            "total_v": total_v,
            "avail_t": sum(a.avail_t for a in accs),
            "avail_v": sum(a.avail_v for a in accs),
            "virt_t": virt_t,
            "virt_v": virt_v,
            "vavail_t": virt_t - lim_t,
            "vavail_v": virt_v - lim_v,
            "pods": node_pods.get(name, 0),
        }
        status = dict(old)
        status.update(capacity_status(sums))
        status["totalGPUs"] = status["managedGPUs"] = len(names)
        status["managedGPUDeviceIDs"] = list(names)
        status["totalGPUPods"] = sums["pods"]
        status["allocatedPods"] = {g: list(gpus[g].pods) for g in names if gpus[g].pods}
        self._set_status(k, status)
        return sums

    def _pool_statuses(
        self, by_kind: dict[str, dict[Key, None]], pool_sums: dict[str, dict[str, int]]
    ) -> None:
        grand: dict[str, int] = {}
        for k in by_kind.get("GPUPool", []):
            sums = pool_sums.get(k[2]) or dict.fromkeys(_SUM_FIELDS, 0)
            status = dict(self._objs[k].get("status") or {})
            status.update(capacity_status(sums))
            status["totalNodes"] = status["readyNodes"] = sums["nodes"]
            status["notReadyNodes"] = 0
            status["totalGPUs"] = sums["gpus"]
            status["runningAppsCnt"] = sums["pods"]
            self._set_status(k, status)
            for f, v in sums.items():
                grand[f] = grand.get(f, 0) + v
        for k in by_kind.get("TensorFusionCluster", []):
            status = dict(self._objs[k].get("status") or {})
            if grand:
                status.update(capacity_status(grand))
            status["totalNodes"] = grand.get("nodes", 0)
            status["totalGPUs"] = grand.get("gpus", 0)
            self._set_status(k, status)

    def _pdb_status(self, key: Key, pods: list[JSON], ready: Mapping[int, bool]) -> None:
        pdb = self._objs[key]
        spec = pdb.get("spec") or {}
        selector = spec.get("selector")
        matched = [p for p in pods if pdb_selects(selector, _labels(p))]
        healthy = sum(
            1
            for p in matched
            if not _meta(p).get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") == "Running"
            and ready[id(p)]
        )
        owners: dict[str, int] = {}
        uncontrolled = 0
        for p in matched:
            ref = _controller(p)
            wl = self._objs.get(("TensorFusionWorkload", key[1], str((ref or {}).get("name", ""))))
            if wl is None:
                uncontrolled += not _meta(p).get("deletionTimestamp")
            else:
                owners[_meta(wl)["name"]] = _int((wl.get("spec") or {}).get("replicas"), 1)
        expected = sum(owners.values()) + uncontrolled
        if "minAvailable" in spec:
            desired = _scaled(spec["minAvailable"], expected, round_up=True)
        else:
            desired = max(0, expected - _scaled(spec.get("maxUnavailable", 0), expected, round_up=True))
        allowed = max(0, healthy - desired)
        old = pdb.get("status") or {}
        status = dict(old)
        status.update(
            {
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "expectedPods": expected,
                "disruptionsAllowed": allowed,
            }
        )
        cond = {
            "type": "DisruptionAllowed",
            "status": "True" if allowed else "False",
            "reason": "SufficientPods" if allowed else "InsufficientPods",
        }
        prev = next((c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None)
        if prev is None or prev.get("status") != cond["status"]:
            status["conditions"] = [{**cond, "lastTransitionTime": _ts(self._now)}]
        self._set_status(key, status)
