"""The public GPU table shipped with the package (`tftui/data/gpu-info.csv`).

Upstream prices nodes (`raw_cost`) and sizes GPUs by this table, keyed by the NVML full name the
hypervisor writes into `GPU.status.gpuModel`; people and pod annotations use the short name
(`A100_SXM_80G`, or a family like `H100`). Both lookups live here so the simulator and the engine
agree on TFLOPS and prices.
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources


@dataclass(frozen=True, slots=True)
class GPUInfo:
    """One GPU model: short name, NVML full name, vendor, FP16 dense TFLOPS and hourly price."""

    model: str
    full_name: str
    vendor: str
    tflops: float
    price_per_hour: float
    tflops_milli: int  # exact FP16 TFLOPS × 1000, so "165.16" stays "165160m" without float noise


@dataclass(frozen=True, slots=True)
class _Table:
    rows: tuple[GPUInfo, ...]
    by_model: dict[str, GPUInfo]
    by_full: dict[str, GPUInfo]


@functools.cache
def _table() -> _Table:
    """Read the CSV once; the package data never changes at run time."""
    text = resources.files("tftui").joinpath("data/gpu-info.csv").read_text(encoding="utf-8")
    rows: list[GPUInfo] = []
    for rec in csv.DictReader(io.StringIO(text)):
        tflops = Decimal(rec["fp16_tflops"].strip())
        rows.append(
            GPUInfo(
                model=rec["model"].strip(),
                full_name=rec["full_model_name"].strip(),
                vendor=rec["vendor"].strip(),
                tflops=float(tflops),
                price_per_hour=float(rec["cost_per_hour_usd"]),
                tflops_milli=int(tflops * 1000),
            )
        )
    by_model: dict[str, GPUInfo] = {}
    by_full: dict[str, GPUInfo] = {}
    for row in rows:  # first row wins on duplicates, like upstream's list scan
        by_model.setdefault(row.model.lower(), row)
        by_full.setdefault(row.full_name.lower(), row)
    return _Table(tuple(rows), by_model, by_full)


def gpu_models() -> tuple[GPUInfo, ...]:
    """Every row of the table, in file order."""
    return _table().rows


def by_full_name(name: str) -> GPUInfo | None:
    """Model by NVML full name (`NVIDIA H100 80GB HBM3`), case-insensitive; None if unknown."""
    return _table().by_full.get(name.strip().lower())


@functools.lru_cache(maxsize=4096)  # a build asks once per workload; a family name scans the table
def by_short_name(name: str) -> GPUInfo | None:
    """Model by short name (`H100_SXM`), case-insensitive.

    A family name such as `H100` or `L40S` (what `spec.gpuModel` usually holds) resolves to the
    first table row of that family, so `H100` → `H100_SXM` and `A100` → `A100_SXM_80G`.
    """
    key = name.strip().lower()
    table = _table()
    hit = table.by_model.get(key)
    if hit is not None:
        return hit
    for row in table.rows:
        if row.model.lower().startswith(key + "_"):
            return row
    return None


@functools.lru_cache(maxsize=4096)
def lookup(name: str) -> GPUInfo | None:
    """Model by full name first, then by short or family name."""
    return by_full_name(name) or by_short_name(name)


def price_table() -> dict[str, float]:
    """Full NVML name → hourly price: what compaction uses to release the dearest nodes first."""
    return {row.full_name: row.price_per_hour for row in _table().rows}
