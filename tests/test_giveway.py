"""Background work gives way at its check-points while the console serves a key.

The refresh thread and the interface share one interpreter; a check-point in a long loop lets the
refresh wait until the key's frame is out. Outside background threads a check-point does nothing,
and where a refresh pauses never changes what it builds."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.test_refresh_reuse import Objects
from tftui.model import giveway
from tftui.model.giveway import background, checkpoint, paced
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.ui.app import TfTuiApp
from tftui.ui.appbase import DataLoaded
from tftui.ui.load import data as load_data
from tftui.ui.load.data import ConsoleData, StateReader, load
from tftui.ui.screens.base import ResourceScreen
from tftui.ui.widgets.chrome import PromptInput
from tftui.ui.widgets.table import ResourceTable


@pytest.fixture(autouse=True)
def _released(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    giveway.release()
    monkeypatch.setattr(giveway, "_held_at", 0.0)  # no key served a moment ago by an earlier test's app
    yield
    giveway.release()


def _console() -> TfTuiApp:
    """A small demo console that refreshes only when asked."""
    return TfTuiApp(
        SimCluster(seed=7, nodes=4, now=DEFAULT_NOW), None, clock=lambda: DEFAULT_NOW, refresh_interval=None
    )


async def _loaded(app: TfTuiApp, pilot: Any) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()


def _in_thread(work: object, *, gives_way: bool) -> tuple[threading.Thread, threading.Event, threading.Event]:
    started, passed = threading.Event(), threading.Event()

    def run() -> None:
        started.set()
        if gives_way:
            with background():
                checkpoint()
        else:
            checkpoint()
        passed.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, started, passed


def test_a_background_check_point_waits_for_the_release(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(giveway, "MAX_HOLD", 600.0)
    giveway.hold(600.0)
    assert giveway.held()
    thread, started, passed = _in_thread(None, gives_way=True)
    assert started.wait(10)
    assert not passed.wait(0.3)  # held at its check-point
    giveway.release()
    assert passed.wait(10)
    thread.join(10)
    assert not giveway.held()


def test_other_threads_never_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(giveway, "MAX_HOLD", 600.0)
    giveway.hold(600.0)
    _, _, passed = _in_thread(None, gives_way=False)
    assert passed.wait(10)
    checkpoint()  # the interface thread itself: returns at once
    assert not giveway.gives_way()


def test_a_hold_lasts_at_most_max_hold() -> None:
    giveway.hold(3600.0)  # capped: typing without a pause never starves a refresh
    _, _, passed = _in_thread(None, gives_way=True)
    assert passed.wait(10)
    assert not giveway.held()


def test_hold_on_holds_again_only_just_after_input(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(giveway.time, "monotonic", lambda: clock[0])
    giveway.hold()
    giveway.release()  # the key's frame is out
    clock[0] += giveway.MAX_HOLD / 2
    assert giveway.hold_on()  # a screen the key brought up: held until its own frame
    assert giveway.held()
    giveway.release()
    clock[0] += giveway.MAX_HOLD
    assert not giveway.hold_on()  # no input a moment ago (the first screen, a timer): nothing held
    assert not giveway.held()


def test_a_keys_late_release_does_not_end_the_hold_of_what_the_key_brought_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A filter key's release is queued for the frame after it, which may come after the rows it
    filtered took their own hold: that hold lasts until its own release."""
    clock = [1000.0]
    monkeypatch.setattr(giveway.time, "monotonic", lambda: clock[0])
    key = giveway.hold()
    rows = giveway.hold_on()
    assert rows and rows != key
    giveway.release(key)  # the key's frame (the prompt echo) is out
    assert giveway.held()
    giveway.release(rows)
    assert not giveway.held()
    again = giveway.hold()
    giveway.release(rows)  # a stale token releases nothing
    assert giveway.held()
    giveway.release(again)
    assert not giveway.held()


def test_background_marks_only_its_own_thread_and_nests() -> None:
    assert not giveway.gives_way()
    with background():
        assert giveway.gives_way()
        with background():
            assert giveway.gives_way()
        assert giveway.gives_way()
        seen: list[bool] = []
        other = threading.Thread(target=lambda: seen.append(giveway.gives_way()))
        other.start()
        other.join(10)
        assert seen == [False]
    assert not giveway.gives_way()


