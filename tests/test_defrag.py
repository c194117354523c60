"""Defrag: config (D1), candidates (D3), simulation (D4) and PDB preflight (D6).

Numbered tests are cases of upstream's defrag behaviour, each stated in its docstring. Unless a test
says otherwise the fixture is upstream's (tests/defrag_support.py): GPUs of 100 TFLOPS / 10Gi, four
per node, threshold 40, maxDuration 30m, workers 2 h old, each covered by a PDB allowing one
disruption. The schedule `50 11 * * *` (UTC) puts the builders' NOW (12:00) inside the window
11:50–12:20. Campaign windows (D2): test_defrag_campaign.py; steps (D5): test_defrag_steps.py; the
demo and generated clusters: test_defrag_generated.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.defrag_support import (
    JSON,
    MIN,
    base,
    cfg_of,
    dpool,
    events,
    evictions,
    machine,
    pdbs,
    reasons,
    skip_marks,
    skip_of,
    source_marks,
    step,
    tgt,
    wk,
)
from tests.fixtures.engine_builders import NOW, build, pdb, pool, ts
from tftui.engine.defrag import validate_defrag
from tftui.engine.defragindex import _Ctx
from tftui.engine.defragsim import _budget
from tftui.engine.plan import LabelNode
from tftui.model import keys


def raw_pod(name: str, on: str, *, resources: JSON | None = None, deleting: bool = False) -> JSON:
    meta: JSON = {"name": name, "namespace": "default", "creationTimestamp": ts()}
    if deleting:
        meta["deletionTimestamp"] = ts(NOW)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": on, "containers": [{"name": "c", "resources": resources or {}}]},
        "status": {"phase": "Running"},
    }


# -- 17 and D1: configuration ----------------------------------------------------------------------


def test_17_invalid_timezone_warns_and_does_nothing_else() -> None:
    """17: an unknown IANA zone disables defrag with upstream's Warning; no sweep, no window."""
    plan, res = step(base(pool_obj=dpool(timezone="Mars/Base")))
    assert res.state == "invalid" and res.window is None and not res.candidates
    assert len(plan.actions) == 1
    (ev,) = plan.events()
    assert (ev.type, ev.reason, ev.object) == ("Warning", "DefragConfigInvalid", "GPUPool/p")
    assert ev.message.startswith('defrag disabled: invalid timezone "Mars/Base": ')


@pytest.mark.parametrize(
    ("defrag", "error"),
    [
        (
            {"schedule": "CRON_TZ=UTC 0 3 * * *"},
            "schedule must not embed TZ=/CRON_TZ= prefix; use the timezone field instead",
        ),
        (
            {"schedule": "TZ=UTC 0 3 * * *"},
            "schedule must not embed TZ=/CRON_TZ= prefix; use the timezone field instead",
        ),
        ({"timezone": None}, 'timezone is required (e.g. "UTC" or "Asia/Shanghai")'),
        ({"timezone": "  "}, 'timezone is required (e.g. "UTC" or "Asia/Shanghai")'),
        ({"schedule": " "}, "schedule is required"),
        (
            {"schedule": "0 0 3 * * *"},
            'parse cron schedule "0 0 3 * * *" in timezone "UTC": expected exactly 5 fields, found 6: [0 0 3 * * *]',
        ),
        (
            {"schedule": "@daily"},
            'parse cron schedule "@daily" in timezone "UTC": parser does not accept descriptors: @daily',
        ),
        (
            {"schedule": "0 0 L * *"},
            'parse cron schedule "0 0 L * *" in timezone "UTC": failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax',
        ),
        (
            {"schedule": "0 0 * * 7"},
            'parse cron schedule "0 0 * * 7" in timezone "UTC": end of range (7) above maximum (6): 7',
        ),
        (
            {"schedule": "0 0 30 2 *"},
            'parse cron schedule "0 0 30 2 *" in timezone "UTC": schedule never fires: no month has a matching day of month',
        ),
        ({"schedule": "0 0 31 4,6,9,11 *"}, "schedule never fires"),
        (
            {"utilizationThresholdPercent": -1},
            "utilizationThresholdPercent must be between 0 and 100, got -1",
        ),
        (
            {"utilizationThresholdPercent": 101},
            "utilizationThresholdPercent must be between 0 and 100, got 101",
        ),
    ],
)
def test_17_d1_config_errors(defrag: JSON, error: str) -> None:
    """D1: required IANA zone, 5-field robfig cron, no TZ prefix, impossible dates and bad thresholds."""
    got = validate_defrag(dpool(**defrag))
    assert isinstance(got, str) and error in got, got
    plan, res = step([dpool(**defrag)])
    assert res.state == "invalid" and reasons(plan) == ["DefragConfigInvalid"]
    assert plan.events()[0].message == f"defrag disabled: {got}"


