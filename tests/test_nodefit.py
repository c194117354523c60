"""kube-scheduler's node fit in placement: CPU, memory and pod slots from Node allocatable minus the
requests of the pods on the node; missing allocatable is no limit."""

from __future__ import annotations

from typing import Any

from tests.fixtures.engine_builders import NOW, build, host, pool, worker
from tftui.engine.fit import Request
from tftui.engine.nodefit import node_fit, pod_requests
from tftui.engine.placement import place
from tftui.runtime.whatif import WhatIfCluster

JSON = dict[str, Any]


def _allocatable(objs: list[JSON], node: str, cpu: str, memory: str = "64Gi", pods: str = "110") -> None:
    for o in objs:
        if o["kind"] == "Node" and o["metadata"]["name"] == node:
            o["status"]["allocatable"] = {"cpu": cpu, "memory": memory, "pods": pods}


def _with_requests(pod: JSON, cpu: str, memory: str) -> JSON:
    pod["spec"]["containers"] = [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    return pod


def test_pod_requests_sum_containers_and_take_the_larger_init() -> None:
    pod = _with_requests(worker("w", ["a-gpu-0"]), "1500m", "2Gi")
    pod["spec"]["containers"].append({"name": "side", "resources": {"requests": {"cpu": "500m"}}})
    assert pod_requests(pod).cpu == 2000.0
    pod["spec"]["initContainers"] = [
        {"name": "init", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}
    ]
    got = pod_requests(pod)
    assert (got.cpu, got.memory) == (3000.0, 2 * 1024**3)


def test_a_node_without_free_cpu_is_refused_with_the_reason_code() -> None:
    objs = [pool("p"), *host("a", gpus=1), *host("b", gpus=1)]
    _allocatable(objs, "a", "4")
    _allocatable(objs, "b", "4")
    # a already runs a CPU-heavy worker (3 of 4 CPUs requested) on a GPU with room left
    objs.append(_with_requests(worker("busy", ["a-gpu-0"], tflops=10, vram="1Gi"), "3", "1Gi"))
    st = build(objs)
    req = Request(vram=1024**3, tflops=10)
    want = pod_requests(_with_requests(worker("new", []), "2", "1Gi"))
    # CompactFirst would pick a (it is used); without CPU it must go to b
    assert place(st, "p", req, mode="CompactFirst").node == "a"
    got = place(st, "p", req, mode="CompactFirst", pod=want)
    assert got.node == "b"
    assert got.rejected.get("cpu") == 1
    _allocatable(objs, "b", "1")
    st = build(objs)
    none = place(st, "p", req, mode="CompactFirst", pod=want)
    assert none.node is None
    assert none.rejected == {"cpu": 2}
    assert "without room for the pod (cpu)" in (none.reason or "")


def test_memory_and_pod_slots_refuse_too() -> None:
    objs = [pool("p"), *host("a", gpus=1)]
    _allocatable(objs, "a", "8", memory="2Gi", pods="1")
    st = build(objs)
    fit = node_fit(st)
    assert fit.refuse("a", pod_requests(_with_requests(worker("x", []), "1", "3Gi"))) == "memory"
    objs.append(_with_requests(worker("w", ["a-gpu-0"]), "1", "1Gi"))
    st = build(objs)
    assert node_fit(st).refuse("a", pod_requests(_with_requests(worker("x", []), "1", "1Gi"))) == "pods"


def test_missing_allocatable_is_no_limit() -> None:
    objs = [pool("p"), *host("a", gpus=1)]  # the builder's Node has capacity but no allocatable
    objs.append(_with_requests(worker("w", ["a-gpu-0"]), "64", "512Gi"))
    st = build(objs)
    fit = node_fit(st)
    assert fit.free("a") == (None, None, None)
    big = pod_requests(_with_requests(worker("x", []), "1000", "4Ti"))
    assert fit.refuse("a", big) is None
    assert place(st, "p", Request(vram=1024**3, tflops=1), pod=big).node == "a"


def test_node_affinity_filters_nodes() -> None:
    objs = [
        pool("p"),
        *host("a", gpus=1, node_labels={"zone": "x"}),
        *host("b", gpus=1, node_labels={"zone": "y"}),
    ]
    st = build(objs)
    pod = worker("w", [])
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["y"]}]}
                ]
            }
        }
    }
    got = place(st, "p", Request(vram=1024**3, tflops=1), mode="CompactFirst", pod=pod_requests(pod))
    assert got.node == "b" and got.rejected == {"node-affinity": 1}


def test_the_simulated_scheduler_binds_only_where_cpu_is_free() -> None:
    objs = [pool("p"), *host("a", gpus=2), *host("b", gpus=2)]
    _allocatable(objs, "a", "2")
    _allocatable(objs, "b", "2")
    for i in range(3):  # three Pending workers of 1 CPU each: two fit on one node, the third cannot
        objs.append(_with_requests(worker(f"w{i}", [], tflops=1, phase="Pending"), "1", "1Gi"))
    sim = WhatIfCluster(build(objs).snapshot.objects, NOW, seed=1)
    sim.schedule()  # the simulated scheduler binds what fits
    bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in sim.snapshot() if p["kind"] == "Pod"}
    per_node: dict[str | None, int] = {}
    for n in bound.values():
        per_node[n] = per_node.get(n, 0) + 1
    assert per_node == {"a": 2, "b": 1} or per_node == {"a": 1, "b": 2}


def test_pod_requests_follow_a_replaced_spec_part_and_keep_through_a_binding() -> None:
    """Requests are remembered by the identity of the spec parts they are read from: a binding
    (nodeName set in place) keeps them, a new containers list, selector or affinity is read again."""
    pod: JSON = {"spec": {"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}
    first = pod_requests(pod)
    assert (first.cpu, first.memory) == (1000.0, float(1 << 30))
    pod["spec"]["nodeName"] = "gpu-1"
    assert pod_requests(pod) is first
    pod["spec"]["containers"] = [{"resources": {"requests": {"cpu": "2", "memory": "2Gi"}}}]
    again = pod_requests(pod)
    assert (again.cpu, again.memory) == (2000.0, float(2 << 30))
    pod["spec"]["nodeSelector"] = {"zone": "a"}
    assert pod_requests(pod).node_selector == (("zone", "a"),)
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}  # fmt: skip
    assert len(pod_requests(pod).affinity) == 1
    assert pod_requests({"spec": "not an object"}).cpu == 0.0
