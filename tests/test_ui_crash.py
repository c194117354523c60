"""A console that fails exits 1 with one line naming the error and a private log of the traceback.

The real `tftui --demo` runs in a child process on Textual's headless driver (`TEXTUAL_DRIVER`), with
one view builder made to raise (a stand-in for any bug); `TMPDIR` points the private folder into the
test's directory. Before the fix the process printed Textual's traceback and exited 0.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

from tftui.model.plaintext import unsafe

ROOT = Path(__file__).resolve().parents[1]

CRASHING_CONSOLE = textwrap.dedent(
    """
    import sys
    import tftui.ui.screens.resource as resource
    from tftui.cli import main

    def broken(*args, **kwargs):
        raise RuntimeError("pools table broke on [/] \\x1b]0;pwned\\x07")

    resource.pools_table = broken
    sys.exit(main(["--demo", "--nodes", "8"]))
    """
)


def run_console(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "config.yaml"  # not the user's own
    config.write_text("theme: dark\n")
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "TEXTUAL_DRIVER": "textual.drivers.headless_driver:HeadlessDriver",
        "TEXTUAL_ANIMATIONS": "none",
        "TFTUI_CONFIG": str(config),
    }
    return subprocess.run(
        [sys.executable, "-c", CRASHING_CONSOLE],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def test_a_console_crash_exits_1_with_one_line_and_the_log_path(tmp_path: Path) -> None:
    done = run_console(tmp_path)
    lines = done.stderr.splitlines()
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert len(lines) == 1, done.stderr[-2000:]
    line = lines[0]
    prefix = "tftui: the console stopped on an internal error: RuntimeError: pools table broke on [/] "
    assert line.startswith(prefix + "\\x1b]0;pwned\\x07; details in "), line
    assert not unsafe(line)
    log = Path(line.rsplit("details in ", 1)[1])
    folder = tmp_path / f"tftui-{os.getuid()}"
    assert log.parent == folder and log.name.startswith("console-crash-") and log.suffix == ".log"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE(log.stat().st_mode) == 0o600
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "RuntimeError: pools table broke" in text
    assert "in broken" in text and not unsafe(text, multiline=True)


def test_a_crash_with_no_usable_folder_still_says_one_line(tmp_path: Path) -> None:
    """The private folder is a symlink planted by someone else: no log, the line says why."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / f"tftui-{os.getuid()}").symlink_to(tmp_path / "elsewhere")
    done = run_console(tmp_path)
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr[-2000:]
    assert "RuntimeError: pools table broke" in lines[0]
    assert "no log written (" in lines[0] and "is a symlink" in lines[0]
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_crash_line_and_log_mask_credentials(tmp_path: Path) -> None:
    """An error worded by a driver or client may quote a DSN or a header: neither the line on
    stderr nor the log file (attached to bug reports) shows the credential."""
    from tftui.model.redact import MASK
    from tftui.ui.crash import crash_line, write_crash_log

    secrets = ("hunter2-dsn", "conninfo-pw", "tok.abc123")
    try:
        raise ValueError(
            "invalid DSN postgresql://tf:hunter2-dsn@greptime:4003/public; "
            "host=db password=conninfo-pw; Authorization: Bearer tok.abc123"
        )
    except ValueError as exc:
        log = write_crash_log(exc, tmp_path / "private")
        line = crash_line(exc, log)
        no_log = crash_line(exc, None, "cannot write to postgresql://tf:hunter2-dsn@x/y")
    text = log.read_text()
    for out in (line, no_log, text):
        assert not any(s in out for s in secrets), out
        assert MASK in out
    assert "ValueError: invalid DSN postgresql://tf:" in line and "greptime:4003/public" in line
    assert "Traceback (most recent call last)" in text
