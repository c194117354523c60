"""The footer is composed again only when the keys it shows change; it shows the keys the focused
widget and its screen bind, except while the `:`/`/` prompt has the focus: then the view's keys
stay, dimmed (`widgets.chrome.SteadyFooter`)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from tests.test_prebuild import make
from tftui.ui.app import TfTuiApp
from tftui.ui.screens.base import ResourceScreen
from tftui.ui.widgets.chrome import SteadyFooter


def _shown(app: TfTuiApp) -> list[str]:
    return [key.key for key in app.screen.query(FooterKey)]


def _bound(app: TfTuiApp) -> list[str]:
    return [binding.key for _node, binding, _on, _tip in app.screen.active_bindings.values() if binding.show]


async def _recomposes_per_switch(monkeypatch: pytest.MonkeyPatch, *, steady: bool) -> list[int]:
    count = [0]
    recompose = Footer.recompose

    async def counting(self: Any) -> None:
        count[0] += 1
        await recompose(self)

    monkeypatch.setattr(Footer, "recompose", counting)
    _, app = make()
    out = []
    async with app.run_test(size=(160, 50)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        for view in ("nodes", "gpus", "nodes", "gpus", "nodes"):
            count[0] = 0
            before = _shown(app)
            await pilot.press("colon", *view)
            await pilot.pause()
            if steady:  # the view's keys, dimmed, while the prompt has the focus
                assert _shown(app) == before and app.screen.query_one(Footer).has_class("-prompting")
            else:  # Textual's: the prompt's keys
                assert _shown(app) == _bound(app)
            await pilot.press("enter")
            await pilot.pause()
            await pilot.pause()
            assert type(app.screen).__name__.lower().startswith(view)
            assert _shown(app) == _bound(app) and "slash" in _shown(app)  # the view's keys again
            assert not app.screen.query_one(Footer).has_class("-prompting")
            out.append(count[0])
    return out


async def test_a_view_switch_recomposes_the_footer_only_when_its_keys_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steady = await _recomposes_per_switch(monkeypatch, steady=True)
    monkeypatch.setattr(SteadyFooter, "bindings_changed", Footer.bindings_changed)  # Textual's own
    textual = await _recomposes_per_switch(monkeypatch, steady=False)
    # a view shown again keeps its footer; Textual's footer recomposed on every focus change and
    # on the screen's resume (6 times a switch)
    assert steady[2:] == [0, 0, 0]
    assert all(s < t for s, t in zip(steady, textual, strict=True))


async def test_the_footer_stays_while_filtering_and_follows_the_focus_after() -> None:
    """`/` dims the view's keys without composing the footer again, while the letters filter the
    rows; `esc` brings the keys back as they were."""
    _, app = make()
    async with app.run_test(size=(160, 50)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        footer = app.screen.query_one(SteadyFooter)
        keys, shown = footer._keys_shown, _shown(app)
        screen = app.screen
        assert isinstance(screen, ResourceScreen)
        screen.action_filter()  # what `/` runs: dimmed at once, in the prompt's own frame
        assert footer.has_class("-prompting")
        await pilot.press("g", "p")
        await pilot.pause()
        assert screen.needle == "gp"
        assert footer._keys_shown is keys and _shown(app) == shown and footer.has_class("-prompting")
        await pilot.press("escape")
        await pilot.pause()
        assert not footer.has_class("-prompting") and _shown(app) == _bound(app) == shown