def test_d1_threshold_must_be_a_number() -> None:
    """A non-numeric threshold is invalid (dump loading may already coerce numeric strings)."""
    d = dpool()
    d["spec"]["nodeManagerConfig"]["nodeCompaction"]["defrag"]["utilizationThresholdPercent"] = "forty"
    assert validate_defrag(d) == "utilizationThresholdPercent must be a number between 0 and 100, got 'forty'"


def test_d1_impossible_date_is_not_impossible_with_or_rule() -> None:
    """robfig ORs day-of-month and day-of-week when both are restricted: `0 0 30 2 1` fires on Mondays."""
    c = cfg_of(schedule="0 0 30 2 1")
    assert c.schedule.next_after(NOW) == datetime(2027, 2, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, timedelta(hours=2)), ("", timedelta(hours=2)), ("abc", timedelta(hours=2)), ("-5m", timedelta(hours=2)),
     ("0s", timedelta(hours=2)), ("1h30m", timedelta(minutes=90))],
)  # fmt: skip
def test_d1_max_duration_defaults(raw: str | None, expected: timedelta) -> None:
    """maxDuration: empty, unparsable or ≤ 0 fall back to 2h (D1)."""
    assert cfg_of(maxDuration=raw).max_duration == expected


def test_d1_defaults_and_ttls() -> None:
    """Threshold 40, TTLs never / 30m; `never` and durations parse; junk falls back, ≤ 0 means never."""
    c = cfg_of(utilizationThresholdPercent=None)
    assert (c.threshold, c.evicted_ttl, c.source_ttl, c.enabled) == (40.0, None, timedelta(minutes=30), True)
    c = cfg_of(evictedPodMarkerTTL="10m", sourceNodeMarkerTTL="never")
    assert (c.evicted_ttl, c.source_ttl) == (timedelta(minutes=10), None)
    c = cfg_of(evictedPodMarkerTTL="soon", sourceNodeMarkerTTL="0s")
    assert (c.evicted_ttl, c.source_ttl) == (None, None)
    assert cfg_of(utilizationThresholdPercent=0).threshold == 0.0


def test_disabled_pool_plans_nothing() -> None:
    """`enabled` false or absent: state disabled, not even a sweep (D1, as upstream)."""
    objs = base(pool_obj=dpool(enabled=False, timezone="Mars/Base"))
    plan, res = step(objs)
    assert res.state == "disabled" and plan.actions == []
    plan, res = step(base(pool_obj=pool("p")))
    assert res.state == "disabled" and plan.actions == []


# -- 21–27 and D3: candidates --------------------------------------------------------------------


def test_21_utilization_gate() -> None:
    """21: 1 of 4 → 25 % candidate; 2 of 4 → above threshold; 2 of 5 at 40 → candidate; 0 of 4 → idle."""
    objs = [
        dpool(),
        *machine("n-a"),
        wk("w-a", "n-a"),
        *machine("n-b"),
        wk("w-b0", "n-b", 0),
        wk("w-b1", "n-b", 1),
        *machine("n-c", 5),
        wk("w-c0", "n-c", 0),
        wk("w-c1", "n-c", 1),
        *machine("n-d"),
        *pdbs("w-a", "w-b0", "w-b1", "w-c0", "w-c1"),
    ]
    _, res = step(objs)
    assert [(c.node, c.utilization) for c in res.candidates] == [("n-a", 25.0), ("n-c", 40.0)]
    assert skip_of(res, "n-b") == "above-threshold" and skip_of(res, "n-d") == "idle"


