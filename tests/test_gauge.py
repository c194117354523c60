"""The allocated/used gauge, checked on the exact characters it draws (and the number formatters)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rich.style import Style

from tftui.ui.render.format import fmt_age, fmt_bytes, fmt_num, fmt_time
from tftui.ui.render.gauge import (
    DEFAULT_STYLES,
    GAP_CRIT,
    GAP_WARN,
    USED_CHAR,
    format_percent,
    gap_level,
    gauge_width,
    level_of,
    render_gauge,
    render_request_gauge,
    render_shift,
)

GI = 1024**3


def plain(capacity: float, allocated: float, used: float | None, width: int = 10) -> str:
    return render_gauge(capacity, allocated, used, width).plain


def test_two_layers_in_one_bar() -> None:
    # 60% booked, 30% really used: 3 solid, 3 light, 4 free, then alloc%/used%
    assert plain(100, 60, 30) == "███▒▒▒····  60%/ 30%"


def test_no_usage_data_is_a_dash_not_zero() -> None:
    assert plain(100, 60, None) == "▒▒▒▒▒▒····  60%/   —"
    assert plain(100, 60, 0) == "▒▒▒▒▒▒····  60%/  0%"


def test_empty_and_full() -> None:
    assert plain(100, 0, 0) == "··········   0%/  0%"
    assert plain(100, 100, 100) == "██████████ 100%/100%"


def test_used_above_allocation_is_drawn_solid_past_the_booking() -> None:
    # a worker bursting above its request (limit > request)
    assert plain(100, 20, 50) == "█████·····  20%/ 50%"


def test_over_capacity_fills_the_bar_and_prints_the_real_percentage() -> None:
    assert plain(100, 120, None) == "▒▒▒▒▒▒▒▒▒▒ 120%/   —"
    assert plain(1, 5000, None, width=4) == "▒▒▒▒ 999%/   —"


def test_tiny_values_stay_visible() -> None:
    # 0.2% allocated still gets one cell and prints <1%, never a misleading 0%
    assert plain(1000, 2, None) == "▒·········  <1%/   —"


def test_rounding_to_cells() -> None:
    assert plain(100, 44, 26) == "███▒······  44%/ 26%"
    assert plain(100, 45, 25) == "███▒▒·····  45%/ 25%"  # 4.5 cells rounds half up


def test_zero_capacity_has_no_percentages() -> None:
    assert plain(0, 0, None) == "··········    —/   —"
    assert plain(0, 5, 3) == "··········    —/   —"


def test_absolute_figures_on_wide_layouts() -> None:
    text = render_gauge(2000, 1234, 600, 8, fmt=fmt_num, unit="TF", value_width=12)
    assert text.plain == "██▒▒▒···  62%/ 30% 1.2k/2.0k TF"
    assert len(text.plain) == gauge_width(8, 12)
    vram = render_gauge(80 * GI, 20 * GI, None, 4, fmt=fmt_bytes, value_width=12)
    assert vram.plain == "▒···  25%/   —    20Gi/80Gi"


def test_width_is_fixed_whatever_the_values() -> None:
    for cap, alloc, used in [(0, 0, None), (100, 5, 1), (100, 100, 100), (1, 9999, 9999), (3, 1, None)]:
        assert len(plain(cap, alloc, used, width=7)) == gauge_width(7)


def test_colour_marks_a_large_gap_not_high_allocation() -> None:
    busy = render_gauge(100, 95, 90, 10)  # full and used: nothing to hunt
    assert [span.style for span in busy.spans[:2]] == [DEFAULT_STYLES.ok, DEFAULT_STYLES.alloc]
    idle = render_gauge(100, 95, 20, 10)  # full and idle: the booked, unused part is critical
    assert [span.style for span in idle.spans[:2]] == [DEFAULT_STYLES.ok, DEFAULT_STYLES.crit]
    assert render_gauge(100, 60, 30, 10).spans[1].style == DEFAULT_STYLES.warn  # a 30-point gap
    assert render_gauge(100, 60, None, 10).spans[0].style == DEFAULT_STYLES.alloc  # no data: not judged
    assert [gap_level(g) for g in (None, 0, GAP_WARN - 0.1, GAP_WARN, GAP_CRIT - 0.1, GAP_CRIT, 100)] == [
        "alloc",
        "alloc",
        "alloc",
        "warn",
        "warn",
        "crit",
        "crit",
    ]
    assert [level_of(p) for p in (None, 0, 69.9, 70, 89.9, 90, 150)] == [
        "ok",
        "ok",
        "ok",
        "warn",
        "warn",
        "crit",
        "crit",
    ]


def test_custom_styles_are_used() -> None:
    styles = DEFAULT_STYLES.__class__(
        ok=Style(color="blue"),
        warn=Style(color="magenta"),
        crit=Style(color="cyan"),
        free=Style(dim=True),
        alloc=Style(color="red"),
    )
    text = render_gauge(100, 50, None, 4, styles=styles)
    assert text.spans[0].style == Style(color="red")
    assert text.spans[1].style == Style(dim=True)
    assert render_gauge(100, 50, 50, 4, styles=styles).spans[0].style == Style(color="blue")


def test_a_small_allocation_keeps_a_cell_of_its_own_beside_use() -> None:
    """8 % booked and 1 % used used to draw one solid block: the booking was invisible."""
    assert plain(100, 8, 1) == "█▒········   8%/  1%"
    assert plain(100, 3, 2) == "█▒········   3%/  2%"
    assert plain(100, 100, 96) == "█████████▒ 100%/ 96%"  # a full bar gives up a used cell
    assert plain(100, 2, 2) == "█·········   2%/  2%"  # all of it used: nothing unused to show
    assert plain(100, 8, None) == "▒·········   8%/   —"


def test_request_gauge_is_use_against_the_request() -> None:
    """Workloads and workers: the bar is the request, the figure use as % of it (the report's USE)."""
    assert render_request_gauge(60, 12, 10).plain == "██▒▒▒▒▒▒▒▒  20%"
    assert render_request_gauge(60, None, 10).plain == "▒▒▒▒▒▒▒▒▒▒    —"
    over = render_request_gauge(60, 80, 10, fmt=fmt_num, unit="TF", value_width=12)
    assert over.plain == "██████████ 133%     80/60 TF"  # above the request, up to the limit
    assert len(over.plain) == gauge_width(10, 12, request=True)
    assert render_request_gauge(60, 6, 10).spans[1].style == DEFAULT_STYLES.crit  # 10 % used


def test_placement_shift_never_uses_the_used_glyph() -> None:
    """`█` means measured use everywhere; a placement shows allocation now and what it adds."""
    assert render_shift(40, 52, 10).plain == "▒▒▒▒▓·····  40%→ 52%"
    assert render_shift(52, 40, 10).plain == "▒▒▒▒░·····  52%→ 40%"
    assert USED_CHAR not in render_shift(90, 100, 10).plain


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "   —"),
        (0, "  0%"),
        (0.4, " <1%"),
        (0.5, "  1%"),
        (62.49, " 62%"),
        (100, "100%"),
        (12345, "999%"),
    ],
)
def test_format_percent(value: float | None, expected: str) -> None:
    assert format_percent(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (7.5, "7.5"),
        (7.0, "7"),
        (312, "312"),
        (999.4, "999"),
        (1234, "1.2k"),
        (12_345, "12k"),
        (3.4e6, "3.4M"),
    ],
)
def test_fmt_num(value: float, expected: str) -> None:
    assert fmt_num(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (512 * 1024**2, "512Mi"),
        (80 * GI, "80Gi"),
        (81559 * 1024**2, "80Gi"),
        (1.5 * 1024**4, "1.5Ti"),
        (1023.9 * GI, "1Ti"),
    ],
)
def test_fmt_bytes(value: float, expected: str) -> None:
    assert fmt_bytes(value) == expected


