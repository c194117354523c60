"""A Kubernetes-compatible API server, in process, for the parts of the API tftui uses.

Why: the adapter must be tested against the real `kubernetes` client and the real HTTP protocol
(discovery, list/watch with resourceVersions, 410 Gone, 409 conflicts, merge patches, subresources,
the Eviction API) without a cluster. The TensorFusion CRDs are served from `tests/data/crds/` with
the API server's CRD semantics: status subresource, structural pruning of unknown fields
(`x-kubernetes-preserve-unknown-fields` respected) and schema `default`s wherever the schema declares
them (applied, as upstream, only inside objects that are present); a write whose result breaks the
CRD's schema is refused with 422 `Invalid` naming each field (`schema.py` says what is checked).

Built-ins served: v1 nodes, pods (status subresource, `eviction`), secrets,
namespaces are implicit;
policy/v1 poddisruptionbudgets; events.k8s.io/v1 events; coordination.k8s.io/v1 leases.
Label values are validated on create/update/patch (422 `Invalid` with the API's wording), which is
the validation error tests use. Pod status on create is reset to `Pending` (as the API does);
`seed()` bypasses the API so statuses can be loaded as they are.

Lists paginate as the API server does: `limit` answers that many items and a `continue` token; the
following pages are served from the snapshot the first page was cut from (one resourceVersion for
the whole list). A token the server no longer knows (after `compact()`, a restart of the process, or
more than `MAX_PAGED_LISTS` lists in flight) answers 410 Expired; a token that does not decode, 400.
`on_continue` (a test hook) runs before each continued page is served, e.g. to write or compact
between two pages.

With `finalizers=True` deletion honours `metadata.finalizers`: a DELETE (or an eviction) of an object
with finalizers only sets `deletionTimestamp`; the object goes when an update removes the last one.
Off by default: no controller runs here to remove them (the demo's worker pods carry
`tensor-fusion.ai/finalizer`, which TensorFusion's controller removes on a real cluster). With
`eviction_grace` > 0 an evicted pod is first marked terminating (`deletionTimestamp`,
`deletionGracePeriodSeconds`) and disappears that many seconds later, as a kubelet would stop it.

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

import base64
import binascii
import bisect
import contextlib
import copy
import functools
import json
import math
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.kubeapi.schema import schema_errors

JSON = dict[str, Any]
CRD_DIR = Path(__file__).resolve().parent.parent / "data" / "crds"
_PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
MAX_LOG = 50_000  # watch history kept; older resourceVersions answer 410 Gone
MAX_PAGED_LISTS = 64  # paginated lists in flight whose snapshot is kept; older tokens answer 410
_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start "
    "a new list without the continue parameter."
)


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status: bool  # has a status subresource
    schema: JSON | None = None  # openAPIV3Schema (CRDs only)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def builtin(self) -> bool:
        return self.schema is None

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


BUILTINS = (
    ResourceType("", "v1", "nodes", "Node", False, True),
    ResourceType("", "v1", "pods", "Pod", True, True),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, True),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, False),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, False),
    ResourceType("", "v1", "secrets", "Secret", True, False),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, False),
)


def load_crds(directory: Path = CRD_DIR) -> list[ResourceType]:
    """Every served version of every CRD file, with its schema and scope."""
    files = sorted(directory.glob("*.yaml"))
    return list(_load_crds(tuple((path, path.stat().st_mtime_ns) for path in files)))


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader (the PyYAML wheels ship it; the same documents as `safe_load`, 7× faster)."""


