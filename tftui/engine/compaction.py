"""Node compaction (docs/behaviour.md C1–C8): release empty GPU nodes a pool can spare.

A round walks the pool's GPUNodes most expensive first and releases every node that is idle,
unprotected, Running, at least 5 minutes old and whose loss keeps the pool at or above its
`warmResources` (available) and `minResources` (total), in TFLOPS **and** VRAM. Each release lowers
the pool figures seen by the next candidate (greedy, as upstream). Pure functions of
(state, pool, now, inputs): no clock reads, no I/O, same input → same `Plan`.

Deviations from the upstream controller, on purpose (docs/behaviour.md):

* C1 — candidates are ordered by hourly cost (GPUNode `spec.costPerHour`, else the sum of the
  node's GPU model prices, else 0), most expensive first, then by name. Upstream takes the informer
  cache's order, so which node goes when warm/min binds is random there.
* C2 — `do-not-disrupt: "true"` is honoured on the Kubernetes Node too (upstream reads only the
  GPUNode). Nodes already released (Node labelled `should-delete`, GPUNodeClaim or GPUNode
  being deleted) are kept with a reason and their GPUs are left out of the pool figures once;
  upstream re-checks them every round and subtracts them a second time. Terminating workers
  do not hold a node (upstream: held while the allocation is committed); their booking still lowers
  the pool's available figure, and as upstream the test subtracts the node's *total* (C3), so
  such a node may wait with `warm-resources` until the pod is gone. A GPUNode without a
  creationTimestamp counts as too young (Go reads the zero time as "ancient"; only hand-made dumps
  lack the field).
* C4 — a Normal `Compaction` event accompanies every release in every mode (upstream emits none
  for AutoSelect). As upstream, a provisioning mode other than AutoSelect (including an unknown
  one) deletes the GPUNodeClaim, and the pool gets the `last-sync` annotation once per round.
* C5 — an unset period is the CRD default 5m (upstream's code falls back to 1m); an unparsable,
  zero or negative period is 5m plus a Warning `CompactionConfigInvalid` (upstream: 1m, or for
  ≤ 0 a compaction on every reconcile). The manual trigger counts only within
  [now − 3 s, now + 3 s]: upstream accepts any future stamp and excludes exactly
  now − 3 s.
* Invalid `warmResources`/`minResources` quantities (the API server rejects them, so only dumps
  carry them) release nothing (`config-invalid`) and raise the same Warning; reading them as 0
  would release capacity the operator meant to keep.

When the round is not due, the same simulation still runs so the console can explain every node,
but nothing is released or emitted: the nodes the round would release are listed in `kept` with the
reason `not-due`. The `CompactionConfigInvalid` Warning is part of due rounds only, which limits it
to once per period instead of once per loop.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from tftui.engine.plan import (
    Action,
    AnnotatePool,
    CompactionResult,
    DeleteGPUNodeClaim,
    LabelNode,
    Plan,
    Release,
    Skip,
    pool_event,
    rfc3339,
)
from tftui.engine.state import ClusterState, NodeView, PoolView
from tftui.model import keys
from tftui.model.duration import DurationError, format_duration, parse_duration
from tftui.model.gcpause import without_gc
from tftui.model.giveway import checkpoint, paced
from tftui.model.quantity import QuantityError, format_quantity, quantity_value
from tftui.model.times import within_range

__all__ = [
    "AUTO_SELECT",
    "DEFAULT_PERIOD",
    "MANUAL_TRIGGER_WINDOW",
    "NEW_NODE_PROTECTION",
    "USED_BY_TF",
    "compaction_note",
    "compaction_period",
    "is_due",
    "manual_trigger",
    "parse_rfc3339",
    "plan_compaction",
    "plan_manual_compaction",
]

DEFAULT_PERIOD = timedelta(minutes=5)  # CRD default of nodeCompaction.period
NEW_NODE_PROTECTION = timedelta(minutes=5)  # GPUNodes younger than this are kept (C2)
MANUAL_TRIGGER_WINDOW = timedelta(seconds=3)  # manual-compaction stamp tolerance (C5)
USED_BY_TF = "tensor-fusion"
AUTO_SELECT = "AutoSelect"
RUNNING = "Running"
EVENT_COMPACTION = "Compaction"
EVENT_CONFIG_INVALID = "CompactionConfigInvalid"

_GI = 1 << 30
_MI = 1 << 20
# RFC 3339 date-time as Go's time.Parse(time.RFC3339, …) accepts it: upper-case T and Z, optional
# fraction of any length (Go accepts one even though the layout has none).
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:(Z)|([+-])(\d{2}):(\d{2}))\Z"
)


def compaction_note(node: str) -> str:
    """Upstream's exact note of the `Compaction` event (it names warm-up even though min is checked)."""
    return f"Node {node} is empty and deletion won't impact warm-up capacity, try terminating it"


