"""The footer is composed again only when the keys it shows change, and always shows the keys the
focused widget and its screen bind (`widgets.chrome.SteadyFooter`)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from tests.test_prebuild import make
from tftui.ui.app import TfTuiApp
from tftui.ui.widgets.chrome import SteadyFooter


def _shown(app: TfTuiApp) -> list[str]:
    return [key.key for key in app.screen.query(FooterKey)]


def _bound(app: TfTuiApp) -> list[str]:
    return [binding.key for _node, binding, _on, _tip in app.screen.active_bindings.values() if binding.show]


async def _recomposes_per_switch(monkeypatch: pytest.MonkeyPatch) -> list[int]:
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
            await pilot.press("colon", *view)
            await pilot.pause()
            assert _shown(app) == _bound(app)  # the prompt's keys while it has the focus
            await pilot.press("enter")
            await pilot.pause()
            await pilot.pause()
            assert type(app.screen).__name__.lower().startswith(view)
            assert _shown(app) == _bound(app) and "slash" in _shown(app)  # the view's keys again
            out.append(count[0])
    return out


async def test_a_view_switch_recomposes_the_footer_only_when_its_keys_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steady = await _recomposes_per_switch(monkeypatch)
    monkeypatch.setattr(SteadyFooter, "bindings_changed", Footer.bindings_changed)  # Textual's own
    textual = await _recomposes_per_switch(monkeypatch)
    # the prompt's keys in, the view's keys back: twice a switch, where Textual's footer recomposed
    # on every focus change and on the screen's resume (6 times)
    assert steady[2:] == [2, 2, 2]
    assert all(s < t for s, t in zip(steady, textual, strict=True))