def test_paced_yields_every_item_lazily_with_a_check_point_per_stride(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[int] = []
    produced: list[int] = []

    def items() -> Iterator[int]:
        for i in range(1000):
            produced.append(i)
            yield i

    monkeypatch.setattr(giveway, "_wait", lambda: waits.append(len(produced)))
    giveway.hold()
    with background():
        out = []
        for i in paced(items(), 100):
            assert len(produced) == i + 1  # one item at a time: a loop body may change later ones
            out.append(i)
    assert out == list(range(1000))
    assert waits == [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]


def test_a_refresh_held_at_every_check_point_builds_the_same_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every check-point of a refresh is reached (the wait is a probe) and the data is the same,
    for the first build and for the incremental one after a pod changed."""
    objects = SimCluster(seed=7, nodes=12, now=DEFAULT_NOW).snapshot()
    cluster = Objects(objects)
    before = load(cluster, None, DEFAULT_NOW)
    pods = [i for i, o in enumerate(objects) if o.get("kind") == "Pod"]
    changed = copy.deepcopy(objects[pods[0]])
    changed["metadata"].setdefault("annotations", {})["test/changed"] = "1"
    after_objects = list(objects)
    after_objects[pods[0]] = changed
    after = load(Objects(after_objects), None, DEFAULT_NOW)

    reached: list[int] = []
    monkeypatch.setattr(giveway, "_wait", lambda: reached.append(1))
    monkeypatch.setattr(giveway, "_hold_until", 1.0)  # held for good; the probe returns at once
    held: list[load_data.ConsoleData] = []

    def refresh() -> None:
        reader = StateReader()
        with background():
            held.append(load(cluster, None, DEFAULT_NOW, None, reader))
            cluster.objects = after_objects
            held.append(load(cluster, None, DEFAULT_NOW, None, reader))  # the incremental path

    thread = threading.Thread(target=refresh)
    thread.start()
    thread.join(120)
    assert len(held) == 2 and len(reached) > 20
    for got, want in zip(held, (before, after), strict=True):
        assert got.state.nodes == want.state.nodes
        assert got.state.workers == want.state.workers
        assert got.state.pools == want.state.pools
        assert got.ops.plan == want.ops.plan


async def test_a_key_holds_background_work_until_its_frame_is_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_hold, real_release = giveway.hold, giveway.release

    def hold(seconds: float = giveway.MAX_HOLD) -> int:
        calls.append("hold")
        return real_hold(seconds)

    def release(token: int = 0) -> None:
        calls.append("release")
        real_release(token)

    monkeypatch.setattr(giveway, "hold", hold)
    monkeypatch.setattr(giveway, "release", release)
    seen: list[bool] = []
    real_load = load_data.load_rest

    def probe(*args: object, **kwargs: object) -> load_data.ConsoleData:
        seen.append(giveway.gives_way())
        return real_load(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("tftui.ui.refreshing.load_rest", probe)
    app = _console()
    async with app.run_test(size=(120, 40)) as pilot:
        await _loaded(app, pilot)
        assert seen == [True]  # the refresh thread gives way
        await pilot.press("down")
        await pilot.pause()
        assert calls[:2] == ["hold", "release"]
        assert not giveway.held()


async def test_a_key_holds_once_though_it_bubbles_back_to_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """The focused table lets the key bubble up to the app again (forwarded): one hold a key."""
    holds: list[float] = []
    real_hold = giveway.hold

    def hold(seconds: float = giveway.MAX_HOLD) -> int:
        holds.append(seconds)
        return real_hold(seconds)

    monkeypatch.setattr(giveway, "hold", hold)
    app = _console()
    async with app.run_test(size=(120, 40)) as pilot:
        await _loaded(app, pilot)
        await pilot.press("down", "down")
        await pilot.pause()
        assert len(holds) == 2


async def test_a_view_switch_holds_background_work_until_the_new_view_is_drawn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`:nodes` ends with `enter`, whose frame is the old view's; background work waits on until the
    new view's first frame is drawn, or a refresh would compete for the interpreter with it. The
    cap on a hold (`MAX_HOLD`, 0.1 s) is raised here: on a loaded machine (the suite's other worker)
    the new view can take longer than that, and what is tested is the order, not the cap."""
    monkeypatch.setattr(giveway, "MAX_HOLD", 10.0)
    drawn: list[tuple[str, bool]] = []
    real_render = ResourceTable.render_lines

    def render(self: ResourceTable, crop: Any) -> Any:
        drawn.append((type(self.screen).__name__, giveway.held()))
        return real_render(self, crop)

    app = _console()
    async with app.run_test(size=(120, 40)) as pilot:
        await _loaded(app, pilot)
        monkeypatch.setattr(ResourceTable, "render_lines", render)
        await pilot.press("colon", *"nodes", "enter")
        await pilot.pause()
        await pilot.pause()
        first = next(held for screen, held in drawn if screen == "NodesScreen")
        assert first  # the new view's first frame was drawn with background work held
        assert not giveway.held()  # and released after it


async def test_a_drill_down_and_going_back_hold_background_work_until_drawn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """enter opens a screen and esc shows the one below again, each after the key's own frame: the
    shown screen's first frame is drawn with background work still held. The first screen at start
    was brought up by no key: it holds nothing."""
    drawn: list[tuple[object, bool]] = []
    real_render = ResourceTable.render_lines

    def render(self: ResourceTable, crop: Any) -> Any:
        drawn.append((self.screen, giveway.held()))
        return real_render(self, crop)

    monkeypatch.setattr(ResourceTable, "render_lines", render)
    app = _console()
    async with app.run_test(size=(120, 40)) as pilot:
        await _loaded(app, pilot)
        pools = app.screen
        assert not any(held for screen, held in drawn if screen is pools)
        await giveway_pause(pilot)
        drawn.clear()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()
        opened = app.screen
        assert opened is not pools
        assert next(held for screen, held in drawn if screen is opened)
        await giveway_pause(pilot)
        drawn.clear()
        await pilot.press("escape")
        await pilot.pause()
        await pilot.pause()
        assert app.screen is pools
        assert next(held for screen, held in drawn if screen is pools)
        assert not giveway.held()


async def test_a_filter_key_holds_background_work_until_its_rows_are_drawn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A filter key's rows are built and drawn after the prompt's own frame, whose release must not
    end the hold the rows took (`giveway.hold_on` in `_set_needle`)."""
    drawn: list[tuple[str, bool]] = []
    real_render = ResourceTable.render_lines

    def render(self: ResourceTable, crop: Any) -> Any:
        drawn.append((getattr(self.screen, "needle", ""), giveway.held()))
        return real_render(self, crop)

    app = _console()
    async with app.run_test(size=(120, 40)) as pilot:
        await _loaded(app, pilot)
        await pilot.press("slash")
        await giveway_pause(pilot)
        table = app.screen.query_one(ResourceTable)
        before = table.row_count
        monkeypatch.setattr(ResourceTable, "render_lines", render)
        await pilot.press("v")  # `demo-dev` only
        await pilot.pause()
        await pilot.pause()
        assert 0 < table.row_count < before
        assert next(held for needle, held in drawn if needle == "v")  # the filtered rows' frame: held
        assert not giveway.held()  # and released after it


async def test_a_filter_key_filters_the_rows_within_its_own_handling() -> None:
    """The text typed reaches the rows while the input handles the key, not through `Input.Changed`
    three message queues later: the key's frame, which ends its hold, was often drawn before that
    message arrived, and the rows were then filtered while a refresh competed for the interpreter.
    The prompt opened or closed on a filtered view keeps the filter."""
    app = _console()
    async with app.run_test(size=(120, 40)) as pilot:
        await _loaded(app, pilot)
        await pilot.press("slash")
        screen = app.screen
        assert isinstance(screen, ResourceScreen)
        table = screen.query_one(ResourceTable)
        before = table.row_count
        screen.query_one(PromptInput).insert_text_at_cursor("v")  # what the input does on `v`
        assert screen.needle == "v"  # no await: filtered in the same step
        assert 0 < table.row_count < before
        await pilot.press("enter")
        assert screen.needle == "v" and table.row_count < before
        await pilot.press("slash")  # the prompt opens with the filter's text, filtering nothing anew
        assert screen.query_one(PromptInput).value == "v" and screen.needle == "v"
        await pilot.press("backspace")
        assert screen.needle == "" and table.row_count == before


def test_slices_cover_the_list_in_order_with_a_check_point_between_two_while_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A C-level pass over a big list goes a slice at a time, waiting between two while a key is
    served: a pass never gives the interpreter up until it ends."""
    waits: list[int] = []
    monkeypatch.setattr(giveway, "checkpoint", lambda: waits.append(1))
    items = list(range(3 * 4 + 1))
    assert [list(part) for part in giveway.slices(items, 4)] == [items[i : i + 4] for i in range(0, 13, 4)]
    assert waits == []  # nothing held: no check-point at all
    giveway.hold()
    assert [x for part in giveway.slices(items, 4) for x in part] == items
    assert len(waits) == 3  # between the four slices, not before the first
    assert list(giveway.slices([], 4)) == []
    monkeypatch.setattr(giveway, "SLICE", 5)
    assert [len(part) for part in giveway.slices(items)] == [5, 5, 3]  # the module's size by default


async def giveway_pause(pilot: Any) -> None:
    """Long enough after the last key that no hold is left to carry on (`giveway.MAX_HOLD`)."""
    await pilot.pause(giveway.MAX_HOLD * 1.5)


def _data_applied(app: TfTuiApp) -> tuple[ConsoleData, ConsoleData, ConsoleData, list[object]]:
    """The data on screen, two copies of it to post as newer refreshes, and the list each data
    the console applies is appended to (in the order applied)."""
    first = app.data
    assert first is not None
    applied: list[object] = []

    def watched(data: object) -> None:
        applied.append(data)

    app.watch(app, "data", watched, init=False)
    return first, copy.copy(first), copy.copy(first), applied


async def test_an_outcome_landing_between_a_key_and_its_frame_waits_for_that_frame(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A refresh's data (or an analysis) posted while a key is served is applied after the next
    frame (the key's), in the order the outcomes came: re-rendering the view for it made that key
    the slowest of a typed filter. With no key being served, an outcome applies at once."""
    monkeypatch.setattr(giveway, "MAX_HOLD", 10.0)
    app = _console()
    async with app.run_test(size=(120, 40)) as pilot:
        await _loaded(app, pilot)
        first, newer, newest, applied = _data_applied(app)
        after_frame: list[Any] = []
        monkeypatch.setattr(app, "call_after_refresh", lambda callback, *a: after_frame.append(callback))

        giveway.hold()  # a key is being served
        app.post_message(DataLoaded(newer))
        app.post_message(DataLoaded(newest))
        await pilot.pause()
        assert app.data is first and applied == []  # both wait, behind one call after the frame
        assert len(after_frame) == 1
        giveway.release()
        after_frame.pop()()
        assert applied == [newer, newest] and app.data is newest

        app.post_message(DataLoaded(first))  # nothing held: applied as it comes
        await pilot.pause()
        assert applied[-1] is first and app.data is first and after_frame == []


async def test_an_outcome_held_for_a_frame_is_applied_even_if_the_call_after_it_is_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The call after the frame waits on the screen current then, and a screen closed before its
    next idle drops it (a key that closes a view): the hold's end applies the outcome anyway, and
    an outcome arriving after the hold ended first applies those still waiting, in order."""
    app = _console()
    async with app.run_test(size=(120, 40)) as pilot:
        await _loaded(app, pilot)
        first, newer, newest, applied = _data_applied(app)
        monkeypatch.setattr(app, "call_after_refresh", lambda callback, *a: None)  # lost

        giveway.hold()
        app.post_message(DataLoaded(newer))
        await pilot.pause()
        assert app.data is first
        await pilot.pause(giveway.MAX_HOLD * 3)  # the backstop when the hold has ended
        assert app.data is newer and app._after_frame == []

        monkeypatch.setattr(app, "set_timer", lambda *a, **k: None)  # the backstop lost too
        giveway.hold()
        app.post_message(DataLoaded(first))
        await pilot.pause()
        assert app.data is newer
        giveway.release()
        app.post_message(DataLoaded(newest))  # nothing held: what waits goes first, then this
        await pilot.pause()
        assert applied == [newer, first, newest] and app._after_frame == []
