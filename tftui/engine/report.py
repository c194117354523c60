"""The step-1 report (measure, diagnose, alerts), its canonical JSON, and the page's verify step (M6).

`assemble` joins the four reference-page aggregates, the diagnosis and the alert replay into one
value; `save`/`load` turn it into canonical JSON and back (same inputs → byte-identical text, so a
report can be kept and diffed); `compare(before, after)` is the reference page's "验证" section: after
a compaction period (and a defrag run) the allocation ratio of the remaining nodes should be up, the
node count down, and `WorkerTFlopsThrottled` not firing — judged overall, pool by pool and node by node.

Figures are rounded to 4 decimals when the report is assembled, so that two metrics sources that
aggregate in a different order (SQL vs Python) produce the same report, and `load(save(r)) == r`.
No file I/O here: the CLI reads and writes the text; `build_report` reads metrics only through the
port it is handed (a `Step1Port`), so the engine never imports a source.
"""

from __future__ import annotations

import functools
import json
import re
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, Protocol, Union, get_args, get_origin, get_type_hints

from tftui.engine.alerts import (
    RULES,
    RULES_BY_NAME,
    AlertHistory,
    AlertRowSource,
    evaluate_history,
    evaluation_times,
)
from tftui.engine.state import ClusterState
from tftui.engine.waste import diagnose
from tftui.engine.wastemodel import (
    Diagnosis,
    Finding,
    GPURow,
    NodeRow,
    Totals,
    WorkloadRow,
    disjoint_waste,
)
from tftui.model.duration import DurationError, format_duration, parse_duration
from tftui.model.giveway import checkpoint
from tftui.model.jsontext import dumps_indented, sorted_tree
from tftui.model.metrics import Step1

KIND: Final = "tftui.step1-report"
VERSION: Final = 1
DIGITS: Final = 4
ALERT_SPAN: Final = timedelta(hours=1)  # alert history replayed: covers IdleGPU's 30 min "for"
THROTTLE_RULE: Final = "WorkerTFlopsThrottled"
#: `Report.cluster` of a report made from the metrics alone (no kubeconfig): every object is "not in
#: the cluster", pools count the nodes that reported, and no fix (they name cluster objects) is given.
NO_CLUSTER: Final = "none (metrics only: no kubeconfig)"


class ReportError(ValueError):
    """A saved report that cannot be read back (not JSON, another kind, a missing or bad field)."""


@dataclass(frozen=True, slots=True)
class PoolRow:
    """One pool: what the verify step compares (allocation of its remaining nodes, node count)."""

    name: str
    nodes: int  # GPUNodes now
    gpus: int
    placement_mode: str | None
    tflops_capacity: float
    vram_capacity_bytes: float
    tflops_allocated_pct: float | None  # window average over its nodes still present, capacity-weighted
    vram_allocated_pct: float | None
    tflops_allocated_now_pct: float | None  # the snapshot's
    vram_allocated_now_pct: float | None
    compute_used_pct: float | None  # window average over GPUs that reported, capacity-weighted
    wasted_gpu_hours: float  # disjoint findings only (see waste.Totals)
    wasted_money: float


@dataclass(frozen=True, slots=True)
class AlertRecord:
    """A firing alert as it stands at the report's `now`."""

    rule: str
    severity: str
    instance: str
    node: str | None
    pool: str | None
    summary: str
    description: str
    runbook_url: str | None
    starts_at: datetime
    fired_at: datetime
    open_start: bool  # already seen at the first replayed evaluation: it may have started earlier


@dataclass(frozen=True, slots=True)
class RuleRecord:
    rule: str
    severity: str
    state: str  # firing | pending | ok | no-data | not-evaluated
    firing: int
    pending: int
    detail: str


@dataclass(frozen=True, slots=True)
class Report:
    source: str  # the metrics source (`Step1Port.describe()`)
    cluster: str  # the cluster source (`ClusterPort.describe()`)
    now: datetime
    window: timedelta
    alert_span: timedelta
    pools: tuple[PoolRow, ...]
    nodes: tuple[NodeRow, ...]
    gpus: tuple[GPURow, ...]
    workloads: tuple[WorkloadRow, ...]
    findings: tuple[Finding, ...]
    totals: Totals
    alerts: tuple[AlertRecord, ...]
    rules: tuple[RuleRecord, ...]
    missing: tuple[str, ...]

    def rule(self, name: str) -> RuleRecord | None:
        return next((r for r in self.rules if r.rule == name), None)

    @property
    def metrics_only(self) -> bool:
        """Made without a cluster: its objects are the ones the metrics name."""
        return self.cluster == NO_CLUSTER


