"""Cron rules: which of a workload's rules is active at an instant (with its time zone) and the
resources it asks for.

Apart from the percentile recommender because a rule is schedule parsing, not usage arithmetic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from tftui.engine import cron
from tftui.engine.autoscale_config import Resources
from tftui.engine.autoscale_recommenders import Partial, process
from tftui.model.zones import load_zone


class CronRuleError(ValueError):
    """A cron rule problem that aborts the tick upstream (A3)."""


@dataclass(frozen=True, slots=True)
class CronRule:
    name: str
    start: str
    end: str
    desired: Resources
    raw: Mapping[str, Any]


def _split_tz(expr: str, default: ZoneInfo) -> tuple[str, ZoneInfo]:
    """robfig's `CRON_TZ=<zone> ` / `TZ=<zone> ` prefix."""
    if expr.startswith(("TZ=", "CRON_TZ=")):
        sp = expr.find(" ")
        if sp < 0:
            raise CronRuleError(f"provided bad location {expr}: missing schedule")
        zone = expr[expr.index("=") + 1 : sp]
        try:
            return expr[sp:].strip(), load_zone(zone)
        except ValueError:
            raise CronRuleError(f"provided bad location {zone}") from None
    return expr, default


def active_cron_rule(rules: Iterable[Mapping[str, Any]], now: datetime, tz: ZoneInfo) -> CronRule | None:
    """The one rule whose window [start firing, next end firing) holds `now` (A3, A7)."""
    active: list[CronRule] = []
    for r in rules:
        if not (r.get("enable") is True and r.get("name") and r.get("start") and r.get("end")):
            continue
        start, end = str(r["start"]), str(r["end"])
        if start == end:
            raise CronRuleError("start and end can not same")
        try:
            s_expr, s_tz = _split_tz(start, tz)
            e_expr, e_tz = _split_tz(end, tz)
            start_schedule = cron.parse(s_expr, s_tz)
            next_start = start_schedule.next_after(now)
            # Fall back repeats an hour and the start fires again in it: that repeat is not a new
            # window (upstream's rule leaves the rule inactive through the first occurrence).
            wall_now = now.astimezone(s_tz).replace(tzinfo=None)
            while next_start is not None and next_start.astimezone(s_tz).replace(tzinfo=None) <= wall_now:
                next_start = start_schedule.next_after(next_start)
            next_end = cron.parse(e_expr, e_tz).next_after(now)
        except cron.CronError as exc:
            raise CronRuleError(f"failed to parse cron rule {r['name']!r}: {exc}") from None
        if next_end is not None and (next_start is None or next_end <= next_start):
            active.append(CronRule(str(r["name"]), start, end, Resources.parse(r.get("desiredResources")), r))
    if len(active) > 1:
        raise CronRuleError("only one active cron scaling rule is permitted at any given time")
    return active[0] if active else None


def cron_recommend(
    active: CronRule | None,
    status_rule: Mapping[str, Any] | None,
    original: Resources,
    current: Resources,
    allowed: tuple[int, int] | None,
) -> Partial | None:
    """The cron recommender (A3): desired resources while a rule is active, the spec after it ends."""
    if active is None and status_rule is None:
        return None
    if active is None:
        assert status_rule is not None
        msg = f'Cron scaling rule "{status_rule.get("name", "")}" is inactive'
        return Partial(original, False, True, ("RuleInactive", msg))
    prev = Resources.parse(status_rule.get("desiredResources")) if status_rule is not None else None
    if prev is None or prev != active.desired:
        rec, pmsg = process(active.desired, current, allowed)
        msg = f'Cron scaling rule "{active.name}" is active' + (f", {pmsg}" if pmsg else "")
        return Partial(rec, False, True, ("RuleActive", msg), capped=bool(pmsg))
    return Partial(active.desired, True, True)
