"""Defrag: config (D1), campaign windows (D2), candidates (D3), simulation (D4), steps (D5), PDBs (D6).

Numbered tests are cases of upstream's defrag behaviour, each stated in its docstring. Unless a test
says otherwise the fixture is upstream's: GPUs of 100 TFLOPS / 10Gi, four per node, threshold 40,
maxDuration 30m, workers 2 h old, each covered by a PDB allowing one disruption. The schedule
`50 11 * * *` (UTC) puts the builders' NOW (12:00) inside the window 11:50–12:20.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.engine_builders import HOUR, NOW, build, gpu, gpunode, node, pdb, pool, ts, worker
from tftui.engine import cron
from tftui.engine.defrag import (
    DefragConfig,
    campaign_window,
    evict_refused,
    plan_defrag,
    validate_defrag,
)
from tftui.engine.defragindex import _Ctx
from tftui.engine.defragsim import _budget
from tftui.engine.fit import Request, reject_reason
from tftui.engine.plan import (
    AnnotateNode,
    AnnotatePod,
    DefragResult,
    Event,
    EvictPod,
    LabelNode,
    LabelPod,
    PatchPoolStatus,
    Plan,
)
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects

JSON = dict[str, Any]
MIN = timedelta(minutes=1)
SCHED = "50 11 * * *"
START = datetime(2026, 11, 30, 11, 50, tzinfo=UTC)
DEADLINE = datetime(2026, 11, 30, 12, 20, tzinfo=UTC)
NY = ZoneInfo("America/New_York")


# -- builders ------------------------------------------------------------------------------------


def dpool(name: str = "p", *, status: JSON | None = None, **defrag: Any) -> JSON:
    """A GPUPool with defrag on; keyword arguments override (None removes) defrag fields."""
    cfg: JSON = {
        "enabled": True,
        "schedule": SCHED,
        "timezone": "UTC",
        "maxDuration": "30m",
        "utilizationThresholdPercent": 40,
    }
    cfg.update(defrag)
    cfg = {k: v for k, v in cfg.items() if v is not None}
    return pool(
        name, spec={"nodeManagerConfig": {"nodeCompaction": {"period": "5m", "defrag": cfg}}}, status=status
    )


def machine(
    name: str,
    gpus: int = 4,
    *,
    pool: str | None = "p",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    unschedulable: bool = False,
    k8s: bool = True,
    **gpunode_kw: Any,
) -> list[JSON]:
    """Node (with marker labels/annotations) + GPUNode + `gpus` GPUs of 100 TFLOPS / 10Gi, labelled
    for the pool (`tensor-fusion.ai/gpupool`) as the controller labels them."""
    out = [gpunode(name, pool, **gpunode_kw)]
    if k8s:
        out.append(node(name, gpus=gpus, unschedulable=unschedulable, labels=labels, annotations=annotations))
    out += [gpu(f"{name}-gpu-{i}", name, tflops=100, vram="10Gi", index=i, pool=pool) for i in range(gpus)]
    return out


def wk(
    name: str,
    on: str,
    *gpu_idx: int,
    tflops: float | None = 50,
    vram: str = "1Gi",
    age: timedelta = 2 * HOUR,
    pool: str = "p",
    **kw: Any,
) -> JSON:
    """A worker on GPUs `gpu_idx` (default 0) of node `on`."""
    idx = gpu_idx or (0,)
    return worker(
        name, [f"{on}-gpu-{i}" for i in idx], tflops=tflops, vram=vram, created=NOW - age, pool=pool, **kw
    )


def pdbs(*names: str, allowed: int = 1) -> list[JSON]:
    return [pdb(f"pdb-{n}", n, disruptions_allowed=allowed) for n in names]


def tgt() -> list[JSON]:
    """Target n-tgt: 2 of 4 GPUs used (50 %, above the threshold, so never a candidate itself)."""
    return [*machine("n-tgt"), wk("w-t0", "n-tgt", 0), wk("w-t1", "n-tgt", 1)]


def base(
    *,
    pool_obj: JSON | None = None,
    src: JSON | None = None,
    node_kw: dict[str, Any] | None = None,
    cover: bool = True,
    extra: Sequence[JSON] = (),
) -> list[JSON]:
    """Source n-src (1 of 4 GPUs used: 25 %) with worker `src` (default w-src, PDB-covered) and n-tgt."""
    w = src if src is not None else wk("w-src", "n-src")
    out = [pool_obj or dpool(), *machine("n-src", **(node_kw or {})), w, *tgt(), *extra]
    return out + (pdbs(w["metadata"]["name"]) if cover else [])


def step(
    objs: Iterable[JSON], now: datetime = NOW, pool_name: str = "p", **kw: Any
) -> tuple[Plan, DefragResult]:
    plan = plan_defrag(build(objs), pool_name, now, **kw)
    res = plan.pools[pool_name].defrag
    assert res is not None
    return plan, res


def events(plan: Plan) -> list[tuple[str, str, str]]:
    return [(e.type, e.reason, e.message) for e in plan.events()]


def reasons(plan: Plan) -> list[str]:
    return [e.reason for e in plan.events()]


def evictions(plan: Plan) -> list[str]:
    return [f"{a.namespace}/{a.name}" for a in plan.actions if isinstance(a, EvictPod)]


def skip_of(res: DefragResult, node_name: str) -> str | None:
    found = [s.reason for s in res.skipped if s.node == node_name]
    return found[0] if found else None


def cfg_of(**defrag: Any) -> DefragConfig:
    c = validate_defrag(dpool(**defrag))
    assert isinstance(c, DefragConfig), c
    return c


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


def source_marks(pool_name: str = "p", since: timedelta = 5 * MIN) -> dict[str, Any]:
    return {
        "labels": {keys.DEFRAG_SOURCE: "true"},
        "annotations": {keys.DEFRAG_SOURCE_POOL: pool_name, keys.DEFRAG_SOURCE_SINCE: ts(ago=since)},
    }


def skip_marks(pool_name: str = "p") -> dict[str, Any]:
    return {
        "labels": {keys.DEFRAG_EVICT_SKIP: "true"},
        "annotations": {
            keys.DEFRAG_EVICT_SKIP_POOL: pool_name,
            keys.DEFRAG_EVICT_SKIP_SINCE: ts(ago=HOUR),
            keys.DEFRAG_EVICT_SKIP_REASON: "evict pod default/x failed: 429",
        },
    }


def evicted_marks(pool_name: str | None = "p", since: timedelta = MIN) -> dict[str, Any]:
    ann = {keys.DEFRAG_EVICTED_SINCE: ts(ago=since)}
    if pool_name is not None:
        ann[keys.DEFRAG_EVICTED_POOL] = pool_name
    return {"labels": {keys.DEFRAG_EVICTED: "true"}, "annotations": ann}


def clear_skip(n: str) -> list[Any]:
    return [
        LabelNode(n, {keys.DEFRAG_EVICT_SKIP: None}),
        AnnotateNode(
            n,
            {
                keys.DEFRAG_EVICT_SKIP_POOL: None,
                keys.DEFRAG_EVICT_SKIP_SINCE: None,
                keys.DEFRAG_EVICT_SKIP_REASON: None,
            },
        ),
    ]


def clear_source(n: str) -> list[Any]:
    return [
        LabelNode(n, {keys.DEFRAG_SOURCE: None}),
        AnnotateNode(n, {keys.DEFRAG_SOURCE_POOL: None, keys.DEFRAG_SOURCE_SINCE: None}),
    ]


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


# -- 18–20 and D2: campaign windows --------------------------------------------------------------


def test_18_stale_anchor_is_due_now() -> None:
    """18: `* * * * *`, anchor a day old, maxDuration 10m: due with a start in the last 2 minutes."""
    c = cfg_of(schedule="* * * * *", maxDuration="10m")
    state, start, deadline = campaign_window(c, NOW - 24 * HOUR, NOW + timedelta(seconds=30))
    assert state == "due" and start is not None and deadline is not None
    assert NOW + timedelta(seconds=30) - 2 * MIN <= start <= NOW + timedelta(seconds=30)
    assert deadline == start + timedelta(minutes=10)


def test_19_daily_window_and_skip_missed() -> None:
    """19: `0 3 * * *` UTC, 2h: due 03:00–05:00 at 03:20; at 06:00 the window was missed."""
    c = cfg_of(schedule="0 3 * * *", maxDuration="2h")
    day = datetime(2026, 11, 30, tzinfo=UTC)
    last = day - timedelta(hours=21)  # yesterday 03:00
    assert campaign_window(c, last, day + timedelta(hours=3, minutes=20)) == (
        "due",
        day + timedelta(hours=3),
        day + timedelta(hours=5),
    )
    assert campaign_window(c, last, day + timedelta(hours=6)) == (
        "skip-missed",
        day + timedelta(hours=27),
        day + timedelta(hours=29),
    )
    assert campaign_window(c, day + timedelta(hours=6), day + timedelta(hours=6, minutes=5))[0] == "not-due"
    assert campaign_window(c, day + timedelta(hours=6), day + timedelta(hours=27, minutes=10))[:2] == (
        "due",
        day + timedelta(hours=27),
    )


def test_19_skip_missed_plan_advances_anchor_and_clears_own_evict_skips() -> None:
    """19: skip-missed writes lastDefragTime = now and clears this pool's evict-skip markers only."""
    now = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
    objs = [
        dpool(schedule="0 3 * * *", maxDuration="2h", status={"lastDefragTime": "2026-11-29T03:00:00Z"}),
        *machine("n-x", **skip_marks()),
        wk("w-x", "n-x"),
        *machine("n-y", **skip_marks("pool-b")),
        wk("w-y", "n-y"),
        *pdbs("w-x", "w-y"),
    ]
    plan, res = step(objs, now)
    assert res.state == "skip-missed"
    assert res.window == (datetime(2026, 12, 1, 3, tzinfo=UTC), datetime(2026, 12, 1, 5, tzinfo=UTC))
    assert plan.actions == [
        PatchPoolStatus("p", {"lastDefragTime": "2026-11-30T06:00:00Z"}),
        *clear_skip("n-x"),
    ]


