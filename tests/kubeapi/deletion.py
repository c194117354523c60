"""Deletion as the API server does it, as a mixin of `KubeApiServer`: DELETE and the Eviction API (a
PDB-guarded delete) with finalizers and grace periods; and SelfSubjectAccessReview. Kept apart from
the store so that neither module grows past a readable size.

With `finalizers=True` deletion honours `metadata.finalizers`: a DELETE (or an eviction) of an object
with finalizers only sets `deletionTimestamp`; the object goes when an update removes the last one.
Off by default: no controller runs here to remove them (the demo's worker pods carry
`tensor-fusion.ai/finalizer`, which TensorFusion's controller removes on a real cluster). With
`eviction_grace` > 0 an evicted pod is first marked terminating (`deletionTimestamp`,
`deletionGracePeriodSeconds`) and disappears that many seconds later, as a kubelet would stop it.
"""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tests.kubeapi.records import JSON, ApiError, _now
from tests.kubeapi.resources import ResourceType
from tests.kubeapi.selectors import pdb_selects

_PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


class Deletion:
    """Deletes, evictions and access reviews of `KubeApiServer` (the store and its writes are its own)."""

    if TYPE_CHECKING:  # provided by KubeApiServer
        _by_path: dict[tuple[str, str, str], ResourceType]
        _objs: dict[tuple[str, str, str], JSON]
        _cond: threading.Condition
        finalizers: bool
        eviction_grace: float
        access: Callable[[Mapping[str, str]], bool] | None

        def _find(self, rt: ResourceType, ns: str, name: str) -> JSON: ...
        def _write(self, rt: ResourceType, obj: JSON, etype: str) -> JSON: ...

    def delete(self, rt: ResourceType, ns: str, name: str) -> JSON:
        """Gone at once, or — with finalizers — marked terminating until the last one is removed."""
        with self._cond:
            old = copy.deepcopy(self._find(rt, ns, name))
            if self.finalizers and old["metadata"].get("finalizers"):
                return copy.deepcopy(self._terminate(rt, old, 0))
            self._write(rt, old, "DELETED")
            return copy.deepcopy(old)

    def _terminate(self, rt: ResourceType, obj: JSON, grace: float) -> JSON:
        """Set `deletionTimestamp` (caller holds the lock); a second deletion changes nothing."""
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return obj
        meta["deletionTimestamp"] = _now()
        meta["deletionGracePeriodSeconds"] = math.ceil(grace)
        return self._write(rt, obj, "MODIFIED")

    def _gone_after(self, rt: ResourceType, ns: str, name: str, uid: str, grace: float) -> None:
        """After `grace` seconds the terminating object goes (unless a finalizer still holds it)."""

        def fire() -> None:
            with self._cond:
                obj = self._objs.get((rt.qualified, ns, name))
                if obj is None or obj["metadata"].get("uid") != uid:
                    return
                if self.finalizers and obj["metadata"].get("finalizers"):
                    return
                self._write(rt, copy.deepcopy(obj), "DELETED")

        timer = threading.Timer(grace, fire)  # kept across stop()/start(): a restart keeps the clock
        timer.daemon = True
        timer.start()

    def reap_pod(self, ns: str, name: str) -> None:
        """End a terminating pod's grace now (tests that must not race a real-time grace period)."""
        pods = self._by_path[("", "v1", "pods")]
        with self._cond:
            obj = self._objs.get((pods.qualified, ns, name))
            if obj is not None and obj["metadata"].get("deletionTimestamp"):
                self._write(pods, copy.deepcopy(obj), "DELETED")

    def evict(self, ns: str, name: str) -> JSON:
        """policy/v1 Eviction: a PDB-guarded delete, as Kubernetes' eviction handler does it
        (pkg/registry/core/pod/storage/eviction.go): a terminating, Pending, Succeeded or Failed pod
        is deleted without a look at PDBs; more than one covering PDB is a 500; a PDB whose status
        lags its generation is a 429 ("still being processed"), a negative budget a 403, a spent one
        a 429; an unready pod is deleted without charging the budget while the PDB has its desired
        healthy pods; otherwise `disruptionsAllowed` is decremented and the pod recorded in
        `disruptedPods` before the delete."""
        pods = self._by_path[("", "v1", "pods")]
        pdbs = self._by_path[("policy", "v1", "poddisruptionbudgets")]
        with self._cond:
            pod = self._find(pods, ns, name)
            if pod["metadata"].get("deletionTimestamp"):  # already terminating: nothing to disrupt
                return {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "code": 201,
                }
            labels = pod["metadata"].get("labels") or {}
            status = pod.get("status") or {}
            ignored = status.get("phase", "Pending") in ("Pending", "Succeeded", "Failed")
            covering = (
                []
                if ignored
                else [
                    (k, o)
                    for k, o in self._objs.items()
                    if k[0] == pdbs.qualified
                    and k[1] == ns
                    and pdb_selects((o.get("spec") or {}).get("selector"), labels)
                ]
            )
            if len(covering) > 1:
                raise ApiError(
                    500,
                    "InternalError",
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                )
            if covering:
                _, pdb = covering[0]
                self._charge(pdbs, pdb, name, status)
            gone = copy.deepcopy(pod)
            if self.eviction_grace > 0 or (self.finalizers and gone["metadata"].get("finalizers")):
                self._terminate(pods, gone, self.eviction_grace)
                if self.eviction_grace > 0:
                    self._gone_after(pods, ns, name, gone["metadata"].get("uid", ""), self.eviction_grace)
            else:
                self._write(pods, gone, "DELETED")
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def _charge(self, pdbs: ResourceType, pdb: JSON, pod: str, pod_status: JSON) -> None:
        """The eviction handler's check-and-decrement of the covering PDB (caller holds the lock)."""
        st = pdb.get("status") or {}
        ready = any(
            isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
            for c in pod_status.get("conditions") or []
        )
        desired, current = int(st.get("desiredHealthy") or 0), int(st.get("currentHealthy") or 0)
        if not ready and current >= desired and desired > 0:
            return  # an unready pod counts for no healthy one: nothing to charge
        pdb_name = pdb["metadata"]["name"]
        if int(st.get("observedGeneration") or 0) < int(pdb["metadata"].get("generation") or 0):
            raise ApiError(
                429,
                "TooManyRequests",
                _PDB_REFUSAL,
                {"causes": [{"reason": "DisruptionBudget",
                             "message": f"The disruption budget {pdb_name} is still being processed by the server."}]},
            )  # fmt: skip
        allowed = int(st.get("disruptionsAllowed") or 0)
        if allowed < 0:
            raise ApiError(403, "Forbidden", f'poddisruptionbudgets.policy "{pdb_name}" is forbidden: '
                           "pdb disruptions allowed is negative")  # fmt: skip
        if allowed == 0:
            raise ApiError(
                429,
                "TooManyRequests",
                _PDB_REFUSAL,
                {
                    "causes": [
                        {
                            "reason": "DisruptionBudget",
                            "message": f"The disruption budget {pdb_name} needs {desired} healthy pods "
                            f"and has {current} currently",
                        }
                    ]
                },
            )
        new = copy.deepcopy(pdb)
        new.setdefault("status", {})["disruptionsAllowed"] = allowed - 1
        new["status"].setdefault("disruptedPods", {})[pod] = _now()
        self._write(pdbs, new, "MODIFIED")

    def access_review(self, body: Any) -> JSON:
        """Answer a SelfSubjectAccessReview from `self.access` (as an RBAC authorizer would)."""
        spec = (body or {}).get("spec") if isinstance(body, dict) else None
        attrs = (spec or {}).get("resourceAttributes")
        if not isinstance(attrs, dict):
            raise ApiError(422, "Invalid", "spec.resourceAttributes: Required value")
        clean = {k: str(v) for k, v in attrs.items() if v is not None}
        allowed = True if self.access is None else bool(self.access(clean))
        status: JSON = {"allowed": allowed}
        if not allowed:
            status["reason"] = "no RBAC policy matched"
        return {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "metadata": {"creationTimestamp": None},
            "spec": {"resourceAttributes": attrs},
            "status": status,
        }
