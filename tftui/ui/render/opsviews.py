"""Pure builders for the operation screens: compaction, defrag, events, journal, confirm (the
placement preview is `placementview`).

Like `views.py`, these only format what the engine (through `ops.OpsData`) already
decided; nothing here touches a widget, so every builder can be tested without a screen.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, tzinfo

from rich.console import Group, RenderableType
from rich.table import Table as RichTable
from rich.text import Text

from tftui.engine.plan import Plan
from tftui.engine.state import Res
from tftui.model.duration import format_duration
from tftui.ui.load.data import ConsoleData
from tftui.ui.load.ops import CapacityFigures, CompactionView, DefragView, EventRow, JournalRow, kept_summary
from tftui.ui.render.format import NO_DATA, fmt_bytes, fmt_num
from tftui.ui.render.views import ALL, NOT_NARROW, WIDE_ONLY, Layout, Row, Table, _Col, _search, _table

OK_MARK = "✓"
FAIL_MARK = "✗"


# -- time ------------------------------------------------------------------------------------------


def fmt_stamp(when: datetime | None, *, date: bool = True) -> str:
    """`11-30 12:00:03` (or `12:00:03` without the date) in UTC, as the header; `—` when unknown."""
    if when is None:
        return NO_DATA
    return when.astimezone(UTC).strftime("%m-%d %H:%M:%S" if date else "%H:%M:%S")


def prose(text: str) -> Text:
    """Free text for a table cell: cut at the end (its start says the most), never wrapped."""
    return Text(text or NO_DATA, no_wrap=True, overflow="ellipsis", end="")


def fmt_zoned(when: datetime, tz: tzinfo) -> str:
    """`2026-12-01 03:00 EST` in the pool's zone."""
    local = when.astimezone(tz)
    return f"{local:%Y-%m-%d %H:%M} {local.tzname() or ''}".rstrip()


def fmt_span(start: datetime, end: datetime, tz: tzinfo) -> str:
    """`2026-12-01 03:00–05:00 EST` (the end's date only when it differs) in zone `tz`."""
    a, b = start.astimezone(tz), end.astimezone(tz)
    tail = f"{b:%H:%M}" if a.date() == b.date() else f"{b:%Y-%m-%d %H:%M}"
    return f"{a:%Y-%m-%d %H:%M}–{tail} {b.tzname() or ''}".rstrip()


def short_duration(td: timedelta) -> str:
    """`2h`, `1h30m`, `5m`, `90s`: a Go duration without its zero parts."""
    text = format_duration(td)
    for zero in ("0s", "0m"):
        if text.endswith(zero) and len(text) > len(zero) and not text[-len(zero) - 1].isdigit():
            text = text[: -len(zero)]
    return text


