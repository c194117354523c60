"""Label, annotation and finalizer keys of TensorFusion, in one place.

Every module reads keys from here so a custom domain prefix would be a one-line change.
"""

from __future__ import annotations

DOMAIN = "tensor-fusion.ai"
GROUP = DOMAIN
API_VERSION = f"{GROUP}/v1"

# labels
COMPONENT = f"{DOMAIN}/component"
COMPONENT_WORKER = "worker"
COMPONENT_CONFIG = "config"  # the chart's ConfigMap (scheduler configuration, dynamic config)
WORKLOAD = f"{DOMAIN}/workload"
GPUPOOL = f"{DOMAIN}/gpupool"
POOL_LABEL_PREFIX = f"{DOMAIN}/pool-"
MANAGED_BY = f"{DOMAIN}/managed-by"
CLUSTER = f"{DOMAIN}/cluster"
NODE_PROVISIONER = f"{DOMAIN}/node-provisioner"
DO_NOT_DISRUPT = f"{DOMAIN}/do-not-disrupt"
SHOULD_DELETE = f"{DOMAIN}/should-delete"
HARDWARE_VENDOR = f"{DOMAIN}/hardware-vendor"
POD_TEMPLATE_HASH = f"{DOMAIN}/pod-template-hash"
ENABLED = f"{DOMAIN}/enabled"
DEFRAG_SOURCE = f"{DOMAIN}/defrag-source"
DEFRAG_SOURCE_SINCE = f"{DOMAIN}/defrag-source-since"
DEFRAG_SOURCE_POOL = f"{DOMAIN}/defrag-source-pool"
DEFRAG_EVICTED = f"{DOMAIN}/defrag-evicted"
DEFRAG_EVICTED_SINCE = f"{DOMAIN}/defrag-evicted-since"
DEFRAG_EVICTED_POOL = f"{DOMAIN}/defrag-evicted-pool"
DEFRAG_EVICT_SKIP = f"{DOMAIN}/defrag-evict-skip"
DEFRAG_EVICT_SKIP_SINCE = f"{DOMAIN}/defrag-evict-skip-since"
DEFRAG_EVICT_SKIP_POOL = f"{DOMAIN}/defrag-evict-skip-pool"
DEFRAG_EVICT_SKIP_REASON = f"{DOMAIN}/defrag-evict-skip-reason"
USED_BY_TAINT = f"{DOMAIN}/used-by"

# annotations
GPU_IDS = f"{DOMAIN}/gpu-ids"
TFLOPS_REQUEST = f"{DOMAIN}/tflops-request"
TFLOPS_LIMIT = f"{DOMAIN}/tflops-limit"
VRAM_REQUEST = f"{DOMAIN}/vram-request"
VRAM_LIMIT = f"{DOMAIN}/vram-limit"
COMPUTE_PERCENT_REQUEST = f"{DOMAIN}/compute-percent-request"
COMPUTE_PERCENT_LIMIT = f"{DOMAIN}/compute-percent-limit"
GPU_COUNT = f"{DOMAIN}/gpu-count"
QOS = f"{DOMAIN}/qos"
GPU_MODEL = f"{DOMAIN}/gpu-model"
VENDOR = f"{DOMAIN}/vendor"
GPU_INDICES = f"{DOMAIN}/gpu-indices"
ISOLATION = f"{DOMAIN}/isolation"
PARTITION = f"{DOMAIN}/partition"
PARTITION_ID = f"{DOMAIN}/partition-id"
DEDICATED_GPU = f"{DOMAIN}/dedicated-gpu"
IS_LOCAL_GPU = f"{DOMAIN}/is-local-gpu"
SIDECAR_WORKER = f"{DOMAIN}/sidecar-worker"
EMBEDDED_WORKER = f"{DOMAIN}/embedded-worker"
INJECT_CONTAINER = f"{DOMAIN}/inject-container"
WORKLOAD_PROFILE = f"{DOMAIN}/workload-profile"
SELECTED_WORKLOAD = f"{DOMAIN}/selected-workload"
ENABLED_REPLICAS = f"{DOMAIN}/enabled-replicas"
AUTOSCALE = f"{DOMAIN}/autoscale"
AUTOSCALE_TARGET = f"{DOMAIN}/autoscale-target"
EVICTION_PROTECTION = f"{DOMAIN}/eviction-protection"
INDEX = f"{DOMAIN}/index"
EFFECTIVE_HARD_SM_PERCENT = f"{DOMAIN}/effective-hard-sm-percent"
IS_DEFAULT_POOL = f"{DOMAIN}/is-default-pool"
MANUAL_COMPACTION = f"{DOMAIN}/manual-compaction"
LAST_SYNC = f"{DOMAIN}/last-sync"
GPU_MISSING_SINCE = f"{DOMAIN}/gpu-missing-since"
GANG_ENABLED = f"{DOMAIN}/gang-enabled"
GANG_MIN_MEMBERS = f"{DOMAIN}/gang-min-members"
GANG_TIMEOUT = f"{DOMAIN}/gang-timeout"

FINALIZER = f"{DOMAIN}/finalizer"

# well-known Kubernetes keys
HOSTNAME = "kubernetes.io/hostname"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
NVIDIA_GPU = "nvidia.com/gpu"
NATIVE_GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915")

TRUE = "true"


def pool_label(pool: str) -> str:
    """The GPUNode membership label of `pool` (`tensor-fusion.ai/pool-<pool>`)."""
    return POOL_LABEL_PREFIX + pool
