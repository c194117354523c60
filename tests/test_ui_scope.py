"""k9s scoping in the console: `:ns` (namespace scope on every view), `/!text`, `/-l selector`,
`:ctx` (kubeconfig contexts, switched live against two test API servers) and the header's context
and user."""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.pilot import Pilot
from textual.widgets import Label, Static

from tests.kubeapi import KubeApiServer
from tests.waiting import type_text, wait_until
from tftui.engine.state import ClusterState
from tftui.sources.kube import KubeCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster, generate_objects
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.app import TfTuiApp
from tftui.ui.load.analysis import AUTOSCALE
from tftui.ui.load.autoscale import AutoscaleAnalysis
from tftui.ui.render import scope as scope_module
from tftui.ui.render.scope import Narrowing, SelectorError, parse_filter, parse_selector, scoped
from tftui.ui.render.views import Column, Row, Table
from tftui.ui.screens.resource import NodesScreen, PoolsScreen, WorkloadsScreen
from tftui.ui.screens.scopes import ContextsScreen, NamespacesScreen
from tftui.ui.widgets.chrome import Breadcrumb
from tftui.ui.widgets.table import ResourceTable


def make_app(cluster: Any, metrics: Any = None, **kw: Any) -> TfTuiApp:
    return TfTuiApp(cluster, metrics, clock=lambda: DEFAULT_NOW, refresh_interval=None, **kw)


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def keys(app: TfTuiApp) -> list[str]:
    return [str(k) for k in app.screen.query_one("#main", ResourceTable).row_keys]


def crumb(app: TfTuiApp) -> str:
    return str(app.screen.query_one(Breadcrumb).content)


async def command(pilot: Pilot[None], text: str) -> None:
    await pilot.press("colon", *text, "enter")
    await settle(pilot)


async def filter_rows(pilot: Pilot[None], text: str) -> None:
    await pilot.press("slash")
    await type_text(pilot, text)
    await pilot.press("enter")
    await settle(pilot)


# -- the filter language ----------------------------------------------------------------------------


def test_selector_parses_equality_set_and_existence_requirements() -> None:
    reqs = parse_selector("app=web, tier!=batch,env in (prod, stage),gpu,!legacy,x==y")
    labels = {"app": "web", "tier": "serve", "env": "prod", "gpu": "", "x": "y"}
    assert [r.op for r in reqs] == ["=", "!=", "in", "exists", "!exists", "="]
    assert all(r.matches(labels) for r in reqs)
    assert not reqs[0].matches({"app": "db"})
    assert reqs[1].matches({})  # != holds for an object without the label (Kubernetes semantics)
    assert not reqs[4].matches({"legacy": "1"})


