"""GPUResourceQuota: usage from the namespace's workers, and requests over quota refused with the reason.

Scenarios follow upstream's quota tests (quota_consolidated_test.go, named in the docstrings) with
the objects built as they build them: one quota `test-quota` in `test-ns` with total requests and
limits of T TFLOPS / V bytes and a worker cap, GPUs of 50 or 100 TFLOPS on one node of `test-pool`,
requests of `tflops, vram (bytes), count`.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.engine_builders import JSON, build, gpu, gpunode, node, pool, worker
from tftui.engine import quota
from tftui.engine.fit import Request
from tftui.engine.placement import place, preview
from tftui.engine.plan import AnnotatePool
from tftui.sources.sim.acting import ActingSimCluster

NS, POOL = "test-ns", "test-pool"
TF = "tensor-fusion.ai"


def create_test_quota(tflops: int, vram: int, workers: int, **single: Any) -> JSON:
    """Upstream createTestQuota: total requests and limits of `tflops`/`vram`, `workers` at most."""
    spec: JSON = {
        "total": {
            "requests": {"tflops": str(tflops), "vram": str(vram)},
            "limits": {"tflops": str(tflops), "vram": str(vram)},
            "maxWorkers": workers,
        }
    }
    if single:
        spec["single"] = single
    return {
        "apiVersion": f"{TF}/v1",
        "kind": "GPUResourceQuota",
        "metadata": {"name": "test-quota", "namespace": NS},
        "spec": spec,
    }


def cluster(q: JSON | None, gpu_tflops: int = 50, gpu_vram: int = 500, *workers: JSON) -> list[JSON]:
    """Upstream createAvailableGPU × 2 on node1 of the test pool, plus the quota and workers."""
    objs = [pool(POOL), node("node1", gpus=2), gpunode("node1", POOL)]
    objs += [
        gpu(f"gpu{i}", "node1", tflops=gpu_tflops, vram=gpu_vram, index=i - 1, pool=POOL) for i in (1, 2)
    ]
    return [*objs, *([q] if q else []), *workers]


def alloc(tflops: int, vram: int, count: int) -> Request:
    """Upstream createAllocRequest: request = limit."""
    return Request(vram=vram, tflops=tflops, count=count, namespace=NS)


def create_worker_pod(name: str, tflops: str, vram: str, gpus: str = "gpu1") -> JSON:
    """Upstream createWorkerPodOnGPU: requests and limits as annotations, gpu-ids set."""
    return worker(name, [gpus], node="node1", namespace=NS, workload="test-workload", pool=POOL,
                  tflops=tflops, vram=vram)  # fmt: skip


@pytest.mark.parametrize(
    ("cfg", "req", "error"),
    [
        ((100, 1000, 10), (30, 300, 2), None),  # allocation within quota
        ((100, 1000, 10), (60, 600, 2), "total.max.tflops.request"),  # allocation exceeds quota: 120 > 100
        ((100, 1000, 10), (10, 100, 10), None),  # exact quota boundary
        ((0, 0, 0), (1, 1, 1), "total.max.tflops.request"),  # zero quota allocation
    ],
)
def test_quota_store_basic_operations_and_boundaries(
    cfg: tuple[int, int, int], req: tuple[int, int, int], error: str | None
) -> None:
    """Upstream "QuotaStore Basic Operations" and "QuotaStore Boundary Conditions"."""
    st = build(cluster(create_test_quota(*cfg), 100, 1000))
    got = quota.check(st, alloc(*req))
    if error is None:
        assert got is None
    else:
        assert got is not None and error in got and got.startswith(f"quota exceeded in namespace {NS} for ")


def test_allocation_and_deallocation_cycle() -> None:
    """Upstream "allocation and deallocation cycle": booking counts request × GPUs and one worker."""
    st = build(cluster(create_test_quota(100, 1000, 10), 100, 1000))
    used = quota.usage_copy(st)
    quota.book(used, st, alloc(30, 300, 2))
    u = used[NS]
    assert (u.req_tflops, u.req_vram, u.workers) == (60, 600, 1)
    assert quota.check(st, alloc(30, 300, 1), used) is None
    assert quota.check(st, alloc(30, 300, 2), used) is not None  # 60 + 60 > 100
    assert quota.quotas(st)[NS].usage.workers == 0  # the state's own usage is unchanged


def test_gpu_allocator_quota_integration() -> None:
    """Upstream "should successfully allocate within quota" and "should reject allocation that
    exceeds quota": placement refuses before filtering, naming the resource."""
    st = build(cluster(create_test_quota(100, 1000, 10), 50, 500))
    assert place(st, POOL, alloc(30, 300, 2)).gpus == ("gpu1", "gpu2")
    st = build(cluster(create_test_quota(100, 1000, 10), 100, 1000))
    p = place(st, POOL, alloc(60, 600, 2))
    assert p.node is None and p.reason is not None
    assert (
        p.reason == f"quota exceeded in namespace {NS} for total.max.tflops.request: requested 120, limit 100"
    )
    assert p.rejected == {"quota": 2}
    pv = preview(st, POOL, alloc(60, 600, 2)).to_json()
    assert {m["reason"] for m in pv["modes"].values()} == {p.reason}
    assert place(st, POOL, Request(vram=600, tflops=60, count=2)).node == "node1"  # no namespace: no quota


