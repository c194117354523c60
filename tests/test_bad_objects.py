"""One bad object never stops the loop: the daemon, the console's runtime and the what-if go on.

Each case plants one object a careless or hostile operator could write on a live cluster (which
the API server accepts: the CRD patterns allow `1e999`, RFC 3339 allows year 1) into the embedded
demo and runs `Daemon.run()` — before the fix every one of them raised on the first tick, so no
pool was ever reconciled. Now the bad object's pool (or workload) gets a journal line and a
Warning event naming the object and field, and the other pools are reconciled as usual.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import tftui.runtime.loops as loops
from tftui.daemon import Daemon, DaemonOptions
from tftui.engine.state import ClusterState
from tftui.runtime import whatif
from tftui.runtime.loops import Runtime
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.sources.sim.usage import SimMetrics

JSON = dict[str, Any]
OBJECTS = generate_objects(7, 8, DEFAULT_NOW)
POOLS = sorted(o["metadata"]["name"] for o in OBJECTS if o["kind"] == "GPUPool")


def _first(objs: list[JSON], kind: str, pred: Callable[[JSON], bool] = lambda o: True) -> JSON:
    return next(o for o in objs if o["kind"] == kind and pred(o))


def _pool_of_pod(objs: list[JSON], pod: JSON) -> str:
    return str(pod["metadata"]["annotations"]["tensor-fusion.ai/gpupool"])


def _huge_annotation(objs: list[JSON]) -> tuple[str, str]:
    pod = _first(
        objs, "Pod", lambda o: "tensor-fusion.ai/tflops-request" in (o["metadata"].get("annotations") or {})
    )
    pod["metadata"]["annotations"]["tensor-fusion.ai/tflops-request"] = "1e999"
    return f"GPUPool/{_pool_of_pod(objs, pod)}", "metadata.annotations[tensor-fusion.ai/tflops-request]"


def _cron_zone_directory(objs: list[JSON]) -> tuple[str, str]:
    wl = _first(objs, "TensorFusionWorkload")
    asc = wl["spec"].setdefault("autoScalingConfig", {})
    asc["autoSetResources"] = {"enable": True}
    asc["cronScalingRules"] = [
        {"enable": True, "name": "office", "start": "CRON_TZ=America 0 9 * * *", "end": "0 17 * * *",
         "desiredResources": {"requests": {"tflops": "10", "vram": "1Gi"}, "limits": {"tflops": "10", "vram": "1Gi"}}}
    ]  # fmt: skip
    meta = wl["metadata"]
    return f"TensorFusionWorkload/{meta['namespace']}/{meta['name']}", "provided bad location America"


def _last_defrag(year: int) -> Callable[[list[JSON]], tuple[str, str]]:
    def plant(objs: list[JSON]) -> tuple[str, str]:
        pool = _first(objs, "GPUPool")
        pool.setdefault("status", {})["lastDefragTime"] = f"{year:04d}-01-01T00:00:00Z"
        defrag = (
            pool["spec"]
            .setdefault("nodeManagerConfig", {})
            .setdefault("nodeCompaction", {})
            .setdefault("defrag", {})
        )
        defrag.update(enabled=True, schedule=defrag.get("schedule") or "0 3 * * *", timezone="UTC")
        return f"GPUPool/{pool['metadata']['name']}", "status.lastDefragTime"

    return plant


CASES = {
    "pod-annotation-1e999": _huge_annotation,
    "cron-zone-is-a-directory": _cron_zone_directory,
    "lastDefragTime-year-1": _last_defrag(1),
    "lastDefragTime-year-9999": _last_defrag(9999),
}


def _run_daemon(objs: list[JSON], minutes: int = 3) -> tuple[ActingSimCluster, Daemon]:
    sim = ActingSimCluster(objects=objs, now=DEFAULT_NOW)
    metrics = SimMetrics(sim.snapshot(), seed=7, now=DEFAULT_NOW + timedelta(hours=1))
    opts = DaemonOptions(listen=None, speed=math.inf, stop_at=DEFAULT_NOW + timedelta(minutes=minutes))
    daemon = Daemon(sim, metrics, opts, clock=sim.clock, advance=sim.advance)
    assert daemon.run() == 0
    return sim, daemon


def _warnings(sim: ActingSimCluster, regarding: str) -> list[str]:
    kind, _, name = regarding.partition("/")
    return [
        str(e["note"])
        for e in sim.events()
        if e["type"] == "Warning" and e["regarding"] == {"kind": kind, "name": name}
    ]


@pytest.mark.parametrize("case", list(CASES))
def test_daemon_contains_one_bad_object(case: str) -> None:
    objs = copy.deepcopy(OBJECTS)
    regarding, field = CASES[case](objs)
    sim, daemon = _run_daemon(objs)
    assert daemon.ticks >= 2
    notes = _warnings(sim, regarding)
    assert any(field in n for n in notes), (regarding, [e["note"] for e in sim.events()][-10:])
    journal = [e.message for e in daemon.journal.entries()]
    assert any(field in m for m in journal), journal[-10:]
    # the other pools went on: every pool but a blocked one had its compaction round
    bad_pool = regarding.partition("/")[2] if regarding.startswith("GPUPool/") else None
    rounds = {
        e.pool for e in daemon.journal.entries() if e.kind == "compaction" and e.message.startswith("round:")
    }
    expected = set(POOLS) - ({bad_pool} if case == "pod-annotation-1e999" else set())
    assert expected <= rounds, rounds


def test_a_pool_whose_reconcile_raises_does_not_stop_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a pool's planning raises (here: a stand-in for an engine bug) ends that pool only;
    its message, quoted in the Warning event and the journal, has its credentials masked."""
    real = loops.plan_cluster
    victim = POOLS[0]

    def plan(state: ClusterState, now: Any, *, pools: list[str], **kw: Any) -> Any:
        if pools == [victim]:
            raise ZeroDivisionError("boom in the engine at postgresql://tf:s3cret-pw@greptime:4003/public")
        return real(state, now, pools=pools, **kw)

    monkeypatch.setattr(loops, "plan_cluster", plan)
    sim = ActingSimCluster(objects=copy.deepcopy(OBJECTS), now=DEFAULT_NOW)
    rt = Runtime(sim, clock=sim.clock)
    rt.run_for(timedelta(minutes=12), step=timedelta(minutes=1))  # the console's `--speed` path
    errors = [e for e in rt.journal.entries() if e.pool == victim and not e.ok]
    assert (
        len(errors) == 1 and "ZeroDivisionError: boom in the engine" in errors[0].message
    )  # once, not per tick
    assert any("boom in the engine" in n for n in _warnings(sim, f"GPUPool/{victim}"))
    # the Warning event is written into the cluster and the journal is shown: no credential in either
    assert not any("s3cret-pw" in n for n in _warnings(sim, f"GPUPool/{victim}"))
    assert "s3cret-pw" not in errors[0].message and "greptime:4003" in errors[0].message
    rounds = [e.pool for e in rt.journal.entries() if e.message.startswith("round:")]
    assert set(rounds) == set(POOLS[1:]) and rounds.count("demo-inference") >= 2, rounds  # on their periods
    assert rt.next_reconcile[victim] > DEFAULT_NOW  # retried after its period, not every tick


