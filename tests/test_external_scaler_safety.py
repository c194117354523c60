"""The external scaler cannot be turned into an exfiltration channel.

A workload's spec names the scaler's URL and the Secret with its bearer token; the daemon may read
Secrets. Against real HTTP servers that record every request: only http(s) URLs are called, a
Secret in another namespace than the workload's is refused (Warning event naming the field, never
read, nobody called), redirects are not followed (the token never reaches another URL), and
nothing is called at all in dry-run, by the console, `simulate`/the what-if, on a dump, or by a
daemon started without `--external-scaler`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.autoscale_support import cluster
from tests.fixtures.engine_builders import NOW, build
from tests.kubeapi import KubeApiServer, write_kubeconfig
from tests.test_external_scaler import _demo_with_scaler, _secret, _workloads, ext_spec
from tftui.cli import main
from tftui.daemon import Daemon, DaemonOptions
from tftui.engine.autoscale import AutoscaleState, ExternalRequest, external_requests, plan_autoscale
from tftui.engine.plan import Event
from tftui.model.dump import dumps
from tftui.runtime import whatif
from tftui.runtime.loops import Runtime
from tftui.sources.external_scaler import ask
from tftui.sources.kube import KubeCluster
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.usage import SimMetrics


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Recorder:
    """An HTTP server that records every request (any method) and answers `status`/`headers`/`body`."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b'{"needScaleUp": false, "needScaleDown": false}'
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        outer = self

        class H(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length) if length else b""
                outer.seen.append(Seen(self.command, self.path, dict(self.headers.items()), data))
                self.send_response(outer.status)
                for k, v in outer.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            do_GET = do_POST = do_PUT = do_HEAD = _any

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/recommend"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    r = Recorder()
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
def elsewhere() -> Iterator[Recorder]:
    """A second server: where a hostile scaler redirects to."""
    r = Recorder()
    try:
        yield r
    finally:
        r.close()


def _refused_event(objs: list[dict[str, Any]], field_name: str) -> str:
    """The workload's recommendation when its scaler config is refused; returns the Warning's text."""
    state = build(objs)
    assert external_requests(state, NOW) == []  # never asked
    ap = plan_autoscale(state, AutoscaleState(), NOW)
    assert ap.result is not None
    w = ap.result.workloads["default/w"]
    assert w.reason == "invalid-config" and not w.would_apply
    assert w.detail.startswith(f"external scaler refused: {field_name}: "), w.detail
    assert w.external.startswith(f"refused: {field_name}: ")
    (event,) = [a for a in ap.plan.actions if isinstance(a, Event)]
    assert (event.object, event.type, event.reason) == (
        "TensorFusionWorkload/default/w",
        "Warning",
        "ExternalScalerRefused",
    )
    assert field_name in event.message
    assert not ap.status  # nothing written to the workload from it
    return event.message


# -- schemes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "file:///proc/self/environ",
        "file:///etc/passwd",
        "ftp://127.0.0.1/x",
        "data:text/plain,hello",
        "gopher://127.0.0.1:70/x",
        "127.0.0.1:8080/recommend",  # no scheme
        "http:///recommend",  # no host
        "http://127.0.0.1:port/recommend",  # port not a number
    ],
)
def test_only_http_and_https_urls_are_called(url: str) -> None:
    msg = _refused_event(cluster(spec=ext_spec(url)), "externalScaler.url")
    assert "only http and https" in msg or "no host" in msg or "invalid URL" in msg
    # the call itself refuses too (defence in depth): nothing is opened, nothing read
    answer = ask(ExternalRequest("default/w", url, {"workloadName": "w"}))
    assert answer.error is not None and answer.error.startswith("refused: externalScaler.url: "), answer
    assert "PATH=" not in answer.error and "root:" not in answer.error


def test_credentials_in_a_scaler_url_are_not_shown() -> None:
    objs = cluster(spec=ext_spec("ftp://bob:hunter22@127.0.0.1/x"))
    msg = _refused_event(objs, "externalScaler.url")
    assert "hunter22" not in msg and "ftp://***@127.0.0.1/x" in msg


# -- the Secret's namespace ------------------------------------------------------------------------


def test_a_secret_in_another_namespace_is_refused_and_never_read(recorder: Recorder) -> None:
    ref = {"namespace": "kube-system", "name": "admin-token"}
    msg = _refused_event(
        cluster(spec=ext_spec(recorder.url, apiKeySecretRef=ref)), "externalScaler.apiKeySecretRef.namespace"
    )
    assert "'kube-system' is not the workload's namespace 'default'" in msg
    reads: list[tuple[str, str]] = []

    def reader(ns: str, name: str) -> dict[str, str]:
        reads.append((ns, name))
        return {"token": "stolen"}

    req = ExternalRequest("default/w", recorder.url, {}, ("kube-system", "admin-token"))
    answer = ask(req, secrets=reader)
    assert answer.error is not None
    assert answer.error.startswith("refused: externalScaler.apiKeySecretRef.namespace: 'kube-system'")
    assert reads == [] and recorder.seen == []
    # the workload's own namespace is fine (no namespace given means the workload's)
    own = ExternalRequest("default/w", recorder.url, {}, ("default", "scaler-key"))
    assert ask(own, secrets=reader).error is None
    assert reads == [("default", "scaler-key")]
    assert recorder.seen[-1].headers["Authorization"] == "Bearer stolen"


