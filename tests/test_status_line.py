"""The line a slow start shows on a terminal's stderr while it reads a big dump (`cli.common`);
the first sync's line is tested with the slow API server in `test_kube_sync.py`."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from tftui.cli import common
from tftui.model.dump import DumpError, dumps
from tftui.sources.sim.cluster import generate_objects


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def args(path: Path) -> argparse.Namespace:
    return argparse.Namespace(demo=False, from_file=str(path), speed=1.0, nodes=40)


@pytest.fixture
def big(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "BIG_DUMP", 1)  # every dump counts as big


def test_reading_a_big_dump_says_so_then_erases_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, big: None
) -> None:
    path = tmp_path / "bundle\x1b[31m.json"  # a file name is shown as plain text too
    path.write_text(dumps(generate_objects()))
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    cluster = common.open_cluster(args(path), acting=False)
    assert cluster.snapshot()
    mib = path.stat().st_size / 2**20
    assert term.getvalue() == f"\r\x1b[Ktftui: reading bundle\\x1b[31m.json ({mib:,.0f} MiB)\r\x1b[K"


def test_a_bad_big_dump_erases_the_line_before_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, big: None
) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"kind": "List", "items": [')
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    with pytest.raises(DumpError, match=r"bad\.json: not valid JSON"):
        common.open_cluster(args(path), acting=False)
    assert term.getvalue().endswith("\r\x1b[K")


def test_a_small_dump_or_a_pipe_shows_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "small.json"
    path.write_text(dumps(generate_objects()))
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    common.open_cluster(args(path), acting=False)
    assert term.getvalue() == ""  # below BIG_DUMP
    monkeypatch.setattr(common, "BIG_DUMP", 1)
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    common.open_cluster(args(path), acting=False)
    assert pipe.getvalue() == ""  # not a terminal