@functools.cache
def _load_crds(files: tuple[tuple[Path, int], ...]) -> tuple[ResourceType, ...]:
    """Parsed once per process (and again only if a file changed): the pure-Python YAML parser took
    about a CPU-second over the CRDs, and every test server needs them. The schemas are shared by
    every server: they are only read (`prune`, and `apply_defaults` copies each default it sets)."""
    out = []
    for path, _ in files:
        crd = yaml.load(path.read_text(), Loader=_YAML_LOADER)
        spec = crd["spec"]
        for ver in spec["versions"]:
            if not ver.get("served", True):
                continue
            out.append(
                ResourceType(
                    spec["group"],
                    ver["name"],
                    spec["names"]["plural"],
                    spec["names"]["kind"],
                    spec["scope"] == "Namespaced",
                    "status" in (ver.get("subresources") or {}),
                    (ver.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"},
                )
            )
    return tuple(out)


# -- CRD semantics -----------------------------------------------------------------------------------


def prune(value: Any, schema: Mapping[str, Any]) -> Any:
    """Structural pruning: drop object fields the schema does not name (unless preserved)."""
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            props = schema.get("properties")
            if props:
                for k in list(value):
                    if k in props:
                        value[k] = prune(value[k], props[k])
            return value
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        if props is not None:
            for k in list(value):
                if k not in props:
                    del value[k]
                else:
                    value[k] = prune(value[k], props[k])
        elif isinstance(addl, dict):
            for k in value:
                value[k] = prune(value[k], addl)
        elif schema.get("type") == "object" and addl is not True:
            value.clear()
        return value
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(v, schema["items"]) for v in value]
    return value


def crd_shape(rt: ResourceType, obj: JSON) -> None:
    """A custom resource as the API server stores it, in place: pruned, defaulted, its own
    apiVersion and kind (built-ins are left as they are)."""
    if rt.schema is None:
        return
    meta = obj.get("metadata")
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    body = prune(body, rt.schema)
    apply_defaults(body, rt.schema)
    obj.clear()
    obj.update({"apiVersion": rt.api_version, "kind": rt.kind, "metadata": meta, **body})


def apply_defaults(value: Any, schema: Mapping[str, Any]) -> None:
    """Schema `default`s for absent properties of objects that exist (the API server's order)."""
    if isinstance(value, dict):
        for k, sub in (schema.get("properties") or {}).items():
            if k not in value and "default" in sub:
                value[k] = copy.deepcopy(sub["default"])
            if k in value:
                apply_defaults(value[k], sub)
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            for v in value.values():
                apply_defaults(v, addl)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for v in value:
            apply_defaults(v, schema["items"])


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# -- selectors ----------------------------------------------------------------------------------------

