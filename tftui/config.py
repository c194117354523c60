"""The console's configuration file: user keymap, theme, production contexts, export folder.

Read from `$TFTUI_CONFIG`, else `$XDG_CONFIG_HOME/tftui/config.yaml` (default `~/.config/...`).
A missing default file means defaults; a file named by `$TFTUI_CONFIG` must exist. Every problem is
a `ConfigError` whose one-line message names the file and the key, and nothing of a bad file is
used. The console (`tftui.ui.keymap`) checks the keymap against its action registry.

Example::

    theme: light                 # dark (default) or light
    production: ["*prod*"]       # context names (glob) shown with the red PRODUCTION band
    export_dir: ~/tftui-exports  # where ctrl+s writes CSV files (default: <tmp>/tftui-<uid>, private)
    keymap:                      # binding id → key(s), comma-separated Textual key names
      tftui.sort_name: shift+n,N
      tftui.write.manual_compaction: shift+c
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

THEMES = ("dark", "light")
DEFAULT_PRODUCTION = ("*prod*",)
KNOWN_KEYS = ("theme", "production", "export_dir", "keymap")


class ConfigError(ValueError):
    """A configuration file could not be used; the message is one line naming file and key."""


@dataclass(frozen=True, slots=True)
class ConsoleConfig:
    keymap: Mapping[str, str] = field(default_factory=dict)
    theme: str = "dark"
    production: tuple[str, ...] = DEFAULT_PRODUCTION
    """Glob patterns of context (source) names treated as production."""
    export_dir: Path | None = None
    path: Path | None = None
    """The file this came from (None: defaults)."""


def config_path(env: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """The file to read and whether it must exist (it must when `$TFTUI_CONFIG` names it)."""
    env = os.environ if env is None else env
    explicit = env.get("TFTUI_CONFIG")
    if explicit:
        return Path(explicit).expanduser(), True
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")) / ".config")
    return Path(base).expanduser() / "tftui" / "config.yaml", False


def load_config(path: Path | None = None, env: Mapping[str, str] | None = None) -> ConsoleConfig:
    """Read and check the configuration file (defaults when there is none)."""
    required = True
    if path is None:
        path, required = config_path(env)
    if not path.exists():
        if required:
            raise ConfigError(f"config {path}: file not found (named by TFTUI_CONFIG)")
        return ConsoleConfig()
    try:
        doc: Any = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config {path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
        ) from None
    except RecursionError:
        raise ConfigError(f"config {path}: nested too deeply to read") from None
    except (OSError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"config {path}: cannot read: {first}") from exc
    return parse_config(doc, path)


def parse_config(doc: Any, path: Path) -> ConsoleConfig:
    if doc is None:
        return ConsoleConfig(path=path)
    if not isinstance(doc, dict):
        raise ConfigError(f"config {path}: expected a mapping at the top, got {type(doc).__name__}")
    for key in doc:
        if key not in KNOWN_KEYS:
            raise ConfigError(f"config {path}: unknown key {key!r} (known: {', '.join(KNOWN_KEYS)})")
    theme = doc.get("theme", "dark")
    if theme not in THEMES:
        raise ConfigError(f"config {path}: theme: {theme!r} is not one of {', '.join(THEMES)}")
    production = doc.get("production", list(DEFAULT_PRODUCTION))
    if isinstance(production, str):
        production = [production]
    if not isinstance(production, list) or not all(isinstance(p, str) and p for p in production):
        raise ConfigError(f"config {path}: production: expected a list of context name patterns")
    export_dir = doc.get("export_dir")
    if export_dir is not None and not (isinstance(export_dir, str) and export_dir):
        raise ConfigError(f"config {path}: export_dir: expected a folder path, got {export_dir!r}")
    keymap = doc.get("keymap") or {}
    if not isinstance(keymap, dict):
        raise ConfigError(f"config {path}: keymap: expected a mapping of binding id to keys")
    checked: dict[str, str] = {}
    for binding_id, keys in keymap.items():
        if not isinstance(keys, str) or not keys.strip() or " " in keys.strip():
            raise ConfigError(
                f"config {path}: keymap.{binding_id}: expected key names separated by commas, got {keys!r}"
            )
        checked[str(binding_id)] = keys.strip()
    return ConsoleConfig(
        keymap=checked,
        theme=theme,
        production=tuple(production),
        export_dir=Path(export_dir).expanduser() if export_dir else None,
        path=path,
    )
