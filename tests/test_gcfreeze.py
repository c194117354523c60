"""A big load is frozen out of the cyclic GC while the collector is still paused.

Objects allocated while the collector is off are all young: the first allocation after
`gc.enable()` would start a collection of the youngest generation that scans every one of them
(about a CPU-second for a 5,000-node dump, before the first screen). So the dump loader and the
console's state reader call `gc.freeze()` inside the pause. The thresholds are lowered so that the
small demo counts as big; `gc.freeze` is replaced by a probe (the test process keeps its GC)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from tests.test_refresh_reuse import Objects, assert_same_state, full_build
from tftui.model.dump import dumps
from tftui.model.gcpause import YoungFreezer, gc_paused
from tftui.sources import dumpfile
from tftui.sources.dumpfile import DumpCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster, generate_objects
from tftui.ui.app import TfTuiApp
from tftui.ui.appbase import INPUT_QUIET
from tftui.ui.load import data as load_data
from tftui.ui.load.data import StateReader, load
from tftui.ui.screens import base as screens_base


@pytest.fixture
def freezes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether the collector was enabled at each `gc.freeze()` call."""
    seen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: seen.append(gc.isenabled()))
    monkeypatch.setattr(dumpfile, "FREEZE_AFTER", 10)
    monkeypatch.setattr(load_data, "FREEZE_AFTER", 10)
    return seen


def test_a_big_dump_is_frozen_before_the_collector_is_back_on(tmp_path: Path, freezes: list[bool]) -> None:
    path = tmp_path / "dump.json"
    path.write_text(dumps(SimCluster(seed=7, nodes=4, now=DEFAULT_NOW).snapshot()))
    assert gc.isenabled()
    cluster = DumpCluster(path)
    assert freezes == [False]
    assert gc.isenabled()
    # the reader's first build of it is frozen the same way, inside its own pause
    StateReader().read(cluster)
    assert freezes == [False, False]
    assert gc.isenabled()


def test_a_small_dump_is_not_frozen(
    tmp_path: Path, freezes: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dumpfile, "FREEZE_AFTER", 10**6)
    path = tmp_path / "dump.json"
    path.write_text(dumps(SimCluster(seed=7, nodes=4, now=DEFAULT_NOW).snapshot()))
    DumpCluster(path)
    assert freezes == []


def test_a_replaced_state_is_freed_without_the_collector() -> None:
    """Frozen objects are only freed by reference counting: a refresh's state, with everything
    the console derived from it (usage, fragmentation, the engine's plan and its indexes), must
    form no reference cycle, or a replaced first state (frozen) stays in memory for good."""
    import weakref

    from tftui.ui.load.data import load

    cluster = SimCluster(seed=7, nodes=6, now=DEFAULT_NOW)
    reader = StateReader()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        data = load(cluster, None, DEFAULT_NOW, reader=reader)
        state = weakref.ref(data.state)
        assert data.state._derived  # the engine's plan derived its indexes from it
        reader.previous = None  # the next read builds a new state, as a relist would
        data = load(cluster, None, DEFAULT_NOW, reader=reader)
        assert data.state is not state()
        assert state() is None
    finally:
        if was_enabled:
            gc.enable()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_replaced_state_is_freed_without_the_cyclic_gc() -> None:
    """A refresh's survivors are frozen (`YoungFreezer`): a replaced state must then be freed by
    reference counting alone, so nothing it derived (defrag's index, …) may hold it."""
    data = load(Objects(generate_objects(6, 12, DEFAULT_NOW)), None, DEFAULT_NOW, None, StateReader())
    assert "defrag" in data.state._derived  # the plans ran and derived their indexes
    gone = weakref.ref(data.state)
    with gc_paused():
        del data
        assert gone() is None


def test_young_freezer_freezes_and_reclaims_the_garbage_it_kept() -> None:
    freezer = YoungFreezer(reclaim_every=3)
    try:
        with gc_paused():
            pending = weakref.ref(_Cycle())  # cyclic garbage not collected yet: frozen with the rest
            freezer.settle()
            assert gc.get_count()[0] < 10  # nothing young left for the next collection to scan
            freezer.settle()
            assert pending() is not None and freezer.reclaims == 0
            freezer.settle()
            assert freezer.reclaims == 1
            assert pending() is None  # the one full collection freed it
            assert gc.get_freeze_count() > 0  # and what is alive is frozen again
    finally:
        gc.unfreeze()


