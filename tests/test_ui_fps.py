"""The console's frame cap: 240 frames a second unless the operator set TEXTUAL_FPS."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = "import tftui.ui.app, textual.constants as c; print(c.MAX_FPS)"


def _max_fps(env: dict[str, str]) -> int:
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


def test_the_console_raises_textuals_frame_cap() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TEXTUAL_FPS"}
    assert _max_fps(env) == 240


def test_an_operators_textual_fps_is_kept() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TEXTUAL_FPS"}
    assert _max_fps({**env, "TEXTUAL_FPS": "30"}) == 30
