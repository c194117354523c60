"""What the operation screens show (compaction, defrag, events, journal), built off the UI thread.

Every decision comes from the engine: the refresh worker calls `plan_cluster` once and keeps the
per-pool results, next to the few inputs the screens explain (period, trigger, capacity floors,
defrag configuration and window). Nothing here is decided by the console; it only collects and
reshapes what the engine and the runtime say, so a screen can render without further work.

`ConsoleRuntime` is the slice of `tftui.runtime.loops.Runtime` the console uses; the console talks
to it only through `TfTuiApp.perform` (writes) and the refresh worker (reads).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from tftui.engine import compaction as compaction_engine
from tftui.engine.compaction import compaction_period, is_due, manual_trigger
from tftui.engine.defrag import (
    DefragConfig,
    campaign_window,
    defrag_spec,
    gpu_utilization,
    plan_defrag,
    validate_defrag,
)
from tftui.engine.plan import CompactionResult, DefragResult, Plan, Skip
from tftui.engine.planning import plan_cluster
from tftui.engine.state import ClusterState, Res, parse_time
from tftui.model.giveway import checkpoint, paced

__all__ = [
    "CapacityFigures",
    "CompactionView",
    "ConsoleRuntime",
    "DefragView",
    "EventRow",
    "JournalRow",
    "OpsData",
    "build_ops",
    "compaction_capacity",
    "event_rows",
    "journal_rows",
    "would_release",
]


# -- the runtime, as the console sees it ---------------------------------------------------------


class JournalEntryLike(Protocol):
    @property
    def ts(self) -> datetime: ...
    @property
    def pool(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def ok(self) -> bool: ...


class JournalLike(Protocol):
    def entries(self) -> Sequence[JournalEntryLike]: ...


class ActionResultLike(Protocol):
    @property
    def ok(self) -> bool: ...
    @property
    def error(self) -> str: ...


class ActuatorLike(Protocol):
    def execute(self, plan: Plan, state: ClusterState | None = None) -> Sequence[ActionResultLike]:
        """Apply `plan.actions` (journaled), one result per action."""
        ...


class ConsoleRuntime(Protocol):
    """`tftui.runtime.loops.Runtime` as far as the console needs it."""

    @property
    def journal(self) -> JournalLike: ...

    @property
    def actuator(self) -> ActuatorLike: ...

    def manual_compaction(self, pool: str) -> Plan:
        """Stamp the manual-compaction annotation and run the pool's forced round (a write)."""
        ...

    def preview_manual_compaction(self, pool: str) -> Plan:
        """The forced round's Plan without side effects."""
        ...


# -- rows ----------------------------------------------------------------------------------------


def _as_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    t = parse_time(value)
    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t


def _object_ref(regarding: Any) -> str:
    """`GPUPool/demo-dev` from an events.k8s.io `regarding` reference (or a plain string)."""
    if isinstance(regarding, Mapping):
        kind = str(regarding.get("kind") or "")
        name = str(regarding.get("name") or "")
        ns = str(regarding.get("namespace") or "")
        name = f"{ns}/{name}" if ns else name
        return f"{kind}/{name}" if kind else name
    return str(regarding or "")


@dataclass(frozen=True, slots=True)
class EventRow:
    """One recorded cluster event; `seq` is its position in the port's list (oldest = 0)."""

    seq: int
    time: datetime | None
    type: str
    reason: str
    object: str
    note: str

    @property
    def key(self) -> str:
        return f"event-{self.seq}"


@dataclass(frozen=True, slots=True)
class JournalRow:
    """One runtime journal entry; `seq` is its position in the journal (oldest = 0)."""

    seq: int
    time: datetime | None
    pool: str
    kind: str
    message: str
    ok: bool

    @property
    def key(self) -> str:
        return f"journal-{self.seq}"


MAX_ROWS = 500
"""Newest events and journal entries the console lists (the journal holds up to 10,000)."""


