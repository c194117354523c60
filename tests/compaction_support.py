"""Builders shared by the node-compaction tests (tests/test_compaction*.py).

Case fixture (as upstream's): pool `pool-a`, one GPU per node of 100 TFLOPS / 80Gi used by
tensor-fusion, GPUNodes Running and an hour old, no warm/min, period 5m.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from tests.fixtures.engine_builders import A100, NOW, build, gpu, gpunode, node, pool
from tftui.engine.compaction import plan_compaction
from tftui.engine.plan import CompactionResult, Event, Plan, Skip
from tftui.model.quantity import parse_quantity

POOL = "pool-a"
JSON = dict[str, Any]
SEC = timedelta(seconds=1)


# -- builders ------------------------------------------------------------------------------------


def cpool(
    *,
    mode: str = "AutoSelect",
    period: str | None = "5m",
    warm: tuple[Any, Any] | None = None,
    min_: tuple[Any, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> JSON:
    """The scenario pool; `warm`/`min_` are (tflops, vram) quantities."""
    cc: JSON = {}
    if warm is not None:
        cc["warmResources"] = {"tflops": str(warm[0]), "vram": str(warm[1])}
    if min_ is not None:
        cc["minResources"] = {"tflops": str(min_[0]), "vram": str(min_[1])}
    return pool(
        POOL,
        provisioning=mode,
        compaction_period=period,
        annotations=annotations,
        spec={"capacityConfig": cc} if cc else None,
    )


def cnode(
    name: str,
    *,
    tflops: int | str = 100,
    vram: str = "80Gi",
    gpus: int = 1,
    used_by: str = "tensor-fusion",
    model: str = A100[0],
    node_labels: Mapping[str, str] | None = None,
    totals: tuple[str, str] | None = None,
    **gpunode_kw: Any,
) -> list[JSON]:
    """Node + GPUNode (with the `status.total*` the controller writes) + pool-labelled GPUs.

    engine_builders' `host()` leaves both out; upstream compaction reads them.
    """
    total_t, total_v = totals or (
        str(parse_quantity(tflops).value() * gpus),
        str(parse_quantity(vram).value() * gpus),
    )
    status = {"totalTFlops": total_t, "totalVRAM": total_v, **gpunode_kw.pop("status", {})}
    return [
        node(name, gpus=gpus, labels=node_labels),
        gpunode(name, POOL, status=status, **gpunode_kw),
        *(
            gpu(
                f"{name}-gpu-{i}",
                name,
                tflops=tflops,
                vram=vram,
                model=model,
                used_by=used_by,
                pool=POOL,
                index=i,
            )
            for i in range(gpus)
        ),
    ]


def nodes3(**kw: Any) -> list[JSON]:
    return [*cnode("node-1", **kw), *cnode("node-2", **kw), *cnode("node-3", **kw)]


def run(objs: Sequence[JSON], now: datetime = NOW, **kw: Any) -> Plan:
    return plan_compaction(build(objs), POOL, now, **kw)


def result(plan: Plan, pool_name: str = POOL) -> CompactionResult:
    res = plan.pools[pool_name].compaction
    assert res is not None
    return res


def released(plan: Plan, pool_name: str = POOL) -> list[str]:
    return [r.node for r in result(plan, pool_name).released]


def kept(plan: Plan, pool_name: str = POOL) -> dict[str, Skip]:
    return {k.node: k for k in result(plan, pool_name).kept}


def events(plan: Plan) -> list[Event]:
    return plan.events()
