"""The live adapter's vocabulary: the API constants, the kinds it caches (`KINDS`), the fence
protocol, error lines, and `KubeBase` — the state the watch cache (`sources.kubewatch`) and the
writes (`sources.kubewrites`) share with `KubeCluster` (`sources.kube`). Separate so those three
modules import it and not each other."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Protocol, TypeVar

from kubernetes.client.exceptions import ApiException

from tftui.model import redact

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


class KubeBase:
    """What the watch cache, the writes and `KubeCluster` share: the clients, the retry timing and
    the cache's state (all set by `KubeCluster.__init__`), and the backoff both retry loops use."""

    kinds: tuple[Kind, ...]
    api: Any
    core: Any
    custom: Any
    policy: Any
    events_api: Any
    retries: int
    backoff: float
    max_backoff: float
    request_timeout: float
    page_size: int
    fence: Fence | None
    relists: int
    generation: int
    listed: int
    _listed_at: float
    _lock: threading.Lock
    _changed: threading.Condition
    _store: dict[str, dict[tuple[str, str], JSON]]
    _rv: dict[str, str]
    _synced: dict[str, threading.Event]
    _written: dict[tuple[str, str, str], tuple[str, str]]
    _expected: set[tuple[str, str, str]]
    _errors: dict[str, str]
    _fatal: set[str]
    _stop: threading.Event
    _streams: dict[str, Any]
    _series: dict[tuple[str, str, str, str, str], tuple[str, int, datetime]]
    _event_seq: int
    _rng: random.Random
    _attempt: threading.local

    def _delay(self, attempt: int) -> float:
        """Exponential backoff with full jitter (so many clients do not retry in step)."""
        cap = min(self.max_backoff, self.backoff * (2**attempt))
        return cap / 2 + self._rng.uniform(0, cap / 2)