def event_rows(events: Iterable[Mapping[str, Any]], limit: int = MAX_ROWS) -> tuple[EventRow, ...]:
    """The port's events (oldest first) as rows, newest first, at most `limit`."""
    items = list(events)
    start = max(0, len(items) - limit)
    rows = [
        EventRow(
            seq=i,
            time=_as_time(e.get("eventTime") or e.get("deprecatedLastTimestamp") or e.get("lastTimestamp")),
            type=str(e.get("type") or ""),
            reason=str(e.get("reason") or ""),
            object=_object_ref(e.get("regarding") or e.get("involvedObject")),
            note=" ".join(str(e.get("note") or e.get("message") or "").split()),
        )
        for i, e in enumerate(items[start:], start)
    ]
    return tuple(reversed(rows))


def journal_rows(entries: Iterable[JournalEntryLike], limit: int = MAX_ROWS) -> tuple[JournalRow, ...]:
    """Journal entries (oldest first) as rows, newest first, at most `limit`."""
    items = list(entries)
    start = max(0, len(items) - limit)
    rows = [
        JournalRow(
            seq=i,
            time=_as_time(getattr(e, "ts", None)),
            pool=str(getattr(e, "pool", "") or ""),
            kind=str(getattr(e, "kind", "") or ""),
            message=" ".join(str(getattr(e, "message", "") or "").split()),
            ok=bool(getattr(e, "ok", True)),
        )
        for i, e in enumerate(items[start:], start)
    ]
    return tuple(reversed(rows))


# -- compaction ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CapacityFigures:
    """The pool figures of the compaction capacity test (C3, `.Value()` integers).

    `available` and `total` are summed over the pool's TensorFusion GPUs, already-released nodes
    left out once; `warm` and `minimum` are `capacityConfig.warmResources` / `minResources`.
    """

    available: Res
    total: Res
    warm: Res
    minimum: Res
    config_errors: tuple[str, ...] = ()

    def without(self, nodes: Res) -> CapacityFigures:
        """The figures after releasing nodes of `nodes` total capacity."""
        return replace(self, available=self.available - nodes, total=self.total - nodes)

    @property
    def warm_ok(self) -> tuple[bool, bool]:
        """(TFLOPS, VRAM): available ≥ warm."""
        return self.available.tflops >= self.warm.tflops, self.available.vram >= self.warm.vram

    @property
    def min_ok(self) -> tuple[bool, bool]:
        """(TFLOPS, VRAM): total ≥ min."""
        return self.total.tflops >= self.minimum.tflops, self.total.vram >= self.minimum.vram


def compaction_capacity(
    state: ClusterState, pool: str, released: Iterable[str]
) -> tuple[CapacityFigures, CapacityFigures]:
    """The pool's capacity figures now and after `released` nodes go, as the engine counts them.

    Uses the compaction engine's own accumulators so the console shows exactly the numbers the
    capacity test compared (no second implementation of the arithmetic).
    """
    engine = compaction_engine
    pv = state.pools[pool]
    gone_before: frozenset[str] = state.derived("console-released-nodes", _released_nodes)
    t = engine._pool_totals(state, pool, gone_before)
    lim = engine._limits(pv.obj)
    before = CapacityFigures(
        available=Res(float(t.avail_t), float(t.avail_v)),
        total=Res(float(t.total_t), float(t.total_v)),
        warm=Res(float(lim.warm_t), float(lim.warm_v)),
        minimum=Res(float(lim.min_t), float(lim.min_v)),
        config_errors=tuple(lim.errors),
    )
    gone = Res()
    for name in released:
        node = state.nodes.get(name)
        if node is not None:
            n_t, n_v = engine._node_totals(node)
            gone.add(Res(float(n_t), float(n_v)))
    return before, before.without(gone)


def _released_nodes(state: ClusterState) -> frozenset[str]:
    """Every node that already counts as released (the same for every pool: once per state)."""
    detail = compaction_engine._released_detail
    return frozenset(n.name for n in state.nodes.values() if detail(state, n) is not None)


