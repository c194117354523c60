"""Defrag (Strategy #2): drain lightly used GPU nodes, one worker per step, so compaction can release them.

Contract: docs/behaviour.md D1–D12 and the reference page's step 5; where silent, upstream's defrag. Every
function here is pure — (state, pool, now) in, a `Plan` out — so the console previews exactly what the
runtime would do. One call is one controller step: safety sweep, guards, campaign window, then at most
one eviction.

Deliberate differences from the TensorFusion controller (each also in the README):

- **One pod per step** (D5; upstream evicts every worker of the node back to back). A node
  that carries this pool's `defrag-source` marker and still has workers is the campaign's current
  source: instead of upstream's `DefragBlockedBySourceNode` pause, its remaining workers are re-simulated
  and the next one is evicted. If they no longer fit, or the node lost its eligibility (protected,
  cordoned, a fresh worker landed on it, …), the drain is abandoned and the marker cleared.
- **PDB count rule** (D6; upstream only checks `> 0`): every PDB must allow as many disruptions as the
  node has pods it covers, so a drain is never started that a 429 would stop half-way.
- **do-not-disrupt** is read from the GPUNode *or* the Node (D3/C2; upstream reads the GPUNode only).
- **Simulation** (D4) runs on `ClusterState` instead of a scheduler snapshot: cordoned nodes are
  excluded explicitly, the GPU choice inside a target uses CompactFirst 0.5/0.5 GPU scores instead of
  upstream's zero-weight (arbitrary) choice, workers go largest first instead of map order, and ties go
  to the node name (upstream: first evaluated); a target must also pass kube-scheduler's node fit
  (CPU, memory, pod slots: `engine.nodefit`), which upstream's snapshot simulation also runs.
  Isolation modes and partitions are filtered and booked as placement does; the namespace quota is
  not checked (a move leaves its usage as it was) and topology is not simulated; GPUs without a
  reported capacity are ignored instead of failing the whole target, and GPUNodes being deleted are
  not targets. Utilisation counts the GPUs labelled for the pool (`tensor-fusion.ai/gpupool`), as
  upstream.
- A source marker without `-since` is cleared once its node is empty (upstream never clears it and
  blocks the pool forever; D9). Native-GPU pods that are terminating or finished do not block.
- A terminating worker on one of this pool's source nodes blocks like a `defrag-evicted` pod, and the
  source marker stays until it is gone (or stale): the eviction comes before the pod's marker, so a
  crash between the two must not let the next step evict without waiting (see `_sweep`).
- Events: `DefragStarted` marks the start of a node's drain (upstream: every step with candidates);
  `DefragFinished` (with upstream's stats line) closes a step that had candidates but evicted nothing.
  D7 ("emit on state change") and D1's "once per distinct error" are the runtime's job: a plan lists the
  events its step would emit, and the runtime drops repeats.
- Unparsable marker TTLs fall back to their defaults, like `maxDuration`; a TTL ≤ 0 means `never`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from tftui.engine import cron
from tftui.engine.fit import (
    DEFRAG_WEIGHTS,
    Request,
    RequestError,
    gpu_level_score,
    reject_reason,
)
from tftui.engine.nodefit import node_fit, pod_requests
from tftui.engine.plan import (
    Action,
    AnnotateNode,
    AnnotatePod,
    Candidate,
    DefragResult,
    Eviction,
    EvictPod,
    LabelNode,
    LabelPod,
    PatchPoolStatus,
    Plan,
    Skip,
    pool_event,
    rfc3339,
)
from tftui.engine.state import ClusterState, GPUView, NodeView, PartitionUse, Res, WorkerView, parse_time
from tftui.model import keys
from tftui.model.duration import DurationError, format_duration, parse_duration
from tftui.model.gcpause import gc_paused
from tftui.model.provider import ProviderCatalog
from tftui.model.selectors import selector_matches
from tftui.model.times import time_problem
from tftui.model.zones import load_zone

__all__ = [
    "DEFAULT_MAX_DURATION",
    "DEFAULT_MAX_WORKERS_PER_NODE",
    "DEFAULT_SOURCE_TTL",
    "DEFAULT_THRESHOLD",
    "DefragConfig",
    "WindowState",
    "campaign_window",
    "defrag_spec",
    "evict_refused",
    "plan_defrag",
    "validate_defrag",
]

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
    """D6: empty selectors cover nothing."""
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


# -- markers -------------------------------------------------------------------------------------


def _clear_source(node: str) -> list[Action]:
    return [
        LabelNode(node, {keys.DEFRAG_SOURCE: None}),
        AnnotateNode(node, {keys.DEFRAG_SOURCE_POOL: None, keys.DEFRAG_SOURCE_SINCE: None}),
    ]


def _clear_evict_skip(node: str) -> list[Action]:
    return [
        LabelNode(node, {keys.DEFRAG_EVICT_SKIP: None}),
        AnnotateNode(
            node,
            {
                keys.DEFRAG_EVICT_SKIP_POOL: None,
                keys.DEFRAG_EVICT_SKIP_SINCE: None,
                keys.DEFRAG_EVICT_SKIP_REASON: None,
            },
        ),
    ]


def _clear_evicted(namespace: str, name: str) -> list[Action]:
    return [
        LabelPod(namespace, name, {keys.DEFRAG_EVICTED: None}),
        AnnotatePod(namespace, name, {keys.DEFRAG_EVICTED_POOL: None, keys.DEFRAG_EVICTED_SINCE: None}),
    ]


# -- per-call index ------------------------------------------------------------------------------


class _Index:
    """The pool-independent part of a step's index, derived once per `ClusterState` (the state
    never changes after `build`), so the steps of every pool and every quiet reconcile share it.
    What only a due campaign reads (workers per node, PDBs) is built on first use."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.k8s_nodes: dict[str, dict[str, Any]] = {}
        for n in state.snapshot.kind("Node"):
            self.k8s_nodes[_meta(n).get("name", "")] = n
        # what the safety sweep looks at: pods labelled defrag-evicted (by namespace, name) and the
        # Nodes labelled defrag-source or defrag-evict-skip (by name); the rest cannot carry a marker
        evicted = state.pods_labelled(keys.DEFRAG_EVICTED, keys.TRUE)
        self.evicted_pods = sorted(
            evicted, key=lambda o: (_meta(o).get("namespace", ""), _meta(o).get("name", ""))
        )
        self.marked_nodes = sorted(
            name
            for name, n in self.k8s_nodes.items()
            if _labels(n).get(keys.DEFRAG_SOURCE) == keys.TRUE
            or _labels(n).get(keys.DEFRAG_EVICT_SKIP) == keys.TRUE
        )
        self._workers: dict[str, tuple[list[WorkerView], list[WorkerView]]] = {}
        self._elsewhere: dict[str, tuple[list[WorkerView], list[WorkerView]]] | None = None
        self._terminating: set[str] | None = None
        self._pdbs: (
            tuple[
                dict[str, dict[tuple[str, str], list[tuple[int, dict[str, Any]]]]],
                dict[str, list[tuple[int, dict[str, Any]]]],
            ]
            | None
        ) = None

    def workers_on(self, node: str) -> tuple[list[WorkerView], list[WorkerView]]:
        """(live, terminating) workers on `node`, sorted by key."""
        got = self._workers.get(node)
        if got is not None:
            return got
        nv = self.state.nodes.get(node)
        if nv is not None:  # a GPUNode lists every worker whose spec.nodeName names it
            views = sorted((self.state.workers[k] for k in nv.workers), key=lambda w: w.key)
            got = ([w for w in views if not w.terminating], [w for w in views if w.terminating])
        else:  # a Node without a GPUNode: found by a scan, once per state
            if self._elsewhere is None:
                self._elsewhere = {}
                for w in sorted(self.state.workers.values(), key=lambda w: w.key):
                    if w.node and w.node not in self.state.nodes:
                        live, leaving = self._elsewhere.setdefault(w.node, ([], []))
                        (leaving if w.terminating else live).append(w)
            got = self._elsewhere.get(node, ([], []))
        self._workers[node] = got
        return got

    @property
    def terminating_pods(self) -> set[str]:
        if self._terminating is None:
            out = set()
            for p in self.state.snapshot.kind("Pod"):
                m = _meta(p)
                if m.get("deletionTimestamp"):
                    out.add(f"{m.get('namespace', '')}/{m.get('name')}")
            self._terminating = out
        return self._terminating

    @property
    def pdbs(
        self,
    ) -> tuple[
        dict[str, dict[tuple[str, str], list[tuple[int, dict[str, Any]]]]],
        dict[str, list[tuple[int, dict[str, Any]]]],
    ]:
        """PDBs by namespace, then by one of their matchLabels pairs (so a pod only tests PDBs that
        can match it), and PDBs with matchExpressions only, tested for every pod. Values: (rank, PDB)."""
        if self._pdbs is None:
            pairs: dict[str, dict[tuple[str, str], list[tuple[int, dict[str, Any]]]]] = {}
            scan: dict[str, list[tuple[int, dict[str, Any]]]] = {}
            ranked = sorted(
                self.state.pdbs, key=lambda o: (_meta(o).get("namespace", ""), _meta(o).get("name", ""))
            )
            for rank, pdb in enumerate(ranked):
                ns = _meta(pdb).get("namespace", "")
                selector = (pdb.get("spec") or {}).get("selector")
                ml = selector.get("matchLabels") if isinstance(selector, dict) else None
                if isinstance(ml, dict) and ml:
                    pair = min(ml.items())
                    pairs.setdefault(ns, {}).setdefault(pair, []).append((rank, pdb))
                else:
                    scan.setdefault(ns, []).append((rank, pdb))
            self._pdbs = (pairs, scan)
        return self._pdbs