class _Probe(YoungFreezer):
    def __init__(self) -> None:
        super().__init__()
        self.settled: list[bool] = []  # whether the collector was on at each settle
        self.quiet: list[bool] = []  # whether the console was quiet (no recent key) at each settle
        self.kept: list[bool] = []  # whether the collector was on at each `keep`

    def settle(self, quiet: bool = True) -> None:
        self.settled.append(gc.isenabled())
        self.quiet.append(quiet)

    def keep(self) -> None:
        self.kept.append(gc.isenabled())


def _console() -> TfTuiApp:
    """A small read-only demo console that refreshes only when asked."""
    return TfTuiApp(
        SimCluster(seed=3, nodes=12, now=DEFAULT_NOW),
        None,
        clock=lambda: DEFAULT_NOW,
        refresh_interval=None,
        read_only=True,
    )


def test_young_freezer_keeps_what_the_interface_built_without_counting_a_settle() -> None:
    gc.unfreeze()
    freezer = YoungFreezer(reclaim_every=1)
    try:
        with gc_paused():
            pending = weakref.ref(_Cycle())  # cyclic garbage a render left
            built = [[i] for i in range(1000)]
            freezer.keep()
            assert gc.get_count()[0] < 10  # nothing young left for the next collection to scan
            assert gc.get_freeze_count() >= len(built)
            assert pending() is None  # collected, not frozen with the build
            assert freezer.settles == 0 and freezer.reclaims == 0  # the reclaim's pace is the refreshes'
    finally:
        freezer.release()
    assert gc.get_freeze_count() == 0  # a console that only kept hands it back too


def test_young_freezer_waits_for_a_quiet_settle_to_reclaim() -> None:
    """The full collection stops every thread: while the operator types it is put off, not dropped."""
    freezer = YoungFreezer(reclaim_every=2)
    try:
        with gc_paused():
            pending = weakref.ref(_Cycle())
            freezer.settle(quiet=False)
            freezer.settle(quiet=False)  # due, but keys are coming in
            freezer.settle(quiet=False)
            assert freezer.reclaims == 0 and pending() is not None
            freezer.settle(quiet=True)
            assert freezer.reclaims == 1 and pending() is None
            freezer.settle(quiet=True)  # the count starts again after a reclaim
            assert freezer.reclaims == 1
    finally:
        gc.unfreeze()


async def test_a_key_makes_the_console_busy_for_its_refreshes() -> None:
    app = _console()
    app._young = probe = _Probe()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert probe.quiet == [True]  # nobody typed yet
        await pilot.press("down")
        assert not app._quiet()
        await pilot.press("ctrl+r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert probe.quiet == [True, False]
        app._last_input -= INPUT_QUIET
        assert app._quiet()


async def test_each_console_refresh_settles_what_it_built_inside_the_pause() -> None:
    app = _console()
    app._young = probe = _Probe()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert probe.settled == [False]  # the first screen's build
        await pilot.press("ctrl+r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert probe.settled == [False, False]
    assert gc.isenabled()


async def test_a_view_the_interface_builds_is_frozen_inside_the_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A view opened between refreshes is built on the interface thread: its rows are frozen as
    the refreshes' are, or every full collection until the next refresh rescans them (a 0.1 s pause
    every few view switches at 5,000 nodes). A build that leaves little (a filter key) is not."""
    app = _console()
    app._young = probe = _Probe()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        monkeypatch.setattr(screens_base, "KEEP_BUILT_AFTER", 10**9)
        assert app.switch_view("workloads")
        await pilot.pause()
        assert probe.kept == []
        monkeypatch.setattr(screens_base, "KEEP_BUILT_AFTER", 0)
        assert app.switch_view("nodes")
        await pilot.pause()
        assert probe.kept and not any(probe.kept)  # built, then frozen before the collector is on
    assert gc.isenabled()


async def test_a_closed_console_hands_what_it_froze_back_to_the_collector() -> None:
    gc.unfreeze()
    app = _console()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert gc.get_freeze_count() > 0  # the first screen's build, frozen
    assert gc.get_freeze_count() == 0  # the app's objects can be collected once it is gone


def test_a_dumps_refreshes_take_the_snapshot_made_when_it_was_opened(tmp_path: Path) -> None:
    """The reader takes a dump's validated snapshot as it is (no grouping of 185,000 objects by kind
    again on every refresh): the first state is built from it, later reads keep that state."""
    path = tmp_path / "dump.json"
    path.write_text(dumps(SimCluster(seed=7, nodes=4, now=DEFAULT_NOW).snapshot()))
    cluster = DumpCluster(path)
    reader = StateReader()
    _, first = reader.read(cluster)
    assert first.snapshot is cluster.validated_snapshot()
    _, second = reader.read(cluster)
    assert reader.unchanged and second is first and reader.validated == 0
    assert_same_state(first, full_build(cluster.snapshot()))
