"""What the demo-cluster tests (tests/test_sim*.py) share: an independent quantity parser, the joins
the console makes done by hand (`Index`), and the module fixtures `objs` (the default demo's objects)
and `ix` (their Index).
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects

TF = "tensor-fusion.ai"
NOW = DEFAULT_NOW
Obj = dict[str, Any]

_SUFFIX: dict[str, Decimal] = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(1000),
    "Ki": Decimal(1 << 10),
    "Mi": Decimal(1 << 20),
    "Gi": Decimal(1 << 30),
    "Ti": Decimal(1 << 40),
}


def q(value: str) -> Decimal:
    """Independent quantity parser for the suffixes the demo may use."""
    m = re.fullmatch(r"(-?\d+)(m|k|Ki|Mi|Gi|Ti)?", value)
    assert m, f"unexpected quantity {value!r}"
    return Decimal(m.group(1)) * _SUFFIX[m.group(2) or ""]


def ts(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


ISOLATION = "demo-isolation"  # the pool with hard, shared and partitioned workers (not scaled by `nodes`)


class Index:
    """The joins the console makes, done by hand."""

    def __init__(self, objs: list[Obj]) -> None:
        self.objs = objs
        self.kind: dict[str, list[Obj]] = defaultdict(list)
        for o in objs:
            self.kind[o["kind"]].append(o)
        self.pools = {p["metadata"]["name"]: p for p in self.kind["GPUPool"]}
        self.nodes = {n["metadata"]["name"]: n for n in self.kind["Node"]}
        self.gpunodes = {n["metadata"]["name"]: n for n in self.kind["GPUNode"]}
        self.gpus = {g["metadata"]["name"]: g for g in self.kind["GPU"]}
        self.workers = [
            p for p in self.kind["Pod"] if p["metadata"].get("labels", {}).get(f"{TF}/component") == "worker"
        ]
        self.native = [
            p for p in self.kind["Pod"] if f"{TF}/component" not in p["metadata"].get("labels", {})
        ]
        self.workloads = {
            (w["metadata"]["namespace"], w["metadata"]["name"]): w for w in self.kind["TensorFusionWorkload"]
        }
        self.gpus_of_node: dict[str, list[Obj]] = defaultdict(list)
        for g in self.kind["GPU"]:
            self.gpus_of_node[g["status"]["nodeSelector"]["kubernetes.io/hostname"]].append(g)
        self.workers_of_gpu: dict[str, list[Obj]] = defaultdict(list)
        self.workers_of_node: dict[str, list[Obj]] = defaultdict(list)
        for p in self.workers:
            self.workers_of_node[p["spec"]["nodeName"]].append(p)
            for gid in p["metadata"]["annotations"][f"{TF}/gpu-ids"].split(","):
                self.workers_of_gpu[gid].append(p)

    def pool_of_node(self, node: str) -> str:
        return self.gpunodes[node]["metadata"]["labels"][f"{TF}/managed-by"]


@pytest.fixture(scope="module")
def objs() -> list[Obj]:
    return generate_objects()


@pytest.fixture(scope="module")
def ix(objs: list[Obj]) -> Index:
    return Index(objs)
