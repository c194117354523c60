"""`tftui place`: where a GPU request would land in a pool, and why the other nodes refuse it."""

from __future__ import annotations

import argparse

from tftui.cli.common import UserError, _state, default_pool, emit, open_cluster


def cmd_place(args: argparse.Namespace) -> int:
    from tftui.engine.fit import Request, RequestError
    from tftui.engine.placement import preview
    from tftui.model.quantity import QuantityError, quantity_float
    from tftui.textout import render_preview

    def qty(flag: str, value: str) -> float:
        try:
            return quantity_float(value)
        except QuantityError as exc:
            raise UserError(f"{flag}: {exc}") from None

    try:
        request = Request(
            vram=qty("--vram", args.vram),
            tflops=qty("--tflops", args.tflops) if args.tflops is not None else None,
            compute_percent=args.compute,
            count=args.count,
            model=args.model,
            vendor=args.vendor,
            isolation=args.isolation or ("partitioned" if args.partition else "soft"),
            partition=args.partition,
            namespace=args.namespace,
        )
    except RequestError as exc:
        raise UserError(f"request: {exc}") from None
    state = _state(open_cluster(args, acting=False))
    pv = preview(state, default_pool(state, args.pool), request)
    emit(pv.dumps() if args.json else render_preview(pv), json_text=args.json)
    return 0
