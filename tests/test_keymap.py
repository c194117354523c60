"""The action registry, user keymaps and the read-only gate, driven through Textual's pilot.

Every binding of the console must come from `tftui.ui.actions`; every mutating action in it must
be absent from bindings, footer, help and palette and refused when read-only; destructive keys
never sit on common chords, by default or through a user keymap.
"""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

import inspect
import pkgutil
from pathlib import Path
from typing import Any

import pytest
from textual.binding import Binding
from textual.command import CommandPalette
from textual.dom import DOMNode
from textual.pilot import Pilot
from textual.widgets import Button, Footer

import tftui.ui
import tftui.ui.screens
import tftui.ui.widgets
from tftui.config import ConfigError, load_config
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.actions import ACTIONS, MUTATING, REGISTRY
from tftui.ui.app import WRITE_ACTIONS, TfTuiApp
from tftui.ui.keymap import COMMON_CHORDS, check_keymap, keys_of
from tftui.ui.palette import ActionCommands
from tftui.ui.screens.modals import ConfirmScreen, HelpScreen
from tftui.ui.screens.resource import ResourceScreen


@pytest.fixture(scope="module")
def metrics() -> SimMetrics:
    return SimMetrics(SimCluster(seed=7, nodes=40, now=DEFAULT_NOW).snapshot(), seed=7, now=DEFAULT_NOW)


def make_app(cluster: Any, metrics: SimMetrics | None, *, read_only: bool = False, **kw: Any) -> TfTuiApp:
    return TfTuiApp(
        cluster, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None, read_only=read_only, **kw
    )


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def ui_classes() -> list[type[DOMNode]]:
    """Every Textual class defined in the console's modules."""
    out: list[type[DOMNode]] = []
    for package in (tftui.ui, tftui.ui.screens, tftui.ui.widgets):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            module = __import__(info.name, fromlist=["_"])
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, DOMNode) and cls.__module__ == module.__name__:
                    out.append(cls)
    return out


# -- the registry ----------------------------------------------------------------------------------


def test_every_binding_comes_from_the_registry() -> None:
    seen = 0
    for cls in ui_classes():
        for b in cls.__dict__.get("BINDINGS", []):
            assert isinstance(b, Binding), (cls, b)
            entry = REGISTRY.get(b.id or "")
            assert entry is not None, f"{cls.__name__} binds {b.key} without a registry id"
            assert (b.key, b.action, b.description) == (entry.keys, entry.action, entry.description)
            seen += 1
    assert seen >= len(ACTIONS)  # scopes shared by several classes count more than once


def test_registry_entries_are_complete_and_writes_are_named() -> None:
    for a in ACTIONS:
        assert a.id.startswith("tftui.") and a.keys and a.description, a
        assert a.mutates == a.id.startswith("tftui.write."), a
    assert (
        set(WRITE_ACTIONS)
        == set(MUTATING)
        == {"manual_compaction", "placement_mode", "workload_autoscale", "admit"}
    )
    assert WRITE_ACTIONS["manual_compaction"] == "manual compaction"


def test_k9s_key_map_is_bound() -> None:
    keys = {a.id: a.keys for a in ACTIONS}
    expected = {
        "tftui.command": "colon",
        "tftui.filter": "slash",
        "tftui.open": "enter",
        "tftui.back": "escape",
        "tftui.help": "question_mark",
        "tftui.yaml": "y",
        "tftui.describe": "d",
        "tftui.mark": "space",
        "tftui.refresh": "ctrl+r",
        "tftui.pause": "R,shift+r",
        "tftui.export": "ctrl+s",
        "tftui.sort_name": "N,shift+n",
        "tftui.palette": "ctrl+p",
    }
    assert {k: keys[k] for k in expected} == expected


def test_destructive_keys_are_never_common_chords() -> None:
    assert MUTATING
    for a in MUTATING.values():
        for key in keys_of(a, {}):
            assert key not in COMMON_CHORDS, (a.id, key)
    assert {"ctrl+d", "ctrl+k", "enter", "space", "escape"} <= COMMON_CHORDS
    check_keymap({a.id: a.keys for a in ACTIONS})  # the defaults pass their own check


