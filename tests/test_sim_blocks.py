"""The demo's sample blocks (sim/columns.py) are their plain numpy formulation, bit for bit.

`SimColumns.workers` and `.gpus` compute every worker and GPU at a run of times in as few passes
as they can (knots broadcast per run, the jitter hashed in place, per-timezone terms, GPU sums slot
by slot, masks only where a sample can be missing). The straightforward formulation below — one
expression per step, over every cell, as the functions were first written — is the reference: the
rewrite must give the very same bits, so every figure built on the blocks stays byte-identical.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.sources.sim.columns import (
    F64,
    I64,
    OVER_REQUEST_RANGE,
    RIGHT_SIZED_RANGE,
    GpuBlock,
    SimColumns,
    WorkerBlock,
    _bump,
    _clip,
    jitter_v,
    quarter_jitter,
    smooth_grid,
    smooth_v,
    unit_v,
)
from tftui.sources.sim.scenarios import IDLE_MAX_FRACTION, MEMORY_MAX_FRACTION
from tftui.sources.sim.usage import SimMetrics


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint64) if a.dtype == np.float64 else a


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype
    assert np.array_equal(_bits(a), _bits(b))


def _reference_smooth_grid(key: np.ndarray, ts: I64, period: int) -> F64:
    k, r = np.divmod(ts, period)
    k0 = int(k.min())
    knots = unit_v(key, np.arange(k0, int(k.max()) + 2, dtype=np.int64)[None, :])
    a, b = knots[:, k - k0], knots[:, k - k0 + 1]
    w = (1.0 - np.cos(np.pi * r / period)) * 0.5
    return 2.0 * (a + (b - a) * w) - 1.0


def _reference_workers(c: SimColumns, ts: I64, hours: F64) -> WorkerBlock:
    t = ts[None, :]
    key = c.w_key[:, None]
    drift = _reference_smooth_grid(key, ts, 900)
    noise = 0.75 * drift + 0.25 * jitter_v(key, t)
    frac = np.empty_like(noise)
    mem_frac = c.w_mem_level[:, None] + 0.03 * drift
    for code, idx in c._by_profile:
        level = c.w_level[idx, None]
        nz = noise[idx]
        if code == 0:
            frac[idx] = _clip(level + 0.04 * nz, *OVER_REQUEST_RANGE)
        elif code == 1:
            frac[idx] = _clip(level + 0.003 * nz, 0.0, IDLE_MAX_FRACTION)
        elif code == 2:
            bump = _bump(hours[c.w_tz[idx]], c.w_peak_hour[idx, None])
            frac[idx] = np.maximum(level + (c.w_peak[idx, None] - level) * bump + 0.03 * nz, 0.01)
            mem_frac[idx] += 0.2 * bump
        else:
            diurnal = 0.03 * np.sin(2.0 * np.pi * (hours[c.w_tz[idx]] - 9.0) / 24.0)
            frac[idx] = _clip(level + diurnal + 0.04 * nz, *RIGHT_SIZED_RANGE)
    cap = c.w_cap[:, None]
    used = np.minimum(np.minimum(frac * c.w_req_t[:, None], c.w_lim_t[:, None]), cap)
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.round(np.where(cap > 0, used / cap * 100.0, 0.0), 3)
    mem_frac = _clip(mem_frac, 0.02, MEMORY_MAX_FRACTION)
    mem = np.trunc(np.minimum(mem_frac * c.w_req_v[:, None], c._mem_cap * c.w_lim_v[:, None]))
    alive = c.w_created[:, None] <= t
    return WorkerBlock(alive=alive, pct=np.where(alive, pct, 0.0), mem=np.where(alive, mem, 0.0))


def _reference_gpu_sums(c: SimColumns, w: WorkerBlock) -> tuple[F64, F64, I64]:
    """Each GPU's workers added in order, one `np.add.reduceat` over the pairs grouped by GPU."""
    shape = (len(c.g_key), w.pct.shape[1])
    pct, mem, present = np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=np.int64)
    by_gpu = np.argsort(c.p_gpu, kind="stable")
    ws = c.p_worker[by_gpu]
    at, starts = np.unique(c.p_gpu[by_gpu], return_index=True)
    pct[at] = np.add.reduceat(w.pct[ws], starts, axis=0)
    mem[at] = np.add.reduceat(w.mem[ws], starts, axis=0)
    present[at] = np.add.reduceat(w.alive[ws].astype(np.int64), starts, axis=0)
    return pct, mem, present


