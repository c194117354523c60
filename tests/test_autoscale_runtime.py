"""The runtime's autoscale loop on the embedded cluster, live-cluster manual compaction, the replay.

Usage comes from `SimMetrics` generated for an hour past the demo's clock, so the runtime can move
the clock and load new rows incrementally.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.autoscale_replay import replay
from tests.test_sim_acting import check_consistent, objs_of
from tftui.engine.autoscale import with_resource_update
from tftui.engine.plan import AnnotatePod, AnnotatePool, Event, PatchWorkloadStatus, rfc3339
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.runtime.journal import JournalEntry
from tftui.runtime.loops import DEFAULT_AUTOSCALE_INTERVAL, Runtime
from tftui.sources.ports import ActionError, MetricsTable, SourceError
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW
from tftui.sources.sim.usage import SimMetrics

DEV = "demo-dev"


@pytest.fixture(autouse=True)
def _whole_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each load's raw rows in one call, so a test can read the windows loaded from `Recording`
    (the reads in chunks are tested in test_autoscale_long_history.py)."""
    monkeypatch.setattr("tftui.runtime.history.RAW_CHUNK", timedelta(days=31))


class Recording:
    """A metrics port that records `rows` calls and can be made unreachable."""

    def __init__(self, inner: SimMetrics) -> None:
        self.inner = inner
        self.calls: list[tuple[datetime, datetime]] = []
        self.down = False

    def latest_gpu_usage(self, now: datetime, lookback: timedelta = timedelta(minutes=5)) -> Any:
        return self.inner.latest_gpu_usage(now, lookback)

    def latest_worker_usage(self, now: datetime, lookback: timedelta = timedelta(minutes=5)) -> Any:
        return self.inner.latest_worker_usage(now, lookback)

    def rows(self, table: MetricsTable, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        if self.down:
            raise SourceError("greptime: connection refused")
        self.calls.append((start, end))
        return self.inner.rows(table, start, end)


def demo(nodes: int = 12) -> tuple[ActingSimCluster, Recording]:
    sim = ActingSimCluster(nodes=nodes)
    metrics = Recording(SimMetrics(sim.snapshot(), sim.seed, now=sim.now() + timedelta(hours=1)))
    return sim, metrics


def test_autoscale_loop_applies_and_keeps_the_cluster_consistent() -> None:
    sim, metrics = demo()
    before = ClusterState.build(sim.snapshot())
    rt = Runtime(sim, clock=sim.clock, metrics=metrics)
    assert rt.autoscale_due()
    plan = rt.tick_due()
    assert plan is not None
    # history once, from the longest historyDataPeriod (default 2h)
    assert metrics.calls == [(DEFAULT_NOW - timedelta(hours=2), DEFAULT_NOW)]
    ap = rt.last_autoscale
    assert ap is not None and ap.result is not None
    applied = [k for k, r in ap.result.workloads.items() if r.would_apply]
    assert applied, "the demo has enabled workloads with history to act on"
    assert all(ap.result.workloads[k].enabled for k in applied)
    pods = [a for a in plan.actions if isinstance(a, AnnotatePod)]
    status = [a for a in plan.actions if isinstance(a, PatchWorkloadStatus)]
    assert pods and {f"{s.namespace}/{s.name}" for s in status} >= set(applied)
    assert all(r.ok for r in rt.last_results)
    after = check_consistent(sim)  # GPU, node and pool statuses follow the new requests
    for a in pods:
        w = after.workers[f"{a.namespace}/{a.name}"]
        ann = w.obj["metadata"]["annotations"]
        assert all(ann[k] == v for k, v in a.annotations.items())
    for key in applied:
        rec = ap.result.workloads[key].recommendation
        wl = objs_of(sim, "TensorFusionWorkload")[key]
        assert wl["status"]["recommendation"] == rec.to_json()  # type: ignore[union-attr]
    freed = sum(g.available.tflops for g in after.gpus.values()) - sum(
        g.available.tflops for g in before.gpus.values()
    )
    assert freed != 0
    reasons = {e["reason"] for e in sim.events()}
    assert reasons & {"ResourceScaledUp", "ResourceScaledDown"}
    lines = [e.message for e in rt.journal.entries() if e.message.startswith("autoscale ")]
    assert len(lines) == len(applied)
    # next run: only the new interval is loaded, nothing is repeated
    assert rt.next_autoscale == DEFAULT_NOW + DEFAULT_AUTOSCALE_INTERVAL
    sim.advance(DEFAULT_AUTOSCALE_INTERVAL)
    plan2 = rt.tick_due()
    assert metrics.calls[1] == (DEFAULT_NOW, DEFAULT_NOW + DEFAULT_AUTOSCALE_INTERVAL)
    assert plan2 is not None
    assert not [a for a in plan2.actions if isinstance(a, PatchWorkloadStatus | Event) and a in plan.actions]


def test_a_restarted_runtime_rebuilds_from_the_metrics_store() -> None:
    sim, metrics = demo()
    first = Runtime(sim, clock=sim.clock, metrics=metrics)
    first.autoscale_tick()
    sim.advance(timedelta(minutes=5))
    again = Runtime(sim, clock=sim.clock, metrics=metrics)
    again.autoscale_tick()
    start, end = metrics.calls[-1]
    assert end - start == timedelta(hours=2)  # a full history load, nothing from local files
    assert again.autoscale_state.workloads.keys() == first.autoscale_state.workloads.keys()


def test_metrics_store_down_pauses_autoscale_but_not_compaction() -> None:
    sim, metrics = demo()
    metrics.down = True
    rt = Runtime(sim, clock=sim.clock, metrics=metrics)
    plan = rt.tick_due()
    assert plan is not None and plan.pools  # compaction and defrag ran
    assert rt.autoscale_paused is not None and "connection refused" in rt.autoscale_paused
    assert not any(isinstance(a, AnnotatePod | PatchWorkloadStatus) for a in plan.actions)
    errors = [e for e in rt.journal.entries() if e.kind == "error"]
    assert len(errors) == 1 and "autoscale paused" in errors[0].message
    sim.advance(DEFAULT_AUTOSCALE_INTERVAL)
    rt.tick_due()
    assert len([e for e in rt.journal.entries() if e.kind == "error"]) == 1  # said once
    metrics.down = False
    sim.advance(DEFAULT_AUTOSCALE_INTERVAL)
    rt.tick_due()
    assert rt.autoscale_paused is None
    assert metrics.calls[0][1] == DEFAULT_NOW + 2 * DEFAULT_AUTOSCALE_INTERVAL
    assert any("autoscale resumed" in e.message for e in rt.journal.entries())


def test_without_metrics_there_is_no_autoscale() -> None:
    sim = ActingSimCluster(nodes=12)
    rt = Runtime(sim, clock=sim.clock)
    assert not rt.autoscale_due()
    with pytest.raises(RuntimeError):
        rt.autoscale_tick()


def test_dry_run_autoscale_changes_nothing() -> None:
    sim, metrics = demo()
    gen = sim.generation
    rt = Runtime(sim, clock=sim.clock, metrics=metrics, dry_run=True)
    rt.autoscale_tick()
    sim.snapshot()
    assert sim.generation == gen
    assert any(e.message.startswith("dry-run: annotate Pod") for e in rt.journal.entries())


def test_run_for_paces_autoscale() -> None:
    sim, metrics = demo()
    rt = Runtime(sim, clock=sim.clock, metrics=metrics, autoscale_interval=timedelta(minutes=1))
    rt.run_for(timedelta(minutes=5), step=timedelta(minutes=5))
    assert [c[1] for c in metrics.calls] == [DEFAULT_NOW + timedelta(minutes=m) for m in range(6)]
    check_consistent(sim)


# -- manual compaction on a live cluster (C5) -----------------------------------------------------------


def test_manual_compaction_live_returns_the_forced_plan_for_display() -> None:
    sim = ActingSimCluster()
    rt = Runtime(sim, clock=sim.clock, embedded=False)
    plan = rt.manual_compaction(DEV)
    assert plan.actions == [AnnotatePool(DEV, {keys.MANUAL_COMPACTION: rfc3339(DEFAULT_NOW)})]
    released = [r.node for r in plan.pools[DEV].compaction.released]  # type: ignore[union-attr]
    assert released == ["dev-4090-03", "dev-4090-04"]
    assert not any(c["metadata"].get("deletionTimestamp") for c in objs_of(sim, "GPUNodeClaim").values())
    assert objs_of(sim, "GPUPool")[DEV]["metadata"]["annotations"][keys.MANUAL_COMPACTION] == (
        "2026-11-30T12:00:00Z"
    )
    assert rt.last_compaction == {}


def test_manual_compaction_through_the_api_server(tmp_path: Path) -> None:
    from tests.kubeapi import KubeApiServer, write_kubeconfig
    from tftui.sources.kube import KubeCluster
    from tftui.sources.sim.cluster import generate_objects

    srv = KubeApiServer(bookmark_interval=0.2).start()
    srv.seed(generate_objects())
    try:
        kube = KubeCluster(kubeconfig=str(write_kubeconfig(tmp_path / "kc", srv.url)), backoff=0.01)
        try:
            kube.wait_synced(10)
            rt = Runtime(kube, clock=lambda: DEFAULT_NOW)
            assert rt.embedded is False
            plan = rt.manual_compaction(DEV)
            assert len(plan.actions) == 1 and all(r.ok for r in rt.last_results)
            pool: Any = kube.custom.get_cluster_custom_object("tensor-fusion.ai", "v1", "gpupools", DEV)
            assert pool["metadata"]["annotations"][keys.MANUAL_COMPACTION] == rfc3339(DEFAULT_NOW)
            claims: Any = kube.custom.list_cluster_custom_object("tensor-fusion.ai", "v1", "gpunodeclaims")
            assert not any(c["metadata"].get("deletionTimestamp") for c in claims["items"])
            # and the workload status subresource takes autoscale's patch
            wl = next(o for o in generate_objects() if o["kind"] == "TensorFusionWorkload")
            ns, name = wl["metadata"]["namespace"], wl["metadata"]["name"]
            rec = {
                "requests": {"tflops": "7", "compute": "0", "vram": "1Gi"},
                "limits": {"tflops": "14", "compute": "0", "vram": "2Gi"},
            }
            kube.apply(PatchWorkloadStatus(ns, name, {"recommendation": rec}))
            got: Any = kube.custom.get_namespaced_custom_object(
                "tensor-fusion.ai", "v1", ns, "tensorfusionworkloads", name
            )
            assert got["status"]["recommendation"] == rec
            # the CRD requires both halves, each with tflops and vram: a real API server refuses less
            with pytest.raises(ActionError, match=r"status\.recommendation: Invalid value: 'limits'"):
                kube.apply(PatchWorkloadStatus(ns, name, {"recommendation": {"limits": None}}))
        finally:
            kube.close()
    finally:
        srv.stop()


# -- replay ----------------------------------------------------------------------------------------------


def test_replay_direction_on_a_small_demo() -> None:
    """Autoscaling lowers the over-request; turning it on everywhere lowers it further, at the price
    of more minutes above the request."""
    configured = replay(nodes=10, hours=12, interval=timedelta(minutes=30))
    everywhere = replay(nodes=10, hours=12, interval=timedelta(minutes=30), everywhere=True)
    assert 0 < configured.enabled < everywhere.enabled == everywhere.workloads
    tb, ta = configured.tflops_hours
    assert ta < tb and configured.changes > 0
    eb, ea = everywhere.tflops_hours
    assert eb == tb and ea < ta
    assert everywhere.vram_gib_hours[1] < everywhere.vram_gib_hours[0]
    assert everywhere.throttle_minutes[0] == configured.throttle_minutes[0]
    assert everywhere.throttle_minutes[1] >= configured.throttle_minutes[1]


# -- tftui plan ------------------------------------------------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    from tftui.cli import main

    assert main(list(args)) == 0
    return capsys.readouterr().out


def test_plan_gains_an_autoscale_section(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("plan", "--demo", "--nodes", "12", "--now", "2026-11-30T12:00:00Z", "--json")
    a, b = run_cli(capsys, *args), run_cli(capsys, *args)
    assert a == b
    doc = json.loads(a)
    assert list(doc) == ["now", "pools", "actions", "autoscale"]
    auto = doc["autoscale"]
    applying = sorted(k for k, v in auto.items() if v["wouldApply"])
    assert applying and all(auto[k]["enabled"] for k in applying)
    assert any(v["reason"] == "disabled" and v["recommendation"] for v in auto.values())  # A2
    status = sorted(
        f"{x['namespace']}/{x['name']}"
        for x in doc["actions"]
        if x["kind"] == "patch-workload-status" and "recommendation" in x["fields"]
    )
    assert status == applying
    assert any(x["kind"] == "annotate-pod" for x in doc["actions"])
    # the pools' part is what it was without autoscale
    bare = json.loads(run_cli(capsys, *args, "--no-autoscale"))
    assert bare["pools"] == doc["pools"] and bare["autoscaleSkipped"] == "--no-autoscale"
    assert doc["actions"][: len(bare["actions"])] == bare["actions"]
    text = run_cli(capsys, "plan", "--demo", "--nodes", "12", "--now", "2026-11-30T12:00:00Z")
    assert "== autoscale" in text and f"{applying[0]}  autoscale on" in text and "would apply" in text


def test_plan_without_metrics_says_autoscale_was_skipped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tftui.sources.sim.cluster import generate_objects

    monkeypatch.delenv("TFTUI_METRICS_DSN", raising=False)
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": generate_objects(nodes=12)}))
    doc = json.loads(run_cli(capsys, "plan", "--from", str(dump), "--now", "2026-11-30T12:00:00Z", "--json"))
    assert doc["autoscale"] == {} and doc["autoscaleSkipped"].startswith("no metrics source")
    text = run_cli(capsys, "plan", "--from", str(dump), "--now", "2026-11-30T12:00:00Z")
    assert "== autoscale\nskipped: no metrics source" in text


def test_dry_run_does_not_repeat_itself() -> None:
    sim, metrics = demo()
    rt = Runtime(sim, clock=sim.clock, metrics=metrics, dry_run=True)
    rt.autoscale_tick()
    first = len(rt.journal)
    sim.advance(DEFAULT_AUTOSCALE_INTERVAL)
    rt.autoscale_tick()
    repeated = [e.message for e in rt.journal.entries()[first:] if e.message.startswith("dry-run:")]
    assert len(repeated) < first / 4


def test_recommend_text_shows_vram_in_gi_and_json_keeps_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("recommend", "--demo", "--nodes", "12", "--now", "2026-11-30T12:00:00Z")
    text = run_cli(capsys, *args)
    vram = [ln for ln in text.splitlines() if ln.strip().startswith("VRAM ")]
    assert vram
    for ln in vram:
        reqlim = ln.split()[2]  # "16Gi/24Gi"
        assert all(part.endswith("Gi") for part in reqlim.split("/")), ln
        assert ln.split("-> ")[-1].strip() == "-" or ln.rstrip().endswith("Gi"), ln
    doc = json.loads(run_cli(capsys, *args, "--json"))
    recs = [w["recommendation"] for w in doc["workloads"] if w["recommendation"]]
    assert recs and any(not r["requests"]["vram"].endswith("Gi") for r in recs)  # exact bytes


def test_a_stop_ends_an_autoscale_round_between_workloads() -> None:
    """The daemon stopping mid-round: the workload being patched is finished (its status and its
    workers' annotations together), the rest of the round is left, with one journal line."""
    sim, metrics = demo()
    rt = Runtime(sim, clock=sim.clock, metrics=metrics)
    rt.tick_due()  # the pools' first reconcile and a first autoscale round
    sim.advance(DEFAULT_AUTOSCALE_INTERVAL)
    lines: list[str] = []

    def on_entry(entry: JournalEntry) -> None:
        lines.append(entry.message)

    rt.journal.subscribe(on_entry)
    rt.stopping = lambda: any(m.startswith(("patch ", "annotate Pod ")) for m in lines)  # once one is applied
    plan = rt.tick_due()
    assert plan is not None
    state = ClusterState.build(sim.snapshot())
    owners = {
        f"{a.namespace}/{a.name}" if isinstance(a, PatchWorkloadStatus)
        else f"{a.namespace}/{state.workers[f'{a.namespace}/{a.name}'].workload}"
        for a in plan.actions
        if isinstance(a, PatchWorkloadStatus | AnnotatePod)
    }  # fmt: skip
    assert len(owners) == 1  # one workload's patches, applied whole
    assert all(r.ok for r in rt.last_results)
    assert lines[-1] == "stopping: the rest of this autoscale round not applied"


def test_autoscale_writes_pass_the_api_servers_schema_checks(tmp_path: Path) -> None:
    """One autoscale run on the demo through the test API server, which refuses what a real one
    would (the CRD schemas, tests/kubeapi/schema.py): every status patch and annotation is taken."""
    from tests.kubeapi import KubeApiServer, write_kubeconfig
    from tftui.sources.kube import KubeCluster

    sim, metrics = demo()
    srv = KubeApiServer(bookmark_interval=0.2).start()
    srv.seed(sim.snapshot())
    try:
        kube = KubeCluster(kubeconfig=str(write_kubeconfig(tmp_path / "kc", srv.url)), backoff=0.01)
        try:
            kube.wait_synced(10)
            rt = Runtime(kube, clock=sim.clock, metrics=metrics)
            assert rt.autoscale_due()
            plan = rt.tick_due()
            assert plan is not None
            status = [a for a in plan.actions if isinstance(a, PatchWorkloadStatus)]
            assert status and [r for r in rt.last_results if not r.ok] == []
            for a in status:
                stored = srv.get("TensorFusionWorkload", a.name, a.namespace)
                assert stored is not None and all(stored["status"].get(k) == v for k, v in a.fields.items())
        finally:
            kube.close()
    finally:
        srv.stop()


def _condition_errors(conditions: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """What the TensorFusionWorkload CRD's schema says of `status.conditions` (the API server's check)."""
    from tests.kubeapi.schema import schema_errors
    from tests.kubeapi.server import load_crds

    schema = next(rt.schema for rt in load_crds() if rt.kind == "TensorFusionWorkload")
    assert schema is not None
    return list(schema_errors(schema, {"status": {"workerCount": 1, "conditions": conditions}}))


def test_the_resource_update_condition_is_set_as_upstream_sets_it() -> None:
    """`meta.SetStatusCondition`: other conditions kept (a merge patch replaces the whole list), the
    transition time kept while the status stays, and every field the CRD requires; an external
    scaler's free-text reason, which the CRD's pattern refuses, moves into the message."""
    t0, t1 = DEFAULT_NOW, DEFAULT_NOW + timedelta(minutes=5)
    new = with_resource_update(None, "Updated", "raised", t0)
    assert new == [
        {
            "type": "ResourceUpdate",
            "status": "True",
            "lastTransitionTime": rfc3339(t0),
            "reason": "Updated",
            "message": "raised",
        }
    ]
    ready = {
        "type": "Ready",
        "status": "True",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "reason": "Ok",
        "message": "",
    }
    workload = {"status": {"conditions": [ready, {**new[0], "reason": "InsideUpdateThreshold"}]}}
    same = with_resource_update(workload, "Updated", "lowered", t1)
    assert same == [ready, {**new[0], "message": "lowered"}]  # its time kept: the status stayed True
    workload["status"]["conditions"][1]["status"] = "False"
    assert with_resource_update(workload, "Updated", "m", t1)[1]["lastTransitionTime"] == rfc3339(t1)
    free = with_resource_update(None, "load is high, scaling up", "x" * 40_000, t0)[0]
    assert free["reason"] == "Updated" and free["message"].startswith("load is high, scaling up: xxx")
    assert len(free["message"]) == 32_768
    assert _condition_errors([*same, free]) == []
    # written only when it changes: an unchanged condition leaves the status patch without the list
    sim, metrics = demo()
    rt = Runtime(sim, clock=sim.clock, metrics=metrics)
    rt.tick_due()
    assert rt.last_autoscale is not None
    assert any("conditions" in s.fields for s in rt.last_autoscale.status)
    sim.advance(DEFAULT_AUTOSCALE_INTERVAL)
    before = {
        k: (o.get("status") or {}).get("conditions") for k, o in objs_of(sim, "TensorFusionWorkload").items()
    }
    rt.tick_due()
    again = rt.last_autoscale
    assert again is not None and again.status
    for s in again.status:
        assert s.fields.get("conditions", "unchanged") != before[f"{s.namespace}/{s.name}"]
    assert _condition_errors([{**free, "reason": "load is high"}])  # the check itself refuses it
