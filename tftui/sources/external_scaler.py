"""The external scaler's HTTP call (docs/behaviour.md A11): POST JSON, parse the answer, never raise.

The engine says whom to ask (`engine.autoscale.external_requests`) and merges the answers; this
module only does the I/O. Every failure — timeout, refused connection, a status other than 200,
a body that is not JSON, a field that is missing or of the wrong type, a quantity that does not
parse — becomes an `ExternalAnswer` with `error` set to one line naming what was wrong, so the
workload shows why and nothing is applied from it.

stdlib `urllib` is enough: one small POST per workload and tick, no session state to keep. Calls of
one tick run in a small thread pool so one slow scaler does not hold up the others beyond `timeout`.

Safety (the URL and the Secret reference come from any workload's spec): only `http` and `https`
URLs are opened — the opener has no file, ftp or data handler at all — and redirects are never
followed: a 3xx is an error answer, so the bearer token only ever goes to the URL the workload
named, never to where a scaler (or whoever controls it) points. The Secret must be in the
workload's own namespace (`ExternalRequest.workload` is `namespace/name`); both rules are checked
here again even though the engine already refuses such a configuration.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from tftui.engine.autoscale import (
    ExternalAnswer,
    ExternalRequest,
    Resources,
    external_url_error,
    shown_url,
)
from tftui.model.quantity import QuantityError, parse_quantity

__all__ = ["DEFAULT_TIMEOUT", "ask", "ask_all", "parse_answer", "refusal"]

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds per call (upstream's HTTP client timeout)."""
MAX_PARALLEL: Final = 8
API_KEY_FIELDS: Final = ("apiKey", "token", "key")
"""The Secret keys tried, in order, for the bearer token (upstream's order)."""
BODY_EXCERPT: Final = 200

SecretReader = Callable[[str, str], Mapping[str, str | bytes]]
"""(namespace, name) → the Secret's data (bytes as stored, or text); raises with a one-line message
when it cannot (e.g. `KubeCluster.read_secret`)."""


class _Malformed(ValueError):
    pass


def _resources(raw: Any, where: str) -> Resources:
    """`Resources` with every present quantity checked (upstream would fail to unmarshal)."""
    if not isinstance(raw, Mapping):
        raise _Malformed(f"{where}: expected an object, got {type(raw).__name__}")
    for part in ("requests", "limits"):
        sub = raw.get(part)
        if sub is None:
            continue
        if not isinstance(sub, Mapping):
            raise _Malformed(f"{where}.{part}: expected an object, got {type(sub).__name__}")
        for name in ("tflops", "vram", "compute"):
            value = sub.get(name)
            if value is None:
                continue
            try:
                parse_quantity(value)
            except (QuantityError, TypeError, ValueError):
                raise _Malformed(f"{where}.{part}.{name}: invalid quantity {value!r}") from None
    return Resources.parse(raw)