# -- period, trigger, due ------------------------------------------------------------------------


def _node_compaction(pool_obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = pool_obj.get("spec") or {}
    return ((spec.get("nodeManagerConfig") or {}).get("nodeCompaction")) or {}


def compaction_period(pool_obj: Mapping[str, Any]) -> tuple[timedelta, str | None]:
    """C5: `nodeCompaction.period` as a Go duration, with the error text for an invalid one.

    Unset or empty → 5m, the CRD default (upstream's code falls back to 1m). Unparsable, zero or
    negative → 5m and a message naming the field for the `CompactionConfigInvalid` Warning (upstream
    uses 1m, and ≤ 0 makes it compact on every reconcile).
    """
    raw = _node_compaction(pool_obj).get("period")
    if raw is None or raw == "":
        return DEFAULT_PERIOD, None
    if not isinstance(raw, str):
        return DEFAULT_PERIOD, f"nodeCompaction.period {raw!r}: not a duration string; using 5m"
    try:
        period = parse_duration(raw)
    except DurationError as err:
        return DEFAULT_PERIOD, f'nodeCompaction.period "{raw}": {err}; using 5m'
    if period <= timedelta(0):
        return DEFAULT_PERIOD, f'nodeCompaction.period "{raw}": must be positive; using 5m'
    return period, None


def parse_rfc3339(value: str) -> datetime:
    """Strict RFC 3339 (offsets, any fraction length truncated to µs) → aware datetime.

    `datetime.fromisoformat` also takes dates without a time, spaces and week dates that Go's
    parser rejects, hence the explicit grammar.
    """
    m = _RFC3339.match(value)
    if m is None:
        raise ValueError(f"{value!r} is not an RFC 3339 timestamp")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    frac = m.group(7) or ""
    micro = int((frac + "000000")[:6])
    if m.group(8):
        tz: timezone = UTC
    else:
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:
            raise ValueError(f"{value!r}: offset out of range")
        off = timedelta(hours=oh, minutes=om)
        tz = timezone(-off if m.group(9) == "-" else off)
    try:
        dt = datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)
    except ValueError as err:
        raise ValueError(f"{value!r}: {err}") from None
    if not within_range(dt):
        raise ValueError(f"{value!r} is out of range (years 1970 to 8999)")
    return dt


def manual_trigger(pool_obj: Mapping[str, Any], now: datetime) -> tuple[bool, str | None]:
    """C5: does the `manual-compaction` annotation ask for a round now?

    True when the stamp parses as RFC 3339 and lies within [now − 3 s, now + 3 s]. Upstream accepts
    any stamp strictly after now − 3 s, so a future stamp keeps forcing rounds until it is 3 s old;
    tftui ignores stamps more than 3 s ahead. Unparsable → (False, error text); upstream
    only logs it.
    """
    ann = (pool_obj.get("metadata") or {}).get("annotations") or {}
    raw = ann.get(keys.MANUAL_COMPACTION)
    if raw is None:
        return False, None
    field = f'metadata.annotations["{keys.MANUAL_COMPACTION}"]'
    if not isinstance(raw, str):
        return False, f"{field} {raw!r}: not an RFC 3339 timestamp"
    try:
        stamp = parse_rfc3339(raw)
    except ValueError:
        return False, f'{field} "{raw}": not an RFC 3339 timestamp'
    return now - MANUAL_TRIGGER_WINDOW <= stamp <= now + MANUAL_TRIGGER_WINDOW, None


def is_due(pool_obj: Mapping[str, Any], now: datetime, last_run: datetime | None) -> tuple[bool, str]:
    """C5, as upstream: first round, elapsed period, or a fresh manual trigger.

    Reasons: `first-run`, `period-elapsed`, `manual-trigger`, `not-due`. As upstream, the
    annotation is consulted only inside the period. The runtime owns `last_run` (upstream keeps it in
    memory, so a restart compacts at once, and so does tftui's first round).
    """
    if last_run is None:
        return True, "first-run"
    period, _ = compaction_period(pool_obj)
    if now - last_run >= period:
        return True, "period-elapsed"
    if manual_trigger(pool_obj, now)[0]:
        return True, "manual-trigger"
    return False, "not-due"


