"""The one sanitizer (`tftui.model.plaintext`) and the console's plain-text door (`widgets.plain`)."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console, Group
from rich.segment import Segment
from rich.style import Style
from rich.table import Table as RichTable
from rich.text import Text
from textual.color import Color

from tftui.model.plaintext import json_visible, unsafe, visible
from tftui.ui.render.plain import plain_text
from tftui.ui.widgets.plain import ControlFilter, plain_cell, plain_renderable


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),
        ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),
        ("\x9b31m", "\\x9b31m"),
        ("a\x00b\x7fc\x85", "a\\x00b\\x7fc\\x85"),
        ("line\nnext\ttab\rcr", "line\\nnext\\ttab\\rcr"),
        ("evil\u202etxt.exe", "evil\\u202etxt.exe"),  # right-to-left override ("Trojan Source")
        ("a\u2028b\u2066c\u061c", "a\\u2028b\\u2066c\\u061c"),
        ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
        ("[bold red]x[/]", "[bold red]x[/]"),  # markup is text: it stays as written
        ("数据 Привет 🚀 👩‍💻 café", "数据 Привет 🚀 👩‍💻 café"),  # normal Unicode, joiners included
        ("C:\\x1b", "C:\\x1b"),  # a backslash is not doubled
    ],
)
def test_visible_escapes_controls_and_keeps_text(raw: str, shown: str) -> None:
    assert visible(raw) == shown
    assert not unsafe(visible(raw))


def test_multiline_keeps_newlines_only() -> None:
    assert visible("a\nb\x1b[2J\tc", multiline=True) == "a\nb\\x1b[2J\\tc"
    text = "plain\nlines"
    assert visible(text, multiline=True) is text  # nothing to escape: the same string


def test_json_visible_stays_valid_json_with_the_same_values() -> None:
    value = {"phase": "P\x1b]0;x\x07\x9b\u202e\u2028\ud800", "n": [1, "\n"]}
    out = json_visible(json.dumps(value, ensure_ascii=False, indent=2))
    assert not unsafe(out, multiline=True)
    assert "\\u009b" in out and "\\u202e" in out and "\\ud800" in out
    assert json.loads(out) == value


def test_plain_text_escapes_and_keeps_styles_on_the_same_characters() -> None:
    text = Text("ab")
    text.append("\x1bX", "bold")
    text.append("cd", "red")
    out = plain_text(text, multiline=False)
    assert out.plain == "ab\\x1bXcd"
    spans = {(out.plain[s.start : s.end], str(s.style)) for s in out.spans}
    assert spans == {("\\x1bX", "bold"), ("cd", "red")}
    clean = Text("nothing to do", style="bold")
    assert plain_text(clean) is clean


def render(renderable: object) -> str:
    console = Console(file=io.StringIO(), width=120, color_system=None, markup=True, highlight=False)
    console.print(renderable)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def test_plain_renderable_makes_strings_in_groups_and_tables_plain() -> None:
    """A `str` in a Rich table or group is markup to Rich: `[/]` would raise MarkupError."""
    grid = RichTable.grid()
    grid.add_column()
    grid.add_column()
    grid.add_row("mode", "Mode[/] \x1b]0;t\x07")
    group = Group(Text("head [/]"), "tail [bold]x[/] \x9b", grid)
    out = render(plain_renderable(group))
    assert "tail [bold]x[/] \\x9b" in out and "Mode[/] \\x1b]0;t\\x07" in out and "head [/]" in out
    assert not unsafe(out, multiline=True)


def test_plain_cell_is_one_line_of_text_never_markup() -> None:
    cell = plain_cell("a[/]\nb")
    assert isinstance(cell, Text) and cell.plain == "a[/]\\nb"
    # kept by its text: the same Text for the same str (a value repeated down a column), and right
    # again after the table is emptied
    assert plain_cell("a[/]\nb") is cell
    assert plain_cell(Text("x\x1b")) is not plain_cell(Text("x\x1b"))  # only str cells are kept
    assert [t.plain for t in map(plain_cell, ("x\x1b", "x\x1b"))] == ["x\\x1b"] * 2  # type: ignore[union-attr]


def test_control_filter_drops_what_escaped_nothing() -> None:
    segments = [Segment("ok "), Segment("\x1b]0;x\x07bad", Style(bold=True)), Segment("", None, [])]
    out = ControlFilter().apply(segments, Color(0, 0, 0))
    assert [s.text for s in out] == ["ok ", "]0;xbad", ""]
    assert out[1].style == Style(bold=True)
    clean = [Segment("fine")]
    assert ControlFilter().apply(clean, Color(0, 0, 0)) is clean