def test_quota_reconciliation_from_worker_pods() -> None:
    """Upstream "should reconcile quota usage from existing worker pods": 20 + 30 TFLOPS, 200 + 300
    bytes, 2 workers; pods of other namespaces and pods without GPUs do not count."""
    pods = [
        create_worker_pod("worker1", "20", "200"),
        create_worker_pod("worker2", "30", "300"),
        worker("elsewhere", ["gpu2"], node="node1", namespace="other", pool=POOL, tflops=40, vram=400),
        worker("pending", [], namespace=NS, pool=POOL, tflops=40, vram=400, phase="Pending"),
    ]
    st = build(cluster(create_test_quota(100, 1000, 10), 50, 500, *pods))
    u = quota.quotas(st)[NS].usage
    assert (u.req_tflops, u.req_vram, u.lim_tflops, u.workers) == (50, 500, 50, 2)
    assert quota.check(st, alloc(50, 10, 1)) is None
    assert quota.check(st, alloc(51, 10, 1)) is not None


def test_single_limits_and_worker_cap() -> None:
    """The per-workload limits (maxRequests, maxLimits, maxGPUCount) and the worker cap."""
    single = {
        "maxRequests": {"tflops": "40", "vram": "1000"},
        "maxLimits": {"tflops": "60"},
        "maxGPUCount": 1,
    }
    st = build(cluster(create_test_quota(1000, 100000, 1), 100, 1000, create_worker_pod("w", "1", "1")))
    q = create_test_quota(1000, 100000, 1, **single)
    st = build(cluster(q, 100, 1000))
    assert "single.max.tflops.request: requested 41, limit 40" in (quota.check(st, alloc(41, 10, 1)) or "")
    over_limit = Request(vram=10, tflops=10, namespace=NS, limit_tflops=61)
    assert "single.max.tflops.limit" in (quota.check(st, over_limit) or "")
    assert "single.max.gpuCount.limit: requested 2, limit 1" in (quota.check(st, alloc(1, 1, 2)) or "")
    full = build(cluster(q, 100, 1000, create_worker_pod("w", "1", "1")))
    assert "total.max.workers.limit" in (quota.check(full, alloc(1, 1, 1)) or "")


def test_invalid_quotas_are_not_enforced() -> None:
    """Upstream validateQuotaConfig: limits below requests — the controller skips such a quota."""
    q = create_test_quota(100, 1000, 10)
    q["spec"]["total"]["limits"]["tflops"] = "50"
    st = build(cluster(q, 100, 1000))
    assert (
        quota.quotas(st)[NS].quota.problem == "spec.total.limits.tflops cannot be less than requests.tflops"
    )
    assert quota.check(st, alloc(90, 10, 1)) is None


def test_the_simulated_scheduler_keeps_workers_over_quota_pending() -> None:
    """The embedded cluster's scheduler (what-if runs and the demo) checks the quota per pass: of two
    Pending workers of 30 TFLOPS under a 60 TFLOPS quota already holding 20, one is bound and the
    other stays Unschedulable with the quota's reason."""
    q = create_test_quota(60, 10**12, 10)
    pending = [
        worker(
            f"new-{i}",
            [],
            namespace=NS,
            workload="test-workload",
            pool=POOL,
            tflops=30,
            vram=100,
            phase="Pending",
        )
        for i in (1, 2)
    ]
    objs = cluster(q, 100, 1000, create_worker_pod("worker1", "20", "100"), *pending)
    sim = ActingSimCluster(objects=objs)
    sim.apply(AnnotatePool(POOL, {"touch": "1"}))  # any action runs a scheduling pass
    pods = {o["metadata"]["name"]: o for o in sim.snapshot() if o["kind"] == "Pod"}
    assert pods["new-1"]["spec"].get("nodeName") == "node1"
    assert "nodeName" not in pods["new-2"]["spec"]
    cond = pods["new-2"]["status"]["conditions"][0]
    assert cond["reason"] == "Unschedulable"
    assert cond["message"].endswith(
        f"quota exceeded in namespace {NS} for total.max.tflops.request: requested 30, limit 60"
    )


def test_workers_refused_by_quota_do_not_ask_for_a_node() -> None:
    """A what-if provisions a node for Pending workers; one its quota refused waits for quota, so
    it does not make the pool grow (it would stay Pending on the new node too)."""
    from tests.fixtures.engine_builders import NOW
    from tftui.runtime.whatif import WhatIfCluster

    q = create_test_quota(60, 10**12, 10)
    over = worker(
        "over", [], namespace=NS, workload="test-workload", pool=POOL, tflops=50, vram=100, phase="Pending"
    )
    fits = worker(
        "fits", [], namespace="other", workload="w", pool=POOL, tflops=500, vram=100, phase="Pending"
    )
    sim = WhatIfCluster(
        cluster(q, 100, 1000, create_worker_pod("worker1", "20", "100"), over, fits), NOW, seed=1
    )
    sim.schedule()
    assert sim.pending_pools() == {POOL: {"soft"}}  # only `fits` (too big for any GPU) asks for a node
    over_pod = next(o for o in sim.snapshot() if o["metadata"]["name"] == "over")
    assert over_pod["status"]["conditions"][0]["message"].endswith("limit 60")