def test_21_used_means_tflops_or_vram() -> None:
    """D3, as upstream: a GPU with only VRAM booked counts as used."""
    objs = base(extra=[wk("w-v", "n-src", 1, tflops=0, vram="1Gi"), *pdbs("w-v")])
    _, res = step(objs)
    assert skip_of(res, "n-src") == "above-threshold"  # 2 of 4 GPUs used


@pytest.mark.parametrize(("age", "fresh"), [(10 * MIN, True), (31 * MIN, False)])
def test_22_fresh_workers(age: timedelta, fresh: bool) -> None:
    """22: a worker younger than maxDuration (30m) keeps its node out."""
    objs = base(src=wk("w-src", "n-src", age=age))
    _, res = step(objs)
    assert (skip_of(res, "n-src") == "fresh-worker") is fresh
    assert ([c.node for c in res.candidates] == ["n-src"]) is not fresh


def test_23_missing_pdb() -> None:
    """23: no PDB, or only one with an empty selector: skipped with upstream's exact Warning."""
    msg = (
        "node n-src skipped from defrag: pod default/w-src has no PodDisruptionBudget covering it; "
        "please add a PDB to enable safe defrag"
    )
    for extra in ([], [{**pdb("empty", "w-src", disruptions_allowed=5), "spec": {"selector": {}}}]):
        plan, res = step([*base(cover=False), *extra])
        assert skip_of(res, "n-src") == "missing-pdb" and res.state == "idle"
        assert ("Warning", "DefragSkipMissingPDB", msg) in events(plan)
    other_ns = pdb("pdb-w-src", "w-src", namespace="other", disruptions_allowed=1)
    _, res = step([*base(cover=False), other_ns])
    assert skip_of(res, "n-src") == "missing-pdb"
    expr_pdb = pdb("by-expr", "w-src", disruptions_allowed=1)
    expr_pdb["spec"]["selector"] = {
        "matchExpressions": [{"key": f"{keys.WORKLOAD}", "operator": "In", "values": ["w-src", "x"]}]
    }
    _, res = step([*base(cover=False), expr_pdb])
    assert res.state == "evict"


@pytest.mark.parametrize(
    ("pod", "blocks"),
    [
        (raw_pod("cuda", "n-src", resources={"requests": {"nvidia.com/gpu": "1"}}), True),
        (raw_pod("rocm", "n-src", resources={"limits": {"amd.com/gpu": "1"}}), True),
        (raw_pod("sidecar", "n-src", resources={"requests": {"cpu": "1"}}), False),
        (raw_pod("leaving", "n-src", resources={"requests": {"nvidia.com/gpu": "1"}}, deleting=True), False),
        (
            wk("w-native", "n-src", 1, tflops=0, vram="0")
            | {
                "spec": {
                    "nodeName": "n-src",
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                }
            },
            False,
        ),
    ],
)
def test_24_native_gpu_pods(pod: JSON, blocks: bool) -> None:
    """24: a non-TF pod with a GPU resource blocks; sidecars, TF workers and terminating pods do not."""
    objs = [*base(), pod, *pdbs("w-native")]
    _, res = step(objs)
    assert (skip_of(res, "n-src") == "native-gpu-pod") is blocks


def test_25_evict_skip_scope() -> None:
    """25: a same-pool evict-skip marker keeps the node out; another pool's does not."""
    objs = base(node_kw=skip_marks())
    _, res = step(objs)
    assert skip_of(res, "n-src") == "evict-skip" and res.evict is None
    objs = base(node_kw=skip_marks("pool-b"))
    plan, res = step(objs)
    assert res.evict is not None and res.evict.node == "n-src"
    assert not [a for a in plan.actions if isinstance(a, LabelNode) and keys.DEFRAG_EVICT_SKIP in a.labels]


