"""The live-cluster `WritableClusterPort`: the official `kubernetes` client, a list+watch cache, real writes.

Why a cache: the console and the runtime ask for snapshots often; a watch per kind keeps an in-memory
copy current at the cost of one list per kind at start (and after a 410 Gone), instead of re-listing
the cluster on every read. Lists are decoded with plain `json` (`_preload_content=False`): the client's
model classes would cost several times the parse and rename fields to snake_case. Watch streams are read
line by line the same way (`kubernetes.watch.watch.iter_resp_lines`) rather than through `Watch`:
its typed mode rejects objects the models consider incomplete and its `deserialize=False` mode
crashes on the in-stream ERROR that carries 410 Gone.

Consistency: each kind is listed (in pages of `PAGE_SIZE`, all cut from one snapshot), then watched
from the list's resourceVersion; every event replaces the stored dict (stored dicts are never
mutated), bookmarks advance the resourceVersion, a dropped watch resumes from the last one seen, and
410 Gone (history compacted, or a list's continue token expired between two pages) triggers a relist
that replaces the kind's objects wholesale. `wait_synced()` waits for the first list of every kind.
ProviderConfig and GPUResourceQuota are newer CRDs: where the API does not serve them (404) the kind
counts as synced and empty, and is listed again every `OPTIONAL_RETRY` seconds. ConfigMaps are
watched with a label selector: only TensorFusion's own config ConfigMap (the scheduler settings).
Besides the `KINDS` of the snapshot, two kinds are cached in one namespace each, with a field selector
so a busy cluster's other Events and Leases (every node renews one every 10 s) are never streamed:
tftui's own events.k8s.io/v1 Events (`reportingController`, in `EVENT_NAMESPACE`) and, when `lease`
names one, the daemon's coordination.k8s.io/v1 Lease. `events()` and `lease()` read them from the cache.

Read-your-writes: every write remembers which object it changed and the resourceVersion the API
answered with; `settle()` waits until the watches delivered those changes, so a loop that decides
right after acting never decides on a cache that still shows the pod it just evicted.

Writes are the Plan actions as API calls (JSON merge patches, the status subresource, the policy/v1
Eviction subresource, events.k8s.io/v1 Events, GPUNodeClaim deletion), retried with exponential
backoff and jitter on 409 Conflict (after re-reading the object), 429 (except a PDB refusing an
eviction), 5xx and timeouts; other 4xx are not retried and surface as `ActionError` with the API's
message. Creations use deterministic names so a retry after a lost response cannot create twice.

Fencing (the daemon's leader election): with `fence` set, it is asked before *every* attempt of a
call, retries included, and each attempt's timeout is cut to what is left of the leader's term.
When the fence says no — the lease was lost before the first attempt, during the backoff, or while
an attempt was in flight — the call is abandoned with `NotLeader` and never retried, so a deposed
leader sends nothing more. (A request already on the wire cannot be recalled: its timeout ends with
the term, before another replica may take the lease over, and the abandonment says so.)
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Protocol, TypeVar

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines
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
from tftui.model import redact
from tftui.model.gcpause import gc_paused
from tftui.sources.contexts import ContextInfo, list_contexts
from tftui.sources.ports import ActionError, NotLeader, SourceError

__all__ = ["EVENT_KIND", "KINDS", "Fence", "Kind", "KubeCluster", "lease_kind"]

JSON = dict[str, Any]
T = TypeVar("T")
TF_GROUP: Final = "tensor-fusion.ai"
TF_VERSION: Final = "v1"
MERGE: Final = "application/merge-patch+json"
EVENT_NAMESPACE: Final = "default"  # events about cluster-scoped objects live here (as kubectl's)
SERIES_WINDOW: Final = timedelta(minutes=5)  # client-go's event series window
WATCH_TIMEOUT: Final = 300  # seconds per watch request; the server ends it, we resume
MIN_ATTEMPT: Final = 0.25  # seconds of term an attempt needs; with less it could only time out
PAGE_SIZE: Final = 500  # items per list page (client-go's pager default): no giant single response
OPTIONAL_RETRY: Final = 60.0  # seconds between lists of an optional kind whose CRD is not installed


@dataclass(frozen=True, slots=True)
class Kind:
    kind: str
    group: str  # "" = core
    version: str
    plural: str
    namespace: str = ""  # watch one namespace only ("" = all)
    field_selector: str = ""
    label_selector: str = ""
    optional: bool = False  # a CRD older TensorFusion releases do not have: not served = none exist

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


KINDS: Final = (
    Kind("TensorFusionCluster", TF_GROUP, TF_VERSION, "tensorfusionclusters"),
    Kind("GPUPool", TF_GROUP, TF_VERSION, "gpupools"),
    Kind("GPUNode", TF_GROUP, TF_VERSION, "gpunodes"),
    Kind("GPU", TF_GROUP, TF_VERSION, "gpus"),
    Kind("TensorFusionWorkload", TF_GROUP, TF_VERSION, "tensorfusionworkloads"),
    Kind("WorkloadProfile", TF_GROUP, TF_VERSION, "workloadprofiles"),
    Kind("SchedulingConfigTemplate", TF_GROUP, TF_VERSION, "schedulingconfigtemplates"),
    Kind("GPUNodeClaim", TF_GROUP, TF_VERSION, "gpunodeclaims"),
    Kind("ProviderConfig", TF_GROUP, TF_VERSION, "providerconfigs", optional=True),
    Kind("GPUResourceQuota", TF_GROUP, TF_VERSION, "gpuresourcequotas", optional=True),
    Kind("Node", "", "v1", "nodes"),
    Kind("Pod", "", "v1", "pods"),
    Kind("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets"),
    # the chart's config ConfigMap (the scheduler configuration), in whatever namespace it was installed
    Kind("ConfigMap", "", "v1", "configmaps", label_selector="tensor-fusion.ai/component=config"),
)
"""The kinds of `snapshot()` (what `ClusterState` is built from)."""
_PLURAL_KIND: Final = {k.plural: k.kind for k in KINDS}
REPORTER: Final = "tensor-fusion.ai/tftui"
EVENT_KIND: Final = Kind(
    "Event", "events.k8s.io", "v1", "events", EVENT_NAMESPACE, f"reportingController={REPORTER}"
)


def lease_kind(namespace: str, name: str) -> Kind:
    """The one Lease a daemon replica watches (its leader-election lease)."""
    return Kind("Lease", "coordination.k8s.io", "v1", "leases", namespace, f"metadata.name={name}")


class _Retryable(Exception):
    """Internal: this attempt failed in a way worth another try."""


class Fence(Protocol):
    """Whether this process may still write (the daemon's `LeaderElector`)."""

    def is_leader(self) -> bool: ...

    def term_left(self) -> float:
        """Seconds this replica may still act (0 when it is not the leader)."""
        ...


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name", ""))


def _api_message(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or "")
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
    except ValueError:
        pass
    return f"{exc.status} {exc.reason}".strip()


def error_line(exc: BaseException) -> str:
    """One line for an API or connection error (`403 leases ... is forbidden`), for logs and doctor;
    credentials masked (`model.redact`)."""
    if isinstance(exc, ApiException):
        message = _api_message(exc)  # the body's message, else "status reason"
        return redact.scrub(message if message.startswith(f"{exc.status} ") else f"{exc.status} {message}")
    text = str(exc).strip()
    return redact.scrub(text.splitlines()[0] if text else type(exc).__name__)


def _done(resp: Any) -> bytes:
    """Read and release a raw (`_preload_content=False`) response so its connection is reused."""
    if hasattr(resp, "release_conn"):
        data: bytes = resp.data
        resp.release_conn()
        return data
    return b""


def _micro(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class KubeCluster:
    """`WritableClusterPort` over a live cluster (kubeconfig, `context`, or in-cluster config).

    `in_cluster=None` tries the kubeconfig first and falls back to the pod's service account.
    `start=False` only connects (no watches), for one-shot writes. Retry timing is tunable for tests.
    """

    def __init__(
        self,
        context: str | None = None,
        kubeconfig: str | None = None,
        *,
        in_cluster: bool | None = None,
        start: bool = True,
        retries: int = 5,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        request_timeout: float = 30.0,
        lease: tuple[str, str] | None = None,
        page_size: int = PAGE_SIZE,
    ) -> None:
        """`lease` = (namespace, name) also caches that Lease (the daemon's leader election);
        `page_size` is the `limit` of each list page (0: one unpaginated list)."""
        self.kinds: tuple[Kind, ...] = (*KINDS, EVENT_KIND) + ((lease_kind(*lease),) if lease else ())
        self.kubeconfig = kubeconfig
        """The kubeconfig file read (None: the client's default), for `contexts` and `with_context`."""
        self.user: str | None = None
        """The kubeconfig user entry's name of the context (never a credential); None in-cluster."""
        self._name = self._load_config(context, kubeconfig, in_cluster)
        self.api = client.ApiClient(self._cfg)
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.policy = client.PolicyV1Api(self.api)
        self.events_api = client.EventsV1Api(self.api)
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.request_timeout = request_timeout
        self.page_size = page_size
        self._lock = threading.Lock()
        self._store: dict[str, dict[tuple[str, str], JSON]] = {k.kind: {} for k in self.kinds}
        self._rv: dict[str, str] = {}
        self._synced: dict[str, threading.Event] = {k.kind: threading.Event() for k in self.kinds}
        self._changed = threading.Condition(self._lock)
        # (kind, ns, name) → (rv the write answered with, or "" when unknown; rv cached before it)
        self._written: dict[tuple[str, str, str], tuple[str, str]] = {}
        self._errors: dict[str, str] = {}  # kind → last list/watch error, for wait_synced
        self._fatal: set[str] = set()  # kinds whose last error will not heal by waiting (refused, 403, 404)
        self._stop = threading.Event()
        self._streams: dict[str, Any] = {}  # kind → the open watch response
        self._threads: list[threading.Thread] = []
        self._series: dict[tuple[str, str, str, str, str], tuple[str, int, datetime]] = {}
        self._event_seq = 0
        self._rng = random.Random()
        self.fence: Fence | None = None
        """Set by the daemon: asked before every write attempt (see the module docstring)."""
        self._attempt = threading.local()  # the running attempt's timeout (`_timeout`)
        self.relists = 0  # lists after the first per kind (410 Gone), for tests and the status line
        self.generation = 0  # bumped on every cache change
        if start:
            self.start()

    def _load_config(self, context: str | None, kubeconfig: str | None, in_cluster: bool | None) -> str:
        self._cfg = client.Configuration()
        self._cfg.connection_pool_maxsize = len(self.kinds) + 8  # one connection per watch, plus writes
        if in_cluster:
            try:
                config.load_incluster_config(client_configuration=self._cfg)
            except config.ConfigException as exc:
                raise SourceError(f"in-cluster config unavailable: {redact.scrub(str(exc))}") from None
            self._register_credentials()
            return "in-cluster"
        try:
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=self._cfg)
            self._register_credentials()
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
            name = context or str(active["name"])
            chosen = [c for c in contexts or [] if c.get("name") == name]
            user = (chosen[0].get("context") or {}).get("user") if chosen else None
            self.user = user if isinstance(user, str) and user else None
            return name
        except Exception as exc:  # the client raises several unrelated types for a bad kubeconfig
            self._register_credentials()  # whatever was loaded before the failure
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if in_cluster is None:
                try:
                    config.load_incluster_config(client_configuration=self._cfg)
                    self._register_credentials()
                    return "in-cluster"
                except config.ConfigException:
                    pass
            raise SourceError(f"no usable kubeconfig: {redact.scrub(first)}") from None

    def _register_credentials(self) -> None:
        """The kubeconfig's token, password and the server URL's password are masked in all output."""
        cfg = self._cfg
        tokens = [str(v) for v in (cfg.api_key or {}).values() if v]
        redact.register(*tokens, *(t.split(" ", 1)[1] for t in tokens if " " in t))
        redact.register(cfg.password or None, *redact.dsn_secrets(str(cfg.host or "")))

    # -- the port --------------------------------------------------------------------------------------

    def describe(self) -> str:
        """The kubeconfig context name (or `in-cluster`)."""
        return self._name

    def contexts(self) -> list[ContextInfo]:
        """The kubeconfig's contexts (`sources.contexts.ContextInfo`), the one in use marked;
        in-cluster, none (there is no kubeconfig to switch in)."""
        if self._name == "in-cluster":
            return []
        return list_contexts(self.kubeconfig, self._name)

    def with_context(self, context: str, timeout: float = 30.0) -> KubeCluster:
        """A new cache over another context of the same kubeconfig, synced (same retry settings);
        `SourceError` (one line) when it cannot be read. This cache is left as it is."""
        other = KubeCluster(
            context=context,
            kubeconfig=self.kubeconfig,
            retries=self.retries,
            backoff=self.backoff,
            max_backoff=self.max_backoff,
            request_timeout=self.request_timeout,
            page_size=self.page_size,
        )
        try:
            other.wait_synced(timeout)
        except SourceError:
            other.close()
            raise
        return other

    def snapshot(self) -> list[dict[str, Any]]:
        """The cached objects, every kind, as `kubectl get -o json` items (apiVersion and kind set).

        The list is a copy; the dicts are shared with the cache but never mutated by it (a watch event
        replaces an object), so treat them as read-only.
        """
        with self._lock:
            out: list[JSON] = []
            for k in KINDS:
                out.extend(self._store[k.kind].values())
            return out

    def wait_synced(self, timeout: float = 30.0) -> None:
        """Block until every kind has been listed once; SourceError (one line) if that fails."""
        deadline = time.monotonic() + timeout
        for k in self.kinds:
            while not self._synced[k.kind].wait(min(0.05, max(0.0, deadline - time.monotonic()))):
                err = self._errors.get(k.kind)
                if err and (time.monotonic() >= deadline or k.kind in self._fatal):
                    raise SourceError(redact.scrub(f"cluster {self._name}: cannot list {k.plural}: {err}"))
                if time.monotonic() >= deadline:
                    raise SourceError(
                        f"cluster {self._name}: no answer listing {k.plural} within {timeout:g}s"
                    )

    def synced(self) -> bool:
        return all(e.is_set() for e in self._synced.values())

    def cached(self, kind: str) -> list[JSON]:
        """The cached objects of one kind (e.g. `Event`, `Lease`), read-only dicts."""
        with self._lock:
            return list(self._store.get(kind, {}).values())

    def lease(self) -> JSON | None:
        """The cached leader-election Lease (None when absent or not watched)."""
        leases = self.cached("Lease")
        return leases[0] if leases else None

    def settle(self, timeout: float = 5.0) -> bool:
        """Wait until the cache shows every write made so far (see the module docstring); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                self._written = {k: v for k, v in self._written.items() if not self._seen(k, *v)}
                if not self._written:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.05))

    def _seen(self, key: tuple[str, str, str], written: str, before: str) -> bool:
        obj = self._store.get(key[0], {}).get((key[1], key[2]))
        if obj is None:
            if written:  # a creation not yet delivered, or created and gone since: the kind's rv says
                head = self._rv.get(key[0], "")
                return not (head.isdigit() and written.isdigit()) or int(head) >= int(written)
            return True  # gone (deleted, evicted) — or never cached (an Event of another namespace)
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if written:
            return rv == written or (rv.isdigit() and written.isdigit() and int(rv) >= int(written))
        return rv != before  # an eviction or delete: the object changed (deletionTimestamp) or went

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

    def start(self) -> None:
        for k in self.kinds:
            t = threading.Thread(target=self._run, args=(k,), name=f"kube-watch-{k.plural}", daemon=True)
            t.start()
            self._threads.append(t)

    def close(self) -> None:
        """Stop the watch threads (they end at their next event or timeout) and close the pool."""
        self._stop.set()
        deadline = time.monotonic() + 5
        while any(t.is_alive() for t in self._threads) and time.monotonic() < deadline:
            for resp in list(self._streams.values()):  # a watch may open while we close: repeat
                with contextlib.suppress(Exception):  # already closed by its own thread
                    resp.shutdown()  # interrupts the blocked read (urllib3 ≥ 2.3)
            for t in self._threads:
                t.join(timeout=0.01)
        self.api.close()

    # -- list + watch ----------------------------------------------------------------------------------

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
                for obj in doc.get("items") or []:
                    obj["apiVersion"] = k.api_version  # the API omits these on list items
                    obj["kind"] = k.kind
                    items[_key(obj)] = obj
                meta = doc.get("metadata") or {}
                rv = str(meta.get("resourceVersion") or "")  # every page carries the list's rv
                token = str(meta.get("continue") or "")
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
        with self._lock:
            if etype in ("ADDED", "MODIFIED"):
                obj["apiVersion"], obj["kind"] = k.api_version, k.kind
                self._store[k.kind][_key(obj)] = obj
                self.generation += 1
            elif etype == "DELETED":
                self._store[k.kind].pop(_key(obj), None)
                self.generation += 1
            if new_rv:
                self._rv[k.kind] = new_rv
            self._changed.notify_all()

    # -- retries ---------------------------------------------------------------------------------------

    def _delay(self, attempt: int) -> float:
        """Exponential backoff with full jitter (so many clients do not retry in step)."""
        cap = min(self.max_backoff, self.backoff * (2**attempt))
        return cap / 2 + self._rng.uniform(0, cap / 2)

    def _call(
        self,
        what: str,
        fn: Callable[[int], T],
        *,
        on_conflict: Callable[[], None] | None = None,
        no_retry_429: bool = False,
    ) -> T:
        """Run `fn(attempt)` with retries; non-retryable API errors become ActionError(message, status).

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
            self._patch_workload_status(action.namespace, action.name, dict(action.fields))
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

    def _patch_workload_status(self, ns: str, name: str, fields: JSON) -> None:
        """JSON merge patch of a TensorFusionWorkload's status subresource."""
        plural = "tensorfusionworkloads"
        self._call(
            f"patch {plural} {ns}/{name}/status",
            lambda _: self._wrote(
                "TensorFusionWorkload",
                ns,
                name,
                _done(
                    self.custom.patch_namespaced_custom_object_status(
                        TF_GROUP,
                        TF_VERSION,
                        ns,
                        plural,
                        name,
                        {"status": fields},
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

    def _patch_workload(self, ns: str, name: str, body: JSON) -> None:
        """JSON merge patch of a TensorFusionWorkload's spec (the console's autoscale toggle)."""
        plural = "tensorfusionworkloads"
        self._call(
            f"patch {plural} {ns}/{name}",
            lambda _: _done(
                self.custom.patch_namespaced_custom_object(
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

        self._call(f"evict pod {ns}/{name}", evict, no_retry_429=True)
        self._wrote("Pod", ns, name)

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

    def read_secret(self, namespace: str, name: str) -> dict[str, bytes]:
        """One Secret's data, base64-decoded (the external scaler's bearer token, A11).

        A GET on demand rather than a cached watch: tftui needs a handful of Secrets, and RBAC then
        grants `get` on secrets only, never `list`/`watch` of every Secret in the cluster. Retried
        like the writes; 404, 403 and malformed data raise `SourceError` with one line saying what
        (the caller names which reference pointed here). Values are bytes: the caller picks a key
        and decides whether it must be text.
        """
        what = f"Secret {namespace}/{name}"

        def get(_: int) -> bytes:
            resp = self.core.read_namespaced_secret(
                name, namespace, _preload_content=False, _request_timeout=self._timeout()
            )
            return _done(resp)

        try:
            raw = self._call(f"read {what}", get)
        except ActionError as exc:
            if exc.status == 404:
                raise SourceError("Secret not found") from None
            if exc.status == 403:
                raise SourceError("reading the Secret is forbidden (RBAC: get on secrets)") from None
            raise SourceError(str(exc)) from None
        try:
            doc = json.loads(raw)
            data = doc.get("data") or {}
            if not isinstance(data, dict):
                raise ValueError("data is not an object")
            return {str(k): base64.b64decode(str(v), validate=True) for k, v in data.items()}
        except (ValueError, binascii.Error, AttributeError) as exc:
            raise SourceError(f"Secret data unreadable: {exc}") from None

    def events(self) -> list[dict[str, Any]]:
        """tftui's events, oldest first (from the watch cache once synced, else read from the API)."""
        if self._synced["Event"].is_set():
            cached = [dict(e) for e in self.cached("Event") if e.get("reportingController") == REPORTER]
            cached.sort(key=lambda e: str(e.get("eventTime") or ""))
            return cached
        try:
            resp: Any = self.events_api.list_namespaced_event(EVENT_NAMESPACE, _preload_content=False)
            data = resp.data
            resp.release_conn()
        except (ApiException, Urllib3Error, OSError) as exc:
            raise SourceError(redact.scrub(f"cluster {self._name}: cannot list events: {exc}")) from None
        items = [
            {"apiVersion": "events.k8s.io/v1", "kind": "Event", **e}
            for e in json.loads(data).get("items") or []
            if e.get("reportingController") == REPORTER
        ]
        items.sort(key=lambda e: str(e.get("eventTime") or ""))
        return items