# -- the round -----------------------------------------------------------------------------------


def _qvalue(raw: Any) -> int:
    """`.Value()` of a quantity field; absent → 0. Raises QuantityError/TypeError when invalid."""
    if raw is None or raw == "":
        return 0
    return quantity_value(raw)


def _tf(n: int) -> str:
    return f"{n} TFLOPS"


def _vram(n: int) -> str:
    if n % _GI == 0:
        return f"{n // _GI}Gi"
    if n % _MI == 0:
        return f"{n // _MI}Mi"
    return format_quantity(n, "BinarySI")


@dataclass(slots=True)
class _Totals:
    """Upstream's four accumulators (integers after `.Value()`), lowered by each release."""

    avail_t: int = 0
    avail_v: int = 0
    total_t: int = 0
    total_v: int = 0


@dataclass(frozen=True, slots=True)
class _Limits:
    warm_t: int
    warm_v: int
    min_t: int
    min_v: int
    errors: tuple[str, ...]


def _limits(pool_obj: Mapping[str, Any]) -> _Limits:
    cc = (pool_obj.get("spec") or {}).get("capacityConfig") or {}
    out: dict[str, int] = {}
    errors: list[str] = []
    for section, short in (("warmResources", "warm"), ("minResources", "min")):
        res = cc.get(section) or {}
        for field, suffix in (("tflops", "t"), ("vram", "v")):
            raw = res.get(field)
            try:
                out[f"{short}_{suffix}"] = _qvalue(raw)
            except (QuantityError, TypeError, ValueError):
                out[f"{short}_{suffix}"] = 0
                errors.append(f"capacityConfig.{section}.{field} {raw!r}: invalid quantity")
    return _Limits(out["warm_t"], out["warm_v"], out["min_t"], out["min_v"], tuple(errors))


def _node_labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _released_detail(state: ClusterState, node: NodeView) -> str | None:
    """Why `node` already counts as released (C2), or None."""
    if _node_labels(node.node_obj).get(keys.SHOULD_DELETE) == keys.TRUE:
        return f"Node labelled {keys.SHOULD_DELETE}=true"
    if node.claim:
        claim = state.claims.get(node.claim)
        ts = ((claim or {}).get("metadata") or {}).get("deletionTimestamp")
        if ts:
            return f"GPUNodeClaim {node.claim} is being deleted (since {ts})"
    ts = (node.obj.get("metadata") or {}).get("deletionTimestamp")
    if ts:
        return f"GPUNode is being deleted (since {ts})"
    return None


def released_detail(state: ClusterState, node: NodeView) -> str | None:
    """Why `node` is on its way out (released by compaction: should-delete, claim or GPUNode
    being deleted), or None: what the console shows as `Releasing`."""
    return _released_detail(state, node)


def _pool_totals(state: ClusterState, pool: str, released: Collection[str]) -> _Totals:
    """C3's available and total over the GPUs labelled with `pool`, leaving out already-released nodes.

    The per-node sums are indexed by `ClusterState.build` (`compaction_sums`), so this is O(nodes).
    """
    t = _Totals()
    for node, (avail_t, avail_v, total_t, total_v) in state.compaction_sums.get(pool, {}).items():
        if node in released:
            continue
        t.avail_t += avail_t
        t.avail_v += avail_v
        t.total_t += total_t
        t.total_v += total_v
    return t


def _hourly_cost(state: ClusterState, node: NodeView, prices: Mapping[str, float]) -> float:
    """C1: `spec.costPerHour`, else the sum of the node's GPU model prices, else 0."""
    if node.cost_per_hour is not None:
        return node.cost_per_hour
    return sum(prices.get(state.gpus[g].model, 0.0) for g in node.gpus)


def _candidates(state: ClusterState, pool: PoolView, prices: Mapping[str, float]) -> list[NodeView]:
    nodes = [state.nodes[n] for n in pool.nodes]
    return sorted(nodes, key=lambda n: (-_hourly_cost(state, n, prices), n.name))


def _dnd_detail(node: NodeView) -> str:
    on = [
        where
        for where, obj in (("GPUNode", node.obj), ("Kubernetes Node", node.node_obj))
        if _node_labels(obj).get(keys.DO_NOT_DISRUPT) == keys.TRUE
    ]
    return f"{keys.DO_NOT_DISRUPT}=true on the {' and the '.join(on) or 'node'}"


