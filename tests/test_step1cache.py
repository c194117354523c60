"""The step-1 figures and alert replay kept with a cached demo (`step1cache`) are the simulator's
own answers, value for value, for the very same demo, clock and query only; a damaged or foreign
file means computing them again, and `tftui report` prints the same with them, without them and
while writing them."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tftui import cli
from tftui.engine.alerts import evaluation_times
from tftui.engine.report import ALERT_SPAN, RULES
from tftui.model.metrics import AlertResult, NoData
from tftui.sources.sim import democache, step1cache
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.step1 import SimStep1
from tftui.sources.sim.step1cache import ALERTS_SUFFIX, STEP1_SUFFIX, KeptStep1
from tftui.sources.sim.usage import SimMetrics

WINDOW = timedelta(days=1)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(democache, "MIN_NODES", 1)
    return tmp_path / "tftui" / "demo"


def _capacity(objects: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    return {g.name: (g.cap_t, float(g.cap_v)) for g in SimMetrics(objects, now=DEFAULT_NOW).gpus}


def _grid(now: datetime) -> dict[str, list[datetime]]:
    return {rule.name: evaluation_times(rule, now, ALERT_SPAN) for rule in RULES}


def _plain(results: list[AlertResult] | NoData) -> Any:
    """Comparable form: a NoData by its type and message."""
    if isinstance(results, NoData):
        return ("NoData", str(results))
    return [("NoData", str(r)) if isinstance(r, NoData) else r for r in results]


def _reference(objects: list[dict[str, Any]], seed: int, now: datetime) -> tuple[Any, dict[str, Any]]:
    port = SimStep1(SimMetrics(objects, seed=seed, now=now))
    alerts: dict[str, Any] = {}
    for rule, times in _grid(now).items():
        try:
            alerts[rule] = _plain(port.alert_history(rule, times))
        except NoData as exc:
            alerts[rule] = _plain(exc)
    return port.step1(WINDOW, now, _capacity(objects)), alerts


def _kept(kept: KeptStep1, objects: list[dict[str, Any]], now: datetime) -> tuple[Any, dict[str, Any]]:
    step1 = kept.step1(WINDOW, now, _capacity(objects))
    alerts = {rule: _plain(r) for rule, r in kept.alert_histories(_grid(now)).items()}
    return step1, alerts


@pytest.mark.parametrize("seed", [7, 11])
def test_kept_answers_are_the_simulators(cache: Path, seed: int) -> None:
    cluster = SimCluster(seed=seed, nodes=6, now=DEFAULT_NOW)
    assert isinstance(cluster.demo_key, str)
    objects = cluster.snapshot()
    reference = _reference(objects, seed, DEFAULT_NOW)
    assert reference[0].gpus and reference[0].workload_usage  # a demo with figures to keep
    assert any(isinstance(r, list) and any(r) for r in reference[1].values())  # and firing rows
    first = KeptStep1(objects, demo_key=cluster.demo_key, seed=seed, now=DEFAULT_NOW)
    assert _kept(first, objects, DEFAULT_NOW) == reference  # computed and kept
    assert first._port is not None
    assert len(list(cache.glob("*" + STEP1_SUFFIX))) == len(list(cache.glob("*" + ALERTS_SUFFIX))) == 1
    again = KeptStep1(objects, demo_key=cluster.demo_key, seed=seed, now=DEFAULT_NOW)
    assert _kept(again, objects, DEFAULT_NOW) == reference  # read back
    assert again._port is None  # no simulator built for kept answers
    assert again.describe() == SimStep1(SimMetrics([], now=DEFAULT_NOW)).describe()


def test_another_clock_window_or_capacity_is_another_answer(cache: Path) -> None:
    cluster = SimCluster(seed=7, nodes=6, now=DEFAULT_NOW)
    assert isinstance(cluster.demo_key, str)
    objects = cluster.snapshot()
    later = DEFAULT_NOW + timedelta(minutes=37)
    for now in (DEFAULT_NOW, later):
        kept = KeptStep1(objects, demo_key=cluster.demo_key, seed=7, now=now)
        assert _kept(kept, objects, now) == _reference(objects, 7, now)
    assert len(list(cache.glob("*" + STEP1_SUFFIX))) == 2
    kept = KeptStep1(objects, demo_key=cluster.demo_key, seed=7, now=DEFAULT_NOW)
    capacity = _capacity(objects)
    port = SimStep1(SimMetrics(objects, now=DEFAULT_NOW))
    assert kept.step1(timedelta(hours=3), DEFAULT_NOW, capacity) == port.step1(
        timedelta(hours=3), DEFAULT_NOW, capacity
    )
    halved = {g: (t / 2, v) for g, (t, v) in capacity.items()}
    assert kept.step1(WINDOW, DEFAULT_NOW, halved) == port.step1(WINDOW, DEFAULT_NOW, halved)
    assert len(list(cache.glob("*" + STEP1_SUFFIX))) == democache.KEEP  # the oldest pruned


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign-step1", "foreign-alerts"])
def test_a_damaged_file_is_computed_again(cache: Path, damage: str) -> None:
    cluster = SimCluster(seed=7, nodes=6, now=DEFAULT_NOW)
    assert isinstance(cluster.demo_key, str)
    objects = cluster.snapshot()
    reference = _reference(objects, 7, DEFAULT_NOW)
    _kept(KeptStep1(objects, demo_key=cluster.demo_key, seed=7, now=DEFAULT_NOW), objects, DEFAULT_NOW)
    (s1,) = cache.glob("*" + STEP1_SUFFIX)
    (al,) = cache.glob("*" + ALERTS_SUFFIX)
    if damage == "foreign-step1":  # valid files holding something else: their digests check, their shapes not
        democache.keep(s1.stem, STEP1_SUFFIX, {"missing": [], "nodes": [("n", "p", 1.0, 2.0)]})
    elif damage == "foreign-alerts":
        democache.keep(al.stem, ALERTS_SUFFIX, {rule: [[{"node": 1j}]] for rule in _grid(DEFAULT_NOW)})
    else:
        for path in (s1, al):
            data = bytearray(path.read_bytes())
            path.write_bytes(
                bytes(data[: len(data) // 2]) if damage == "truncate" else bytes(data[:-1]) + b"\x01"
            )
    kept = KeptStep1(objects, demo_key=cluster.demo_key, seed=7, now=DEFAULT_NOW)
    assert _kept(kept, objects, DEFAULT_NOW) == reference
    assert kept._port is not None


def test_another_numpy_is_another_answer(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy computes the sums: answers kept by another numpy version are not read back."""
    cluster = SimCluster(seed=7, nodes=6, now=DEFAULT_NOW)
    assert isinstance(cluster.demo_key, str)
    objects = cluster.snapshot()
    _kept(KeptStep1(objects, demo_key=cluster.demo_key, seed=7, now=DEFAULT_NOW), objects, DEFAULT_NOW)
    monkeypatch.setattr(np, "__version__", "0.0-another")
    kept = KeptStep1(objects, demo_key=cluster.demo_key, seed=7, now=DEFAULT_NOW)
    _kept(kept, objects, DEFAULT_NOW)
    assert kept._port is not None  # computed, not read
    assert len(list(cache.glob("*" + STEP1_SUFFIX))) == 2


