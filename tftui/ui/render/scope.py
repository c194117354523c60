"""What a view shows of the cluster: the namespace scope (`:ns`) and the `/` filter (k9s habits).

`/text` keeps the rows whose text holds `text`, `/!text` the rows that do not, and `/-l sel` the
rows whose object carries labels matching the selector `sel` (Kubernetes syntax: `k=v`, `k==v`,
`k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, joined by commas). A selector that does not parse
filters nothing and is reported in one plain line (`SelectorError`) instead of a crash.

The namespace scope keeps the rows of that namespace: workloads and workers by their own namespace,
pools, nodes and GPUs when a worker of that namespace runs there (cluster-scoped objects belong to
no namespace; what a namespace occupies is what an operator scoping to it wants to see). Both work
on the row keys of the tables whose rows are cluster objects (`ResourceScreen.OBJECT_KINDS`), from
indexes built once per cluster state.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tftui.engine.state import ClusterState
from tftui.ui.render.views import Table

__all__ = [
    "ALL_NAMESPACES",
    "Requirement",
    "RowFilter",
    "SelectorError",
    "cluster_namespaces",
    "namespaces_of",
    "object_labels",
    "parse_filter",
    "parse_selector",
    "scoped",
]

ALL_NAMESPACES = frozenset({"all", "0", "*", "-A"})
"""What `:ns` takes for "no namespace scope" (k9s: `:ns all`, `0`)."""

Op = Literal["=", "!=", "exists", "!exists", "in", "notin"]

# a label key: an optional DNS prefix and `/`, then a name of alphanumerics, `-`, `_`, `.`
_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_SET = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")


class SelectorError(ValueError):
    """A label selector that does not parse; the message is one line naming the bad part."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: Op
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        if self.op == "exists":
            return has
        if self.op == "!exists":
            return not has
        if self.op == "=":
            return has and labels[self.key] == self.values[0]
        if self.op == "!=":
            return not has or labels[self.key] != self.values[0]
        if self.op == "in":
            return has and labels[self.key] in self.values
        return not has or labels[self.key] not in self.values