def test_26_cordon_and_protection() -> None:
    """26: cordoned or do-not-disrupt nodes are not candidates; per D3/C2 the Node label counts too."""
    cases: list[tuple[dict[str, Any], str]] = [
        ({"unschedulable": True}, "cordoned"),
        ({"do_not_disrupt": True}, "do-not-disrupt"),
        ({"labels": {keys.DO_NOT_DISRUPT: "true"}}, "do-not-disrupt"),
        ({"phase": "Pending"}, "not-running"),
        ({"k8s": False}, "not-running"),
    ]
    for kw, reason in cases:
        objs = base(node_kw=kw)
        _, res = step(objs)
        assert skip_of(res, "n-src") == reason, kw
        assert res.evict is None


def test_27_ordering_by_utilization_then_name() -> None:
    """27: candidates at 37.5 %, 12.5 % and 25 % run 12.5 → 25 → 37.5; equal utilization by name."""
    objs = [
        dpool(),
        *machine("n-a", 8),
        *(wk(f"w-a{i}", "n-a", i, tflops=10) for i in range(3)),
        *machine("n-b", 8),
        wk("w-b0", "n-b", 0, tflops=10),
        *machine("n-c", 8),
        *(wk(f"w-c{i}", "n-c", i, tflops=10) for i in range(2)),
        *machine("n-d", 8),
        wk("w-d0", "n-d", 0, tflops=10),
        *pdbs("w-a0", "w-a1", "w-a2", "w-b0", "w-c0", "w-c1", "w-d0"),
    ]
    _, res = step(objs)
    assert [(c.node, c.utilization) for c in res.candidates] == [
        ("n-b", 12.5),
        ("n-d", 12.5),
        ("n-c", 25.0),
        ("n-a", 37.5),
    ]
    assert res.evict is not None and res.evict.node == "n-b" and res.evict.target == "n-a"


# -- 28–32 and D4: simulation --------------------------------------------------------------------


def test_28_budget_exclusions() -> None:
    """28: only the buddy is a target; empty, should-delete, defrag-source (any pool), Node-less and —
    tftui, D4 — cordoned nodes are excluded. Upstream's "dirty GPU" accounting has no equivalent:
    availability is derived from workers, never read from status."""
    objs = [
        dpool(),
        *machine("n-src"),
        wk("w-src", "n-src", tflops=10),
        *machine("n-buddy", 2),
        wk("w-buddy", "n-buddy"),
        *machine("n-empty", 2),
        *machine("n-gone", 2, labels={keys.SHOULD_DELETE: "true"}),
        wk("w-gone", "n-gone"),
        *machine("n-other-src", 2, **source_marks("pool-b")),
        wk("w-os", "n-other-src"),
        *machine("n-nok8s", 2, k8s=False),
        wk("w-nok8s", "n-nok8s"),
        *machine("n-cordon", 2, unschedulable=True),
        wk("w-cordon", "n-cordon"),
        *pdbs("w-src"),
    ]
    st_ = build(objs)
    ctx = _Ctx.build(st_, "p", cfg_of(), NOW, 256)
    targets, excluded = _budget(ctx, "n-src")
    assert [(t.node, len(t.gpus), t.used) for t in targets] == [("n-buddy", 2, 1)]
    assert excluded == [
        "n-cordon(cordoned)",
        "n-empty(empty node (t=2,u=0,f=2))",
        "n-gone(deletion-marked)",
        "n-nok8s(not in scheduler snapshot)",
        "n-other-src(defrag-source-marked)",
    ]
    _, res = step(objs)
    assert res.evict is not None and (res.evict.node, res.evict.target) == ("n-src", "n-buddy")


def test_29_monotonicity() -> None:
    """29: source 25 %; a 20 % target is rejected (`monotonicity`), a 25 % target is allowed. The 20 %
    node is do-not-disrupt so it is not itself a candidate (targets may be protected, upstream note 3)."""
    low = [*machine("n-a", 5, do_not_disrupt=True), wk("w-a", "n-a", tflops=10)]
    objs = [dpool(), *machine("n-src"), wk("w-src", "n-src", tflops=10), *low, *pdbs("w-src")]
    plan, res = step(objs)
    assert skip_of(res, "n-src") == "unmovable" and res.evict is None
    (ev,) = [e for e in plan.events() if e.reason == "DefragSkipUnschedulable"]
    assert ev.type == "Normal"
    assert ev.message.startswith("node n-src skipped: pod=default/w-src budgetTargets=1 topRejects=")
    assert "n-a:monotonicity(targetUtil=20.00 sourceUtil=25.00)" in ev.message
    objs += [*machine("n-b"), wk("w-b", "n-b", tflops=10, pool="p")]
    _, res = step([*objs, *pdbs("w-b")])
    # n-b (25 %) is itself a candidate; by name n-b < n-src, so it is tried first and moves to n-src
    assert res.evict is not None and {res.evict.node, res.evict.target} == {"n-b", "n-src"}


