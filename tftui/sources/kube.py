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
Objects are stored as `model.dedupe.Deduper` makes them as they arrive (client-go's `TransformFunc`
pattern): strings interned, equal parts shared between objects, `metadata.managedFields` and the
last-applied-configuration annotation dropped (nothing reads them), so the cache of a 5,000-node
cluster takes less than half what its decoded JSON would (one object never holds a part twice).
ProviderConfig and GPUResourceQuota are newer CRDs: where the API does not serve them (404) the kind
counts as synced and empty, and is listed again every `OPTIONAL_RETRY` seconds. ConfigMaps are
watched with a label selector: only TensorFusion's own config ConfigMap (the scheduler settings).
Besides the `KINDS` of the snapshot, two kinds are cached in one namespace each, with a field selector
so a busy cluster's other Events and Leases (every node renews one every 10 s) are never streamed:
tftui's own events.k8s.io/v1 Events (`reportingController`, in `EVENT_NAMESPACE`) and, when `lease`
names one, the daemon's coordination.k8s.io/v1 Lease. `events()` and `lease()` read them from the cache.

Read-your-writes: every write remembers which object it changed and the resourceVersion the API
answered with; `settle()` waits until the watches delivered those changes, so a loop that decides
right after acting never decides on a cache that still shows the pod it just evicted — nor the
disruption budget that eviction spent (the API server charges the PDB itself, and that change comes
on the PDB watch, which may lag the pod's). Such an expected side effect is waited for through one
timeout at most: the API server skips the charge for a pod it found unready, and then the PDB may
never change.

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

The parts live apart: the kinds, constants and shared state in `sources.kubebase`, the list+watch
cache in `sources.kubewatch`, the writes in `sources.kubewrites`; this module is the connection
(kubeconfig, contexts, credentials), the cache's readers and the class that joins them.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import random
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error

from tftui.model import redact
from tftui.model.dedupe import Deduper
from tftui.sources.contexts import ContextInfo, list_contexts
from tftui.sources.kubebase import (
    EVENT_KIND,
    EVENT_NAMESPACE,
    JSON,
    KINDS,
    PAGE_SIZE,
    REPORTER,
    Fence,
    Kind,
    _done,
    lease_kind,
)
from tftui.sources.kubewatch import WatchCache
from tftui.sources.kubewrites import Writes
from tftui.sources.ports import ActionError, SourceError

__all__ = ["EVENT_KIND", "KINDS", "Fence", "Kind", "KubeCluster", "lease_kind"]

SYNC_LIMIT: Final = 20
"""`wait_synced`'s bound on the whole first sync, in multiples of its no-answer timeout."""
PROGRESS_EVERY: Final = 0.5
"""Seconds between two `wait_synced` progress calls."""


class KubeCluster(WatchCache, Writes):
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
        self._dedupe = Deduper()
        self._lock = threading.Lock()
        self._store: dict[str, dict[tuple[str, str], JSON]] = {k.kind: {} for k in self.kinds}
        self._rv: dict[str, str] = {}
        self._synced: dict[str, threading.Event] = {k.kind: threading.Event() for k in self.kinds}
        self._changed = threading.Condition(self._lock)
        # (kind, ns, name) → (rv the write answered with, or "" when unknown; rv cached before it)
        self._written: dict[tuple[str, str, str], tuple[str, str]] = {}
        # of those, the changes a write is expected to cause on another object (the PDB an eviction
        # charges): the API server may skip them (an unready pod), so a timeout forgets them
        self._expected: set[tuple[str, str, str]] = set()
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
        self.listed = 0  # objects received in list pages so far (all kinds, relists included)
        self._listed_at = 0.0  # monotonic time of the last list page received
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

    def wait_synced(
        self,
        timeout: float = 30.0,
        *,
        limit: float | None = None,
        progress: Callable[[int, int, int], None] | None = None,
    ) -> None:
        """Block until every kind has been listed once; SourceError (one line) if that fails.

        `timeout` is the longest the API may go without answering a list page, not the whole
        sync: a big cluster's first list takes as long as its pages keep coming (a 5,000-node
        cluster's 185,000 objects arrive in about 370 pages of `PAGE_SIZE`, tens of seconds on a
        busy API server or link). `limit` (default: `SYNC_LIMIT` × `timeout`) bounds the whole
        wait all the same, so a list that restarts forever (its continue token expiring between
        pages) ends in an error. `progress(objects listed, kinds synced, kinds)` is called about
        every `PROGRESS_EVERY` seconds while waiting.
        """
        start = time.monotonic()
        end = start + (SYNC_LIMIT * timeout if limit is None else limit)
        shown = start
        for k in self.kinds:
            while not self._synced[k.kind].wait(0.05):
                now = time.monotonic()
                quiet_since = max(start, self._listed_at)
                err = self._errors.get(k.kind)
                if err and (now - quiet_since >= timeout or now >= end or k.kind in self._fatal):
                    raise SourceError(redact.scrub(f"cluster {self._name}: cannot list {k.plural}: {err}"))
                if now - quiet_since >= timeout:
                    raise SourceError(
                        f"cluster {self._name}: no answer listing {self._unsynced()} for {timeout:g}s"
                    )
                if now >= end:
                    raise SourceError(
                        f"cluster {self._name}: {self._unsynced()} still listing after {now - start:.0f}s "
                        f"({self.listed:,} objects received)"
                    )
                if progress is not None and now - shown >= PROGRESS_EVERY:
                    shown = now
                    progress(self.listed, sum(e.is_set() for e in self._synced.values()), len(self.kinds))

    def _unsynced(self) -> str:
        """The kinds not listed yet, as the API names them (`pods, gpus`)."""
        return ", ".join(k.plural for k in self.kinds if not self._synced[k.kind].is_set())

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
                    self._expected.clear()
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    for k in self._expected:  # a side effect that did not come: waited for once only
                        self._written.pop(k, None)
                    self._expected.clear()
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
