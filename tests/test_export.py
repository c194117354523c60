"""`ctrl+s` export on a shared host: a private per-user folder, exclusive creation that never follows
a planted symlink, names that do not collide, and CSV cells a spreadsheet cannot run as formulas."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

import csv
import json
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tftui.config import ConsoleConfig
from tftui.model.plaintext import csv_cell
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.ui.app import TfTuiApp
from tftui.ui.privatefiles import PrivateFileError, default_folder, private_folder, safe_name, write_new
from tftui.ui.render.tableops import table_csv
from tftui.ui.render.views import Column, Row, Table

UID = os.getuid()


@pytest.fixture
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`tempfile.gettempdir()` is `tmp_path` (as `TMPDIR` would make it)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


# -- the folder and the files ----------------------------------------------------------------------


def test_default_folder_is_per_user_and_private(tmp: Path) -> None:
    path = write_new(None, "nodes-main-20261130-120000", ".csv", "a,b\n")
    folder = tmp / f"tftui-{UID}"
    assert path == folder / "nodes-main-20261130-120000.csv" and default_folder() == folder
    assert mode(folder) == 0o700 and mode(path) == 0o600
    assert path.read_text() == "a,b\n"


def test_a_second_export_in_the_same_second_gets_a_new_name(tmp: Path) -> None:
    first = write_new(None, "pools-main-20261130-120000", ".csv", "one\n")
    second = write_new(None, "pools-main-20261130-120000", ".csv", "two\n")
    third = write_new(None, "pools-main-20261130-120000", ".csv", "three\n")
    assert [p.name for p in (first, second, third)] == [
        "pools-main-20261130-120000.csv",
        "pools-main-20261130-120000-2.csv",
        "pools-main-20261130-120000-3.csv",
    ]
    assert [p.read_text() for p in (first, second, third)] == ["one\n", "two\n", "three\n"]


def test_a_planted_symlink_at_the_file_name_is_never_followed(tmp: Path) -> None:
    folder = tmp / f"tftui-{UID}"
    folder.mkdir(mode=0o700)
    victim = tmp / "victim.txt"
    victim.write_text("precious\n")
    (folder / "x.csv").symlink_to(victim)
    (folder / "x-2.csv").symlink_to(tmp / "dangling")  # a dangling one is not created through either
    path = write_new(None, "x", ".csv", "export\n")
    assert path == folder / "x-3.csv" and path.read_text() == "export\n"
    assert victim.read_text() == "precious\n" and not (tmp / "dangling").exists()


def test_a_file_appears_whole_and_a_failed_write_leaves_nothing(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp / f"tftui-{UID}"
    data = "a,b\n" + "1,2\n" * 50_000
    seen: list[str] = []
    real_link = os.link

    def link(src: str, dst: str, **kw: object) -> None:  # what a reader finds under the staged name
        seen.append((folder / src).read_text())
        real_link(src, dst, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "link", link)
    path = write_new(None, "x", ".csv", data)
    assert seen == [data] and path.read_text() == data  # named only once written whole
    assert sorted(p.name for p in folder.iterdir()) == ["x.csv"] and path.stat().st_nlink == 1
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate cannot be written as UTF-8
        write_new(None, "y", ".csv", "ok\n\ud800\n")
    assert sorted(p.name for p in folder.iterdir()) == ["x.csv"]  # neither y.csv nor a staged file


def test_a_planted_symlink_as_the_folder_is_refused(tmp: Path) -> None:
    elsewhere = tmp / "attacker"
    elsewhere.mkdir(mode=0o777)
    (tmp / f"tftui-{UID}").symlink_to(elsewhere)
    with pytest.raises(PrivateFileError, match="is a symlink, not a private folder"):
        write_new(None, "x", ".csv", "export\n")
    assert list(elsewhere.iterdir()) == []


def test_a_folder_of_another_user_or_a_file_is_refused(tmp: Path) -> None:
    other = UID + 4242  # the folder below is ours, so for this uid it belongs to someone else
    (tmp / f"tftui-{other}").mkdir(mode=0o700)
    with pytest.raises(PrivateFileError, match=f"belongs to uid {UID}, not to you"):
        write_new(None, "x", ".csv", "export\n", uid=other)
    assert list((tmp / f"tftui-{other}").iterdir()) == []
    (tmp / f"tftui-{UID}").write_text("not a folder")
    with pytest.raises(PrivateFileError, match=f"tftui-{UID}"):
        write_new(None, "x", ".csv", "export\n")


def test_an_own_folder_readable_by_others_is_made_private(tmp: Path) -> None:
    folder = tmp / f"tftui-{UID}"
    folder.mkdir()
    folder.chmod(0o777)
    write_new(None, "x", ".csv", "export\n")
    assert mode(folder) == 0o700


def test_a_configured_folder_is_created_private_and_files_are_exclusive(tmp: Path) -> None:
    folder = tmp / "exports" / "tftui"
    a = write_new(folder, "x", ".csv", "1\n")
    b = write_new(folder, "x", ".csv", "2\n")
    assert mode(folder) == 0o700 and (a.name, b.name) == ("x.csv", "x-2.csv") and mode(a) == 0o600


def test_names_keep_only_safe_characters() -> None:
    assert safe_name("pools-dev[/]\x1b]0;x\x07-main") == "pools-dev_0_x_-main"
    assert safe_name("../../etc/passwd\x00") == "_.._etc_passwd_"
    assert safe_name("...") == "tftui" and "/" not in safe_name("a/b")


def test_private_folder_descriptor_is_a_directory(tmp: Path) -> None:
    fd = private_folder()
    try:
        assert stat.S_ISDIR(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


# -- CSV cells -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ('=HYPERLINK("http://evil","x")', '\'=HYPERLINK("http://evil","x")'),
        ("+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
        ("\t=1", "'\\t=1"),
        ("\r=1", "'\\r=1"),
        ("＝1+1", "'＝1+1"),  # the full-width sign some spreadsheets also read
        ("-5", "-5"),  # plain numbers stay numbers
        ("-12.5%", "-12.5%"),
        ("+1e-3", "+1e-3"),
        ("-", "'-"),
        ("dev-4090-03", "dev-4090-03"),
        ("a\x1b]0;x\x07", "a\\x1b]0;x\\x07"),
        ("", ""),
    ],
)
def test_csv_cells_cannot_start_a_formula(cell: str, written: str) -> None:
    assert csv_cell(cell) == written


def test_table_csv_escapes_every_cell_and_keeps_negative_figures() -> None:
    table = Table(
        (Column("name", "NAME", 10), Column("delta", "DELTA", 5)),
        (
            Row("a", {"name": "=1+2", "delta": "-3"}, "a"),
            Row("b", {"name": "@x", "delta": "-0.5"}, "b"),
        ),
    )
    rows = list(csv.reader(table_csv(table).splitlines()))
    assert rows == [["NAME", "DELTA"], ["'=1+2", "-3"], ["'@x", "-0.5"]]


# -- through the console ---------------------------------------------------------------------------

FORMULA_NODES = {
    "dev-4090-01": "=1+2",
    "dev-4090-02": "@SUM(A1)",
    "dev-4090-05": "+cmd",
    "dev-4090-06": "-2+3",
}


def formula_cluster() -> ActingSimCluster:
    text = json.dumps(generate_objects(7, 40, DEFAULT_NOW))
    for old, new in FORMULA_NODES.items():
        text = text.replace(f'"{old}"', json.dumps(new))  # the exact name only: labels and refs too
    objects: list[dict[str, Any]] = json.loads(text)
    return ActingSimCluster(objects=objects, now=DEFAULT_NOW)


async def test_ctrl_s_writes_private_distinct_files_with_escaped_cells(tmp: Path) -> None:
    cluster = formula_cluster()
    app = TfTuiApp(cluster, None, clock=cluster.clock, refresh_interval=None, config=ConsoleConfig())
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("colon", *"nodes", "enter")
        await pilot.pause()
        await pilot.press("ctrl+s")  # the clock stands still: both land in the same second
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        folder = tmp / f"tftui-{UID}"
        files = sorted(folder.glob("*.csv"))
        assert [f.name for f in files] == [
            "nodes-main-20261130-120000-2.csv",
            "nodes-main-20261130-120000.csv",
        ]
        assert mode(folder) == 0o700 and all(mode(f) == 0o600 for f in files)
        messages = [n.message for n in app._notifications]
        assert all(any(str(f) in m for m in messages) for f in files)
        assert not (tmp / "tftui").exists()  # the old shared folder is not used
        rows = list(csv.reader(files[1].read_text().splitlines()))
        names = {r[0] for r in rows[1:]}
        for name in FORMULA_NODES.values():
            assert "'" + name in names and name not in names
