"""Defrag's pool configuration (D1), campaign window (D2) and the object helpers its modules share.

Separate from the step (`engine.defrag`) because the console reads a pool's configuration and window
without planning a step, and the index and simulation modules need these helpers below them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from tftui.engine import cron
from tftui.engine.state import parse_time
from tftui.model.duration import DurationError, parse_duration
from tftui.model.selectors import selector_matches
from tftui.model.times import time_problem
from tftui.model.zones import load_zone

DEFAULT_MAX_DURATION = timedelta(hours=2)
DEFAULT_THRESHOLD = 40.0
DEFAULT_EVICTED_TTL: timedelta | None = None  # "never"
DEFAULT_SOURCE_TTL = timedelta(minutes=30)
DEFAULT_MAX_WORKERS_PER_NODE = 256  # scheduler plugin arg `maxWorkerPerNode` (P12)
REASON_LIMIT = 256  # bytes of the evict-skip reason annotation (D5)
_REJECT_LIMIT = 180  # per rejection reason in a DefragSkipUnschedulable summary (as upstream)
_SUMMARY_LIMIT = 900
_SHOW = 4  # entries per summary list

WindowState = Literal["due", "not-due", "skip-missed"]
USED_BY_TF = "tensor-fusion"


# -- configuration (D1) --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DefragConfig:
    """A validated `nodeCompaction.defrag` block; durations already defaulted."""

    enabled: bool
    schedule: cron.Schedule
    timezone: str
    max_duration: timedelta  # campaign window length and minimum worker age (D1, D3)
    threshold: float  # utilizationThresholdPercent; a node qualifies at util ≤ threshold
    evicted_ttl: timedelta | None  # None: never stale
    source_ttl: timedelta | None

    @property
    def tz(self) -> ZoneInfo:
        return self.schedule.tz


def defrag_spec(pool_obj: dict[str, Any]) -> dict[str, Any]:
    """The pool's `spec.nodeManagerConfig.nodeCompaction.defrag` (empty when absent)."""
    spec = pool_obj.get("spec") or {}
    nmc = spec.get("nodeManagerConfig") or {}
    return dict((nmc.get("nodeCompaction") or {}).get("defrag") or {})


def _duration_or(raw: Any, default: timedelta) -> timedelta:
    """maxDuration rule (D1): empty, unparsable or ≤ 0 → the default."""
    if not isinstance(raw, str) or not raw.strip():
        return default
    try:
        value = parse_duration(raw.strip())
    except DurationError:
        return default
    return value if value > timedelta(0) else default


def _ttl(raw: Any, default: timedelta | None) -> timedelta | None:
    """Marker TTL: `never` → None; empty or unparsable → default; ≤ 0 → never (upstream: TTL > 0)."""
    if not isinstance(raw, str) or not raw.strip():
        return default
    text = raw.strip()
    if text.lower() == "never":
        return None
    try:
        value = parse_duration(text)
    except DurationError:
        return default
    return value if value > timedelta(0) else None


def validate_defrag(pool_obj: dict[str, Any]) -> DefragConfig | str:
    """D1: the config, or the error text upstream puts after `defrag disabled: `.

    Validation does not depend on `enabled`: the console can show a broken config before it is turned
    on; `plan_defrag` checks `enabled` first, like upstream. Beyond upstream's parser checks, a
    schedule that can never fire (`0 0 30 2 *`; upstream computes a zero time) and a threshold
    outside 0–100 (the CRD's bounds, which a dump or a CRD-less test cluster can bypass) are errors.
    """
    d = defrag_spec(pool_obj)
    status = pool_obj.get("status")
    last_problem = time_problem(status.get("lastDefragTime") if isinstance(status, dict) else None)
    if last_problem is not None:  # the campaign anchor: an unreadable one must not restart campaigns
        return f"status.lastDefragTime: {last_problem}"
    tz_name = str(d.get("timezone") or "").strip()
    if not tz_name:
        return 'timezone is required (e.g. "UTC" or "Asia/Shanghai")'
    try:
        tz = load_zone(tz_name)
    except ValueError:
        return f'invalid timezone "{tz_name}": unknown time zone {tz_name}'
    expr = str(d.get("schedule") or "").strip()
    if not expr:
        return "schedule is required"
    if expr.startswith(("TZ=", "CRON_TZ=")):
        return "schedule must not embed TZ=/CRON_TZ= prefix; use the timezone field instead"
    try:
        schedule = cron.parse(expr, tz)
    except cron.CronError as err:
        return f'parse cron schedule "{expr}" in timezone "{tz_name}": {err}'
    never = schedule.never_fires()
    if never is not None:
        return f'parse cron schedule "{expr}" in timezone "{tz_name}": schedule never fires: {never}'
    raw_thr = d.get("utilizationThresholdPercent")
    if raw_thr is None:
        threshold = DEFAULT_THRESHOLD
    elif isinstance(raw_thr, bool) or not isinstance(raw_thr, int | float):
        return f"utilizationThresholdPercent must be a number between 0 and 100, got {raw_thr!r}"
    elif not 0 <= raw_thr <= 100:
        return f"utilizationThresholdPercent must be between 0 and 100, got {raw_thr}"
    else:
        threshold = float(raw_thr)
    return DefragConfig(
        enabled=d.get("enabled") is True,
        schedule=schedule,
        timezone=tz_name,
        max_duration=_duration_or(d.get("maxDuration"), DEFAULT_MAX_DURATION),
        threshold=threshold,
        evicted_ttl=_ttl(d.get("evictedPodMarkerTTL"), DEFAULT_EVICTED_TTL),
        source_ttl=_ttl(d.get("sourceNodeMarkerTTL"), DEFAULT_SOURCE_TTL),
    )