@dataclass(slots=True)
class _Ctx:
    """What one step needs from the snapshot: the state's shared `_Index` (all lists sorted by
    name; read-only) plus this step's pool, config and time."""

    state: ClusterState
    pool: str
    cfg: DefragConfig
    now: datetime
    max_workers: int
    index: _Index

    @property
    def k8s_nodes(self) -> dict[str, dict[str, Any]]:
        return self.index.k8s_nodes

    @property
    def terminating_pods(self) -> set[str]:
        return self.index.terminating_pods

    def active(self, node: str) -> list[WorkerView]:
        """The node's live workers, sorted by key."""
        return self.index.workers_on(node)[0]

    def leaving(self, node: str) -> list[WorkerView]:
        """The node's terminating workers, sorted by key."""
        return self.index.workers_on(node)[1]

    @classmethod
    def build(
        cls, state: ClusterState, pool: str, cfg: DefragConfig, now: datetime, max_workers: int
    ) -> _Ctx:
        return cls(state, pool, cfg, now.astimezone(UTC), max_workers, state.derived("defrag", _Index))

    def event(self, type_: Literal["Normal", "Warning"], reason: str, message: str) -> Action:
        return pool_event(self.pool, type_, reason, message)

    def covering(self, w: WorkerView) -> list[dict[str, Any]]:
        """PDBs (non-empty selector) in the worker's namespace that select it."""
        labels = _labels(w.obj)
        pdb_pairs, pdb_scan = self.index.pdbs
        pairs = pdb_pairs.get(w.namespace, {})
        maybe = list(pdb_scan.get(w.namespace, ()))
        for item in labels.items():
            maybe += pairs.get(item, ())
        maybe.sort(key=lambda rp: rp[0])
        return [p for _, p in maybe if _selector_matches((p.get("spec") or {}).get("selector"), labels)]

    def owned(self, obj: dict[str, Any] | None, label: str, pool_key: str) -> bool:
        return _labels(obj).get(label) == keys.TRUE and _annotations(obj).get(pool_key) == self.pool

    def fresh(self, w: WorkerView) -> bool:
        created = _aware(w.created)
        return created is not None and self.now - created < self.cfg.max_duration