_SET_RE = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_selector(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def label_match(selector: str, labels: Mapping[str, str]) -> bool:
    for req in _split_selector(selector):
        m = _SET_RE.match(req)
        if m:
            key, op, vals = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if (op == "in") != (labels.get(key) in vals):
                return False
        elif "!=" in req:
            k, v = req.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in req:
            k, v = req.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif req.startswith("!"):
            if req[1:].strip() in labels:
                return False
        elif req not in labels:
            return False
    return True


def _field(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def field_match(selector: str, obj: Mapping[str, Any]) -> bool:
    for req in _split_selector(selector):
        if "!=" in req:
            k, v = req.split("!=", 1)
            if _field(obj, k.strip()) == v.strip():
                return False
        else:
            k, v = req.replace("==", "=").split("=", 1)
            if _field(obj, k.strip()) != v.strip():
                return False
    return True


def pdb_selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """Whether the Eviction subresource counts this PDB for a pod with `labels` (metav1.LabelSelector,
    as `LabelSelectorAsSelector`): a missing selector selects nothing, an empty one `{}` every pod of
    the namespace, as the disruption controller reads it. (Until Kubernetes 1.29, 1.28.3 and 1.27.7
    the eviction handler skipped an empty selector too, so a drain ignored such a budget:
    kubernetes#119731, fixed by kubernetes#119732.)"""
    if not isinstance(selector, dict):
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, vals = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if (
            (op == "In" and labels.get(key) not in vals)
            or (op == "NotIn" and labels.get(key) in vals)
            or (op == "Exists" and key not in labels)
            or (op == "DoesNotExist" and key in labels)
        ):
            return False
    return True


# -- errors and faults ----------------------------------------------------------------------------------


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: JSON | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> JSON:
        out: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            out["details"] = self.details
        return out


@dataclass(slots=True)
class Fault:
    """One injected fault: `status` (e.g. 500, 429, 409) answers instead of the server; `delay`
    sleeps first (then serves normally unless `status` is set); `drop` cuts a watch after `after`
    events. `method`/`path` (substring) restrict which request consumes it."""

    status: int | None = None
    delay: float = 0.0
    drop: bool = False
    after: int = 0
    method: str | None = None
    path: str = ""
    message: str = "injected fault"
    lose_answer: bool = False  # apply the request, then hold the connection `hold` s and cut it
    hold: float = 0.0
    sticky: bool = False  # answers every matching request until `clear_faults()`

    def matches(self, method: str, path: str, watch: bool) -> bool:
        if self.drop and not watch:
            return False
        return (self.method is None or self.method == method) and self.path in path


@dataclass(frozen=True, slots=True)
class Change:
    """One change the server applied (see the module docstring: the server-side timeline)."""

    seq: int
    at: float  # time.monotonic() when applied
    who: str  # identity of the request that caused it ("" = seed, timers, the test)
    request: str  # "METHOD path" of that request ("" when none)
    kind: str
    namespace: str
    name: str
    uid: str
    type: str  # ADDED, MODIFIED, DELETED
    holder: str = ""  # Lease: spec.holderIdentity after the change
    terminating: bool = False  # deletionTimestamp set after the change


@dataclass(frozen=True, slots=True)
class Served:
    """One write request (not GET) and the status it was answered with (0: the answer was lost)."""

    at: float
    who: str
    method: str
    path: str
    code: int


_request = threading.local()  # the request a handler thread is serving: .who, .line


_REASONS = {
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


# -- the store --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Stats:
    requests: dict[str, int] = field(default_factory=dict)  # "METHOD path" → count

    def hit(self, method: str, path: str) -> None:
        key = f"{method} {path}"
        self.requests[key] = self.requests.get(key, 0) + 1


class KubeApiServer:
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

    # -- watch -----------------------------------------------------------------------------------------

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


def _int_param(q: Mapping[str, str], name: str) -> int:
    raw = q.get(name) or "0"
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, "BadRequest", f"invalid {name}: {raw!r}") from None
    return max(0, value)


def _encode_continue(list_id: int, offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"l": list_id, "o": offset}).encode()).decode()