def test_20_advance_only_when_the_window_is_over() -> None:
    """20: idle and evicting steps inside the window keep the anchor; at the deadline it moves to the
    campaign start and the evict-skip list is cleared. Adaptation: a step that comes after the
    deadline sees the window as missed (skip-missed, anchor = now) — upstream's "windowClosed"
    writes the campaign start instead; both make the next tick the next campaign."""
    plan, res = step(base())
    assert res.state == "evict" and not [a for a in plan.actions if isinstance(a, PatchPoolStatus)]
    idle_objs = [
        dpool(status={"lastDefragTime": "2026-11-29T11:50:00Z"}),  # yesterday's campaign
        *machine("n-x", **skip_marks()),
        wk("w-x", "n-x", tflops=90, vram="9Gi"),
        *pdbs("w-x"),
    ]
    plan, res = step(idle_objs)
    assert res.state == "idle" and not [a for a in plan.actions if isinstance(a, PatchPoolStatus)]
    plan, res = step(idle_objs, DEADLINE)
    assert res.state == "idle" and not evictions(plan)
    assert plan.actions == [
        PatchPoolStatus("p", {"lastDefragTime": "2026-11-30T11:50:00Z"}),
        *clear_skip("n-x"),
    ]
    plan, res = step(idle_objs, DEADLINE + MIN)
    assert res.state == "skip-missed"
    assert plan.actions[0] == PatchPoolStatus("p", {"lastDefragTime": "2026-11-30T12:21:00Z"})