# -- node figures ----------------------------------------------------------------------------------


def _pool_gpus(state: ClusterState, node: NodeView, pool: str) -> list[GPUView]:
    """The node's GPUs that count for `pool` (D3, as upstream): labelled for the pool
    (`tensor-fusion.ai/gpupool`, as compaction counts them), TF-usable, capacity set.
    Derived once per state and pool (read-only)."""
    per_node: dict[str, list[GPUView]] = state.derived(
        f"defrag-pool-gpus/{pool}",
        lambda st: {n.name: _node_pool_gpus(st, n, pool) for n in st.nodes_of(pool)},
    )
    got = per_node.get(node.name)
    return got if got is not None else _node_pool_gpus(state, node, pool)


def _node_pool_gpus(state: ClusterState, node: NodeView, pool: str) -> list[GPUView]:
    out = []
    for g in sorted(state.gpus_of(node.name), key=lambda g: g.name):
        cap = (g.obj.get("status") or {}).get("capacity") or {}
        if (
            (g.obj["metadata"].get("labels") or {}).get(keys.GPUPOOL) == pool
            and g.used_by in ("", USED_BY_TF)
            and cap.get("tflops") is not None
            and cap.get("vram") is not None
        ):
            out.append(g)
    return out


def _is_used(capacity: Res, available: Res) -> bool:
    """D3 (upstream's definition): used when available < capacity in TFLOPS or VRAM."""
    return available.tflops < capacity.tflops or available.vram < capacity.vram


def _util(used: int, total: int) -> float:
    return used * 100.0 / total if total else 0.0


def gpu_utilization(state: ClusterState, node: NodeView, pool: str) -> tuple[int, int]:
    """(GPUs in use, GPUs that count) of `node` for `pool`: the utilization defrag compares with
    its threshold (the share of the node's pool GPUs with something allocated, not TFLOPS)."""
    gpus = _pool_gpus(state, node, pool)
    return sum(1 for g in gpus if _is_used(g.capacity, g.available)), len(gpus)


# -- eligibility (D3) ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Eligible:
    node: NodeView
    util: float
    workers: list[WorkerView]  # active, sorted by key


def _gate(ctx: _Ctx, node: NodeView, *, drain: bool) -> tuple[_Eligible | None, Skip | None, Action | None]:
    """D3 checks, upstream's order; `drain` (a source being continued) skips the threshold and idle gates."""
    k8s = ctx.k8s_nodes.get(node.name)
    name = node.name
    if node.do_not_disrupt:
        where = "GPUNode" if _labels(node.obj).get(keys.DO_NOT_DISRUPT) == keys.TRUE else "Node"
        return None, Skip(name, "do-not-disrupt", f"{where} label {keys.DO_NOT_DISRUPT}=true"), None
    if _meta(node.obj).get("deletionTimestamp"):
        return None, Skip(name, "not-running", "GPUNode is being deleted"), None
    if node.phase != "Running":
        return None, Skip(name, "not-running", f"GPUNode phase {node.phase}"), None
    if k8s is None:
        return None, Skip(name, "not-running", "no Kubernetes Node"), None
    if node.unschedulable:
        return None, Skip(name, "cordoned", "spec.unschedulable=true"), None
    if ctx.owned(k8s, keys.DEFRAG_EVICT_SKIP, keys.DEFRAG_EVICT_SKIP_POOL):
        reason = _annotations(k8s).get(keys.DEFRAG_EVICT_SKIP_REASON, "")
        return None, Skip(name, "evict-skip", reason), None
    used, total = gpu_utilization(ctx.state, node, ctx.pool)
    util = _util(used, total)
    if not drain:
        if not total:
            return None, Skip(name, "idle", "no pool GPUs"), None
        if used == 0:
            return None, Skip(name, "idle", "no GPU in use; left to node compaction"), None
        if util > ctx.cfg.threshold:
            return (
                None,
                Skip(name, "above-threshold", f"utilization {_fmt_pct(util)}% > {ctx.cfg.threshold:g}%"),
                None,
            )
    native = [p for p in node.native_gpu_pods if p not in ctx.terminating_pods]
    if native:
        return (
            None,
            Skip(name, "native-gpu-pod", f"pod {sorted(native)[0]} uses GPUs outside TensorFusion"),
            None,
        )
    workers = ctx.active(name)
    if not workers:
        return None, Skip(name, "no-workers", ""), None
    for w in workers:
        if ctx.fresh(w):
            age = format_duration(ctx.now - (_aware(w.created) or ctx.now))
            detail = (
                f"pod {w.key} is {age} old, younger than maxDuration {format_duration(ctx.cfg.max_duration)}"
            )
            return None, Skip(name, "fresh-worker", detail), None
    for w in workers:
        if not ctx.covering(w):
            msg = (
                f"node {name} skipped from defrag: pod {w.namespace}/{w.name} has no PodDisruptionBudget "
                "covering it; please add a PDB to enable safe defrag"
            )
            return (
                None,
                Skip(name, "missing-pdb", f"pod {w.key} has no PodDisruptionBudget"),
                ctx.event("Warning", "DefragSkipMissingPDB", msg),
            )
    return _Eligible(node, util, workers), None, None


