"""Builders and constants shared by the defrag tests (tests/test_defrag*.py).

Unless a test says otherwise the fixture is upstream's: GPUs of 100 TFLOPS / 10Gi, four per node,
threshold 40, maxDuration 30m, workers 2 h old, each covered by a PDB allowing one disruption. The
schedule `50 11 * * *` (UTC) puts the builders' NOW (12:00) inside the window 11:50–12:20.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.fixtures.engine_builders import HOUR, NOW, build, gpu, gpunode, node, pdb, pool, ts, worker
from tftui.engine.defrag import DefragConfig, plan_defrag, validate_defrag
from tftui.engine.plan import AnnotateNode, DefragResult, EvictPod, LabelNode, Plan
from tftui.model import keys

JSON = dict[str, Any]
MIN = timedelta(minutes=1)
SCHED = "50 11 * * *"
START = datetime(2026, 11, 30, 11, 50, tzinfo=UTC)
DEADLINE = datetime(2026, 11, 30, 12, 20, tzinfo=UTC)


# -- builders ------------------------------------------------------------------------------------


def dpool(name: str = "p", *, status: JSON | None = None, **defrag: Any) -> JSON:
    """A GPUPool with defrag on; keyword arguments override (None removes) defrag fields."""
    cfg: JSON = {
        "enabled": True,
        "schedule": SCHED,
        "timezone": "UTC",
        "maxDuration": "30m",
        "utilizationThresholdPercent": 40,
    }
    cfg.update(defrag)
    cfg = {k: v for k, v in cfg.items() if v is not None}
    return pool(
        name, spec={"nodeManagerConfig": {"nodeCompaction": {"period": "5m", "defrag": cfg}}}, status=status
    )


def machine(
    name: str,
    gpus: int = 4,
    *,
    pool: str | None = "p",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    unschedulable: bool = False,
    k8s: bool = True,
    **gpunode_kw: Any,
) -> list[JSON]:
    """Node (with marker labels/annotations) + GPUNode + `gpus` GPUs of 100 TFLOPS / 10Gi, labelled
    for the pool (`tensor-fusion.ai/gpupool`) as the controller labels them."""
    out = [gpunode(name, pool, **gpunode_kw)]
    if k8s:
        out.append(node(name, gpus=gpus, unschedulable=unschedulable, labels=labels, annotations=annotations))
    out += [gpu(f"{name}-gpu-{i}", name, tflops=100, vram="10Gi", index=i, pool=pool) for i in range(gpus)]
    return out


def wk(
    name: str,
    on: str,
    *gpu_idx: int,
    tflops: float | None = 50,
    vram: str = "1Gi",
    age: timedelta = 2 * HOUR,
    pool: str = "p",
    **kw: Any,
) -> JSON:
    """A worker on GPUs `gpu_idx` (default 0) of node `on`."""
    idx = gpu_idx or (0,)
    return worker(
        name, [f"{on}-gpu-{i}" for i in idx], tflops=tflops, vram=vram, created=NOW - age, pool=pool, **kw
    )


def pdbs(*names: str, allowed: int = 1) -> list[JSON]:
    return [pdb(f"pdb-{n}", n, disruptions_allowed=allowed) for n in names]


def tgt() -> list[JSON]:
    """Target n-tgt: 2 of 4 GPUs used (50 %, above the threshold, so never a candidate itself)."""
    return [*machine("n-tgt"), wk("w-t0", "n-tgt", 0), wk("w-t1", "n-tgt", 1)]


def base(
    *,
    pool_obj: JSON | None = None,
    src: JSON | None = None,
    node_kw: dict[str, Any] | None = None,
    cover: bool = True,
    extra: Sequence[JSON] = (),
) -> list[JSON]:
    """Source n-src (1 of 4 GPUs used: 25 %) with worker `src` (default w-src, PDB-covered) and n-tgt."""
    w = src if src is not None else wk("w-src", "n-src")
    out = [pool_obj or dpool(), *machine("n-src", **(node_kw or {})), w, *tgt(), *extra]
    return out + (pdbs(w["metadata"]["name"]) if cover else [])


def step(
    objs: Iterable[JSON], now: datetime = NOW, pool_name: str = "p", **kw: Any
) -> tuple[Plan, DefragResult]:
    plan = plan_defrag(build(objs), pool_name, now, **kw)
    res = plan.pools[pool_name].defrag
    assert res is not None
    return plan, res


def events(plan: Plan) -> list[tuple[str, str, str]]:
    return [(e.type, e.reason, e.message) for e in plan.events()]


def reasons(plan: Plan) -> list[str]:
    return [e.reason for e in plan.events()]


def evictions(plan: Plan) -> list[str]:
    return [f"{a.namespace}/{a.name}" for a in plan.actions if isinstance(a, EvictPod)]


def skip_of(res: DefragResult, node_name: str) -> str | None:
    found = [s.reason for s in res.skipped if s.node == node_name]
    return found[0] if found else None


def cfg_of(**defrag: Any) -> DefragConfig:
    c = validate_defrag(dpool(**defrag))
    assert isinstance(c, DefragConfig), c
    return c


def source_marks(pool_name: str = "p", since: timedelta = 5 * MIN) -> dict[str, Any]:
    return {
        "labels": {keys.DEFRAG_SOURCE: "true"},
        "annotations": {keys.DEFRAG_SOURCE_POOL: pool_name, keys.DEFRAG_SOURCE_SINCE: ts(ago=since)},
    }


def skip_marks(pool_name: str = "p") -> dict[str, Any]:
    return {
        "labels": {keys.DEFRAG_EVICT_SKIP: "true"},
        "annotations": {
            keys.DEFRAG_EVICT_SKIP_POOL: pool_name,
            keys.DEFRAG_EVICT_SKIP_SINCE: ts(ago=HOUR),
            keys.DEFRAG_EVICT_SKIP_REASON: "evict pod default/x failed: 429",
        },
    }


def clear_skip(n: str) -> list[Any]:
    return [
        LabelNode(n, {keys.DEFRAG_EVICT_SKIP: None}),
        AnnotateNode(
            n,
            {
                keys.DEFRAG_EVICT_SKIP_POOL: None,
                keys.DEFRAG_EVICT_SKIP_SINCE: None,
                keys.DEFRAG_EVICT_SKIP_REASON: None,
            },
        ),
    ]