def test_not_due_reports_the_next_window() -> None:
    """Outside the window: state not-due, `window` = the next campaign, nothing else planned."""
    plan, res = step(base(), NOW - HOUR)
    assert res.state == "not-due" and plan.actions == [] and not res.candidates
    assert res.window == (START, DEADLINE)


# -- DST and robfig semantics --------------------------------------------------------------------


def test_window_across_dst_in_new_york() -> None:
    """`0 3 * * *` in America/New_York: 08:00Z in winter, 07:00Z after spring-forward; the window is
    measured in absolute time (2h), and the anchor rules work across the change."""
    c = cfg_of(schedule="0 3 * * *", timezone="America/New_York", maxDuration="2h")
    before = datetime(2026, 3, 7, 8, tzinfo=UTC)  # Sat 03:00 EST
    assert campaign_window(c, before - 24 * HOUR, before + MIN)[1:] == (before, before + 2 * HOUR)
    spring = datetime(2026, 3, 8, 7, tzinfo=UTC)  # Sun 03:00 EDT, 23 h later
    assert campaign_window(c, before, spring + 30 * MIN) == ("due", spring, spring + 2 * HOUR)
    assert campaign_window(c, before, spring - 30 * MIN) == ("not-due", spring, spring + 2 * HOUR)
    fall = datetime(2026, 11, 1, 8, tzinfo=UTC)  # Sun 03:00 EST, 25 h after Sat 03:00 EDT
    sat = datetime(2026, 10, 31, 7, tzinfo=UTC)
    assert campaign_window(c, sat, fall + HOUR) == ("due", fall, fall + 2 * HOUR)
    assert campaign_window(c, sat, fall - 30 * MIN)[0] == "not-due"


