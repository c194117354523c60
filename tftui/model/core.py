"""Slim views of the core Kubernetes kinds tftui reads: Node, Pod, PodDisruptionBudget, ConfigMap.

Slim on purpose: a real Pod carries kilobytes of spec tftui never reads, and a 60,000-pod dump would
spend most of its load time building those dicts. Only the fields the engine uses are kept
(`extra="ignore"` below metadata); metadata is kept whole so labels and annotations round-trip.
Any other kind in a dump is kept verbatim as `OtherObject`.
"""

from __future__ import annotations

from typing import Any, Literal, Required

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from tftui.model.crds import KEEP, ObjectMeta, QuantityValue

SLIM = ConfigDict(extra="ignore")


@with_config(SLIM)
class Taint(TypedDict, total=False):
    key: str
    value: str
    effect: str


@with_config(SLIM)
class NodeSpec(TypedDict, total=False):
    unschedulable: bool
    taints: list[Taint]
    providerID: str


@with_config(SLIM)
class Condition(TypedDict, total=False):
    type: str
    status: str
    reason: str
    lastTransitionTime: str


@with_config(SLIM)
class NodeStatus(TypedDict, total=False):
    capacity: dict[str, QuantityValue]
    allocatable: dict[str, QuantityValue]
    conditions: list[Condition]


@with_config(SLIM)
class Node(TypedDict, total=False):
    apiVersion: str
    kind: Required[Literal["Node"]]
    metadata: Required[ObjectMeta]
    spec: NodeSpec
    status: NodeStatus


@with_config(SLIM)
class ResourceRequirements(TypedDict, total=False):
    requests: dict[str, QuantityValue]
    limits: dict[str, QuantityValue]


@with_config(SLIM)
class Container(TypedDict, total=False):
    name: str
    image: str
    resources: ResourceRequirements


@with_config(SLIM)
class PodSpec(TypedDict, total=False):
    nodeName: str
    schedulerName: str
    priority: int
    containers: list[Container]
    # kube-scheduler's node filters (engine.nodefit): init containers' requests, node constraints
    initContainers: list[Container]
    nodeSelector: dict[str, str]
    affinity: dict[str, Any]


@with_config(SLIM)
class PodStatus(TypedDict, total=False):
    phase: str
    conditions: list[Condition]
    startTime: str


@with_config(SLIM)
class Pod(TypedDict, total=False):
    apiVersion: str
    kind: Required[Literal["Pod"]]
    metadata: Required[ObjectMeta]
    spec: PodSpec
    status: PodStatus


@with_config(SLIM)
class LabelSelector(TypedDict, total=False):
    matchLabels: dict[str, str]
    matchExpressions: list[dict[str, Any]]


@with_config(SLIM)
class PDBSpec(TypedDict, total=False):
    minAvailable: int | str
    maxUnavailable: int | str
    selector: LabelSelector


@with_config(SLIM)
class PDBStatus(TypedDict, total=False):
    currentHealthy: int
    desiredHealthy: int
    disruptionsAllowed: int
    expectedPods: int


@with_config(SLIM)
class PodDisruptionBudget(TypedDict, total=False):
    apiVersion: str
    kind: Required[Literal["PodDisruptionBudget"]]
    metadata: Required[ObjectMeta]
    spec: PDBSpec
    status: PDBStatus


@with_config(KEEP)
class ConfigMap(TypedDict, total=False):
    """TensorFusion's own ConfigMap (label `tensor-fusion.ai/component: config`): the scheduler
    configuration the chart writes lives in its `scheduler-config.yaml` key."""

    apiVersion: str
    kind: Required[Literal["ConfigMap"]]
    metadata: Required[ObjectMeta]
    data: dict[str, str]


@with_config(KEEP)
class OtherObject(TypedDict, total=False):
    """Any kind tftui does not interpret; kept verbatim so a dump round-trips."""

    apiVersion: Required[str]
    kind: Required[str]
    metadata: Required[ObjectMeta]
