"""Metrics screens: `:waste` (the diagnosis) and its finding detail, `:alerts`, and the workload detail.

What they show is slow to compute (step 1 over a day, the alert replay, a workload's 24 h of rows),
so they never compute it: each screen names the analyses it needs (`analysis_keys`), the app runs
them in thread workers once per refresh, and the screen re-renders when `TfTuiApp.analyses`
changes, showing "computing…" until the first result and the last good one (marked) after an error.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Label, Static

from tftui.ui.actions import bindings
from tftui.ui.load.analysis import (
    ALERTS,
    AUTOSCALE,
    HISTORY,
    WASTE,
    AlertsAnalysis,
    Analysis,
    AnalysisKey,
    WasteAnalysis,
    WorkloadHistory,
)
from tftui.ui.load.autoscale import AutoscaleAnalysis
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.autoscaleview import detail_text as autoscale_detail
from tftui.ui.render.metricsviews import (
    alerts_summary,
    analysis_status,
    find_finding,
    finding_detail,
    finding_preview,
    fixes_text,
    instances_table,
    rule_alerts,
    rules_table,
    spark_axis,
    spark_label,
    spark_values,
    waste_summary,
    waste_table,
    workload_figures,
    workload_summary,
    workload_verdict,
)
from tftui.ui.render.views import Gauges, Layout, Table
from tftui.ui.render.workviews import workers_table
from tftui.ui.screens.autoscale import AUTOSCALE_BINDINGS, AutoscaleActions
from tftui.ui.screens.base import ResourceScreen
from tftui.ui.screens.ops import NEXT_TABLE
from tftui.ui.widgets.plain import PlainLabel, PlainStatic
from tftui.ui.widgets.spark import ScaledSparkline
from tftui.ui.widgets.table import ResourceTable


def _waste(analysis: Analysis | None) -> WasteAnalysis | None:
    value = analysis.value if analysis is not None else None
    return value if isinstance(value, WasteAnalysis) else None


def _alerts(analysis: Analysis | None) -> AlertsAnalysis | None:
    value = analysis.value if analysis is not None else None
    return value if isinstance(value, AlertsAnalysis) else None


def _history(analysis: Analysis | None) -> WorkloadHistory | None:
    value = analysis.value if analysis is not None else None
    return value if isinstance(value, WorkloadHistory) else None


class WasteScreen(ResourceScreen):
    """The diagnosis' findings, largest wasted GPU-hours first; enter opens one with every fix."""

    NEEDS: ClassVar[frozenset[str]] = frozenset({"metrics"})

    COUNT_LABELS: ClassVar[dict[str, str]] = {"main": "findings"}

    def __init__(self, trail: tuple[str, ...] = ("waste",)) -> None:
        super().__init__(trail)

    def analysis_keys(self) -> tuple[AnalysisKey, ...]:
        return ((WASTE, ""),)

    def compose_body(self) -> ComposeResult:
        yield PlainStatic("", id="waste-summary")
        yield ResourceTable(id="main")
        yield PlainStatic("", id="waste-preview")

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        return waste_table(_waste(self.tui.analysis(WASTE)), gauges.layout)

    def crumb_count(self, counts: list[str]) -> str:
        if _waste(self.tui.analysis(WASTE)) is None:
            return "computing…" if self.tui.computing(WASTE) else "no data"
        return super().crumb_count(counts)

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        analysis = self.tui.analysis(WASTE)
        status = analysis_status(analysis, self.tui.computing(WASTE), "the waste diagnosis")
        summary = self.query_one("#waste-summary", Static)
        if analysis is not None and analysis.value is not None:
            text = waste_summary(analysis, layout)
            if status is not None:
                text = Text.assemble(status, "\n", text)
            summary.update(text)
        else:
            summary.update(status or "")
        self._preview()

    def _preview(self) -> None:
        waste = _waste(self.tui.analysis(WASTE))
        key = self.query_one("#main", ResourceTable).cursor_key
        finding = find_finding(waste.report, key) if waste is not None and key else None
        preview = self.query_one("#waste-preview", Static)
        preview.update(finding_preview(finding))
        preview.display = finding is not None

    @on(DataTable.RowHighlighted, "#main")
    def _moved(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._preview()

    def open(self, table_id: str, key: str) -> None:
        waste = _waste(self.tui.analysis(WASTE))
        finding = find_finding(waste.report, key) if waste is not None else None
        if finding is not None:
            self.app.push_screen(FindingScreen(key, trail=(*self.trail, finding.name)))


class FindingScreen(ResourceScreen):
    """One finding in full: evidence, waste, every fix (selectable; `c` copies them), the figures."""

    NEEDS: ClassVar[frozenset[str]] = frozenset({"metrics"})

    AUTO_FOCUS = "#finding-scroll"
    BINDINGS: ClassVar[list[BindingType]] = bindings("finding")

    def __init__(self, key: str, trail: tuple[str, ...]) -> None:
        super().__init__(trail)
        self.key = key

    def analysis_keys(self) -> tuple[AnalysisKey, ...]:
        return ((WASTE, ""),)

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="finding-scroll"):
            yield PlainStatic("", id="finding-body")

    def default_focus(self) -> VerticalScroll:
        return self.query_one("#finding-scroll", VerticalScroll)

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        analysis = self.tui.analysis(WASTE)
        waste = _waste(analysis)
        body = self.query_one("#finding-body", Static)
        finding = find_finding(waste.report, self.key) if waste is not None else None
        if waste is None or finding is None:
            status = analysis_status(analysis, self.tui.computing(WASTE), "the waste diagnosis")
            body.update(status or Text(f"the diagnosis no longer reports {self.key}", style="bold"))
            return
        body.update(finding_detail(waste.report, finding))

    def action_copy_fixes(self) -> None:
        waste = _waste(self.tui.analysis(WASTE))
        finding = find_finding(waste.report, self.key) if waste is not None else None
        if finding is None or not finding.fixes:
            self.notify("nothing to copy", severity="warning")
            return
        self.app.copy_to_clipboard(fixes_text(finding))
        n = len(finding.fixes)
        self.notify(f"copied {n} fix{'es' if n != 1 else ''} to the clipboard")


