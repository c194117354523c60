"""`ClusterState` and its views: the indexed, derived view of one snapshot that every decision and
view reads.

A package because its three parts change for different reasons: the views (`views`), the arithmetic
both the full and the incremental build share (`derive`) and the full build with its queries
(`cluster`). Importers use this package; its modules import each other directly, never through it.
"""

from tftui.engine.state.cluster import ClusterState
from tftui.engine.state.derive import (
    add_compaction_sums,
    add_node_to_pool,
    add_partition,
    convert_percent,
    go_value,
    percent_tflops,
    virtual_capacity,
)
from tftui.engine.state.views import (
    DEFAULT_PLACEMENT_MODE,
    DEFAULT_PROVISIONING_MODE,
    DEFAULT_TFLOPS_OVERSELL,
    DEFAULT_VRAM_EXPAND_DISK,
    DEFAULT_VRAM_EXPAND_MEM,
    ENDED_PHASES,
    GPUView,
    NodeView,
    PartitionUse,
    PoolView,
    Res,
    StateWarning,
    WorkerView,
    WorkloadView,
    parse_time,
)

__all__ = [
    "DEFAULT_PLACEMENT_MODE",
    "DEFAULT_PROVISIONING_MODE",
    "DEFAULT_TFLOPS_OVERSELL",
    "DEFAULT_VRAM_EXPAND_DISK",
    "DEFAULT_VRAM_EXPAND_MEM",
    "ENDED_PHASES",
    "ClusterState",
    "GPUView",
    "NodeView",
    "PartitionUse",
    "PoolView",
    "Res",
    "StateWarning",
    "WorkerView",
    "WorkloadView",
    "add_compaction_sums",
    "add_node_to_pool",
    "add_partition",
    "convert_percent",
    "go_value",
    "parse_time",
    "percent_tflops",
    "virtual_capacity",
]