def parse_answer(body: bytes) -> ExternalAnswer:
    """The answer in a 200 response: `needScaleUp`, `needScaleDown`, `reason`, `recommendedResources`.

    The two flags are required booleans; `reason` is an optional string; `recommendedResources`
    is required when a flag is set.
    """
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return ExternalAnswer(error=f"response is not JSON: {exc}")
    try:
        if not isinstance(doc, Mapping):
            raise _Malformed(f"response: expected an object, got {type(doc).__name__}")
        flags = []
        for name in ("needScaleUp", "needScaleDown"):
            if name not in doc:
                raise _Malformed(f"response: missing field {name}")
            if not isinstance(doc[name], bool):
                raise _Malformed(f"response.{name}: expected true or false, got {doc[name]!r}")
            flags.append(doc[name])
        reason = doc.get("reason", "")
        if reason is None:
            reason = ""
        if not isinstance(reason, str):
            raise _Malformed(f"response.reason: expected a string, got {type(reason).__name__}")
        if not any(flags):
            return ExternalAnswer(False, False, reason)
        if "recommendedResources" not in doc:
            raise _Malformed("response: missing field recommendedResources")
        res = _resources(doc["recommendedResources"], "response.recommendedResources")
    except _Malformed as exc:
        return ExternalAnswer(error=str(exc))
    return ExternalAnswer(flags[0], flags[1], reason, res)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is answered as it is (an error answer), never followed with the Authorization header."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _opener() -> urllib.request.OpenerDirector:
    """HTTP(S) only: no file/ftp/data handlers, no redirects, no proxy from the environment."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.HTTPHandler(),
        urllib.request.HTTPSHandler(),
        _NoRedirects(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


def refusal(req: ExternalRequest) -> str | None:
    """Why this request may not be made at all (scheme, Secret namespace), or None."""
    why = external_url_error(req.url)
    if why:
        return f"externalScaler.url: {shown_url(req.url)}: {why}"
    if req.secret is not None:
        namespace = req.workload.partition("/")[0]
        if req.secret[0] != namespace:
            return (
                f"externalScaler.apiKeySecretRef.namespace: {req.secret[0]!r} is not the workload's "
                f"namespace {namespace!r} (the Secret must be in the workload's own namespace)"
            )
    return None


def _bearer(req: ExternalRequest, secrets: SecretReader | None) -> str | None:
    if req.secret is None:
        return None
    ns, name = req.secret
    if secrets is None:
        raise _Malformed(f"apiKeySecretRef {ns}/{name}: this source cannot read Secrets")
    try:
        data = secrets(ns, name)
    except Exception as exc:
        raise _Malformed(f"apiKeySecretRef {ns}/{name}: {' '.join(str(exc).split())}") from None
    for k in API_KEY_FIELDS:
        value = data.get(k)
        if not value:
            continue
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                raise _Malformed(f"apiKeySecretRef {ns}/{name}: key {k} is not UTF-8 text") from None
        if "\n" in value or "\r" in value:  # not sendable in a header (a file saved with a newline)
            raise _Malformed(f"apiKeySecretRef {ns}/{name}: key {k} contains a line break")
        return value
    raise _Malformed(f"apiKeySecretRef {ns}/{name}: none of the keys {', '.join(API_KEY_FIELDS)}")


def ask(
    req: ExternalRequest, *, timeout: float = DEFAULT_TIMEOUT, secrets: SecretReader | None = None
) -> ExternalAnswer:
    """POST the request and parse the answer; every failure is an answer with `error`."""
    refused = refusal(req)
    if refused is not None:
        return ExternalAnswer(error=f"refused: {refused}")
    try:
        token = _bearer(req, secrets)
    except _Malformed as exc:
        return ExternalAnswer(error=str(exc))
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(req.body, sort_keys=True).encode()
    http = urllib.request.Request(req.url, data=data, headers=headers, method="POST")
    try:
        with _opener().open(http, timeout=timeout) as resp:
            status, body = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            return ExternalAnswer(error=f"returned status {exc.code}: redirects are not followed")
        excerpt = exc.read()[:BODY_EXCERPT].decode("utf-8", "replace").strip()
        return ExternalAnswer(
            error=f"returned status {exc.code}: {excerpt}" if excerpt else f"returned status {exc.code}"
        )
    except TimeoutError:
        return ExternalAnswer(error=f"no answer within {timeout:g}s")
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            return ExternalAnswer(error=f"no answer within {timeout:g}s")
        return ExternalAnswer(error=f"unreachable: {reason}")
    except (OSError, ValueError) as exc:  # e.g. a reset connection, an invalid URL
        return ExternalAnswer(error=f"request failed: {' '.join(str(exc).split()) or type(exc).__name__}")
    if status != 200:
        excerpt = body[:BODY_EXCERPT].decode("utf-8", "replace").strip()
        return ExternalAnswer(
            error=f"returned status {status}: {excerpt}" if excerpt else f"returned status {status}"
        )
    return parse_answer(body)


def ask_all(
    requests: Sequence[ExternalRequest],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    secrets: SecretReader | None = None,
) -> dict[str, ExternalAnswer]:
    """Every request of a tick, a few at a time; workload key → answer."""
    if not requests:
        return {}
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(requests))) as pool:
        answers = list(pool.map(lambda r: ask(r, timeout=timeout, secrets=secrets), requests))
    return {r.workload: a for r, a in zip(requests, answers, strict=True)}