@pytest.mark.parametrize("bad", ["", "app=(", "=web", "app=a b", "a,,b", "app in (x", "bad key=1"])
def test_a_bad_selector_is_one_line_naming_it(bad: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_selector(bad)
    assert "\n" not in str(err.value) and "label selector" in str(err.value)
    assert parse_filter(f"-l {bad}").error is not None


def test_filter_forms() -> None:
    assert parse_filter("!Speech").inverse and parse_filter("!Speech").text == "speech"
    assert parse_filter("-l app=web").selector is not None
    assert parse_filter("speech").text == "speech" and not parse_filter("speech").inverse


def _worker_rows(cluster: SimCluster) -> tuple[ClusterState, tuple[Row, ...]]:
    state = ClusterState.build(cluster.snapshot())
    rows = tuple(
        Row(k, {"name": k}, " ".join([k, w.pool or "", w.namespace]).lower())
        for k, w in state.workers.items()
    )
    return state, rows


def test_a_filter_typed_key_by_key_keeps_exactly_the_rows_of_a_scan_of_every_row(small: SimCluster) -> None:
    """`Narrowing` scans the last result when the filter only narrows it; whatever is typed, deleted
    or switched (inverse, a selector, another namespace, a new build), it keeps what `scoped` over
    every row keeps, in the same order."""
    state, rows = _worker_rows(small)
    builds = [Table((Column("name", "NAME", 20),), rows), Table((Column("name", "NAME", 20),), rows[::2])]
    namespaces = [None, *sorted({w.namespace for w in state.workers.values()})[:2]]
    words = [
        "",
        "d",
        "de",
        "demo-",
        "demo-i",
        "inf",
        "infer",
        "!de",
        "!inf",
        "-l app=web",
        "-l =",
        "train",
        "rain",
    ]

    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(
            st.tuples(st.sampled_from(words), st.sampled_from(namespaces), st.sampled_from([0, 1])),
            max_size=12,
        )
    )
    def typed(steps: list[tuple[str, str | None, int]]) -> None:
        narrowing = Narrowing()
        for needle, namespace, build in steps:
            table, row_filter = builds[build], parse_filter(needle)
            want = scoped(table, state, "Pod", row_filter, namespace)
            if namespace is None and row_filter.selector is None and row_filter.error is None:
                text, inverse = row_filter.text, row_filter.inverse  # the text scan, written plainly
                plain = [r.key for r in table.rows if not text or (text in r.search) != inverse]
                assert [r.key for r in want.rows] == plain
            got = narrowing.scoped("main", table, state, "Pod", row_filter, namespace)
            assert [r.key for r in got.rows] == [r.key for r in want.rows], (needle, namespace, build)

    typed()


