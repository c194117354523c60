"""The acting simulator's controllers that write: claim deletion, node removal, eviction, replacement.

What the API server and the workload controller do when the runtime's Plans delete a claim or evict a
pod; they check PDBs through the status pass (acting_status.py), so they sit above it.
"""

from __future__ import annotations

import copy
from datetime import timedelta

from tftui.model import keys
from tftui.model.selectors import pdb_selects
from tftui.sources.ports import ActionError
from tftui.sources.sim.acting_objects import (
    _DEFRAG_POD_KEYS,
    _ENDED,
    _MULTI_PDB,
    _PDB_REFUSAL,
    EVICTION_GRACE,
    JSON,
    PROVISIONER_DELAY,
    Key,
    _annotations,
    _controller,
    _int,
    _is_worker,
    _key,
    _labels,
    _meta,
    _ready,
    _ts,
)
from tftui.sources.sim.acting_status import _ActingStatus


class _ActingWrites(_ActingStatus):
    """Claim deletion, node removal, eviction with PDBs and the workload controller's replacements."""

    # -- GPUNodeClaims and node removal ---------------------------------------------------------------

    def _claim_nodes(self, claim: JSON) -> list[str]:
        name = _meta(claim).get("name", "")
        nodes = {n for n in [(claim.get("spec") or {}).get("nodeName")] if n}
        for k in self._keys("Node") + self._keys("GPUNode"):
            if _labels(self._objs[k]).get(keys.NODE_PROVISIONER) == name:
                nodes.add(k[2])
        return sorted(nodes)

    def _delete_claim(self, name: str) -> None:
        key: Key = ("GPUNodeClaim", "", name)
        claim = self._get(key)
        if _meta(claim).get("deletionTimestamp"):
            return
        pool = self._objs.get(("GPUPool", "", _labels(claim).get(keys.MANAGED_BY, "")))
        mode = (((pool or {}).get("spec") or {}).get("nodeManagerConfig") or {}).get("provisioningMode")
        delay = PROVISIONER_DELAY.get(str(mode), PROVISIONER_DELAY["Provisioned"])
        meta = self._mut(key)["metadata"]
        meta["deletionTimestamp"] = _ts(self._now)
        meta.setdefault("finalizers", [f"{keys.DOMAIN}/finalizer"])
        taint = "karpenter.sh/disrupted" if mode == "Karpenter" else "node.kubernetes.io/unreachable"
        for node in self._claim_nodes(claim):
            self._cordon(node, taint)
        self._at(self._now + delay, "claim-gone", name)

    def _cordon(self, node: str, taint: str) -> None:
        key: Key = ("Node", "", node)
        if key not in self._objs:
            return
        spec = self._mut(key).setdefault("spec", {})
        spec["unschedulable"] = True
        taints = spec.setdefault("taints", [])
        if not any(t.get("key") == taint for t in taints):
            taints.append({"key": taint, "effect": "NoSchedule", "timeAdded": _ts(self._now)})

    def _remove_node(self, node: str) -> None:
        """The machine is gone: its pods, Node, GPUNode and GPUs disappear (workers get replacements)."""
        objs = self._objs
        for k in [k for k in self._keys("Pod") if (objs[k].get("spec") or {}).get("nodeName") == node]:
            self._delete_pod(k)
        for k in self._keys("GPU"):
            if ((objs[k].get("status") or {}).get("nodeSelector") or {}).get(keys.HOSTNAME) == node:
                self._delete(k)
        self._delete(("GPUNode", "", node))
        self._delete(("Node", "", node))

    # -- pods: eviction, deletion, replacement, scheduling ---------------------------------------------

    def _covering_pdbs(self, pod: JSON) -> list[JSON]:
        ns, labels = _meta(pod).get("namespace", ""), _labels(pod)
        pdbs = (self._objs[k] for k in self._keys("PodDisruptionBudget") if k[1] == ns)
        return [p for p in pdbs if pdb_selects((p.get("spec") or {}).get("selector"), labels)]

    def _refresh_pdbs(self, namespace: str, pdbs: list[JSON]) -> list[JSON]:
        """Bring these PDBs' statuses up to date (as the status pass would), returning them as now
        stored: an eviction reads only its own budgets, so it need not recompute every status."""
        pods = [self._objs[k] for k in self._ns_pods.get(namespace, ())]
        ready = {id(p): _ready(p) for p in pods}
        out = []
        for pdb in pdbs:
            key = _key(pdb)
            self._pdb_status(key, pods, ready)
            out.append(self._objs[key])
        return out

    def _evict(self, namespace: str, name: str) -> None:
        key: Key = ("Pod", namespace, name)
        pod = self._get(key)
        if _meta(pod).get("deletionTimestamp"):
            return  # already going: the Eviction API accepts it again
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        if phase not in ("Pending", *_ENDED):  # Kubernetes lets Pending and finished pods go unchecked
            pdbs = self._covering_pdbs(pod)
            if self._dirty and pdbs:  # the budget must reflect every earlier eviction
                pdbs = self._refresh_pdbs(namespace, pdbs)
            if len(pdbs) > 1:
                raise ActionError(f'pods "{name}" in namespace {namespace}: {_MULTI_PDB}', 500)
            if pdbs:
                pdb = pdbs[0]
                st = pdb.get("status") or {}
                if _int(st.get("disruptionsAllowed"), 0) <= 0:
                    raise ActionError(
                        f'pods "{name}" in namespace {namespace}: the disruption budget '
                        f"{_meta(pdb).get('name')} needs {_int(st.get('desiredHealthy'), 0)} healthy pods "
                        f"and has {_int(st.get('currentHealthy'), 0)} currently. {_PDB_REFUSAL}",
                        429,
                    )
        self._terminate(key, EVICTION_GRACE, "EvictionByEvictionAPI", "Eviction API: evicting")

    def _terminate(self, key: Key, grace: timedelta, reason: str, message: str) -> None:
        pod = self._mut(key)
        self._pending.pop(key, None)
        self._untried.discard(key)
        meta = pod["metadata"]
        meta["deletionTimestamp"] = _ts(self._now + grace)
        meta["deletionGracePeriodSeconds"] = int(grace.total_seconds())
        status = pod.setdefault("status", {})
        status.setdefault("conditions", []).append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": reason,
                "message": message,
                "lastTransitionTime": _ts(self._now),
            }
        )
        self._at(self._now + grace, "pod-gone", key[1], key[2], str(meta.get("uid", "")))
        self._replace(pod)

    def _delete_pod(self, key: Key) -> None:
        pod = self._objs.get(key)
        if pod is None:
            return
        self._delete(key)
        if not _meta(pod).get("deletionTimestamp"):
            self._replace(pod)  # never marked terminating: the controller notices it now

    def _replace(self, template: JSON) -> None:
        """TensorFusionWorkload controller: keep `spec.replicas` non-terminating workers."""
        owner = _controller(template)
        meta = _meta(template)
        ns = str(meta.get("namespace", ""))
        if owner is None or not _is_worker(template):
            return
        wl = self._objs.get(("TensorFusionWorkload", ns, str(owner.get("name", ""))))
        if wl is None:
            return
        wl_name = _meta(wl)["name"]
        replicas = _int((wl.get("spec") or {}).get("replicas"), 1)
        active = [
            p
            for p in (self._objs[k] for k in self._ns_pods.get(ns, ()))
            if _labels(p).get(keys.WORKLOAD) == wl_name and not _meta(p).get("deletionTimestamp")
        ]
        for _ in range(replicas - len(active)):
            name = f"{wl_name}-tf-worker-{self._suffix()}"
            while ("Pod", ns, name) in self._objs:  # a name no pod of the namespace has
                name = f"{wl_name}-tf-worker-{self._suffix()}"
            self._add(self._new_worker(template, name))

    def _new_worker(self, template: JSON, name: str) -> JSON:
        meta = _meta(template)
        labels = {k: v for k, v in _labels(template).items() if k not in _DEFRAG_POD_KEYS}
        ann = {
            k: v for k, v in _annotations(template).items() if k != keys.GPU_IDS and k not in _DEFRAG_POD_KEYS
        }
        spec = copy.deepcopy(template.get("spec") or {})
        spec.pop("nodeName", None)
        created = _ts(self._now)
        new_meta: JSON = {
            "name": name,
            "generateName": name[:-5],
            "namespace": meta.get("namespace", ""),
            "uid": self._uid(),
            "creationTimestamp": created,
            "labels": labels,
            "annotations": ann,
        }
        for field in ("ownerReferences", "finalizers"):
            if meta.get(field):
                new_meta[field] = copy.deepcopy(meta[field])
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": new_meta,
            "spec": spec,
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "lastTransitionTime": created}],
                "qosClass": (template.get("status") or {}).get("qosClass", "Burstable"),
            },
        }