@pytest.fixture(scope="module")
def columns() -> SimColumns:
    """A demo with young workers (created inside the day) and GPUs shared by several workers."""
    metrics = SimMetrics(generate_objects(3, 60, DEFAULT_NOW), now=DEFAULT_NOW)
    c = metrics.columns
    assert (c.w_created > metrics.start).any() and len(c._slots) > 1
    assert {code for code, _ in c._by_profile} == {0, 1, 2, 3}
    return c


def _grids(c: SimColumns) -> list[I64]:
    day = c.grid(DEFAULT_NOW - timedelta(days=1), DEFAULT_NOW)
    young = int(c.w_created.max())
    around = day[(day > young - 1800) & (day < young + 1800)]  # workers appear inside the block
    return [day[:1], day[:17], day[100:700], around, day[-5:], day[::7]]


def test_quarter_jitter_is_a_quarter_of_the_jitter() -> None:
    rng = np.random.default_rng(5)
    keys = np.concatenate(
        [
            np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64),
            rng.integers(0, 2**63, 200, dtype=np.uint64) * 2,
        ]
    )[:, None]
    ts = np.concatenate([np.array([0, 59, 60, 61]), rng.integers(0, 2_000_000_000, 300)]).astype(np.int64)[
        None, :
    ]
    _same(quarter_jitter(keys, ts), 0.25 * jitter_v(keys, ts))


def test_smooth_grid_is_smooth_v_at_every_time(columns: SimColumns) -> None:
    key = columns.w_key[:, None]
    for ts in [*_grids(columns), np.array([900, 5, 1800, 901, 901], dtype=np.int64)]:
        _same(smooth_grid(key, ts, 900), smooth_v(key, ts[None, :], 900))
        _same(smooth_grid(key, ts, 900), _reference_smooth_grid(key, ts, 900))


def test_worker_block_is_the_plain_formulation(columns: SimColumns) -> None:
    for ts in _grids(columns):
        hours = columns.hours(ts)
        got, want = columns.workers(ts, hours), _reference_workers(columns, ts, hours)
        _same(got.alive, want.alive)
        _same(got.pct, want.pct)
        _same(got.mem, want.mem)


def test_worker_block_with_a_device_of_no_capacity(
    columns: SimColumns, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker on a GPU of unknown capacity computes 0 %, never a division by zero."""
    cap = columns.w_cap.copy()
    cap[::5] = 0.0
    monkeypatch.setattr(columns, "w_cap", cap)
    monkeypatch.setattr(columns, "_all_caps", False)
    ts = _grids(columns)[2]
    hours = columns.hours(ts)
    got = columns.workers(ts, hours)
    _same(got.pct, _reference_workers(columns, ts, hours).pct)
    assert not got.pct[::5].any()


def test_gpu_sums_slot_by_slot_are_the_reduceat_sums(columns: SimColumns) -> None:
    for ts in _grids(columns):
        hours = columns.hours(ts)
        w = columns.workers(ts, hours)
        got: GpuBlock = columns.gpus(ts, hours, w)
        pct, mem, present = _reference_gpu_sums(columns, w)
        want_pct = np.where(present > 0, np.round(np.minimum(pct, 100.0), 3), 0.0)
        want_mem = np.where(present > 0, np.minimum(mem + columns._overhead, columns.g_cap_v[:, None]), 0.0)
        plain = ~columns.g_native
        alive = columns.g_created[:, None] <= ts[None, :]
        _same(got.pct[plain], np.where(alive, want_pct, 0.0)[plain])
        _same(got.mem[plain], np.where(alive, want_mem, 0.0)[plain])