def _state_keep(state: ClusterState, node: NodeView) -> Skip | None:
    """The C2 checks that do not depend on the pool figures, in a fixed order: first those that
    depend on the state alone (kept per state by `_scan`), then `_timed_keep`."""
    if node.do_not_disrupt:
        return Skip(node.name, "do-not-disrupt", _dnd_detail(node))
    active = sorted(w for w in node.workers if not state.workers[w].terminating)
    if active:
        shown = ", ".join(active[:3]) + (", …" if len(active) > 3 else "")
        return Skip(node.name, "has-workers", f"{len(active)} TensorFusion worker(s): {shown}")
    if node.phase != RUNNING:
        return Skip(node.name, "not-running", f"GPUNode phase {node.phase}")
    if node.created is None:
        return Skip(node.name, "too-young", "GPUNode has no creationTimestamp")
    return None


def _timed_keep(node: NodeView, now: datetime, n_t: int, n_v: int) -> Skip | None:
    """The last C2 checks, after `_state_keep` passed: age, then capacity."""
    assert node.created is not None
    age = now - node.created
    if age < NEW_NODE_PROTECTION:
        return Skip(
            node.name,
            "too-young",
            f"created {format_duration(max(age, timedelta(0)))} ago (< {format_duration(NEW_NODE_PROTECTION)})",
        )
    if n_t <= 0 or n_v <= 0:
        return Skip(node.name, "zero-capacity", f"status.totalTFlops {n_t}, status.totalVRAM {_vram(n_v)}")
    return None


def _capacity_keep(node: str, t: _Totals, lim: _Limits, n_t: int, n_v: int) -> Skip | None:
    """C3: all four of available − node ≥ warm and total − node ≥ min, TFLOPS and VRAM."""
    warm: list[str] = []
    if t.avail_t - n_t < lim.warm_t:
        warm.append(f"available {_tf(t.avail_t)} − node {n_t} < warm {lim.warm_t}")
    if t.avail_v - n_v < lim.warm_v:
        warm.append(f"available {_vram(t.avail_v)} − node {_vram(n_v)} < warm {_vram(lim.warm_v)}")
    low: list[str] = []
    if t.total_t - n_t < lim.min_t:
        low.append(f"total {_tf(t.total_t)} − node {n_t} < min {lim.min_t}")
    if t.total_v - n_v < lim.min_v:
        low.append(f"total {_vram(t.total_v)} − node {_vram(n_v)} < min {_vram(lim.min_v)}")
    if warm:
        return Skip(node, "warm-resources", "; ".join(warm + low))
    if low:
        return Skip(node, "min-resources", "; ".join(low))
    return None


def _node_totals(node: NodeView) -> tuple[int, int]:
    """`status.totalTFlops/totalVRAM` `.Value()` of the GPUNode; absent or invalid → 0 (kept)."""
    status = node.obj.get("status") or {}
    out: list[int] = []
    for key in ("totalTFlops", "totalVRAM"):
        try:
            out.append(_qvalue(status.get(key)))
        except (QuantityError, TypeError, ValueError):
            out.append(0)
    return out[0], out[1]


@dataclass(slots=True)
class _Scan:
    """What a round reads from the state alone, derived once per state, pool and price table (the
    runtime reconciles every pool every few minutes over a state that rarely changed). Read-only."""

    candidates: list[NodeView]  # dearest first
    released_before: dict[str, str]  # node → why it already counts as released
    totals: dict[str, tuple[int, int]]  # candidate → its status totals (TFLOPS, VRAM)
    keep: dict[str, Skip | None]  # candidate → `_state_keep`


def _scan(state: ClusterState, pv: PoolView, prices: Mapping[str, float]) -> _Scan:
    scans: dict[tuple[str, tuple[tuple[str, float], ...]], _Scan] = state.derived(
        "compaction-scan", lambda st: {}
    )
    key = (pv.name, tuple(prices.items()))
    got = scans.get(key)
    if got is None:
        released: dict[str, str] = {}
        for name in paced(set(pv.nodes).union(state.compaction_sums.get(pv.name, ()))):
            node = state.nodes.get(name)
            if node is None:
                continue
            detail = _released_detail(state, node)
            if detail is not None:
                released[node.name] = detail
        checkpoint()
        candidates = _candidates(state, pv, prices)
        checkpoint()
        # per node, re-used from an earlier state while the node's view is the same: both read
        # only the view (and, for `_state_keep`, its workers', whose change makes a new view)
        names = [n.name for n in candidates]
        got = scans[key] = _Scan(
            candidates,
            released,
            state.derived_per_node(f"compaction-totals/{pv.name}", names, lambda _st, n: _node_totals(n)),
            state.derived_per_node(f"compaction-keep/{pv.name}", names, _state_keep),
        )
    return got


