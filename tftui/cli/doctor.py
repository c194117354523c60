"""`tftui doctor`: the reachability and permission checks (`tftui.doctor`) with the flags' values."""

from __future__ import annotations

import argparse
import os

from tftui.model.plaintext import visible


def cmd_doctor(args: argparse.Namespace) -> int:
    from tftui.doctor import run_doctor
    from tftui.sources.greptime import dsn_from_env

    return run_doctor(
        out=lambda line: print(visible(line)),
        context=args.context,
        kubeconfig=args.kubeconfig,
        metrics_dsn=args.metrics_dsn or dsn_from_env(),
        role=args.role,
        lease_namespace=args.lease_namespace or os.environ.get("POD_NAMESPACE") or "default",
        secret_namespaces=tuple(n.strip() for n in args.secret_namespaces.split(",") if n.strip()),
    )
