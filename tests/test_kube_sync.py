"""The live adapter's first sync (`KubeCluster.wait_synced`) on a slow API server: its timeout is
the longest silence, not the whole list, so a big cluster whose pages keep coming is read, while a
server that stops answering, or a list that never ends, is still one clear error."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kubeapi import Fault, KubeApiServer
from tftui.cli.common import StatusLine
from tftui.sources.kube import KubeCluster
from tftui.sources.ports import SourceError

PAGE = 20
PAGE_DELAY = 0.25  # each page of pods answers this late
TIMEOUT = 1.2  # well above one page's delay, well below the whole list's
SILENCE = 2.5  # the timeout of the syncs that must succeed: a loaded 2-core machine starved the
# in-process test server for over a second once (a page 1.2 s late), so a timeout of 1.2 s failed


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "sync", "labels": {"app": "sync"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


@pytest.fixture
def slow_pods(server: KubeApiServer) -> KubeApiServer:
    """Enough pods for 22 pages, every list request for pods answered `PAGE_DELAY` late."""
    server.seed([pod(f"p{i:03d}") for i in range(440)])
    server.inject(Fault(delay=PAGE_DELAY, method="GET", path="/api/v1/pods", sticky=True))
    return server


@pytest.fixture
def cluster(kubeconfig: Path) -> Iterator[KubeCluster]:
    k = KubeCluster(kubeconfig=str(kubeconfig), backoff=0.01, max_backoff=0.05, page_size=PAGE)
    try:
        yield k
    finally:
        k.close()


def pages_of_pods(server: KubeApiServer) -> int:
    return -(-len(server.objects("Pod")) // PAGE)


def test_a_list_longer_than_the_timeout_syncs_while_its_pages_keep_coming(
    slow_pods: KubeApiServer, cluster: KubeCluster
) -> None:
    assert pages_of_pods(slow_pods) * PAGE_DELAY > 2 * SILENCE  # the whole list outlasts the timeout
    cluster.wait_synced(SILENCE)
    pods = [o for o in cluster.snapshot() if o["kind"] == "Pod"]
    assert len(pods) == len(slow_pods.objects("Pod"))
    assert cluster.listed >= len(slow_pods.objects())


def test_a_server_that_stops_answering_is_still_an_error(server: KubeApiServer, cluster: KubeCluster) -> None:
    server.inject(Fault(delay=4 * TIMEOUT, method="GET", path="/api/v1/pods"))
    with pytest.raises(SourceError, match=rf"no answer listing ([a-z]+, )*pods(, [a-z]+)* for {TIMEOUT:g}s"):
        cluster.wait_synced(TIMEOUT)


def test_a_list_that_never_ends_is_bounded(slow_pods: KubeApiServer, cluster: KubeCluster) -> None:
    # other kinds may still be listing too on a busy machine: the message names every one. The
    # silence allowed is far above a page's delay: on a loaded machine a first page late by more
    # than `TIMEOUT` made this the other error (a silence), which is not what is tested here
    with pytest.raises(
        SourceError, match=r": ([a-z]+, )*pods(, [a-z]+)* still listing after [0-9]+s \([0-9,]+ objects"
    ):
        cluster.wait_synced(4 * TIMEOUT, limit=1.0)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_sync_shows_its_progress_on_a_terminal_and_erases_it(
    slow_pods: KubeApiServer, cluster: KubeCluster
) -> None:
    term, pipe = Terminal(), io.StringIO()
    lines = StatusLine(term), StatusLine(pipe)

    def both(objects: int, synced: int, kinds: int) -> None:
        for line in lines:
            line.synced(objects, synced, kinds)

    cluster.wait_synced(SILENCE, progress=both)
    for line in lines:
        line.clear()
    shown = term.getvalue().split("\r\x1b[K")
    assert shown[0] == "" and shown[-1] == ""  # each update rewrites the line; the end erases it
    counts = [s for s in shown if s]
    assert len(counts) >= 2 and all(s.startswith("tftui: listing the cluster: ") for s in counts)
    assert counts[0] != counts[-1]  # the count moves as pages arrive
    assert pipe.getvalue() == ""  # not a terminal: nothing
