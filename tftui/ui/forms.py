"""Form input → engine request, with one readable error per field (never a traceback)."""

from __future__ import annotations

from collections.abc import Mapping

from tftui.engine.fit import MAX_GPU_COUNT, Request, RequestError
from tftui.model.isolation import MODES, PARTITIONED
from tftui.model.quantity import QuantityError, quantity_float

FIELDS = ("pool", "amount", "vram", "count", "model", "isolation", "partition", "namespace")
"""Form fields of the placement preview, in screen order."""


def _number_error(text: str, exc: Exception) -> str:
    detail = " ".join(str(exc).split())
    return f"{text!r} is not a quantity ({detail})" if detail else f"{text!r} is not a quantity"


def parse_request(
    values: Mapping[str, str], pools: frozenset[str] | set[str] | None = None
) -> tuple[Request | None, dict[str, str]]:
    """Parse the placement form: (request, {}) or (None, {field: error}).

    `amount` is TFLOPS as a quantity (`20`, `312500m`) or a compute percentage (`25%`); `vram` a
    quantity (`20Gi`); `count` 1..128 GPUs; `model` optional (`H100` or the full NVML name);
    `isolation` one of the modes (soft when empty; partitioned when only a `partition` template is
    given); `namespace` optional, for its GPUResourceQuota.
    """
    errors: dict[str, str] = {}
    pool = values.get("pool", "").strip()
    if pools is not None and pool not in pools:
        known = ", ".join(sorted(pools)) or "none"
        errors["pool"] = f"no pool {pool!r} (pools: {known})" if pool else f"choose a pool ({known})"

    amount = values.get("amount", "").strip()
    tflops: float | None = None
    percent: float | None = None
    if not amount:
        errors["amount"] = "required: TFLOPS (20, 312500m) or compute percent (25%)"
    elif amount.endswith("%"):
        try:
            percent = float(amount[:-1].strip())
        except ValueError:
            errors["amount"] = f"{amount!r}: compute percent must be a number, e.g. 25%"
        else:
            if not 0 <= percent <= 100:
                errors["amount"] = f"compute percent must be 0-100%, got {amount}"
    else:
        try:
            tflops = quantity_float(amount)
        except (QuantityError, ValueError) as exc:
            errors["amount"] = _number_error(amount, exc)
        else:
            if tflops < 0:
                errors["amount"] = f"TFLOPS must not be negative, got {amount}"

    raw_vram = values.get("vram", "").strip()
    vram = 0.0
    if not raw_vram:
        errors["vram"] = "required: VRAM per GPU, e.g. 20Gi"
    else:
        try:
            vram = quantity_float(raw_vram)
        except (QuantityError, ValueError) as exc:
            errors["vram"] = _number_error(raw_vram, exc)
        else:
            if vram < 0:
                errors["vram"] = f"VRAM must not be negative, got {raw_vram}"

    raw_count = values.get("count", "").strip() or "1"
    count = 1
    try:
        count = int(raw_count)
    except ValueError:
        errors["count"] = f"{raw_count!r}: GPU count must be a whole number 1-{MAX_GPU_COUNT}"
    else:
        if not 1 <= count <= MAX_GPU_COUNT:
            errors["count"] = f"GPU count must be 1-{MAX_GPU_COUNT}, got {count}"

    model = values.get("model", "").strip() or None
    partition = values.get("partition", "").strip()
    isolation = values.get("isolation", "").strip().lower() or (PARTITIONED if partition else "soft")
    if isolation not in MODES:
        errors["isolation"] = f"{isolation!r}: one of {', '.join(MODES)}"
    elif partition and isolation != PARTITIONED:
        errors["partition"] = f"a partition template needs isolation {PARTITIONED}, not {isolation}"
    namespace = values.get("namespace", "").strip()
    if errors:
        return None, errors
    try:
        request = Request(
            vram=vram,
            tflops=tflops,
            compute_percent=percent,
            count=count,
            model=model,
            isolation=isolation,
            partition=partition,
            namespace=namespace,
        )
    except RequestError as exc:  # the engine's own checks, should the ones above ever miss one
        text = str(exc)
        field = "count" if "count" in text else "vram" if "vram" in text.lower() else "amount"
        return None, {field: text}
    return request, {}
