"""The API server's check of a custom resource against its CRD's `openAPIV3Schema`, for writes.

A real API server refuses a create, update or patch (status subresource included) whose result does
not match the CRD's structural schema: 422 `Invalid`, one cause per field. Without this check the
test server stored anything tftui wrote, so a status or spec patch a real cluster refuses (a
quantity that is not one, a string where the schema wants an integer, a value outside an enum)
would pass every test.

What is reproduced: `type` (an integer where the schema says `number` is a number, `1.0` is an
integer, as Kubernetes' validator reads JSON numbers), `properties`, `required`, `items`,
`additionalProperties`, `enum`, `pattern`, `minimum`/`maximum`, `minLength`/`maxLength`, `anyOf`
(the `x-kubernetes-int-or-string` pairs), `format: date-time`, and validation ratcheting (Kubernetes
1.30+: on an update, an error at a value the update left as it was does not refuse it, so an object
stored before a schema change can still take status patches). Not reproduced: the CEL rules of
`x-kubernetes-validations`, `x-kubernetes-list-type` uniqueness, the other formats (Kubernetes does
not check `int32`/`int64` ranges either). Checked with `jsonschema` (Draft 7, which reads these
schemas as Kubernetes does; the `x-kubernetes-*` keys are ignored by it). `seed()` and `store()`
bypass the check, as they bypass the API: they load what a cluster already holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import jsonschema

_FORMATS = jsonschema.FormatChecker(formats=())


def rfc3339(value: str) -> bool:
    """A date-time with a time zone (`Z` or an offset), as Kubernetes' `strfmt` and `metav1.Time`
    parse it."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return False
    return "T" in value.upper() and parsed.tzinfo is not None


@_FORMATS.checks("date-time")
def _date_time(value: object) -> bool:
    return not isinstance(value, str) or rfc3339(value)  # `type` speaks for other values


_validators: dict[int, tuple[Mapping[str, Any], jsonschema.Draft7Validator]] = {}


def _validator(schema: Mapping[str, Any]) -> jsonschema.Draft7Validator:
    """One validator per schema (the schemas are shared and never change)."""
    kept = _validators.get(id(schema))
    if kept is None or kept[0] is not schema:
        kept = (schema, jsonschema.Draft7Validator(schema, format_checker=_FORMATS))
        _validators[id(schema)] = kept
    return kept[1]


_MISSING = object()


def _at(value: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        if isinstance(value, dict) and isinstance(part, str):
            value = value.get(part, _MISSING)
        elif isinstance(value, list) and isinstance(part, int) and part < len(value):
            value = value[part]
        else:
            return _MISSING
    return value


def _field(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "<root>"


def schema_errors(
    schema: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None = None
) -> Iterator[tuple[str, str]]:
    """(field, message) for each way `obj` (a whole object: a schema may require `metadata`) breaks
    `schema`; on an update (`old` given) an error at a value the update did not change is ratcheted
    away."""
    body, before = obj, old
    for err in _validator(schema).iter_errors(body):
        path = tuple(err.absolute_path)
        if before is not None:
            now = _at(body, path)
            if now is not _MISSING and now == _at(before, path):
                continue
        yield _field(path), err.message