# -- joint placement simulation (D4) -------------------------------------------------------------


@dataclass(slots=True)
class _Target:
    node: str
    gpus: list[GPUView]
    avail: dict[str, Res]
    used: int
    workers: int
    scores: dict[str, int] = field(default_factory=dict)  # GPU-level scores at `avail` (memo)
    order: list[GPUView] = field(default_factory=list)  # `gpus` by score (best first), then name
    max_t: float = 0.0  # the largest available TFLOPS and VRAM among `gpus` (`reorder`)
    max_v: float = 0.0
    catalog: ProviderCatalog = field(default_factory=ProviderCatalog)
    parts: dict[str, list[PartitionUse]] = field(default_factory=dict)  # partitions booked here

    def copy(self) -> _Target:
        return _Target(
            self.node,
            self.gpus,
            dict(self.avail),
            self.used,
            self.workers,
            dict(self.scores),
            self.order,
            self.max_t,
            self.max_v,
            self.catalog,
            dict(self.parts),
        )

    def reject(self, g: GPUView, req: Request) -> str | None:
        return reject_reason(g, self.avail[g.name], req, self.catalog, self.parts.get(g.name))

    def book(self, g: GPUView, req: Request, worker: str) -> None:
        """Take one device of `req` from `g` in this simulation."""
        self.avail[g.name] = self.avail[g.name] - req.take_on(g, self.catalog)
        if req.partition:
            self.parts[g.name] = [*self.parts.get(g.name, g.partitions), PartitionUse(worker, req.partition)]

    def filter_reject(self, req: Request) -> str:
        """Why no `req.count` GPUs of this target pass the filters (upstream's allocator-filter)."""
        reasons = [self.reject(g, req) for g in self.gpus]
        fits = sum(r is None for r in reasons)
        detail = f"filtered={fits} required={req.count}"
        failed = _filter_summary(r for r in reasons if r is not None)
        return f"{self.node}:allocator-filter({detail}{' ' + failed if failed else ''})"

    def reorder(self) -> None:
        """Sort the GPUs by score at the current availabilities; note the largest availabilities
        (a request above them fits no GPU here, whatever the other filters say)."""
        self.order = sorted(self.gpus, key=lambda g: (-self.rank(g), g.name))
        self.max_t = max((a.tflops for a in self.avail.values()), default=0.0)
        self.max_v = max((a.vram for a in self.avail.values()), default=0.0)

    def rank(self, g: GPUView) -> int:
        """The GPU's CompactFirst score at its current availability in this simulation."""
        s = self.scores.get(g.name)
        if s is None:
            s = self.scores[g.name] = gpu_level_score(
                "CompactFirst", g.capacity, self.avail[g.name], DEFRAG_WEIGHTS
            )
        return s

    @property
    def util(self) -> float:
        return _util(self.used, len(self.gpus))

    def describe(self) -> str:
        t = len(self.gpus)
        return f"{self.node}(t={t},u={self.used},f={t - self.used})"


@dataclass(slots=True)
class _Simulation:
    placements: dict[str, tuple[str, list[str]]]  # worker key → (target node, GPU names)
    failed: WorkerView | None = None
    summary: str = ""


def _budget(ctx: _Ctx, source: str) -> tuple[list[_Target], list[str]]:
    """Other pool nodes a worker may move to, and why the rest may not (D4, upstream's budget rules).
    The pool's nodes are judged once per state (`_judged`): the targets are shared, read-only; a
    simulation books on copies of them."""
    targets: list[_Target] = []
    excluded: list[str] = []
    judged: list[tuple[str, str | None, _Target | None]] = ctx.state.derived(
        f"defrag-budget/{ctx.pool}", lambda st: _judged(ctx)
    )
    for name, reason, t in judged:
        if name == source:
            continue
        if t is not None:
            targets.append(t)
        else:
            excluded.append(f"{name}({reason})")
    return targets, excluded


