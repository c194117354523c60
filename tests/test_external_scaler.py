"""The external scaler (docs/behaviour.md A11) against a real HTTP server in a thread, its merge with
the percentile and cron recommenders (A3), and the runtime's autoscale loop calling it."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.autoscale_support import TFK, VK, astate_for, cluster
from tests.fixtures.engine_builders import GI, NOW, build
from tests.kubeapi import Fault, KubeApiServer, write_kubeconfig
from tftui.engine.autoscale import (
    AutoscaleState,
    ExternalAnswer,
    ExternalRequest,
    Resources,
    external_requests,
    plan_autoscale,
)
from tftui.engine.plan import AnnotatePod, PatchWorkloadStatus
from tftui.model.quantity import parse_quantity
from tftui.runtime.loops import Runtime
from tftui.sources import external_scaler
from tftui.sources.external_scaler import ask, ask_all, parse_answer
from tftui.sources.kube import KubeCluster
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.usage import SimMetrics

Handler = Callable[[dict[str, Any], dict[str, str]], tuple[int, bytes]]


class Scaler:
    """A local HTTP scaler: `respond` decides each answer; `seen` keeps (body, headers) of each call."""

    def __init__(self) -> None:
        self.respond: Handler = lambda body, headers: (200, b"{}")
        self.delay = 0.0
        self.seen: list[tuple[dict[str, Any], dict[str, str]]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                headers = {k: v for k, v in self.headers.items()}
                outer.seen.append((body, headers))
                if outer.delay:
                    time.sleep(outer.delay)
                status, payload = outer.respond(body, headers)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (the timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/recommend"

    def answer(self, payload: Any, status: int = 200) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.respond = lambda body, headers: (status, data)


@pytest.fixture
def scaler() -> Iterator[Scaler]:
    s = Scaler()
    s.thread.start()
    try:
        yield s
    finally:
        s.server.shutdown()
        s.server.server_close()


def res(tq: Any, tl: Any, vq: Any, vl: Any) -> dict[str, Any]:
    return {"requests": {"tflops": str(tq), "vram": str(vq)}, "limits": {"tflops": str(tl), "vram": str(vl)}}


UP = {
    "needScaleUp": True,
    "needScaleDown": False,
    "reason": "queue-depth",
    "recommendedResources": res(30, 40, "8Gi", "16Gi"),
}


def ext_spec(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "autoScalingConfig": {
            "autoSetResources": {"enable": True},
            "externalScaler": {"enable": True, "url": url, "initialDelayPeriod": "0s", **extra},
        }
    }


def request(url: str) -> ExternalRequest:
    return ExternalRequest("default/w", url, {"workloadName": "w", "namespace": "default"})


# -- the HTTP call ---------------------------------------------------------------------------------


def test_success_sends_the_upstream_body_and_parses_the_answer(scaler: Scaler) -> None:
    scaler.answer(UP)
    state = build(cluster(spec=ext_spec(scaler.url)))
    reqs = external_requests(state, NOW)
    assert [r.workload for r in reqs] == ["default/w"]
    answers = ask_all(reqs, timeout=5)
    body, headers = scaler.seen[0]
    assert body == {
        "workloadName": "w",
        "namespace": "default",
        "currentResources": {
            "requests": {"tflops": "10", "compute": "0", "vram": "8Gi"},
            "limits": {"tflops": "20", "compute": "0", "vram": "16Gi"},
        },
    }
    assert headers["Content-Type"] == "application/json" and "Authorization" not in headers
    a = answers["default/w"]
    assert a.error is None and a.need_up and not a.need_down and a.reason == "queue-depth"
    assert a.resources == Resources.parse(res(30, 40, "8Gi", "16Gi"))


def test_timeout_is_an_error_answer(scaler: Scaler) -> None:
    scaler.answer(UP)
    scaler.delay = 1.0
    started = time.monotonic()
    a = ask(request(scaler.url), timeout=0.2)
    assert time.monotonic() - started < 0.9
    assert a.error == "no answer within 0.2s"


def test_non_2xx_names_the_status_and_body(scaler: Scaler) -> None:
    scaler.answer(b"model server down", status=500)
    assert ask(request(scaler.url), timeout=5).error == "returned status 500: model server down"
    scaler.answer(b"", status=204)
    assert ask(request(scaler.url), timeout=5).error == "returned status 204"


def test_bad_json_is_an_error_answer(scaler: Scaler) -> None:
    scaler.answer(b"{not json")
    err = ask(request(scaler.url), timeout=5).error
    assert err is not None and err.startswith("response is not JSON: ")


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ([], "response: expected an object, got list"),
        ({"needScaleDown": False}, "response: missing field needScaleUp"),
        (
            {"needScaleUp": "yes", "needScaleDown": False},
            "response.needScaleUp: expected true or false, got 'yes'",
        ),
        ({"needScaleUp": True, "needScaleDown": False}, "response: missing field recommendedResources"),
        (
            {"needScaleUp": True, "needScaleDown": False, "recommendedResources": res("12x", 1, 1, 1)},
            "response.recommendedResources.requests.tflops: invalid quantity '12x'",
        ),
        (
            {"needScaleUp": False, "needScaleDown": False, "reason": 3},
            "response.reason: expected a string, got int",
        ),
    ],
)
def test_malformed_answers(payload: Any, error: str) -> None:
    assert parse_answer(json.dumps(payload).encode()).error == error


def test_unreachable_scaler() -> None:
    a = ask(request("http://127.0.0.1:9/x"), timeout=2)
    assert a.error is not None and a.error.startswith("unreachable: ")


def test_api_key_from_the_secret(scaler: Scaler) -> None:
    scaler.answer({"needScaleUp": False, "needScaleDown": False})
    req = ExternalRequest("default/w", scaler.url, {}, ("default", "scaler-key"))
    assert ask(req, secrets=lambda ns, name: {"token": "s3cret"}).error is None
    assert scaler.seen[-1][1]["Authorization"] == "Bearer s3cret"
    missing = ask(req, secrets=lambda ns, name: {"other": "x"})
    assert missing.error == "apiKeySecretRef default/scaler-key: none of the keys apiKey, token, key"
    assert ask(req).error == "apiKeySecretRef default/scaler-key: this source cannot read Secrets"
    # bytes as a Secret stores them: text is sent, anything else is refused naming the key
    assert ask(req, secrets=lambda ns, name: {"apiKey": b"b-key", "token": b"\xff"}).error is None
    assert scaler.seen[-1][1]["Authorization"] == "Bearer b-key"
    binary = ask(req, secrets=lambda ns, name: {"apiKey": b"\xff\xfe"})
    assert binary.error == "apiKeySecretRef default/scaler-key: key apiKey is not UTF-8 text"
    newline = ask(req, secrets=lambda ns, name: {"token": b"s3cret\n"})
    assert newline.error == "apiKeySecretRef default/scaler-key: key token contains a line break"


# -- the merge (A3, A11) -------------------------------------------------------------------------


def test_no_request_before_the_scalers_initial_delay_or_when_disabled() -> None:
    state = build(cluster(spec=ext_spec("http://x", initialDelayPeriod="1000000h")))
    assert external_requests(state, NOW) == []
    rec = plan_autoscale(state, AutoscaleState(), NOW).result
    assert rec is not None and rec.workloads["default/w"].external.startswith("waiting: Workload created ")
    off = ext_spec("http://x")
    off["autoScalingConfig"]["autoSetResources"]["enable"] = False
    assert external_requests(build(cluster(spec=off)), NOW) == []


def test_a_larger_external_request_wins_and_is_applied() -> None:
    objs = cluster(spec=ext_spec("http://x"))
    ast = astate_for(objs, [(10, 8 * GI)] * 120)  # percentile: about the current request
    answer = ExternalAnswer(True, False, "queue-depth", Resources.parse(res(30, 40, "8Gi", "16Gi")))
    ap = plan_autoscale(build(objs), ast, NOW, external={"default/w": answer})
    assert ap.result is not None
    w = ap.result.workloads["default/w"]
    assert w.would_apply and w.recommendation is not None
    assert w.recommendation.tf_req == parse_quantity("30")
    assert w.condition is not None
    assert w.external == "answered: scale up (queue-depth)"
    patches = [a for a in ap.plan.actions if isinstance(a, AnnotatePod)]
    assert patches and patches[0].annotations[TFK] == "30"
    # the percentile result keeps VRAM (the larger request per resource wins)
    vram = patches[0].annotations.get(VK)
    assert vram is None or parse_quantity(vram) >= parse_quantity("8Gi")


def test_no_scaling_needed_changes_nothing() -> None:
    objs = cluster(spec=ext_spec("http://x"))
    answer = ExternalAnswer(False, False, "steady")
    ap = plan_autoscale(build(objs), AutoscaleState(), NOW, external={"default/w": answer})
    assert ap.result is not None
    w = ap.result.workloads["default/w"]
    assert not w.would_apply and w.condition == ("NoScalingNeeded", "steady")
    assert not [a for a in ap.plan.actions if isinstance(a, AnnotatePod)]


def test_an_error_answer_blocks_the_workload_with_a_reason() -> None:
    objs = cluster(spec=ext_spec("http://x"), tflops=2, tflops_limit=4)
    ast = astate_for(objs, [(8, 8 * GI)] * 120)  # the percentile recommender alone would scale up
    assert plan_autoscale(build(objs), ast, NOW).result.workloads["default/w"].would_apply  # type: ignore[union-attr]
    bad = ExternalAnswer(error="returned status 500: down")
    ap = plan_autoscale(build(objs), ast, NOW, external={"default/w": bad})
    assert ap.result is not None
    w = ap.result.workloads["default/w"]
    assert w.reason == "external-error" and not w.would_apply
    assert w.detail == "external scaler http://x: returned status 500: down; no change this tick"
    assert w.to_json()["external"] == "error: returned status 500: down"
    assert w.estimates is not None  # the usage percentiles are still shown
    assert not [a for a in ap.plan.actions if isinstance(a, AnnotatePod | PatchWorkloadStatus)]


# -- the runtime's loop ----------------------------------------------------------------------------


def _demo_with_scaler(url: str) -> tuple[ActingSimCluster, str]:
    sim = ActingSimCluster(nodes=12)
    key = sorted(k for k, o in _workloads(sim).items() if o["spec"].get("replicas"))[0]
    ns, name = key.split("/")
    sim.patch("TensorFusionWorkload", name, {"spec": ext_spec(url)}, namespace=ns)
    return sim, key


def _workloads(sim: ActingSimCluster) -> dict[str, dict[str, Any]]:
    return {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": o
        for o in sim.snapshot()
        if o.get("kind") == "TensorFusionWorkload"
    }


def test_the_autoscale_loop_asks_the_scaler_and_shows_its_errors(scaler: Scaler) -> None:
    sim, key = _demo_with_scaler(scaler.url)
    ns, name = key.split("/")
    metrics = SimMetrics(sim.snapshot(), sim.seed, now=sim.now() + timedelta(hours=1))
    scaler.answer(b"boom", status=500)
    rt = Runtime(sim, clock=sim.clock, metrics=metrics, external_scaler=True)
    rt.external_timeout = 5
    rt.autoscale_tick()
    assert [b["workloadName"] for b, _ in scaler.seen] == [name]
    assert rt.last_autoscale is not None and rt.last_autoscale.result is not None
    w = rt.last_autoscale.result.workloads[key]
    assert w.reason == "external-error" and "returned status 500: boom" in w.detail
    assert not [
        a
        for a in rt.last_autoscale.actions()
        if isinstance(a, AnnotatePod) and a.namespace == ns and a.name.startswith(name)
    ]
    # the scaler recovers and asks for far more TFLOPS: the workers get it (capped by their GPUs)
    current = _workloads(sim)[key]["spec"]["resources"]
    big = {
        "requests": {"tflops": "1", "vram": current["requests"]["vram"]},
        "limits": dict(current["limits"]),
    }
    big["requests"]["tflops"] = str(parse_quantity(current["requests"]["tflops"]).value() * 2)
    scaler.answer(
        {"needScaleUp": True, "needScaleDown": False, "reason": "burst", "recommendedResources": big}
    )
    sim.advance(timedelta(seconds=30))
    rt.autoscale_tick()
    w = rt.last_autoscale.result.workloads[key]
    assert w.external == "answered: scale up (burst)"
    assert w.would_apply, (w.reason, w.detail)
    status = _workloads(sim)[key]["status"]
    assert status["recommendation"] == w.recommendation.to_json()  # type: ignore[union-attr]
    assert external_scaler.DEFAULT_TIMEOUT == 10.0


# -- a live cluster: the bearer token from a Secret through the API ---------------------------------


def _secret(name: str, data: dict[str, bytes], ns: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "type": "Opaque",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def test_live_cluster_reads_the_api_key_secret_and_reports_its_errors(scaler: Scaler, tmp_path: Path) -> None:
    """The runtime against the test API server: the scaler answers only with the Secret's token; a
    missing, forbidden, keyless or binary Secret blocks the workload with a reason naming it, and no
    worker pod is patched."""
    sim = ActingSimCluster(nodes=12)
    key = sorted(k for k, o in _workloads(sim).items() if o["spec"].get("replicas"))[0]
    ns, name = key.split("/")
    ref = {"name": "scaler-key"}  # no namespace: the workload's
    sim.patch("TensorFusionWorkload", name, {"spec": ext_spec(scaler.url, apiKeySecretRef=ref)}, namespace=ns)
    current = _workloads(sim)[key]["spec"]["resources"]
    big = {"requests": dict(current["requests"]), "limits": dict(current["limits"])}
    big["requests"]["tflops"] = str(parse_quantity(current["requests"]["tflops"]).value() * 2)
    answer = json.dumps(
        {"needScaleUp": True, "needScaleDown": False, "reason": "burst", "recommendedResources": big}
    ).encode()
    scaler.respond = lambda body, headers: (
        (200, answer) if headers.get("Authorization") == "Bearer s3cret" else (401, b"bad token")
    )

    now = [sim.now()]
    metrics = SimMetrics(sim.snapshot(), sim.seed, now=sim.now() + timedelta(hours=1))
    with KubeApiServer(bookmark_interval=0.2) as server:
        server.seed(sim.snapshot())
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url)
        kube = KubeCluster(kubeconfig=str(kubeconfig), backoff=0.01, max_backoff=0.05)
        try:
            kube.wait_synced(10)
            rt = Runtime(kube, clock=lambda: now[0], metrics=metrics, external_scaler=True)
            rt.external_timeout = 5

            def tick(secret: dict[str, Any] | None = None, *faults: Fault) -> tuple[str, str]:
                """One autoscale tick 30 s later; (external, detail) of the workload."""
                if secret is not None:
                    server.seed([secret])
                server.inject(*faults)
                now[0] += timedelta(seconds=30)
                rt.autoscale_tick()
                assert rt.last_autoscale is not None and rt.last_autoscale.result is not None
                w = rt.last_autoscale.result.workloads[key]
                return w.external, w.detail

            def worker_patches() -> int:
                return sum(
                    n
                    for k, n in server.stats.requests.items()
                    if k.startswith(f"PATCH /api/v1/namespaces/{ns}/pods/{name}")
                )

            prefix = f"external scaler {scaler.url}: apiKeySecretRef {ns}/scaler-key: "
            failures = [
                (None, (), "Secret not found"),
                (
                    _secret("scaler-key", {"token": b"s3cret"}, ns),
                    (Fault(status=403, method="GET", path="/secrets/scaler-key"),),
                    "reading the Secret is forbidden (RBAC: get on secrets)",
                ),
                (_secret("scaler-key", {"password": b"x"}, ns), (), "none of the keys apiKey, token, key"),
                (_secret("scaler-key", {"token": b"\xc3\x28"}, ns), (), "key token is not UTF-8 text"),
            ]
            for secret, faults, reason in failures:
                external, detail = tick(secret, *faults)
                assert detail == f"{prefix}{reason}; no change this tick"
                assert external == f"error: apiKeySecretRef {ns}/scaler-key: {reason}"
            assert scaler.seen == [] and worker_patches() == 0  # never called without its key

            external, _ = tick(_secret("scaler-key", {"token": b"s3cret"}, ns))
            assert external == "answered: scale up (burst)"
            assert [h["Authorization"] for _, h in scaler.seen] == ["Bearer s3cret"]
            assert worker_patches() > 0
            want = parse_quantity(big["requests"]["tflops"])
            pods = [
                p
                for p in server.objects("Pod")
                if p["metadata"]["namespace"] == ns and p["metadata"]["name"].startswith(name)
            ]
            assert pods and all(parse_quantity(p["metadata"]["annotations"][TFK]) <= want for p in pods)
            assert any(
                parse_quantity(p["metadata"]["annotations"][TFK])
                > parse_quantity(current["requests"]["tflops"])
                for p in pods
            )
            gets = [k for k in server.stats.requests if "/secrets" in k]
            assert gets == [f"GET /api/v1/namespaces/{ns}/secrets/scaler-key"]  # by name, never listed
        finally:
            kube.close()