def test_30_joint_placement_all_or_nothing() -> None:
    """30: two 60-TFLOPS workers; the only target has one free GPU and one with 40 left. The first fits,
    the second does not (`allocator-filter`, filtered=0 required=1): unmovable, no eviction, the step
    finishes idle. (Trying the next candidate after an unmovable one: test_39.)"""
    objs = [
        dpool(),
        *machine("n-src", 5),
        wk("w-1", "n-src", 0, tflops=60),
        wk("w-2", "n-src", 1, tflops=60),
        *machine("n-tgt", 2),
        wk("w-t", "n-tgt", 0, tflops=60),
        *pdbs("w-1", "w-2"),
    ]
    plan, res = step(objs)
    assert res.evict is None and skip_of(res, "n-src") == "unmovable"
    (ev,) = [e for e in plan.events() if e.reason == "DefragSkipUnschedulable"]
    assert "pod=default/w-2" in ev.message
    assert "n-tgt:allocator-filter(filtered=0 required=1 resource=2)" in ev.message
    assert res.state == "idle" and "DefragFinished" in reasons(plan) and evictions(plan) == []


def test_31_target_choice_by_compact_score() -> None:
    """31: B's fitting GPU is 80 % used (score 80), A's 30 % (score 30): B wins although A sorts first."""
    objs = [
        dpool(),
        *machine("n-src"),
        wk("w-src", "n-src", tflops=10, vram="1Gi"),
        *machine("n-tgt-a", 1),
        wk("w-a", "n-tgt-a", tflops=30, vram="3Gi"),
        *machine("n-tgt-b", 1),
        wk("w-b", "n-tgt-b", tflops=80, vram="8Gi"),
        *pdbs("w-src"),
    ]
    _, res = step(objs)
    assert res.evict is not None and res.evict.target == "n-tgt-b"


@pytest.mark.parametrize(("cap", "tgt_workers", "ok"), [(2, 2, False), (2, 1, True), (0, 5, True)])
def test_32_max_worker_per_node(cap: int, tgt_workers: int, ok: bool) -> None:
    """32: a target at the cap is rejected; below it accepted; cap 0 means no cap."""
    objs = [
        dpool(),
        *machine("n-src"),
        wk("w-src", "n-src", tflops=5),
        *machine("n-tgt"),
        *(wk(f"w-t{i}", "n-tgt", 0, 1, tflops=5) for i in range(tgt_workers)),
        *pdbs("w-src"),
    ]
    plan, res = step(objs, max_workers_per_node=cap)
    assert (res.evict is not None) is ok
    if not ok:
        assert "n-tgt:max-worker-per-node(workers=2 max=2)" in plan.events()[0].message
    # the same cap read from the cluster's scheduler configuration (the chart's ConfigMap)
    sched = f"profiles:\n- schedulerName: tensor-fusion-scheduler\n  pluginConfig:\n  - name: GPUResourcesFit\n    args: {{maxWorkerPerNode: {cap}, vramWeight: 0.7, tflopsWeight: 0.3}}\n"
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "tf-config", "namespace": "tf", "labels": {keys.COMPONENT: keys.COMPONENT_CONFIG}},
          "data": {"scheduler-config.yaml": sched}}  # fmt: skip
    _, res = step([*objs, cm])
    assert (res.evict is not None) is ok


