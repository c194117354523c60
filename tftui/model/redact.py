"""Credentials never reach output: one redaction helper for every message, log line and error.

Two layers, because a secret can arrive in text we did not build (a driver's error message that
quotes the malformed DSN, a URL with `user:password@`):

- *Structural*: `scrub()` always masks what looks like a credential whatever it is — the password of
  a URL's `user:password@`, `password=…` (and `sslpassword=`) in a libpq conninfo string or a query
  string, a `Bearer …` / `Basic …` header value.
- *Known secrets*: sources `register()` the credentials they were given (the metrics DSN's password,
  the kubeconfig's token and password) as soon as they read them, and `scrub()` masks every
  occurrence anywhere in the text, raw and percent-decoded. Registered secrets shorter than
  `MIN_REGISTERED` characters are not masked in free text (they would garble every message); the
  structural rules still mask them where they stand as a credential, and a caller that knows the
  secret of *this* message passes it to `scrub(text, secret)`, which masks it at any length.

`dsn_secrets()` finds a DSN's password without a full parse, so a DSN the driver refuses (a `%`
that is not an escape, an unclosed `[`) is redacted as reliably as a valid one. The front ends pass
everything they print or log through `scrub()` (the CLI's error line, the daemon's JSON log
formatter, `doctor`'s lines); sources build their messages with it.
"""

from __future__ import annotations

import re
import threading
from typing import Final
from urllib.parse import unquote

__all__ = ["MASK", "MIN_REGISTERED", "dsn_secrets", "redact_dsn", "register", "registered", "scrub"]

MASK: Final = "***"
MIN_REGISTERED: Final = 4

_lock = threading.Lock()
_secrets: set[str] = set()

# scheme://user:password@host: the password up to the last "@" before a / ? # or whitespace (a raw
# "@" in a password is common in hand-written DSNs)
_URL_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@]*:)[^\s/?#]*@")
# password=value in conninfo (value quoted or bare) or in a query string (&password=…)
_KEYVALUE = re.compile(
    r"(?P<key>\b(?:ssl)?password\s*=\s*)(?P<val>'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|[^\s&'\";,]+)",
    re.IGNORECASE,
)
_AUTH_HEADER = re.compile(r"(?P<key>\b(?:Bearer|Basic)\s+)(?P<val>[A-Za-z0-9._~+/=-]+)")


def register(*secrets: str | None) -> None:
    """Remember credentials so every later `scrub()` masks them (raw and percent-decoded)."""
    with _lock:
        for s in secrets:
            if not s:
                continue
            _secrets.add(s)
            decoded = _unquote(s)
            if decoded:
                _secrets.add(decoded)


def registered() -> frozenset[str]:
    """The registered secrets (for tests)."""
    with _lock:
        return frozenset(_secrets)


def _unquote(text: str) -> str:
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        return ""


def scrub(text: str, *secrets: str | None) -> str:
    """`text` with every credential masked: the structural rules, the registered secrets of at least
    `MIN_REGISTERED` characters and, at any length, `secrets` (and their percent-decoded forms)."""
    if not text:
        return text
    known = {s for s in registered() if len(s) >= MIN_REGISTERED}
    for s in secrets:
        if s:
            known.add(s)
            decoded = _unquote(s)
            if decoded:
                known.add(decoded)
    for s in sorted(known, key=len, reverse=True):  # longest first: a secret inside another
        text = text.replace(s, MASK)
    text = _URL_USERINFO.sub(lambda m: f"{m['head']}{MASK}@", text)
    text = _KEYVALUE.sub(lambda m: f"{m['key']}{MASK}", text)
    return _AUTH_HEADER.sub(lambda m: f"{m['key']}{MASK}", text)


_DSN_URI = re.compile(r"^\s*(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$", re.DOTALL)


def dsn_secrets(dsn: str) -> list[str]:
    """The password(s) in a DSN — URI (`postgresql://user:pw@host/db?password=…`) or conninfo
    (`host=h password='p w'`) — found leniently, so a DSN the driver rejects is covered too."""
    out: list[str] = []
    m = _DSN_URI.match(dsn)
    if m:
        rest = m["rest"]
        ends = [i for i in (rest.find("?"), rest.find("#")) if i >= 0]
        at = rest.rfind("@", 0, min(ends) if ends else len(rest))  # the query is never userinfo
        if at >= 0 and ":" in rest[:at]:
            out.append(rest[:at].partition(":")[2])
    for km in _KEYVALUE.finditer(dsn):
        value = km["val"]
        if len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
            value = value[1:-1]
        elif value[:1] in "'\"":
            value = value[1:]
        out.append(value.replace("\\'", "'").replace('\\"', '"').replace("\\\\", "\\"))
    result: list[str] = []
    for s in out:
        for v in (s, _unquote(s)):
            if v and v not in result:
                result.append(v)
    return result


def redact_dsn(dsn: str) -> str:
    """The DSN as it may be shown: its password(s) masked, everything else as given."""
    return scrub(dsn, *dsn_secrets(dsn))
