"""Defrag steps (D5, upstream's cases 34–39): one eviction per step, draining a source node, refused
evictions, the evicted-pod and source guards and the marker sweeps; builders in tests/defrag_support.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.defrag_support import (
    DEADLINE,
    JSON,
    MIN,
    START,
    base,
    clear_skip,
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
from tests.fixtures.engine_builders import HOUR, NOW, build, pdb, ts
from tftui.engine.defrag import evict_refused
from tftui.engine.plan import AnnotateNode, AnnotatePod, Event, EvictPod, LabelNode, LabelPod, PatchPoolStatus
from tftui.model import keys


def evicted_marks(pool_name: str | None = "p", since: timedelta = MIN) -> dict[str, Any]:
    ann = {keys.DEFRAG_EVICTED_SINCE: ts(ago=since)}
    if pool_name is not None:
        ann[keys.DEFRAG_EVICTED_POOL] = pool_name
    return {"labels": {keys.DEFRAG_EVICTED: "true"}, "annotations": ann}


def clear_source(n: str) -> list[Any]:
    return [
        LabelNode(n, {keys.DEFRAG_SOURCE: None}),
        AnnotateNode(n, {keys.DEFRAG_SOURCE_POOL: None, keys.DEFRAG_SOURCE_SINCE: None}),
    ]


# -- 34–39 and D5: steps -------------------------------------------------------------------------


def _two_workers(
    src_marks: dict[str, Any] | None = None, big: JSON | None = None, small: JSON | None = None
) -> list[JSON]:
    objs = [dpool(), *machine("n-src", **(src_marks or {})), *tgt(), *pdbs("w-big", "w-small")]
    objs.append(big if big is not None else wk("w-big", "n-src", tflops=60))
    objs.append(small if small is not None else wk("w-small", "n-src", tflops=20))
    return [o for o in objs if o]


def test_34_one_pod_per_step() -> None:
    """34, adapted (D5): of two workers only the largest is evicted; the node gets the source markers
    and the pod the evicted markers; one DefragStarted and one DefragPodEvicted."""
    plan, res = step(_two_workers())
    now = "2026-11-30T12:00:00Z"
    assert res.state == "evict" and res.evict is not None
    assert (res.evict.pod, res.evict.node, res.evict.target) == ("default/w-big", "n-src", "n-tgt")
    assert plan.actions == [
        Event("GPUPool/p", "Normal", "DefragStarted", "defrag step started at 2026-11-30T11:50:00Z"),
        LabelNode("n-src", {keys.DEFRAG_SOURCE: "true"}),
        AnnotateNode("n-src", {keys.DEFRAG_SOURCE_POOL: "p", keys.DEFRAG_SOURCE_SINCE: now}),
        EvictPod("default", "w-big"),
        LabelPod("default", "w-big", {keys.DEFRAG_EVICTED: "true"}),
        AnnotatePod("default", "w-big", {keys.DEFRAG_EVICTED_POOL: "p", keys.DEFRAG_EVICTED_SINCE: now}),
        Event(
            "GPUPool/p", "Normal", "DefragPodEvicted", "evicted pod default/w-big on node n-src for defrag"
        ),
    ]


def test_34_drain_continues_after_the_evicted_pod_is_gone() -> None:
    """D5: while the evicted pod exists the pool waits; then the source's remaining workers are
    re-simulated and the next one is evicted without re-marking the node; once empty, the sweep clears
    the source marker."""
    marks = source_marks(since=2 * MIN)
    gone = wk(
        "w-big",
        "n-src",
        tflops=60,
        deleting=True,
        labels=evicted_marks()["labels"],
        annotations=evicted_marks()["annotations"],
    )
    plan, res = step(_two_workers(marks, big=gone))
    assert res.state == "blocked" and evictions(plan) == []
    assert events(plan) == [
        (
            "Normal",
            "DefragBlockedByEvictedPod",
            "defrag step paused: defrag-evicted pod still pending reschedule",
        )
    ]
    plan, res = step([o for o in _two_workers(marks) if o["metadata"]["name"] != "w-big"])
    assert res.state == "evict" and res.evict is not None
    assert (res.evict.pod, res.evict.node, res.evict.target) == ("default/w-small", "n-src", "n-tgt")
    assert evictions(plan) == ["default/w-small"]
    assert reasons(plan) == ["DefragPodEvicted"]
    assert not [a for a in plan.actions if isinstance(a, LabelNode)]
    objs = [o for o in _two_workers(marks) if o["metadata"]["name"] not in ("w-big", "w-small")]
    plan, res = step(objs)
    assert plan.actions[:2] == clear_source("n-src")
    assert res.state == "idle" and skip_of(res, "n-src") == "idle" and evictions(plan) == []


def test_d5_unmarked_terminating_worker_on_the_source_blocks_like_a_marked_one() -> None:
    """Crash gap: the eviction went through but the `defrag-evicted` marker was never written. The
    terminating worker on this pool's source node is the only trace: the step waits for it to be
    gone (never evicts the next one meanwhile) and keeps the source marker, even when it was the
    node's last worker. A stale source marker (sourceNodeMarkerTTL, 30m) ends the wait."""
    leaving = wk("w-big", "n-src", tflops=60, deleting=True)  # no evicted markers
    plan, res = step(_two_workers(source_marks(since=2 * MIN), big=leaving))
    assert res.state == "blocked" and evictions(plan) == []
    assert reasons(plan) == ["DefragBlockedByEvictedPod"]
    last = [
        o
        for o in _two_workers(source_marks(since=2 * MIN), big=leaving)
        if o["metadata"]["name"] != "w-small"
    ]
    plan, res = step(last)
    assert res.state == "blocked" and evictions(plan) == []
    assert not [a for a in plan.actions if isinstance(a, LabelNode | AnnotateNode)]  # marker kept
    stale = _two_workers(source_marks(since=HOUR), big=leaving)
    plan, res = step(stale)
    assert res.state != "blocked" and all(a in plan.actions for a in clear_source("n-src"))
    # another pool's source, or a node that is no source: a terminating worker there is not ours
    _, res = step(_two_workers(source_marks("pool-b", since=2 * MIN), big=leaving))
    assert res.state != "blocked"
    _, res = step(_two_workers(big=leaving))
    assert res.state == "evict" and res.evict is not None and res.evict.pod == "default/w-small"


