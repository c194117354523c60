"""What-if simulator: deterministic per seed, acts exactly on what `tftui plan` says, compares policies."""

from __future__ import annotations

import copy
import csv
import io
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tftui.cli import main
from tftui.engine.plan import AnnotatePod, Candidate, CompactionResult, DefragResult, EvictPod, Plan, Skip
from tftui.engine.state import ClusterState
from tftui.model.dump import dumps
from tftui.runtime.whatif import (
    PRESETS,
    PolicyResult,
    SimConfig,
    WhatIfCluster,
    apply_policy,
    churn_schedule,
    holds,
    parse_policy,
    recorded_usage,
    render_table,
    simulate,
    unblock,
)
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.render.whatif import kept_by

OBJECTS = generate_objects(7, 40, DEFAULT_NOW)
# the demo-dev defrag campaign runs 03:00-05:00 America/New_York = 08:00-10:00 UTC the next day
NIGHT = timedelta(hours=23)


def test_same_seed_same_run_and_another_seed_another_churn() -> None:
    cfg = SimConfig(duration=timedelta(hours=6), churn=2.0, seed=3)
    a = simulate(OBJECTS, parse_policy("CompactFirst+defrag"), DEFAULT_NOW, cfg)
    b = simulate(OBJECTS, parse_policy("CompactFirst+defrag"), DEFAULT_NOW, cfg)
    assert a.arrivals > 0 and a.departures > 0
    assert a.summary() == b.summary()
    assert (a.times, a.active, a.bound) == (b.times, b.active, b.bound)
    assert [p.dumps() for p in a.plans] == [p.dumps() for p in b.plans]
    state = ClusterState.build(OBJECTS)
    other = churn_schedule(state, DEFAULT_NOW, SimConfig(duration=timedelta(hours=6), churn=2.0, seed=4))
    assert other != churn_schedule(state, DEFAULT_NOW, cfg)


def test_decisions_match_tftui_plan_for_the_same_state_and_time(tmp_path: Path, capsys: Any) -> None:
    """At reconciles before, at and inside the defrag campaign, the plan the simulator acted on equals
    `tftui plan --from <dump of that moment> --now <that time> --json`, pool by pool."""
    points: list[tuple[int, datetime, list[dict[str, Any]], list[str]]] = []
    calls = [0]
    wanted = [DEFAULT_NOW, datetime.fromisoformat("2026-12-01T08:00:00+00:00")]

    def inspect(sim: WhatIfCluster, rt: Any) -> None:
        now = sim.now()
        k = calls[0]
        calls[0] += 1
        in_campaign = wanted[1] <= now < wanted[1] + timedelta(minutes=3)
        if now in wanted or (in_campaign and len(points) < 6):
            points.append((k, now, sim.snapshot(), rt.due_pools(sim.state(), now)))

    cfg = SimConfig(duration=timedelta(hours=20, minutes=3), churn=0.5)
    res = simulate(OBJECTS, parse_policy("CompactFirst+defrag"), DEFAULT_NOW, cfg, inspect=inspect)
    assert len(res.plans) == calls[0]
    assert len(points) >= 4
    evicting = 0
    for k, now, objects, due in points:
        dump = tmp_path / f"at-{k}.json"
        dump.write_text(dumps(objects))
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert main(["plan", "--from", str(dump), "--now", stamp, "--json", "--no-autoscale"]) == 0
        cli = json.loads(capsys.readouterr().out)["pools"]
        acted = res.plans[k]
        for pool in due:
            mine = acted.pool(pool).to_json()
            theirs = cli[pool]
            assert mine["defrag"] == theirs["defrag"], (stamp, pool)
            if mine["compaction"]["due"]:  # the CLI has no memory of the last round: always due
                assert mine["compaction"] == theirs["compaction"], (stamp, pool)
        evicting += any(isinstance(a, EvictPod) for a in acted.actions)
    assert evicting > 0  # the comparison covered defrag evictions, not only idle steps