def _judged(ctx: _Ctx) -> list[tuple[str, str | None, _Target | None]]:
    """Every pool node by name: why it cannot be a target, or the target it is (state-only)."""
    out: list[tuple[str, str | None, _Target | None]] = []
    for node in sorted(ctx.state.nodes_of(ctx.pool), key=lambda n: n.name):
        k8s = ctx.k8s_nodes.get(node.name)
        reason = None
        if k8s is None:
            reason = "not in scheduler snapshot"
        elif _meta(node.obj).get("deletionTimestamp"):
            reason = "deleting"
        elif node.unschedulable:
            reason = "cordoned"
        elif _labels(k8s).get(keys.SHOULD_DELETE) == keys.TRUE:
            reason = "deletion-marked"
        elif _labels(k8s).get(keys.DEFRAG_SOURCE) == keys.TRUE:
            reason = "defrag-source-marked"
        gpus = _pool_gpus(ctx.state, node, ctx.pool) if reason is None else []
        if reason is None and not gpus:
            reason = "no pool GPUs"
        if reason is None:
            avail = {g.name: g.available for g in gpus}
            used = sum(1 for g in gpus if _is_used(g.capacity, avail[g.name]))
            if used == 0:
                reason = f"empty node (t={len(gpus)},u=0,f={len(gpus)})"
            else:
                t = _Target(
                    node.name, gpus, avail, used, len(ctx.active(node.name)), catalog=ctx.state.providers
                )
                t.reorder()  # every simulation over this state starts from these scores
                out.append((node.name, None, t))
        if reason is not None:
            out.append((node.name, reason, None))
    return out


def _size_key(w: WorkerView) -> tuple[float, float, str]:
    """Largest first: TFLOPS × devices, then VRAM × devices, then name (D4)."""
    return (-w.request.tflops * w.gpu_count, -w.request.vram * w.gpu_count, w.key)