def parse_window(text: str) -> timedelta:
    """A report window: a Go duration (`12h`, `90m`), optionally led by whole days (`1d`, `1d12h`).

    Go durations have no day unit; the reference page writes `'1d'::INTERVAL`, so `d` is accepted
    here (only as a leading whole number of days). Raises ValueError with a hint.
    """
    raw = text.strip()
    m = re.fullmatch(r"(\d+)d(.*)", raw)
    try:
        if m is not None:
            window = timedelta(days=int(m.group(1)))
            window += parse_duration(m.group(2)) if m.group(2) else timedelta(0)
        else:
            window = parse_duration(raw)
    except (DurationError, OverflowError) as exc:
        raise ValueError(f"{exc} (use a Go duration like 12h or 90m, or days like 1d)") from None
    if window <= timedelta(0):
        raise ValueError(f"must be positive, got {text!r}")
    return window


# -- assembly ------------------------------------------------------------------------------------


def _round(value: Any, tp: Any = None) -> Any:
    """Round every float of a dataclass tree to DIGITS decimals, by declared type.

    Numbers in `float` fields become floats whatever a source handed over (int, Decimal), so the
    saved text does not depend on it; -0.0 becomes 0.0.
    """
    float_field, item = _plan(tp)
    if float_field and value is not None and not isinstance(value, bool):
        return round(float(value), DIGITS) + 0.0
    if isinstance(value, float):
        return round(value, DIGITS) + 0.0
    if isinstance(value, tuple):
        return tuple([_round(v, item) for v in value])
    cls = type(value)
    hints = _dataclass_hints(cls)
    if hints is None:
        return value
    kw: dict[str, Any] = {}  # every field is an init field: the class itself is `replace`
    for name, hint in hints:  # the common values inline (a 5,000-node report has a million)
        v = getattr(value, name)
        t = type(v)
        if t is float:
            kw[name] = round(v, DIGITS) + 0.0
        elif t is str or t is bool or v is None or (t is int and not _plan(hint)[0]):
            kw[name] = v
        else:
            kw[name] = _round(v, hint)
    return cls(**kw)


@functools.cache
def _plan(tp: Any) -> tuple[bool, Any]:
    """(declared float, declared item type of a tuple) of a field type: the typing introspection
    is done once per type, not once per value (a 5,000-node report rounds ~500,000 values)."""
    if tp is not None and get_origin(tp) in (Union, types.UnionType):
        inner = [a for a in get_args(tp) if a is not type(None)]
        tp = inner[0] if len(inner) == 1 else None
    if tp is float:
        return True, None
    args = get_args(tp) if tp is not None and get_origin(tp) is tuple else ()
    return False, args[0] if args else None


_DATACLASS_HINTS: dict[type, tuple[tuple[str, Any], ...] | None] = {}
_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}


def _dataclass_hints(cls: type) -> tuple[tuple[str, Any], ...] | None:
    """`_hints(cls)` of a dataclass, None for any other type (memoised per class)."""
    try:
        return _DATACLASS_HINTS[cls]
    except KeyError:
        got = _DATACLASS_HINTS[cls] = _hints(cls) if is_dataclass(cls) else None
        return got


def _field_names(cls: type) -> tuple[str, ...] | None:
    """The field names of a dataclass, sorted (the saved text's key order), None for any other type."""
    if cls not in _FIELD_NAMES:
        _FIELD_NAMES[cls] = tuple(sorted(f.name for f in fields(cls))) if is_dataclass(cls) else None
    return _FIELD_NAMES[cls]


@functools.cache
def _hints(cls: type) -> tuple[tuple[str, Any], ...]:
    """(field, declared type) of a dataclass: resolved once per class (a 5,000-node report rounds
    ~80,000 records, and resolving the string annotations each time cost more than the report)."""
    hints = get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in fields(cls))


def _weighted(pairs: Iterable[tuple[float | None, float]]) -> float | None:
    num = den = 0.0
    for value, weight in pairs:
        if value is not None and weight > 0:
            num += value * weight
            den += weight
    return num / den if den > 0 else None