# -- user keymaps ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keymap", "message"),
    [
        ({"tftui.nope": "x"}, "keymap.tftui.nope: unknown action id"),
        (
            {"tftui.write.manual_compaction": "ctrl+d"},
            "keymap.tftui.write.manual_compaction: 'ctrl+d' is a common",
        ),
        ({"tftui.write.placement_mode": "enter"}, "keymap.tftui.write.placement_mode: 'enter' is a common"),
        ({"tftui.place": "c"}, "keymap.tftui.place: 'c' is already bound to tftui.write.manual_compaction"),
        ({"tftui.yaml": "d"}, "keymap.tftui.yaml: 'd' is already bound to tftui.describe"),
    ],
)
def test_bad_keymap_entries_are_named(keymap: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        check_keymap(keymap, "config x.yaml")
    text = str(err.value)
    assert text.startswith("config x.yaml: ") and message in text and "\n" not in text


def test_config_file_errors_name_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    cases = {
        "keymap: [1]\n": "keymap: expected a mapping",
        "keymap:\n  tftui.place: 3\n": "keymap.tftui.place: expected key names",
        "theme: purple\n": "theme: 'purple' is not one of dark, light",
        "colour: red\n": "unknown key 'colour'",
        "keymap: {a: [\n": "cannot read",
    }
    for text, message in cases.items():
        path.write_text(text)
        with pytest.raises(ConfigError) as err:
            load_config(env={"TFTUI_CONFIG": str(path)})
        assert str(err.value).startswith(f"config {path}: ") and message in str(err.value), text
    with pytest.raises(ConfigError, match="file not found"):
        load_config(env={"TFTUI_CONFIG": str(tmp_path / "missing.yaml")})
    # no file at the default place: defaults
    assert load_config(env={"XDG_CONFIG_HOME": str(tmp_path / "none")}).keymap == {}
    (tmp_path / "xdg" / "tftui").mkdir(parents=True)
    (tmp_path / "xdg" / "tftui" / "config.yaml").write_text(
        "theme: light\nproduction: ['*-prod', demo]\nexport_dir: /tmp/x\nkeymap:\n  tftui.place: o\n"
    )
    config = load_config(env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert config.theme == "light" and config.production == ("*-prod", "demo")
    assert dict(config.keymap) == {"tftui.place": "o"} and config.export_dir == Path("/tmp/x")


async def test_user_keymap_rebinds_and_shows_in_help(tmp_path: Path, metrics: SimMetrics) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("keymap:\n  tftui.place: o\n  tftui.write.manual_compaction: shift+c\n")
    config = load_config(env={"TFTUI_CONFIG": str(path)})
    check_keymap(config.keymap)
    app = make_app(ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW), metrics, config=config)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("c")  # the old key does nothing now
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.keys_text
        assert "o  Place" in text and "Compact !" in text
        assert "c  Place" not in text
        await pilot.press("escape", "o")
        await settle(pilot)
        assert type(app.screen).__name__ == "PlacementScreen"


# -- read-only: every mutating action, everywhere --------------------------------------------------

WRITE_SCREENS = ("pools", "compaction", "defrag", "nodes", "workloads", "gpus", "events", "alerts", "waste")


def palette_titles(app: TfTuiApp) -> list[str]:
    provider = ActionCommands(app.screen)
    return [title for title, _, _ in provider._commands()]


def footer_keys(app: TfTuiApp) -> set[str]:
    return {ab.binding.id or "" for ab in app.screen.active_bindings.values() if ab.binding.show}


@pytest.mark.parametrize("read_only", [True, False])
async def test_every_mutating_action_is_gone_when_read_only(read_only: bool, metrics: SimMetrics) -> None:
    demo = ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW)
    app = make_app(demo, metrics, read_only=read_only)
    writes = list(MUTATING.values())
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        offered: set[str] = set()
        for view in WRITE_SCREENS:
            assert app.switch_view(view)
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, ResourceScreen)
            bound = {ab.binding.id for ab in screen.active_bindings.values()}
            helped = {e.description for e in app.help_entries(screen)}
            titles = " ".join(palette_titles(app))
            for a in writes:
                if a.id in bound:
                    offered.add(a.id)
                if read_only:
                    assert a.id not in bound and a.id not in footer_keys(app), (view, a.id)
                    assert f"{a.description} !" not in helped, (view, a.id)
                    assert f"{a.description} (" not in titles, (view, a.id)
                    assert screen.check_action(a.name, ()) is False and app.check_action(a.name, ()) is False
                    assert await app.run_action(a.action, screen) is False
                    for key in keys_of(a, {}):
                        await pilot.press(key)
                    await settle(pilot)
                    assert app.screen is screen, (view, a.id)  # no dialog opened
                    assert app.perform(a.name, pool="demo-dev", mode="spread") is False
        if read_only:
            assert offered == set()
            assert demo.events() == []
            assert any("read-only console" in n.message for n in app._notifications)
        else:  # the same walk finds every write offered somewhere: the check above is not vacuous
            assert offered == {a.id for a in writes}


async def test_confirm_dialog_focuses_cancel_and_palette_lists_writes(metrics: SimMetrics) -> None:
    demo = ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW)
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        titles = palette_titles(app)
        assert "Compact (c)" in titles and "Place (p)" in titles and "View :nodes" in titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"nodes")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)
        assert type(app.screen).__name__ == "NodesScreen"
        assert app.switch_view("pools")
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert dialog.focused is dialog.query_one("#confirm-cancel", Button)
        await pilot.press("enter")  # enter on the focused Cancel: nothing happens
        await settle(pilot)
        assert demo.events() == []


async def test_footer_has_no_palette_clutter(metrics: SimMetrics) -> None:
    app = make_app(SimCluster(seed=7, nodes=40, now=DEFAULT_NOW), metrics)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.screen.query_one(Footer).show_command_palette is False


def test_console_refuses_a_bad_keymap_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tftui.cli import main

    path = tmp_path / "config.yaml"
    path.write_text("keymap:\n  tftui.write.manual_compaction: ctrl+d\n")
    monkeypatch.setenv("TFTUI_CONFIG", str(path))
    assert main(["--demo"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"config {path}: keymap.tftui.write.manual_compaction: 'ctrl+d' is a common chord" in err


async def test_shift_letter_in_a_keymap_also_binds_the_letter_terminals_send(metrics: SimMetrics) -> None:
    """tmux and most terminals send `C` for shift+c (only kitty's protocol says `shift+c`): the
    README's `tftui.write.manual_compaction: shift+c` must not leave compaction unreachable."""
    keymap = {"tftui.write.manual_compaction": "shift+c"}
    assert check_keymap(keymap) == {"tftui.write.manual_compaction": "C,shift+c"}
    assert keys_of(REGISTRY["tftui.write.manual_compaction"], keymap) == ["C", "shift+c"]
    with pytest.raises(ConfigError, match=r"'N' is already bound to tftui\.sort_name"):
        check_keymap({"tftui.place": "shift+n"})  # the letter it adds collides like the key itself
    from tftui.config import ConsoleConfig

    config = ConsoleConfig(keymap=keymap)
    app = make_app(ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW), metrics, config=config)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("C")  # what tmux sends for shift+c
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
