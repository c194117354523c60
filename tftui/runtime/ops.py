"""The daemon's operations surface: Prometheus metrics, `/healthz`, `/readyz`, `/metrics`.

Metrics use `prometheus_client` (its text exposition format, escaping and histogram buckets) on a
registry of their own, so several daemons can live in one test process. The HTTP server is the
standard library's threading server: three read-only paths need no framework.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, get_args

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from tftui.engine.plan import Action
from tftui.runtime.actuator import ActionStatus

__all__ = ["DaemonMetrics", "OpsServer", "parse_listen"]

DECISION_KINDS = ("compaction", "defrag")
ACTION_TYPES = tuple(t.__name__ for t in get_args(Action))
ACTION_RESULTS = get_args(ActionStatus)
ERROR_PLACES = ("action", "loop", "metrics", "compaction", "defrag")
"""The label values of the daemon's counters (`known_labels` exports each at 0 from the start)."""

Probe = Callable[[], tuple[bool, str]]  # (ok, one-line reason)


class DaemonMetrics:
    """Every metric the daemon exports (names in the README's Daemon section)."""

    def __init__(self) -> None:
        disable_created_metrics()  # `*_created` series are noise for counters that start with the process
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.decisions = Counter(
            "tftui_decisions", "Decisions journaled, by kind (compaction, defrag).", ["kind"], registry=r
        )
        self.actions = Counter(
            "tftui_actions",
            "Plan actions by type and result (applied, dry-run, failed, skipped).",
            ["action", "result"],
            registry=r,
        )
        self.errors = Counter(
            "tftui_errors", "Errors by where they happened (action, loop, metrics).", ["where"], registry=r
        )
        self.loop_duration = Histogram(
            "tftui_loop_duration_seconds",
            "Wall time of one runtime tick (reconciles and autoscale that were due).",
            ["loop"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.nodes_released = Counter(
            "tftui_nodes_released", "Nodes released by compaction, by pool.", ["pool"], registry=r
        )
        self.pods_evicted = Counter(
            "tftui_pods_evicted", "Pods evicted by defrag, by pool.", ["pool"], registry=r
        )
        self.recommendation_changes = Counter(
            "tftui_recommendation_changes",
            "Autoscale recommendations written to a workload's status.",
            registry=r,
        )
        self.leader = Gauge("tftui_leader", "1 while this replica holds the lease and acts.", registry=r)
        self.autoscale_paused = Gauge(
            "tftui_autoscale_paused", "1 while autoscaling is paused (metrics store unreachable).", registry=r
        )
        self.metrics_store_up = Gauge(
            "tftui_metrics_store_up", "1 when the last metrics-store query answered.", registry=r
        )
        self.cache_synced = Gauge("tftui_cache_synced", "1 once every watched kind was listed.", registry=r)
        self.dry_run = Gauge("tftui_dry_run", "1 when the daemon decides and journals only.", registry=r)

    def known_labels(self, pools: Iterable[str] = ()) -> None:
        """Create every series whose labels are known, at 0: a counter that has not counted yet
        must read 0 on /metrics, not be absent (a rate() or an alert over an absent series sees
        nothing, and "no evictions" cannot be told from "not exported")."""
        for kind in DECISION_KINDS:
            self.decisions.labels(kind)
        for action in ACTION_TYPES:
            for result in ACTION_RESULTS:
                self.actions.labels(action, result)
        for where in ERROR_PLACES:
            self.errors.labels(where)
        self.loop_duration.labels("tick")
        for pool in pools:
            self.nodes_released.labels(pool)
            self.pods_evicted.labels(pool)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def parse_listen(text: str) -> tuple[str, int]:
    """`host:port` (`:8080` = all interfaces); ValueError with the flag's name when malformed."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen: expected HOST:PORT (e.g. 0.0.0.0:8080), got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


class OpsServer:
    """Serves `/healthz`, `/readyz` (200 or 503 with the reason) and `/metrics` in a background thread."""

    def __init__(self, listen: str, metrics: DaemonMetrics, health: Probe, ready: Probe) -> None:
        host, port = parse_listen(listen)
        ops = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds: quiet
                pass

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, ops.metrics.exposition(), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/readyz"):
                    ok, reason = (ops.health if path == "/healthz" else ops.ready)()
                    text = ("ok" if ok else "not ok") + (f": {reason}" if reason else "") + "\n"
                    self._send(200 if ok else 503, text.encode(), "text/plain; charset=utf-8")
                else:
                    self._send(404, b"not found: try /healthz, /readyz or /metrics\n", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.metrics = metrics
        self.health = health
        self.ready = ready
        try:
            self._httpd = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise ValueError(f"--listen {listen}: cannot listen: {exc.strerror or exc}") from None
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="ops-http", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
