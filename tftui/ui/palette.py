"""The command palette (`ctrl+p`), fed from the action registry and the view list.

It offers exactly what the screen it was opened on offers: the registry's actions whose bindings
are active and enabled there (so read-only hides every write here too, through `check_action`),
plus one command per root view. Nothing is listed by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tftui.ui.actions import REGISTRY
from tftui.ui.host import Host
from tftui.ui.screens.viewnames import VIEWS


class ActionCommands(Provider):
    """Registry actions active on the current screen, then `:view` switches."""

    def _commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        app, host = self.app, cast(Host, self.app)
        screen = self.screen
        out: list[tuple[str, str, Callable[[], object]]] = []
        seen: set[str] = set()
        for active in screen.active_bindings.values():
            binding = active.binding
            entry = REGISTRY.get(binding.id or "")
            if entry is None or not entry.palette or not active.enabled or entry.id in seen:
                continue
            if not host.allows(entry.name):
                continue
            seen.add(entry.id)
            key = binding.key_display or app.get_key_display(binding)
            run = partial(app.call_later, app.run_action, binding.action, active.node)
            out.append((f"{entry.description} ({key})", entry.tooltip, run))
        for view in VIEWS:
            out.append((f"View :{view}", f"Switch to the {view} view", partial(host.switch_view, view)))
        return out

    async def discover(self) -> Hits:
        for title, help_text, run in self._commands():
            yield DiscoveryHit(title, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, run in self._commands():
            score = max(matcher.match(title), matcher.match(help_text) * 0.5)
            if score > 0:
                yield Hit(score, matcher.highlight(title), run, help=help_text)
