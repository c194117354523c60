"""The HTTP side of the test API server: the request handler (routing, discovery documents, watch
streams, injected faults applied per request), the list query parameters and `continue` tokens, and
`write_kubeconfig` for the clients that talk to it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import copy
import json
import socket
import time
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.kubeapi.records import _REASONS, JSON, ApiError, Fault, Served, _request
from tests.kubeapi.resources import ResourceType

if TYPE_CHECKING:
    from tests.kubeapi.server import KubeApiServer


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
