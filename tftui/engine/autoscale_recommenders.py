"""The percentile recommender (estimates from the usage histograms, scaled and bounded), the merge of
several recommenders' partial answers and the scale-up cap (`max_allowed`).

Pure arithmetic on `Resources`; the cron rules and the external scaler are the other recommenders,
each in its own module, merged here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from tftui.engine.autoscale_config import (
    MAX_ESTIMATE,
    MIN_TF,
    MIN_VR,
    ZERO_TF,
    ZERO_VR,
    AutoConfig,
    Resources,
    tf,
    vr,
)
from tftui.engine.autoscale_usage import WorkloadHistory
from tftui.engine.memo import ByIdentity
from tftui.engine.state import ClusterState, WorkerView, WorkloadView
from tftui.model.quantity import Quantity

# -- recommenders --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Estimates:
    """Bucket-end usage percentiles and the margin-added integer estimates (A3)."""

    tf_usage: tuple[float, float, float]  # lower, target, upper
    vram_usage: tuple[float, float, float]
    tf: tuple[int, int, int]
    vram: tuple[int, int, int]


def _estimate(p: float, margin: float) -> int:
    p = min(max(p, 0.0), MAX_ESTIMATE)
    return int(p + p * margin)


def estimate(hist: WorkloadHistory, cfg: AutoConfig) -> Estimates:
    tu = hist.tf.percentiles((cfg.tf_lower, cfg.tf_target, cfg.tf_upper))
    vu = hist.vram.percentiles((cfg.vram_lower, cfg.vram_target, cfg.vram_upper))
    return Estimates(
        (tu[0], tu[1], tu[2]),
        (vu[0], vu[1], vu[2]),
        (_estimate(tu[0], cfg.margin), _estimate(tu[1], cfg.margin), _estimate(tu[2], cfg.margin)),
        (_estimate(vu[0], cfg.margin), _estimate(vu[1], cfg.margin), _estimate(vu[2], cfg.margin)),
    )


@dataclass(frozen=True, slots=True)
class Partial:
    """One recommender's result (upstream `RecommendResult`) and the condition it upserts."""

    resources: Resources
    has_applied: bool
    locking: bool = False
    condition: tuple[str, str] | None = None  # (reason, message)
    capped: bool = False


#: `_scale`'s answers by its arguments, quantities by exact value *and* format (their text): a
#: 5,000-node plan scales 37,000 times, with 6,000 distinct arguments (workloads share specs and
#: histogram bucket ends). An unchanged answer is kept as None: it is the caller's own `cur`.
_SCALED: dict[tuple[Any, ...], tuple[Quantity, Quantity, str] | None] = {}
_SCALED_MAX: Final = 1 << 16


def _qkey(q: Quantity) -> tuple[int, int, str]:
    return q.amount.numerator, q.amount.denominator, q.format


def _scale(
    name: str,
    est: tuple[int, int, int],
    qos: str,
    cur: tuple[Quantity, Quantity],
    orig: tuple[Quantity, Quantity],
    ratios: tuple[float, float],
) -> tuple[Quantity, Quantity, str]:
    """`_scale_once`, memoised (`_SCALED`)."""
    key = (name, est, qos, _qkey(cur[0]), _qkey(cur[1]), _qkey(orig[0]), _qkey(orig[1]), ratios)
    if key in _SCALED:
        hit = _SCALED[key]
        return (cur[0], cur[1], "") if hit is None else hit
    out = _scale_once(name, est, qos, cur, orig, ratios)
    if len(_SCALED) >= _SCALED_MAX:
        _SCALED.clear()
    _SCALED[key] = None if out[0] is cur[0] and out[1] is cur[1] and not out[2] else out
    return out


def _scale_once(
    name: str,
    est: tuple[int, int, int],
    qos: str,
    cur: tuple[Quantity, Quantity],
    orig: tuple[Quantity, Quantity],
    ratios: tuple[float, float],
) -> tuple[Quantity, Quantity, str]:
    """`handleResourceScaling` (A3): QoS pick → floor → ratio clamp → compute-limit floor."""
    mk, floor = (tf, MIN_TF) if name == "Compute" else (vr, MIN_VR)
    lower, target, upper = est
    request = mk(upper if qos == "critical" else target if qos == "high" else lower)
    limit = mk(upper)
    request, limit = max(request, floor), max(limit, floor)
    lo_r, hi_r = ratios

    def clamp(x: Quantity, o: Quantity) -> Quantity:
        lo, hi = int(float(o) * lo_r), int(float(o) * hi_r)
        if lo != 0 and x.amount < lo:
            return mk(lo)
        if hi != 0 and x.amount > hi:
            return mk(hi)
        return x

    request, limit = clamp(request, orig[0]), clamp(limit, orig[1])
    if name == "Compute" and limit < orig[1]:
        limit = mk(int(float(orig[1])))
    if request == cur[0] and limit == cur[1]:
        return cur[0], cur[1], ""
    return request, limit, f"{name} scaled: request {cur[0]} -> {request}, limit {cur[1]} -> {limit}"


