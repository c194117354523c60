"""GPUResourceQuota: the namespace quota the TensorFusion allocator checks before it filters GPUs.

A namespace has at most one quota the allocator enforces. Usage is rebuilt from the namespace's
live worker pods that hold GPUs (annotation `gpu-ids`), each counting its per-device request and
limit times its `gpu-count`, plus one worker. A request is refused, before any GPU is looked at,
with the allocator's message (`quota exceeded in namespace NS for RESOURCE: requested X, limit Y`):

- `single`: TFLOPS or VRAM request above `maxRequests`, limit above `maxLimits` (a zero or unset
  figure is no limit), more GPUs than `maxGPUCount`;
- `total`: when `requests` (or `limits`) is set, usage plus this request times its GPU count above
  it, TFLOPS then VRAM — a figure left out of a set block counts as 0, so it refuses everything, as
  the allocator does; more workers than `maxWorkers`.

A quota the controller would reject (negative figures, limits below requests, an alert threshold
outside 0–100) is not enforced, and says why. Compute-percent requests carry no TFLOPS for the quota
(the allocator's documented gap: a percent only means TFLOPS on a given GPU).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from tftui.engine.fit import Request
from tftui.engine.state import ClusterState, WorkerView, go_value
from tftui.model import keys
from tftui.model.quantity import QuantityError, format_quantity, parse_quantity

REQ_TFLOPS, REQ_VRAM = "total.max.tflops.request", "total.max.vram.request"
LIM_TFLOPS, LIM_VRAM = "total.max.tflops.limit", "total.max.vram.limit"
WORKERS = "total.max.workers.limit"
ONE_REQ_TFLOPS, ONE_REQ_VRAM = "single.max.tflops.request", "single.max.vram.request"
ONE_LIM_TFLOPS, ONE_LIM_VRAM = "single.max.tflops.limit", "single.max.vram.limit"
ONE_GPUS = "single.max.gpuCount.limit"
QUOTA_REFUSAL = "quota exceeded in namespace "  # how every refusal starts


@dataclass(frozen=True, slots=True)
class Pair:
    """TFLOPS and VRAM of a quota block; None: not written (a set block's missing figure is 0)."""

    tflops: float | None = None
    vram: float | None = None
    raw: tuple[str, str] = ("0", "0")  # as written, for messages


@dataclass(frozen=True, slots=True)
class Quota:
    namespace: str
    name: str
    total_requests: Pair | None = None
    total_limits: Pair | None = None
    max_workers: int | None = None
    max_requests: Pair | None = None
    max_limits: Pair | None = None
    max_gpus: int | None = None
    alert_percent: int = 95
    problem: str = ""  # why the controller would not enforce it ("" when it does)


@dataclass(slots=True)
class Usage:
    """What a namespace's workers hold, in quota terms (Σ per-device figure × GPU count)."""

    req_tflops: float = 0.0
    req_vram: float = 0.0
    lim_tflops: float = 0.0
    lim_vram: float = 0.0
    workers: int = 0

    def add(self, req_t: float, req_v: float, lim_t: float, lim_v: float, count: int) -> None:
        self.req_tflops += req_t * count
        self.req_vram += req_v * count
        self.lim_tflops += lim_t * count
        self.lim_vram += lim_v * count
        self.workers += 1


@dataclass(frozen=True, slots=True)
class QuotaView:
    """A namespace's quota with its usage: what the workloads view shows."""

    quota: Quota
    usage: Usage = field(default_factory=Usage)


def _qty(raw: Any) -> tuple[float | None, str]:
    if raw is None or raw == "":
        return None, "0"
    try:
        q = parse_quantity(raw)
    except QuantityError:
        return None, str(raw)
    return float(q), str(q)


def _pair(block: Any) -> Pair | None:
    if not isinstance(block, Mapping):
        return None
    t, rt = _qty(block.get("tflops"))
    v, rv = _qty(block.get("vram"))
    return Pair(t, v, (rt, rv))


def _count(raw: Any) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def parse_quota(obj: Mapping[str, Any]) -> Quota:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    total, single = spec.get("total") or {}, spec.get("single") or {}
    alert = total.get("alertThresholdPercent")
    q = Quota(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        total_requests=_pair(total.get("requests")),
        total_limits=_pair(total.get("limits")),
        max_workers=_count(total.get("maxWorkers")),
        max_requests=_pair(single.get("maxRequests")),
        max_limits=_pair(single.get("maxLimits")),
        max_gpus=_count(single.get("maxGPUCount")),
        alert_percent=alert if isinstance(alert, int) and not isinstance(alert, bool) else 95,
    )
    return replace(q, problem=_invalid(q, alert))


def _invalid(q: Quota, alert: Any) -> str:
    """The controller's validation: a quota that fails it is skipped, not enforced."""
    for what, p in (("requests", q.total_requests), ("limits", q.total_limits)):
        if p is not None and ((p.tflops or 0) < 0 or (p.vram or 0) < 0):
            return f"spec.total.{what} cannot be negative"
    if q.max_workers is not None and q.max_workers < 0:
        return "spec.total.maxWorkers cannot be negative"
    r, lim = q.total_requests, q.total_limits
    if r is not None and lim is not None:
        for a, b, what in ((r.tflops, lim.tflops, "tflops"), (r.vram, lim.vram, "vram")):
            if a and b and b < a:
                return f"spec.total.limits.{what} cannot be less than requests.{what}"
    if isinstance(alert, int) and not 0 <= alert <= 100:
        return f"spec.total.alertThresholdPercent must be between 0 and 100, got {alert}"
    return ""


def _worker_figures(w: WorkerView) -> tuple[float, float, float, float, int]:
    """A worker's per-device request and limit as the allocator reads them (a compute percent
    carries no TFLOPS) and its GPU count."""
    ann = (w.obj.get("metadata") or {}).get("annotations") or {}
    req_t = w.request.tflops if ann.get(keys.TFLOPS_REQUEST) else 0.0
    lim_t = w.limit.tflops if ann.get(keys.TFLOPS_LIMIT) else 0.0
    return req_t, w.request.vram, lim_t, w.limit.vram, w.gpu_count


def _views(state: ClusterState) -> dict[str, QuotaView]:
    views = {ns: QuotaView(parse_quota(obj)) for ns, obj in sorted(state.quotas.items())}
    for w in state.workers.values():
        v = views.get(w.namespace)
        if v is not None and w.gpu_ids:
            v.usage.add(*_worker_figures(w))
    return views


def quotas(state: ClusterState) -> dict[str, QuotaView]:
    """Namespace → its quota and current usage (derived once per state; read-only)."""
    return state.derived("quota-views", _views)


def usage_copy(state: ClusterState) -> dict[str, Usage]:
    """A fresh, writable copy of every quota namespace's usage (for a scheduling pass)."""
    return {ns: replace(v.usage) for ns, v in quotas(state).items()}


def _fmt(x: float, fmt: str) -> str:
    return format_quantity(Decimal(repr(x)), fmt)


def _exceeded(ns: str, what: str, requested: str, limit: str) -> str:
    return f"{QUOTA_REFUSAL}{ns} for {what}: requested {requested}, limit {limit}"


def check(state: ClusterState, req: Request, used: Mapping[str, Usage] | None = None) -> str | None:
    """The allocator's quota check for `req` in its namespace: None, or the refusal's message.
    `used`: usage as a scheduling pass has booked it so far (default: the state's)."""
    view = quotas(state).get(req.namespace) if req.namespace else None
    if view is None or view.quota.problem:
        return None
    q, ns = view.quota, req.namespace
    usage = used.get(ns, view.usage) if used is not None else view.usage
    req_t = req.tflops or 0.0
    lim_t, lim_v = req.limits
    lim_t = lim_t or 0.0
    for block, t, v, names in (
        (q.max_requests, req_t, req.vram, (ONE_REQ_TFLOPS, ONE_REQ_VRAM)),
        (q.max_limits, lim_t, lim_v, (ONE_LIM_TFLOPS, ONE_LIM_VRAM)),
    ):
        if block is None:
            continue
        if block.tflops and t > block.tflops:
            return _exceeded(ns, names[0], _fmt(t, "DecimalSI"), block.raw[0])
        if block.vram and v > block.vram:
            return _exceeded(ns, names[1], _fmt(v, "BinarySI"), block.raw[1])
    if q.max_gpus is not None and req.count > q.max_gpus:
        return _exceeded(ns, ONE_GPUS, str(req.count), str(q.max_gpus))
    n = req.count
    for block, cur_t, cur_v, t, v, names in (
        (q.total_requests, usage.req_tflops, usage.req_vram, req_t, req.vram, (REQ_TFLOPS, REQ_VRAM)),
        (q.total_limits, usage.lim_tflops, usage.lim_vram, lim_t, lim_v, (LIM_TFLOPS, LIM_VRAM)),
    ):
        if block is None:
            continue
        add_t, add_v = go_value(t) * n, go_value(v) * n
        if go_value(block.tflops or 0.0) < go_value(cur_t) + add_t:
            return _exceeded(ns, names[0], str(add_t), block.raw[0])
        if go_value(block.vram or 0.0) < go_value(cur_v) + add_v:
            return _exceeded(ns, names[1], str(add_v), block.raw[1])
    if q.max_workers is not None and usage.workers + 1 > q.max_workers:
        return _exceeded(ns, WORKERS, "1", str(q.max_workers))
    return None


def book(used: dict[str, Usage], state: ClusterState, req: Request) -> None:
    """Count a placed request against its namespace's quota in `used` (a scheduling pass)."""
    view = quotas(state).get(req.namespace) if req.namespace else None
    if view is None:
        return
    cur = used.setdefault(req.namespace, replace(view.usage))
    lim_t, lim_v = req.limits
    cur.add(req.tflops or 0.0, req.vram, lim_t or 0.0, lim_v, req.count)
