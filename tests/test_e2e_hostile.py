"""End to end in a real terminal (tmux): a dump whose objects carry OSC 0 (title), OSC 52 (clipboard)
and markup. The pane's title and tmux's paste buffers must stay untouched, the screen must show
the payloads as escapes, and the console must run until `q` and exit 0."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.hostile import MODE, PHASE, POOL, hostile_objects, shown
from tests.test_e2e_tmux import EXIT_MARK, HEIGHT, ROOT, WIDTH, Tmux, tmux  # noqa: F401  (fixture)

pytestmark = pytest.mark.e2e


def test_hostile_dump_cannot_retitle_the_pane_or_write_the_clipboard(tmux: Tmux, tmp_path: Path) -> None:  # noqa: F811
    dump = tmp_path / "hostile.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": hostile_objects()}))
    script = Path(sys.executable).with_name("tftui")
    if not script.exists():
        pytest.fail(f"{script} is missing: run `make install`")
    console = " ".join(shlex.quote(a) for a in (str(script), "--from", str(dump)))
    # OSC 52 reaches tmux's buffers only with set-clipboard on: switch it on before the console runs
    tmux(
        "start-server", ";", "set-option", "-s", "set-clipboard", "on", ";",
        "new-session", "-d", "-s", "tftui", "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(ROOT),
        "-e", "TERM=xterm-256color", "-e", "TEXTUAL_ANIMATIONS=none",
        f"{console}; echo '{EXIT_MARK}' $?; sleep 60",
    )  # fmt: skip
    title_before = tmux("display-message", "-p", "-t", "tftui", "#{pane_title}").strip()

    pools = tmux.wait_text(shown(POOL))
    assert shown(MODE) in pools
    tmux.open_prompt(":")
    tmux.keys("compaction", literal=True)
    tmux.keys("Enter")
    tmux.wait_text("KEPT BECAUSE")
    # the hostile pool is the last by name; its empty node stays because of its phase
    detail = tmux.press_until(("Down",), f"GPUNode phase {shown(PHASE.split(chr(7))[0])}", tries=4)
    assert shown("\x1b]52;c;ZXZpbA==") in detail

    title = tmux("display-message", "-p", "-t", "tftui", "#{pane_title}").strip()
    assert title == title_before and "pwned" not in title
    assert tmux("list-buffers").strip() == ""  # OSC 52 would have stored `evil` here

    tmux.keys("q")
    tmux.wait_text(f"{EXIT_MARK} 0", timeout=10)