def process(rec: Resources, current: Resources, allowed: tuple[int, int] | None) -> tuple[Resources, str]:
    """The recommendation processor (A6): cap increasing requests at the per-worker maximum."""
    if (rec.tf_req <= current.tf_req and rec.vram_req <= current.vram_req) or allowed is None:
        return rec, ""
    msgs: list[str] = []
    tf_req, vram_req = rec.tf_req, rec.vram_req
    if tf_req > current.tf_req and tf_req.amount > allowed[0]:
        tf_req = tf(allowed[0])
        msgs.append(f"TFlops request set to max allowed: ({tf_req})")
    if vram_req > current.vram_req and vram_req.amount > allowed[1]:
        vram_req = vr(allowed[1])
        msgs.append(f"VRAM request set to max allowed: ({vram_req})")
    return Resources(tf_req, rec.tf_lim, vram_req, rec.vram_lim), ", ".join(msgs)


def percentile_recommend(
    est: Estimates,
    cfg: AutoConfig,
    qos: str,
    current: Resources,
    original: Resources,
    allowed: tuple[int, int] | None,
    measured: tuple[bool, bool] = (True, True),
) -> Partial | None:
    """The percentile recommender (A3) from estimates; None = nothing to recommend.

    `measured` says which of (TFLOPS, VRAM) has any real sample: an unmeasured resource keeps its
    current values (upstream would scale an empty histogram's 0 down to the floor or the ratio
    clamp — a decision made from missing data)."""
    tr, tl, tmsg = current.tf_req, current.tf_lim, ""
    if measured[0]:
        tr, tl, tmsg = _scale(
            "Compute",
            est.tf,
            qos,
            (current.tf_req, current.tf_lim),
            (original.tf_req, original.tf_lim),
            (cfg.min_compute, cfg.max_compute),
        )
    vq, vl, vmsg = current.vram_req, current.vram_lim, ""
    if measured[1]:
        vq, vl, vmsg = _scale(
            "VRAM",
            est.vram,
            qos,
            (current.vram_req, current.vram_lim),
            (original.vram_req, original.vram_lim),
            (cfg.min_vram, cfg.max_vram),
        )
    rec = Resources(tr, tl, vq, vl)
    if not rec.is_zero():
        within: list[str] = []
        should = False
        for name, cur, new, mk, known in (
            ("Compute", current.tf_req, tr, tf, measured[0]),
            ("VRAM", current.vram_req, vq, vr, measured[1]),
        ):
            if cur.amount == 0 or new.amount == 0 or not known:
                continue
            diff = abs(cur.value() - new.value())
            thr = int(cur.value() * cfg.threshold)
            if diff > thr:
                should = True
            else:
                within.append(f"{name} change ({diff}) within threshold ({mk(thr)}), ")
        if not should and within:
            return Partial(
                rec, True, condition=("InsideUpdateThreshold", "".join(within) + "no update performed")
            )
    if rec.is_zero():
        return None
    rec, pmsg = process(rec, current, allowed)
    message = ", ".join(m for m in (tmsg, vmsg) if m)
    if pmsg:
        message += ", " + pmsg
    applied = rec == current
    return Partial(rec, applied, condition=None if applied else ("Updated", message), capped=bool(pmsg))


def _resources_key_of(r: Resources) -> tuple[object, ...]:
    """`r` by value *and* print format (equal quantities may print differently: `1Gi`, `1073741824`)."""
    return (_qkey(r.tf_req), _qkey(r.tf_lim), _qkey(r.vram_req), _qkey(r.vram_lim))


#: `_resources_key_of`, reused while `r` is the very same (frozen) object, as the shared parses of a
#: workload's resources are from tick to tick (`Resources.parse_shared`)
_resources_key: ByIdentity[Resources, tuple[object, ...]] = ByIdentity(_resources_key_of, 1 << 16)


