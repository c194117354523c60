"""GPU prices: the ProviderConfigs' hardware prices over the public GPU table, as the controller merges them.

The controller prices GPUs from the legacy price table and lays every ProviderConfig's
`hardwareMetadata[].costPerHour` over it (ProviderConfig wins), keyed by the NVML full name that
`GPU.status.gpuModel` holds. Compaction orders candidates by these prices and the waste report
prices idle capacity with them, so a model only the ProviderConfig knows (Ascend, PPU, Moore
Threads, ...) is priced too. Deviation (README): a catalogue entry without a price leaves the
table's price in place (the controller would price it at 0).
"""

from __future__ import annotations

from tftui.engine.state import ClusterState
from tftui.model import gpuinfo


def price_map(state: ClusterState) -> dict[str, float]:
    """Full GPU model name → $/h per GPU (derived once per state; read-only)."""
    return state.derived("gpu-prices", lambda st: st.providers.prices(gpuinfo.price_table()))


def gpu_price(state: ClusterState, model: str) -> float | None:
    """$/h of one GPU of `model` (full, short or family name); None when nobody prices it."""
    if not model:
        return None
    hw = state.providers.model(model)
    if hw is not None and hw.price_per_hour is not None:
        return hw.price_per_hour
    info = gpuinfo.lookup(model)
    return info.price_per_hour if info else None