def test_a_key_that_narrows_the_filter_scans_the_rows_it_kept_and_a_backspace_every_row(
    small: SimCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, rows = _worker_rows(small)
    table = Table((Column("name", "NAME", 20),), rows)
    scanned: list[int] = []
    real = scope_module.scoped

    def counting(source: Table, *args: Any) -> Table:
        scanned.append(len(source.rows))
        return real(source, *args)

    monkeypatch.setattr(scope_module, "scoped", counting)
    narrowing = Narrowing()
    kept = narrowing.scoped("main", table, state, "Pod", parse_filter("infer"), None)
    assert 0 < len(kept.rows) < len(rows)
    narrowing.scoped("main", table, state, "Pod", parse_filter("inference"), None)
    narrowing.scoped("main", table, state, "Pod", parse_filter("infer"), None)
    assert scanned == [len(rows), len(kept.rows), len(rows)]


# -- pilot: the demo ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small() -> SimCluster:
    return SimCluster(seed=7, nodes=40, now=DEFAULT_NOW)


async def test_ns_lists_namespaces_and_enter_scopes_every_view(small: SimCluster) -> None:
    app = make_app(small)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await command(pilot, "ns")
        assert isinstance(app.screen, NamespacesScreen)
        listed = keys(app)
        assert "speech" in listed and "ml-eval" in listed
        table = app.screen.query_one("#main", ResourceTable)
        while table.cursor_key != "speech":
            await pilot.press("down")
        await pilot.press("enter")
        await settle(pilot)
        assert app.namespace == "speech"
        assert isinstance(app.screen, WorkloadsScreen)
        rows = keys(app)
        assert rows and all(k.startswith("speech/") for k in rows)
        assert "ns speech" in crumb(app)
        assert not app.screen.query_one("#quota-summary").display  # the quota is ml-eval's
        state = app.data.state if app.data is not None else None
        assert state is not None
        await command(pilot, "nodes")
        assert isinstance(app.screen, NodesScreen)
        scoped_nodes = set(keys(app))
        hosting = {w.node for w in state.workers.values() if w.namespace == "speech" and w.node}
        assert scoped_nodes == hosting and scoped_nodes < set(state.nodes)
        assert "ns speech" in crumb(app)
        await command(pilot, "ns all")
        assert app.namespace is None
        assert set(keys(app)) == set(state.nodes)
        assert "ns " not in crumb(app)


async def test_zero_on_the_namespaces_view_clears_the_scope(small: SimCluster) -> None:
    app = make_app(small)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await command(pilot, "ns vision")
        assert app.namespace == "vision"
        assert keys(app) == [k for k in keys(app) if k in app.data.state.pools]  # type: ignore[union-attr]
        await command(pilot, "ns")
        current = app.screen.query_one("#main", ResourceTable).get_cell("vision", "current")
        assert str(current) == "*"
        await pilot.press("0")
        await settle(pilot)
        assert app.namespace is None


async def test_inverse_and_label_filters_and_a_bad_selector(small: SimCluster) -> None:
    app = make_app(small)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await command(pilot, "workloads")
        everything = keys(app)
        await filter_rows(pilot, "!speech")
        inverse = keys(app)
        assert inverse and not any("speech" in k for k in inverse)
        assert len(inverse) == len(everything) - sum("speech" in k for k in everything)
        await pilot.press("escape")
        await settle(pilot)
        await filter_rows(pilot, "-l app.kubernetes.io/name=e5-large-embed")
        named = keys(app)
        assert named and {k.split("/")[1] for k in named} == {"e5-large-embed"}
        assert len(named) < len(everything)
        await pilot.press("escape")
        await settle(pilot)
        await filter_rows(pilot, "-l tensor-fusion.ai/gpupool!=demo-inference")
        rest = keys(app)
        assert rest and all(app.data.state.workloads[k].pool != "demo-inference" for k in rest)  # type: ignore[union-attr]
        await pilot.press("escape")
        await settle(pilot)
        await filter_rows(pilot, "-l app=(")
        assert isinstance(app.screen, WorkloadsScreen)  # no crash
        assert keys(app) == everything  # a bad selector filters nothing
        line = crumb(app)
        assert "label selector 'app=('" in line and "filtering nothing" in line


async def test_ctx_on_the_demo_says_there_is_one_context(small: SimCluster) -> None:
    app = make_app(small)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await command(pilot, "ctx")
        assert isinstance(app.screen, ContextsScreen)
        assert keys(app) == ["demo"]
        note = str(app.screen.query_one("#ctx-note", Static).content)
        assert note.startswith("one context: the embedded demo cluster")
        await command(pilot, "ctx other")
        assert app._cluster is small  # nothing switched
        assert isinstance(app.screen, ContextsScreen)


# -- live: two contexts of one kubeconfig, two API servers -------------------------------------------

TOKEN_A = "token-alpha-0123456789"
TOKEN_B = "token-bravo-9876543210"


@pytest.fixture
def second() -> Iterator[KubeApiServer]:
    srv = KubeApiServer(bookmark_interval=0.2).start()
    srv.seed(generate_objects(seed=3, nodes=12))
    try:
        yield srv
    finally:
        srv.stop()


def two_contexts(path: Path, first: str, other: str) -> Path:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "east", "cluster": {"server": first}},
            {"name": "west", "cluster": {"server": other}},
        ],
        "users": [
            {"name": "alice", "user": {"token": TOKEN_A}},
            {"name": "bob", "user": {"token": TOKEN_B}},
        ],
        "contexts": [
            {"name": "prod-east", "context": {"cluster": "east", "user": "alice"}},
            {"name": "Lab-West", "context": {"cluster": "west", "user": "bob", "namespace": "speech"}},
        ],
        "current-context": "prod-east",
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def header_text(app: TfTuiApp) -> str:
    return " ".join(str(label.content) for label in app.screen.query("ConsoleHeader Label").results(Label))


