"""The placement filter's isolation checks: can this GPU host a request of this isolation mode?

Follows the controller's allocator, per GPU, in its order:

1. the isolation policy the GPU runs (`status.isolationPolicy`). Static: a shared request goes
   anywhere, any other needs the GPU's mode to be unset or the same ("isolation-mode"). Dynamic: the
   GPU's mode lock (`activeIsolationMode`) must be unset or the same ("isolation-mode"), a GPU in
   conflict takes nothing ("isolation-conflict"), and partitioned requests are refused
   ("isolation-policy": the Dynamic policy has no partitions);
2. the GPU's `virtualization-capabilities` annotation, when present, must support the mode
   ("isolation-unsupported"; shared needs no support);
3. a shared request needs a whole idle GPU with no partitions ("shared-busy").

Deviation (README): the controller runs one policy for the whole cluster (its
`TF_ISOLATION_MODE_POLICY`) and drops GPUs that advertise the other one; tftui cannot read the
controller's environment, so it applies to each GPU the policy that GPU advertises.
"""

from __future__ import annotations

from tftui.engine.state import GPUView, Res
from tftui.model.isolation import PARTITIONED, SHARED

POLICY_STAGES = ("isolation-policy", "isolation-conflict", "isolation-mode")


def policy_reject(gpu: GPUView, mode: str) -> str | None:
    """Step 1: the GPU's policy and mode against the requested mode (upstream runs it first)."""
    iso = gpu.isolation
    if iso.dynamic:
        if mode == PARTITIONED:
            return "isolation-policy"
        if iso.conflict:
            return "isolation-conflict"
        return None if iso.active in ("", mode) else "isolation-mode"
    if mode in ("", SHARED):
        return None
    return None if iso.mode in ("", mode) else "isolation-mode"


def compatible(gpu: GPUView, mode: str) -> bool:
    """Whether the GPU takes part in a request's placement at all (also for the node score)."""
    return policy_reject(gpu, mode) is None


def mode_reject(gpu: GPUView, available: Res, mode: str, partitioned: bool) -> str | None:
    """Steps 2–3, after the phase and index filters; `partitioned`: the GPU holds partitions."""
    caps = gpu.isolation.capabilities
    if caps is not None and not caps.supports(mode):
        return "isolation-unsupported"
    if mode == SHARED and (
        partitioned or available.tflops < gpu.capacity.tflops or available.vram < gpu.capacity.vram
    ):
        return "shared-busy"
    return None
