"""The usage join derived from the last one (`UsageIndex.build(..., previous=...)`) equals a full
join after every kind of change, and keeps the entries of what did not change (the same objects)."""

from __future__ import annotations

import copy
import random

from tests.test_refresh_reuse import Objects
from tests.test_state_incremental import _mutations
from tftui.engine.state import ClusterState
from tftui.engine.usage import UsageIndex
from tftui.model.usage import GPUUsage, WorkerUsage
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.ui.load.data import StateReader


def samples(
    state: ClusterState, rng: random.Random
) -> tuple[dict[str, GPUUsage], dict[tuple[str, str], WorkerUsage]]:
    gpus = {
        g.name: GPUUsage(
            g.name, g.node or "", rng.choice([None, 10.0, 55.5]), rng.choice([None, 2e9]), DEFAULT_NOW
        )
        for g in list(state.gpus.values())[::3]
    }
    workers = {
        (w.namespace, w.name): WorkerUsage(
            w.namespace, w.name, w.workload or "", 50.0, rng.choice([None, 3.5]), 1e9, DEFAULT_NOW
        )
        for w in list(state.workers.values())[::2]
    }
    workers[("default", "cuda-job")] = WorkerUsage("default", "cuda-job", "", 50.0, 1.0, 1e9, DEFAULT_NOW)
    return gpus, workers


def assert_equal(inc: UsageIndex, full: UsageIndex) -> None:
    for name in ("gpus", "nodes", "pools", "workers", "workloads"):
        a, b = getattr(inc, name), getattr(full, name)
        assert list(a) == list(b), name
        assert a == b, name


def test_a_derived_join_equals_a_full_one_after_every_change() -> None:
    objs = generate_objects(4, 40, DEFAULT_NOW)
    cluster = Objects(objs)
    reader = StateReader()
    _, state = reader.read(cluster)
    gpu_usage, worker_usage = samples(state, random.Random(1))
    index = UsageIndex.build(state, gpu_usage, worker_usage)
    pods = [i for i, o in enumerate(objs) if o["kind"] == "Pod"]
    objs[pods[3]] = ended = copy.deepcopy(objs[pods[3]])
    ended["status"]["phase"] = "Succeeded"
    changes = ["worker ended", *_mutations(objs, random.Random(2))]
    for what in changes:
        prev_state, prev = state, index
        _, state = reader.read(cluster)
        index = UsageIndex.build(state, gpu_usage, worker_usage, (prev_state, prev))
        assert_equal(index, UsageIndex.build(state, gpu_usage, worker_usage))
        kept = [
            n
            for n, g in state.gpus.items()
            if n in prev_state.gpus and prev_state.gpus[n].capacity.tflops == g.capacity.tflops
        ]
        assert kept and all(index.gpus[n] is prev.gpus[n] for n in kept), what
        same_nodes = [n for n, v in state.nodes.items() if prev_state.nodes.get(n) is v]
        assert all(index.nodes[n] is prev.nodes[n] for n in same_nodes), what
    assert len(changes) == 11


def test_a_new_worker_with_a_sample_gets_it() -> None:
    """Samples equal to the last ones may hold a worker the last state did not have."""
    objs = generate_objects(2, 10, DEFAULT_NOW)
    cluster = Objects(objs)
    reader = StateReader()
    _, first = reader.read(cluster)
    pod = next(o for o in objs if o["kind"] == "Pod" and o["metadata"]["name"] in str(list(first.workers)))
    gone = [o for o in objs if o is not pod]
    cluster.objects = gone
    _, without = reader.read(cluster)
    key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    assert key not in without.workers
    worker_usage = {
        (pod["metadata"]["namespace"], pod["metadata"]["name"]): WorkerUsage(
            pod["metadata"]["namespace"], pod["metadata"]["name"], "", 50.0, 7.0, 1e9, DEFAULT_NOW
        )
    }
    prev = UsageIndex.build(without, {}, worker_usage)
    cluster.objects = objs
    _, back = reader.read(cluster)
    index = UsageIndex.build(back, {}, worker_usage, (without, prev))
    assert index.workers[key].res.tflops == 7.0 and index.workers[key].has_data
    assert_equal(index, UsageIndex.build(back, {}, worker_usage))
