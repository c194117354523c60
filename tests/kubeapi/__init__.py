"""An in-process Kubernetes API server for tests: the real `kubernetes` client talks HTTP to it."""

from tests.kubeapi.server import Change, Fault, KubeApiServer, Served, write_kubeconfig

__all__ = ["Change", "Fault", "KubeApiServer", "Served", "write_kubeconfig"]