def test_dst_gap_is_skipped_and_repeated_hour_fires_twice() -> None:
    """robfig: a tick inside the spring-forward gap never runs; one in the repeated hour runs twice."""
    s = cron.parse("30 2 * * *", NY)
    t = s.next_after(datetime(2026, 3, 7, 12, tzinfo=UTC))
    assert t is not None and t.astimezone(NY).isoformat() == "2026-03-09T02:30:00-04:00"
    s = cron.parse("30 1 * * *", NY)
    first = s.next_after(datetime(2026, 10, 31, 12, tzinfo=UTC))
    assert first is not None
    second = s.next_after(first)
    assert second is not None
    assert [first.astimezone(NY).isoformat(), second.astimezone(NY).isoformat()] == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:30:00-05:00",
    ]
    c = cfg_of(schedule="30 2 * * *", timezone="America/New_York", maxDuration="2h")
    # 03:10 EDT on the spring-forward day: the 02:30 tick did not exist, so nothing is due
    state, start, _ = campaign_window(
        c, datetime(2026, 3, 7, 7, 30, tzinfo=UTC), datetime(2026, 3, 8, 7, 10, tzinfo=UTC)
    )
    assert state == "not-due" and start == datetime(2026, 3, 9, 6, 30, tzinfo=UTC)


def test_window_in_shanghai_has_no_dst() -> None:
    """Asia/Shanghai (UTC+8, no DST): `0 3 * * *` is 19:00Z the day before, all year."""
    c = cfg_of(schedule="0 3 * * *", timezone="Asia/Shanghai", maxDuration="2h")
    for day in (
        datetime(2026, 3, 8, tzinfo=UTC),
        datetime(2026, 7, 1, tzinfo=UTC),
        datetime(2026, 11, 1, tzinfo=UTC),
    ):
        tick = day - timedelta(hours=5)  # 19:00Z the day before = 03:00 CST
        assert campaign_window(c, tick - 24 * HOUR, tick + 10 * MIN) == ("due", tick, tick + 2 * HOUR)
        assert campaign_window(c, tick - 24 * HOUR, tick + 3 * HOUR)[0] == "skip-missed"


def test_robfig_fields() -> None:
    """`?`, names, ranges, steps (N/step = N-max/step) and the OR rule of restricted day fields."""
    utc = ZoneInfo("UTC")
    s = cron.parse("0 9 ? JAN-mar MON-FRI", utc)
    assert s.next_after(NOW) == datetime(2027, 1, 1, 9, tzinfo=UTC)  # Fri 1 Jan 2027
    s = cron.parse("0 0 1 * MON", utc)  # 1st of month OR Monday
    assert s.next_after(NOW) == datetime(2026, 12, 1, tzinfo=UTC)  # Tue 1 Dec (NOW is a Monday noon)
    assert s.next_after(datetime(2026, 12, 1, 1, tzinfo=UTC)) == datetime(2026, 12, 7, tzinfo=UTC)
    s = cron.parse("5/20 * * * *", utc)
    assert s.next_after(NOW) == NOW + 5 * MIN
    with pytest.raises(cron.CronError, match="too many slashes"):
        cron.parse("*/2/3 * * * *", utc)
    with pytest.raises(cron.CronError, match=r"beginning of range \(5\) beyond end of range \(3\)"):
        cron.parse("5-3 * * * *", utc)
    with pytest.raises(cron.CronError, match="step of range should be a positive number"):
        cron.parse("*/0 * * * *", utc)


