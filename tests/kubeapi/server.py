"""A Kubernetes-compatible API server, in process, for the parts of the API tftui uses.

Why: the adapter must be tested against the real `kubernetes` client and the real HTTP protocol
(discovery, list/watch with resourceVersions, 410 Gone, 409 conflicts, merge patches, subresources,
the Eviction API) without a cluster. Here: the store (`KubeApiServer`) and the names tests import;
beside it `resources.py` (types served, CRD semantics), `selectors.py`, `deletion.py` (finalizers,
evictions), `handler.py` (HTTP) and `records.py` (`Fault`, `Change`, `Served`).

A write whose result breaks the CRD's schema is refused with 422 `Invalid` naming each field
(`schema.py` says what is checked).
Label values are validated on create/update/patch (422 `Invalid` with the API's wording), which is
the validation error tests use. Pod status on create is reset to `Pending` (as the API does);
`seed()` bypasses the API so statuses can be loaded as they are.

Lists paginate as the API server does: `limit` answers that many items and a `continue` token; the
following pages are served from the snapshot the first page was cut from (one resourceVersion for
the whole list). A token the server no longer knows (after `compact()`, a restart of the process, or
more than `MAX_PAGED_LISTS` lists in flight) answers 410 Expired; a token that does not decode, 400.
`on_continue` (a test hook) runs before each continued page is served, e.g. to write or compact
between two pages.

Fault injection: `inject(Fault(...))` queues a fault; the first request whose method and path match
consumes it (a status code with a Status body, a delay, a lost answer — the request is applied, then
the connection is held for `hold` seconds and cut without a response, as when the client times out —
or, for watches, a stream that is cut). `drop_watches()` cuts every open watch; `compact()` forgets
history so older resourceVersions get 410.

Server-side timeline: every change to the store is appended to `timeline` (a `Change`) in the order
it was applied, under the store's lock, with the identity of the request that caused it — the bearer
token of its `Authorization` header, which `write_kubeconfig(token=...)` sets per client ("" for
`seed()`, timers and the test itself) — and, for a Lease, its holder afterwards. So a test can
check what the server accepted from whom and when, e.g. that no replica wrote while another held
the Lease (`writes_outside_lease`).
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import json
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.kubeapi.deletion import Deletion
from tests.kubeapi.handler import _decode_continue, _encode_continue, _Handler, _int_param, write_kubeconfig
from tests.kubeapi.records import JSON, ApiError, Change, Fault, Served, _now, _request, _Stats
from tests.kubeapi.resources import BUILTINS, CRD_DIR, ResourceType, crd_shape, load_crds
from tests.kubeapi.schema import schema_errors
from tests.kubeapi.selectors import field_match, label_match, merge_patch

__all__ = [
    "CRD_DIR",
    "Change",
    "Fault",
    "KubeApiServer",
    "Served",
    "crd_shape",
    "load_crds",
    "write_kubeconfig",
]

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
MAX_LOG = 50_000  # watch history kept; older resourceVersions answer 410 Gone
MAX_PAGED_LISTS = 64  # paginated lists in flight whose snapshot is kept; older tokens answer 410
_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start "
    "a new list without the continue parameter."
)


class KubeApiServer(Deletion):
    """Start with `start()` (or as a context manager); `url` is `http://127.0.0.1:<port>`."""

    def __init__(
        self, crd_dir: Path = CRD_DIR, bookmark_interval: float = 1.0, *, finalizers: bool = False
    ) -> None:
        self.types: list[ResourceType] = [*BUILTINS, *load_crds(crd_dir)]
        self._by_path = {(t.group, t.version, t.plural): t for t in self.types}
        self._by_kind = {(t.api_version, t.kind): t for t in self.types}
        self._objs: dict[tuple[str, str, str], JSON] = {}  # (qualified plural, ns, name) → object
        self._rv = 1
        self._log: list[tuple[int, str, str, JSON]] = []  # rv, qualified plural, type, object
        self._log_rvs: list[int] = []
        self._floor = 1  # watches from an rv below this get 410
        self._cond = threading.Condition()
        self._faults: list[Fault] = []
        self._conns: set[socket.socket] = set()  # open client connections, cut by stop()
        self._conns_lock = threading.Lock()
        self._drop_gen = 0
        self.bookmark_interval = bookmark_interval
        self.stats = _Stats()
        self._pages: dict[int, tuple[int, list[str]]] = {}  # paged list id → (rv, serialized items)
        self._page_seq = 0
        self.on_continue: Callable[[str], None] | None = None
        """Test hook: called with the resource plural before a continued page is served."""
        self.finalizers = finalizers
        self.eviction_grace = 0.0
        """Seconds an evicted pod stays terminating before it is gone (0: gone at once)."""
        self.access: Callable[[Mapping[str, str]], bool] | None = None
        """SelfSubjectAccessReview policy: resourceAttributes → allowed (None: everything allowed)."""
        self.timeline: list[Change] = []
        """Every change applied, in order (see the module docstring)."""
        self.served: list[Served] = []
        """Every write request answered (or whose answer was lost), in order."""
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self, port: int = 0) -> KubeApiServer:
        """Listen on `port` (0: any free one); after `stop()`, `start(port)` brings the same server
        (same objects, same history) back at the same address, like an API server restart."""
        server = self

        class Handler(_Handler):
            api = server

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # many clients (re)connect at once after a watch drop

            def handle_error(self, request: Any, client_address: Any) -> None:
                """A client that hung up (a stopped watch, a test that ended) is not an error of
                the server: only other exceptions print their traceback, as the base class does."""
                if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
                    return
                super().handle_error(request, client_address)

        httpd = Server(("127.0.0.1", port), Handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="kubeapi", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut every open connection, watches and kept-alive ones alike (as a
        restarting API server does): a client must notice, not keep talking to a stopped server."""
        with self._cond:
            self._drop_gen += 1
            self._cond.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        with self._conns_lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            with contextlib.suppress(OSError):  # already closed by its handler
                conn.shutdown(socket.SHUT_RDWR)

    def _track(self, conn: socket.socket, open_: bool) -> None:
        with self._conns_lock:
            if open_:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test controls ------------------------------------------------------------------------------------

    def seed(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Load objects as they are (statuses included), each with a fresh resourceVersion."""
        with self._cond:
            for obj in objects:
                rt = self._type_of(obj)
                o = copy.deepcopy(dict(obj))
                o["apiVersion"], o["kind"] = rt.api_version, rt.kind
                crd_shape(rt, o)
                meta = o.setdefault("metadata", {})
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("creationTimestamp", _now())
                self._write(rt, o, "ADDED")

    def store(self, obj: Mapping[str, Any]) -> None:
        """Write one object as a controller would (ADDED, or MODIFIED when it exists), bypassing the
        API like `seed()`: statuses are kept as given."""
        with self._cond:
            rt = self._type_of(obj)
            o = copy.deepcopy(dict(obj))
            o["apiVersion"], o["kind"] = rt.api_version, rt.kind
            crd_shape(rt, o)
            meta = o.setdefault("metadata", {})
            key = (rt.qualified, meta.get("namespace", "") if rt.namespaced else "", meta["name"])
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now())
            self._write(rt, o, "MODIFIED" if key in self._objs else "ADDED")

    def inject(self, *faults: Fault) -> None:
        with self._cond:
            self._faults.extend(faults)

    def pending_faults(self) -> int:
        with self._cond:
            return len(self._faults)

    def clear_faults(self) -> None:
        with self._cond:
            self._faults.clear()

    def changes(self) -> list[Change]:
        """A copy of the timeline so far."""
        with self._cond:
            return list(self.timeline)

    def lease_holders(self, namespace: str, name: str) -> list[Change]:
        """The Lease's changes, in order: who held it from each one on."""
        return [c for c in self.changes() if c.kind == "Lease" and (c.namespace, c.name) == (namespace, name)]

    def writes_outside_lease(self, namespace: str, name: str) -> list[tuple[Change, str]]:
        """Changes a client caused while the Lease was not held by that client: (change, holder then).
        Lease writes themselves and changes with no identity (seeds, timers) are not counted."""
        holder = ""
        out: list[tuple[Change, str]] = []
        for c in self.changes():
            if c.kind == "Lease" and (c.namespace, c.name) == (namespace, name):
                holder = c.holder
            elif c.who and c.who != holder:
                out.append((c, holder))
        return out

    def drop_watches(self) -> None:
        """Cut every open watch stream (as a load balancer or an API server restart would)."""
        with self._cond:
            self._drop_gen += 1
            self._cond.notify_all()

    def compact(self) -> None:
        """Forget the watch history (etcd compaction): resuming from an older rv gets 410 Gone."""
        with self._cond:
            self._floor = self._rv + 1
            self._log.clear()
            self._log_rvs.clear()
            self._pages.clear()  # a paginated list's snapshot is history too

    def expire_watches(self) -> None:
        """Compact past every client's position and cut every watch: each resumes into 410 Gone and
        must relist (etcd compacted a revision no client has seen yet)."""
        with self._cond:
            self._rv += 1  # a revision no watcher has reached
            self._floor = self._rv + 1
            self._log.clear()
            self._log_rvs.clear()
            self._pages.clear()
            self._drop_gen += 1
            self._cond.notify_all()

    def objects(self, kind: str | None = None) -> list[JSON]:
        """Current objects (copies, `kubectl get -o json` item shape)."""
        with self._cond:
            return [copy.deepcopy(o) for o in self._objs.values() if kind is None or o["kind"] == kind]

    def get(self, kind: str, name: str, namespace: str = "") -> JSON | None:
        with self._cond:
            for (_, ns, n), o in self._objs.items():
                if o["kind"] == kind and n == name and ns == namespace:
                    return copy.deepcopy(o)
        return None

    @property
    def resource_version(self) -> int:
        with self._cond:
            return self._rv

    # -- internals ---------------------------------------------------------------------------------------

    def _type_of(self, obj: Mapping[str, Any]) -> ResourceType:
        rt = self._by_kind.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
        if rt is None:
            raise ValueError(f"not served: {obj.get('apiVersion')} {obj.get('kind')}")
        return rt

    def _write(self, rt: ResourceType, obj: JSON, etype: str) -> JSON:
        """Store (or delete) under the lock, bump the rv, append to the watch log."""
        self._rv += 1
        meta = obj["metadata"]
        key = (rt.qualified, meta.get("namespace", "") if rt.namespaced else "", meta["name"])
        meta["resourceVersion"] = str(self._rv)
        if etype == "DELETED":
            self._objs.pop(key, None)
        else:
            self._objs[key] = obj
        self.timeline.append(
            Change(
                seq=len(self.timeline),
                at=time.monotonic(),
                who=getattr(_request, "who", ""),
                request=getattr(_request, "line", ""),
                kind=rt.kind,
                namespace=key[1],
                name=key[2],
                uid=str(meta.get("uid") or ""),
                type=etype,
                holder=str((obj.get("spec") or {}).get("holderIdentity") or "") if rt.kind == "Lease" else "",
                terminating=bool(meta.get("deletionTimestamp")),
            )
        )
        self._log.append((self._rv, rt.qualified, etype, obj))
        self._log_rvs.append(self._rv)
        if len(self._log) > MAX_LOG:
            cut = len(self._log) - MAX_LOG
            self._floor = self._log_rvs[cut]
            del self._log[:cut]
            del self._log_rvs[:cut]
        self._cond.notify_all()
        return obj

    def _arrive(self, method: str, path: str) -> int:
        """Count a request and return the watch-drop generation, read together: a watch request
        counted before `drop_watches()` runs counts as open and is cut (a test that saw it counted
        may wait for its reconnection)."""
        with self._cond:
            self.stats.hit(method, path)
            return self._drop_gen

    def _take_fault(self, method: str, path: str, watch: bool) -> Fault | None:
        """The first matching fault (removed unless sticky)."""
        with self._cond:
            for i, f in enumerate(self._faults):
                if f.matches(method, path, watch):
                    return f if f.sticky else self._faults.pop(i)
            return None

    def _find(self, rt: ResourceType, ns: str, name: str) -> JSON:
        obj = self._objs.get((rt.qualified, ns, name))
        if obj is None:
            raise ApiError(
                404,
                "NotFound",
                f'{rt.qualified} "{name}" not found',
                {"name": name, "group": rt.group, "kind": rt.plural},
            )
        return obj

    def _validate(self, rt: ResourceType, obj: JSON, old: JSON | None = None) -> None:
        meta = obj.get("metadata") or {}
        if rt.schema is not None:
            causes = list(schema_errors(rt.schema, obj, old))
            if causes:
                name = meta.get("name")
                listed = ", ".join(f"{f}: Invalid value: {m}" for f, m in causes)
                raise ApiError(
                    422,
                    "Invalid",
                    f'{rt.kind}.{rt.group} "{name}" is invalid: [{listed}]'
                    if len(causes) > 1
                    else f'{rt.kind}.{rt.group} "{name}" is invalid: {listed}',
                    {
                        "name": name,
                        "group": rt.group,
                        "kind": rt.kind,
                        "causes": [
                            {"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes
                        ],
                    },
                )
        for k, v in (meta.get("labels") or {}).items():
            if not isinstance(v, str) or len(v) > 63 or not _LABEL_VALUE.match(v):
                raise ApiError(
                    422,
                    "Invalid",
                    f'{rt.kind} "{meta.get("name")}" is invalid: metadata.labels: Invalid value: '
                    f'"{v}": a valid label must be an empty string or consist of alphanumeric '
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                    "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
                    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                    {
                        "name": meta.get("name"),
                        "kind": rt.kind,
                        "causes": [{"field": f"metadata.labels.{k}"}],
                    },
                )

    # -- verbs --------------------------------------------------------------------------------------------

    def list_items(self, rt: ResourceType, ns: str, q: Mapping[str, str]) -> JSON:
        """A list (or one page of it: `limit`, `continue`), as raw JSON under `__raw__`."""
        limit = _int_param(q, "limit")
        token = q.get("continue") or ""
        with self._cond:
            if token:
                list_id, offset = _decode_continue(token)
                page = self._pages.get(list_id)
                if page is None:
                    raise ApiError(410, "Expired", _CONTINUE_EXPIRED)
                rv, rows = page
            else:
                items = [
                    o
                    for (p, ons, _), o in self._objs.items()
                    if p == rt.qualified and (not ns or ons == ns) and self._selected(o, q)
                ]
                rv, offset = self._rv, 0
                items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
                rows = [json.dumps(_item(rt, o), separators=(",", ":")) for o in items]
                list_id = -1
            end = len(rows) if not limit else min(len(rows), offset + limit)
            meta: JSON = {"resourceVersion": str(rv)}
            if end < len(rows):
                if list_id < 0:  # keep the snapshot for the next pages
                    self._page_seq += 1
                    list_id = self._page_seq
                    self._pages[list_id] = (rv, rows)
                    while len(self._pages) > MAX_PAGED_LISTS:
                        del self._pages[min(self._pages)]
                meta["continue"] = _encode_continue(list_id, end)
                meta["remainingItemCount"] = len(rows) - end
            elif list_id >= 0:
                self._pages.pop(list_id, None)
            head = json.dumps(
                {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta, "items": []},
                separators=(",", ":"),
            )
            body = head[:-3] + "[" + ",".join(rows[offset:end]) + "]}"
        return {"__raw__": body}

    @staticmethod
    def _selected(obj: JSON, q: Mapping[str, str]) -> bool:
        meta = obj.get("metadata") or {}
        if q.get("labelSelector") and not label_match(q["labelSelector"], meta.get("labels") or {}):
            return False
        return not (q.get("fieldSelector") and not field_match(q["fieldSelector"], obj))

    def create(self, rt: ResourceType, ns: str, body: JSON) -> JSON:
        with self._cond:
            obj = copy.deepcopy(body)
            obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
            meta = obj.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            if not meta.get("name"):
                raise ApiError(
                    422,
                    "Invalid",
                    f"{rt.kind} is invalid: metadata.name: Required value: name or generateName is required",
                )
            if rt.namespaced:
                meta["namespace"] = ns or meta.get("namespace") or "default"
            else:
                meta.pop("namespace", None)
            key = (rt.qualified, meta.get("namespace", ""), meta["name"])
            if key in self._objs:
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{rt.qualified} "{meta["name"]}" already exists',
                    {"name": meta["name"], "group": rt.group, "kind": rt.plural},
                )
            if rt.status:
                obj.pop("status", None)
                if rt.kind == "Pod":
                    obj["status"] = {"phase": "Pending"}
            crd_shape(rt, obj)
            self._validate(rt, obj)
            meta.pop("resourceVersion", None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _now()
            if rt.schema is not None:
                meta["generation"] = 1
            return copy.deepcopy(self._write(rt, obj, "ADDED"))

    def update(self, rt: ResourceType, ns: str, name: str, new: JSON, *, status: bool, put: bool) -> JSON:
        """PUT (with the rv precondition) or an already merged PATCH, on the object or `/status`."""
        with self._cond:
            old = self._find(rt, ns, name)
            want_rv = (new.get("metadata") or {}).get("resourceVersion")
            if want_rv and want_rv != old["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {rt.qualified} "{name}": the object has been '
                    "modified; please apply your changes to the latest version and try again",
                    {"name": name, "group": rt.group, "kind": rt.plural},
                )
            if put and not want_rv and rt.schema is None:
                raise ApiError(
                    422,
                    "Invalid",
                    f'{rt.kind} "{name}" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
                    "must be specified for an update",
                )
            obj = copy.deepcopy(new)
            obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
            if status:  # only status changes
                kept = copy.deepcopy(old)
                if "status" in obj:
                    kept["status"] = obj["status"]
                else:
                    kept.pop("status", None)
                obj = kept
            elif rt.status:  # a main-resource update ignores status
                if "status" in old:
                    obj["status"] = copy.deepcopy(old["status"])
                else:
                    obj.pop("status", None)
            meta = obj.setdefault("metadata", {})
            for k in ("uid", "creationTimestamp", "name", "namespace", *_DELETION):
                if k in old["metadata"]:
                    meta[k] = old["metadata"][k]
                elif k in _DELETION:
                    meta.pop(k, None)  # set by a deletion only
            if (
                self.finalizers
                and meta.get("deletionTimestamp")
                and old["metadata"].get("finalizers")
                and not meta.get("finalizers")
            ):
                self._write(rt, copy.deepcopy(old), "DELETED")  # the last finalizer went: now it goes
                return copy.deepcopy(obj)
            crd_shape(rt, obj)
            self._validate(rt, obj, old)
            if rt.schema is not None:
                gen = int(old["metadata"].get("generation") or 1)
                changed = {k: v for k, v in obj.items() if k not in ("metadata", "status")} != {
                    k: v for k, v in old.items() if k not in ("metadata", "status")
                }
                meta["generation"] = gen + 1 if changed else gen
            if _same(old, obj):
                return copy.deepcopy(old)  # a no-op write does not bump the rv
            return copy.deepcopy(self._write(rt, obj, "MODIFIED"))

    def patch(self, rt: ResourceType, ns: str, name: str, patch: JSON, *, status: bool) -> JSON:
        with self._cond:
            old = self._find(rt, ns, name)
            merged = merge_patch(copy.deepcopy(old), patch)
            if not (patch.get("metadata") or {}).get("resourceVersion"):
                merged["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return self.update(rt, ns, name, merged, status=status, put=False)

    # -- watch -----------------------------------------------------------------------------------------

    def watch_events(
        self, rt: ResourceType, ns: str, q: Mapping[str, str], since: int
    ) -> tuple[list[JSON], int]:
        """Events after `since` (caller holds the lock); raises 410 when `since` is compacted away."""
        if since + 1 < self._floor:
            raise ApiError(410, "Expired", f"too old resource version: {since} ({self._floor - 1})")
        start = bisect.bisect_right(self._log_rvs, since)
        out = []
        for rv, plural, etype, obj in self._log[start:]:
            if plural != rt.qualified:
                continue
            if ns and obj["metadata"].get("namespace") != ns:
                continue
            if not self._selected(obj, q):
                continue
            out.append({"type": etype, "object": obj})
            since = rv
        return out, self._rv


_DELETION = ("deletionTimestamp", "deletionGracePeriodSeconds")


def _same(a: JSON, b: JSON) -> bool:
    strip = ("resourceVersion", "generation")
    ma = {k: v for k, v in a.get("metadata", {}).items() if k not in strip}
    mb = {k: v for k, v in b.get("metadata", {}).items() if k not in strip}
    return ma == mb and {k: v for k, v in a.items() if k != "metadata"} == {
        k: v for k, v in b.items() if k != "metadata"
    }


def _item(rt: ResourceType, obj: JSON) -> JSON:
    """Built-in list items come without apiVersion/kind (as from the real API); CRD items keep them."""
    if rt.builtin:
        return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return obj
