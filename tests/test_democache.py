"""The generated demo read back from the cache is the generator's output, byte for byte, and only
for the very same inputs and code; a damaged file or no writable cache means generating."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tftui.sources.sim import democache
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster, generate_objects


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(democache, "MIN_NODES", 1)
    return tmp_path / "tftui" / "demo"


def _counted(seed: int, nodes: int, calls: list[int]) -> Any:
    def make() -> list[dict[str, Any]]:
        calls.append(1)
        return generate_objects(seed, nodes, DEFAULT_NOW)

    return make


def test_a_cached_demo_is_the_generated_one(cache: Path) -> None:
    calls: list[int] = []
    first = democache.cached(_counted(7, 3, calls), seed=7, nodes=3, now=DEFAULT_NOW)
    again = democache.cached(_counted(7, 3, calls), seed=7, nodes=3, now=DEFAULT_NOW)
    assert calls == [1] and len(list(cache.iterdir())) == 1
    assert json.dumps(again) == json.dumps(first) == json.dumps(generate_objects(7, 3, DEFAULT_NOW))
    # the command's source reads it the same way
    assert json.dumps(SimCluster(seed=7, nodes=3, now=DEFAULT_NOW).snapshot()) == json.dumps(first)


def test_other_inputs_or_code_are_another_key(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    democache.cached(_counted(7, 3, calls), seed=7, nodes=3, now=DEFAULT_NOW)
    democache.cached(_counted(8, 3, calls), seed=8, nodes=3, now=DEFAULT_NOW)
    democache.cached(_counted(7, 3, calls), seed=7, nodes=3, now=DEFAULT_NOW, workers=5)
    assert len(calls) == 3
    monkeypatch.setattr(democache, "_code_digest", lambda: "another version of tftui")
    democache.cached(_counted(7, 3, calls), seed=7, nodes=3, now=DEFAULT_NOW)
    assert len(calls) == 4
    assert len(list(cache.glob("*.demo"))) == democache.KEEP  # the oldest pruned


def test_a_damaged_file_or_no_cache_means_generating(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    democache.cached(_counted(7, 3, calls), seed=7, nodes=3, now=DEFAULT_NOW)
    (path,) = cache.iterdir()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    got = democache.cached(_counted(7, 3, calls), seed=7, nodes=3, now=DEFAULT_NOW)
    assert calls == [1, 1] and json.dumps(got) == json.dumps(generate_objects(7, 3, DEFAULT_NOW))
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    got = democache.cached(_counted(7, 3, calls), seed=7, nodes=3, now=DEFAULT_NOW)
    assert len(calls) == 3 and json.dumps(got) == json.dumps(generate_objects(7, 3, DEFAULT_NOW))


def test_small_demos_are_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(democache, "MIN_NODES", 4)
    SimCluster(seed=7, nodes=3, now=DEFAULT_NOW)
    assert not (tmp_path / "tftui").exists()
    SimCluster(seed=7, nodes=4, now=DEFAULT_NOW)
    assert len(list((tmp_path / "tftui" / "demo").iterdir())) == 1