def test_target_without_free_cpu_is_no_target() -> None:
    """kube-scheduler's node fit: n-tgt has GPU room but all its CPU is requested, so the source's
    worker cannot move there (`node-resources-fit(cpu)`); with CPU to spare it is evicted."""

    def with_cpu(objs: list[JSON], cpu: str) -> list[JSON]:
        for o in objs:
            if o["kind"] == "Node" and o["metadata"]["name"] == "n-tgt":
                o["status"]["allocatable"] = {"cpu": cpu, "memory": "64Gi", "pods": "110"}
            if o["kind"] == "Pod":
                o["spec"]["containers"] = [{"name": "w", "resources": {"requests": {"cpu": "1"}}}]
        return objs

    plan, res = step(with_cpu(base(), "2"))  # n-tgt's two workers take both CPUs
    assert res.evict is None and skip_of(res, "n-src") == "unmovable"
    (ev,) = [e for e in plan.events() if e.reason == "DefragSkipUnschedulable"]
    assert "n-tgt:node-resources-fit(cpu)" in ev.message
    _, res = step(with_cpu(base(), "3"))
    assert res.evict is not None and res.evict.target == "n-tgt"


# -- 33 and D6: PDB preflight --------------------------------------------------------------------


def test_33_pdb_preflight_blocks_at_zero() -> None:
    """33: PDB `pdb-blocked` allows 0: DefragSkipPDBBlocked naming the PDB and the pod; with 1 it proceeds."""
    p1 = base(src=wk("p1", "n-src"), cover=False)
    plan, res = step([*p1, pdb("pdb-blocked", "p1", disruptions_allowed=0)])
    assert res.evict is None and skip_of(res, "n-src") == "pdb-blocked"
    msg = "node n-src skipped before eviction: pod default/p1 is blocked by PDB default/pdb-blocked: disruptionsAllowed=0"
    assert ("Normal", "DefragSkipPDBBlocked", msg) in events(plan)
    _, res = step([*p1, pdb("pdb-blocked", "p1", disruptions_allowed=1)])
    assert res.evict is not None and res.evict.pod == "default/p1"


def test_33_d6_count_rule() -> None:
    """D6 (tftui): two pods of one PDB on the node need disruptionsAllowed ≥ 2 (upstream passes with 1
    and fails half-way on the 429)."""
    objs = [
        dpool(),
        *machine("n-src"),
        wk("p1", "n-src", 0, workload="app"),
        wk("p2", "n-src", 0, workload="app", tflops=20),
        *tgt(),
    ]
    plan, res = step([*objs, pdb("pdb-app", "app", disruptions_allowed=1)])
    assert skip_of(res, "n-src") == "pdb-blocked" and res.evict is None
    assert plan.events()[0].message == (
        "node n-src skipped before eviction: pod default/p1 is blocked by PDB default/pdb-app: "
        "disruptionsAllowed=1 < 2 pods it covers on node n-src"
    )
    _, res = step([*objs, pdb("pdb-app", "app", disruptions_allowed=2)])
    assert res.evict is not None and res.evict.pod == "default/p1"  # largest first


def test_d6_an_empty_selector_pdb_counts_as_the_eviction_api_counts_it() -> None:
    """D6 (tftui): a PDB with an empty selector is no pod's guardrail (test 23), but the Eviction API
    checks it for every pod of its namespace (kubernetes#119732): beside the pod's own PDB it makes
    the eviction a refusal (more than one PDB), so the node is skipped before any eviction (upstream
    ignores it there and starts the drain). In another namespace it changes nothing."""
    p1 = base(src=wk("p1", "n-src"), cover=False)
    everything = {**pdb("everything", "p1", disruptions_allowed=5), "spec": {"selector": {}}}
    plan, res = step([*p1, pdb("pdb-p1", "p1", disruptions_allowed=1), everything])
    assert res.evict is None and skip_of(res, "n-src") == "pdb-blocked"
    msg = (
        "node n-src skipped before eviction: pod default/p1 is selected by 2 PDBs (everything, pdb-p1): "
        "the Eviction API refuses to evict a pod with more than one"
    )
    assert ("Normal", "DefragSkipPDBBlocked", msg) in events(plan)
    elsewhere = {**everything, "metadata": {**everything["metadata"], "namespace": "other"}}
    _, res = step([*p1, pdb("pdb-p1", "p1", disruptions_allowed=1), elsewhere])
    assert res.evict is not None and res.evict.pod == "default/p1"
