"""Benchmark: initial sync of a 5,000-node cluster through the `kubernetes` client (live adapter).

The generated cluster (same shape as bench/state.py: 5,000 nodes × 8 GPUs, 60,000 workers) is seeded
into the in-process test API server (tests/kubeapi); `KubeCluster` then lists every kind over HTTP
into its cache. Compared with loading the same objects from a dump file (`tftui.model.dump.load`:
read + parse + validate). Both are measured in this process, best of `--repeat`. The server is
Python's stdlib HTTP server in the same process, so its JSON encoding competes for the GIL with the
client's decoding: the ratio is an upper bound for a real API server.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.kubeapi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--workers", type=int, default=60000)
    parser.add_argument("--repeat", type=int, default=2, help="runs of each; the best is kept")
    args = parser.parse_args()

    from tests.kubeapi import KubeApiServer, write_kubeconfig
    from tftui.model.dump import dumps, load, validate_items
    from tftui.model.gcpause import gc_paused
    from tftui.sources.kube import KubeCluster
    from tftui.sources.sim.cluster import generate_objects

    objs = generate_objects(nodes=args.nodes, gpus_per_node=args.gpus_per_node, workers=args.workers)
    with tempfile.TemporaryDirectory() as tmp, KubeApiServer() as server:
        server.seed(objs)
        stored = server.objects()  # what the API serves (CRD defaults applied): dump the same
        dump = Path(tmp) / "dump.json"
        dump.write_text(dumps(stored))
        size = dump.stat().st_size / 2**20
        del objs, stored
        kubeconfig = write_kubeconfig(Path(tmp) / "kubeconfig", server.url)

        loads = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            snap = load(dump)
            loads.append(time.perf_counter() - t)
        count = len(snap.objects)
        del snap

        syncs, validated = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            kube = KubeCluster(kubeconfig=str(kubeconfig), request_timeout=600)
            kube.wait_synced(timeout=600)
            syncs.append(time.perf_counter() - t)
            items = kube.snapshot()
            with gc_paused():  # as `dump.loads` does
                validate_items(items)
            validated.append(time.perf_counter() - t)
            assert len(items) == count, (len(items), count)
            kube.close()
            del items

    best_load, best_sync, best_val = min(loads), min(syncs), min(validated)
    print(f"cluster: {args.nodes} nodes, {args.nodes * args.gpus_per_node} GPUs, {args.workers} workers")
    print(f"objects: {count}, dump {size:.0f} MiB")
    print(f"dump load (read+parse+validate)   {best_load:8.2f} s")
    print(f"kube sync (list every kind)       {best_sync:8.2f} s")
    print(f"kube sync + validate snapshot     {best_val:8.2f} s")
    from _timing import ratio  # bench/ is on sys.path when a script runs

    ratio("kube_sync/dump_load", best_sync / best_load)
    ratio("kube_sync_validated/dump_load", best_val / best_load)


if __name__ == "__main__":
    main()
