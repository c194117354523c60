"""Per-pool and per-workload waste and firing alerts for the pools and workloads views and the
header, from the slow analyses.

The waste diagnosis and the alert replay arrive after the first screen (`TfTuiApp.request_analysis`),
so each figure has three states: loading (`…`, the analysis is still being computed), unknown
(`—`: no metrics, the store failed, or the object has no samples in the window) and a number.
Missing metrics are never shown as 0. The figures themselves are the engine's (`report.PoolRow`,
`wastemodel.workload_waste`, `AlertHistory.firing`); only the mapping of an alert to its pool (its
`pool` label, else its node's pool) happens here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from tftui.engine.state import ClusterState
from tftui.engine.wastemodel import waste_figure, workload_waste
from tftui.ui.load.analysis import AlertsAnalysis, Analysis, WasteAnalysis

__all__ = [
    "LOADING",
    "WASTE_EVERY",
    "PoolWaste",
    "WorkloadWaste",
    "pool_waste",
    "waste_loading",
    "waste_summary",
    "workloads_waste",
]

LOADING: Final = "…"
"""What a figure shows while its analysis is still being computed."""

WASTE_EVERY: Final = 6
"""The first screen and the header recompute the waste and alert analyses every this many refreshes
(a minute at the default 10 s): over a day's window they hardly move between two refreshes, and on
a large cluster each costs seconds of CPU. The waste and alerts views recompute on every refresh."""

Figure = float | None | Literal["…"]
"""A number, None (unknown: `—`) or `LOADING`."""


@dataclass(frozen=True, slots=True)
class PoolWaste:
    gpu_hours: Figure  # wasted GPU-hours over the window (disjoint findings, as the report sums)
    money: Figure  # USD; None also when nothing in the pool has a price
    unpriced: bool  # some of the pool's waste has no price: `money` is a lower bound
    alerts: int | Literal["…"] | None  # alerts firing now


def _state(analysis: Analysis | None, computing: bool) -> Literal["loading", "none", "value"]:
    if analysis is None or analysis.value is None:
        return "loading" if computing or analysis is None else "none"
    return "value"


def pool_waste(
    state: ClusterState,
    waste: Analysis | None,
    waste_computing: bool,
    alerts: Analysis | None,
    alerts_computing: bool,
) -> dict[str, PoolWaste]:
    """Pool → its waste and alert figures (see the module docstring for the three states).

    `analysis is None` without a computation running means it was not asked for yet: loading too
    (the screen asks on its next render)."""
    out: dict[str, PoolWaste] = {}
    w_state = _state(waste, waste_computing)
    a_state = _state(alerts, alerts_computing)
    report = waste.value.report if waste is not None and isinstance(waste.value, WasteAnalysis) else None
    rows = {r.name: r for r in report.pools} if report is not None else {}
    firing: dict[str, int] = {}
    if alerts is not None and isinstance(alerts.value, AlertsAnalysis):
        for a in alerts.value.history.firing:
            pool = a.row.get("pool")
            if pool is None:
                node = state.nodes.get(str(a.row.get("node") or ""))
                pool = node.pool if node is not None else None
            if pool is not None:
                firing[str(pool)] = firing.get(str(pool), 0) + 1
    for name in state.pools:
        hours: Figure
        money: Figure
        unpriced = False
        if w_state == "loading":
            hours = money = LOADING
        elif w_state == "none" or report is None:
            hours = money = None
        else:
            row = rows.get(name)
            sampled = row is not None and (
                row.compute_used_pct is not None or row.tflops_allocated_pct is not None
            )
            if row is None or not sampled:
                hours = money = None  # no samples for this pool in the window: unknown, not 0
            else:
                hours = row.wasted_gpu_hours
                figure = waste_figure(f for f in report.findings if f.pool == name)
                unpriced = figure.unpriced
                money = None if figure.money is None else row.wasted_money
        count: int | Literal["…"] | None
        if a_state == "loading":
            count = LOADING
        elif a_state == "none":
            count = None
        else:
            count = firing.get(name, 0)
        out[name] = PoolWaste(hours, money, unpriced, count)
    return out


@dataclass(frozen=True, slots=True)
class WorkloadWaste:
    money: Figure  # USD over the window; None: no metrics for it in the window, or not sizeable
    unpriced: bool  # some of its waste has no price: `money` is a lower bound


def waste_loading(waste: Analysis | None, computing: bool) -> bool:
    """Whether the waste figures are still loading (`…`): no outcome yet, or none but one coming."""
    return _state(waste, computing) == "loading"


def workloads_waste(value: object, loading: bool) -> dict[str, WorkloadWaste] | None:
    """Workload key → its wasted money over the diagnosis window (`wastemodel.workload_waste`, the
    figure the pool column and the totals add) from the waste analysis' value; None while
    `loading` (`waste_loading`: every cell `…`). Without metrics, or for a workload the window has
    no samples of, the figure is unknown (`—`)."""
    if loading:
        return None
    if not isinstance(value, WasteAnalysis):
        return {}
    report = value.report
    return {
        key: WorkloadWaste(None, False) if fig is None else WorkloadWaste(fig.money, fig.unpriced)
        for key, fig in workload_waste(report.workloads, report.findings).items()
    }


def waste_summary(waste: Analysis | None, computing: bool) -> str:
    """The header's `waste $1,234/1d` part: `waste $…` while loading, `waste $—` without metrics."""
    w_state = _state(waste, computing)
    if w_state == "loading":
        return f"waste ${LOADING}"
    if waste is None or not isinstance(waste.value, WasteAnalysis):
        return "waste $—"
    report = waste.value.report
    totals = report.totals
    if not report.nodes and not report.gpus:
        return "waste $—"  # the window has no samples at all
    money = totals.money
    text = f"${money:,.0f}" if money >= 100 else f"${money:,.2f}"
    days = report.window.total_seconds() / 86400
    span = f"{days:g}d" if days >= 1 else f"{report.window.total_seconds() / 3600:g}h"
    return f"waste {text}{'+' if totals.unpriced else ''}/{span}"