async def test_ctx_switches_the_live_source_and_the_header_names_context_and_user(
    server: KubeApiServer, second: KubeApiServer, tmp_path: Path
) -> None:
    kc = two_contexts(tmp_path / "kubeconfig", server.url, second.url)
    kube = KubeCluster(kubeconfig=str(kc), retries=2, backoff=0.01, max_backoff=0.05, request_timeout=3)
    kube.wait_synced(10)
    first_pools = {o["metadata"]["name"] for o in generate_objects() if o["kind"] == "GPUPool"}
    second_nodes = {
        o["metadata"]["name"] for o in generate_objects(seed=3, nodes=12) if o["kind"] == "GPUNode"
    }
    app = make_app(kube)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: app.data is not None and isinstance(app.screen, PoolsScreen))
            await settle(pilot)
            assert set(keys(app)) == first_pools
            header = header_text(app)
            assert "prod-east" in header and "user alice" in header
            await command(pilot, "ctx")
            assert isinstance(app.screen, ContextsScreen)
            assert keys(app) == ["Lab-West", "prod-east"]
            table = app.screen.query_one("#main", ResourceTable)
            assert str(table.get_cell("prod-east", "current")) == "*"
            assert str(table.get_cell("Lab-West", "user")) == "bob"
            while table.cursor_key != "Lab-West":
                await pilot.press("down")
            await pilot.press("enter")
            await wait_until(
                pilot, lambda: app.data is not None and app.data.source == "Lab-West", timeout=15
            )
            await settle(pilot)
            assert isinstance(app.screen, PoolsScreen)
            assert set(app.data.state.nodes) == second_nodes  # type: ignore[union-attr]
            assert app._cluster is not kube and app.switched is app._cluster
            header = header_text(app)
            assert "Lab-West" in header and "user bob" in header
            for text in (header, crumb(app)):
                assert TOKEN_A not in text and TOKEN_B not in text
            # a context that does not exist: one line, the console stays
            await command(pilot, "ctx nowhere")
            assert app.data is not None and app.data.source == "Lab-West"
    finally:
        kube.close()
        if app.switched is not None:
            app.switched.close()  # type: ignore[attr-defined]


async def test_ctx_keeps_the_metrics_source_and_reloads_the_autoscale_history(
    server: KubeApiServer, second: KubeApiServer, tmp_path: Path
) -> None:
    """The store given at start serves the new context too; what was read from it for the old
    context's workloads (the autoscaler's histograms, "loaded up to now") starts over."""
    kc = two_contexts(tmp_path / "kubeconfig", server.url, second.url)
    kube = KubeCluster(kubeconfig=str(kc), retries=2, backoff=0.01, max_backoff=0.05, request_timeout=3)
    kube.wait_synced(10)
    # one store for both contexts: it holds the usage of the second one's workers
    metrics = SimMetrics(generate_objects(seed=3, nodes=12), seed=3, now=DEFAULT_NOW)
    app = make_app(kube, metrics)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: app.data is not None and not app.data.pending)
            await settle(pilot)
            source = app.data.metrics_source  # type: ignore[union-attr]
            assert source
            app.request_analysis(AUTOSCALE)
            await wait_until(pilot, lambda: (AUTOSCALE, "") in app.analyses)
            first = app.analyses[(AUTOSCALE, "")].value
            assert isinstance(first, AutoscaleAnalysis) and first.rows > 0
            await command(pilot, "ctx Lab-West")
            await wait_until(
                pilot,
                lambda: app.data is not None and app.data.source == "Lab-West" and not app.data.pending,
                timeout=15,
            )
            await settle(pilot)
            data = app.data
            assert data is not None
            assert app._metrics is metrics and data.metrics_source == source
            assert app.runtime is not None
            used = [u for u in data.usage.nodes.values() if u.has_data]
            assert used  # the store's usage meets the new context's nodes
            app.request_analysis(AUTOSCALE)
            await wait_until(
                pilot,
                lambda: (AUTOSCALE, "") in app.analyses and app.analyses[(AUTOSCALE, "")].seq == app.data_seq,
            )
            after = app.analyses[(AUTOSCALE, "")]
            assert after.error is None and isinstance(after.value, AutoscaleAnalysis)
            # the whole window again, not "nothing new since the old context's load"
            assert after.value.rows > 0
            assert set(after.value.result.workloads) <= set(data.state.workloads)
    finally:
        kube.close()
        if app.switched is not None:
            app.switched.close()  # type: ignore[attr-defined]
