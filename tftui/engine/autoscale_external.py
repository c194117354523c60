"""The external scaler (A11): its validated configuration, whom to ask this tick (with upstream's
request body) and how a parsed answer becomes a recommender's partial answer.

The HTTP call is the caller's (`sources.external_scaler`); this module only decides and merges,
and refuses a scaler whose URL or Secret reference could leak another namespace's token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from tftui.engine.autoscale_config import (
    DEFAULT_DELAY,
    AutoConfig,
    Resources,
    _duration,
    _original,
    effective_autoscaling,
)
from tftui.engine.autoscale_recommenders import Partial, process
from tftui.engine.state import ClusterState, WorkloadView, parse_time
from tftui.model.duration import format_duration

# -- external scaler (A11) ----------------------------------------------------------------------


EXTERNAL_SCHEMES = ("http", "https")
"""The only URL schemes an external scaler may use (never file:, ftp:, data: …)."""


def external_url_error(url: str) -> str:
    """Why `url` may not be called ("" when it may): an http(s) URL with a host, nothing else."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        return f"invalid URL ({exc})"
    if parts.scheme.lower() not in EXTERNAL_SCHEMES:
        scheme = f"{parts.scheme}:" if parts.scheme else "(none)"
        return f"scheme {scheme} is not allowed (only http and https)"
    if not parts.hostname:
        return "the URL names no host"
    return ""


def shown_url(url: str) -> str:
    """The URL for messages: any `user:password@` part replaced by `***@`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


@dataclass(frozen=True, slots=True)
class ExternalScalerConfig:
    """`autoScalingConfig.externalScaler`; `interval` is unused (as upstream).

    `error` names the field that makes the scaler unusable (a non-http(s) `url`, an
    `apiKeySecretRef` in another namespace than the workload's): such a scaler is never called and
    its Secret never read, whatever the rest of the configuration says."""

    enable: bool = False
    url: str = ""
    secret: tuple[str, str] | None = None  # apiKeySecretRef (namespace, name)
    initial_delay: timedelta = DEFAULT_DELAY
    error: str = ""

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None, namespace: str) -> ExternalScalerConfig:
        if not raw:  # none configured: the defaults, one shared (frozen) instance
            return _NO_SCALER if cls is ExternalScalerConfig else cls()
        ref = raw.get("apiKeySecretRef") or None
        secret = None
        error = ""
        if isinstance(ref, Mapping) and ref.get("name"):
            secret = (str(ref.get("namespace") or namespace), str(ref["name"]))
            if secret[0] != namespace:
                error = (
                    f"externalScaler.apiKeySecretRef.namespace: {secret[0]!r} is not the workload's "
                    f"namespace {namespace!r} (the Secret must be in the workload's own namespace)"
                )
        url = str(raw.get("url") or "")
        if url and not error:
            why = external_url_error(url)
            if why:
                error = f"externalScaler.url: {shown_url(url)}: {why}"
        return cls(
            enable=raw.get("enable") is True,
            url=url,
            secret=secret,
            initial_delay=_duration(raw.get("initialDelayPeriod"), DEFAULT_DELAY),
            error=error,
        )


_NO_SCALER: Final = ExternalScalerConfig()


@dataclass(frozen=True, slots=True)
class ExternalRequest:
    """One call to make this tick: `POST url` with `body` (A11), bearer key from `secret` if set."""

    workload: str
    url: str
    body: Mapping[str, Any]
    secret: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class ExternalAnswer:
    """A parsed scaler response, or `error` (why there is none: timeout, status, bad JSON)."""

    need_up: bool = False
    need_down: bool = False
    reason: str = ""
    resources: Resources = field(default_factory=Resources)
    error: str | None = None


def _external_wait(wv: WorkloadView, ext: ExternalScalerConfig, now: datetime) -> str:
    """Why the scaler is not asked yet (its own initial delay by workload age), or ""."""
    created = parse_time(((wv.obj or {}).get("metadata") or {}).get("creationTimestamp"))
    if created is None or now - created >= ext.initial_delay:
        return ""
    return (
        f"Workload created {format_duration(now - created)} ago, less than InitialDelayPeriod "
        f"{format_duration(ext.initial_delay)}, no update performed"
    )


def _current(state: ClusterState, wv: WorkloadView) -> Resources:
    status = (wv.obj or {}).get("status") or {}
    return Resources.parse(status["recommendation"]) if status.get("recommendation") else _original(state, wv)


def external_requests(state: ClusterState, now: datetime) -> list[ExternalRequest]:
    """The external-scaler calls of this tick: enabled workloads whose scaler is enabled and past its
    initial delay, with upstream's body (`currentResources` = current as the percentile recommender
    sees it)."""
    out: list[ExternalRequest] = []
    for key in sorted(state.workloads):
        wv = state.workloads[key]
        asc = effective_autoscaling(state, wv)
        if not AutoConfig.parse(asc.get("autoSetResources")).enable:
            continue
        ext = ExternalScalerConfig.parse(asc.get("externalScaler"), wv.namespace)
        if not ext.enable or not ext.url or ext.error or _external_wait(wv, ext, now):
            continue
        body = {
            "workloadName": wv.name,
            "namespace": wv.namespace,
            "currentResources": _current(state, wv).to_json(),
        }
        out.append(ExternalRequest(key, ext.url, body, ext.secret))
    return out


def external_recommend(
    ans: ExternalAnswer, current: Resources, allowed: tuple[int, int] | None
) -> Partial | None:
    """The external recommender's result from a good answer (A11); no ratio clamp or floor."""
    if not ans.need_up and not ans.need_down:
        return Partial(current, True, condition=("NoScalingNeeded", ans.reason))
    if ans.resources.is_zero():
        return None
    rec, pmsg = process(ans.resources, current, allowed)
    if rec == current:
        return Partial(rec, True)
    msg = f"External scaler recommendation: {ans.reason}" + (f", {pmsg}" if pmsg else "")
    return Partial(rec, False, condition=(ans.reason or "Updated", msg), capped=bool(pmsg))
