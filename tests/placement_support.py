"""Builders shared by the placement tests (tests/test_placement*.py): GPUs, nodes and requests in pool
`pool-a`."""

from __future__ import annotations

from typing import Any

from tests.fixtures.engine_builders import GI, gpu, gpunode, node, worker
from tftui.engine.fit import Request

P = "pool-a"
JSON = dict[str, Any]


def used_gpu(
    name: str, node_name: str, cap_t: float, cap_gi: float, used_t: float, used_gi: float
) -> list[JSON]:
    """A GPU with capacity cap and, if anything is used, one worker holding `used` of it."""
    objs = [gpu(name, node_name, tflops=cap_t, vram=f"{cap_gi}Gi")]
    if used_t or used_gi:
        objs.append(worker(f"w-{name}", [name], node=node_name, pool=P, tflops=used_t, vram=f"{used_gi}Gi"))
    return objs


def k8s(name: str) -> list[JSON]:
    return [node(name), gpunode(name, P)]


def small_req(count: int = 1) -> Request:
    return Request(vram=1 * GI, tflops=1, count=count)
