"""Why a worker is pending and the smallest PDB-safe move set that admits it (the console's describe
of a Pending worker and its `tftui.write.admit` action)."""

from __future__ import annotations

from typing import Any

from tests.fixtures.engine_builders import build, host, pdb, pool, template, worker
from tftui.engine.pending import explain
from tftui.ui.render.objects import describe

JSON = dict[str, Any]


def _cluster(extra: list[JSON] | None = None, want: float = 70, **pending_kw: Any) -> list[JSON]:
    """n1: w1 40 of 100 TFLOPS; n2: w2 50 of 100; a Pending worker wants `want`."""
    return [
        template("t", mode="CompactFirst"),
        pool("p", template="t"),
        *host("n1", gpus=1, tflops=100, vram="10Gi"),
        *host("n2", gpus=1, tflops=100, vram="10Gi"),
        worker("w1", ["n1-gpu-0"], tflops=40, vram="1Gi"),
        worker("w2", ["n2-gpu-0"], tflops=50, vram="1Gi"),
        worker("wait", [], tflops=want, vram="1Gi", phase="Pending", **pending_kw),
        *(extra or []),
    ]


def test_fragmentation_and_the_one_move_that_admits() -> None:
    why = explain(build(_cluster()), "default/wait")
    assert why is not None and why.reason == "fragmentation"
    assert why.admission is not None
    assert [(m.pod, m.source, m.target) for m in why.admission.moves] == [("default/w1", "n1", "n2")]
    assert why.admission.node == "n1"


def test_a_pdb_that_allows_no_disruption_is_never_moved() -> None:
    blocked = [pdb("pdb-w1", "w1", disruptions_allowed=0)]
    why = explain(build(_cluster(blocked)), "default/wait")
    assert why is not None and why.admission is not None
    assert [m.pod for m in why.admission.moves] == ["default/w2"]  # w1 stays
    both = [*blocked, pdb("pdb-w2", "w2", disruptions_allowed=0)]
    why = explain(build(_cluster(both)), "default/wait")
    assert why is not None and why.reason == "fragmentation" and why.admission is None


def test_capacity_model_and_cpu_reasons() -> None:
    big = explain(build(_cluster(want=200)), "default/wait")
    assert big is not None and big.reason == "capacity"
    model = explain(build(_cluster(annotations={"tensor-fusion.ai/gpu-model": "H100"})), "default/wait")
    assert model is not None and model.reason == "model"
    objs = _cluster(want=30)
    for o in objs:
        if o["kind"] == "Node":
            o["status"]["allocatable"] = {"cpu": "1", "memory": "8Gi", "pods": "10"}
        if o["kind"] == "Pod":
            o["spec"]["containers"] = [{"name": "w", "resources": {"requests": {"cpu": "1"}}}]
    w = explain(build(objs), "default/wait")
    assert w is not None and w.reason == "cpu" and "cpu=2" in w.detail


def test_a_running_worker_has_no_explanation_and_describe_shows_the_pending_one() -> None:
    st = build(_cluster())
    assert explain(st, "default/w1") is None
    text = describe(st, "Pod", "default/wait") or ""
    assert "pending:" in text and "reason: fragmentation" in text and "default/w1" in text
    assert "pending:" not in (describe(st, "Pod", "default/w1") or "")