def test_one_night_compact_first_with_defrag_against_the_lower_bound() -> None:
    """The acceptance figure: active nodes ÷ lower bound of the fragmented demo-dev pool after one
    night, for the three placement modes with compaction and defrag (printed with -s)."""
    cfg = SimConfig(duration=NIGHT, churn=0)
    results = {
        m: simulate(OBJECTS, parse_policy(f"{m}+defrag"), DEFAULT_NOW, cfg)
        for m in ("CompactFirst", "NodeCompactGPULowLoad", "LowLoadFirst")
    }
    print()
    print(render_table(list(results.values())))
    for m, r in results.items():
        print(f"demo-dev after one night, {m}+defrag: active/bound = {r.final_ratio('demo-dev'):.2f}")
    cf, ll = results["CompactFirst"], results["LowLoadFirst"]
    assert cf.evictions > 0 and cf.releases > 0
    assert cf.final_active["demo-dev"] < ll.final_active["demo-dev"]
    assert cf.final_active["demo-dev"] >= cf.final_bound["demo-dev"]  # a bound is a bound
    start = cf.active["demo-dev"][0]
    assert cf.final_active["demo-dev"] <= start / 2  # the night at least halved the pool
    # every node left is explained by the rule that kept it — the demo's blockers among them
    held = cf.final_holds["demo-dev"]
    assert len(held) == cf.final_active["demo-dev"]
    assert held["dev-4090-09"] == "cordoned"
    assert held["dev-4090-12"] == "pdb-blocked"
    assert held["dev-4090-17"] == "native-gpu-pod"
    assert set(held.values()) <= {"above-threshold", "cordoned", "pdb-blocked", "native-gpu-pod"}
    pools = cf.summary()["pools"]
    assert sum(pools["demo-dev"]["held_by"].values()) == cf.final_active["demo-dev"]
    assert "demo-dev nodes kept by: above-threshold" in render_table([cf])


def test_unblock_prices_the_blockers_an_operator_controls() -> None:
    """`+unblock` lifts cordons, do-not-disrupt and PDB blocks (never foreign GPU pods); on the
    demo's fragmented pool CompactFirst with an 80 % defrag threshold then meets the bound."""
    objs = unblock(OBJECTS)
    state = ClusterState.build(objs)
    before = ClusterState.build(OBJECTS)
    assert any(n.unschedulable for n in before.nodes.values())
    assert not any(n.unschedulable or n.do_not_disrupt for n in state.nodes.values())
    assert before.nodes["dev-4090-17"].native_gpu_pods == state.nodes["dev-4090-17"].native_gpu_pods != []
    pdbs = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in objs
        if o["kind"] == "PodDisruptionBudget"
    }
    blocked = [
        o for o in OBJECTS if o["kind"] == "PodDisruptionBudget" and o["status"]["disruptionsAllowed"] == 0
    ]
    assert blocked
    for o in blocked:
        assert pdbs[(o["metadata"]["namespace"], o["metadata"]["name"])]["spec"]["maxUnavailable"] == 1
    added = [k for k in pdbs if k[1].endswith("-whatif-pdb")]
    assert added  # the demo has workers no PDB covers
    untouched = [o for o in OBJECTS if o["kind"] == "GPU"]
    assert all(a is b for a, b in zip(untouched, [o for o in objs if o["kind"] == "GPU"], strict=True))
    assert parse_policy("CompactFirst+defrag=80+unblock").unblock

    cfg = SimConfig(duration=NIGHT, churn=0)
    r = simulate(OBJECTS, parse_policy("CompactFirst+defrag=80+unblock"), DEFAULT_NOW, cfg)
    print(render_table([r]))
    assert r.final_active["demo-dev"] <= 1.15 * r.final_bound["demo-dev"]


def test_ladder_preset_takes_the_fragmented_pool_down_step_by_step(capsys: Any) -> None:
    """`--compare ladder`: as configured, then CompactFirst, then an 80 % threshold, then unblock —
    one change per step; on demo-dev each step keeps fewer nodes and the last meets the bound."""
    assert (
        main(["simulate", "--demo", "--compare", "ladder", "--duration", "23h", "--churn", "0", "--json"])
        == 0
    )
    docs = json.loads(capsys.readouterr().out)["policies"]
    assert [d["policy"] for d in docs] == list(PRESETS["ladder"])
    dev = [d["pools"]["demo-dev"] for d in docs]
    active = [p["active"] for p in dev]
    assert active == sorted(active, reverse=True) and len(set(active)) == len(active), active
    assert dev[-1]["active"] <= 1.15 * dev[-1]["lower_bound"]
    assert dev[1]["held_by"]["above-threshold"] > dev[2]["held_by"].get("above-threshold", 0)