def _filter_summary(reasons: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for r in reasons:
        counts[r] = counts.get(r, 0) + 1
    return ",".join(f"{k}={v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _simulate(ctx: _Ctx, source: str, source_util: float, workers: Sequence[WorkerView]) -> _Simulation:
    """Place every worker of `source` on the budget, all or nothing; raises RequestError on bad requests."""
    shared, excluded = _budget(ctx, source)
    own: dict[str, _Target] = {}  # copies of the targets this simulation booked workers on
    sim = _Simulation({})
    room = node_fit(ctx.state)  # kube-scheduler's node fit, with this simulation's moves booked
    for w in sorted(workers, key=_size_key):
        req = Request.of_worker(w)
        pod = pod_requests(w.obj)
        best: tuple[int, _Target, list[GPUView]] | None = None
        rejects: list[str | _Target] = []  # a target: its allocator-filter text, made if shown
        targets = [own.get(t.node, t) for t in shared] if own else shared
        need_t = (req.tflops or 0.0) if req.compute_percent is None else 0.0
        for t in targets:
            if ctx.max_workers > 0 and t.workers >= ctx.max_workers:
                rejects.append(f"{t.node}:max-worker-per-node(workers={t.workers} max={ctx.max_workers})")
                continue
            if t.util < source_util:
                rejects.append(
                    f"{t.node}:monotonicity(targetUtil={_fmt_pct(t.util)} sourceUtil={_fmt_pct(source_util)})"
                )
                continue
            if req.vram > t.max_v or need_t > t.max_t:  # no GPU has the room
                rejects.append(t)
                continue
            if (why := room.refuse(t.node, pod)) is not None:  # the scheduler would not bind it here
                rejects.append(f"{t.node}:node-resources-fit({why})")
                continue
            # the best-scored GPUs that pass the filters: the first `count` in score order
            chosen: list[GPUView] = []
            reasons: list[str] = []
            for g in t.order:
                why = t.reject(g, req)
                if why is not None:
                    reasons.append(why)
                    continue
                chosen.append(g)
                if len(chosen) == req.count:
                    break
            if len(chosen) < req.count:  # every GPU was looked at
                detail = f"filtered={len(chosen)} required={req.count}"
                failed = _filter_summary(reasons)
                rejects.append(f"{t.node}:allocator-filter({detail}{' ' + failed if failed else ''})")
                continue
            # the node-level score of CompactFirst is the GPU-level formula: the memoized rank
            score = sum(t.rank(g) for g in chosen)
            if best is None or score > best[0]:
                best = (score, t, chosen)
        if best is None:
            sim.failed = w
            shown = [r if isinstance(r, str) else r.filter_reject(req) for r in rejects[:_SHOW]]
            sim.summary = _unmovable_summary(w, targets, shown, excluded)
            return sim
        _, t, chosen = best
        if t.node not in own:  # the state's judged target is shared: book on a copy
            t = own[t.node] = t.copy()
        for g in chosen:
            was_free = not _is_used(g.capacity, t.avail[g.name])
            t.book(g, req, w.key)
            t.scores.pop(g.name, None)
            if was_free and _is_used(g.capacity, t.avail[g.name]):
                t.used += 1
        t.reorder()
        t.workers += 1
        room.book(t.node, pod)
        sim.placements[w.key] = (t.node, [g.name for g in chosen])
    return sim


def _unmovable_summary(w: WorkerView, targets: list[_Target], rejects: list[str], excluded: list[str]) -> str:
    """The `DefragSkipUnschedulable` detail, in upstream's shape (D4), without scheduler fields."""
    ex = ",".join(_cut(e, _REJECT_LIMIT) for e in excluded[:_SHOW])
    if not targets:
        text = f"current TF workers cannot be jointly placed; pod={w.key} budgetTargets=0"
    else:
        top = ",".join(_cut(r, _REJECT_LIMIT) for r in rejects[:_SHOW]) or "no feasible defrag target"
        budget = ",".join(t.describe() for t in targets[:_SHOW])
        text = f"pod={w.key} budgetTargets={len(targets)} topRejects={top} budget={budget}"
    if ex:
        text += f" excluded={ex}"
    return _cut(text, _SUMMARY_LIMIT)


# -- PDB preflight (D6) ----------------------------------------------------------------------------


def _pdb_block(ctx: _Ctx, node: str, workers: Sequence[WorkerView]) -> str | None:
    """D6: upstream's PDB check plus the count rule (allow ≥ the node's pods each PDB covers)."""
    covered: dict[tuple[str, str], int] = {}
    per_worker: list[tuple[WorkerView, list[dict[str, Any]]]] = []
    for w in workers:
        pdbs = ctx.covering(w)
        per_worker.append((w, pdbs))
        for p in pdbs:
            k = (_meta(p).get("namespace", ""), _meta(p).get("name", ""))
            covered[k] = covered.get(k, 0) + 1
    for w, pdbs in per_worker:
        for p in pdbs:
            ns, name = _meta(p).get("namespace", ""), _meta(p).get("name", "")
            allowed = _disruptions_allowed(p)
            head = f"pod {w.namespace}/{w.name} is blocked by PDB {ns}/{name}: disruptionsAllowed={allowed}"
            if allowed <= 0:
                return head
            if allowed < covered[(ns, name)]:
                return f"{head} < {covered[(ns, name)]} pods it covers on node {node}"
    return None


# -- the step --------------------------------------------------------------------------------------


def _sweep(ctx: _Ctx) -> tuple[list[Action], list[dict[str, Any]], list[str], list[str]]:
    """D8 safety sweep: clear what is stale; return what still stands.

    Returns (actions, blocking evicted pods, source nodes still draining, nodes still on evict-skip).

    A terminating worker on one of this pool's source nodes blocks like a marked evicted pod: the
    `defrag-evicted` marker is written after the eviction, so a crash between the two leaves the
    evicted pod unmarked, and its deletionTimestamp is then the only trace. For the same reason a
    source node keeps its marker until its terminating workers are gone too (unless the marker is
    stale, which bounds a pod stuck terminating by `sourceNodeMarkerTTL`).
    """
    actions: list[Action] = []
    blocking: list[dict[str, Any]] = []
    for p in ctx.index.evicted_pods:
        ann = _annotations(p)
        owner = ann.get(keys.DEFRAG_EVICTED_POOL) or ann.get(keys.GPUPOOL)  # legacy fallback (upstream)
        if owner != ctx.pool:
            continue
        if _stale(ann.get(keys.DEFRAG_EVICTED_SINCE), ctx.cfg.evicted_ttl, ctx.now):
            actions += _clear_evicted(_meta(p).get("namespace", ""), _meta(p).get("name", ""))
        else:
            blocking.append(p)
    sources: list[str] = []
    skips: list[str] = []
    for name in ctx.index.marked_nodes:  # a node without either label owns no marker
        k8s = ctx.k8s_nodes[name]
        has_active = bool(ctx.active(name))
        if ctx.owned(k8s, keys.DEFRAG_SOURCE, keys.DEFRAG_SOURCE_POOL):
            since = _annotations(k8s).get(keys.DEFRAG_SOURCE_SINCE)
            leaving = ctx.leaving(name)
            if _stale(since, ctx.cfg.source_ttl, ctx.now) or not (has_active or leaving):
                actions += _clear_source(name)
            else:
                blocking += [w.obj for w in leaving if not any(w.obj is b for b in blocking)]
                if has_active:
                    sources.append(name)
        if ctx.owned(k8s, keys.DEFRAG_EVICT_SKIP, keys.DEFRAG_EVICT_SKIP_POOL):
            if has_active:
                skips.append(name)
            else:
                actions += _clear_evict_skip(name)
    return actions, blocking, sources, skips


def _advance(ctx: _Ctx, stamp: datetime, evict_skips: Iterable[str]) -> list[Action]:
    """Move the anchor and forget this pool's evict-skip list (D2 advance / skip-missed)."""
    actions: list[Action] = [PatchPoolStatus(ctx.pool, {"lastDefragTime": rfc3339(stamp)})]
    for n in evict_skips:
        actions += _clear_evict_skip(n)
    return actions


def _evict_actions(
    ctx: _Ctx, node: str, w: WorkerView, *, start_node: bool, campaign_start: datetime
) -> list[Action]:
    out: list[Action] = []
    now = rfc3339(ctx.now)
    if start_node:
        out.append(ctx.event("Normal", "DefragStarted", f"defrag step started at {rfc3339(campaign_start)}"))
        out.append(LabelNode(node, {keys.DEFRAG_SOURCE: keys.TRUE}))
        out.append(AnnotateNode(node, {keys.DEFRAG_SOURCE_POOL: ctx.pool, keys.DEFRAG_SOURCE_SINCE: now}))
    out.append(EvictPod(w.namespace, w.name))
    out.append(LabelPod(w.namespace, w.name, {keys.DEFRAG_EVICTED: keys.TRUE}))
    out.append(
        AnnotatePod(w.namespace, w.name, {keys.DEFRAG_EVICTED_POOL: ctx.pool, keys.DEFRAG_EVICTED_SINCE: now})
    )
    out.append(
        ctx.event(
            "Normal", "DefragPodEvicted", f"evicted pod {w.namespace}/{w.name} on node {node} for defrag"
        )
    )
    return out


@dataclass(slots=True)
class _Try:
    """Outcome of simulating + preflighting one node."""

    outcome: Literal["evict", "unmovable", "pdb-blocked", "error"]
    worker: WorkerView | None = None
    target: str = ""
    skip: Skip | None = None
    actions: list[Action] = field(default_factory=list)


def _try_node(ctx: _Ctx, e: _Eligible) -> _Try:
    """Simulate and preflight one node. A function of the state, pool and node (not of `now`), so
    it is kept per state: an idle campaign step over an unchanged cluster tries each candidate once."""
    tries: dict[tuple[str, float, tuple[str, ...]], _Try] = ctx.state.derived(
        f"defrag-tries/{ctx.pool}/{ctx.max_workers}", lambda st: {}
    )
    key = (e.node.name, e.util, tuple(w.key for w in e.workers))
    got = tries.get(key)
    if got is None:
        got = tries[key] = _try_node_once(ctx, e)
    return got


def _try_node_once(ctx: _Ctx, e: _Eligible) -> _Try:
    name = e.node.name
    try:
        sim = _simulate(ctx, name, e.util, e.workers)
    except RequestError as err:
        msg = f"node {name} aborted: simulation error: {err}"
        return _Try(
            "error",
            skip=Skip(name, "unmovable", f"simulation error: {err}"),
            actions=[ctx.event("Warning", "DefragAbortNode", msg)],
        )
    if sim.failed is not None:
        ev = ctx.event("Normal", "DefragSkipUnschedulable", f"node {name} skipped: {sim.summary}")
        return _Try("unmovable", skip=Skip(name, "unmovable", sim.summary), actions=[ev])
    block = _pdb_block(ctx, name, e.workers)
    if block is not None:
        ev = ctx.event("Normal", "DefragSkipPDBBlocked", f"node {name} skipped before eviction: {block}")
        return _Try("pdb-blocked", skip=Skip(name, "pdb-blocked", block), actions=[ev])
    first = min(e.workers, key=_size_key)
    return _Try("evict", worker=first, target=sim.placements[first.key][0])


def plan_defrag(
    state: ClusterState, pool: str, now: datetime, *, max_workers_per_node: int | None = None
) -> Plan:
    """One defrag step of `pool` at `now` (D1–D7): `plans.pools[pool].defrag` plus the actions.

    Order as upstream (D8): disabled → invalid config (Warning, nothing else) → safety sweep → evicted-pod
    guard (`blocked`) → campaign window (`not-due`, `skip-missed` advancing the anchor, deadline reached
    advancing it) → continue the current source node → rank candidates and evict at most one pod.
    `max_workers_per_node` is the scheduler's `maxWorkerPerNode` (0: no cap; None: the cluster's
    scheduler configuration). Raises KeyError for an unknown pool and ValueError for a naive `now`.
    """
    _require_aware(now)
    if max_workers_per_node is None:
        max_workers_per_node = state.scheduler.max_worker_per_node
    with gc_paused():  # the first pass over a freshly built state otherwise triggers full collections
        return _plan_defrag(state, pool, now, max_workers_per_node)


def _plan_defrag(state: ClusterState, pool: str, now: datetime, max_workers_per_node: int) -> Plan:
    plan = Plan(now)
    res = DefragResult("disabled")
    plan.pool(pool).defrag = res
    pv = state.pools.get(pool)
    if pv is None:
        raise KeyError(f"pool {pool!r} not found")
    if defrag_spec(pv.obj).get("enabled") is not True:
        return plan
    cfg = validate_defrag(pv.obj)
    if isinstance(cfg, str):
        res.state = "invalid"
        plan.actions.append(pool_event(pool, "Warning", "DefragConfigInvalid", f"defrag disabled: {cfg}"))
        return plan
    ctx = _Ctx.build(state, pool, cfg, now, max_workers_per_node)
    actions, blocking, sources, evict_skips = _sweep(ctx)
    plan.actions += actions
    last = _aware(parse_time((pv.obj.get("status") or {}).get("lastDefragTime")))
    wstate, start, deadline = campaign_window(cfg, last, ctx.now)
    if start is not None and deadline is not None:
        res.window = (start, deadline)
    if blocking:
        res.state = "blocked"
        plan.actions.append(
            ctx.event(
                "Normal",
                "DefragBlockedByEvictedPod",
                "defrag step paused: defrag-evicted pod still pending reschedule",
            )
        )
        return plan
    if wstate == "not-due":
        res.state = "not-due"
        return plan
    if wstate == "skip-missed":
        res.state = "skip-missed"
        plan.actions += _advance(ctx, ctx.now, evict_skips)
        return plan
    assert start is not None and deadline is not None
    if ctx.now >= deadline:  # the campaign context is already done: upstream finishes "deadline" and advances
        res.state = "idle"
        plan.actions += _advance(ctx, start, evict_skips)
        return plan

    abandoned: set[str] = set()
    for src in sources:  # D5: the current source is drained to the end before another node starts
        nv = state.nodes.get(src)
        if nv is None or nv.pool != pool:
            continue
        el, skip, ev = _gate(ctx, nv, drain=True)
        tried = _try_node(ctx, el) if el is not None else None
        if el is not None and tried is not None and tried.outcome == "evict":
            assert tried.worker is not None
            res.state = "evict"
            res.candidates = [Candidate(src, el.util)]
            res.evict = Eviction(tried.worker.key, src, tried.target)
            plan.actions += _evict_actions(ctx, src, tried.worker, start_node=False, campaign_start=start)
            return plan
        if tried is not None and tried.outcome == "pdb-blocked":  # wait for the budget to recover
            assert tried.skip is not None
            res.state = "blocked"
            res.skipped.append(tried.skip)
            plan.actions += tried.actions
            return plan
        # the drain cannot go on: give the node up and fall through to fresh candidates
        abandoned.add(src)
        if skip is not None:
            res.skipped.append(skip)
        if ev is not None:
            plan.actions.append(ev)
        if tried is not None:
            assert tried.skip is not None
            res.skipped.append(tried.skip)
            plan.actions += tried.actions
        plan.actions += _clear_source(src)

    eligible: list[_Eligible] = []
    missing_pdb = 0
    for nv in sorted(state.nodes_of(pool), key=lambda n: n.name):
        if nv.name in abandoned:
            continue
        el, skip, ev = _gate(ctx, nv, drain=False)
        if el is not None:
            eligible.append(el)
        if skip is not None:
            res.skipped.append(skip)
            missing_pdb += skip.reason == "missing-pdb"
        if ev is not None:
            plan.actions.append(ev)
    eligible.sort(key=lambda e: (e.util, e.node.name))
    res.candidates = [Candidate(e.node.name, e.util) for e in eligible]
    stats = {"processed": 0, "unmovable": 0, "pdbBlocked": 0}
    for e in eligible:
        stats["processed"] += 1
        tried = _try_node(ctx, e)
        if tried.outcome == "evict":
            assert tried.worker is not None
            res.state = "evict"
            res.evict = Eviction(tried.worker.key, e.node.name, tried.target)
            plan.actions += _evict_actions(
                ctx, e.node.name, tried.worker, start_node=True, campaign_start=start
            )
            return plan
        assert tried.skip is not None
        res.skipped.append(tried.skip)
        plan.actions += tried.actions
        if tried.outcome == "unmovable":
            stats["unmovable"] += 1
        elif tried.outcome == "pdb-blocked":
            stats["pdbBlocked"] += 1
        else:  # simulation error aborts the step (upstream "abortedNode")
            break
    res.state = "idle"
    if eligible:
        plan.actions.append(
            ctx.event(
                "Normal",
                "DefragFinished",
                f"defrag step finished: candidates={len(eligible)} processed={stats['processed']} evicted=0 "
                f"failed=0 unmovable={stats['unmovable']} pdbBlocked={stats['pdbBlocked']} "
                f"missingPdb={missing_pdb} freshSkip=0 deadline=false",
            )
        )
    return plan


def evict_refused(state: ClusterState, pool: str, node: str, pod: str, error: str, now: datetime) -> Plan:
    """D5: the Eviction API refused `pod` ("ns/name") on `node` (HTTP 429 or any other error).

    As upstream (D5): Warning `DefragPodEvictFailed`, the node goes on this pool's evict-skip list
    (reason cut to 256 bytes, on a character boundary), Warning `DefragNodeEvictSkip`, the source marker
    is cleared and Warning `DefragAbortNode` closes the node. Markers of pods already evicted stay, so
    the evicted-pod guard still waits for them. The step's result is `idle` with the node skipped; the
    runtime drops the refused step's remaining actions (the pod markers) and applies these instead.
    """
    _require_aware(now)
    now = now.astimezone(UTC)
    ns, _, name = pod.partition("/")
    reason = _cut_utf8(f"evict pod {ns}/{name} failed: {error}", REASON_LIMIT)
    plan = Plan(now)
    res = DefragResult("idle", skipped=[Skip(node, "evict-skip", reason)])
    plan.pool(pool).defrag = res
    pv = state.pools.get(pool)
    cfg = validate_defrag(pv.obj) if pv is not None else None
    if pv is not None and isinstance(cfg, DefragConfig):
        last = _aware(parse_time((pv.obj.get("status") or {}).get("lastDefragTime")))
        _, start, deadline = campaign_window(cfg, last, now)
        if start is not None and deadline is not None:
            res.window = (start, deadline)
    plan.actions += [
        pool_event(
            pool,
            "Warning",
            "DefragPodEvictFailed",
            f"failed to evict pod {ns}/{name} on node {node}: {error} (node eviction aborted)",
        ),
        LabelNode(node, {keys.DEFRAG_EVICT_SKIP: keys.TRUE, keys.DEFRAG_SOURCE: None}),
        AnnotateNode(
            node,
            {
                keys.DEFRAG_EVICT_SKIP_POOL: pool,
                keys.DEFRAG_EVICT_SKIP_SINCE: rfc3339(now),
                keys.DEFRAG_EVICT_SKIP_REASON: reason,
                keys.DEFRAG_SOURCE_POOL: None,
                keys.DEFRAG_SOURCE_SINCE: None,
            },
        ),
        pool_event(
            pool,
            "Warning",
            "DefragNodeEvictSkip",
            f"node {node} added to defrag evict-skip list after eviction failure: {error}",
        ),
        pool_event(pool, "Warning", "DefragAbortNode", f"node {node}: eviction aborted"),
    ]
    return plan
