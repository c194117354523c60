"""`tftui dump`: the objects of any source as a `kubectl`-style JSON List."""

from __future__ import annotations

import argparse

from tftui.cli.common import UserError, emit, open_cluster
from tftui.model.plaintext import json_visible


def cmd_dump(args: argparse.Namespace) -> int:
    from tftui.model.dump import dumps, validate_items  # here: the other commands need no pydantic

    cluster = open_cluster(args, acting=False)
    snap = validate_items(cluster.snapshot(), cluster.describe())
    text = json_visible(dumps(snap.objects))  # the same JSON values, no raw control character
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise UserError(f"{args.output}: cannot write: {exc.strerror or exc}") from None
    else:
        emit(text, json_text=True)
    return 0
