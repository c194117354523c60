"""The list+watch cache of the live adapter: paged lists, watches resumed from the last
resourceVersion, relists on 410 Gone, optional CRDs retried (the module docstring of `sources.kube`
says why and how). A mixin of `KubeCluster`, apart from the writes it shares nothing with but state."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines
from urllib3.exceptions import HTTPError as Urllib3Error

from tftui.model.dedupe import Deduper
from tftui.model.gcpause import gc_paused
from tftui.sources.kubebase import (
    JSON,
    OPTIONAL_RETRY,
    TF_GROUP,
    WATCH_TIMEOUT,
    Kind,
    KubeBase,
    _api_message,
    _key,
)


class WatchCache(KubeBase):
    """`KubeCluster`'s list+watch threads: they fill `_store` and `_rv` and wake `_changed`.

    Every object is stored as `_dedupe` makes it as it arrives (`model.dedupe`: strings interned,
    equal parts shared, `managedFields` dropped): the decoded JSON of a 5,000-node cluster would
    take more than twice the memory."""

    _dedupe: Deduper

    def _list_fn(self, k: Kind) -> Callable[..., Any]:
        if k.namespace or k.field_selector:
            return self._scoped_list(k)
        if k.group == TF_GROUP:
            return self._custom_list(k)
        if k.kind == "Node":
            return self.core.list_node
        if k.kind == "Pod":
            return self.core.list_pod_for_all_namespaces
        if k.kind == "ConfigMap":
            fn = self.core.list_config_map_for_all_namespaces

            def list_labelled(**kwargs: Any) -> Any:
                return fn(label_selector=k.label_selector, **kwargs)

            return list_labelled
        return self.policy.list_pod_disruption_budget_for_all_namespaces

    def _scoped_list(self, k: Kind) -> Callable[..., Any]:
        """Events and Leases: one namespace, one field selector."""
        if k.kind == "Event":
            fn: Callable[..., Any] = self.events_api.list_namespaced_event
        elif k.kind == "Lease":
            fn = client.CoordinationV1Api(self.api).list_namespaced_lease
        else:  # pragma: no cover - only the two above are scoped
            raise ValueError(f"no scoped list for {k.kind}")

        def list_scoped(**kwargs: Any) -> Any:
            return fn(k.namespace, field_selector=k.field_selector or None, **kwargs)

        return list_scoped

    def _custom_list(self, k: Kind) -> Callable[..., Any]:
        api = self.custom

        def list_custom(**kwargs: Any) -> Any:
            return api.list_cluster_custom_object(k.group, k.version, k.plural, **kwargs)

        return list_custom

    def _list(self, k: Kind) -> None:
        """List one kind in pages of `page_size` (a 410 on a later page, its snapshot expired, propagates
        and `_run` relists from the start); the cache takes the whole list at once."""
        items: dict[tuple[str, str], JSON] = {}
        token, rv = "", ""
        with gc_paused():  # a big list allocates millions of containers that all stay alive
            while True:
                resp = self._list_fn(k)(
                    limit=self.page_size or None,
                    _continue=token or None,
                    _preload_content=False,
                    _request_timeout=self.request_timeout,
                )
                try:
                    data = resp.data
                finally:
                    resp.release_conn()
                doc = json.loads(data)
                page = doc.get("items") or []
                for obj in page:
                    obj["apiVersion"] = k.api_version  # the API omits these on list items
                    obj["kind"] = k.kind
                    items[_key(obj)] = self._dedupe.object(obj)
                # progress for `wait_synced` (threads of several kinds may race on the count: it
                # is shown, never decided on; the time is what a wait's deadline follows)
                self.listed += len(page)
                self._listed_at = time.monotonic()
                meta = doc.get("metadata") or {}
                rv = str(meta.get("resourceVersion") or "")  # every page carries the list's rv
                token = str(meta.get("continue") or "")
                del doc, data, resp  # this page's JSON goes before the next one is read
                if not token:
                    break
        with self._lock:
            self._store[k.kind] = items
            self._rv[k.kind] = rv
            self.generation += 1
            if self._synced[k.kind].is_set():
                self.relists += 1
            self._changed.notify_all()
        self._synced[k.kind].set()
        self._errors.pop(k.kind, None)
        self._fatal.discard(k.kind)

    def _run(self, k: Kind) -> None:
        """One kind's loop: list, watch from the list's rv, resume after drops, relist after 410."""
        need_list, failures = True, 0
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list(k)
                    need_list = False
                self._watch(k)
                failures = 0
            except ApiException as exc:
                if exc.status == 410:
                    need_list = True
                    continue
                if exc.status == 404 and k.optional:  # CRD not installed: none of these exist
                    self._absent(k)
                    need_list = True
                    self._stop.wait(OPTIONAL_RETRY)
                    continue
                self._errors[k.kind] = f"{exc.status} {_api_message(exc)}"
                if exc.status in (401, 403, 404):  # wrong credentials, RBAC, CRD not installed
                    self._fatal.add(k.kind)
                failures += 1
            except (Urllib3Error, OSError, ValueError) as exc:  # dropped stream, refused connection
                self._errors[k.kind] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                if "connect" in self._errors[k.kind].lower():
                    self._fatal.add(k.kind)
                failures += 1
            if failures and not self._stop.is_set():
                self._stop.wait(self._delay(failures - 1))

    def _absent(self, k: Kind) -> None:
        """An optional kind the API does not serve: an empty, synced cache (retried later)."""
        with self._lock:
            if self._store[k.kind]:
                self.generation += 1
            self._store[k.kind] = {}
            self._rv.pop(k.kind, None)
            self._changed.notify_all()
        self._synced[k.kind].set()
        self._errors.pop(k.kind, None)
        self._fatal.discard(k.kind)

    def _watch(self, k: Kind) -> None:
        """One watch request from the stored rv until the server ends it (or the stream breaks)."""
        with self._lock:
            rv = self._rv.get(k.kind, "")
        resp = self._list_fn(k)(
            watch=True,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_TIMEOUT,
            _preload_content=False,
            _request_timeout=(self.request_timeout, WATCH_TIMEOUT + 30),
        )
        self._streams[k.kind] = resp
        try:
            for line in iter_resp_lines(resp):
                if self._stop.is_set():
                    return
                if line:
                    self._on_event(k, json.loads(line))
        finally:
            self._streams.pop(k.kind, None)
            resp.close()
            resp.release_conn()

    def _on_event(self, k: Kind, ev: JSON) -> None:
        etype, obj = ev.get("type"), ev.get("object") or {}
        if etype == "ERROR":  # 410 Gone arrives in-stream as a Status
            raise ApiException(
                status=int(obj.get("code") or 500), reason=obj.get("reason"), body=json.dumps(obj)
            )
        new_rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if etype in ("ADDED", "MODIFIED"):
            obj["apiVersion"], obj["kind"] = k.api_version, k.kind
            obj = self._dedupe.object(obj)  # outside the lock: readers need not wait for it
        with self._lock:
            if etype in ("ADDED", "MODIFIED"):
                self._store[k.kind][_key(obj)] = obj
                self.generation += 1
            elif etype == "DELETED":
                self._store[k.kind].pop(_key(obj), None)
                self.generation += 1
            if new_rv:
                self._rv[k.kind] = new_rv
            self._changed.notify_all()

    # -- retries ---------------------------------------------------------------------------------------
