"""One screenshot per view and terminal size, against the embedded demo cluster (seed 7, 40 nodes).

Update with `make snapshot-update` (or `pytest tests/snapshots --snapshot-update`) after looking at
`snapshot_report.html`; the SVGs live in the top-level `snapshots/test_screens/`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.snapshots.conftest import SIZES, view
from tftui.ui.app import TfTuiApp

SCREENS: dict[str, Callable[[Pilot[Any]], Awaitable[None]]] = {
    "pools": view("pools"),
    "nodes": view("nodes"),
    "gpus": view("gpus"),
    "workloads": view("workloads"),
    "node": view("nodes", node="inf-l40s-03"),  # 4 GPUs, 7 workers, a native-GPU pod
    "help": view("nodes", "question_mark"),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_view(
    screen: str, size: tuple[int, int], snap_compare: Any, make_app: Callable[[], TfTuiApp]
) -> None:
    assert snap_compare(make_app(), run_before=SCREENS[screen], terminal_size=size)
