"""Control characters escaped in the rich `Text` the builders make, styles kept in place.

Pure (rich only), so a builder that cuts cells to width (`widths`) can escape before it measures;
the widgets in `widgets.plain` apply the same function to whatever Textual is about to draw.
"""

from __future__ import annotations

from rich.text import Text

from tftui.model.plaintext import escape_char, unsafe

__all__ = ["plain_text"]


def plain_text(text: Text, *, multiline: bool = True) -> Text:
    """`text` with its control characters escaped, styles kept on the same characters (the same
    object when there is nothing to escape, which is the usual case and costs one regex search)."""
    plain = text.plain
    if not unsafe(plain, multiline=multiline):
        return text
    pieces: list[str] = []
    new_at = [0] * (len(plain) + 1)  # old offset → new offset
    length = 0
    for i, ch in enumerate(plain):
        new_at[i] = length
        shown = escape_char(ch) if unsafe(ch, multiline=multiline) else ch
        pieces.append(shown)
        length += len(shown)
    new_at[len(plain)] = length
    out = text.blank_copy("".join(pieces))
    for span in text.spans:
        out.stylize(span.style, new_at[span.start], new_at[span.end])
    return out
