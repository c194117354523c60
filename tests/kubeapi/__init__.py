"""An in-process Kubernetes API server for tests: the real `kubernetes` client talks HTTP to it."""

from tests.kubeapi.server import Fault, KubeApiServer, write_kubeconfig

__all__ = ["Fault", "KubeApiServer", "write_kubeconfig"]