def would_release(result: CompactionResult) -> list[str]:
    """Nodes the round releases, or, when it is not due, the nodes it would release."""
    return [r.node for r in result.released] + [k.node for k in result.kept if k.reason == "not-due"]


@dataclass(frozen=True, slots=True)
class CompactionView:
    """One pool's compaction round as the engine decided it, with the inputs that explain it."""

    pool: str
    provisioning: str
    period: timedelta
    period_error: str | None
    due_reason: str  # first-run | period-elapsed | manual-trigger | not-due
    last_run: datetime | None
    trigger_error: str | None
    result: CompactionResult
    before: CapacityFigures
    after: CapacityFigures  # after the nodes the round releases (or would release)

    @property
    def due(self) -> bool:
        return self.result.due

    def decisions(self) -> list[tuple[str, str, str]]:
        """(node, decision, detail): releases first, then kept nodes, each in the engine's order."""
        rows = [(r.node, "release", r.action) for r in self.result.released]
        rows += [(k.node, k.reason, k.detail) for k in self.result.kept]
        return rows


# -- defrag --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DefragView:
    """One pool's defrag configuration, window and step, as the engine reads and decides them."""

    pool: str
    configured: bool  # a `nodeCompaction.defrag` block exists
    enabled: bool
    schedule: str
    timezone: str
    error: str | None  # validation error text (upstream's words after "defrag disabled: ")
    config: DefragConfig | None
    window_state: str | None  # due | not-due | skip-missed (None: no valid schedule)
    window: tuple[datetime, datetime] | None
    last_defrag: datetime | None
    result: DefragResult
    events: tuple[EventRow, ...] = ()  # recorded Defrag* events of the pool, newest first
    preview: DefragResult | None = None  # the next window's first step on the current snapshot
    busy: Mapping[str, float] = field(default_factory=dict)
    """Node → % of its pool GPUs in use (defrag's utilization), for the nodes with pool GPUs."""

    @property
    def shown(self) -> DefragResult:
        """The step whose candidates the console lists: this instant's, else the next window's."""
        return self.preview if self.preview is not None else self.result

    @property
    def state(self) -> str:
        """One word for "not running": `off` whether there is no defrag block or it is disabled
        (the DEFRAG column and the summary say which)."""
        if not self.configured:
            return "off"
        if self.error is not None:
            return "invalid"
        return "off" if self.result.state == "disabled" else self.result.state

    def nodes(self) -> list[tuple[str, str, float | None, str]]:
        """(node, decision, utilization, detail): ranked candidates, then skipped nodes. The
        utilization is the one defrag compares with its threshold, for every node that has GPUs
        of the pool (`busy`), so a node skipped as above threshold shows its figure too."""
        out: list[tuple[str, str, float | None, str]] = []
        step = self.shown
        evict = step.evict
        tried = {s.node: s for s in step.skipped}
        for rank, c in enumerate(step.candidates, 1):
            detail = ""
            if evict is not None and evict.node == c.node:
                detail = f"evict {evict.pod} → {evict.target}"
            elif c.node in tried:
                detail = f"{tried[c.node].reason}: {tried[c.node].detail}"
            out.append((c.node, f"candidate #{rank}", c.utilization, detail))
        seen = {c.node for c in step.candidates}
        out += [
            (s.node, s.reason, self.busy.get(s.node), s.detail) for s in step.skipped if s.node not in seen
        ]
        return out


