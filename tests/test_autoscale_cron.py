"""Workload autoscaler: upstream's cron scaling cases 21–27 and cron windows across time zones and
DST changes (properties and the two DST edge cases).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.autoscale_support import TFK, TFL, VK, VL, R, astate_for, cluster
from tests.fixtures.engine_builders import MI, NOW, build
from tftui.engine.autoscale import (
    AutoscaleState,
    CronRuleError,
    active_cron_rule,
    cron_recommend,
    plan_autoscale,
)
from tftui.engine.plan import AnnotatePod

UTCZ = ZoneInfo("UTC")


# -- cases 21-27: cron ----------------------------------------------------------------------------

RULE = {
    "enable": True,
    "name": "test",
    "start": "0 0 * * *",
    "end": "59 23 * * *",
    "desiredResources": {
        "requests": {"tflops": "10", "vram": "8Gi"},
        "limits": {"tflops": "20", "vram": "16Gi"},
    },
}
DESIRED = R(10, 20, "8Gi", "16Gi")
SPEC = R(5, 10, "4Gi", "8Gi")


def test_s21_cron_first_activation() -> None:
    active = active_cron_rule([RULE], NOW, UTCZ)
    assert active is not None and active.name == "test"
    p = cron_recommend(active, None, SPEC, SPEC, None)
    assert p is not None and p.resources == DESIRED and not p.has_applied and p.locking
    assert p.condition == ("RuleActive", 'Cron scaling rule "test" is active')


def test_s22_cron_steady_state() -> None:
    active = active_cron_rule([RULE], NOW, UTCZ)
    p = cron_recommend(active, RULE, SPEC, DESIRED, None)
    assert p is not None and p.has_applied and p.resources == DESIRED and p.condition is None


def test_s23_cron_end() -> None:
    active = active_cron_rule([{**RULE, "enable": False}], NOW, UTCZ)
    assert active is None
    p = cron_recommend(active, RULE, SPEC, DESIRED, None)
    assert p is not None and p.resources == SPEC and not p.has_applied and p.locking
    assert p.condition == ("RuleInactive", 'Cron scaling rule "test" is inactive')
    assert cron_recommend(None, None, SPEC, SPEC, None) is None


@pytest.mark.parametrize(
    "rules",
    [
        [RULE, {**RULE}],
        [{**RULE, "start": "-30 0 * * *"}],
        [{**RULE, "start": "59 -23 * * *"}],
        [{**RULE, "end": "59 23 * -3 *"}],
        [{**RULE, "end": "0 0 * * *"}],
        [{**RULE, "start": "@daily"}],
    ],
)
def test_s24_cron_errors(rules: list[dict[str, Any]]) -> None:
    with pytest.raises(CronRuleError):
        active_cron_rule(rules, NOW, UTCZ)


def test_s24_disabled_or_empty_is_no_rule() -> None:
    assert active_cron_rule([], NOW, UTCZ) is None
    assert active_cron_rule([{**RULE, "enable": False}], NOW, UTCZ) is None


def test_s25_cron_windows() -> None:
    thu = {**RULE, "start": "0 0 * * Thu", "end": "59 23 * * Thu"}
    for day in range(7):
        t = datetime(2026, 11, 23, 12, 0, tzinfo=UTC) + timedelta(days=day)
        assert (active_cron_rule([thu], t, UTCZ) is not None) == (t.weekday() == 3)
    night = {**RULE, "start": "0 22 * * *", "end": "0 6 * * *"}
    for hour, on in ((23, True), (5, True), (12, False)):
        assert (active_cron_rule([night], NOW.replace(hour=hour), UTCZ) is not None) == on


def test_s26_cron_end_to_end() -> None:
    big = {
        **RULE,
        "desiredResources": {
            "requests": {"tflops": "120", "vram": "120Gi"},
            "limits": {"tflops": "120", "vram": "120Gi"},
        },
    }
    objs = cluster(
        spec={"autoScalingConfig": {"autoSetResources": {"enable": True}, "cronScalingRules": [big]}},
        workers=2,
    )
    ap = plan_autoscale(build(objs), AutoscaleState(), NOW)
    patches = [a for a in ap.plan.actions if isinstance(a, AnnotatePod)]
    assert len(patches) == 2
    assert patches[0].annotations == {TFK: "120", TFL: "120", VK: "120Gi", VL: "120Gi"}
    (st_patch,) = ap.status
    assert st_patch.fields["recommendation"]["requests"]["tflops"] == "120"
    assert st_patch.fields["appliedRecommendedReplicas"] == 2
    assert st_patch.fields["activeCronScalingRule"]["name"] == "test"
    # the rule is blanked: back to the spec
    blank = {**big, "start": "", "end": ""}
    objs2 = cluster(
        spec={"autoScalingConfig": {"autoSetResources": {"enable": True}, "cronScalingRules": [blank]}},
        workers=2,
        status={"recommendation": st_patch.fields["recommendation"], "activeCronScalingRule": big},
        worker_ann={TFK: "120", TFL: "120", VK: "120Gi", VL: "120Gi"},
    )
    ap2 = plan_autoscale(build(objs2), AutoscaleState(), NOW)
    p2 = [a for a in ap2.plan.actions if isinstance(a, AnnotatePod)]
    assert p2[0].annotations == {TFK: "10", TFL: "20", VK: "8Gi", VL: "16Gi"}
    assert ap2.status[0].fields["activeCronScalingRule"] is None


def test_s27_cron_blocks_scale_down() -> None:
    big = {
        **RULE,
        "desiredResources": {
            "requests": {"tflops": "110", "vram": "110Gi"},
            "limits": {"tflops": "110", "vram": "110Gi"},
        },
    }
    objs = cluster(
        spec={"autoScalingConfig": {"autoSetResources": {"enable": True}, "cronScalingRules": [big]}},
        status={
            "recommendation": R(110, 110, "110Gi", "110Gi").to_json(),
            "activeCronScalingRule": big,
        },
        worker_ann={TFK: "110", TFL: "110", VK: "110Gi", VL: "110Gi"},
    )
    ast = astate_for(objs, [(0.5, 500 * MI)] * 120)
    ap = plan_autoscale(build(objs), ast, NOW)
    assert ap.result is not None and ap.result.workloads["default/w"].reason == "scale-down-locked"
    assert not [a for a in ap.plan.actions if isinstance(a, AnnotatePod)]


# -- properties and DST edges: cron windows across time zones -------------------------------


def _window_rule(start: str, end: str) -> dict[str, Any]:
    return {**RULE, "start": start, "end": end}


@settings(max_examples=300, deadline=None)
@given(minute=st.integers(0, 60 * 24 * 30))
def test_property_cron_window_across_dst_new_york(minute: int) -> None:
    """Spring forward (2026-03-08) and fall back (2026-11-01): active ⟺ local hour is 1 or 2."""
    ny = ZoneInfo("America/New_York")
    base = datetime(2026, 3, 1, tzinfo=UTC) if minute % 2 else datetime(2026, 10, 20, tzinfo=UTC)
    t = base + timedelta(minutes=minute // 2 * 2)
    rule = _window_rule("CRON_TZ=America/New_York 0 1 * * *", "CRON_TZ=America/New_York 0 3 * * *")
    assert (active_cron_rule([rule], t, UTCZ) is not None) == (t.astimezone(ny).hour in (1, 2))
    rule_tz = _window_rule("0 1 * * *", "0 3 * * *")  # the controller's own zone
    assert (active_cron_rule([rule_tz], t, ny) is not None) == (t.astimezone(ny).hour in (1, 2))


@settings(max_examples=200, deadline=None)
@given(minute=st.integers(0, 60 * 24 * 14))
def test_property_cron_window_shanghai(minute: int) -> None:
    sh = ZoneInfo("Asia/Shanghai")
    t = datetime(2026, 3, 1, tzinfo=UTC) + timedelta(minutes=minute)
    rule = _window_rule("TZ=Asia/Shanghai 0 22 * * *", "TZ=Asia/Shanghai 0 6 * * *")
    h = t.astimezone(sh).hour
    assert (active_cron_rule([rule], t, UTCZ) is not None) == (h >= 22 or h < 6)


def test_cron_fall_back_repeated_start_hour_stays_active() -> None:
    """On 2026-11-01 New York repeats 01:00–02:00 and robfig fires `0 1 * * *` twice.

    Upstream's "next end before next start" is false through the first 01:xx (the repeat start
    comes first); tftui treats the repeat as the same window, so 01:00 EDT → 03:00 EST is active.
    """
    rule = _window_rule("CRON_TZ=America/New_York 0 1 * * *", "CRON_TZ=America/New_York 0 3 * * *")
    at = datetime(2026, 11, 1, 5, 0, tzinfo=UTC)  # 01:00 EDT
    active = [m for m in range(-30, 210, 10) if active_cron_rule([rule], at + timedelta(minutes=m), UTCZ)]
    assert active == list(range(0, 180, 10))  # 05:00–07:59 UTC: both 01:xx and the 02:xx hour


def test_cron_spring_forward_gap_start_is_skipped() -> None:
    """robfig skips a start inside the DST gap (02:30 does not exist on 2026-03-08 in New York).

    Upstream's rule "active iff the next end comes before the next start" then makes the rule active
    from the previous end (03-07 04:00) until 03-08 04:00: faithful, and surprising.
    """
    ny = ZoneInfo("America/New_York")
    rule = _window_rule("30 2 * * *", "0 4 * * *")
    assert active_cron_rule([rule], datetime(2026, 3, 6, 12, 0, tzinfo=ny), ny) is None
    assert active_cron_rule([rule], datetime(2026, 3, 7, 12, 0, tzinfo=ny), ny) is not None
    assert active_cron_rule([rule], datetime(2026, 3, 8, 3, 30, tzinfo=ny), ny) is not None
    assert active_cron_rule([rule], datetime(2026, 3, 8, 12, 0, tzinfo=ny), ny) is None
    assert active_cron_rule([rule], datetime(2026, 3, 9, 3, 0, tzinfo=ny), ny) is not None
