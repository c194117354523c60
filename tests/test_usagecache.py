"""The autoscale history aggregates kept with a cached demo (`usagecache`) are the simulator's own
answer, bit for bit, for the very same demo, clock and query only; a damaged file means computing
them again, and `tftui plan` prints the same with them, without them and while writing them."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tftui import cli
from tftui.engine.autoscale_usage import AutoscaleState
from tftui.engine.state import ClusterState
from tftui.model.dump import Snapshot
from tftui.model.usage import HistogramQuery, PodBucketArrays
from tftui.runtime.history import autoscale_window
from tftui.sources.sim import democache, usagecache
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.sources.sim.usagecache import KeptUsage


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(democache, "MIN_NODES", 1)
    return tmp_path / "tftui" / "demo"


def _query(objects: list[dict[str, Any]], now: datetime) -> HistogramQuery:
    state = ClusterState.build(Snapshot.of(objects))
    astate = AutoscaleState()
    astate.configure(state)
    q = astate.history_query(now - autoscale_window(state), now)
    assert q is not None
    return q


def _same(a: PodBucketArrays, b: PodBucketArrays) -> None:
    assert a.pods == b.pods
    for f in ("pod", "bucket", "weight", "count", "first", "last", "peak_memory"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype, f
        assert np.array_equal(x, y), f  # bit for bit: no NaN in these columns
        assert x.tobytes() == y.tobytes(), f


@pytest.mark.parametrize("seed", [7, 11])
def test_kept_aggregates_are_the_simulators(cache: Path, seed: int) -> None:
    cluster = SimCluster(seed=seed, nodes=6, now=DEFAULT_NOW)
    assert isinstance(cluster.demo_key, str)
    objects = cluster.snapshot()
    q = _query(objects, DEFAULT_NOW)
    reference = SimMetrics(objects, seed=seed, now=DEFAULT_NOW).usage_histogram_arrays(q)
    assert len(reference.pod)
    first = KeptUsage(objects, demo_key=cluster.demo_key, seed=seed, now=DEFAULT_NOW)
    _same(first.usage_histogram_arrays(q), reference)  # computed and kept
    assert len(list(cache.glob("*" + usagecache.SUFFIX))) == 1
    again = KeptUsage(objects, demo_key=cluster.demo_key, seed=seed, now=DEFAULT_NOW)
    _same(again.usage_histogram_arrays(q), reference)  # read back
    assert again._metrics is None  # no simulator built for a kept answer


def test_another_clock_or_demo_is_another_answer(cache: Path) -> None:
    cluster = SimCluster(seed=7, nodes=6, now=DEFAULT_NOW)
    assert isinstance(cluster.demo_key, str)
    objects = cluster.snapshot()
    later = DEFAULT_NOW + timedelta(minutes=37)
    for now in (DEFAULT_NOW, later):
        q = _query(objects, now)
        got = KeptUsage(objects, demo_key=cluster.demo_key, seed=7, now=now).usage_histogram_arrays(q)
        _same(got, SimMetrics(objects, seed=7, now=now).usage_histogram_arrays(q))
    other = SimCluster(seed=8, nodes=6, now=DEFAULT_NOW)
    assert isinstance(other.demo_key, str) and other.demo_key != cluster.demo_key
    q = _query(other.snapshot(), DEFAULT_NOW)
    got = KeptUsage(
        other.snapshot(), demo_key=other.demo_key, seed=8, now=DEFAULT_NOW
    ).usage_histogram_arrays(q)
    _same(got, SimMetrics(other.snapshot(), seed=8, now=DEFAULT_NOW).usage_histogram_arrays(q))
    assert len(list(cache.glob("*" + usagecache.SUFFIX))) == 3


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign"])
def test_a_damaged_file_is_computed_again(cache: Path, damage: str) -> None:
    cluster = SimCluster(seed=7, nodes=6, now=DEFAULT_NOW)
    assert isinstance(cluster.demo_key, str)
    objects = cluster.snapshot()
    q = _query(objects, DEFAULT_NOW)
    reference = SimMetrics(objects, seed=7, now=DEFAULT_NOW).usage_histogram_arrays(q)
    KeptUsage(objects, demo_key=cluster.demo_key, seed=7, now=DEFAULT_NOW).usage_histogram_arrays(q)
    (path,) = cache.glob("*" + usagecache.SUFFIX)
    if damage == "foreign":  # a valid file holding something else: its digest checks, its shape not
        democache.keep(path.stem, usagecache.SUFFIX, {"pods": [("a", "b")], "pod": b"\0" * 8})
    else:
        data = bytearray(path.read_bytes())
        path.write_bytes(
            bytes(data[: len(data) // 2]) if damage == "truncate" else bytes(data[:-1]) + b"\x01"
        )
    kept = KeptUsage(objects, demo_key=cluster.demo_key, seed=7, now=DEFAULT_NOW)
    _same(kept.usage_histogram_arrays(q), reference)
    assert kept._metrics is not None


def test_plan_prints_the_same_with_kept_aggregates(
    cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["plan", "--demo", "--nodes", "6", "--json"]
    outputs = []
    for _ in range(2):  # writing them, then reading them
        assert cli.main(argv) == 0
        outputs.append(capsys.readouterr().out)
    assert len(list(cache.glob("*" + usagecache.SUFFIX))) == 1
    monkeypatch.setattr(democache, "MIN_NODES", 1000)  # not a cached demo: the simulator as before
    assert cli.main(argv) == 0
    outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == outputs[2]
    assert cli.main(["plan", "--demo", "--nodes", "6"]) == 0  # the text form reads them too
    assert "== autoscale" in capsys.readouterr().out


def test_another_numpy_is_another_answer(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy computes the aggregates: one kept by another numpy version is not read back."""
    cluster = SimCluster(seed=7, nodes=6, now=DEFAULT_NOW)
    assert isinstance(cluster.demo_key, str)
    objects = cluster.snapshot()
    q = _query(objects, DEFAULT_NOW)
    KeptUsage(objects, demo_key=cluster.demo_key, seed=7, now=DEFAULT_NOW).usage_histogram_arrays(q)
    monkeypatch.setattr(np, "__version__", "0.0-another")
    kept = KeptUsage(objects, demo_key=cluster.demo_key, seed=7, now=DEFAULT_NOW)
    kept.usage_histogram_arrays(q)
    assert kept._metrics is not None  # computed, not read
    assert len(list(cache.glob("*" + usagecache.SUFFIX))) == 2
