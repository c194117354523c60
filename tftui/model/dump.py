"""Load and write `kubectl get <kinds> -A -o json|yaml` dumps (support bundles).

Accepted: one JSON `List`, several JSON documents concatenated, or multi-document YAML; each document
a `List` (kind `List` or `*List` with `items`) or a single object. Validation runs once over all
items through one `TypeAdapter` (see `crds` for why). Every error is one line naming the file, the
object (kind namespace/name) and the field path, so a support engineer can fix the bundle.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, cast

import yaml
from pydantic import Discriminator, Tag, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails
from typing_extensions import TypedDict

from tftui.model import core, crds
from tftui.model.gcpause import gc_paused

KINDS: dict[str, type] = {
    "TensorFusionCluster": crds.TensorFusionCluster,
    "GPUPool": crds.GPUPool,
    "GPUNode": crds.GPUNode,
    "GPU": crds.GPU,
    "TensorFusionWorkload": crds.TensorFusionWorkload,
    "WorkloadProfile": crds.WorkloadProfile,
    "SchedulingConfigTemplate": crds.SchedulingConfigTemplate,
    "GPUNodeClaim": crds.GPUNodeClaim,
    "Node": core.Node,
    "Pod": core.Pod,
    "PodDisruptionBudget": core.PodDisruptionBudget,
}
OTHER = "other"


def _kind_of(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else None
    return kind if kind in KINDS else OTHER


AnyObject = Annotated[
    Annotated[crds.TensorFusionCluster, Tag("TensorFusionCluster")]
    | Annotated[crds.GPUPool, Tag("GPUPool")]
    | Annotated[crds.GPUNode, Tag("GPUNode")]
    | Annotated[crds.GPU, Tag("GPU")]
    | Annotated[crds.TensorFusionWorkload, Tag("TensorFusionWorkload")]
    | Annotated[crds.WorkloadProfile, Tag("WorkloadProfile")]
    | Annotated[crds.SchedulingConfigTemplate, Tag("SchedulingConfigTemplate")]
    | Annotated[crds.GPUNodeClaim, Tag("GPUNodeClaim")]
    | Annotated[core.Node, Tag("Node")]
    | Annotated[core.Pod, Tag("Pod")]
    | Annotated[core.PodDisruptionBudget, Tag("PodDisruptionBudget")]
    | Annotated[core.OtherObject, Tag(OTHER)],
    Discriminator(_kind_of),
]


class _ListDoc(TypedDict):
    items: list[AnyObject]


_LIST = TypeAdapter(_ListDoc)
_ITEMS = TypeAdapter(list[AnyObject])


class DumpError(ValueError):
    """A dump could not be read; the message is a single line meant for the user."""


@dataclass(slots=True)
class Snapshot:
    """All objects of one consistent read, grouped by kind (order within a kind preserved)."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    by_kind: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def of(cls, objects: Iterable[dict[str, Any]]) -> Snapshot:
        snap = cls()
        for obj in objects:
            snap.objects.append(obj)
            kind = obj["kind"] if obj.get("kind") in KINDS else OTHER
            snap.by_kind.setdefault(kind, []).append(obj)
        return snap

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return self.by_kind.get(kind, [])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Snapshot) and self.objects == other.objects


def object_ref(obj: Any) -> str:
    """`Kind namespace/name` (or `Kind name` for cluster-scoped objects), tolerant of garbage."""
    if not isinstance(obj, dict):
        return f"<{type(obj).__name__}>"
    meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    name = meta.get("name") if isinstance(meta.get("name"), str) else "<no name>"
    ns = meta.get("namespace")
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else "<no kind>"
    return f"{kind} {ns}/{name}" if isinstance(ns, str) and ns else f"{kind} {name}"


def _describe_error(err: ErrorDetails) -> str:
    typ, value = err["type"], err.get("input")
    if typ == "string_pattern_mismatch":  # only quantities carry a pattern
        return f"invalid quantity {value!r}"
    if typ == "missing":
        return "required field is missing"
    return err["msg"] if isinstance(value, dict | list) else f"{err['msg']} (got {value!r})"


_UNION_MEMBERS = frozenset({"constrained-str", "str", "int", "float", "bool", "none"})


def _path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