def test_live_cluster_cross_namespace_secret_gets_a_warning_and_no_request(
    recorder: Recorder, tmp_path: Path
) -> None:
    """On the test API server: the daemon's runtime neither GETs the other namespace's Secret nor
    calls the scaler; the workload gets a Warning event naming the field."""
    sim = ActingSimCluster(nodes=12)
    key = sorted(k for k, o in _workloads(sim).items() if o["spec"].get("replicas"))[0]
    ns, name = key.split("/")
    ref = {"namespace": "kube-system", "name": "admin-token"}
    sim.patch(
        "TensorFusionWorkload", name, {"spec": ext_spec(recorder.url, apiKeySecretRef=ref)}, namespace=ns
    )
    metrics = SimMetrics(sim.snapshot(), sim.seed, now=sim.now() + timedelta(hours=1))
    with KubeApiServer(bookmark_interval=0.2) as server:
        server.seed(sim.snapshot())
        server.seed([_secret("admin-token", {"token": b"cluster-admin"}, "kube-system")])
        kube = KubeCluster(
            kubeconfig=str(write_kubeconfig(tmp_path / "kubeconfig", server.url)), backoff=0.01
        )
        try:
            kube.wait_synced(10)
            rt = Runtime(kube, clock=sim.clock, metrics=metrics, external_scaler=True)
            rt.autoscale_tick()
        finally:
            kube.close()
        assert [k for k in server.stats.requests if "/secrets" in k] == []
        events = [e for e in server.objects("Event") if e["reason"] == "ExternalScalerRefused"]
    assert recorder.seen == []
    assert len(events) == 1 and events[0]["type"] == "Warning"
    assert events[0]["regarding"]["name"] == key
    assert "externalScaler.apiKeySecretRef.namespace: 'kube-system'" in events[0]["note"]
    assert rt.last_autoscale is not None and rt.last_autoscale.result is not None
    assert rt.last_autoscale.result.workloads[key].reason == "invalid-config"


# -- redirects -------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_not_followed_so_the_token_stays_where_it_was_sent(
    recorder: Recorder, elsewhere: Recorder, status: int
) -> None:
    recorder.status = status
    recorder.headers = {"Location": elsewhere.url}
    req = ExternalRequest("default/w", recorder.url, {"workloadName": "w"}, ("default", "scaler-key"))
    answer = ask(req, timeout=5, secrets=lambda ns, name: {"token": "s3cret"})
    assert answer.error == f"returned status {status}: redirects are not followed"
    assert [s.headers.get("Authorization") for s in recorder.seen] == ["Bearer s3cret"]
    assert elsewhere.seen == []  # neither the token nor the body went to the redirect's target


# -- no external call outside the daemon's live, non-dry-run loop ----------------------------------


def _demo(url: str) -> tuple[ActingSimCluster, SimMetrics]:
    sim, _ = _demo_with_scaler(url)
    return sim, SimMetrics(sim.snapshot(), sim.seed, now=sim.now() + timedelta(hours=1))


def _run_daemon(sim: ActingSimCluster, metrics: SimMetrics, *, dry_run: bool, external: bool) -> Daemon:
    options = DaemonOptions(
        dry_run=dry_run,
        listen=None,
        poll=0.0,
        speed=float("inf"),
        stop_at=sim.now() + timedelta(minutes=3),
        external_scaler=external,
    )
    daemon = Daemon(sim, metrics, options, clock=sim.clock, advance=sim.advance)
    assert daemon.run() == 0
    return daemon


@pytest.mark.parametrize(
    ("dry_run", "external", "called"),
    [(False, True, True), (True, True, False), (False, False, False)],
    ids=["external-scaler", "dry-run", "flag-off"],
)
def test_daemon_calls_scalers_only_with_the_flag_and_never_in_dry_run(
    recorder: Recorder, dry_run: bool, external: bool, called: bool
) -> None:
    sim, metrics = _demo(recorder.url)
    daemon = _run_daemon(sim, metrics, dry_run=dry_run, external=external)
    assert daemon.runtime is None  # stopped; the test is about what reached the scaler
    assert bool(recorder.seen) is called, recorder.seen
    if called:
        assert {s.method for s in recorder.seen} == {"POST"}


def test_the_console_runtime_never_calls_a_scaler(recorder: Recorder) -> None:
    """The console's runtime (`--demo --speed`, and any writable source) runs the autoscale loop
    but never calls out, read-only or not."""
    from tftui.ui.app import make_runtime

    sim, metrics = _demo(recorder.url)
    rt = make_runtime(sim, sim.clock, metrics)
    assert isinstance(rt, Runtime)
    rt.run_for(timedelta(minutes=3))
    assert rt.last_autoscale is not None  # the loop ran
    assert recorder.seen == []


def test_simulate_and_the_whatif_on_a_dump_never_call_a_scaler(
    recorder: Recorder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sim, _ = _demo(recorder.url)
    dump = tmp_path / "dump.json"
    dump.write_text(dumps(sim.snapshot()))
    code = main(
        ["simulate", "--from", str(dump), "--policy", "configured+autoscale", "--duration", "1h", "--json"]
    )
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)
    # the console's `:whatif` runs the same comparison in a worker
    cfg = whatif.SimConfig(duration=timedelta(hours=1))
    (result,) = whatif.compare(
        sim.snapshot(), [whatif.parse_policy("CompactFirst+autoscale")], sim.now(), cfg
    )
    assert result.policy == "CompactFirst+autoscale"
    assert recorder.seen == []