def test_d5_source_that_no_longer_fits_is_abandoned() -> None:
    """D5: if the source's remaining workers no longer fit, its marker is cleared and other candidates
    are tried in the same step."""
    objs = [
        dpool(),
        *machine("n-src", **source_marks()),
        wk("w-huge", "n-src", annotations={keys.GPU_MODEL: "H100"}),  # no H100 anywhere
        *tgt(),
        *machine("n-other"),
        wk("w-o", "n-other", tflops=10),
        *pdbs("w-huge", "w-o"),
    ]
    plan, res = step(objs)
    assert skip_of(res, "n-src") == "unmovable"
    assert all(a in plan.actions for a in clear_source("n-src"))
    assert res.evict is not None and res.evict.node == "n-other"


def test_d5_fresh_worker_on_source_abandons_drain() -> None:
    """A replacement landing back on the source (a real scheduler may) ends the drain instead of looping."""
    objs = _two_workers(source_marks(), big=wk("w-big", "n-src", tflops=60, age=MIN))
    plan, res = step(objs)
    assert skip_of(res, "n-src") == "fresh-worker" and res.evict is None
    assert all(a in plan.actions for a in clear_source("n-src"))


def test_d5_source_pdb_blocked_waits() -> None:
    """A drain whose next pod is PDB-blocked waits (state blocked) and keeps its marker."""
    objs = [o for o in _two_workers(source_marks()) if o["metadata"]["name"] != "pdb-w-small"]
    objs.append(pdb("pdb-w-small", "w-small", disruptions_allowed=0))
    plan, res = step(objs)
    assert res.state == "blocked" and skip_of(res, "n-src") == "pdb-blocked"
    assert reasons(plan) == ["DefragSkipPDBBlocked"]
    assert not [a for a in plan.actions if isinstance(a, LabelNode)]


