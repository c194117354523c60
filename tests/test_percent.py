"""Compute-percent requests: converted with the GPU's capacity in the state, placement, report, autoscale.

Scenarios follow upstream's tests (named in the docstrings): the allocator's resource filter and
booking, the defrag budget's subtraction, the metrics recorder's conversion, with workers and
workloads built as upstream builds them (`compute-percent-request` annotations,
`spec.resources.requests.compute`).
"""

from __future__ import annotations

from datetime import timedelta

from tests.fixtures.engine_builders import (
    GI,
    HOUR,
    NOW,
    build,
    gpu,
    gpunode,
    host,
    node,
    pool,
    worker,
    workload,
)
from tftui.engine.autoscale import external_requests
from tftui.engine.fit import Request, reject_reason
from tftui.engine.placement import apply_placement, place
from tftui.engine.state import Res
from tftui.sources.sim.usage import SimMetrics

TF = "tensor-fusion.ai"


def test_resource_filter_converts_compute_percent() -> None:
    """Upstream TestFilters "ResourceFilter" (a percent request needs that share of each GPU's
    capacity) and TestSubtractGPURequest_ComputePercent (40 % of 100 TFLOPS takes 40)."""
    objs = [
        pool("p"),
        *host("n1", "p", gpus=1, tflops=100, vram="10Gi"),
        worker("w", ["n1-gpu-0"], tflops=50),
    ]
    st = build(objs)
    g = st.gpus["n1-gpu-0"]
    assert reject_reason(g, g.available, Request(vram=2 * GI, compute_percent=40)) is None
    assert reject_reason(g, g.available, Request(vram=2 * GI, compute_percent=60)) == "resource"
    free = build(objs[:-1])
    r = Request(vram=2 * GI, compute_percent=40)
    p = place(free, "p", r)
    avail: dict[str, Res] = {}
    apply_placement(avail, free, p, r)
    assert avail == {"n1-gpu-0": Res(60, 8 * GI)}


def test_percent_workers_book_tflops_of_their_gpu() -> None:
    """The allocator books `trunc(percent × capacity / 100)` on each GPU of the worker."""
    objs = [
        pool("p"),
        *host("n1", "p", gpus=2, tflops="165160m", vram="24Gi"),
        worker("w", ["n1-gpu-0", "n1-gpu-1"], tflops=None, compute_percent=50, vram="4Gi"),
    ]
    st = build(objs)
    w = st.workers["default/w"]
    assert w.percent == 50 and w.request == Res(82, 4 * GI)
    assert st.gpus["n1-gpu-0"].allocated == Res(82, 4 * GI)
    assert st.nodes["n1"].allocated == Res(164, 8 * GI)


def test_percent_workloads_show_the_tflops_of_their_gpus() -> None:
    """A workload asking `compute: 25` shows 25 % of its workers' GPU (not 0 TFLOPS); without
    workers, of its `gpuModel` in the GPU table; without either it stays unknown (0)."""
    res = {"requests": {"compute": "25", "vram": "8Gi"}, "limits": {"compute": "50", "vram": "8Gi"}}
    on_gpu = workload("a", spec={"resources": res})
    for block in on_gpu["spec"]["resources"].values():
        del block["tflops"]
    objs = [
        pool("p"),
        *host("n1", "p", gpus=1),  # A100 312 TFLOPS
        on_gpu,
        worker("a-w", ["n1-gpu-0"], workload="a", tflops=None, compute_percent=25, vram="8Gi"),
    ]
    st = build(objs)
    wv = st.workloads["default/a"]
    assert wv.percent == (25, 50) and wv.request == Res(78, 8 * GI) and wv.limit == Res(156, 8 * GI)
    idle = {
        **on_gpu,
        "metadata": {**on_gpu["metadata"], "name": "b"},
        "spec": {**on_gpu["spec"], "gpuModel": "H100"},
    }
    unknown = {**on_gpu, "metadata": {**on_gpu["metadata"], "name": "c"}}
    st = build([pool("p"), idle, unknown])
    assert st.workloads["default/b"].request.tflops == 247  # 25 % of the H100's 989
    assert st.workloads["default/c"].request.tflops == 0