_FIELD = {0: (0, 59), 1: (0, 23), 2: (1, 28), 3: (1, 12), 4: (0, 6)}


@st.composite
def and_cron(draw: st.DrawFn) -> str:
    """Expressions where robfig and croniter agree: day-of-week `*` (AND rule), no `a-a` ranges."""
    parts = []
    for i in range(4):
        lo, hi = _FIELD[i]
        kind = draw(st.sampled_from(["*", "n", "range", "step", "list"]))
        if kind == "*":
            parts.append("*")
        elif kind == "n":
            parts.append(str(draw(st.integers(lo, hi))))
        elif kind == "range":
            a = draw(st.integers(lo, hi - 1))
            parts.append(f"{a}-{draw(st.integers(a + 1, hi))}")
        elif kind == "step":
            parts.append(f"*/{draw(st.integers(2, 7))}")
        else:
            vals = sorted(draw(st.sets(st.integers(lo, hi), min_size=2, max_size=4)))
            parts.append(",".join(map(str, vals)))
    return " ".join([*parts, "*"])


@settings(max_examples=150, deadline=None)
@given(expr=and_cron(), offset=st.integers(0, 10**8))
def test_next_matches_croniter_in_utc(expr: str, offset: int) -> None:
    """In UTC and without robfig-only rules, `next_after` agrees with croniter."""
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=offset)
    mine = cron.parse(expr, ZoneInfo("UTC")).next_after(start)
    assert mine == croniter(expr, start).get_next(datetime)


@settings(max_examples=200, deadline=None)
@given(
    tz=st.sampled_from(["UTC", "America/New_York", "Asia/Shanghai", "Australia/Lord_Howe", "Europe/London"]),
    minute=st.integers(0, 59),
    hour=st.integers(0, 23),
    width_min=st.integers(1, 600),
    last_offset=st.one_of(st.none(), st.integers(-3 * 86400, 86400)),
    now_offset=st.integers(0, 366 * 86400),
)
def test_campaign_window_invariants(
    tz: str, minute: int, hour: int, width_min: int, last_offset: int | None, now_offset: int
) -> None:
    """For any zone (incl. a 30-min DST shift), anchor and now: a due window contains now and starts on
    a tick whose local wall time matches the schedule; not-due lies ahead; skip-missed has no tick in
    [now − maxDuration, now]."""
    c = cfg_of(schedule=f"{minute} {hour} * * *", timezone=tz, maxDuration=f"{width_min}m")
    now = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=now_offset)
    last = None if last_offset is None else now - timedelta(days=1) + timedelta(seconds=last_offset)
    state, start, deadline = campaign_window(c, last, now)
    assert start is not None and deadline == start + c.max_duration
    local = start.astimezone(ZoneInfo(tz))
    assert (local.hour, local.minute, local.second) == (hour, minute, 0)
    assert c.schedule.next_after(start - timedelta(seconds=1)) == start
    if state == "due":
        assert start <= now <= deadline
    elif state == "not-due":
        assert start > now
    else:
        assert c.schedule.latest_at_or_before(now, now - c.max_duration) is None
        assert start > now


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


# -- demo cluster and determinism ------------------------------------------------------------------

DEMO_NOW = datetime(2026, 12, 1, 8, 30, tzinfo=UTC)  # 03:30 EST, inside the 03:00 window


@pytest.fixture(scope="module")
def demo() -> ClusterState:
    return ClusterState.build(generate_objects())


def _pool_util(st_: ClusterState, node_name: str, pool_name: str) -> tuple[int, int]:
    gpus = [g for g in st_.gpus_of(node_name) if g.pool == pool_name and g.used_by in ("", "tensor-fusion")]
    used = sum(1 for g in gpus if g.allocated.tflops > 0 or g.allocated.vram > 0)
    return used, len(gpus)