_PCT_MEMO: dict[tuple[object, ...], Partial | None] = {}
_PCT_MEMO_MAX = 1 << 16


def percentile_recommend_memo(
    est: Estimates,
    cfg: AutoConfig,
    qos: str,
    current: Resources,
    original: Resources,
    allowed: tuple[int, int] | None,
    measured: tuple[bool, bool] = (True, True),
) -> Partial | None:
    """`percentile_recommend`, the same result, with its uncapped part memoised on the other
    arguments (quantities by value and format): a pure function of a few integers per workload whose
    estimates move by whole histogram buckets, so a tick mostly asks again what an earlier one
    asked. The cap (`allowed`, which moves with every co-located worker) is applied afterwards,
    as `percentile_recommend` applies it last: only to an increase that is not yet applied."""
    # the estimates' integers only (what `percentile_recommend` reads): bucket ends that differ
    # but round to the same integer estimates ask the same question
    key = (est.tf, est.vram, cfg, qos, _resources_key(current), _resources_key(original), measured)
    try:
        got = _PCT_MEMO[key]
    except KeyError:
        got = percentile_recommend(est, cfg, qos, current, original, None, measured)
        if len(_PCT_MEMO) >= _PCT_MEMO_MAX:
            _PCT_MEMO.clear()
        _PCT_MEMO[key] = got
    if got is None or got.has_applied or allowed is None:
        return got  # nothing, within the threshold, or nothing to change: no cap applies
    rec, pmsg = process(got.resources, current, allowed)
    if not pmsg:
        return got
    assert got.condition is not None  # ("Updated", the scaling messages)
    applied = rec == current
    message = got.condition[1] + ", " + pmsg
    return Partial(rec, applied, condition=None if applied else ("Updated", message), capped=True)


def merge(results: Iterable[Partial], current: Resources) -> Resources | None:
    """`GetRecommendation` (A3): larger request wins per resource; locking results veto; zero-fill."""
    rs = list(results)
    tq, tl, vq, vl = ZERO_TF, ZERO_TF, ZERO_VR, ZERO_VR
    mt, mv = ZERO_TF, ZERO_VR
    for r in rs:
        x = r.resources
        if not r.has_applied:
            if x.tf_req > tq:
                tq, tl = x.tf_req, x.tf_lim
            if x.vram_req > vq:
                vq, vl = x.vram_req, x.vram_lim
        if r.locking:
            mt, mv = max(mt, x.tf_req), max(mv, x.vram_req)
    rec = Resources(tq, tl, vq, vl)
    if rec.is_zero() or tq < mt or vq < mv:
        return None
    if tq.amount == 0 or tl.amount == 0:
        tq, tl = current.tf_req, current.tf_lim
    if vq.amount == 0 or vl.amount == 0:
        vq, vl = current.vram_req, current.vram_lim
    return Resources(tq, tl, vq, vl)


def max_allowed(state: ClusterState, wv: WorkloadView) -> tuple[int, int] | None:
    """Per-worker request ceiling (A6): min over its GPUs of (free + own share) / own workers.

    Workers without GPUs are skipped (A6; upstream fails the tick), no workers → no cap.
    """
    per_gpu: dict[str, list[WorkerView]] = {}
    workers, gpus = state.workers, state.gpus
    for key in wv.workers:
        w = workers.get(key)
        if w is None or w.terminating:
            continue
        for g in w.gpu_ids:
            if g in gpus:
                per_gpu.setdefault(g, []).append(w)
    if not per_gpu:
        return None
    best: tuple[int, int] | None = None
    for g, ws in per_gpu.items():
        gv = gpus[g]
        cap, alloc = gv.capacity, gv.allocated
        if len(ws) == 1:  # the usual GPU: `available` + its one worker's request, in that order
            req = ws[0].request
            t = int((cap.tflops - alloc.tflops) + req.tflops)
            v = int((cap.vram - alloc.vram) + req.vram)
        else:
            own_tf = sum(w.request.tflops for w in ws)
            own_v = sum(w.request.vram for w in ws)
            t = int((cap.tflops - alloc.tflops) + own_tf) // len(ws)
            v = int((cap.vram - alloc.vram) + own_v) // len(ws)
        best = (t, v) if best is None else (min(best[0], t), min(best[1], v))
    return best
