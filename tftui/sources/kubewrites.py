"""The live adapter's writes: Plan actions as API calls, retried with backoff and fenced by the
leader's term before every attempt (the module docstring of `sources.kube` says why and how), plus the
read-your-writes bookkeeping `settle()` waits on. A mixin of `KubeCluster`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error

from tftui.engine.plan import (
    Action,
    AnnotateNode,
    AnnotatePod,
    AnnotatePool,
    DeleteGPUNodeClaim,
    Event,
    EvictPod,
    LabelNode,
    LabelPod,
    PatchPoolStatus,
    PatchWorkloadAutoscale,
    PatchWorkloadStatus,
)
from tftui.model.selectors import pdb_selects
from tftui.sources.kubebase import (
    _PLURAL_KIND,
    EVENT_NAMESPACE,
    JSON,
    MERGE,
    MIN_ATTEMPT,
    REPORTER,
    SERIES_WINDOW,
    TF_GROUP,
    TF_VERSION,
    KubeBase,
    T,
    _api_message,
    _done,
    _micro,
)
from tftui.sources.ports import ActionError, NotLeader


def _several_budgets(status: int, message: str) -> bool:
    """The eviction handler's answer for a pod that more than one PDB selects: an InternalError
    (500) that every later attempt repeats while those PDBs stay."""
    return status == 500 and "more than one PodDisruptionBudget" in message


class Writes(KubeBase):
    """`KubeCluster`'s writes (`apply` and the patch helpers); every attempt asks `fence`."""

    def _wrote(self, kind: str, ns: str, name: str, data: bytes = b"") -> None:
        """Remember a write for `settle()`; `data` is the response body (it holds the new rv)."""
        written = ""
        if data:
            try:
                doc = json.loads(data)
                if isinstance(doc, dict) and doc.get("kind") != "Status":
                    written = str((doc.get("metadata") or {}).get("resourceVersion") or "")
            except ValueError:
                pass
        with self._lock:
            if kind not in self._store:
                return
            obj = self._store[kind].get((ns, name))
            before = str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")
            if obj is None and not written:
                return  # nothing cached to wait for
            self._written[(kind, ns, name)] = (written, before)

    def _call(
        self,
        what: str,
        fn: Callable[[int], T],
        *,
        on_conflict: Callable[[], None] | None = None,
        no_retry_429: bool = False,
        final: Callable[[int, str], bool] | None = None,
    ) -> T:
        """Run `fn(attempt)` with retries; non-retryable API errors become ActionError(message, status).
        `final(status, message)`: an answer that another attempt would only repeat (not retried).

        With a `fence`, it is asked before every attempt; `NotLeader` when it says no."""
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self._delay(attempt - 1))
            self._attempt.timeout = self._fenced(what, attempt, last)
            try:
                return fn(attempt)
            except ApiException as exc:
                status = int(exc.status or 500)
                msg = _api_message(exc)
                if final is not None and final(status, msg):
                    raise ActionError(f"{what}: {msg}", status) from None
                if status == 409 and on_conflict is not None:
                    try:
                        on_conflict()  # re-read, then retry
                    except ApiException as again:  # e.g. 404: the object went meanwhile (final)
                        code = int(again.status or 500)
                        if code >= 500 or code == 429:
                            last = f"{code} {_api_message(again)}"
                            continue
                        raise ActionError(f"{what}: {_api_message(again)}", code) from None
                    except (Urllib3Error, OSError) as again:
                        last = str(again).splitlines()[0] if str(again) else type(again).__name__
                        continue
                elif status == 429 and not no_retry_429:
                    retry_after = (exc.headers or {}).get("Retry-After")
                    if retry_after and retry_after.isdigit():
                        time.sleep(min(float(retry_after), self.max_backoff))
                elif status < 500 or status == 501:
                    raise ActionError(f"{what}: {msg}", status) from None
                last = f"{status} {msg}"
            except (Urllib3Error, OSError) as exc:
                last = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ActionError(f"{what}: gave up after {self.retries + 1} attempts: {last}", 503)

    def _fenced(self, what: str, attempt: int, last: str) -> float:
        """The timeout of the next attempt: the request timeout, cut to the leader's term left;
        raises NotLeader when the fence says this replica may not write any more, or when so little
        of the term is left (< MIN_ATTEMPT) that the attempt could only time out unanswered."""
        fence = self.fence
        if fence is None:
            return self.request_timeout
        left = fence.term_left() if fence.is_leader() else 0.0
        if left < MIN_ATTEMPT:
            if attempt == 0:
                raise NotLeader(f"{what}: not sent: this replica is not the leader")
            raise NotLeader(
                f"{what}: abandoned after {attempt} attempt(s) ({last or 'no answer'}): this replica "
                "lost the lease (an attempt in flight may still have been applied)"
            )
        return min(self.request_timeout, left)

    def _timeout(self) -> float:
        """The running attempt's timeout (see `_fenced`); outside `_call` the request timeout."""
        value = getattr(self._attempt, "timeout", None)
        return self.request_timeout if value is None else float(value)

    # -- actions ---------------------------------------------------------------------------------------

    def apply(self, action: Action) -> None:
        """Carry out one Plan action (see the module docstring for retries and idempotence)."""
        if isinstance(action, LabelNode | AnnotateNode):
            field = "labels" if isinstance(action, LabelNode) else "annotations"
            values = action.labels if isinstance(action, LabelNode) else action.annotations
            self._patch_node(action.node, {"metadata": {field: dict(values)}})
        elif isinstance(action, LabelPod | AnnotatePod):
            field = "labels" if isinstance(action, LabelPod) else "annotations"
            values = action.labels if isinstance(action, LabelPod) else action.annotations
            self._patch_pod(action.namespace, action.name, {"metadata": {field: dict(values)}})
        elif isinstance(action, AnnotatePool):
            self.patch_custom(
                "gpupools", action.pool, {"metadata": {"annotations": dict(action.annotations)}}
            )
        elif isinstance(action, PatchPoolStatus):
            self.patch_custom("gpupools", action.pool, {"status": dict(action.fields)}, status=True)
        elif isinstance(action, PatchWorkloadStatus):
            self._patch_workload(action.namespace, action.name, {"status": dict(action.fields)}, status=True)
        elif isinstance(action, PatchWorkloadAutoscale):
            self._patch_workload(action.namespace, action.name, action.patch())
        elif isinstance(action, DeleteGPUNodeClaim):
            self._delete_claim(action.name)
        elif isinstance(action, EvictPod):
            self._evict(action.namespace, action.name)
        elif isinstance(action, Event):
            self._event(action)
        else:  # pragma: no cover - the Action union is closed
            raise ActionError(f"unsupported action {action!r}", 400)

    def patch_template_mode(self, template: str, mode: str) -> None:
        """Set a SchedulingConfigTemplate's `spec.placement.mode` (the console's placement switch)."""
        self.patch_custom("schedulingconfigtemplates", template, {"spec": {"placement": {"mode": mode}}})

    def annotate_pool(self, pool: str, annotations: Mapping[str, str | None]) -> None:
        """Merge annotations into a GPUPool (e.g. `tensor-fusion.ai/manual-compaction`)."""
        self.apply(AnnotatePool(pool, dict(annotations)))

    def patch_custom(self, plural: str, name: str, body: JSON, *, status: bool = False) -> None:
        """JSON merge patch of a cluster-scoped TensorFusion object (or its status subresource)."""
        fn = (
            self.custom.patch_cluster_custom_object_status
            if status
            else self.custom.patch_cluster_custom_object
        )
        self._call(
            f"patch {plural}/{name}{'/status' if status else ''}",
            lambda _: self._wrote(
                _PLURAL_KIND.get(plural, plural),
                "",
                name,
                _done(
                    fn(
                        TF_GROUP,
                        TF_VERSION,
                        plural,
                        name,
                        body,
                        _content_type=MERGE,
                        _preload_content=False,
                        _request_timeout=self._timeout(),
                    )
                ),
            ),
            on_conflict=lambda: self._reread(
                lambda: self.custom.get_cluster_custom_object(
                    TF_GROUP, TF_VERSION, plural, name, _preload_content=False
                )
            ),
        )

    def _patch_node(self, name: str, body: JSON) -> None:
        self._call(
            f"patch node/{name}",
            lambda _: self._wrote(
                "Node",
                "",
                name,
                _done(
                    self.core.patch_node(
                        name,
                        body,
                        _content_type=MERGE,
                        _preload_content=False,
                        _request_timeout=self._timeout(),
                    )
                ),
            ),
            on_conflict=lambda: self._reread(lambda: self.core.read_node(name, _preload_content=False)),
        )

    def _patch_pod(self, ns: str, name: str, body: JSON) -> None:
        self._call(
            f"patch pod {ns}/{name}",
            lambda _: self._wrote(
                "Pod",
                ns,
                name,
                _done(
                    self.core.patch_namespaced_pod(
                        name,
                        ns,
                        body,
                        _content_type=MERGE,
                        _preload_content=False,
                        _request_timeout=self._timeout(),
                    )
                ),
            ),
            on_conflict=lambda: self._reread(
                lambda: self.core.read_namespaced_pod(name, ns, _preload_content=False)
            ),
        )

    def _patch_workload(self, ns: str, name: str, body: JSON, *, status: bool = False) -> None:
        """JSON merge patch of a TensorFusionWorkload: its spec (the console's autoscale toggle) or,
        `status`, its status subresource; remembered for `settle()` as every write is."""
        plural = "tensorfusionworkloads"
        fn = (
            self.custom.patch_namespaced_custom_object_status
            if status
            else self.custom.patch_namespaced_custom_object
        )
        self._call(
            f"patch {plural} {ns}/{name}{'/status' if status else ''}",
            lambda _: self._wrote(
                "TensorFusionWorkload",
                ns,
                name,
                _done(
                    fn(
                        TF_GROUP,
                        TF_VERSION,
                        ns,
                        plural,
                        name,
                        body,
                        _content_type=MERGE,
                        _preload_content=False,
                        _request_timeout=self._timeout(),
                    )
                ),
            ),
            on_conflict=lambda: self._reread(
                lambda: self.custom.get_namespaced_custom_object(
                    TF_GROUP, TF_VERSION, ns, plural, name, _preload_content=False
                )
            ),
        )

    def _reread(self, get: Callable[[], Any]) -> None:
        """After a 409: read the current object (a 404 here is final) before patching again."""
        _done(get())

    def _delete_claim(self, name: str) -> None:
        def delete(attempt: int) -> None:
            try:
                _done(
                    self.custom.delete_cluster_custom_object(
                        TF_GROUP,
                        TF_VERSION,
                        "gpunodeclaims",
                        name,
                        _preload_content=False,
                        _request_timeout=self._timeout(),
                    )
                )
            except ApiException as exc:
                if exc.status == 404 and attempt > 0:
                    return  # an earlier attempt went through; its answer was lost
                raise

        self._call(f"delete gpunodeclaim/{name}", delete)
        self._wrote("GPUNodeClaim", "", name)

    def _evict(self, ns: str, name: str) -> None:
        body = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=name, namespace=ns),
        )

        def evict(attempt: int) -> None:
            try:
                _done(
                    self.core.create_namespaced_pod_eviction(
                        name, ns, body, _preload_content=False, _request_timeout=self._timeout()
                    )
                )
            except ApiException as exc:
                if exc.status == 404 and attempt > 0:
                    return  # evicted by an earlier attempt whose answer was lost
                raise

        budget = self._budget_charged(ns, name)
        self._call(f"evict pod {ns}/{name}", evict, no_retry_429=True, final=_several_budgets)
        self._wrote("Pod", ns, name)
        if budget is not None:  # its rv from before the call: the watch may have brought the change already
            key = ("PodDisruptionBudget", ns, budget[0])
            with self._lock:
                self._written[key] = ("", budget[1])
                self._expected.add(key)

    def _budget_charged(self, ns: str, name: str) -> tuple[str, str] | None:
        """The PodDisruptionBudget an eviction of this pod will charge (name, cached rv): the API server
        decrements `disruptionsAllowed` of the one PDB covering a Running, Ready pod before it deletes
        the pod (a Pending, finished or terminating pod goes without a check; an unready one may). A
        PDB with an empty selector `{}` covers every pod of its namespace there (Kubernetes 1.29,
        1.28.3 and 1.27.7 on); on an older server it is not charged, and the wait for it ends once.
        `settle()` then waits for that PDB's change too, so the next decision never sees the budget
        the eviction just spent as still free. (The API server validates pods and PDBs, but should an
        odd one reach the cache, it means no wait, never a failed eviction.)"""
        try:
            return self._budget_of(ns, name)
        except (AttributeError, TypeError, ValueError):
            return None

    def _budget_of(self, ns: str, name: str) -> tuple[str, str] | None:
        with self._lock:
            pod = self._store.get("Pod", {}).get((ns, name))
            if pod is None:
                return None
            meta = pod.get("metadata") or {}
            status = pod.get("status") or {}
            if status.get("phase") != "Running" or meta.get("deletionTimestamp"):
                return None
            ready = any(
                isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
            labels = meta.get("labels") or {}
            covering = [
                (key[1], str((pdb.get("metadata") or {}).get("resourceVersion") or ""))
                for key, pdb in self._store.get("PodDisruptionBudget", {}).items()
                if key[0] == ns and pdb_selects((pdb.get("spec") or {}).get("selector"), labels)
            ]
        return covering[0] if ready and len(covering) == 1 else None

    def _event(self, ev: Event) -> None:
        """events.k8s.io/v1 Event on the object; a repeat within 5 min bumps the existing `series`."""
        kind, _, name = ev.object.partition("/")
        now = datetime.now(UTC)
        ident = (kind, name, ev.type, ev.reason, ev.message)
        with self._lock:
            prev = self._series.get(ident)
        if prev is not None and now - prev[2] <= SERIES_WINDOW:
            ev_name, count, _ = prev
            patch = {"series": {"count": count + 1, "lastObservedTime": _micro(now)}}
            try:
                self._call(
                    f"update event {ev_name}",
                    lambda _: self._wrote(
                        "Event",
                        EVENT_NAMESPACE,
                        ev_name,
                        _done(
                            self.events_api.patch_namespaced_event(
                                ev_name,
                                EVENT_NAMESPACE,
                                patch,
                                _content_type=MERGE,
                                _preload_content=False,
                                _request_timeout=self._timeout(),
                            )
                        ),
                    ),
                )
            except ActionError as exc:
                if exc.status != 404:
                    raise
                # the event expired (events have a TTL): start a new one below
            else:
                with self._lock:
                    self._series[ident] = (ev_name, count + 1, now)
                return
        with self._lock:
            self._event_seq += 1
            ev_name = f"{name.lower()}.{time.time_ns():x}{self._event_seq:04x}"
        body: Any = {  # a dict: the client accepts it in place of its EventsV1Event model
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": ev_name, "namespace": EVENT_NAMESPACE},
            "eventTime": _micro(now),
            "reportingController": REPORTER,
            "reportingInstance": "tftui",
            "action": ev.reason,
            "reason": ev.reason,
            "regarding": {"apiVersion": f"{TF_GROUP}/{TF_VERSION}", "kind": kind, "name": name},
            "note": ev.message,
            "type": ev.type,
        }

        def create(attempt: int) -> None:
            try:
                self._wrote(
                    "Event",
                    EVENT_NAMESPACE,
                    ev_name,
                    _done(
                        self.events_api.create_namespaced_event(
                            EVENT_NAMESPACE,
                            body,
                            _preload_content=False,
                            _request_timeout=self._timeout(),
                        )
                    ),
                )
            except ApiException as exc:
                if exc.status == 409 and attempt > 0:
                    return  # AlreadyExists: an earlier attempt went through
                raise

        self._call(f"create event {ev_name}", create)
        with self._lock:
            if len(self._series) > 1000:  # forget series whose window has passed
                self._series = {i: v for i, v in self._series.items() if now - v[2] <= SERIES_WINDOW}
            self._series[ident] = (ev_name, 1, now)