def test_a_percent_workload_as_upstream_stores_it_reads_as_percent() -> None:
    """Upstream's Go `Resource` always writes `tflops` (a zero Quantity is `"0"`), so a percent
    workload stored by TensorFusion reads `tflops: "0"` beside `compute` (the CRD requires
    `tflops`): that is a percent request, not one of 0 TFLOPS. A non-zero `tflops` still wins."""
    res = {
        "requests": {"tflops": "0", "compute": "25", "vram": "8Gi"},
        "limits": {"tflops": "0", "compute": "50", "vram": "8Gi"},
    }
    both = {
        "requests": {"tflops": "10", "compute": "25", "vram": "8Gi"},
        "limits": {"tflops": "20", "compute": "50", "vram": "8Gi"},
    }
    objs = [
        pool("p"),
        *host("n1", "p", gpus=1),  # A100 312 TFLOPS
        workload("a", spec={"resources": res}),
        worker("a-w", ["n1-gpu-0"], workload="a", tflops=None, compute_percent=25, vram="8Gi"),
        workload("b", spec={"resources": both}),
    ]
    st = build(objs)
    wv = st.workloads["default/a"]
    assert wv.percent == (25, 50) and wv.request == Res(78, 8 * GI) and wv.limit == Res(156, 8 * GI)
    b = st.workloads["default/b"]
    assert b.percent == (None, None) and b.request == Res(10, 8 * GI) and b.limit == Res(20, 8 * GI)


def test_autoscale_starts_from_the_converted_tflops() -> None:
    """The autoscaler's current resources of a percent workload carry its TFLOPS (upstream reads
    the absent TFLOPS field as 0)."""
    res = {"requests": {"compute": "25", "vram": "8Gi"}, "limits": {"compute": "50", "vram": "8Gi"}}
    wl = workload(
        "a",
        spec={
            "resources": res,
            "autoScalingConfig": {
                "autoSetResources": {"enable": True, "targetResource": "all"},
                "externalScaler": {"enable": True, "url": "http://scaler", "initialDelayPeriod": "0s"},
            },
        },
    )
    for block in wl["spec"]["resources"].values():
        del block["tflops"]
    objs = [pool("p"), *host("n1", "p", gpus=1), wl,
            worker("a-w", ["n1-gpu-0"], workload="a", tflops=None, compute_percent=25, vram="8Gi")]  # fmt: skip
    (call,) = external_requests(build(objs), NOW)
    current = call.body["currentResources"]
    assert current["requests"]["tflops"] == "78" and current["limits"]["tflops"] == "156"


def test_usage_rows_carry_converted_requests() -> None:
    """Upstream recorder "Using ComputePercent annotations (auto-migration)": 100 % of an A100 is
    312 TFLOPS, 50 % of a 756 TFLOPS H100 is 378 (the worker-resources table the report reads)."""
    objs = [
        pool("p"),
        node("n1", gpus=2),
        gpunode("n1", "p"),
        gpu("gpu-a100-1", "n1", tflops=312, vram="80Gi", pool="p"),
        gpu("gpu-h100-1", "n1", tflops=756, vram="80Gi", model="NVIDIA H100 PCIe", index=1, pool="p"),
        worker("a100", ["gpu-a100-1"], tflops=None, compute_percent=100, vram="80Gi", created=NOW - 2 * HOUR),
        worker("h100", ["gpu-h100-1"], tflops=None, compute_percent=50, vram="40Gi", created=NOW - 2 * HOUR),
    ]
    for o in objs:
        if o["kind"] == "Pod":
            o["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    sim = SimMetrics(objs, now=NOW, history=timedelta(minutes=5))
    rows = list(sim.rows("tf_worker_resources", NOW - timedelta(minutes=5), NOW))
    got = {r["worker"]: (r["tflops_request"], r["tflops_limit"]) for r in rows}
    assert got == {"a100": (312.0, 312.0), "h100": (378.0, 378.0)}
