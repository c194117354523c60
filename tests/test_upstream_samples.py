"""Acceptance: a dump of TensorFusion's own samples and chart output opens in the console, plans and places.

The dump (`tests/fixtures/upstream_samples.py`) is hand-written YAML as people write it and as `kubectl
get` would list the objects of a fresh installation: every kind of upstream's `config/samples`
(with their empty `spec:` fields and kinds tftui does not read), what the Helm chart installs (the
cluster, its scheduling template, the NVIDIA ProviderConfig, the config ConfigMap whose scheduler
configuration sets maxWorkerPerNode 3 and weights 0.2 / 0.8), and a three-node pool the controller
made of it: a MIG node, a hard node whose capabilities annotation supports only soft, a soft node.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static

from tests.fixtures.upstream_samples import documents
from tftui.cli import main
from tftui.engine.state import ClusterState
from tftui.model.dump import load
from tftui.sources.dumpfile import DumpCluster
from tftui.ui.app import TfTuiApp
from tftui.ui.screens.resource import PoolsScreen, ResourceScreen
from tftui.ui.widgets.table import ResourceTable

NOW = datetime(2026, 1, 6, 12, 0, tzinfo=UTC)
POOL = "tensor-fusion-shared"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    path = tmp_path / "bundle.yaml"
    path.write_text(documents())
    return path


def test_the_dump_is_read_as_the_controller_would(bundle: Path) -> None:
    st = ClusterState.build(load(bundle))
    assert set(st.pools) == {POOL, "gpupool-sample"}
    assert st.providers.vendors == ("Ascend", "MooreThreads", "NVIDIA", "PPU")
    assert (st.scheduler.max_worker_per_node, st.scheduler.vram_weight, st.scheduler.tflops_weight) == (
        3,
        0.2,
        0.8,
    )
    assert set(st.quotas) == {"team-a", "team-b"}
    assert st.nodes["gpu-a"].native_gpu_pods == ["legacy/mig-inference-7d9c"]  # nvidia.com/mig-1g.10gb
    mig = st.gpus["gpu-a-1"]
    assert [u.template for u in mig.partitions] == ["1g.10gb"] and round(mig.allocated.tflops, 2) == 44.57
    assert {w.ref for w in st.warnings} == {"GPUNode gpunode-sample", "GPU gpu-sample"}  # the bare samples


def test_plan_and_place_run_on_the_dump(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--from", str(bundle), "--now", "2026-01-06T12:00:00Z", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert set(plan["pools"]) == {POOL, "gpupool-sample"}

    def place(*args: str) -> dict[str, dict[str, object]]:
        assert main(["place", "--from", str(bundle), "--pool", POOL, "--json", *args]) == 0
        return dict(json.loads(capsys.readouterr().out)["modes"])

    soft = place("--tflops", "10", "--vram", "2Gi")
    assert {m["node"] for m in soft.values()} == {"gpu-c"}  # the only soft node
    hard = place("--tflops", "10", "--vram", "2Gi", "--isolation", "hard")
    assert {m["node"] for m in hard.values()} == {None}
    assert next(iter(hard.values()))["rejected"] == {"isolation-mode": 3, "isolation-unsupported": 1}
    mig = place("--tflops", "0", "--vram", "0", "--partition", "3g.40gb")
    assert {(m["node"], m["partition"]) for m in mig.values()} == {("gpu-a", "3g.40gb")}
    over = place("--tflops", "150", "--vram", "2Gi", "--namespace", "team-b")
    assert {m["reason"] for m in over.values()} == {
        "quota exceeded in namespace team-b for total.max.tflops.request: requested 150, limit 100"
    }
    capped = place("--tflops", "10", "--vram", "2Gi", "--count", "1", "--model", "L4")
    assert {m["node"] for m in capped.values()} == {"gpu-c"}
    assert main(["place", "--from", str(bundle), "--pool", POOL, "--tflops", "10", "--vram", "1Gi"]) == 0
    assert "NodeCompactGPULowLoad" in capsys.readouterr().out


def text_of(app: TfTuiApp, selector: str) -> str:
    """The plain text a Static shows, rendered wide so nothing is cut."""
    content = app.screen.query_one(selector, Static).content
    if isinstance(content, str):
        return content
    console = Console(width=400, record=True, file=io.StringIO(), color_system=None)
    console.print(content)
    return console.export_text()


async def settle(pilot: Pilot[None]) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


async def test_the_console_opens_on_the_dump(bundle: Path) -> None:
    """First load: the pools view; the GPU view shows isolation and partitions, the workloads view
    the namespace quotas, the placement preview runs."""
    app = TfTuiApp(DumpCluster(bundle), None, clock=lambda: NOW, refresh_interval=None)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, PoolsScreen)
        table = app.screen.query_one("#main", ResourceTable)
        assert sorted(table.row_keys) == ["gpupool-sample", POOL]
        await pilot.press("colon", *"gpus", "enter")
        await settle(pilot)
        gpus = app.screen.query_one("#main", ResourceTable)
        assert str(gpus.get_cell("gpu-b-0", "iso")) == "hard"
        assert str(gpus.get_cell("gpu-a-1", "parts")) == "1g.10gb"
        await pilot.press("colon", *"workloads", "enter")
        await settle(pilot)
        assert isinstance(app.screen, ResourceScreen)
        summary = text_of(app, "#quota-summary")
        assert "quota team-a" in summary and "quota team-b" in summary
        assert "60/800 TF req" in summary  # team-a's worker: 60 TFLOPS of 800
        await pilot.press("colon", *"place", "enter")
        await settle(pilot)
        result = text_of(app, "#place-result")
        assert "CompactFirst" in result and "gpu-c" in result and "the placement engine failed" not in result