def _pools(state: ClusterState, diag: Diagnosis, metrics_only: bool = False) -> list[PoolRow]:
    """One row per pool; without a cluster (`metrics_only`) its nodes are those that reported
    allocation in the window, weighted alike (their capacities are the cluster's)."""
    names = set(state.pools) | {n.pool for n in diag.nodes if n.pool} | {g.pool for g in diag.gpus if g.pool}
    rows: list[PoolRow] = []
    for name in sorted(names):
        pv = state.pools.get(name)
        if metrics_only:
            reported = [n for n in diag.nodes if n.pool == name and n.hours > 0]
            node_gpus = {g.name for g in diag.gpus if g.node in {n.name for n in reported}}
            rows.append(
                PoolRow(
                    name=name, nodes=len(reported), gpus=len(node_gpus), placement_mode=None,
                    tflops_capacity=0.0, vram_capacity_bytes=0.0,
                    tflops_allocated_pct=_weighted((n.tflops_allocated_pct, 1.0) for n in reported),
                    vram_allocated_pct=_weighted((n.vram_allocated_pct, 1.0) for n in reported),
                    tflops_allocated_now_pct=None, vram_allocated_now_pct=None,
                    compute_used_pct=_weighted(
                        (g.compute_used_pct, 1.0) for g in diag.gpus if g.name in node_gpus
                    ),
                    wasted_gpu_hours=0.0, wasted_money=0.0,
                )
            )  # fmt: skip
            continue
        nodes = [n for n in diag.nodes if n.pool == name and n.in_cluster]
        caps = {n.name: state.nodes[n.name].capacity for n in nodes}
        gpus = [g for g in diag.gpus if g.pool == name and g.in_cluster]
        waste = [f for f in diag.findings if f.pool == name and disjoint_waste(f)]
        cap_t = pv.capacity.tflops if pv else sum(c.tflops for c in caps.values())
        cap_v = pv.capacity.vram if pv else sum(c.vram for c in caps.values())
        rows.append(
            PoolRow(
                name=name,
                nodes=len(pv.nodes) if pv else len(nodes),
                gpus=pv.gpu_count if pv else len(gpus),
                placement_mode=pv.placement_mode if pv else None,
                tflops_capacity=cap_t,
                vram_capacity_bytes=cap_v,
                tflops_allocated_pct=_weighted((n.tflops_allocated_pct, caps[n.name].tflops) for n in nodes),
                vram_allocated_pct=_weighted((n.vram_allocated_pct, caps[n.name].vram) for n in nodes),
                tflops_allocated_now_pct=pv.allocated.tflops / cap_t * 100.0 if pv and cap_t else None,
                vram_allocated_now_pct=pv.allocated.vram / cap_v * 100.0 if pv and cap_v else None,
                compute_used_pct=_weighted(
                    (g.compute_used_pct, state.gpus[g.name].capacity.tflops) for g in gpus
                ),
                wasted_gpu_hours=sum(f.wasted_gpu_hours or 0.0 for f in waste),
                wasted_money=sum(f.wasted_money or 0.0 for f in waste),
            )
        )
    return rows


def assemble(
    step1: Step1, state: ClusterState, alerts: AlertHistory | None, *, source: str, cluster: str
) -> Report:
    """The report of `step1` on `state`, with `alerts` replayed up to the same `now` (None: not evaluated)."""
    diag = diagnose(step1, state)
    checkpoint()
    node_pool = {n.name: n.pool for n in diag.nodes}
    records: list[AlertRecord] = []
    rules: list[RuleRecord] = []
    if alerts is not None:
        for a in alerts.firing:
            assert a.fired_at is not None
            node = a.row.get("node")
            node = str(node) if node is not None else None
            pool = a.row.get("pool")
            pool = str(pool) if pool is not None else node_pool.get(node or "")
            first = evaluation_times(RULES_BY_NAME[a.rule], alerts.now, alerts.span)[0]
            records.append(
                AlertRecord(
                    a.rule, a.severity, a.instance, node, pool, a.summary, a.description, a.runbook_url,
                    _seconds(a.starts_at), _seconds(a.fired_at), a.starts_at <= first,
                )
            )  # fmt: skip
        rules = [
            RuleRecord(s.rule, s.severity, s.state, s.firing, s.pending, s.detail) for s in alerts.statuses
        ]
    else:
        rules = [RuleRecord(r.name, r.severity, "not-evaluated", 0, 0, "") for r in RULES]
    report = Report(
        source=source,
        cluster=cluster,
        now=_seconds(step1.now),
        window=step1.window,
        alert_span=alerts.span if alerts is not None else timedelta(0),
        pools=tuple(_pools(state, diag, cluster == NO_CLUSTER)),
        nodes=diag.nodes,
        gpus=diag.gpus,
        workloads=diag.workloads,
        findings=diag.findings,
        totals=diag.totals,
        alerts=tuple(records),
        rules=tuple(rules),
        missing=tuple(sorted(set(step1.missing))),
    )
    checkpoint()
    rounded: Report = _round(report)
    checkpoint()
    return rounded


