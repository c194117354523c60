"""A node's or GPU's 24 h sparklines (allocated and used TFLOPS, 0–100 % of its capacity).

The same scaled sparkline as a workload's (`ScaledSparkline`, from 0, not min..max), one line of
figures above each, a time axis below. While the history is computed the first label says so.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical

from tftui.ui.load.objhistory import ObjectHistory
from tftui.ui.widgets.plain import PlainLabel
from tftui.ui.widgets.spark import ScaledSparkline


def _points(values: tuple[float | None, ...]) -> tuple[list[float], int]:
    """Points from the first bucket with data on (gaps after it drawn as 0), and where that is."""
    start = next((i for i, v in enumerate(values) if v is not None), len(values))
    return [v if v is not None else 0.0 for v in values[start:]], start


def _label(what: str, values: tuple[float | None, ...], bucket_minutes: int) -> Text:
    have = [v for v in values if v is not None]
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    text.append(f"TFLOPS {what}", "bold")
    text.append(f" (% of capacity, {bucket_minutes}m means)")
    if have:
        text.append(f" · min {min(have):.0f}% · max {max(have):.0f}% · last {have[-1]:.0f}%")
    else:
        text.append(" · no samples in the last 24 h (no data, not idle)")
    return text


MIN_HEIGHT = 30
"""Terminal lines from which a node's or GPU's detail shows its sparklines."""


class HistorySparks(Vertical):
    """Allocated and used sparklines of one node or GPU."""

    def compose(self) -> ComposeResult:
        yield PlainLabel("", id="hist-alloc-label", classes="spark-label")
        yield ScaledSparkline([], id="hist-alloc")
        yield PlainLabel("", id="hist-used-label", classes="spark-label")
        yield ScaledSparkline([], id="hist-used")
        yield PlainLabel("", id="hist-axis", classes="spark-label")

    def show(self, history: ObjectHistory | None, status: Text | None) -> None:
        # below 30 lines the tables need the room (the history is one `enter` away on a taller one)
        self.display = (self.screen.size.height or self.app.size.height) >= MIN_HEIGHT
        alloc_label = self.query_one("#hist-alloc-label", PlainLabel)
        used_label = self.query_one("#hist-used-label", PlainLabel)
        alloc, used = (
            self.query_one("#hist-alloc", ScaledSparkline),
            self.query_one("#hist-used", ScaledSparkline),
        )
        axis = self.query_one("#hist-axis", PlainLabel)
        if history is None:
            alloc_label.update(status or "")
            for widget in (alloc, used_label, used, axis):
                widget.display = False
            return
        minutes = int(history.bucket.total_seconds() // 60)
        per_gpu = history.kind == "GPU"
        if per_gpu:  # the store keeps no per-GPU allocation series
            now = "—" if history.allocated_now is None else f"{history.allocated_now:.0f}%"
            line = Text.assemble(
                ("TFLOPS allocated", "bold"), f" now {now} (no per-GPU allocation history is stored)"
            )
        else:
            line = _label("allocated", history.allocated, minutes)
        alloc_label.update(Text.assemble(status, "  ", line) if status else line)
        alloc.display = not per_gpu
        used_label.display = used.display = axis.display = True
        used_label.update(_label("used", history.used, minutes))
        first = min(_points(history.used)[1], len(history.used) if per_gpu else _points(history.allocated)[1])
        alloc.ceiling = used.ceiling = 100.0
        alloc.data = [v if v is not None else 0.0 for v in history.allocated[first:]]
        used.data = [v if v is not None else 0.0 for v in history.used[first:]]
        start = history.start + history.bucket * first
        axis.update(f"{start:%a %H:%M} … {history.end:%a %H:%M} UTC")
