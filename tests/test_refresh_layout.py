"""A refresh lays the screen out again only when a label's width changes: the header's labels are
updated on every refresh, and Textual lays out (and redraws) the whole screen on every update."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult

from tftui.ui.widgets.plain import PlainLabel


class LabelApp(App[None]):
    def compose(self) -> ComposeResult:
        yield PlainLabel("refreshed 12:00:00 UTC", id="label")


def spy(label: PlainLabel) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    refresh = label.refresh

    def recording(*regions: Any, **options: Any) -> Any:
        calls.append(options)
        return refresh(*regions, **options)

    label.refresh = recording  # type: ignore[method-assign]
    return calls


async def test_a_label_updated_with_its_own_text_asks_for_nothing() -> None:
    app = LabelApp()
    async with app.run_test() as pilot:
        label = app.query_one("#label", PlainLabel)
        calls = spy(label)
        label.update("refreshed 12:00:00 UTC")
        await pilot.pause()
        assert calls == []
        assert str(label.render()) == "refreshed 12:00:00 UTC"


async def test_a_text_of_the_same_width_repaints_the_label_without_a_layout() -> None:
    app = LabelApp()
    async with app.run_test() as pilot:
        label = app.query_one("#label", PlainLabel)
        width = label.size.width
        calls = spy(label)
        label.update("refreshed 12:00:10 UTC")
        await pilot.pause()
        assert [c.get("layout", False) for c in calls] == [False]
        assert str(label.render()) == "refreshed 12:00:10 UTC"
        assert label.size.width == width


async def test_a_wider_text_lays_the_screen_out_again() -> None:
    app = LabelApp()
    async with app.run_test() as pilot:
        label = app.query_one("#label", PlainLabel)
        width = label.size.width
        calls = spy(label)
        label.update("refreshed 12:00:10 UTC ⟳")
        await pilot.pause()
        assert calls and calls[0].get("layout") is True
        assert label.size.width == width + 2
        # markup and controls stay plain text on every path
        label.update("[b]x[/b]\x1b")
        await pilot.pause()
        assert str(label.render()) == "[b]x[/b]\\x1b"


async def test_the_header_keeps_its_width_when_a_refresh_starts_and_ends(demo: Any, metrics: Any) -> None:
    """The refresh mark's cell is kept while no refresh runs: start and end repaint the time label
    alone, never the whole screen."""
    from tests.ui_support import make_app, settle

    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        label = app.screen.query_one("#header-time", PlainLabel)
        idle = str(label.render())
        calls = spy(label)
        app.loading = True
        await pilot.pause()
        running = str(label.render())
        app.loading = False
        await pilot.pause()
        assert running.endswith(" ⟳") and running[:-2] == idle[:-2]
        assert len(running) == len(idle) == len(str(label.render()))
        assert calls and all(not c.get("layout") for c in calls)
