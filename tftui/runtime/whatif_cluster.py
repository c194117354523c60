"""The what-if cluster: the acting simulator plus what a run adds — workloads cloned in and
removed by churn, nodes provisioned like an existing one, and a state rebuilt only when the objects
changed. Apart from the driver (`runtime.whatif`) so the trace protocols and tests build one alone."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from tftui.engine.quota import QUOTA_REFUSAL
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.sources.sim.acting import ActingSimCluster

JSON = dict[str, Any]


class WhatIfCluster(ActingSimCluster):
    """`ActingSimCluster` plus what a what-if run needs: a cached `ClusterState`, workloads that come
    and go, and nodes that are provisioned."""

    def __init__(self, objects: Iterable[JSON], now: datetime, seed: int) -> None:
        super().__init__(seed=seed, now=now, objects=objects)
        self._state_src: list[JSON] | None = None
        self._state: ClusterState | None = None

    def describe(self) -> str:
        return "what-if"

    def state(self) -> ClusterState:
        """The `ClusterState` of the current objects, rebuilt only after they changed."""
        with self._lock:
            self.snapshot()
            if self._state is None or self._state_src is not self._cache:
                assert self._cache is not None
                self._state_src = self._cache
                self._state = self._build_state(list(self._cache))
            return self._state

    def add_workload(self, template: JSON, pod: JSON, name: str) -> None:
        """A new TensorFusionWorkload like `template` named `name`; its workers are created Pending
        (and scheduled at once) by the simulated workload controller."""
        with self._lock:
            wl = copy.deepcopy(template)
            meta = wl["metadata"]
            uid = self._uid()
            wl["metadata"] = {
                **{k: v for k, v in meta.items() if k in ("namespace", "labels", "annotations")},
                "name": name,
                "uid": uid,
                "creationTimestamp": self._now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            wl["status"] = {}
            self._add(wl)
            tpl = copy.deepcopy(pod)
            tpl["metadata"].setdefault("labels", {})[keys.WORKLOAD] = name
            refs = tpl["metadata"].get("ownerReferences") or []
            tpl["metadata"]["ownerReferences"] = [
                {**r, "name": name, "uid": uid} if r.get("kind") == "TensorFusionWorkload" else r
                for r in refs
            ]
            self._replace(tpl)  # Pending until `schedule()`: a batch of arrivals is placed in one pass

    def add_object(self, obj: JSON) -> None:
        """Add `obj` as it is (a trace's pod, bound by the caller); Pending workers are queued."""
        with self._lock:
            self._add(obj)

    def pending_pools(self) -> dict[str, set[str]]:
        """Pools of the workers waiting for a node, with the isolation modes they ask for: the
        scheduler's queue (the same workers as `ClusterState`'s Pending, unbound, not terminating
        ones), read without building a state. Workers their namespace's quota refused wait for
        room in the quota, not for a node, and do not count."""
        with self._lock:
            out: dict[str, set[str]] = {}
            for k in self._pending:
                if self._refused.get(k, "").startswith(QUOTA_REFUSAL):
                    continue
                pod = self._objs[k]
                meta = pod["metadata"]
                ann, labels = meta.get("annotations") or {}, meta.get("labels") or {}
                pool = ann.get(keys.GPUPOOL) or labels.get(keys.GPUPOOL) or ""
                out.setdefault(pool, set()).add(ann.get(keys.ISOLATION) or "soft")
            return out

    def schedule(self) -> None:
        """Run the simulated scheduler over the Pending workers (after a batch of arrivals)."""
        with self._lock:
            self._schedule_pending()

    def remove_workloads(self, workloads: Iterable[tuple[str, str]]) -> int:
        """Delete these (namespace, name) workloads and their workers, no replacements, in one pass
        over the objects; returns how many existed."""
        with self._lock:
            gone = {w for w in workloads if ("TensorFusionWorkload", *w) in self._objs}
            for ns, name in gone:
                self._delete(("TensorFusionWorkload", ns, name))
            if gone:  # their pods, from their namespaces' pods (not every pod), in store order
                doomed = [
                    k
                    for ns in {ns for ns, _ in gone}
                    for k in self._ns_pods.get(ns, ())
                    if (ns, (self._objs[k]["metadata"].get("labels") or {}).get(keys.WORKLOAD)) in gone
                ]
                for k in sorted(doomed, key=self._order.__getitem__):
                    self._delete(k)
                self._schedule_pending()
            return len(gone)

    def add_node_like(self, node: str, new: str) -> None:
        """A new, empty node with the GPUs, labels and claim of `node` (renamed), created now."""
        with self._lock:
            names = {node: new}
            objs: list[JSON] = []
            claim = None
            for k, o in self._objs.items():
                if k[0] in ("Node", "GPUNode") and k[2] == node:
                    objs.append(o)
                    claim = claim or (o["metadata"].get("labels") or {}).get(keys.NODE_PROVISIONER)
                elif (
                    k[0] == "GPU"
                    and ((o.get("status") or {}).get("nodeSelector") or {}).get(keys.HOSTNAME) == node
                ):
                    objs.append(o)
                    names[k[2]] = f"{k[2]}-{new}"
            if claim and ("GPUNodeClaim", "", claim) in self._objs:
                objs.append(self._objs[("GPUNodeClaim", "", claim)])
                names[claim] = f"{claim}-{new}"
            text = json.dumps(objs)
            for old, nu in names.items():  # exact string values only: names, selectors, labels
                text = text.replace(json.dumps(old), json.dumps(nu))
            created = self._now.strftime("%Y-%m-%dT%H:%M:%SZ")
            for o in json.loads(text):
                meta = o["metadata"]
                meta["uid"] = self._uid()
                meta["creationTimestamp"] = created
                meta.pop("deletionTimestamp", None)
                if o["kind"] == "Node":
                    o.setdefault("spec", {}).pop("unschedulable", None)
                    o["spec"].pop("taints", None)
                    (meta.get("labels") or {}).pop(keys.SHOULD_DELETE, None)
                self._add(o)
            self._retry_all = True
            self._schedule_pending()
