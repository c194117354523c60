"""`a` on a workload: turn its autoscaling on or off (after a confirmation), on the Workloads view and
the workload detail. The binding's id is `tftui.write.workload_autoscale`, so a read-only console
neither shows nor accepts it; the write itself goes through `TfTuiApp.perform`."""

from __future__ import annotations

from typing import cast

from textual.binding import BindingType

from tftui.ui.actions import bindings
from tftui.ui.host import Host

AUTOSCALE_BINDINGS: list[BindingType] = bindings("workload")


class AutoscaleActions:
    """`a` on whichever workload the screen has selected."""

    def selected_workload(self) -> str | None:
        raise NotImplementedError

    def action_workload_autoscale(self) -> None:
        app = cast(Host, self.app)  # type: ignore[attr-defined]
        key = self.selected_workload()
        if key is None:
            app.notify("no workload selected", severity="warning")
            return
        app.start_workload_autoscale(key)