def test_fmt_age_and_time() -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert fmt_age(None, now) == "—"
    assert fmt_age(now - timedelta(seconds=45), now) == "45s"
    assert fmt_age(now - timedelta(minutes=12), now) == "12m"
    assert fmt_age(now - timedelta(hours=5), now) == "5h"
    assert fmt_age(now - timedelta(days=3, hours=2), now) == "3d"
    assert fmt_age(now + timedelta(minutes=1), now) == "0s"
    assert fmt_time(now) == "12:00:00 UTC"


def test_sparkline_scales_from_zero_to_the_request() -> None:
    """11–14 TFLOPS of use against a 60 TFLOPS request drew a saturated line (min..max scale)."""
    from tftui.ui.widgets.spark import bar_lines

    low = bar_lines([11.0, 12.0, 13.0, 14.0], 8, 60.0)[0]
    assert set(low) <= set("▁▂") and "█" not in low  # a quarter of the request at most
    assert bar_lines([0.0, 60.0], 2, 60.0) == ["▁█"]
    # above the request (bursting towards the limit) the scale grows to the data
    assert bar_lines([30.0, 120.0], 2, 60.0) == ["▂█"]  # 30 of 120
    # two lines: the top line is empty below half the scale
    top, bottom = bar_lines([15.0, 60.0], 2, 60.0, height=2)
    assert top == " █" and bottom == "▄█"