def test_holds_prefer_the_last_defrag_ranking_then_compaction() -> None:
    now = DEFAULT_NOW
    ranked = Plan(now)
    ranked.pool("p").defrag = DefragResult(
        "idle", candidates=[Candidate("n1", 25.0)], skipped=[Skip("n2", "cordoned")]
    )
    later = Plan(now + timedelta(minutes=5))
    later.pool("p").defrag = DefragResult("not-due")  # no ranking: does not hide the last one
    later.pool("p").compaction = CompactionResult(True, kept=[Skip("n3", "has-workers"), Skip("n2", "x")])
    assert holds([ranked, later], "p", ["n1", "n2", "n3", "n4"]) == {
        "n1": "not-drained",
        "n2": "cordoned",
        "n3": "has-workers",
        "n4": "unknown",
    }
    assert holds([], "p", ["n1"]) == {"n1": "unknown"}


def test_console_kept_by_counts_only_pools_above_their_bound() -> None:
    r = PolicyResult("x")
    r.final_active = {"a": 3, "b": 2, "c": 4}
    r.final_bound = {"a": 1, "b": 2, "c": 1}
    r.final_holds = {
        "a": {"a1": "cordoned", "a2": "above-threshold", "a3": "above-threshold"},
        "b": {"b1": "pdb-blocked", "b2": "pdb-blocked"},  # at its bound: nothing to explain
        "c": {"c1": "above-threshold", "c2": "cordoned", "c3": "native-gpu-pod", "c4": "above-threshold"},
    }
    assert kept_by(r) == "above-threshold 4, cordoned 2, native-gpu-pod 1"
    assert kept_by(PolicyResult("empty")) == "—"


def test_policy_is_written_into_the_objects() -> None:
    objs = apply_policy(OBJECTS, parse_policy("LowLoadFirst+defrag=80+autoscale"))
    state = ClusterState.build(objs)
    assert {p.placement_mode for p in state.pools.values()} == {"LowLoadFirst"}
    for pv in state.pools.values():
        d = pv.obj["spec"]["nodeManagerConfig"]["nodeCompaction"]["defrag"]
        assert d["enabled"] is True and d["utilizationThresholdPercent"] == 80
    assert all(
        w.obj["spec"]["autoScalingConfig"]["autoSetResources"]["enable"]
        for w in state.workloads.values()
        if w.obj
    )
    assert ClusterState.build(OBJECTS).pools["demo-training"].placement_mode == "CompactFirst"  # input kept
    assert len(PRESETS["all"]) == 12


