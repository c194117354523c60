"""Text from the cluster or the metrics store, made safe to print: control characters made visible.

Object fields (a GPUNode phase, an event message, a workload name in a dump) are chosen by whoever
can write the object. Printed raw, `ESC ]0;…` retitles the operator's terminal, `ESC ]52;…` writes
their clipboard and `ESC [` sequences repaint the screen. Every front end therefore prints such text
through `visible` (or the CSV and JSON variants below), never as is.

The visible form is the Python escape of the character, so it reads like `repr` and can be pasted
back into Python or a shell `$'…'` string:

- `\\n`, `\\t`, `\\r` for newline, tab and carriage return (in single-line text; multi-line text keeps
  its newlines);
- `\\xNN` for the other C0 controls, DEL and the C1 controls (`ESC` is `\\x1b`, 8-bit CSI `\\x9b`);
- `\\uNNNN` for the Unicode characters that move or reorder text without being visible: the line and
  paragraph separators and the bidirectional overrides, embeddings and isolates (the "Trojan Source"
  trick), and lone surrogates (which a terminal cannot even encode).

Everything else is kept as it is, including non-Latin scripts, emoji and joiners. A backslash is not
doubled: a field that literally contains the four characters `\\x1b` prints the same as one holding
an ESC, which is harmless (neither does anything) and keeps ordinary paths and regexes readable.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["csv_cell", "escape_char", "json_visible", "unsafe", "visible"]

_INVISIBLE: Final = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 without tab and newline, DEL, C1
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidirectional marks, embeddings, overrides, isolates
    "\u2028\u2029"  # line and paragraph separators
    "\ud800-\udfff"  # lone surrogates (from a JSON `\ud800` escape)
)
_MULTILINE: Final = re.compile(f"[\t{_INVISIBLE}]")
"""What multi-line text escapes: everything but the newline."""
_SINGLE_LINE: Final = re.compile(f"[\t\n{_INVISIBLE}]")
_SHORT: Final = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def escape_char(ch: str) -> str:
    """The visible form of one character: `\\n`, `\\t`, `\\r`, `\\xNN` or `\\uNNNN`."""
    short = _SHORT.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _escape(match: re.Match[str]) -> str:
    return escape_char(match.group())


def visible(text: str, *, multiline: bool = False) -> str:
    """`text` with every control character replaced by its visible escape (see the module doc).

    Single-line text (a table cell, a notification, an error line) escapes newlines too, so a field
    can never add a line of its own; `multiline=True` keeps them (a YAML view, a whole report).
    """
    pattern = _MULTILINE if multiline else _SINGLE_LINE
    if pattern.search(text) is None:  # the usual case: nothing to copy
        return text
    return pattern.sub(_escape, text)


def unsafe(text: str, *, multiline: bool = False) -> bool:
    """Whether `visible` would change `text`."""
    return (_MULTILINE if multiline else _SINGLE_LINE).search(text) is not None


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_visible(text: str) -> str:
    """JSON text (as `json.dumps` writes it, even with `ensure_ascii=False`) with the characters above
    written as `\\uNNNN` escapes: still valid JSON meaning exactly the same values, never raw.

    Valid because `json.dumps` already escapes the C0 controls, so the rest can only occur inside
    string literals, where `\\uNNNN` is the standard spelling. Newlines between tokens stay.
    """
    if _MULTILINE.search(text) is None:
        return text
    return _MULTILINE.sub(_json_escape, text)


_FORMULA_START: Final = frozenset("=+-@\t\r\uff1d\uff0b\uff0d\uff20")
"""First characters that make a spreadsheet read a cell as a formula (OWASP's list, plus the
full-width forms some spreadsheets also accept)."""
_NUMBER: Final = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?%?")


def csv_cell(text: str) -> str:
    """One CSV field, safe to open in a spreadsheet: controls made visible (as `visible`), and a
    field that starts like a formula (`= + - @`, tab, CR) prefixed with `'` so it stays text.

    A plain number (`-3`, `+1.5`, `-12%`, `1e-3`) is left alone: it starts with a sign but cannot
    call a function or reference a cell, and quoting it would turn the deltas and negative figures
    of an export into text that no longer sums.
    """
    if text and text[0] in _FORMULA_START and _NUMBER.fullmatch(text) is None:
        text = "'" + text
    return visible(text)
