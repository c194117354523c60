"""Usage profiles of the demo cluster and the deterministic noise they are drawn with.

Every generated workload carries one profile (annotation `tftui.dev/demo-profile`) so the step-1
diagnosis can be checked against what the simulator intended:

- `over-request`: uses 10-25 % of its TFLOPS request (the classic "asked for a whole GPU" case).
- `idle`: ~0-1 % of its request; a notebook or a forgotten endpoint holding memory.
- `bursty`: a daily cycle peaking mid-afternoon in the pool's timezone, at times above its request.
- `right-sized`: 70-95 % of its request.

Values are pure functions of (seed, entity, time): no state, no global RNG, so the metrics source
can compute any sample lazily and two runs agree bit for bit.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal
from zoneinfo import ZoneInfo

from tftui.model.zones import load_zone

Profile = Literal["over-request", "idle", "bursty", "right-sized"]
PROFILES: Final[tuple[Profile, ...]] = ("over-request", "idle", "bursty", "right-sized")
PROFILE_ANNOTATION: Final = "tftui.dev/demo-profile"

OVER_REQUEST_RANGE: Final = (0.10, 0.25)  # fraction of the TFLOPS request
RIGHT_SIZED_RANGE: Final = (0.70, 0.95)
IDLE_MAX_FRACTION: Final = 0.009  # of the request, so a device never exceeds 1 % either
MEMORY_MAX_FRACTION: Final = 0.98  # of the VRAM request; workers never touch their limit

_MASK: Final = (1 << 64) - 1
_INV53: Final = 1.0 / (1 << 53)


def mix64(x: int) -> int:
    """SplitMix64 finaliser: a cheap, well-spread integer hash (no per-call allocation)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def entity_key(seed: int, *parts: str) -> int:
    """A 64-bit key for one entity (a GPU, a worker) under one seed; hashed once, mixed per sample."""
    digest = hashlib.blake2b(("\x00".join((str(seed), *parts))).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def unit(key: int, n: int) -> float:
    """Deterministic uniform number in [0, 1) for (key, n) (mix64 inlined: this is the hot path)."""
    x = ((key ^ ((n * 0xD1B54A32D192ED03) & _MASK)) + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return ((x ^ (x >> 31)) >> 11) * _INV53


DRIFT = 900
"""Seconds between the knots of usage's drift (`wobble`)."""
_JITTER_XOR = 0x5A5A5A5A


def smooth_weight(r: int, period: int) -> float:
    """How far (0–1, eased) `r` seconds past a knot lies towards the next one, `period` apart."""
    return (1.0 - math.cos(math.pi * r / period)) * 0.5


def knot_noise(key: int, k: int, w: float) -> float:
    """`smooth` between knots `k` and `k + 1` at weight `w` (`smooth_weight`)."""
    a = unit(key, k)
    b = unit(key, k + 1)
    return 2.0 * (a + (b - a) * w) - 1.0


def smooth(key: int, t: int, period: int) -> float:
    """Value noise in [-1, 1], continuous in `t` (seconds) with knots every `period` seconds.

    Real utilization drifts rather than jumping each minute; interpolating hashed knots gives that
    without keeping any state.
    """
    k, r = divmod(t, period)
    return knot_noise(key, k, smooth_weight(r, period))


def jitter(key: int, t: int) -> float:
    """Per-minute noise in [-1, 1]."""
    return 2.0 * unit(key ^ _JITTER_XOR, t // 60) - 1.0


def wobble_at(key: int, knot: int, weight: float, minute: int) -> float:
    """`wobble` from what every key shares at an instant: the drift's knot and weight, the minute."""
    return 0.75 * knot_noise(key, knot, weight) + 0.25 * (2.0 * unit(key ^ _JITTER_XOR, minute) - 1.0)


def wobble(key: int, t: int) -> float:
    """Usage noise in [-1, 1]: mostly a 15-minute drift plus a little per-minute jitter."""
    k, r = divmod(t, DRIFT)
    return wobble_at(key, k, smooth_weight(r, DRIFT), t // 60)


@dataclass(frozen=True, slots=True)
class ProfileParams:
    """Per-workload constants of a profile curve, drawn once from the workload's key."""

    profile: str
    level: float  # typical fraction of the TFLOPS request
    peak: float  # bursty: fraction of the request at the daily peak
    peak_hour: float  # bursty: local hour of the peak
    mem_level: float  # typical fraction of the VRAM request


def profile_params(profile: str, key: int) -> ProfileParams:
    """Constants for `profile`, varied per workload so two workloads never draw the same line."""
    u1, u2, u3 = unit(key, 1), unit(key, 2), unit(key, 3)
    if profile == "over-request":
        return ProfileParams(profile, 0.14 + 0.06 * u1, 0.0, 0.0, 0.25 + 0.2 * u3)
    if profile == "idle":
        return ProfileParams(profile, 0.002 + 0.004 * u1, 0.0, 0.0, 0.1 + 0.3 * u3)
    if profile == "bursty":
        return ProfileParams(profile, 0.06 + 0.08 * u1, 1.0 + 0.3 * u2, 14.5 + 1.5 * u2, 0.45 + 0.2 * u3)
    return ProfileParams("right-sized", 0.78 + 0.08 * u1, 0.0, 0.0, 0.75 + 0.15 * u3)


def bump(local_hour: float, peak_hour: float) -> float:
    """Daily bell in [0, 1]: 1 at `peak_hour`, near 0 twelve hours away."""
    c = (1.0 + math.cos(2.0 * math.pi * (local_hour - peak_hour) / 24.0)) * 0.5
    return c * c * c


def compute_fraction(p: ProfileParams, local_hour: float, noise: float) -> float:
    """Used TFLOPS as a fraction of the request at one instant (`noise` in [-1, 1])."""
    if p.profile == "over-request":
        return min(max(p.level + 0.04 * noise, OVER_REQUEST_RANGE[0]), OVER_REQUEST_RANGE[1])
    if p.profile == "idle":
        return min(max(p.level + 0.003 * noise, 0.0), IDLE_MAX_FRACTION)
    if p.profile == "bursty":
        value = p.level + (p.peak - p.level) * bump(local_hour, p.peak_hour) + 0.03 * noise
        return max(value, 0.01)
    diurnal = 0.03 * math.sin(2.0 * math.pi * (local_hour - 9.0) / 24.0)
    return min(max(p.level + diurnal + 0.04 * noise, RIGHT_SIZED_RANGE[0]), RIGHT_SIZED_RANGE[1])


def memory_fraction(p: ProfileParams, local_hour: float, noise: float) -> float:
    """Used VRAM as a fraction of the request; bursty workloads grow their caches with load."""
    value = p.mem_level + 0.03 * noise
    if p.profile == "bursty":
        value += 0.2 * bump(local_hour, p.peak_hour)
    return min(max(value, 0.02), MEMORY_MAX_FRACTION)


def native_load(key: int, local_hour: float, noise: float) -> tuple[float, float]:
    """(compute %, VRAM fraction of capacity) of a GPU held by a pod outside TensorFusion."""
    level = 45.0 + 30.0 * unit(key, 7)
    compute = level + 10.0 * math.sin(2.0 * math.pi * (local_hour - 10.0) / 24.0) + 6.0 * noise
    memory = 0.45 + 0.3 * unit(key, 8) + 0.02 * noise
    return min(max(compute, 1.0), 100.0), min(max(memory, 0.05), 0.95)


def pool_timezone(pool: dict[str, Any] | None) -> ZoneInfo:
    """The pool's working timezone: its defrag timezone when set (people set it to their office), else UTC."""
    if pool:
        nmc = (pool.get("spec") or {}).get("nodeManagerConfig") or {}
        tz = ((nmc.get("nodeCompaction") or {}).get("defrag") or {}).get("timezone")
        if tz:
            try:
                return load_zone(str(tz))
            except ValueError:  # an invalid name is the engine's finding, not ours
                pass
    return ZoneInfo("UTC")


def local_hour(ts: int, tz: ZoneInfo) -> float:
    """Hour of day (0-24, fractional) of epoch second `ts` in `tz`."""
    offset = tz.utcoffset(datetime.fromtimestamp(ts, UTC))
    seconds = ts + (int(offset.total_seconds()) if offset is not None else 0)
    return (seconds % 86400) / 3600.0
