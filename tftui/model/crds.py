"""TensorFusion custom resources (the CRDs tftui reads and writes) as pydantic-validated TypedDicts.

Why TypedDicts and not one `BaseModel` per object: a 5,000-node dump holds ~110k objects, and
instantiating a model class per object costs about 3× `json.loads`, whereas one
`TypeAdapter.validate_json` over TypedDicts validates every field in Rust at ~1.4×. The objects stay
plain JSON-shaped dicts (so a dump round-trips exactly and unknown fields are kept via
`extra="allow"`); the engine derives its typed, indexed view once in `engine.state`.
Quantities are validated against Kubernetes' grammar here and parsed (cached) by the engine.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Required

from annotated_types import Ge, Le
from pydantic import (
    AfterValidator,
    AllowInfNan,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    StrictInt,
    StringConstraints,
    with_config,
)
from typing_extensions import TypedDict

from tftui.model.numbers import finite_float_problem
from tftui.model.quantity import MAX_QUANTITY, QUANTITY_PATTERN, QuantityError, parse_bounded

#: Quantities that are in range whatever their digits: at most 12 integer digits up to `k`/`Ki`,
#: at most 9 up to `G`/`Gi` (both < 2^63). Checked in Rust; anything else takes the Python check.
_SMALL_QUANTITY = (
    r"^[+-]?(?:[0-9]{1,12}(?:\.[0-9]{0,9})?|\.[0-9]{1,9})(?:Ki|[numk])?$"
    r"|^[+-]?(?:[0-9]{1,9}(?:\.[0-9]{0,9})?|\.[0-9]{1,9})(?:[MG]i|[MG])$"
)


def _bounded(value: str) -> str:
    """A quantity string whose value Kubernetes could hold (|x| ≤ 2^63-1)."""
    try:
        parse_bounded(value)
    except QuantityError as exc:
        raise ValueError(exc.reason) from None
    return value


#: A Kubernetes `resource.Quantity`: a string in the Kubernetes grammar, or a bare JSON number, of
#: at most 2^63-1 in magnitude (Kubernetes' limit; `1e999` would be infinite as a float).
QuantityValue = Annotated[
    Annotated[str, StringConstraints(pattern=_SMALL_QUANTITY)]
    | Annotated[str, StringConstraints(pattern=QUANTITY_PATTERN), AfterValidator(_bounded)]
    | Annotated[int, Ge(-MAX_QUANTITY), Le(MAX_QUANTITY)]
    | Annotated[float, Ge(-MAX_QUANTITY), Le(MAX_QUANTITY), AllowInfNan(False)],
    Field(union_mode="left_to_right"),
]

KEEP = ConfigDict(extra="allow")


@with_config(KEEP)
class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool


@with_config(KEEP)
class ObjectMeta(TypedDict, total=False):
    name: Required[str]
    namespace: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    creationTimestamp: str
    deletionTimestamp: str
    resourceVersion: str
    generation: int
    finalizers: list[str]
    ownerReferences: list[OwnerReference]


@with_config(KEEP)
class Resource(TypedDict, total=False):
    tflops: QuantityValue
    compute: QuantityValue
    vram: QuantityValue


@with_config(KEEP)
class Resources(TypedDict, total=False):
    requests: Resource
    limits: Resource


@with_config(KEEP)
class ResourceUnit(TypedDict, total=False):
    tflops: QuantityValue
    vram: QuantityValue
    cpu: QuantityValue
    memory: QuantityValue


@with_config(KEEP)
class Oversubscription(TypedDict, total=False):
    vramExpandToHostMem: int
    vramExpandToHostDisk: int
    tflopsOversellRatio: int


@with_config(KEEP)
class CapacityConfig(TypedDict, total=False):
    minResources: ResourceUnit
    maxResources: ResourceUnit
    warmResources: ResourceUnit
    oversubscription: Oversubscription


@with_config(KEEP)
class DefragConfig(TypedDict, total=False):
    enabled: bool
    schedule: str
    timezone: str
    maxDuration: str
    utilizationThresholdPercent: int
    evictedPodMarkerTTL: str
    sourceNodeMarkerTTL: str


@with_config(KEEP)
class NodeCompaction(TypedDict, total=False):
    period: str
    defrag: DefragConfig


@with_config(KEEP)
class NodeManagerConfig(TypedDict, total=False):
    provisioningMode: str
    defaultIsolationMode: str
    defaultVendor: str
    nodeSelector: dict[str, Any]
    multiVendorNodeSelector: dict[str, Any]
    isolationModeRules: list[dict[str, Any]]
    nodeProvisioner: dict[str, Any]
    nodeCompaction: NodeCompaction
    nodePoolRollingUpdatePolicy: dict[str, Any]


@with_config(KEEP)
class GPUPoolSpec(TypedDict, total=False):
    defaultUsingLocalGPU: bool
    capacityConfig: CapacityConfig
    nodeManagerConfig: NodeManagerConfig
    qosConfig: dict[str, Any]
    componentConfig: dict[str, Any]
    schedulingConfigTemplate: str


@with_config(KEEP)
class PoolTotals(TypedDict, total=False):
    totalTFlops: QuantityValue
    totalVRAM: QuantityValue
    virtualTFlops: QuantityValue
    virtualVRAM: QuantityValue
    availableTFlops: QuantityValue
    availableVRAM: QuantityValue
    virtualAvailableTFlops: QuantityValue
    virtualAvailableVRAM: QuantityValue


@with_config(KEEP)
class GPUPoolStatus(PoolTotals, total=False):
    cluster: str
    phase: str
    conditions: list[dict[str, Any]]
    totalNodes: int
    totalGPUs: int
    readyNodes: int
    notReadyNodes: int
    runningAppsCnt: int
    provisioningPhase: str
    lastCompactionTime: str
    lastDefragTime: str


@with_config(KEEP)
class GPUPool(TypedDict, total=False):
    apiVersion: str
    kind: Required[Literal["GPUPool"]]
    metadata: Required[ObjectMeta]
    spec: GPUPoolSpec
    status: GPUPoolStatus


@with_config(KEEP)
class GPUPoolDefinition(TypedDict, total=False):
    name: Required[str]
    isDefault: bool
    specTemplate: GPUPoolSpec


@with_config(KEEP)
class TensorFusionClusterSpec(TypedDict, total=False):
    gpuPools: list[GPUPoolDefinition]
    computingVendor: dict[str, Any]


@with_config(KEEP)
class TensorFusionClusterStatus(PoolTotals, total=False):
    phase: str
    conditions: list[dict[str, Any]]
    totalPools: int
    totalNodes: int
    totalGPUs: int
    readyGPUPools: list[str]
    notReadyGPUPools: list[str]
    retryCount: int


@with_config(KEEP)
class TensorFusionCluster(TypedDict, total=False):
    apiVersion: str
    kind: Required[Literal["TensorFusionCluster"]]
    metadata: Required[ObjectMeta]
    spec: TensorFusionClusterSpec
    status: TensorFusionClusterStatus


@with_config(KEEP)
class GPUNodeSpec(TypedDict, total=False):
    manageMode: str
    costPerHour: str
    gpuCardIndices: list[int]
    cloudVendorParam: str


@with_config(KEEP)
class NodeInfo(TypedDict, total=False):
    ramSize: QuantityValue
    dataDiskSize: QuantityValue


@with_config(KEEP)
class GPUNodeStatus(PoolTotals, total=False):
    phase: str
    conditions: list[dict[str, Any]]
    hypervisorStatus: dict[str, Any]
    nodeInfo: NodeInfo
    totalGPUs: int
    managedGPUs: int
    managedGPUDeviceIDs: list[str]
    totalGPUPods: int
    observedGeneration: int


@with_config(KEEP)
class GPUNode(TypedDict, total=False):
    apiVersion: str
    kind: Required[Literal["GPUNode"]]
    metadata: Required[ObjectMeta]
    spec: GPUNodeSpec
    status: GPUNodeStatus


@with_config(KEEP)
class AllocatedPartition(TypedDict, total=False):
    templateId: str
    podUid: str
    podName: str
    namespace: str
    allocatedAt: str
    allocatedSlotStart: int
    allocatedSlotEnd: int
    isolationGroupId: int


@with_config(KEEP)
class GPUStatus(TypedDict, total=False):
    phase: str
    vendor: str
    model: str
    gpuModel: str
    uuid: str
    index: int
    numaNode: int
    capacity: Resource
    available: Resource
    nodeSelector: dict[str, str]
    usedBy: str
    isolationMode: str
    isolationPolicy: str  # what the hypervisor advertises: Static (also when empty) or Dynamic
    activeIsolationMode: str  # a Dynamic GPU's mode lock, set while it has allocations
    dynamicIsolationConflict: bool
    message: str
    # `runningApps` (the controller's copy of each worker's requests, tens of entries on a shared
    # GPU) is kept as given, unvalidated: nothing in tftui reads it, the pods are the record, and
    # checking its quantities was 40 % of a GPU's validation (0.15 CPU-s at 5,000 nodes)
    allocatedPartitions: dict[str, AllocatedPartition]  # pod UID → partition


@with_config(KEEP)
class GPU(TypedDict, total=False):
    apiVersion: str
    kind: Required[Literal["GPU"]]
    metadata: Required[ObjectMeta]
    status: GPUStatus


def _finite_text(value: str) -> str:
    why = finite_float_problem(value)
    if why is not None:
        raise ValueError(why)
    return value


#: autoSetResources' percentiles and ratios: strings in the CRD (numbers tolerated), never NaN/Inf.
GoFloat = Annotated[
    Annotated[str, AfterValidator(_finite_text)] | StrictInt | Annotated[float, Strict(), AllowInfNan(False)],
    Field(union_mode="left_to_right"),
]


@with_config(KEEP)
class AutoSetResources(TypedDict, total=False):
    """Types only (no coercion: `enable: "true"` stays a string, which upstream does not enable)."""

    enable: StrictBool
    targetResource: str
    historyDataPeriod: str
    initialDelayPeriod: str
    interval: str
    lowerBoundComputePercentile: GoFloat
    targetComputePercentile: GoFloat
    upperBoundComputePercentile: GoFloat
    lowerBoundVRAMPercentile: GoFloat
    targetVRAMPercentile: GoFloat
    upperBoundVRAMPercentile: GoFloat
    marginFraction: GoFloat
    updateThreshold: GoFloat
    minVRAMResourcesRatio: GoFloat
    maxVRAMResourcesRatio: GoFloat
    minComputeResourcesRatio: GoFloat
    maxComputeResourcesRatio: GoFloat


@with_config(KEEP)
class CronScalingRule(TypedDict, total=False):
    enable: StrictBool
    name: str
    start: str
    end: str
    desiredResources: Resources


@with_config(KEEP)
class AutoScalingConfig(TypedDict, total=False):
    autoSetResources: AutoSetResources
    cronScalingRules: list[CronScalingRule]
    externalScaler: dict[str, Any]


@with_config(KEEP)
class VerticalScalingRule(TypedDict, total=False):
    name: str
    selector: dict[str, Any]
    autoScaling: AutoScalingConfig


@with_config(KEEP)
class WorkloadProfileSpec(TypedDict, total=False):
    replicas: int | None
    poolName: str
    resources: Resources
    qos: str
    isLocalGPU: bool
    sidecarWorker: bool
    isolation: str
    partitionTemplateId: str
    gpuModel: str
    gpuCount: int
    gpuIndices: list[int]
    vendor: str
    autoScalingConfig: AutoScalingConfig
    nodeAffinity: dict[str, Any]
    workerPodTemplate: dict[str, Any]
    gangScheduling: dict[str, Any]


@with_config(KEEP)
class TensorFusionWorkloadStatus(TypedDict, total=False):
    phase: str
    conditions: list[dict[str, Any]]
    workerCount: int
    readyWorkers: int
    podTemplateHash: str
    recommendation: Resources
    appliedRecommendedReplicas: int
    activeCronScalingRule: dict[str, Any]
    gang: dict[str, Any]


@with_config(KEEP)
class TensorFusionWorkload(TypedDict, total=False):
    apiVersion: str
    kind: Required[Literal["TensorFusionWorkload"]]
    metadata: Required[ObjectMeta]
    spec: WorkloadProfileSpec
    status: TensorFusionWorkloadStatus


@with_config(KEEP)
class WorkloadProfile(TypedDict, total=False):
    apiVersion: str
    kind: Required[Literal["WorkloadProfile"]]
    metadata: Required[ObjectMeta]
    spec: WorkloadProfileSpec
    status: dict[str, Any]


@with_config(KEEP)
class Placement(TypedDict, total=False):
    mode: str
    allowUsingLocalGPU: bool
    gpuFilters: list[dict[str, Any]]


@with_config(KEEP)
class SchedulingConfigTemplateSpec(TypedDict, total=False):
    placement: Placement
    verticalScalingRules: list[VerticalScalingRule]
    reBalancer: dict[str, Any]
    hypervisor: dict[str, Any]


@with_config(KEEP)
class SchedulingConfigTemplate(TypedDict, total=False):
    apiVersion: str
    kind: Required[Literal["SchedulingConfigTemplate"]]
    metadata: Required[ObjectMeta]
    spec: SchedulingConfigTemplateSpec
    status: dict[str, Any]


@with_config(KEEP)
class GPUNodeClaimSpec(TypedDict, total=False):
    nodeName: str
    region: str
    zone: str
    instanceType: str
    nodeClassRef: dict[str, Any]
    capacityType: str
    tflopsOffered: QuantityValue
    vramOffered: QuantityValue
    gpuDeviceOffered: int
    extraParams: dict[str, str]


@with_config(KEEP)
class GPUNodeClaimStatus(TypedDict, total=False):
    phase: str
    instanceID: str


@with_config(KEEP)
class GPUNodeClaim(TypedDict, total=False):
    apiVersion: str
    kind: Required[Literal["GPUNodeClaim"]]
    metadata: Required[ObjectMeta]
    spec: GPUNodeClaimSpec
    status: GPUNodeClaimStatus


@with_config(KEEP)
class HardwareModelInfo(TypedDict, total=False):
    model: str
    fullModelName: str
    costPerHour: str
    fp16TFlops: QuantityValue
    maxPartitions: int
    maxPlacementSlots: int
    maxIsolationGroups: int
    totalExtendedResources: dict[str, int]
    partitionTemplateRefs: list[str]


@with_config(KEEP)
class VirtualizationTemplate(TypedDict, total=False):
    id: str
    nvmlProfileId: int
    name: str
    memoryGigabytes: int
    computePercent: str | int | float
    description: str
    maxInstances: int
    placementLimit: list[int]
    placementOffset: int
    extendedResources: dict[str, int]
    isolationGroupSharing: str
    maxPartitionsPerIsolationGroup: int
    isolationGroupSlots: int


@with_config(KEEP)
class ProviderConfigSpec(TypedDict, total=False):
    vendor: str
    images: dict[str, Any]
    hypervisor: dict[str, Any]
    hardwareMetadata: list[HardwareModelInfo]
    virtualizationTemplates: list[VirtualizationTemplate]
    inUseResourceNames: list[str]
    devicePluginDetection: dict[str, Any]


@with_config(KEEP)
class ProviderConfig(TypedDict, total=False):
    """A hardware vendor's catalogue: models, prices, partition templates, device-plugin resources."""

    apiVersion: str
    kind: Required[Literal["ProviderConfig"]]
    metadata: Required[ObjectMeta]
    spec: ProviderConfigSpec
    status: dict[str, Any]


@with_config(KEEP)
class QuotaResource(TypedDict, total=False):
    tflops: QuantityValue
    vram: QuantityValue
    compute: QuantityValue


@with_config(KEEP)
class QuotaTotal(TypedDict, total=False):
    requests: QuotaResource
    limits: QuotaResource
    maxWorkers: int
    alertThresholdPercent: int


@with_config(KEEP)
class QuotaSingle(TypedDict, total=False):
    maxRequests: QuotaResource
    maxLimits: QuotaResource
    maxGPUCount: int
    defaultRequests: QuotaResource
    defaultLimits: QuotaResource


@with_config(KEEP)
class GPUResourceQuotaSpec(TypedDict, total=False):
    total: QuotaTotal
    single: QuotaSingle


@with_config(KEEP)
class GPUResourceQuota(TypedDict, total=False):
    """A namespace's TensorFusion quota: totals over its workers and per-workload limits."""

    apiVersion: str
    kind: Required[Literal["GPUResourceQuota"]]
    metadata: Required[ObjectMeta]
    spec: GPUResourceQuotaSpec
    status: dict[str, Any]
