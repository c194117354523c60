"""`:ns` and `:ctx` for the console app: the namespace scope and a live switch of kubeconfig context.

A context switch connects to the new context in a thread (its cache listed and synced, or one
plain error line and the console stays where it was), then swaps the source under the cluster
lock: the state reader, the runtime and the analyses start over, and a refresh still running on
the old context is dropped when it lands (its data names the old source). The old cache is closed
in the background. The embedded demo and a dump have a single context, and say so.
"""

from __future__ import annotations

import threading
from typing import Any

from textual.message import Message
from textual.worker import get_current_worker

from tftui.model import redact
from tftui.sources.contexts import ContextInfo
from tftui.sources.ports import ClusterPort
from tftui.ui.appbase import ANALYSIS_GROUP, REFRESH_GROUP, ConsoleBase, make_runtime
from tftui.ui.background import in_thread
from tftui.ui.load.autoscale import AutoscaleLoader
from tftui.ui.load.data import StateReader, describe_error
from tftui.ui.render.scope import ALL_NAMESPACES, cluster_namespaces

SWITCH_GROUP = "context"
NS_COMMANDS = frozenset({"ns", "namespace", "namespaces"})
CTX_COMMANDS = frozenset({"ctx", "context", "contexts"})


class ContextSwitched(Message):
    """The new context's cache is synced and now the console's source."""

    def __init__(self, name: str, old: ClusterPort) -> None:
        super().__init__()
        self.name = name
        self.old = old


class ContextFailed(Message):
    def __init__(self, name: str, error: str) -> None:
        super().__init__()
        self.name = name
        self.error = error


def one_context_words(source: str) -> str:
    """What `:ctx` says on a source without kubeconfig contexts."""
    if source == "demo":
        return "one context: the embedded demo cluster (no kubeconfig; nothing to switch to)"
    if source.startswith("dump"):
        return f"one context: {source}, read from a file (no kubeconfig; nothing to switch to)"
    return f"one context: {source} (nothing to switch to)"


class ScopeCommands(ConsoleBase):
    """Mixed into `TfTuiApp`: the `:ns` scope and `:ctx` switching (see the module docstring)."""

    switched: ClusterPort | None = None
    """The source a context switch opened (closed by `run` after the console ends)."""

    @property
    def _app(self) -> ConsoleBase:
        return self

    # -- commands --------------------------------------------------------------------------------

    def run_command(self, command: str) -> bool:
        """A `:` command: `ns [name|all]`, `ctx [name]` or a view name; False when unknown."""
        verb, _, arg = command.strip().partition(" ")
        verb, arg = verb.lower(), arg.strip()
        if verb in NS_COMMANDS and arg:
            self.set_namespace(None if arg in ALL_NAMESPACES else arg)
            return True
        if verb in CTX_COMMANDS and arg:
            self.switch_context(arg)
            return True
        return self._app.switch_view(command.strip().lower())

    def set_namespace(self, namespace: str | None) -> None:
        """Scope every view to `namespace` (None: all); warns when nothing of it is in the cluster."""
        app = self._app
        app.namespace = namespace
        if namespace is None:
            app.notify("all namespaces")
            return
        data = app.data
        if data is not None and namespace not in cluster_namespaces(data.state):
            app.notify(f"namespace {namespace}: no workload or worker in it", severity="warning")
        else:
            app.notify(f"namespace {namespace} (:ns all clears)")

    # -- contexts --------------------------------------------------------------------------------

    def source_contexts(self) -> list[ContextInfo] | None:
        """The source's kubeconfig contexts, or None when it has none (demo, dump, in-cluster)."""
        listing = getattr(self._cluster, "contexts", None)
        if not callable(listing):
            return None
        found: list[ContextInfo] = listing()
        return found or None

    def context_user(self) -> str | None:
        """The kubeconfig user entry of the context in use (a name, scrubbed; never a credential)."""
        user = getattr(self._cluster, "user", None)
        return redact.scrub(user) if isinstance(user, str) and user else None

    def switch_context(self, name: str) -> None:
        app = self._app
        contexts = self.source_contexts()
        if contexts is None:
            app.notify(one_context_words(self._cluster.describe()), severity="warning")
            return
        if name not in {c.name for c in contexts}:
            known = ", ".join(c.name for c in contexts)
            app.notify(f"no context {name!r} in the kubeconfig (have: {known})", severity="warning")
            return
        if name == self._cluster.describe():
            app.notify(f"already on context {name}")
            return
        app.notify(f"connecting to context {name}…")
        app.run_worker(
            in_thread(lambda: self._switch_work(name), name="tftui-context"),
            exclusive=True,
            group=SWITCH_GROUP,
            exit_on_error=False,
            description=f"context {name}",
        )

    def _switch_work(self, name: str) -> None:
        worker = get_current_worker()
        opener: Any = getattr(self._cluster, "with_context", None)
        try:
            new: ClusterPort = opener(name)
        except Exception as exc:  # a source error is one line; anything else is named by type
            self._app.post_message(ContextFailed(name, describe_error(exc)))
            return
        if worker.is_cancelled:
            _close(new)
            return
        with self._cluster_lock:  # no refresh reads while the source changes under it
            old, self._cluster = self._cluster, new
            self._reader = StateReader()
            self._shown_once = False
        self._app.post_message(ContextSwitched(name, old))

    def on_context_switched(self, message: ContextSwitched) -> None:
        app = self._app
        app.workers.cancel_group(app, REFRESH_GROUP)
        app.workers.cancel_group(app, ANALYSIS_GROUP)
        app.runtime = (
            None if self._read_only_requested else make_runtime(self._cluster, self._clock, self._metrics)
        )
        app.read_only = app.runtime is None
        self.switched = self._cluster
        # the metrics source stays (one store for every context, as given at start); what was read
        # from it for the old context does not: its analyses, and the autoscaler's histograms with
        # their "loaded up to" mark (kept, the new context's workloads would get only new rows)
        app.analyses = {}
        app._computing = {}
        app.analyses_from = app.data_seq + 1
        app._autoscale_loader = AutoscaleLoader()
        app.namespace = None  # namespaces are per cluster
        app.source_hint = message.name
        app.cluster_error = None
        app.data = None
        app.switch_view("pools", fresh=True)  # the kept views showed the old cluster
        app.notify(f"context {message.name}")
        threading.Thread(target=_close, args=(message.old,), name="tftui-close", daemon=True).start()
        app.action_refresh()

    def on_context_failed(self, message: ContextFailed) -> None:
        self._app.notify(
            f"context {message.name}: {message.error} (staying on {self._cluster.describe()})",
            severity="error",
            timeout=10,
        )

    def dropped(self, source: str) -> bool:
        """Whether a refresh that read `source` came from a context switched away from."""
        return self.switched is not None and source != self._cluster.describe()


def _close(cluster: object) -> None:
    close = getattr(cluster, "close", None)
    if callable(close):
        close()
