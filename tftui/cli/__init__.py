"""Command line: picks a source and a front end.

`tftui` opens the console on the current kubeconfig context, `--demo` on the embedded simulated
cluster, `--from FILE` on a dump; `tftui dump` writes the objects of any source as a `kubectl`-style
JSON List. User errors exit with status 2 and one line on stderr, never a traceback.

This package keeps `main` and the dispatch; the parser, the shared source helpers and each
subcommand live in their own modules, which import each other directly (never this `__init__`).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import sys
from collections.abc import Sequence
from typing import Final

from tftui.cli.common import EXIT_USAGE as EXIT_USAGE
from tftui.cli.common import UserError as UserError
from tftui.cli.common import default_pool as default_pool
from tftui.cli.common import emit as emit
from tftui.cli.common import metrics_dsn as metrics_dsn
from tftui.cli.common import metrics_timeout
from tftui.cli.common import open_cluster as open_cluster
from tftui.cli.common import open_metrics as open_metrics
from tftui.cli.common import parse_now as parse_now
from tftui.cli.console import cmd_console as cmd_console
from tftui.cli.daemon import cmd_daemon as cmd_daemon
from tftui.cli.doctor import cmd_doctor as cmd_doctor
from tftui.cli.dump import cmd_dump as cmd_dump
from tftui.cli.parser import build_parser as build_parser
from tftui.cli.place import cmd_place as cmd_place
from tftui.cli.plan import cmd_plan as cmd_plan
from tftui.cli.recommend import cmd_recommend as cmd_recommend
from tftui.cli.report import cmd_report as cmd_report
from tftui.cli.simulate import cmd_simulate as cmd_simulate
from tftui.config import ConfigError
from tftui.model.plaintext import visible
from tftui.model.redact import scrub
from tftui.model.snapshot import DumpError
from tftui.sources.ports import SourceError

#: commands that read their source once, print and end: their objects live until the process ends
ONE_SHOT: Final = frozenset({"dump", "place", "plan", "recommend", "report"})


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` names (default: `sys.argv`); returns the exit status."""
    return _run(build_parser().parse_args(argv))


def run() -> None:
    """The `tftui` executable: `main`, and a one-shot command's process then ends at once
    (`os._exit` once stdout and stderr are flushed) instead of tearing down its heap: at 5,000
    nodes, freeing the millions of objects a plan or a report built, and the interpreter's final
    collections over them, cost 4–7 CPU-s after the output was written. Nothing is left to do by
    then: output files are closed, no exit handler of tftui's holds work, and logging is flushed.
    Under a profiler or a tracer (cProfile, coverage) the process exits normally, so they can
    write their results."""
    args = build_parser().parse_args()
    code = _run(args)
    if _one_shot(args) and sys.getprofile() is None and sys.gettrace() is None:
        logging.shutdown()
        with contextlib.suppress(BrokenPipeError):  # the reader went away: as `main` takes it
            sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


def _one_shot(args: argparse.Namespace) -> bool:
    return not args.daemon and args.command in ONE_SHOT


def _run(args: argparse.Namespace) -> int:
    """Dispatch. A one-shot command runs with the cyclic garbage collector off: its objects stay
    alive until it ends, so a collection finds nothing to free and only rescans them (3.7 of a
    5,000-node plan's CPU seconds; the few cycles made meanwhile cost 35 MB of its 0.8 GB peak).
    The console, the daemon and `simulate` run long and keep it."""
    was_enabled = gc.isenabled()
    if _one_shot(args):
        gc.disable()
    try:
        return _dispatch(args)
    except (UserError, DumpError, SourceError, ConfigError) as exc:
        print(f"tftui: {visible(scrub(str(exc)))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    finally:
        gc.unfreeze()  # `_settle`'s freeze ends with the command (main may be called in-process)
        if was_enabled:
            gc.enable()


def _dispatch(args: argparse.Namespace) -> int:
    metrics_timeout(args)  # a bad value ends the command before it reads anything
    if args.daemon:
        return cmd_daemon(args)
    if args.command == "dump":
        return cmd_dump(args)
    if args.command == "place":
        return cmd_place(args)
    if args.command == "plan":
        return cmd_plan(args)
    if args.command == "report":
        return cmd_report(args)
    if args.command == "recommend":
        return cmd_recommend(args)
    if args.command == "doctor":
        return cmd_doctor(args)
    if args.command == "simulate":
        return cmd_simulate(args)
    return cmd_console(args)