def test_the_alert_encoding_keeps_every_shape() -> None:
    got: dict[str, list[AlertResult] | NoData] = {
        "A": NoData("a: no table"),
        "B": [[], [{"node": "n1", "x": 1.5, "n": 2}], NoData("b: no rows")],
    }
    grid = {"A": [DEFAULT_NOW], "B": [DEFAULT_NOW] * 3}
    back = step1cache._decode_alerts(step1cache._encode_alerts(got), grid)
    assert back is not None
    assert {k: _plain(v) for k, v in back.items()} == {k: _plain(v) for k, v in got.items()}
    assert step1cache._decode_alerts(step1cache._encode_alerts(got), {"A": [DEFAULT_NOW]}) is None
    assert step1cache._decode_alerts(step1cache._encode_alerts(got), {**grid, "B": [DEFAULT_NOW]}) is None


def test_report_prints_the_same_with_kept_answers(
    cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["report", "--demo", "--nodes", "6", "--json"]
    outputs = []
    for _ in range(2):  # writing them, then reading them
        assert cli.main(argv) == 0
        outputs.append(capsys.readouterr().out)
    assert len(list(cache.glob("*" + STEP1_SUFFIX))) == len(list(cache.glob("*" + ALERTS_SUFFIX))) == 1
    monkeypatch.setattr(democache, "MIN_NODES", 1000)  # not a cached demo: the simulator as before
    assert cli.main(argv) == 0
    outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == outputs[2]
    assert '"alerts"' in outputs[0]
