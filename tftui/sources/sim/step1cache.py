"""The cached demo's step-1 figures and alert replay, computed once and kept with it (`democache`).

`tftui report --demo` asks the simulator for the four step-1 aggregates over a day and for every
alert rule's evaluations over the replayed span (`SimStep1`): at 5,000 nodes, indexing the objects
and the numpy passes over a day of 30,000 workers' one-minute samples cost about 4 of its CPU
seconds. The answers are pure functions of the demo's objects, the simulator's seed and clock and
the query, so once computed they are kept in the demo cache as `usagecache` keeps `plan`'s history
aggregates: under a name derived from the cached demo's own (`democache.demo_key`: the generator's
arguments, every file of the installed tftui and the interpreter), the seed, the clock, the query's
every argument (the window and its end, each GPU's capacity; the rules and their instants), numpy's
version and the machine's architecture; checked against a digest, written whole then renamed, and
anything unexpected (a damaged file, a value of another shape) means computing them as without the
cache. The simulator itself is only built for a query whose answer is not kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from tftui.model.metrics import (
    AlertResult,
    AlertRow,
    GPUUsageSummary,
    NoData,
    NodeAllocation,
    Step1,
    WorkloadRequest,
    WorkloadUsage,
)
from tftui.sources.sim import democache

if TYPE_CHECKING:  # imported where it is built: a kept answer needs neither it nor its index
    from tftui.sources.sim.step1 import SimStep1

__all__ = ["ALERTS_SUFFIX", "STEP1_SUFFIX", "KeptStep1"]

STEP1_SUFFIX: Final = ".step1"
ALERTS_SUFFIX: Final = ".alerts"
DESCRIPTION: Final = "demo (simulated metrics)"  # `SimStep1.describe`'s

_PARTS: Final = tuple(  # Step1's four aggregates: each record kept as the tuple of its fields
    (part, cls, tuple(f.name for f in fields(cls)))
    for part, cls in (
        ("nodes", NodeAllocation),
        ("gpus", GPUUsageSummary),
        ("workload_requests", WorkloadRequest),
        ("workload_usage", WorkloadUsage),
    )
)
_PLAIN: Final = (str, int, float, type(None))
_PLAIN_TYPES: Final = frozenset({str, int, float, bool, type(None)})


class KeptStep1:
    """`SimStep1(SimMetrics(objects, seed=seed, now=now))` whose answers are kept with the cached
    demo `demo_key` names; `objects` must be that demo's objects, unchanged."""

    def __init__(self, objects: list[dict[str, Any]], *, demo_key: str, seed: int, now: datetime) -> None:
        self._objects = objects
        self._demo_key = demo_key
        self._seed = seed
        self._now = now
        self._port: SimStep1 | None = None

    def port(self) -> SimStep1:
        """The simulator's step-1 port over the objects, built by the first query that needs it."""
        if self._port is None:
            from tftui.sources.sim.step1 import SimStep1
            from tftui.sources.sim.usage import SimMetrics

            self._port = SimStep1(SimMetrics(self._objects, seed=self._seed, now=self._now))
        return self._port

    def describe(self) -> str:
        return DESCRIPTION

    def step1(
        self, window: timedelta, now: datetime, gpu_capacity: Mapping[str, tuple[float, float]]
    ) -> Step1:
        """`SimStep1.step1`, from the cache when it holds the answer."""
        capacity = sorted(gpu_capacity.items())
        name = self._name({"step1": [window.total_seconds(), now.isoformat(), capacity]})
        got = _decode_step1(democache.load(name, STEP1_SUFFIX), now, window)
        if got is None:
            got = self.port().step1(window, now, gpu_capacity)
            democache.keep(name, STEP1_SUFFIX, _encode_step1(got))
        return got

    def alert_histories(
        self, grid: Mapping[str, Sequence[datetime]]
    ) -> dict[str, list[AlertResult] | NoData]:
        """Every rule's `SimStep1.alert_history` over its instants (NoData: the rule cannot be
        evaluated at all), from the cache when it holds them; `evaluate_history` reads them so."""
        rules = sorted((rule, [t.isoformat() for t in times]) for rule, times in grid.items())
        name = self._name({"alerts": rules})
        got = _decode_alerts(democache.load(name, ALERTS_SUFFIX), grid)
        if got is None:
            got = {}
            for rule, times in grid.items():
                try:
                    got[rule] = self.port().alert_history(rule, times)
                except NoData as exc:
                    got[rule] = exc
            democache.keep(name, ALERTS_SUFFIX, _encode_alerts(got))
        return got

    def alert_history(self, rule: str, times: Sequence[datetime]) -> list[AlertResult]:
        """`SimStep1.alert_history` (not kept: the report reads `alert_histories`)."""
        return self.port().alert_history(rule, times)

    def alert_rows(self, rule: str, now: datetime) -> list[AlertRow]:
        """`SimStep1.alert_rows` (not kept)."""
        return self.port().alert_rows(rule, now)

    def _name(self, query: dict[str, Any]) -> str:
        return democache.derived_name(self._demo_key, self._seed, self._now, query)