def _check_eviction(st_: ClusterState, plan: Plan, pool_name: str) -> None:
    """Independent checks of any planned eviction (the properties of the brief)."""
    evs = [a for a in plan.actions if isinstance(a, EvictPod)]
    assert len(evs) <= 1
    res = plan.pools[pool_name].defrag
    assert res is not None
    if not evs:
        assert res.evict is None
        return
    assert res.evict is not None and res.state == "evict"
    w = st_.workers[f"{evs[0].namespace}/{evs[0].name}"]
    assert w.node == res.evict.node != res.evict.target
    # PDB coverage with enough budget for every pod on the node
    pods = [x for x in st_.workers.values() if x.node == w.node and not x.terminating]
    for pod in pods:
        labels = pod.obj["metadata"].get("labels") or {}
        cov = [
            p
            for p in st_.pdbs
            if p["metadata"].get("namespace") == pod.namespace
            and (ml := ((p.get("spec") or {}).get("selector") or {}).get("matchLabels"))
            and all(labels.get(k) == v for k, v in ml.items())
        ]
        assert cov, f"{pod.key} evicted without PDB"
        for p in cov:
            n = sum(
                1
                for x in pods
                if x.namespace == pod.namespace
                and all(
                    ((x.obj["metadata"].get("labels") or {}).get(k) == v)
                    for k, v in p["spec"]["selector"]["matchLabels"].items()
                )
            )
            assert p["status"]["disruptionsAllowed"] >= n
    # target: same pool, not empty, not less utilized, not cordoned/released/source, filters pass
    su, stot = _pool_util(st_, w.node or "", pool_name)
    tu, ttot = _pool_util(st_, res.evict.target, pool_name)
    assert tu > 0 and stot > 0 and tu / ttot >= su / stot
    tnode = st_.nodes[res.evict.target]
    assert tnode.pool == pool_name and not tnode.unschedulable
    tlabels = (tnode.node_obj or {}).get("metadata", {}).get("labels") or {}
    assert tlabels.get(keys.SHOULD_DELETE) != "true" and tlabels.get(keys.DEFRAG_SOURCE) != "true"
    req = Request.of_worker(w)
    fits = [
        g
        for g in st_.gpus_of(tnode.name)
        if g.pool == pool_name and reject_reason(g, g.available, req) is None
    ]
    assert len(fits) >= req.count


def test_demo_cluster_evicts_with_a_valid_target(demo: ClusterState) -> None:
    """The demo's `demo-dev` (America/New_York, `0 3 * * *`, no lastDefragTime) at 03:30 EST."""
    plan = plan_defrag(demo, "demo-dev", DEMO_NOW)
    res = plan.pools["demo-dev"].defrag
    assert res is not None and res.state == "evict"
    assert res.window == (datetime(2026, 12, 1, 8, tzinfo=UTC), datetime(2026, 12, 1, 10, tzinfo=UTC))
    assert len(res.candidates) >= 2
    assert all(c.utilization <= 40 for c in res.candidates)
    assert [c.utilization for c in res.candidates] == sorted(c.utilization for c in res.candidates)
    assert {"cordoned", "native-gpu-pod", "idle", "above-threshold"} <= {s.reason for s in res.skipped}
    assert reasons(plan) == ["DefragStarted", "DefragPodEvicted"]
    _check_eviction(demo, plan, "demo-dev")


def test_demo_other_pools_disabled_and_window(demo: ClusterState) -> None:
    """Pools without defrag are `disabled`; outside the window demo-dev is not-due with the next one."""
    assert plan_defrag(demo, "demo-inference", DEMO_NOW).pools["demo-inference"].defrag.state == "disabled"  # type: ignore[union-attr]
    res = plan_defrag(demo, "demo-dev", DEMO_NOW + 3 * HOUR).pools["demo-dev"].defrag
    assert res is not None and res.state == "not-due"
    assert res.window == (datetime(2026, 12, 2, 8, tzinfo=UTC), datetime(2026, 12, 2, 10, tzinfo=UTC))


def test_determinism() -> None:
    """Same objects and now → byte-identical plans, independent of object order."""
    objs = generate_objects()
    a = plan_defrag(ClusterState.build(objs), "demo-dev", DEMO_NOW).dumps()
    b = plan_defrag(ClusterState.build(copy.deepcopy(objs)), "demo-dev", DEMO_NOW).dumps()
    c = plan_defrag(ClusterState.build(list(reversed(copy.deepcopy(objs)))), "demo-dev", DEMO_NOW).dumps()
    assert a == b == c


