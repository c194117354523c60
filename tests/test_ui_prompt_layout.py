"""A filter key repaints the prompt and the breadcrumb; it does not lay the screen out again.

Textual's `Input` sets its virtual size to its text's width on every keystroke and the layout sets it
back to the widget's size, and a label's new text lays the screen out: at 5,000 nodes each such
layout cost 3-4 ms of a filter key's frame. The prompt and the breadcrumb have sizes the stylesheet
fixes, so their text never changes their size: only a text longer than the prompt scrolls it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from textual.widget import Widget

from tests.waiting import type_text
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.ui.app import TfTuiApp
from tftui.ui.widgets.chrome import Breadcrumb, PromptInput
from tftui.ui.widgets.plain import PlainLabel
from tftui.ui.widgets.table import ResourceTable


def _console() -> TfTuiApp:
    return TfTuiApp(
        SimCluster(seed=7, nodes=4, now=DEFAULT_NOW), None, clock=lambda: DEFAULT_NOW, refresh_interval=None
    )


@pytest.fixture
def layouts(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Layouts asked for, by the asking widget's class."""
    asked: Counter[str] = Counter()
    real = Widget.refresh

    def refresh(self: Widget, *regions: Any, **kw: Any) -> Any:
        if kw.get("layout") or kw.get("recompose"):
            asked[type(self).__name__] += 1
        return real(self, *regions, **kw)

    monkeypatch.setattr(Widget, "refresh", refresh)
    return asked


async def test_filter_keys_lay_nothing_out_for_the_prompt_or_the_breadcrumb(layouts: Counter[str]) -> None:
    app = _console()
    async with app.run_test(size=(120, 30)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = app.screen.query_one("#main", ResourceTable)
        crumb = app.screen.query_one(Breadcrumb)
        assert crumb.sized_by_styles()
        await pilot.press("slash")
        await pilot.pause()
        layouts.clear()
        before = str(crumb.content)
        await type_text(pilot, "dev")
        await pilot.pause()
        assert table.row_count == 1  # the rows and the breadcrumb's count changed
        assert str(crumb.content) != before and "/dev" in str(crumb.content)
        assert layouts["PromptInput"] == 0
        assert layouts["Breadcrumb"] == 0
        # the screen shows what was typed, as a layout would have shown it
        assert "dev" in "".join(s.text for s in app.screen.query_one(PromptInput).render_line(0))


async def test_a_filter_longer_than_the_prompt_scrolls_to_its_end() -> None:
    app = _console()
    async with app.run_test(size=(40, 20)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("slash")
        field = app.screen.query_one(PromptInput)
        text = "abcdefghij" * 6 + "END"
        await type_text(pilot, text)
        await pilot.pause()
        assert field.value == text
        shown = "".join(s.text for s in field.render_line(0))
        assert "END" in shown  # the end of the text, where the cursor is, is in view
        assert (
            0 <= field.cursor_screen_offset.x - field.region.x <= field.region.width
        )  # as Textual places it


async def test_a_label_sized_by_its_text_still_lays_out_when_its_width_changes(layouts: Counter[str]) -> None:
    """The header's labels are `auto` wide: a longer text must still make room for itself."""
    app = _console()
    async with app.run_test(size=(120, 30)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        label = next(w for w in app.screen.query(PlainLabel) if not w.sized_by_styles() and w.display)
        layouts.clear()
        label.update(str(label.content) + " and more")
        assert layouts[type(label).__name__] == 1