# -- step 1 ----------------------------------------------------------------------------------------


def _encode_step1(s: Step1) -> dict[str, Any]:
    out: dict[str, Any] = {"missing": list(s.missing)}
    for part, _cls, names in _PARTS:
        out[part] = [tuple(getattr(x, f) for f in names) for x in getattr(s, part)]
    return out


def _decode_step1(value: object, now: datetime, window: timedelta) -> Step1 | None:
    """The kept figures (the query's own `now` and `window`), or None for anything but what
    `_encode_step1` writes."""
    if not isinstance(value, dict):
        return None
    missing = value.get("missing")
    if not isinstance(missing, list) or not all(isinstance(m, str) for m in missing):
        return None
    parts: dict[str, tuple[Any, ...]] = {}
    for part, cls, names in _PARTS:
        rows = value.get(part)
        if not isinstance(rows, list):
            return None
        width = len(names)
        for r in rows:
            if not (type(r) is tuple and len(r) == width and all(isinstance(x, _PLAIN) for x in r)):
                return None
        parts[part] = tuple(cls(*r) for r in rows)
    return Step1(now=now, window=window, missing=tuple(missing), **parts)


# -- alerts ----------------------------------------------------------------------------------------


def _encode_alerts(got: Mapping[str, list[AlertResult] | NoData]) -> dict[str, Any]:
    """Per rule: a NoData as its message (a str), else one entry per instant: the rows (a list of
    dicts) or a NoData's message as a one-element tuple."""

    def one(r: AlertResult) -> Any:
        return (str(r),) if isinstance(r, NoData) else r

    return {rule: str(res) if isinstance(res, NoData) else [one(r) for r in res] for rule, res in got.items()}


def _decode_alerts(
    value: object, grid: Mapping[str, Sequence[datetime]]
) -> dict[str, list[AlertResult] | NoData] | None:
    if not isinstance(value, dict) or set(value) != set(grid):
        return None
    out: dict[str, list[AlertResult] | NoData] = {}
    for rule, times in grid.items():
        kept = value[rule]
        if isinstance(kept, str):
            out[rule] = NoData(kept)
            continue
        if not isinstance(kept, list) or len(kept) != len(times):
            return None
        results: list[AlertResult] = []
        for r in kept:
            if type(r) is tuple and len(r) == 1 and isinstance(r[0], str):
                results.append(NoData(r[0]))
            elif type(r) is list and _rows(r):
                results.append(r)
            else:
                return None
        out[rule] = results
    return out


def _rows(rows: list[Any]) -> bool:
    """Every item a dict of str keys to plain values (one set of the types seen: 100,000 rows)."""
    if any(type(row) is not dict for row in rows):
        return False
    return {type(k) for row in rows for k in row} <= {str} and {
        type(v) for row in rows for v in row.values()
    } <= _PLAIN_TYPES