def test_35_eviction_refused() -> None:
    """35 via `evict_refused` (D5): evict-skip markers with the reason, source marker cleared, and
    upstream's three Warnings; markers of pods evicted earlier are left alone."""
    err = "Too Many Requests: Cannot evict pod as it would violate the pod's disruption budget."
    plan = evict_refused(build(_two_workers()), "p", "n-src", "default/w-big", err, NOW)
    reason = f"evict pod default/w-big failed: {err}"
    assert plan.actions == [
        Event(
            "GPUPool/p",
            "Warning",
            "DefragPodEvictFailed",
            f"failed to evict pod default/w-big on node n-src: {err} (node eviction aborted)",
        ),
        LabelNode("n-src", {keys.DEFRAG_EVICT_SKIP: "true", keys.DEFRAG_SOURCE: None}),
        AnnotateNode(
            "n-src",
            {
                keys.DEFRAG_EVICT_SKIP_POOL: "p",
                keys.DEFRAG_EVICT_SKIP_SINCE: "2026-11-30T12:00:00Z",
                keys.DEFRAG_EVICT_SKIP_REASON: reason,
                keys.DEFRAG_SOURCE_POOL: None,
                keys.DEFRAG_SOURCE_SINCE: None,
            },
        ),
        Event(
            "GPUPool/p",
            "Warning",
            "DefragNodeEvictSkip",
            f"node n-src added to defrag evict-skip list after eviction failure: {err}",
        ),
        Event("GPUPool/p", "Warning", "DefragAbortNode", "node n-src: eviction aborted"),
    ]
    res = plan.pools["p"].defrag
    assert res is not None and res.state == "idle" and res.window == (START, DEADLINE)
    assert not [a for a in plan.actions if isinstance(a, LabelPod | AnnotatePod)]


def test_35_reason_cut_to_256_bytes() -> None:
    """The reason annotation is at most 256 bytes and stays valid UTF-8."""
    plan = evict_refused(build(base()), "p", "n-src", "default/w-src", "拒绝" * 200, NOW)
    (ann,) = [a for a in plan.actions if isinstance(a, AnnotateNode)]
    reason = ann.annotations[keys.DEFRAG_EVICT_SKIP_REASON]
    assert (
        reason is not None
        and len(reason.encode()) <= 256
        and reason.startswith("evict pod default/w-src failed: 拒绝")
    )


def _evicted_pod(name: str, pool_name: str | None = "p", since: timedelta = MIN, **kw: Any) -> JSON:
    m = evicted_marks(pool_name, since)
    return wk(
        name, "n-tgt", 2, tflops=1, deleting=True, labels=m["labels"], annotations=m["annotations"], **kw
    )


def test_36_guards() -> None:
    """36: a same-pool evicted pod blocks; another pool's does not; TTL 10m sweeps a 30-min marker;
    TTL never keeps a day-old marker blocking; the legacy gpupool annotation counts as ownership."""
    plan, res = step([*base(), _evicted_pod("ev")])
    assert res.state == "blocked" and reasons(plan) == ["DefragBlockedByEvictedPod"]
    assert res.window == (START, DEADLINE)
    _, res = step([*base(), _evicted_pod("ev", "pool-b")])
    assert res.state == "evict"
    plan, res = step(
        base(pool_obj=dpool(evictedPodMarkerTTL="10m"), extra=[_evicted_pod("ev", since=30 * MIN)])
    )
    assert res.state == "evict"
    assert plan.actions[:2] == [
        LabelPod("default", "ev", {keys.DEFRAG_EVICTED: None}),
        AnnotatePod("default", "ev", {keys.DEFRAG_EVICTED_POOL: None, keys.DEFRAG_EVICTED_SINCE: None}),
    ]
    _, res = step([*base(), _evicted_pod("ev", since=24 * HOUR)])
    assert res.state == "blocked"
    _, res = step([*base(), _evicted_pod("ev", None)])  # worker() sets the gpupool annotation to "p"
    assert res.state == "blocked"
    _, res = step([*base(), _evicted_pod("ev")], NOW - 2 * HOUR)
    assert res.state == "blocked"  # guards run before the window check, as upstream


def test_37_source_sweep() -> None:
    """37, adapted: an empty source is cleared at once; with an active worker and a fresh marker the
    drain continues (upstream: blockedBySourceNode); TTL 10m clears a 30-min marker (the node then
    starts over as an ordinary candidate); TTL never keeps it after a day."""
    empty = [dpool(), *machine("n-src", **source_marks(since=5 * MIN)), *tgt()]
    plan, _ = step(empty)
    assert plan.actions[:2] == clear_source("n-src")
    plan, res = step(_two_workers(source_marks(since=5 * MIN)))
    assert res.state == "evict" and "DefragStarted" not in reasons(plan)
    assert not [a for a in plan.actions if isinstance(a, LabelNode)]
    objs = _two_workers(source_marks(since=30 * MIN))
    objs[0] = dpool(sourceNodeMarkerTTL="10m")
    plan, res = step(objs)
    assert plan.actions[:2] == clear_source("n-src")
    assert res.state == "evict" and "DefragStarted" in reasons(plan)
    plan, res = step([dpool(sourceNodeMarkerTTL="never"), *_two_workers(source_marks(since=24 * HOUR))[1:]])
    assert res.state == "evict" and "DefragStarted" not in reasons(plan)