# -- campaign window (D2) ------------------------------------------------------------------------


def campaign_window(
    config: DefragConfig, last_defrag_time: datetime | None, now: datetime
) -> tuple[WindowState, datetime | None, datetime | None]:
    """D2: is a campaign due, and which (start, deadline) does it cover (UTC)?

    The anchor is `status.lastDefragTime`, or now − maxDuration − 1 min when never set. The first tick
    strictly after the anchor decides: in the future → `not-due` (returned as the next window, so the
    console can show it); within maxDuration of now → `due`; older → the latest tick in
    [now − maxDuration, now] is due, and without one the window was missed (`skip-missed`, returned
    with the next window after now). The window is measured from the tick, not from when it is
    noticed; ticks are robfig's, in the pool's timezone (DST gaps skipped, repeated hours fire twice).
    `(not-due, None, None)`: the schedule fires no more within five years.
    """
    _require_aware(now)
    now = now.astimezone(UTC)
    width = config.max_duration
    last = _aware(last_defrag_time)
    anchor = last.astimezone(UTC) if last else now - width - timedelta(minutes=1)
    start = config.schedule.next_after(anchor)
    if start is None:
        return "not-due", None, None
    if start > now:
        return "not-due", start, start + width
    if now - start <= width:
        return "due", start, start + width
    latest = config.schedule.latest_at_or_before(now, now - width)
    if latest is not None:
        return "due", latest, latest + width
    upcoming = config.schedule.next_after(now)
    return "skip-missed", upcoming, upcoming + width if upcoming else None


# -- helpers on objects --------------------------------------------------------------------------


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def _labels(obj: dict[str, Any] | None) -> dict[str, str]:
    return _meta(obj).get("labels") or {}


def _annotations(obj: dict[str, Any] | None) -> dict[str, str]:
    return _meta(obj).get("annotations") or {}


def _require_aware(t: datetime) -> None:
    if t.tzinfo is None:
        raise ValueError("naive datetime: engine times must be timezone-aware")


def _aware(t: datetime | None) -> datetime | None:
    """Timestamps without an offset are UTC (Kubernetes writes `Z`); never the host's zone."""
    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t


def _stale(since_raw: str | None, ttl: timedelta | None, now: datetime) -> bool:
    """D8, D12: stale only with a TTL, a parsable `-since` and now − since > TTL."""
    if ttl is None:
        return False
    since = _aware(parse_time(since_raw))
    return since is not None and now - since > ttl


def _selector_matches(selector: Any, labels: dict[str, str]) -> bool:
    """D6: empty selectors cover nothing (no PDB of that kind counts as a pod's guardrail)."""
    return selector_matches(selector, labels, empty_matches_all=False)


def _disruptions_allowed(pdb: dict[str, Any]) -> int:
    value = (pdb.get("status") or {}).get("disruptionsAllowed")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _cut_utf8(text: str, limit: int) -> str:
    """At most `limit` bytes of UTF-8, never splitting a character (upstream cuts bytes)."""
    raw = text.encode()
    return text if len(raw) <= limit else raw[:limit].decode(errors="ignore")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fmt_pct(x: float) -> str:
    return f"{x:.2f}"
