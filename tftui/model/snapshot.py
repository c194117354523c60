"""A consistent read of the cluster's objects, grouped by kind, and the error of a dump that cannot
be read: what the engine and the batch commands need of `tftui.model.dump` without its validators
(pydantic and the object models, about 0.1 CPU-s to import, which the generated demo's `plan` and
`report` never use). `tftui.model.dump` re-exports both."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from tftui.model.giveway import same_items

__all__ = ["KIND_NAMES", "OTHER", "DumpError", "Snapshot"]

#: the kinds the model validates (`tftui.model.dump.KINDS` maps each to its model; a test holds the
#: two equal); any other kind is grouped as `OTHER`
KIND_NAMES: Final = frozenset(
    {
        "TensorFusionCluster",
        "GPUPool",
        "GPUNode",
        "GPU",
        "TensorFusionWorkload",
        "WorkloadProfile",
        "SchedulingConfigTemplate",
        "GPUNodeClaim",
        "ProviderConfig",
        "GPUResourceQuota",
        "ConfigMap",
        "Node",
        "Pod",
        "PodDisruptionBudget",
    }
)
OTHER: Final = "other"


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
            kind = obj["kind"] if obj.get("kind") in KIND_NAMES else OTHER
            snap.by_kind.setdefault(kind, []).append(obj)
        return snap

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return self.by_kind.get(kind, [])

    def same_objects(self, other: Snapshot) -> bool:
        """Whether both hold the very same dicts in the same order (C-level identity checks): the
        sources hand an unchanged object's dict again, so this means nothing changed."""
        return other is self or same_items(self.objects, other.objects)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Snapshot) and self.objects == other.objects