def _seconds(t: datetime) -> datetime:
    """UTC at whole seconds: what the JSON keeps, so a loaded report equals the saved one."""
    return t.astimezone(UTC).replace(microsecond=0)


class MetricsReader(AlertRowSource, Protocol):
    """The part of `Step1Port` the report reads (engine code never imports sources)."""

    def describe(self) -> str: ...

    def step1(
        self, window: timedelta, now: datetime, gpu_capacity: Mapping[str, tuple[float, float]]
    ) -> Step1: ...


def build_report(
    port: MetricsReader,
    state: ClusterState,
    *,
    window: timedelta,
    now: datetime,
    cluster: str,
    alert_span: timedelta = ALERT_SPAN,
) -> Report:
    """Run the four queries and the alert replay through `port`, then `assemble`."""
    capacity = {name: (g.capacity.tflops, g.capacity.vram) for name, g in state.gpus.items()}
    step1 = port.step1(window, now, capacity)
    history = evaluate_history(port, RULES, now=now, span=alert_span)
    return assemble(step1, state, history, source=port.describe(), cluster=cluster)


# -- JSON ----------------------------------------------------------------------------------------


_PLAIN: Final = frozenset({str, int, float, bool, type(None)})


def _encode(value: Any) -> Any:
    cls = type(value)
    if cls in _PLAIN:
        return value
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    names = _field_names(cls)
    if names is not None:
        return {name: _encode(getattr(value, name)) for name in names}
    return sorted_tree(value) if cls is dict else value


def to_json(value: Any) -> Any:
    """Plain JSON data of a report value (dataclasses → sorted objects, times → RFC 3339, durations → Go)."""
    return _encode(value)


def dumps(data: Any) -> str:
    """Canonical text: sorted keys, two-space indent, UTF-8 kept, final newline (`json.dumps`'s)."""
    return dumps_indented(sorted_tree(data)) + "\n"


def save(report: Report) -> str:
    """The report as canonical JSON, tagged with its kind and format version (`to_json` sorts below)."""
    return dumps_indented(dict(sorted({"kind": KIND, "version": VERSION, **to_json(report)}.items()))) + "\n"


def _decode(tp: Any, value: Any, path: str) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        (inner,) = [a for a in get_args(tp) if a is not type(None)]
        return _decode(inner, value, path)
    if origin is Literal:
        if value not in get_args(tp):
            raise ReportError(f"{path}: {value!r} is not one of {', '.join(map(str, get_args(tp)))}")
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise ReportError(f"{path}: expected a list")
        (inner, _ellipsis) = get_args(tp)
        return tuple(_decode(inner, v, f"{path}[{i}]") for i, v in enumerate(value))
    if isinstance(tp, type) and is_dataclass(tp):
        if not isinstance(value, dict):
            raise ReportError(f"{path}: expected an object")
        hints = get_type_hints(tp)
        kwargs: dict[str, Any] = {}
        for f in fields(tp):
            if f.name not in value:
                raise ReportError(f"{path}.{f.name}: required field is missing")
            kwargs[f.name] = _decode(hints[f.name], value[f.name], f"{path}.{f.name}")
        return tp(**kwargs)
    if tp is datetime:
        try:
            return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
        except ValueError:
            raise ReportError(f"{path}: not an RFC 3339 time: {value!r}") from None
    if tp is timedelta:
        try:
            return parse_duration(str(value))
        except DurationError as exc:
            raise ReportError(f"{path}: {exc}") from None
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ReportError(f"{path}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ReportError(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is bool or tp is str:
        if not isinstance(value, tp):
            raise ReportError(f"{path}: expected {'true/false' if tp is bool else 'a string'}, got {value!r}")
        return value
    raise ReportError(f"{path}: cannot read type {tp!r}")  # pragma: no cover - a type this module added


def load(text: str) -> Report:
    """Read `save`'s output back; raises ReportError naming the first bad field."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise ReportError(f"not a tftui report (expected kind {KIND!r}; save one with `tftui report --save`)")
    if data.get("version") != VERSION:
        raise ReportError(
            f"report format version {data.get('version')!r} is not supported (expected {VERSION})"
        )
    report: Report = _decode(Report, data, "report")
    return report
