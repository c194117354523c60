"""The console's alerts screen through Textual's pilot: every rule's state (no-data drawn apart from
ok), the selected rule's alerts, and counts that agree between the title, the summary and the table.
The expected states come from the engine's replay (`compute_alerts`) on the same demo."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from rich.text import Text

from tests.ui_metrics_support import alerts as alerts  # a fixture (re-exported for pytest)
from tests.ui_metrics_support import cell, crumbs, make_app, settle, static_text, table
from tftui.engine.alerts import RULES
from tftui.sources.sim.cluster import SimCluster
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.load.analysis import AlertsAnalysis
from tftui.ui.screens.metrics import AlertsScreen
from tftui.ui.widgets.chrome import Breadcrumb


async def test_alerts_view_shows_every_rule_state_and_the_selected_rules_alerts(
    demo: SimCluster, metrics: SimMetrics, alerts: AlertsAnalysis
) -> None:
    history = alerts.history
    states = {s.rule: s for s in history.statuses}
    assert {s.state for s in history.statuses} >= {"firing", "no-data", "ok"}
    app = make_app(demo, metrics)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        assert app.switch_view("alerts")
        await settle(pilot)
        assert isinstance(app.screen, AlertsScreen)
        rules = table(app, "#rules")
        assert sorted(rules.row_keys) == sorted(r.name for r in RULES)  # every rule, always
        order = [states[k].state for k in rules.row_keys]
        assert order == sorted(order, key=["firing", "pending", "no-data", "ok"].index)
        for rule, status in states.items():
            text = cell(rules, rule, "state")
            assert (
                text
                == {"firing": "● firing", "pending": "◐ pending", "no-data": "? no-data", "ok": "✓ ok"}[
                    status.state
                ]
            )
            assert cell(rules, rule, "severity") == status.severity
            if status.state == "no-data":  # why, instead of looking healthy
                assert status.detail.startswith(cell(rules, rule, "detail").rstrip("…"))
        # no-data is drawn differently from ok, not just worded differently
        no_data = next(k for k in rules.row_keys if states[k].state == "no-data")
        ok = next(k for k in rules.row_keys if states[k].state == "ok")
        no_data_cell, ok_cell = rules.get_cell(no_data, "state"), rules.get_cell(ok, "state")
        assert isinstance(no_data_cell, Text) and isinstance(ok_cell, Text)
        assert no_data_cell.style != ok_cell.style

        first = rules.row_keys[0]
        firing = [a for a in history.firing if a.rule == first]
        pending = [a for a in history.pending if a.rule == first]
        assert firing
        instances = table(app, "#instances")
        assert instances.row_keys == [a.fingerprint for a in firing + pending]
        alert = firing[0]
        assert cell(instances, alert.fingerprint, "instance") == alert.instance
        assert alert.summary.startswith(cell(instances, alert.fingerprint, "summary").rstrip("…"))
        assert cell(instances, alert.fingerprint, "fired") == f"{alert.fired_at:%H:%M:%S}"
        since = cell(instances, alert.fingerprint, "since")
        assert since.endswith(("m", "h")) and f"{alert.starts_at:%H:%M}" in since
        assert crumbs(app).startswith(f"alerts › {first} (")
        assert crumbs(app).endswith(f"· {len(firing) + len(pending)} of this rule)")
        summary = static_text(app, "#alerts-summary")
        n_firing = sum(1 for s in history.statuses if s.state == "firing")
        assert f"{n_firing} rules firing ({len(history.firing)} alerts)" in summary
        assert "replayed 1h to 12:00:00 UTC from demo (simulated metrics)" in summary

        # moving to a no-data rule shows why it has no data, and no alerts
        await pilot.press("down", "down", "down")
        await settle(pilot)
        selected = rules.cursor_key
        assert selected is not None and states[selected].state == "no-data"
        assert instances.row_keys == []
        assert f"no data: {states[selected].detail}" in static_text(app, "#alerts-summary")


async def test_alerts_counts_agree_and_every_rule_is_on_screen(
    demo: SimCluster, metrics: SimMetrics, alerts: AlertsAnalysis
) -> None:
    """The title said `(15 rules, 3 alerts)` while the summary said `3 rules firing (83 alerts)`,
    and 11 of the 15 rules showed with empty lines below."""
    history = alerts.history
    firing_rules = sum(1 for s in history.statuses if s.state == "firing")
    app = make_app(demo, metrics)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.switch_view("alerts")
        await settle(pilot)
        rules = table(app, "#rules")
        mine = len(table(app, "#instances").row_keys)
        crumb = str(app.screen.query_one(Breadcrumb).render())
        words = f"{firing_rules} of {len(history.statuses)} rules firing ({len(history.firing)} alerts)"
        assert words in crumb and f"{mine} of this rule" in crumb
        assert f"{firing_rules} rules firing ({len(history.firing)} alerts)" in static_text(
            app, "#alerts-summary"
        )
        assert rules.size.height >= rules.row_count + 1  # header and every rule