class AlertsScreen(ResourceScreen):
    """Every built-in rule and its state on top; the selected rule's alerts below."""

    NEEDS: ClassVar[frozenset[str]] = frozenset({"metrics"})

    BINDINGS: ClassVar[list[BindingType]] = [NEXT_TABLE]
    COUNT_LABELS: ClassVar[dict[str, str]] = {"rules": "rules", "instances": "alerts"}

    def __init__(self, trail: tuple[str, ...] = ("alerts",)) -> None:
        super().__init__(trail)

    def analysis_keys(self) -> tuple[AnalysisKey, ...]:
        return ((ALERTS, ""),)

    def compose_body(self) -> ComposeResult:
        yield ResourceTable(id="rules", classes="master")
        yield PlainStatic("", id="alerts-summary")
        yield ResourceTable(id="instances")

    def selected_rule(self) -> str | None:
        return self.query_one("#rules", ResourceTable).cursor_key

    def crumb_trail(self) -> tuple[str, ...]:
        rule = self.selected_rule() if self.is_mounted else None
        return (*self.trail, rule) if rule else self.trail

    def crumb_count(self, counts: list[str]) -> str:
        """The same counts as the summary: rules firing of all rules, alerts in all, and how many
        of them the selected rule has (the table below)."""
        alerts = _alerts(self.tui.analysis(ALERTS))
        if alerts is None:
            return "computing…" if self.tui.computing(ALERTS) else "no data"
        h = alerts.history
        firing = sum(1 for s in h.statuses if s.state == "firing")
        rule = self.selected_rule()
        mine = len(rule_alerts(alerts, rule)) if rule is not None else 0
        return f"{firing} of {len(h.statuses)} rules firing ({len(h.firing)} alerts) · {mine} of this rule"

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        alerts = _alerts(self.tui.analysis(ALERTS))
        if table_id == "rules":
            return rules_table(alerts, gauges.layout)
        return instances_table(alerts, self.selected_rule(), gauges.layout)

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        analysis = self.tui.analysis(ALERTS)
        status = analysis_status(analysis, self.tui.computing(ALERTS), "the alert rules")
        summary = self.query_one("#alerts-summary", Static)
        if analysis is not None and analysis.value is not None:
            text = alerts_summary(analysis, self.selected_rule())
            summary.update(Text.assemble(status, "\n", text) if status is not None else text)
        else:
            summary.update(status or "")

    @on(DataTable.RowHighlighted, "#rules")
    def _rule_moved(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self.render_data()

    def open(self, table_id: str, key: str) -> None:
        if table_id == "rules":
            self.query_one("#instances", ResourceTable).focus()


class WorkloadScreen(AutoscaleActions, ResourceScreen):
    """One workload: request vs average and peak use per device, 24 h sparklines, the autoscaler's
    view (usage distribution, percentiles, cron rule, recommendation and why), its workers."""

    NEEDS: ClassVar[frozenset[str]] = frozenset({"metrics"})

    AUTO_FOCUS = "#workers"
    COUNT_LABELS: ClassVar[dict[str, str]] = {"workers": "workers"}
    BINDINGS: ClassVar[list[BindingType]] = AUTOSCALE_BINDINGS

    def __init__(self, key: str, trail: tuple[str, ...]) -> None:
        super().__init__(trail)
        self.key = key

    def analysis_keys(self) -> tuple[AnalysisKey, ...]:
        return ((HISTORY, self.key), (WASTE, ""), (AUTOSCALE, ""))

    def selected_workload(self) -> str | None:
        return self.key

    def compose_body(self) -> ComposeResult:
        yield PlainStatic("", id="wl-summary")
        yield PlainStatic("", id="wl-verdict")
        yield PlainStatic("", id="wl-figures")
        yield PlainLabel("", id="spark-tflops-label", classes="spark-label")
        yield ScaledSparkline([], id="spark-tflops")
        yield PlainLabel("", id="spark-vram-label", classes="spark-label")
        yield ScaledSparkline([], id="spark-vram")
        yield PlainLabel("", id="spark-axis")
        with VerticalScroll(id="wl-autoscale-scroll", can_focus=False):
            yield PlainStatic("", id="wl-autoscale")
        yield ResourceTable(id="workers")

    def build(self, table_id: str, data: ConsoleData, gauges: Gauges) -> Table:
        wl = data.state.workloads.get(self.key)
        return workers_table(data, gauges, wl.workers if wl is not None else [])

    def render_extra(self, data: ConsoleData, layout: Layout) -> None:
        auto = self.tui.analysis(AUTOSCALE)
        auto_value = auto.value if auto is not None and isinstance(auto.value, AutoscaleAnalysis) else None
        self.query_one("#wl-autoscale", Static).update(
            autoscale_detail(
                auto_value,
                self.key,
                error=auto.error if auto is not None else None,
                pending=self.tui.computing(AUTOSCALE),
            )
        )
        waste = _waste(self.tui.analysis(WASTE))
        self.query_one("#wl-summary", Static).update(workload_summary(data, self.key))
        verdict = self.query_one("#wl-verdict", Static)
        verdict.update(workload_verdict(self.key, waste))
        verdict.display = waste is not None
        analysis = self.tui.analysis(HISTORY, self.key)
        history = _history(analysis)
        self.query_one("#wl-figures", Static).update(workload_figures(data, self.key, history))
        status = analysis_status(analysis, self.tui.computing(HISTORY, self.key), "the 24 h history")
        tf_label = self.query_one("#spark-tflops-label", Label)
        vram_label = self.query_one("#spark-vram-label", Label)
        axis = self.query_one("#spark-axis", Label)
        sparks = (
            self.query_one("#spark-tflops", ScaledSparkline),
            self.query_one("#spark-vram", ScaledSparkline),
        )
        shown = history is not None and history.has_data
        for spark in sparks:
            spark.display = shown
        vram_label.display = axis.display = shown
        if history is None or not history.has_data:
            if status is None and history is not None:
                status = Text(
                    f"no usage rows for {self.key} in tf_worker_usage over the last 24 h", style="bold"
                )
            tf_label.update(status or "")
            return
        # the bars' top is what the running workers requested, so a low line reads "mostly idle"
        wl = data.state.workloads.get(self.key)
        ceiling = wl.allocated if wl is not None else None
        tf_top = ceiling.tflops if ceiling is not None and ceiling.tflops > 0 else None
        vram_top = float(ceiling.vram) if ceiling is not None and ceiling.vram > 0 else None
        tf_spark = spark_label(history, "tflops", tf_top)
        tf_label.update(Text.assemble(status, "  ", tf_spark) if status else tf_spark)
        vram_label.update(spark_label(history, "vram", vram_top))
        sparks[0].ceiling, sparks[1].ceiling = tf_top, vram_top
        sparks[0].data = spark_values(history.tflops)[0]
        sparks[1].data = spark_values(history.vram)[0]
        width = (self.size.width or self.app.size.width) - 2
        axis.update(spark_axis(history, width))

    def open(self, table_id: str, key: str) -> None:
        self.open_worker(key)
