"""Short, fixed-width text for numbers in table cells.

The console prints figures in narrow columns, so these formatters favour a bounded width (about four
characters) over precision: the exact values live in the objects, the table is for scanning.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from tftui.engine.state import Res

NO_DATA = "—"
_BINARY_UNITS = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def ellipsize(text: str, width: int) -> str:
    """Fit `text` in `width` by cutting the middle: names differ at both ends (`…-worker-bk9s9`)."""
    if len(text) <= width:
        return text
    if width < 5:
        return text[:width]
    head = width // 2
    return text[:head] + "…" + text[len(text) - (width - head - 1) :]


_NUMBER = re.compile(r"-?\d+(\.\d+)?")
_UNITS = ((1e3, "k"), (1e6, "M"), (1e9, "G"), (1e12, "T"))


def is_number(text: object) -> bool:
    """A plain decimal number as the views print counts (`10000`, `-3`, `7.5`)."""
    return isinstance(text, str) and _NUMBER.fullmatch(text) is not None


def fit_number(text: str, width: int) -> str | None:
    """`text` (a number) in at most `width` characters: abbreviated with a unit when wider, as
    precise as the width allows (`10k`, `10.5k`, `1.2M`); None when no form fits.

    Names are cut in the middle to fit (`ellipsize`), but a cut number lies: 10,000 GPUs shown
    as `1000`. Tables abbreviate numbers with this, or widen the column when nothing fits.
    """
    if len(text) <= width:
        return text
    value = float(text)
    sign, value = ("-", -value) if value < 0 else ("", value)
    for div, unit in _UNITS:
        scaled = value / div
        if scaled < 0.95 or round(scaled, 1) >= 1000:
            continue  # too small for this unit, or it reads better in the next
        for digits in (2, 1, 0):
            short = f"{scaled:.{digits}f}"
            if "." in short:
                short = short.rstrip("0").rstrip(".")
            if len(sign + short + unit) <= width:
                return sign + short + unit
        return None
    return None


def fmt_num(value: float) -> str:
    """TFLOPS and counts: `0`, `7.5`, `312`, `1.2k`, `12k`, `3.4M` (at most four characters)."""
    if value < 0:
        return "-" + fmt_num(-value)
    if value == 0:
        return "0"
    if value < 10:
        text = f"{value:.1f}"
        return text[:-2] if text.endswith(".0") else text
    if value < 999.5:
        return f"{value:.0f}"
    if value < 9_950:
        return f"{value / 1e3:.1f}k"
    if value < 999_500:
        return f"{value / 1e3:.0f}k"
    return f"{value / 1e6:.1f}M"


def fmt_bytes(value: float) -> str:
    """Bytes in Kubernetes binary units, e.g. `80Gi`, `1.5Ti`, `512Mi` (at most five characters)."""
    if value < 0:
        return "-" + fmt_bytes(-value)
    if value < 1:
        return "0"
    exp = min(int(math.log(value, 1024)), len(_BINARY_UNITS) - 1)
    scaled = value / 1024**exp
    if round(scaled) >= 1024 and exp < len(_BINARY_UNITS) - 1:
        exp, scaled = exp + 1, scaled / 1024
    text = f"{scaled:.1f}" if scaled < 9.95 else f"{scaled:.0f}"
    if text.endswith(".0"):
        text = text[:-2]
    return text + _BINARY_UNITS[exp]


def fmt_res(res: Res) -> str:
    """A TFLOPS and VRAM pair as `60 TF 20Gi` (a request or limit per device)."""
    return f"{fmt_num(res.tflops)} TF {fmt_bytes(res.vram)}"


def fmt_req_lim(request: Res, limit: Res) -> str:
    """Request and limit side by side, `60/120 20Gi/24Gi` (TFLOPS, then VRAM)."""
    return (
        f"{fmt_num(request.tflops)}/{fmt_num(limit.tflops)} {fmt_bytes(request.vram)}/{fmt_bytes(limit.vram)}"
    )


def fmt_age(created: datetime | None, now: datetime) -> str:
    """Age like kubectl (`45s`, `12m`, `5h`, `3d`); `—` when unknown, `0s` for future stamps."""
    if created is None:
        return NO_DATA
    # total_seconds: the same float as `/ timedelta(seconds=1)` without building a timedelta (a
    # node table computes every row's age on each refresh to see which rows changed)
    seconds = max(0, int((now - created).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def fmt_time(when: datetime) -> str:
    """Wall-clock time for the header, in UTC so every operator reads the same figure."""
    if when.tzinfo is None:
        return when.strftime("%H:%M:%S")
    return when.astimezone(UTC).strftime("%H:%M:%S UTC")


def count_words(displayed: int, matching: int, total: int, label: str = "") -> str:
    """The breadcrumb's count of one table: `12`, `3/12` when filtered, and when more rows match
    than are displayed `showing 1,000 of 40,000 — / to filter` (of 40,000 matching when filtered)."""
    suffix = f" {label}" if label else ""
    if displayed < matching:
        of = f"{matching:,}" if matching == total else f"{matching:,} matching of {total:,}"
        return f"showing {displayed:,} of {of}{suffix} — / to filter"
    return (str(matching) if matching == total else f"{matching}/{total}") + suffix