def _decode_continue(token: str) -> tuple[int, int]:
    try:
        doc = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(doc["l"]), int(doc["o"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise ApiError(400, "BadRequest", "continue key is not valid: invalid token") from None


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


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _discovery(types: Iterable[ResourceType], group_version: str) -> JSON:
    resources: list[JSON] = []
    for t in types:
        verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
        resources.append(
            {
                "name": t.plural,
                "singularName": t.kind.lower(),
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": verbs,
            }
        )
        if t.status:
            resources.append(
                {
                    "name": f"{t.plural}/status",
                    "singularName": "",
                    "namespaced": t.namespaced,
                    "kind": t.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        if t.kind == "Pod":
            resources.append(
                {
                    "name": "pods/eviction",
                    "singularName": "",
                    "namespaced": True,
                    "group": "policy",
                    "version": "v1",
                    "kind": "Eviction",
                    "verbs": ["create"],
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


# -- HTTP ----------------------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    api: KubeApiServer
    protocol_version = "HTTP/1.1"
    # headers and body go out in separate writes: without TCP_NODELAY every answer on a kept-alive
    # connection waits for the client's delayed ACK (~40 ms)
    disable_nagle_algorithm = True
    drop_gen = 0  # watch-drop generation when this request arrived (set by _serve)

    def setup(self) -> None:
        super().setup()
        self.api._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass  # the connection was cut by stop()
        finally:
            self.api._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    swallow = False  # a lost answer: the request is served, the response never sent
    answered = 0  # the status code sent for the current request

    def _send(self, code: int, body: JSON | str, headers: Mapping[str, str] | None = None) -> None:
        if self.swallow:
            return
        self.answered = code
        data = (body if isinstance(body, str) else json.dumps(body, separators=(",", ":"))).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"couldn't decode body: {exc}") from None

    def _serve(self, method: str) -> None:
        api = self.api
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path.rstrip("/")
        watch = q.get("watch") in ("1", "true", "True")
        self.drop_gen = api._arrive(method, path + ("?watch" if watch else ""))
        auth = self.headers.get("Authorization") or ""
        _request.who = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
        _request.line = f"{method} {path}"
        self.swallow = False
        self.answered = 0
        try:
            body = self._body() if method in ("POST", "PUT", "PATCH") else None
            fault = api._take_fault(method, path, watch)
            if fault is not None:
                if fault.delay:
                    time.sleep(fault.delay)
                if fault.status is not None:
                    err = ApiError(fault.status, _REASONS.get(fault.status, "InternalError"), fault.message)
                    extra = {"Retry-After": "0"} if fault.status == 429 else None
                    self._send(fault.status, err.status(), extra)
                    return
            lost = fault if fault is not None and fault.lose_answer else None
            if not fault or not fault.drop:
                fault = None
            self.swallow = lost is not None
            try:
                self._route(method, path, q, body, watch, fault)
            except ApiError:
                if lost is None:
                    raise
            if lost is not None:  # applied; the client hears nothing until it gives up, then the cut
                time.sleep(lost.hold)
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
        except ApiError as exc:
            self._send(exc.code, exc.status())
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            if method != "GET":
                with api._cond:
                    api.served.append(Served(time.monotonic(), _request.who, method, path, self.answered))
            self.swallow = False
            _request.who = _request.line = ""

    def _route(
        self, method: str, path: str, q: dict[str, str], body: Any, watch: bool, drop: Fault | None
    ) -> None:
        api = self.api
        parts = path.strip("/").split("/") if path.strip("/") else []
        if method == "GET" and path in ("/api", ""):
            self._send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
            return
        if method == "GET" and path == "/version":
            self._send(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0-tftui-test"})
            return
        if method == "GET" and path == "/apis":
            groups: dict[str, list[str]] = {}
            for t in api.types:
                if t.group:
                    groups.setdefault(t.group, [])
                    if t.version not in groups[t.group]:
                        groups[t.group].append(t.version)
            self._send(
                200,
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [
                        {
                            "name": g,
                            "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                            "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                        }
                        for g, vs in groups.items()
                    ],
                },
            )
            return
        if method == "POST" and path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
            self._send(201, api.access_review(body))
            return
        if parts[:1] == ["api"]:
            group, rest = "", parts[1:]
        elif parts[:1] == ["apis"] and len(parts) >= 2:
            group, rest = parts[1], parts[2:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        version, rest = rest[0], rest[1:]
        if not rest:
            if method != "GET":
                raise ApiError(405, "MethodNotAllowed", "method not allowed")
            gv = f"{group}/{version}" if group else version
            types = [t for t in api.types if t.group == group and t.version == version]
            if not types:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            self._send(200, _discovery(types, gv))
            return
        ns = ""
        if rest[0] == "namespaces" and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        rt = api._by_path.get((group, version, rest[0]))
        if rt is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub not in ("", "status", "eviction") or (sub == "status" and not rt.status):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not name:
            if method == "GET" and watch:
                self._watch(rt, ns, q, drop)
            elif method == "GET":
                hook = api.on_continue
                if q.get("continue") and hook is not None:
                    hook(rt.plural)
                self._send(200, api.list_items(rt, ns, q)["__raw__"])
            elif method == "POST":
                if not isinstance(body, dict):
                    raise ApiError(400, "BadRequest", "body must be an object")
                self._send(201, api.create(rt, ns, body))
            else:
                raise ApiError(405, "MethodNotAllowed", "method not allowed")
            return
        if sub == "eviction":
            if method != "POST" or rt.kind != "Pod":
                raise ApiError(405, "MethodNotAllowed", "method not allowed")
            self._send(201, api.evict(ns, name))
            return
        if method == "GET":
            with api._cond:
                self._send(200, copy.deepcopy(api._find(rt, ns, name)))
        elif method == "PUT":
            self._send(200, api.update(rt, ns, name, body, status=sub == "status", put=True))
        elif method == "PATCH":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if ctype != "application/merge-patch+json":
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types include: application/merge-patch+json (got {ctype})",
                )
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "merge patch must be an object")
            self._send(200, api.patch(rt, ns, name, body, status=sub == "status"))
        elif method == "DELETE":
            self._send(200, api.delete(rt, ns, name))
        else:
            raise ApiError(405, "MethodNotAllowed", "method not allowed")

    def _chunk(self, obj: JSON) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _watch(self, rt: ResourceType, ns: str, q: Mapping[str, str], drop: Fault | None) -> None:
        api = self.api
        timeout = float(q.get("timeoutSeconds") or 1800)
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1", "True")
        raw_rv = q.get("resourceVersion") or ""
        deadline = time.monotonic() + timeout
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        gen = self.drop_gen  # as of the request's arrival, not of this handler reaching here
        with api._cond:
            if raw_rv in ("", "0"):  # "any": synthetic ADDED for the current state
                since = api._rv
                initial = [
                    {"type": "ADDED", "object": o}
                    for (p, ons, _), o in api._objs.items()
                    if p == rt.qualified and (not ns or ons == ns) and api._selected(o, q)
                ]
            else:
                since, initial = int(raw_rv), []
        try:
            pending = [json.loads(json.dumps(e)) for e in initial]
            last_bookmark = time.monotonic()
            while True:
                for ev in pending:
                    if drop is not None and sent >= drop.after:
                        return self._end(abrupt=True)
                    self._chunk(ev)
                    sent += 1
                self.wfile.flush()
                with api._cond:
                    while True:
                        if api._drop_gen != gen:
                            return self._end(abrupt=True)
                        if time.monotonic() >= deadline:
                            return self._end()
                        try:
                            evs, head = api.watch_events(rt, ns, q, since)
                        except ApiError as exc:
                            self._chunk({"type": "ERROR", "object": exc.status()})
                            return self._end()
                        if evs:
                            since = int(evs[-1]["object"]["metadata"]["resourceVersion"])
                            pending = json.loads(json.dumps(evs))
                            break
                        if bookmarks and time.monotonic() - last_bookmark >= api.bookmark_interval:
                            since = head
                            last_bookmark = time.monotonic()
                            pending = [
                                {
                                    "type": "BOOKMARK",
                                    "object": {
                                        "kind": rt.kind,
                                        "apiVersion": rt.api_version,
                                        "metadata": {"resourceVersion": str(head)},
                                    },
                                }
                            ]
                            break
                        api._cond.wait(0.1)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return None

    def _end(self, abrupt: bool = False) -> None:
        if not abrupt:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True


def write_kubeconfig(
    path: Path,
    server_url: str,
    context: str = "kubeapi-test",
    namespace: str = "default",
    *,
    token: str = "test-token",
) -> Path:
    """A kubeconfig whose current context points at `server_url` (plain http, token auth); the
    server records `token` as the identity of this client's requests (`Change.who`)."""
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server_url}}],
        "users": [{"name": "tester", "user": {"token": token}}],
        "contexts": [
            {"name": context, "context": {"cluster": context, "user": "tester", "namespace": namespace}}
        ],
        "current-context": context,
    }
    path.write_text(yaml.safe_dump(cfg))
    return path
