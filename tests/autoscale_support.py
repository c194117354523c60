"""Helpers of the workload autoscaler tests (tests/test_autoscale*.py): usage rows, histories and
resources, and a one-workload cluster with its autoscaler state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from tests.fixtures.engine_builders import NOW, build, host, pool, worker, workload
from tftui.engine.autoscale import AutoConfig, AutoscaleState, Estimates, Resources, WorkloadHistory, estimate
from tftui.model.quantity import parse_quantity

MIN = timedelta(minutes=1)
START = NOW - timedelta(hours=2)
TFK, TFL, VK, VL = (
    f"tensor-fusion.ai/{k}" for k in ("tflops-request", "tflops-limit", "vram-request", "vram-limit")
)


def rows(
    series: Iterable[tuple[float, float]],
    *,
    pod: str = "w1",
    wl: str = "w",
    ns: str = "default",
    start: datetime = START,
) -> list[dict[str, Any]]:
    """One row per minute: (TFLOPS, VRAM bytes)."""
    return [
        {
            "namespace": ns,
            "workload": wl,
            "pod_name": pod,
            "worker": f"uid-{pod}",
            "uuid": "g",
            "compute_tflops": t,
            "compute_percentage": 0.0,
            "memory_bytes": m,
            "ts": start + i * MIN,
        }
        for i, (t, m) in enumerate(series)
    ]


def history(*row_sets: list[dict[str, Any]], period: timedelta = timedelta(hours=2)) -> WorkloadHistory:
    ast = AutoscaleState()
    ast.periods["default/w"] = period
    merged = sorted((r for rs in row_sets for r in rs), key=lambda r: r["ts"])
    ast.add_samples(merged)
    return ast.workloads["default/w"]


def R(tq: Any, tl: Any, vq: Any, vl: Any) -> Resources:
    return Resources(*(parse_quantity(str(x)) for x in (tq, tl, vq, vl)))


CFG = AutoConfig.parse({"enable": True})


def est_of(series: Iterable[tuple[float, float]]) -> Estimates:
    return estimate(history(rows(series)), CFG)


def asr(**fields: Any) -> dict[str, Any]:
    return {"autoScalingConfig": {"autoSetResources": fields}}


def cluster(
    *,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    workers: int = 1,
    worker_ann: dict[str, str] | None = None,
    tflops: Any = 10,
    vram: Any = "8Gi",
    tflops_limit: Any = 20,
    vram_limit: Any = "16Gi",
    extra: Iterable[dict[str, Any]] = (),
    pool_template: str | None = None,
    labels: dict[str, str] | None = None,
    gpu_tflops: int = 1000,
) -> list[dict[str, Any]]:
    wl = workload(
        "w",
        replicas=workers,
        tflops=tflops,
        vram=vram,
        tflops_limit=tflops_limit,
        vram_limit=vram_limit,
        spec=spec,
    )
    if status:
        wl["status"].update(status)
    ws = [
        worker(
            f"w{i}",
            [f"n1-gpu-{i - 1}"],
            workload="w",
            tflops=tflops,
            vram=vram,
            tflops_limit=tflops_limit,
            vram_limit=vram_limit,
            annotations=worker_ann,
            labels=labels,
        )
        for i in range(1, workers + 1)
    ]
    return [
        pool(template=pool_template),
        *host("n1", gpus=4, tflops=gpu_tflops, vram="1000Gi"),
        wl,
        *ws,
        *extra,
    ]


def astate_for(
    objs: list[dict[str, Any]], series: Sequence[tuple[float, float]], *, start: datetime = START
) -> AutoscaleState:
    ast = AutoscaleState()
    ast.configure(build(objs))
    ast.add_samples(rows(series, start=start))
    return ast