def test_autoscale_failure_is_journaled_and_compaction_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loops, "plan_autoscale", lambda *a, **k: (_ for _ in ()).throw(KeyError("surprise")))
    _sim, daemon = _run_daemon(copy.deepcopy(OBJECTS))
    errors = [e.message for e in daemon.journal.entries() if not e.ok]
    assert sum("autoscale run failed: KeyError" in m for m in errors) == 1
    rounds = {e.pool for e in daemon.journal.entries() if e.message.startswith("round:")}
    assert rounds == set(POOLS)


def test_autoscale_leaves_the_broken_workload_and_scales_the_others() -> None:
    objs = copy.deepcopy(OBJECTS)
    for o in objs:  # every workload autoscaled, so the others have something to do
        if o["kind"] == "TensorFusionWorkload":
            o["spec"].setdefault("autoScalingConfig", {})["autoSetResources"] = {"enable": True}
    regarding, _field = _cron_zone_directory(objs)
    sim = ActingSimCluster(objects=objs, now=DEFAULT_NOW)
    metrics = SimMetrics(sim.snapshot(), seed=7, now=DEFAULT_NOW + timedelta(hours=1))
    rt = Runtime(sim, clock=sim.clock, metrics=metrics)
    rt.tick_due()
    assert rt.last_autoscale is not None and rt.last_autoscale.result is not None
    recs = rt.last_autoscale.result.workloads
    broken = regarding.partition("/")[2]
    assert recs[broken].reason == "invalid-config" and "provided bad location America" in recs[broken].detail
    assert any(r.would_apply for k, r in recs.items() if k != broken)


def test_what_if_runs_with_a_bad_object() -> None:
    """`simulate` starts from the objects as they are; a bad one is contained like in the daemon."""
    objs = copy.deepcopy(OBJECTS)
    _huge_annotation(objs)
    _last_defrag(1)(objs)
    cfg = whatif.SimConfig(duration=timedelta(hours=1), seed=7, churn=0.0)
    results = whatif.compare(objs, [whatif.parse_policy("configured")], DEFAULT_NOW, cfg)
    assert len(results) == 1
