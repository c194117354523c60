"""Defrag campaign windows (D2, upstream's cases 18–20): due, not-due and skip-missed, the anchor, DST
and robfig's cron semantics; builders and fixture in tests/defrag_support.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.defrag_support import (
    DEADLINE,
    MIN,
    START,
    base,
    cfg_of,
    clear_skip,
    dpool,
    evictions,
    machine,
    pdbs,
    skip_marks,
    step,
    wk,
)
from tests.fixtures.engine_builders import HOUR, NOW
from tftui.engine import cron
from tftui.engine.defrag import campaign_window
from tftui.engine.plan import PatchPoolStatus

NY = ZoneInfo("America/New_York")


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
