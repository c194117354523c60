"""GreptimeDB's rewrites of SQL text before DataFusion plans it, and its canned answers (fixtures).

GreptimeDB parses every statement with sqlparser and applies transform rules to the AST before
DataFusion sees it (src/sql/src/statements/transform/). The two that change what tftui's queries
mean are reproduced here on a token stream (quotes and comments respected):

- **type aliases** (`type_alias.rs`): a cast to `TIMESTAMP` without precision becomes a cast to
  GreptimeDB's default timestamp, *millisecond* precision (`'2026-…12.345678'::timestamp` is
  12.345); DataFusion alone would read it at nanosecond precision. `TIMESTAMPTZ` likewise.
- **interval shorthands** (`expand_interval.rs`): `'1d'::INTERVAL`, `INTERVAL '1h30m'` and
  `CAST('5m' AS INTERVAL)` are expanded to `1 days`, `1 hours 30 minutes`, `5 minutes`
  (`m` is minutes, `mon` months), as GreptimeDB does; ISO 8601 durations are left to DataFusion.

`fixture` answers what GreptimeDB answers without planning (src/servers/src/postgres/fixtures.rs):
transaction statements (answered, ignored, with a warning), `SHOW` of four variables, and
`SET TRANSACTION`; `SET` of a session variable is handled by the server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["Fixture", "fixture", "rewrite", "split_statements"]

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>--[^\n]*|/\*.*?\*/)
  | (?P<string>[eE]?'(?:[^']|'')*')
  | (?P<quoted>"(?:[^"]|"")*")
  | (?P<cast>::)
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(slots=True)
class _Tok:
    kind: str
    text: str


def _tokens(sql: str) -> list[_Tok]:
    return [_Tok(m.lastgroup or "other", m.group()) for m in _TOKEN.finditer(sql)]


def split_statements(sql: str) -> list[str]:
    """Top-level `;`-separated statements (quotes and comments respected), blank ones dropped."""
    out: list[str] = []
    cur: list[str] = []
    for t in _tokens(sql):
        if t.kind == "other" and t.text == ";":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(t.text)
    out.append("".join(cur))
    return [s for s in (x.strip() for x in out) if s and not _only_comments(s)]


def _only_comments(sql: str) -> bool:
    return all(t.kind in ("space", "comment") for t in _tokens(sql))


_UNITS: Final = {
    "y": "years", "mon": "months", "w": "weeks", "d": "days", "h": "hours", "m": "minutes",
    "s": "seconds", "millis": "milliseconds", "ms": "milliseconds", "us": "microseconds",
    "ns": "nanoseconds",
}  # fmt: skip
_PARTS: Final = re.compile(r"[+-]?\d+|[a-zA-Z]+|\+|-")


def expand_interval(text: str) -> str | None:
    """GreptimeDB's `normalize_interval_name` for shorthands; None: leave the text alone."""
    if any(c.isspace() for c in text) or re.match(r"^-?[Pp]", text):
        return None
    return " ".join(_UNITS.get(p, p) for p in _PARTS.findall(text))


def _string_value(tok: _Tok) -> str | None:
    if tok.kind != "string" or tok.text[0] in "eE":
        return None
    return tok.text[1:-1].replace("''", "'")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def rewrite(sql: str) -> str:
    """The statement as GreptimeDB hands it to DataFusion (timestamp precision, interval shorthands)."""
    toks = _tokens(sql)
    sig = [i for i, t in enumerate(toks) if t.kind not in ("space", "comment")]

    def at(n: int) -> _Tok | None:
        return toks[sig[n]] if 0 <= n < len(sig) else None

    def word(n: int, *names: str) -> bool:
        t = at(n)
        return t is not None and t.kind == "word" and t.text.lower() in names

    parens: list[bool] = []  # per open parenthesis: opened by CAST/TRY_CAST?
    for n, i in enumerate(sig):
        t = toks[i]
        if t.kind == "other" and t.text == "(":
            parens.append(word(n - 1, "cast", "try_cast"))
            continue
        if t.kind == "other" and t.text == ")":
            if parens:
                parens.pop()
            continue
        in_cast = bool(parens and parens[-1])
        typed = (t.kind == "cast") or (in_cast and word(n, "as"))
        if typed and word(n + 1, "timestamp", "timestamptz"):
            nxt = at(n + 2)
            if nxt is None or nxt.text != "(":
                toks[sig[n + 1]] = _Tok("word", "TIMESTAMP(3)")
                if word(n + 2, "with", "without") and word(n + 3, "time") and word(n + 4, "zone"):
                    for k in (n + 2, n + 3, n + 4):
                        toks[sig[k]] = _Tok("space", "")
        if typed and word(n + 1, "interval"):
            value = at(n - 1)  # `'1d'::INTERVAL`, `CAST('1d' AS INTERVAL)`
            if value is not None and (text := _string_value(value)) is not None:
                expanded = expand_interval(text)
                if expanded is not None:
                    toks[sig[n - 1]] = _Tok("string", _quote(expanded))
        if word(n, "interval") and not typed:
            value = at(n + 1)
            prev = at(n - 1)
            if (prev is None or prev.kind != "cast") and value is not None:
                text = _string_value(value)
                if text is not None and (expanded := expand_interval(text)) is not None:
                    toks[sig[n + 1]] = _Tok("string", _quote(expanded))
    return "".join(t.text for t in toks)


@dataclass(frozen=True, slots=True)
class Fixture:
    """A canned answer: a command tag, or one row of one text column; `warning` goes as a notice."""

    tag: str
    column: str | None = None
    value: str | None = None
    warning: str | None = None


_TX_WARNING: Final = "Please note transaction is not supported in GreptimeDB."
_SHOW_VALUES: Final = {
    "default_transaction_isolation": "read committed",
    "transaction isolation level": "read committed",
    "standard_conforming_strings": "on",
    "client_encoding": "UTF8",
}


def fixture(sql: str) -> Fixture | None:
    """GreptimeDB's fixed answer to `sql`, or None when the statement goes to the engine."""
    text = " ".join(sql.split())
    if re.match(r"(?i)^(START TRANSACTION.*|BEGIN)\b;?", text):
        tag = "BEGIN" if text.lower().startswith("begin") else "START TRANSACTION"
        return Fixture(tag, warning=_TX_WARNING)
    if re.match(r"(?i)^(ABORT TRANSACTION|ROLLBACK)\b;?", text):
        return Fixture("ROLLBACK")
    if re.match(r"(?i)^(COMMIT TRANSACTION|COMMIT)\b;?", text):
        return Fixture("COMMIT")
    m = re.match(r"(?i)^SHOW (.*?);?$", text)
    if m and m.group(1).lower() in _SHOW_VALUES:
        name = m.group(1).lower()
        return Fixture("SHOW", name, _SHOW_VALUES[name])
    if re.match(r"(?i)^SET TRANSACTION (.*?);?$", text):
        return Fixture("SET")
    return None
