"""User keymaps checked against the action registry before the console uses them.

A keymap maps binding ids (`tftui.sort_name`) to Textual key names (`shift+n`, comma-separated).
Refused, with a one-line error naming the entry: unknown ids, a mutating action on a common chord
(k9s's `ctrl+d`/`ctrl+k` foot-guns, vim/tmux/readline keys, navigation), and a key that would
collide with another action bound on the same screen.

`shift+<letter>` is what a few terminals (kitty's keyboard protocol) report, but most, tmux among
them, send the upper-case letter itself: a keymap saying only `shift+c` would leave the action
unreachable there. Keys are normalised so `shift+c` also binds `C` (as the registry's sort keys do).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from textual.keys import _normalize_key_list

from tftui.config import ConfigError
from tftui.ui.actions import ACTIONS, REGISTRY, Action, Scope

COMMON_CHORDS: frozenset[str] = frozenset(
    {f"ctrl+{c}" for c in "abcdefghjklnopqrsuvwxyz"}
    | {
        "enter",
        "escape",
        "space",
        "tab",
        "shift+tab",
        "backspace",
        "delete",
        "up",
        "down",
        "left",
        "right",
        "pageup",
        "pagedown",
        "home",
        "end",
        "j",
        "k",
        "h",
        "l",
        "q",
        "question_mark",
        "colon",
        "slash",
    }
)
"""Keys pressed out of habit (navigation, editor, terminal multiplexer and shell chords): never a
write. Mutating actions in the registry and in user keymaps must avoid them."""

SHARED_SCOPES: dict[Scope, tuple[Scope, ...]] = {
    "resource": ("app", "table", "pool", "tables", "finding", "placement"),
    "pool": ("app", "resource", "table", "tables"),
    "table": ("app", "resource", "pool", "tables"),
    "tables": ("app", "resource", "pool", "table"),
    "finding": ("app", "resource"),
    "placement": ("app", "resource"),
    "app": ("resource", "pool", "table", "tables", "finding", "placement"),
}
"""Scopes whose bindings are active together on one screen (where a key must be unique)."""


_SHIFT_LETTER = re.compile(r"shift\+([a-z])")


def normalise_keys(keys: str) -> str:
    """Textual key names, comma-separated, with `shift+x` also bound as `X` (what terminals send)."""
    out: list[str] = []
    for key in _normalize_key_list(keys).split(","):
        key = key.strip()
        letter = _SHIFT_LETTER.fullmatch(key)
        for k in (letter.group(1).upper(), key) if letter else (key,):
            if k not in out:
                out.append(k)
    return ",".join(out)


def normalise_keymap(keymap: Mapping[str, str]) -> dict[str, str]:
    """The keymap as the console applies it (`normalise_keys` on every entry)."""
    return {binding_id: normalise_keys(keys) for binding_id, keys in keymap.items()}


def keys_of(action: Action, keymap: Mapping[str, str]) -> list[str]:
    return normalise_keys(keymap.get(action.id, action.keys)).split(",")


def check_keymap(keymap: Mapping[str, str], origin: str = "keymap") -> dict[str, str]:
    """The keymap with normalised keys, or `ConfigError` naming the first bad entry."""
    for binding_id, keys in keymap.items():
        where = f"{origin}: keymap.{binding_id}"
        action = REGISTRY.get(binding_id)
        if action is None:
            raise ConfigError(f"{where}: unknown action id (the ids are listed in the README, section Keys)")
        for key in keys_of(action, keymap):
            if not key:
                raise ConfigError(f"{where}: empty key name in {keys!r}")
            if action.mutates and key in COMMON_CHORDS:
                raise ConfigError(
                    f"{where}: {key!r} is a common chord; a mutating action "
                    f"({action.description}) cannot be bound to it"
                )
            shares = SHARED_SCOPES.get(action.scope, ())
            for other in ACTIONS:
                if other.id == binding_id or not (other.scope == action.scope or other.scope in shares):
                    continue
                if key in keys_of(other, keymap):
                    raise ConfigError(
                        f"{where}: {key!r} is already bound to {other.id} ({other.description})"
                    )
    return normalise_keymap(keymap)
