"""Pure builders for the placement preview (`p`): where a worker would land and what it would add.

Split from `opsviews` (compaction, defrag, events, journal) because the preview is a view of its own
over an engine `Preview`; like every builder it only formats what the engine decided.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table as RichTable
from rich.text import Text

from tftui.engine.placement import Preview
from tftui.engine.state import ClusterState
from tftui.ui.render.format import ellipsize, fmt_bytes, fmt_num
from tftui.ui.render.gauge import (
    ADDED_CHAR,
    ALLOC_CHAR,
    DEFAULT_STYLES,
    FREE_CHAR,
    SHIFT_WIDTH,
    GaugeStyles,
    render_shift,
)
from tftui.ui.render.views import Layout

# -- placement preview -----------------------------------------------------------------------------


def _gpu_label(state: ClusterState, names: Sequence[str], width: int) -> str:
    """`GPU 1` / `GPUs 0,3` by device index; the names when indices are unknown."""
    indices = [state.gpus[n].index if n in state.gpus else None for n in names]
    if names and all(i is not None for i in indices):
        word = "GPU" if len(names) == 1 else "GPUs"
        return ellipsize(f"{word} " + ",".join(str(i) for i in indices), width)
    return ellipsize(",".join(names), width)


def placement_table(
    pv: Preview, state: ClusterState, layout: Layout, styles: GaugeStyles = DEFAULT_STYLES
) -> RichTable:
    """One row per mode: target node and GPUs, node and pool allocation before → after, top scores.

    The pool's current mode is marked `▶`; a mode where nothing fits gives the engine's reason and
    how many GPUs each filter removed.
    """
    narrow = layout.name == "narrow"
    bar = {"narrow": 6, "normal": 10, "wide": 20}[layout.name]
    gauge = 5 + bar + 1 + SHIFT_WIDTH  # "VRAM " bar " 54%→ 56%"
    target_width = {"narrow": 23, "normal": 14, "wide": 30}[layout.name]
    table = RichTable(
        box=None,
        padding=(0, 1),
        pad_edge=False,
        show_edge=False,
        header_style="bold",
        expand=False,
        show_lines=True,
    )
    table.add_column("MODE · TARGET" if narrow else "MODE", no_wrap=True, width=23)
    if not narrow:
        table.add_column("TARGET", no_wrap=True, width=target_width)
    table.add_column("NODE before→after", width=gauge)
    table.add_column("POOL before→after", width=gauge)
    if not narrow:
        table.add_column("TOP NODE SCORES", no_wrap=True, width=18 if layout.name == "normal" else 40)
    for mp in pv.modes:
        p = mp.placement
        mode = Text(no_wrap=True, overflow="ellipsis")
        current = p.mode == pv.mode
        mode.append(("▶ " if current else "  ") + p.mode, "bold" if current else "")
        if current:
            mode.append("\n  (current mode)", "dim")
        target = Text(no_wrap=True, overflow="ellipsis")
        scores = Text(no_wrap=True, overflow="ellipsis")
        for i, (node, score) in enumerate(p.node_scores):
            if i:
                scores.append("\n")
            scores.append(
                f"{ellipsize(node, 14 if layout.name == 'normal' else 34)} {score}",
                "bold" if node == p.node else "",
            )
        if p.node is None:
            target.append("nothing fits", "bold red")
            why = Text(p.reason or "no node passes the filters", style="red")
            filtered = Text(style="dim")
            if p.rejected:
                filtered.append("GPUs filtered out:")
                for stage, n in p.rejected.items():
                    filtered.append(f"\n{stage} {n}")
            cells: list[RenderableType] = [mode] if narrow else [mode, target]
            if narrow:
                mode.append("\n→ ")
                mode.append_text(target)
            cells += [why, filtered]
            if not narrow:
                cells.append(scores)
            table.add_row(*cells)
            continue
        chosen = dict(p.node_scores).get(p.node)
        target.append(ellipsize(p.node, target_width - (4 if narrow else 0)), "bold")
        if chosen is not None and narrow:
            target.append(f" {chosen}")
        target.append("\n" + ("  " if narrow else "") + _gpu_label(state, p.gpus, target_width))
        nb, na = mp.node_before, mp.node_after
        assert nb is not None and na is not None
        node_cell = Text(no_wrap=True)
        node_cell.append("TF   ")
        node_cell.append_text(render_shift(nb.tflops, na.tflops, bar, styles=styles))
        node_cell.append("\nVRAM ")
        node_cell.append_text(render_shift(nb.vram, na.vram, bar, styles=styles))
        pool_cell = Text(no_wrap=True)
        pool_cell.append("TF   ")
        pool_cell.append_text(render_shift(pv.pool_before.tflops, mp.pool_after.tflops, bar, styles=styles))
        pool_cell.append("\nVRAM ")
        pool_cell.append_text(render_shift(pv.pool_before.vram, mp.pool_after.vram, bar, styles=styles))
        if narrow:
            mode.append("\n→ ")
            mode.append_text(target)
            if len(p.node_scores) > 1:
                node, score = p.node_scores[1]
                mode.append(f"\n  next {ellipsize(node, 14)} {score}", "dim")
            table.add_row(mode, node_cell, pool_cell)
        else:
            table.add_row(mode, target, node_cell, pool_cell, scores)
    return table


def request_words(pv: Preview) -> str:
    r = pv.request
    amount = (
        f"{r.compute_percent:g}% compute"
        if r.compute_percent is not None
        else f"{fmt_num(r.tflops or 0)} TFLOPS"
    )
    model = f" · model {r.model}" if r.model else ""
    iso = f" · {r.isolation}" if r.isolation != "soft" else ""
    part = f" {r.partition}" if r.partition else ""
    ns = f" · namespace {r.namespace}" if r.namespace else ""
    return f"{r.count} × ({amount}, {fmt_bytes(r.vram)} VRAM){model}{iso}{part}{ns}"


def placement_view(
    pv: Preview, state: ClusterState, layout: Layout, styles: GaugeStyles = DEFAULT_STYLES
) -> RenderableType:
    head = Text(no_wrap=True, overflow="ellipsis")
    head.append(f"{request_words(pv)} in pool ")
    head.append(pv.pool, "bold")
    head.append(f" · current mode {pv.mode}")
    legend = Text(
        f"{ALLOC_CHAR} allocated now  {ADDED_CHAR} this request  {FREE_CHAR} free    "
        "running workloads stay where they are",
        style="dim",
        no_wrap=True,
        overflow="ellipsis",
    )
    return Group(head, Text(""), placement_table(pv, state, layout, styles), Text(""), legend)