@pytest.mark.parametrize("bad", ["Spread+defrag", "CompactFirst+fast", "CompactFirst+defrag=120"])
def test_bad_policy_is_one_line(bad: str, capsys: Any) -> None:
    assert main(["simulate", "--demo", "--policy", bad]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tftui: --policy: policy ") and err.count("\n") == 1


def test_cli_csv_and_json(capsys: Any) -> None:
    args = ["simulate", "--demo", "--duration", "2h", "--churn", "1", "--seed", "5"]
    args += ["--policy", "CompactFirst+defrag", "--policy", "LowLoadFirst"]
    assert main([*args, "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["policy"] for r in rows] == ["CompactFirst+defrag", "LowLoadFirst"]
    for r in rows:
        assert float(r["node_hours"]) > 0 and float(r["cost_usd"]) > 0
        assert 0 < float(r["allocation_ratio"]) <= 1
        assert float(r["gpu_hours_used"]) < float(r["gpu_hours_allocated"])
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    first = doc["policies"][0]
    assert first["node_hours"] == float(rows[0]["node_hours"])
    assert len(first["series"]["times"]) == len(first["series"]["active"]["demo-dev"]) == 5
    assert set(first["pools"]) == {"demo-dev", "demo-inference", "demo-isolation", "demo-training"}
    assert main(["simulate", "--demo", "--duration", "0h"]) == 2
    assert "--duration" in capsys.readouterr().err


def test_recorded_usage_replays_a_metrics_port() -> None:
    state = ClusterState.build(OBJECTS)
    metrics = SimMetrics(OBJECTS, seed=7, now=DEFAULT_NOW, history=timedelta(hours=3))
    hist = recorded_usage(metrics, state, DEFAULT_NOW, timedelta(hours=3))
    assert len(hist) > 10
    assert all(len(h) == 24 and all(v is not None and v >= 0 for v in h) for h in hist.values())
    cfg = SimConfig(duration=timedelta(hours=2), churn=1, history=hist)
    res = simulate(OBJECTS, parse_policy("configured"), DEFAULT_NOW, cfg)
    assert res.gpu_hours_used > 0
    # workloads the store has no rows for are counted as unmeasured, never as idle
    sparse = {k: v for i, (k, v) in enumerate(sorted(hist.items())) if i % 2}
    res2 = simulate(
        OBJECTS,
        parse_policy("configured"),
        DEFAULT_NOW,
        SimConfig(duration=timedelta(hours=2), churn=1, history=sparse),
    )
    assert res2.unmeasured_worker_hours > 0


def test_autoscale_policy_resizes_workers() -> None:
    cfg = SimConfig(duration=timedelta(hours=1), churn=0)
    res = simulate(OBJECTS, parse_policy("CompactFirst+autoscale"), DEFAULT_NOW, cfg)
    patched = [a for p in res.plans for a in p.actions if isinstance(a, AnnotatePod)]
    assert patched
    plain = simulate(OBJECTS, parse_policy("CompactFirst"), DEFAULT_NOW, cfg)
    assert res.gpu_hours_allocated != plain.gpu_hours_allocated


def test_cli_replays_usage_recorded_in_the_metrics_store(store: Any, tmp_path: Path, capsys: Any) -> None:
    """`tftui simulate --from dump --metrics-dsn`: usage comes from a metrics store (PostgreSQL and the
    GreptimeDB-dialect server) holding the simulator's last 2 h of rows, not from the generator."""
    from tests.pg import SIM_TABLES

    objects = generate_objects(7, 12, DEFAULT_NOW)
    sim = SimMetrics(objects, seed=7, now=DEFAULT_NOW)
    store.create("whatif_recorded", "greptime_timestamp")
    rows = {t: list(sim.rows(t, DEFAULT_NOW - timedelta(hours=2), DEFAULT_NOW)) for t in SIM_TABLES}
    store.load("whatif_recorded", rows, "greptime_timestamp")
    dump = tmp_path / "d.json"
    dump.write_text(dumps(objects))
    base = ["simulate", "--from", str(dump), "--start", "2026-11-30T12:00:00Z", "--duration", "1h"]
    base += ["--churn", "0", "--policy", "configured", "--json"]
    dsn = store.dsn("whatif_recorded")
    assert main([*base, "--metrics-dsn", dsn, "--history", "2h"]) == 0
    recorded = json.loads(capsys.readouterr().out)["policies"][0]
    assert main(base) == 0
    generated = json.loads(capsys.readouterr().out)["policies"][0]
    assert recorded["gpu_hours_used"] > 0
    assert recorded["unmeasured_worker_hours"] < recorded["gpu_hours_allocated"]
    assert recorded["gpu_hours_used"] != generated["gpu_hours_used"]
    assert recorded["gpu_hours_allocated"] == generated["gpu_hours_allocated"]


def test_pending_workers_get_a_provisioned_node_after_the_delay() -> None:
    """Every demo-training node cordoned and one worker Pending: the pool gets a node like its
    largest after `provision_delay`, and the worker is placed there."""
    objs = copy.deepcopy(OBJECTS)
    state = ClusterState.build(objs)
    training = set(state.pools["demo-training"].nodes)
    for o in objs:
        if o["kind"] == "Node" and o["metadata"]["name"] in training:
            o["spec"]["unschedulable"] = True
    worker = next(w for w in state.workers.values() if w.pool == "demo-training" and w.phase == "Running")
    pod = copy.deepcopy(worker.obj)
    pod["metadata"]["name"] += "-extra"
    pod["metadata"]["uid"] = "whatif-test-extra"
    pod["metadata"]["annotations"].pop("tensor-fusion.ai/gpu-ids", None)
    pod["spec"].pop("nodeName", None)
    pod["status"] = {"phase": "Pending"}
    objs.append(pod)
    cfg = SimConfig(
        duration=timedelta(minutes=30),
        churn=0,
        provision_delay=timedelta(minutes=7),
        sample=timedelta(minutes=1),
    )
    box: list[WhatIfCluster] = []
    res = simulate(objs, parse_policy("configured"), DEFAULT_NOW, cfg, inspect=lambda s, rt: box.append(s))
    assert res.provisioned == 1
    assert 7 <= res.pending_minutes <= 8  # waited the delay (sampled every minute), then placed
    final = box[-1].state()
    placed = final.workers[f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"]
    assert placed.node == "whatif-0001" and placed.phase == "Running"
    new = [n for n in final.pools["demo-training"].nodes if n not in training]
    assert new == [placed.node]
    assert len(final.nodes[placed.node].gpus) == max(len(state.nodes[n].gpus) for n in training)
