"""README.md agrees with the tool: every console view and every subcommand is documented, and the
ladder figures it quotes are what `tftui simulate --demo --compare ladder` prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tftui.cli import build_parser
from tftui.ui.screens.resource import VIEWS

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_the_keys_table_lists_every_view() -> None:
    row = next(line for line in README.splitlines() if line.startswith("| `:` + view"))
    listed = re.findall(r"`(\w+)`", row.split("|")[1])
    assert set(VIEWS) <= set(listed), sorted(set(VIEWS) - set(listed))


def test_every_subcommand_is_documented() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    commands = sorted(getattr(sub, "choices", {}) or {})
    assert "recommend" in commands and "report" in commands
    missing = [c for c in commands if not re.search(rf"(^|`)tftui {c}[ `]", README, re.MULTILINE)]
    assert not missing, missing


def test_ladder_figures_are_the_printed_ones() -> None:
    quoted = re.search(r"demo-dev, (\d+) → (\d+) → (\d+) → (\d+) active nodes", README)
    assert quoted is not None, "the ladder sentence is gone from the README"
    out = subprocess.run(
        [sys.executable, "-m", "tftui", "simulate", "--demo", "--compare", "ladder"],
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    ).stdout
    printed = re.findall(r"^  \S+: demo-dev (\d+)/", out, re.MULTILINE)
    assert printed == list(quoted.groups()), out