def _split(text: str) -> list[str]:
    """Split on the commas outside parentheses (`a in (x,y),b=c` is two requirements)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _key(key: str, part: str) -> str:
    if not _KEY.match(key) or len(key.rpartition("/")[2]) > 63:
        raise SelectorError(f"label selector {part!r}: {key!r} is not a label key")
    return key


def _value(value: str, part: str) -> str:
    if not _VALUE.match(value) or len(value) > 63:
        raise SelectorError(f"label selector {part!r}: {value!r} is not a label value")
    return value


def parse_selector(text: str) -> tuple[Requirement, ...]:
    """The requirements of a label selector; `SelectorError` names the first bad part."""
    text = text.strip()
    if not text:
        raise SelectorError("label selector: empty (try -l app=web or -l tier!=batch)")
    out: list[Requirement] = []
    for part in _split(text):
        if not part:
            raise SelectorError(f"label selector {text!r}: empty requirement between commas")
        if (m := _SET.match(part)) is not None:
            values = tuple(_value(v.strip(), part) for v in m["values"].split(","))
            op: Op = "in" if m["op"] == "in" else "notin"
            out.append(Requirement(_key(m["key"], part), op, values))
        elif "!=" in part:
            key, _, value = part.partition("!=")
            out.append(Requirement(_key(key.strip(), part), "!=", (_value(value.strip(), part),)))
        elif "=" in part:
            key, _, value = part.partition("==") if "==" in part else part.partition("=")
            out.append(Requirement(_key(key.strip(), part), "=", (_value(value.strip(), part),)))
        elif part.startswith("!"):
            out.append(Requirement(_key(part[1:].strip(), part), "!exists"))
        else:
            out.append(Requirement(_key(part, part), "exists"))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RowFilter:
    """A parsed `/` filter. `error` set: it filters nothing and the breadcrumb shows the error."""

    text: str = ""
    inverse: bool = False
    selector: tuple[Requirement, ...] | None = None
    error: str | None = None

    @property
    def empty(self) -> bool:
        return not self.text and self.selector is None


def parse_filter(needle: str) -> RowFilter:
    """`text`, `!text` (inverse) or `-l selector`; never raises."""
    needle = needle.strip()
    if needle == "-l" or needle.startswith("-l ") or needle.startswith("-l="):
        rest = needle[2:]
        rest = rest[1:] if rest.startswith("=") else rest  # `-l=app=web`, as kubectl takes it
        try:
            return RowFilter(selector=parse_selector(rest))
        except SelectorError as exc:
            return RowFilter(error=str(exc))
    if needle.startswith("!"):
        return RowFilter(text=needle[1:].strip().lower(), inverse=True)
    return RowFilter(text=needle.lower())


# -- indexes per cluster state ---------------------------------------------------------------------


def _labels(state: ClusterState) -> dict[str, dict[str, Mapping[str, str]]]:
    out: dict[str, dict[str, Mapping[str, str]]] = {}
    for kind in ("GPUPool", "GPUNode", "GPU", "TensorFusionWorkload", "Pod"):
        index: dict[str, Mapping[str, str]] = {}
        for obj in state.snapshot.kind(kind):
            meta = obj.get("metadata") or {}
            name, ns = meta.get("name"), meta.get("namespace")
            labels = meta.get("labels")
            if not isinstance(name, str):
                continue
            key = f"{ns}/{name}" if ns else name
            index[key] = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}
        out[kind] = index
    return out


def object_labels(state: ClusterState, kind: str, key: str) -> Mapping[str, str]:
    """The labels of the object of `kind` keyed `key` (empty when it has none or is unknown)."""
    return state.derived("ui-scope-labels", _labels).get(kind, {}).get(key, {})


def _namespaces(state: ClusterState) -> dict[str, dict[str, frozenset[str]]]:
    pools: dict[str, set[str]] = {}
    nodes: dict[str, set[str]] = {}
    gpus: dict[str, set[str]] = {}
    for w in state.workers.values():
        if w.pool:
            pools.setdefault(w.pool, set()).add(w.namespace)
        if w.node:
            nodes.setdefault(w.node, set()).add(w.namespace)
        for g in w.gpu_ids:
            gpus.setdefault(g, set()).add(w.namespace)
    for wl in state.workloads.values():  # a workload whose workers are gone still names its pool
        if wl.pool:
            pools.setdefault(wl.pool, set()).add(wl.namespace)
    return {
        "GPUPool": {k: frozenset(v) for k, v in pools.items()},
        "GPUNode": {k: frozenset(v) for k, v in nodes.items()},
        "GPU": {k: frozenset(v) for k, v in gpus.items()},
    }


def namespaces_of(state: ClusterState, kind: str, key: str) -> frozenset[str]:
    """The namespaces a row of `kind` belongs to: its own for namespaced objects, else those of
    the workers it hosts."""
    if kind in ("Pod", "TensorFusionWorkload"):
        return frozenset({key.partition("/")[0]})
    return state.derived("ui-scope-namespaces", _namespaces).get(kind, {}).get(key, frozenset())


def cluster_namespaces(state: ClusterState) -> list[str]:
    """Every namespace holding a workload or a worker, sorted."""
    return sorted(
        {w.namespace for w in state.workloads.values()} | {w.namespace for w in state.workers.values()}
    )


_SEARCH = operator.attrgetter("search")


def scoped(
    table: Table, state: ClusterState, kind: str | None, row_filter: RowFilter, namespace: str | None
) -> Table:
    """The rows of `table` in `namespace` (None: all) that pass `row_filter`. Without an object
    kind (rows that are not cluster objects) neither the namespace nor a selector applies."""
    if row_filter.error is not None:
        row_filter = RowFilter()
    keep_ns = namespace is not None and kind is not None
    selector = row_filter.selector if kind is not None else None
    if not keep_ns and selector is None and not row_filter.text:
        return table
    if not keep_ns and selector is None:  # text alone (every filter key typed): the scan in C
        hits = map(operator.contains, map(_SEARCH, table.rows), itertools.repeat(row_filter.text))
        kept = tuple(itertools.compress(table.rows, map(operator.not_, hits) if row_filter.inverse else hits))
        return table if len(kept) == len(table.rows) else Table(table.columns, kept)
    rows = []
    for r in table.rows:
        if keep_ns and kind is not None and namespace not in namespaces_of(state, kind, r.key):
            continue
        if row_filter.text and (row_filter.text in r.search) == row_filter.inverse:
            continue
        if selector is not None and kind is not None:
            labels = object_labels(state, kind, r.key)
            if not all(req.matches(labels) for req in selector):
                continue
        rows.append(r)
    return table if len(rows) == len(table.rows) else Table(table.columns, tuple(rows))


def _narrows(before: RowFilter, after: RowFilter) -> bool:
    """Whether every row `after` keeps, `before` kept too: plain text filters, the new text
    containing the old (a key typed at the end, or anywhere)."""
    plain = (
        before.error is None and after.error is None and before.selector is None and after.selector is None
    )
    return plain and not before.inverse and not after.inverse and before.text in after.text


class Narrowing:
    """`scoped`, remembering its last result per table: a filter that narrows the last one, on the
    same built table in the same namespace, scans the rows the last one kept, not every row (typing
    `/inf-h1` over 40,000 GPUs scanned all of them at each key)."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[Table, str | None, str | None, RowFilter, Table]] = {}

    def scoped(
        self,
        key: str,
        table: Table,
        state: ClusterState,
        kind: str | None,
        row_filter: RowFilter,
        namespace: str | None,
    ) -> Table:
        source = table
        last = self._last.get(key)
        if last is not None:
            built, last_kind, last_namespace, last_filter, last_shown = last
            if (
                built is table
                and (last_kind, last_namespace) == (kind, namespace)
                and _narrows(last_filter, row_filter)
            ):
                source = last_shown
        shown = scoped(source, state, kind, row_filter, namespace)
        self._last[key] = (table, kind, namespace, row_filter, shown)
        return shown

    def clear(self) -> None:
        self._last.clear()