def _defrag_view(
    state: ClusterState, pool: str, now: datetime, result: DefragResult | None, events: Sequence[EventRow]
) -> DefragView:
    obj = state.pools[pool].obj
    spec = defrag_spec(obj)
    cfg = validate_defrag(obj)
    error = cfg if isinstance(cfg, str) and spec else None
    config = cfg if isinstance(cfg, DefragConfig) else None
    last = _as_time((obj.get("status") or {}).get("lastDefragTime"))
    wstate: str | None = None
    window = result.window if result is not None else None
    if config is not None:
        wstate, start, deadline = campaign_window(config, last, now)
        if window is None and start is not None and deadline is not None:
            window = (start, deadline)
    step = result if result is not None else DefragResult("disabled")
    preview: DefragResult | None = None
    if step.state in ("not-due", "skip-missed") and window is not None:
        # What the next campaign's first step would do if the cluster stayed as it is now.
        checkpoint()
        ahead = plan_defrag(state, pool, window[0]).pools[pool].defrag
        checkpoint()
        preview = ahead if ahead is not None and ahead.state in ("evict", "idle", "blocked") else None
    busy: dict[str, float] = {}
    for node in paced(state.nodes_of(pool), 64):
        used, total = gpu_utilization(state, node, pool)
        if total:
            busy[node.name] = used * 100.0 / total
    object_ref = f"GPUPool/{pool}"
    mine = tuple(e for e in events if e.reason.startswith("Defrag") and e.object == object_ref)
    return DefragView(
        pool=pool,
        configured=bool(spec),
        enabled=spec.get("enabled") is True,
        schedule=str(spec.get("schedule") or ""),
        timezone=str(spec.get("timezone") or ""),
        error=error,
        config=config,
        window_state=wstate,
        window=window,
        last_defrag=last,
        result=step,
        events=mine,
        preview=preview,
        busy=busy,
    )


# -- everything at once --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpsData:
    """The engine's view of every pool at `now`, plus recorded events and the runtime journal."""

    plan: Plan | None = None
    plan_error: str | None = None
    compaction: Mapping[str, CompactionView] = field(default_factory=dict)
    defrag: Mapping[str, DefragView] = field(default_factory=dict)
    events: tuple[EventRow, ...] = ()
    journal: tuple[JournalRow, ...] = ()
    events_enabled: bool = False  # the source records events (the writable demo cluster)
    journal_enabled: bool = False  # a runtime is attached


def build_ops(
    state: ClusterState,
    now: datetime,
    *,
    last_compaction: Mapping[str, datetime] | None = None,
    events: tuple[EventRow, ...] = (),
    journal: tuple[JournalRow, ...] = (),
    events_enabled: bool = False,
    journal_enabled: bool = False,
) -> OpsData:
    """Ask the engine for this instant's plan and collect what the operation screens show.

    Raises whatever the engine raises; the caller turns it into `plan_error`.
    """
    last_runs = dict(last_compaction or {})
    plan = plan_cluster(state, now, last_compaction=last_runs)
    compaction: dict[str, CompactionView] = {}
    defrag: dict[str, DefragView] = {}
    for name in sorted(state.pools):
        checkpoint()
        pv = state.pools[name]
        pp = plan.pools.get(name)
        result = pp.compaction if pp is not None and pp.compaction is not None else CompactionResult(False)
        period, period_error = compaction_period(pv.obj)
        _, due_reason = is_due(pv.obj, now, last_runs.get(name))
        _, trigger_error = manual_trigger(pv.obj, now)
        before, after = compaction_capacity(state, name, would_release(result))
        compaction[name] = CompactionView(
            pool=name,
            provisioning=pv.provisioning_mode,
            period=period,
            period_error=period_error,
            due_reason=due_reason,
            last_run=last_runs.get(name),
            trigger_error=trigger_error,
            result=result,
            before=before,
            after=after,
        )
        checkpoint()
        defrag[name] = _defrag_view(state, name, now, pp.defrag if pp is not None else None, events)
    return OpsData(
        plan=plan,
        compaction=compaction,
        defrag=defrag,
        events=events,
        journal=journal,
        events_enabled=events_enabled,
        journal_enabled=journal_enabled,
    )


def kept_summary(kept: Sequence[Skip], limit: int = 3) -> str:
    """`has-workers 18, do-not-disrupt 1`: why nodes were kept, most common first."""
    counts: dict[str, int] = {}
    for k in kept:
        counts[k.reason] = counts.get(k.reason, 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{reason} {n}" for reason, n in ordered[:limit])
    return text + (", …" if len(ordered) > limit else "")
