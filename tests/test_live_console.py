"""The console on a live cluster: `TfTuiApp` over `KubeCluster` against the in-process API server.

Writes go through the real client and are checked through the API (plain HTTP GETs), as an operator
running `kubectl get` next to the console would see them.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Label

from tests.greptime_dialect import DialectServer
from tests.kubeapi import Fault, KubeApiServer, write_kubeconfig
from tests.test_refresh_reuse import _stored_but_refused
from tests.waiting import wait_until
from tftui.sources.greptime import GreptimeMetrics
from tftui.sources.kube import KubeCluster
from tftui.sources.sim.cluster import generate_objects
from tftui.ui.app import TfTuiApp
from tftui.ui.screens.modals import ConfirmScreen, ModeScreen, WarningsScreen
from tftui.ui.screens.resource import PoolsScreen, WorkloadsScreen
from tftui.ui.widgets.table import ResourceTable

ANNOTATION = "tensor-fusion.ai/manual-compaction"
DEMO = generate_objects()


@pytest.fixture
def kube(kubeconfig: Path) -> Iterator[KubeCluster]:
    k = KubeCluster(kubeconfig=str(kubeconfig), retries=2, backoff=0.01, max_backoff=0.05, request_timeout=3)
    k.wait_synced(10)
    try:
        yield k
    finally:
        k.close()


def api_get(server_url: str, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{server_url}{path}", timeout=5) as resp:
        doc: dict[str, Any] = json.loads(resp.read())
        return doc


def pool_annotations(url: str, pool: str) -> dict[str, str]:
    doc = api_get(url, f"/apis/tensor-fusion.ai/v1/gpupools/{pool}")
    return dict(doc["metadata"].get("annotations") or {})


def template_mode(url: str, name: str) -> str:
    doc = api_get(url, f"/apis/tensor-fusion.ai/v1/schedulingconfigtemplates/{name}")
    return str(doc["spec"]["placement"]["mode"])


async def loaded(pilot: Pilot[None]) -> TfTuiApp:
    app = pilot.app
    assert isinstance(app, TfTuiApp)
    await wait_until(pilot, lambda: app.data is not None and isinstance(app.screen, PoolsScreen))
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    return app


async def select_pool(pilot: Pilot[None], pool: str) -> None:
    table = pilot.app.screen.query_one("#main", ResourceTable)
    while table.cursor_key != pool:
        await pilot.press("down")


def header_status(app: TfTuiApp) -> str:
    return str(app.screen.query_one("#header-status", Label).content)


def bindings(app: TfTuiApp) -> set[str]:
    return {b.binding.action for b in app.screen.active_bindings.values()}


async def test_manual_compaction_writes_the_annotation_within_a_second(
    server: KubeApiServer, kube: KubeCluster
) -> None:
    app = TfTuiApp(kube, None, refresh_interval=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        await select_pool(pilot, "demo-dev")
        assert ANNOTATION not in pool_annotations(server.url, "demo-dev")
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("tab", "enter")
        took = await wait_until(pilot, lambda: ANNOTATION in pool_annotations(server.url, "demo-dev"))
        assert took < 1.0
        stamp = pool_annotations(server.url, "demo-dev")[ANNOTATION]
        assert datetime.fromisoformat(stamp.replace("Z", "+00:00"))  # RFC 3339 (C5)
        await app.workers.wait_for_complete()


async def test_read_only_offers_no_write_key(server: KubeApiServer, kube: KubeCluster) -> None:
    app = TfTuiApp(kube, None, refresh_interval=None, read_only=True)
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        active = {
            b.binding.action for b in app.screen.active_bindings.values() if app.allows(b.binding.action)
        }
        assert "place" in active
        assert "manual_compaction" not in active and "placement_mode" not in active
        await pilot.press("c", "m")
        await pilot.pause(0.2)
        assert isinstance(app.screen, PoolsScreen)  # no dialog opened
        assert app.perform("placement_mode", pool="demo-dev", mode="CompactFirst") is False
    assert ANNOTATION not in pool_annotations(server.url, "demo-dev")
    assert template_mode(server.url, "dev-spread") == "LowLoadFirst"


async def test_mode_key_patches_the_template(server: KubeApiServer, kube: KubeCluster) -> None:
    app = TfTuiApp(kube, None, refresh_interval=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        await select_pool(pilot, "demo-dev")
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ModeScreen))
        dialog = app.screen
        assert app.focused is not None and app.focused.id == "mode-cancel"
        body = dialog.query_one("#mode-body")
        await pilot.press("tab")  # the first other mode: CompactFirst
        text = str(body.render())
        assert "placement mode LowLoadFirst → CompactFirst in SchedulingConfigTemplate dev-spread" in text
        assert "running workloads stay where they are" in text
        await pilot.press("enter")
        await wait_until(pilot, lambda: template_mode(server.url, "dev-spread") == "CompactFirst", 2)
        await app.workers.wait_for_complete()
        await wait_until(
            pilot,
            lambda: (
                app.data is not None and app.data.state.pools["demo-dev"].placement_mode == "CompactFirst"
            ),
        )


async def test_mode_dialog_cancel_changes_nothing(server: KubeApiServer, kube: KubeCluster) -> None:
    app = TfTuiApp(kube, None, refresh_interval=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        await select_pool(pilot, "demo-dev")
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ModeScreen))
        await pilot.press("enter")  # on the focused Cancel
        await wait_until(pilot, lambda: isinstance(app.screen, PoolsScreen))
        await app.workers.wait_for_complete()
    assert template_mode(server.url, "dev-spread") == "LowLoadFirst"


async def test_lost_connection_shows_disconnected_and_recovers(
    server: KubeApiServer, kube: KubeCluster
) -> None:
    app = TfTuiApp(kube, None, refresh_interval=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        before = app.data
        assert before is not None
        port = int(server.url.rsplit(":", 1)[1])
        server.stop()
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: app.cluster_error is not None)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.cluster_error is not None and app.cluster_error.startswith("disconnected")
        assert "cluster: disconnected" in header_status(app)
        assert app.data is before  # the last good state stays on screen
        assert app.screen.query_one("#main", ResourceTable).row_count == len(before.state.pools)

        server.start(port)
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: app.cluster_error is None)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.data is not before
        assert "disconnected" not in header_status(app)


async def test_mode_key_on_the_embedded_cluster() -> None:
    from tftui.sources.sim.acting import ActingSimCluster
    from tftui.sources.sim.cluster import DEFAULT_NOW

    cluster = ActingSimCluster(seed=7, nodes=40, now=DEFAULT_NOW)
    app = TfTuiApp(cluster, None, clock=lambda: DEFAULT_NOW, refresh_interval=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        await select_pool(pilot, "demo-training")  # CompactFirst, template training-compact
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ModeScreen))
        await pilot.press("tab", "tab", "enter")  # the second other mode: NodeCompactGPULowLoad
        await wait_until(
            pilot,
            lambda: (
                app.data is not None
                and app.data.state.pools["demo-training"].placement_mode == "NodeCompactGPULowLoad"
            ),
        )
    tpl = next(
        o
        for o in cluster.snapshot()
        if o["kind"] == "SchedulingConfigTemplate" and o["metadata"]["name"] == "training-compact"
    )
    assert tpl["spec"]["placement"]["mode"] == "NodeCompactGPULowLoad"


async def test_mode_key_refuses_a_pool_without_template(server: KubeApiServer, kube: KubeCluster) -> None:
    app = TfTuiApp(kube, None, refresh_interval=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        req = urllib.request.Request(
            f"{server.url}/apis/tensor-fusion.ai/v1/gpupools/demo-dev",
            data=json.dumps({"spec": {"schedulingConfigTemplate": None}}).encode(),
            headers={"Content-Type": "application/merge-patch+json"},
            method="PATCH",
        )
        urllib.request.urlopen(req, timeout=5).close()
        await wait_until(
            pilot,
            lambda: (
                not any(
                    o["kind"] == "GPUPool"
                    and o["metadata"]["name"] == "demo-dev"
                    and o["spec"].get("schedulingConfigTemplate")
                    for o in kube.snapshot()
                )
            ),
        )
        await pilot.press("ctrl+r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await select_pool(pilot, "demo-dev")
        await pilot.press("m")
        await pilot.pause(0.1)
        assert isinstance(app.screen, PoolsScreen)
        notes = [n.message for n in app._notifications]
        assert any("spec.schedulingConfigTemplate is not set" in n for n in notes), notes


def workload_autoscale(url: str, key: str) -> Any:
    ns, name = key.split("/")
    doc = api_get(url, f"/apis/tensor-fusion.ai/v1/namespaces/{ns}/tensorfusionworkloads/{name}")
    return ((doc["spec"].get("autoScalingConfig") or {}).get("autoSetResources") or {}).get("enable")


def autoscale_off_workload() -> str:
    """A demo workload with an object, autoscaling off and no autoscale pod annotation."""
    for o in DEMO:
        if o.get("kind") != "TensorFusionWorkload":
            continue
        asr = (o["spec"].get("autoScalingConfig") or {}).get("autoSetResources") or {}
        if not asr.get("enable") and not o["spec"].get("workloadProfile"):
            return f"{o['metadata']['namespace']}/{o['metadata']['name']}"
    raise AssertionError("the demo has no workload with autoscaling off")


async def open_workloads_at(pilot: Pilot[None], app: TfTuiApp, key: str) -> None:
    assert app.switch_view("workloads")
    await wait_until(pilot, lambda: isinstance(app.screen, WorkloadsScreen))
    await pilot.pause()
    table = app.screen.query_one("#main", ResourceTable)
    await wait_until(pilot, lambda: table.row_count > 0)
    table.move_cursor(row=table.get_row_index(key))
    await pilot.pause()
    assert table.cursor_key == key


async def test_a_write_shows_in_the_refresh_after_it_though_the_watch_lags(
    server: KubeApiServer, kube: KubeCluster
) -> None:
    """The console reads the watch cache, which lags the API server's answer: the write waits (in
    its thread) until the cache shows it, so the refresh after it never shows the state before."""
    key = autoscale_off_workload()
    app = TfTuiApp(kube, None, refresh_interval=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        await open_workloads_at(pilot, app, key)
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        server.inject(Fault(delay=1.0, method="GET", path="tensorfusionworkloads"))
        server.drop_watches()  # the workloads' watch comes back a second late
        await pilot.press("tab", "enter")
        await wait_until(pilot, lambda: workload_autoscale(server.url, key) is True, 5)

        def shown() -> object:
            if app.data is None:
                return None
            spec = (app.data.state.workloads[key].obj or {}).get("spec") or {}
            return spec.get("autoScalingConfig", {}).get("autoSetResources", {}).get("enable")

        # no automatic refresh here: the one the write started is the only one that can show it
        await wait_until(pilot, lambda: shown() is True, 10)


async def test_autoscale_key_patches_the_workload_spec(server: KubeApiServer, kube: KubeCluster) -> None:
    key = autoscale_off_workload()
    assert not workload_autoscale(server.url, key)
    app = TfTuiApp(kube, None, refresh_interval=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        await open_workloads_at(pilot, app, key)
        assert "workload_autoscale" in bindings(app)
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.focused is not None and app.focused.id == "confirm-cancel"
        body = str(app.screen.query_one("#confirm-body").render())
        assert 'tensor-fusion.ai/autoscale: "true"' in body
        assert '{"spec": {"autoScalingConfig": {"autoSetResources": {"enable": true}}}}' in body
        await pilot.press("tab", "enter")
        await wait_until(pilot, lambda: workload_autoscale(server.url, key) is True, 3)
        await app.workers.wait_for_complete()
        # and back off: the dialog now offers the opposite
        await wait_until(pilot, lambda: isinstance(app.screen, WorkloadsScreen))
        await wait_until(
            pilot,
            lambda: (
                app.data is not None
                and ((app.data.state.workloads[key].obj or {}).get("spec") or {})
                .get("autoScalingConfig", {})
                .get("autoSetResources", {})
                .get("enable")
                is True
            ),
        )
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert 'tensor-fusion.ai/autoscale: "false"' in str(app.screen.query_one("#confirm-body").render())
        await pilot.press("tab", "enter")
        await wait_until(pilot, lambda: workload_autoscale(server.url, key) is False, 3)
        await app.workers.wait_for_complete()


async def test_read_only_offers_no_autoscale_key(server: KubeApiServer, kube: KubeCluster) -> None:
    key = autoscale_off_workload()
    app = TfTuiApp(kube, None, refresh_interval=None, read_only=True)
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        await open_workloads_at(pilot, app, key)
        active = {
            b.binding.action for b in app.screen.active_bindings.values() if app.allows(b.binding.action)
        }
        assert "workload_autoscale" not in active
        await pilot.press("a")
        await pilot.pause(0.2)
        assert isinstance(app.screen, WorkloadsScreen)  # no dialog opened
        assert app.perform("workload_autoscale", pool=key, enable=True) is False
    assert not workload_autoscale(server.url, key)


async def test_a_write_is_not_held_by_a_metrics_store_that_does_not_answer(
    server: KubeApiServer, kube: KubeCluster, dialect_server: DialectServer
) -> None:
    """A refresh waits on the metrics store's latest samples outside the cluster lock: a write made
    meanwhile goes through at once. It used to wait for the whole refresh, so for as long as the
    store took (before there was a query limit, for good)."""
    dialect_server.create_database("slow_store", "greptime_timestamp")
    with GreptimeMetrics(dialect_server.dsn("slow_store"), connect_timeout=3, query_timeout=30) as metrics:
        app = TfTuiApp(kube, metrics, refresh_interval=None)
        app._latest_reader.wait = 60  # the refresh waits on the store (not only `LATEST_WAIT`)
        async with app.run_test(size=(160, 50)) as pilot:
            await loaded(pilot)
            with dialect_server.stall("tf_gpu_usage") as stall:
                app.action_refresh()
                await wait_until(pilot, stall.entered.is_set)  # the refresh waits on the store
                assert app.perform("placement_mode", pool="demo-dev", mode="CompactFirst")
                await wait_until(pilot, lambda: template_mode(server.url, "dev-spread") == "CompactFirst")
                assert not stall.released.is_set() and app._refreshing()  # while the store still holds
            await app.workers.wait_for_complete()


async def test_a_slow_store_delays_no_refresh_and_the_header_says_so(
    server: KubeApiServer, kube: KubeCluster, dialect_server: DialectServer
) -> None:
    """The refresh waits on the store's latest samples at most `LATEST_WAIT`: past it, the new state
    is shown (here a placement mode written meanwhile) with the samples read last, the header says
    the store is slow, and the next refresh after the store answers shows its samples again."""
    dialect_server.create_database("slow_refresh", "greptime_timestamp")
    with GreptimeMetrics(dialect_server.dsn("slow_refresh"), connect_timeout=3, query_timeout=30) as metrics:
        app = TfTuiApp(kube, metrics, refresh_interval=None)
        async with app.run_test(size=(160, 50)) as pilot:
            await loaded(pilot)
            assert app.data is not None and app.data.metrics_late is None
            seq = app.data_seq
            with dialect_server.stall("tf_gpu_usage") as stall:
                assert app.perform("placement_mode", pool="demo-dev", mode="CompactFirst")
                await wait_until(pilot, lambda: template_mode(server.url, "dev-spread") == "CompactFirst")
                app.action_refresh()
                await wait_until(pilot, stall.entered.is_set)
                await wait_until(
                    pilot,
                    lambda: app.data_seq > seq and app.data is not None and app.data.metrics_late is not None,
                )
                assert not stall.released.is_set()  # shown while the store still holds the read
                data = app.data
                assert data is not None and data.metrics_late is not None and data.metrics_late.shown_at
                assert data.state.pools["demo-dev"].placement_mode == "CompactFirst"  # the new state
                status = header_status(app)
                assert "slow, no answer since" in status and "showing the samples of" in status, status
            await wait_until(pilot, stall.released.is_set)
            seq = app.data_seq
            app.action_refresh()  # takes the answer the store gave meanwhile
            await wait_until(pilot, lambda: app.data_seq > seq and not app._refreshing(), timeout=15)
            assert app.data is not None and app.data.metrics_late is None
            assert "slow" not in header_status(app)
            await app.workers.wait_for_complete()


async def test_an_object_the_api_stored_but_our_schema_refuses_is_a_warning(tmp_path: Path) -> None:
    """A live cluster holding values its CRDs allow and our schema refuses (a GPU capacity `1e999`,
    a pool's `lastDefragTime` in year 1): the console opens on the pools as the daemon sees them and
    lists each object and field among the warnings; before, every refresh failed on the first."""
    objs = _stored_but_refused(generate_objects())
    gpu = next(o for o in objs if o["kind"] == "GPU")
    pool = next(o for o in objs if o["kind"] == "GPUPool")
    srv = KubeApiServer(bookmark_interval=0.2).start()
    try:
        srv.seed(objs)
        kube = KubeCluster(
            kubeconfig=str(write_kubeconfig(tmp_path / "kubeconfig", srv.url)), request_timeout=3
        )
        kube.wait_synced(10)
        app = TfTuiApp(kube, None, refresh_interval=None, read_only=True)
        async with app.run_test(size=(160, 50)) as pilot:
            await loaded(pilot)
            assert app.cluster_error is None, app.cluster_error
            table = app.screen.query_one("#main", ResourceTable)
            assert set(table.row_keys) == {o["metadata"]["name"] for o in objs if o["kind"] == "GPUPool"}
            await pilot.press("w")
            await wait_until(pilot, lambda: isinstance(app.screen, WarningsScreen))
            listed = str(app.screen.query_one("#warnings-list").render())
            assert f"GPU {gpu['metadata']['name']}: status.capacity.tflops" in listed
            assert f"GPUPool {pool['metadata']['name']}: status.lastDefragTime" in listed
            assert "kept as stored" in listed
        kube.close()
    finally:
        srv.stop()