def test_engine_imports_stay_pure() -> None:
    """engine/ must not import sources, ui or runtime."""
    import tftui.engine.cron as c
    import tftui.engine.defrag as d

    for mod in (c, d):
        src = Path(mod.__file__ or "").read_text(encoding="utf-8")
        for banned in ("tftui.sources", "tftui.ui", "tftui.runtime"):
            assert banned not in src


# -- properties on generated clusters --------------------------------------------------------------

POOLS = ("demo-dev", "demo-inference", "demo-training", "demo-isolation")


def _patched(
    objs: Sequence[JSON], pool_name: str, threshold: int, tz: str, width: str, drop_pdb: float, seed: int
) -> list[JSON]:
    out = []
    rnd = seed
    for o in objs:
        if o["kind"] == "GPUPool" and o["metadata"]["name"] == pool_name:
            o = copy.deepcopy(o)
            nc = o["spec"].setdefault("nodeManagerConfig", {}).setdefault("nodeCompaction", {})
            nc["defrag"] = {
                "enabled": True,
                "schedule": "0 3 * * *",
                "timezone": tz,
                "maxDuration": width,
                "utilizationThresholdPercent": threshold,
            }
        elif o["kind"] == "PodDisruptionBudget":
            rnd = (rnd * 1103515245 + 12345) % 2**31
            if rnd / 2**31 < drop_pdb:
                continue
        out.append(o)
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    nodes=st.integers(6, 30),
    pool_name=st.sampled_from(POOLS),
    threshold=st.integers(0, 100),
    tz=st.sampled_from(["UTC", "America/New_York", "Asia/Shanghai"]),
    width=st.sampled_from(["30m", "2h", "5h"]),
    drop_pdb=st.sampled_from([0.0, 0.3]),
    frac=st.floats(0, 0.999),
)
def test_properties_on_generated_clusters(
    seed: int, nodes: int, pool_name: str, threshold: int, tz: str, width: str, drop_pdb: float, frac: float
) -> None:
    """Never evicts an uncovered pod, never targets an empty or less utilized node, at most one
    EvictPod, the target passes the filters; plans are deterministic."""
    objs = _patched(generate_objects(seed, nodes), pool_name, threshold, tz, width, drop_pdb, seed)
    st_ = ClusterState.build(objs)
    cfg = validate_defrag(st_.pools[pool_name].obj)
    assert isinstance(cfg, DefragConfig)
    tick = cfg.schedule.next_after(DEFAULT_NOW)
    assert tick is not None
    now = tick + cfg.max_duration * frac
    plan = plan_defrag(st_, pool_name, now)
    res = plan.pools[pool_name].defrag
    assert res is not None and res.state in ("evict", "idle")
    _check_eviction(st_, plan, pool_name)
    assert all(c.utilization <= threshold for c in res.candidates)
    assert plan.dumps() == plan_defrag(ClusterState.build(objs), pool_name, now).dumps()


def test_skip_reason_codes_are_known() -> None:
    """Every skip reason is one of the documented codes."""
    known = {
        "do-not-disrupt", "cordoned", "evict-skip", "not-running", "idle", "above-threshold", "native-gpu-pod",
        "no-workers", "fresh-worker", "missing-pdb", "unmovable", "pdb-blocked",
    }  # fmt: skip
    res = plan_defrag(ClusterState.build(generate_objects()), "demo-dev", DEMO_NOW).pools["demo-dev"].defrag
    assert res is not None and {s.reason for s in res.skipped} <= known


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


def test_a_state_and_its_defrag_index_are_freed_without_the_cycle_collector() -> None:
    """The index a state keeps (`derived`) refers to it weakly: long what-if runs pause the cyclic
    GC, and a cycle per state kept every superseded state alive until the run's end."""
    import gc
    import weakref

    from tftui.model.gcpause import gc_paused

    state = ClusterState.build(generate_objects())
    plan_defrag(state, "demo-dev", DEMO_NOW)  # derives the index ("defrag")
    assert "defrag" in state._derived
    ref = weakref.ref(state)
    with gc_paused():
        del state
        assert ref() is None  # freed by reference counting alone
    gc.collect()