def _format_errors(exc: ValidationError, items: Sequence[Any], source: str, base: int = 0) -> DumpError:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = list(first["loc"])
    if loc and loc[0] == "items":
        loc = loc[1:]
    index = loc[0] if loc and isinstance(loc[0], int) else None
    field_loc = loc[1:] if index is not None else loc
    if field_loc and isinstance(field_loc[0], str) and (field_loc[0] in KINDS or field_loc[0] == OTHER):
        field_loc = field_loc[1:]  # the discriminator tag
    while field_loc and isinstance(field_loc[-1], str) and field_loc[-1] in _UNION_MEMBERS:
        field_loc = field_loc[:-1]  # which member of a union failed: noise for the user
    obj = items[index] if index is not None and index < len(items) else None
    where = f"{object_ref(obj)} (item {base + index + 1})" if index is not None else "document"
    more = len({tuple(e["loc"][:2]) for e in errors}) - 1
    suffix = f" (and errors in {more} more object{'s' if more != 1 else ''})" if more > 0 else ""
    return DumpError(f"{source}: {where}: {_path(field_loc) or '<object>'}: {_describe_error(first)}{suffix}")


def _documents(text: str, source: str) -> Iterator[Any]:
    stripped = text.lstrip()
    if not stripped:
        raise DumpError(f"{source}: empty file, expected `kubectl get ... -o json` output")
    if stripped[0] in "{[":
        decoder = json.JSONDecoder()
        pos, end = len(text) - len(stripped), len(text)
        while pos < end:
            try:
                doc, pos = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                raise DumpError(
                    f"{source}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
                ) from None
            yield doc
            while pos < end and text[pos].isspace():
                pos += 1
        return
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        docs = list(yaml.load_all(text, Loader=loader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise DumpError(f"{source}: neither JSON nor YAML{at}: {getattr(exc, 'problem', exc)}") from None
    yield from (d for d in docs if d is not None)


def _items_of(doc: Any, source: str, number: int) -> list[Any]:
    if (
        isinstance(doc, dict)
        and isinstance(doc.get("items"), list)
        and str(doc.get("kind", "List")).endswith("List")
    ):
        return cast(list[Any], doc["items"])
    if isinstance(doc, dict) and isinstance(doc.get("kind"), str) and "metadata" in doc:
        return [doc]
    what = type(doc).__name__ if not isinstance(doc, dict) else f"object with kind {doc.get('kind')!r}"
    raise DumpError(
        f"{source}: document {number} is not a Kubernetes List (kind: List with items) "
        f"or a single object: got {what}"
    )


def validate_items(items: Sequence[Any], source: str = "<objects>") -> Snapshot:
    """Validate already-decoded objects (from YAML, the API, a generator) into a Snapshot."""
    try:
        objects = _ITEMS.validate_python(items)
    except ValidationError as exc:
        raise _format_errors(exc, items, source) from None
    return Snapshot.of(cast(list[dict[str, Any]], objects))


def loads(data: str | bytes, source: str = "<input>") -> Snapshot:
    """Parse dump text. The common case (one JSON List) is validated straight from bytes."""
    with gc_paused():
        return _loads(data, source)


def _loads(data: str | bytes, source: str) -> Snapshot:
    raw = data.encode() if isinstance(data, str) else data
    if raw.lstrip()[:1] == b"{":
        try:
            doc = _LIST.validate_json(raw)
            return Snapshot.of(cast(list[dict[str, Any]], doc["items"]))
        except ValidationError as exc:
            if all(
                len(e["loc"]) >= 2 and e["loc"][0] == "items" and isinstance(e["loc"][1], int)
                for e in exc.errors()
            ):
                raise _format_errors(exc, json.loads(raw)["items"], source) from None
            # not a single List: fall back to the general path for a precise message
    text = raw.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    items: list[Any] = []
    for number, doc in enumerate(_documents(text, source), start=1):
        items.extend(_items_of(doc, source, number))
    return validate_items(items, source)


def load(path: str | Path) -> Snapshot:
    """Read a dump file; `-` reads standard input."""
    source = str(path)
    try:
        if source == "-":
            import sys

            data = sys.stdin.buffer.read()
        else:
            data = Path(path).read_bytes()
    except OSError as exc:
        raise DumpError(f"{source}: cannot read: {exc.strerror or exc}") from None
    return loads(data, source)


def dumps(objects: Iterable[dict[str, Any]]) -> str:
    """The objects as one `kubectl`-style JSON List (stable key order as given)."""
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(objects)}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