def test_37_source_without_since_is_cleared_once_empty() -> None:
    """Deviation (D9): a source marker lacking `-since` no longer pins the pool."""
    marks = source_marks()
    del marks["annotations"][keys.DEFRAG_SOURCE_SINCE]
    plan, _ = step([dpool(), *machine("n-src", **marks), *tgt()])
    assert plan.actions[:2] == clear_source("n-src")


def test_38_evict_skip_lifecycle() -> None:
    """38: the sweep clears an evict-skip marker once the node is empty and keeps it while workers
    remain; the campaign end clears all of this pool's markers, even with workers; other pools' stay."""
    objs = [
        dpool(),
        *machine("n-x", **skip_marks()),
        *machine("n-busy", **skip_marks()),
        wk("w-busy", "n-busy"),
        *machine("n-b", **skip_marks("pool-b")),
        *pdbs("w-busy"),
    ]
    plan, res = step(objs)
    assert plan.actions[:2] == clear_skip("n-x")
    assert not [a for a in plan.actions if isinstance(a, LabelNode) and a.node != "n-x"]
    assert skip_of(res, "n-busy") == "evict-skip"
    plan, res = step(objs, DEADLINE)
    assert plan.actions == [
        *clear_skip("n-x"),
        PatchPoolStatus("p", {"lastDefragTime": "2026-11-30T11:50:00Z"}),
        *clear_skip("n-busy"),
    ]


def test_39_step_loop() -> None:
    """39: the first candidate is evicted; a skipped first lets the second go; all skipped → idle with
    upstream's DefragFinished stats line (no DefragStarted: no node was started)."""
    _, res = step(base())
    assert res.evict is not None and res.evict.node == "n-src"
    objs = [
        dpool(),
        *machine("n-a"),
        wk("w-a", "n-a", annotations={keys.GPU_MODEL: "H100"}),  # 25 %, no H100 anywhere
        *machine("n-b", 5),
        wk("w-b0", "n-b", 0, tflops=10),
        wk("w-b1", "n-b", 1, tflops=10),  # 40 %, fits on n-tgt
        *tgt(),
        *pdbs("w-a", "w-b0", "w-b1"),
    ]
    _, res = step(objs)
    assert [c.node for c in res.candidates] == ["n-a", "n-b"]
    assert skip_of(res, "n-a") == "unmovable" and res.evict is not None and res.evict.node == "n-b"
    blocked = [o for o in objs if o["metadata"]["name"] != "pdb-w-b0"] + [
        pdb("pdb-w-b0", "w-b0", disruptions_allowed=0)
    ]
    plan, res = step(blocked)
    assert res.state == "idle" and res.evict is None
    assert reasons(plan) == ["DefragSkipUnschedulable", "DefragSkipPDBBlocked", "DefragFinished"]
    assert plan.events()[-1].message == (
        "defrag step finished: candidates=2 processed=2 evicted=0 failed=0 unmovable=1 pdbBlocked=1 "
        "missingPdb=0 freshSkip=0 deadline=false"
    )


def test_no_candidates_is_silent_idle() -> None:
    """No candidate at all: idle, no Started/Finished events (upstream noCandidates)."""
    plan, res = step([dpool(), *tgt()])
    assert res.state == "idle" and plan.actions == [] and res.candidates == []


def test_simulation_error_aborts_the_step() -> None:
    """A request that can never be placed (compute % > 100) is upstream's simulation error: Warning
    DefragAbortNode and the step stops."""
    objs = base(src=wk("w-src", "n-src", tflops=None, compute_percent=150))
    plan, res = step(objs)
    assert res.state == "idle" and skip_of(res, "n-src") == "unmovable"
    (ev,) = [e for e in plan.events() if e.reason == "DefragAbortNode"]
    assert ev.type == "Warning" and ev.message.startswith("node n-src aborted: simulation error: ")