def fmt_utc(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def fmt_in(delta: timedelta) -> str:
    """`in 20h0m`, `3m ago`: how far an instant is from now, to the minute."""
    minutes = int(abs(delta.total_seconds()) // 60)
    text = f"{minutes // 60}h{minutes % 60}m" if minutes >= 60 else f"{minutes}m"
    if minutes >= 48 * 60:
        text = f"{minutes // 1440}d{(minutes % 1440) // 60}h"
    return f"in {text}" if delta >= timedelta(0) else f"{text} ago"


# -- compaction ------------------------------------------------------------------------------------

COMPACTION_POOL_COLUMNS = (
    _Col("name", "POOL", 12, ALL, flex=1),
    _Col("provisioning", "PROVISIONING", 12, NOT_NARROW),
    _Col("period", "PERIOD", 6, ALL),
    _Col("due", "ROUND", 14, ALL),
    _Col("release", "RELEASE", 7, ALL),
    _Col("kept", "KEPT", 4, ALL),
    _Col("why", "KEPT BECAUSE", 12, NOT_NARROW, flex=2),
)


def _round_word(view: CompactionView) -> str:
    return f"due {view.due_reason}" if view.due else "not due"


def compaction_pools_table(data: ConsoleData, layout: Layout) -> Table:
    rows = []
    for name, view in sorted(data.ops.compaction.items()):
        n_release = len(view.result.released) + sum(1 for k in view.result.kept if k.reason == "not-due")
        rows.append(
            Row(
                name,
                {
                    "name": name,
                    "provisioning": view.provisioning,
                    "period": short_duration(view.period),
                    "due": _round_word(view),
                    "release": str(n_release) if view.due or not n_release else f"({n_release})",
                    "kept": str(len(view.result.kept) - (0 if view.due else n_release)),
                    "why": kept_summary([k for k in view.result.kept if k.reason != "not-due"]) or NO_DATA,
                },
                _search(name, view.provisioning, view.due_reason),
            )
        )
    return _table(COMPACTION_POOL_COLUMNS, layout, rows)


DECISION_COLUMNS = (
    _Col("node", "NODE", (14, 16, 20), ALL, flex=1),
    _Col("decision", "DECISION", 16, ALL),
    _Col("detail", "DETAIL", 20, ALL, flex=2),
)


def compaction_decisions_table(view: CompactionView | None, layout: Layout) -> Table:
    """Every node of the pool with the engine's decision: release (and how) or kept (and why)."""
    rows = []
    if view is not None:
        for node, decision, detail in view.decisions():
            rows.append(
                Row(
                    node,
                    {
                        "node": node,
                        "decision": Text(decision, style="bold") if decision == "release" else Text(decision),
                        "detail": prose(detail),
                    },
                    _search(node, decision, detail),
                )
            )
    return _table(DECISION_COLUMNS, layout, rows)


def _check(ok: bool) -> Text:
    return Text(OK_MARK, style="green") if ok else Text(FAIL_MARK, style="bold red")


def capacity_table(before: CapacityFigures, after: CapacityFigures, *, after_label: str) -> RichTable:
    """TFLOPS and VRAM: available and total now → after, against warm and min, with ✓/✗."""
    grid = RichTable.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_row(
        Text(""),
        Text(f"available now → {after_label}", style="bold"),
        Text("warm ≥", style="bold"),
        Text(f"total now → {after_label}", style="bold"),
        Text("min ≥", style="bold"),
    )
    warm_ok, min_ok = after.warm_ok, after.min_ok
    for i, (label, vram) in enumerate((("TFLOPS", False), ("VRAM", True))):

        def fig(res: Res, vram: bool = vram) -> str:
            return fmt_bytes(res.vram) if vram else fmt_num(res.tflops)

        warm = Text(fig(after.warm) + " ")
        warm.append_text(_check(warm_ok[i]))
        low = Text(fig(after.minimum) + " ")
        low.append_text(_check(min_ok[i]))
        grid.add_row(
            Text(label, style="bold"),
            Text(f"{fig(before.available)} → {fig(after.available)}"),
            warm,
            Text(f"{fig(before.total)} → {fig(after.total)}"),
            low,
        )
    return grid


def compaction_summary(view: CompactionView | None, now: datetime) -> RenderableType:
    """The selected pool's round: period, due or not and why, and the capacity test's figures."""
    if view is None:
        return Text("no pool selected", style="dim")
    head = Text(no_wrap=True, overflow="ellipsis")
    head.append(view.pool, "bold")
    head.append(f" · {view.provisioning} · period {short_duration(view.period)}")
    head.append(" · ")
    head.append(_round_word(view), "bold" if view.due else "")
    if view.last_run is not None:
        head.append(f" · last round {fmt_in(view.last_run - now)}")
    n = len(view.result.released)
    would = [k.node for k in view.result.kept if k.reason == "not-due"]
    if view.due:
        head.append(f" · releases {n} node{'s' if n != 1 else ''}")
    elif would:
        head.append(f" · would release {len(would)}")
    parts: list[RenderableType] = [head]
    problems = [p for p in (view.period_error, view.trigger_error, *view.before.config_errors) if p]
    for p in problems:
        parts.append(Text(f"⚠ {p}", style="yellow", no_wrap=True, overflow="ellipsis"))
    parts.append(capacity_table(view.before, view.after, after_label="after"))
    return Group(*parts)


# -- defrag ----------------------------------------------------------------------------------------

DEFRAG_POOL_COLUMNS = (
    _Col("name", "POOL", 12, ALL, flex=1),
    _Col("enabled", "DEFRAG", 7, ALL),
    _Col("state", "STATE", 11, ALL),
    _Col("schedule", "SCHEDULE", 14, NOT_NARROW),
    _Col("timezone", "TIMEZONE", 12, NOT_NARROW, flex=1),
    _Col("window", "NEXT WINDOW (UTC)", 17, ALL),
    _Col("candidates", "CANDIDATES", 10, WIDE_ONLY),
)


def _enabled_word(view: DefragView) -> str:
    """`on`, `off` (a defrag block with enabled not true) or `unset` (no defrag block)."""
    if not view.configured:
        return "unset"
    return "on" if view.enabled else "off"


def defrag_pools_table(data: ConsoleData, layout: Layout) -> Table:
    rows = []
    for name, view in sorted(data.ops.defrag.items()):
        window = view.window[0].astimezone(UTC).strftime("%m-%d %H:%M") if view.window else NO_DATA
        rows.append(
            Row(
                name,
                {
                    "name": name,
                    "enabled": _enabled_word(view),
                    "state": view.state,
                    "schedule": view.schedule or NO_DATA,
                    "timezone": view.timezone or NO_DATA,
                    "window": window,
                    "candidates": str(len(view.shown.candidates)),
                },
                _search(name, view.state, view.schedule, view.timezone),
            )
        )
    return _table(DEFRAG_POOL_COLUMNS, layout, rows)


DEFRAG_NODE_COLUMNS = (
    _Col("node", "NODE", (14, 16, 20), ALL, flex=1),
    _Col("decision", "DECISION", 16, ALL),
    _Col("util", "GPUS BUSY", 9, ALL),
    _Col("detail", "DETAIL", 20, ALL, flex=2),
)


def defrag_nodes_table(view: DefragView | None, layout: Layout) -> Table:
    """Ranked candidates then skipped nodes with the reason; GPUS BUSY is defrag's utilization
    (the share of the node's pool GPUs with a worker, what the threshold is compared with), not
    the TFLOPS gauges of the other views."""
    rows = []
    if view is not None:
        for node, decision, util, detail in view.nodes():
            rows.append(
                Row(
                    node,
                    {
                        "node": node,
                        "decision": Text(decision, style="bold")
                        if decision.startswith("candidate")
                        else Text(decision),
                        "util": f"{util:.0f}%" if util is not None else NO_DATA,
                        "detail": prose(detail),
                    },
                    _search(node, decision, detail),
                )
            )
    return _table(DEFRAG_NODE_COLUMNS, layout, rows)


STATE_WORDS = {
    "off": "defrag does not run here",
    "invalid": "the configuration is invalid; nothing runs",
    "not-due": "outside a campaign window",
    "skip-missed": "the last window was missed; the anchor moves on",
    "blocked": "paused (an evicted pod is pending, or a PDB refuses)",
    "idle": "in a window, nothing to evict",
    "evict": "in a window, evicting one pod this step",
}


def defrag_summary(view: DefragView | None, now: datetime) -> RenderableType:
    """Config validity, schedule and zone, the window in the pool's zone and UTC, and the move."""
    if view is None:
        return Text("no pool selected", style="dim")
    lines: list[Text] = []
    head = Text(no_wrap=True, overflow="ellipsis")
    head.append(view.pool, "bold")
    head.append(f" · defrag {_enabled_word(view)} · state ")
    head.append(view.state, "bold")
    words = STATE_WORDS.get(view.state, view.state)
    if view.state == "off":
        words = "no defrag block in nodeCompaction" if not view.configured else "enabled is not true"
    head.append(f" ({words})")
    lines.append(head)
    if not view.configured:
        return Group(*lines)

    if view.error is not None:  # the whole error must be readable: this line wraps
        config = Text()
        config.append("config   ", "bold")
        config.append("invalid: ", "bold red")
        config.append(view.error, "red")
    else:
        cfg = view.config
        assert cfg is not None
        config = Text(no_wrap=True, overflow="ellipsis")
        config.append("config   ", "bold")
        config.append(f"valid · {view.schedule!r} in {view.timezone}")
        config.append(
            f" · maxDuration {short_duration(cfg.max_duration)} · threshold {cfg.threshold:g}% of GPUs busy"
        )
    lines.append(config)

    window = Text(no_wrap=True, overflow="ellipsis")
    window.append("window   ", "bold")
    if view.window is not None and view.config is not None:
        start, deadline = view.window
        tz = view.config.tz
        label = "current" if view.window_state == "due" else "next"
        window.append(f"{label} {fmt_span(start, deadline, tz)} · {fmt_span(start, deadline, UTC)}")
        window.append(f" · {fmt_in(start - now)}")
    elif view.error is None:
        window.append("the schedule does not fire within five years")
    else:
        window.append(NO_DATA)
    lines.append(window)

    last = Text(no_wrap=True, overflow="ellipsis")
    last.append("last     ", "bold")
    if view.last_defrag is not None:
        last.append(f"status.lastDefragTime {fmt_utc(view.last_defrag)} ({fmt_in(view.last_defrag - now)})")
    else:
        last.append("status.lastDefragTime not set (never ran)")
    lines.append(last)

    move = Text(no_wrap=True, overflow="ellipsis")
    move.append("move     ", "bold")
    step = view.shown
    if step.evict is not None:
        move.append(f"evict {step.evict.pod}: {step.evict.node} → {step.evict.target}")
    else:
        move.append("none")
    lines.append(move)
    if view.preview is not None:
        note = Text(no_wrap=True, overflow="ellipsis", style="dim")
        note.append("         simulated: the next window's first step on the cluster as it is now")
        lines.append(note)
    return Group(*lines)


def defrag_events(view: DefragView | None, limit: int = 5) -> Text:
    """The pool's recorded Defrag* events, newest first."""
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    text.append("recent defrag events", "bold")
    if view is None or not view.events:
        text.append("  none recorded", "dim")
        return text
    for e in view.events[:limit]:
        text.append(f"\n{fmt_stamp(e.time)}  ")
        text.append(f"{e.type:<7} ", "yellow" if e.type == "Warning" else "")
        text.append(f"{e.reason}: ", "bold")
        text.append(e.note)
    return text


# -- events and journal ----------------------------------------------------------------------------

EVENT_COLUMNS = (
    _Col("time", "TIME", (8, 14, 14), ALL),
    _Col("type", "TYPE", 7, ALL),
    _Col("reason", "REASON", 12, ALL, flex=1),
    _Col("object", "OBJECT", 14, NOT_NARROW, flex=1),
    _Col("note", "NOTE", 20, ALL, flex=2),
)


def events_table(rows: Sequence[EventRow], layout: Layout) -> Table:
    out = [
        Row(
            e.key,
            {
                "time": fmt_stamp(e.time, date=layout.name != "narrow"),
                "type": Text(e.type, style="yellow") if e.type == "Warning" else Text(e.type),
                "reason": e.reason or NO_DATA,
                "object": e.object or NO_DATA,
                "note": prose(e.note),
            },
            _search(e.type, e.reason, e.object, e.note),
        )
        for e in rows
    ]
    return _table(EVENT_COLUMNS, layout, out)


JOURNAL_COLUMNS = (
    _Col("time", "TIME", (8, 14, 14), ALL),
    _Col("pool", "POOL", 12, ALL, flex=1),
    _Col("kind", "KIND", (10, 10, 10), ALL),
    _Col("ok", "OK", 2, ALL),
    _Col("message", "MESSAGE", 20, ALL, flex=2),
)


def journal_table(rows: Sequence[JournalRow], layout: Layout) -> Table:
    out = [
        Row(
            j.key,
            {
                "time": fmt_stamp(j.time, date=layout.name != "narrow"),
                "pool": j.pool or NO_DATA,
                "kind": j.kind or NO_DATA,
                "ok": _check(j.ok),
                "message": prose(j.message),
            },
            _search(j.pool, j.kind, j.message, "ok" if j.ok else "failed"),
        )
        for j in rows
    ]
    return _table(JOURNAL_COLUMNS, layout, out)


# -- the manual compaction confirm dialog ----------------------------------------------------------


def confirm_compaction_body(
    pool: str, plan: Plan, before: CapacityFigures, after: CapacityFigures
) -> RenderableType:
    """Exactly what confirming would release (from the forced round's Plan) and the capacity after."""
    pp = plan.pools.get(pool)
    result = pp.compaction if pp is not None else None
    released = result.released if result is not None else []
    parts: list[RenderableType] = []
    if released:
        n = len(released)
        parts.append(Text(f"Releases {n} node{'s' if n != 1 else ''}:", style="bold"))
        grid = RichTable.grid(padding=(0, 2))
        grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True, overflow="ellipsis")
        for r in released:
            grid.add_row(Text(r.node, style="bold"), Text(r.action))
        parts.append(grid)
    else:
        parts.append(Text("Nothing would be released.", style="bold"))
        if result is not None and result.kept:
            parts.append(Text(f"kept: {kept_summary(result.kept)}", style="dim"))
    parts.append(Text(""))
    parts.append(capacity_table(before, after, after_label="after"))
    parts.append(Text(""))
    parts.append(
        Text(
            "Stamps the pool's manual-compaction annotation and runs its round now.",
            style="dim",
        )
    )
    return Group(*parts)