@without_gc
def plan_compaction(
    state: ClusterState,
    pool: str,
    now: datetime,
    *,
    last_run: datetime | None = None,
    force: bool = False,
    prices: Mapping[str, float] | None = None,
) -> Plan:
    """One compaction round of `pool` (C1–C4, C6, C7) as a Plan.

    `last_run` is when the runtime last ran a round of this pool (None: never); `force` runs it
    regardless (the console's manual key on the embedded cluster). `prices` maps full GPU model
    names (`GPU.status.gpuModel`) to $/h per GPU, for nodes without `spec.costPerHour`.
    """
    pv = state.pools.get(pool)
    if pv is None:
        raise KeyError(f"GPUPool {pool!r} not in the cluster state")
    prices = prices or {}
    plan = Plan(now=now)
    due = True if force else is_due(pv.obj, now, last_run)[0]
    period, period_error = compaction_period(pv.obj)
    limits = _limits(pv.obj)
    errors = ([period_error] if period_error else []) + list(limits.errors)

    scan = _scan(state, pv, prices)
    candidates, released_before = scan.candidates, scan.released_before
    totals = _pool_totals(state, pool, set(released_before))
    checkpoint()
    auto_select = pv.provisioning_mode == AUTO_SELECT

    result = CompactionResult(due=due)
    actions: list[Action] = []
    next_round = f"next round at {rfc3339(last_run + period)}" if last_run is not None else "next round"
    for node in paced(candidates, 64):
        if node.name in released_before:
            result.kept.append(Skip(node.name, "already-released", released_before[node.name]))
            continue
        n_t, n_v = scan.totals[node.name]
        skip = scan.keep[node.name]
        if skip is None:
            skip = _timed_keep(node, now, n_t, n_v)
        if skip is None and not auto_select:
            # Checked before the capacity test (upstream: after it); either way such a node is
            # never consumed, so the released set is the same and the reason is the lasting one.
            if not node.claim:
                skip = Skip(node.name, "no-claim", f"no {keys.NODE_PROVISIONER} label")
            elif node.claim not in state.claims:
                skip = Skip(node.name, "no-claim", f"GPUNodeClaim {node.claim} not found")
        if skip is None and limits.errors:
            skip = Skip(node.name, "config-invalid", "; ".join(limits.errors))
        if skip is None:
            skip = _capacity_keep(node.name, totals, limits, n_t, n_v)
        if skip is not None:
            result.kept.append(skip)
            continue
        totals.avail_t -= n_t
        totals.avail_v -= n_v
        totals.total_t -= n_t
        totals.total_v -= n_v
        if not due:
            result.kept.append(Skip(node.name, "not-due", f"would be released; {next_round}"))
            continue
        if auto_select:
            result.released.append(Release(node.name, "label-should-delete"))
            actions.append(LabelNode(node.name, {keys.SHOULD_DELETE: keys.TRUE}))
        else:
            claim = node.claim or ""
            result.released.append(Release(node.name, f"delete-gpunodeclaim {claim}"))
            actions.append(DeleteGPUNodeClaim(claim))
        actions.append(pool_event(pool, "Normal", EVENT_COMPACTION, compaction_note(node.name)))

    if due:
        plan.actions.extend(pool_event(pool, "Warning", EVENT_CONFIG_INVALID, e) for e in errors)
        plan.actions.extend(actions)
        if result.released and not auto_select:
            plan.actions.append(AnnotatePool(pool, {keys.LAST_SYNC: rfc3339(now)}))
    plan.pool(pool).compaction = result
    return plan


def plan_manual_compaction(
    state: ClusterState, pool: str, now: datetime, *, prices: Mapping[str, float] | None = None
) -> tuple[Plan, AnnotatePool]:
    """The console's manual-compaction key: the annotation stamping `now`, and the forced round.

    On a live cluster the runtime writes only the annotation (the controller, or tftui's daemon, then
    runs the round); on the embedded cluster it applies the plan at once. The plan lets the confirm
    dialog list exactly what would be released. The annotation is not part of `plan.actions`.
    """
    plan = plan_compaction(state, pool, now, force=True, prices=prices)
    return plan, AnnotatePool(pool, {keys.MANUAL_COMPACTION: rfc3339(now)})
