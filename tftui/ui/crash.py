"""What happens when the console itself fails: one line on stderr, the details in a private log file.

Textual's default is to print a full traceback with local variables (which can hold a DSN or a
token) and to let the program end with status 0, so a wrapper script never noticed. `run` instead
writes the traceback (without locals, control characters escaped) to a new file in the private
per-user folder (`privatefiles`, mode 0600) and prints one line naming the error and that file;
`tftui` then exits 1. Both pass through `redact.scrub`: an error we did not word (a driver quoting
the DSN it refused, a client quoting its URL) may carry a credential, and a log file gets attached
to bug reports.
"""

from __future__ import annotations

import traceback
from datetime import UTC, datetime
from pathlib import Path

from textual.worker import WorkerFailed

from tftui.model.plaintext import visible
from tftui.model.redact import scrub
from tftui.ui.privatefiles import write_new

__all__ = ["CRASH_EXIT", "crash_line", "root_error", "write_crash_log"]

CRASH_EXIT = 1
"""Exit status of a console that stopped on an internal error (2 stays for the user's mistakes)."""
MESSAGE_LIMIT = 300
"""Characters of the error message the one line keeps (the log has all of it)."""


def root_error(error: BaseException) -> BaseException:
    """The error a failed worker carried, else `error` itself."""
    return error.error if isinstance(error, WorkerFailed) else error


def write_crash_log(error: BaseException, folder: Path | None = None, now: datetime | None = None) -> Path:
    """Write the traceback of `error` to a new `console-crash-<time>.log`; return its path.

    Raises `OSError` when the private folder is unusable (the caller says so on its one line).
    """
    when = now or datetime.now(UTC)
    text = "".join(traceback.format_exception(error))
    body = f"tftui console crash at {when.isoformat(timespec='seconds')}\n\n{visible(scrub(text), multiline=True)}"
    return write_new(folder, f"console-crash-{when:%Y%m%d-%H%M%S}", ".log", body)


def crash_line(error: BaseException, log: Path | None, problem: str = "") -> str:
    """`tftui: the console stopped on an internal error: KeyError: 'x'; details in /tmp/…/….log`."""
    cause = root_error(error)
    message = visible(scrub(str(cause)))
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 1] + "…"
    what = type(cause).__name__ + (f": {message}" if message else "")
    where = (
        f"details in {visible(str(log))}"
        if log is not None
        else f"no log written ({visible(scrub(problem))})"
    )
    return f"tftui: the console stopped on an internal error: {what}; {where}"
