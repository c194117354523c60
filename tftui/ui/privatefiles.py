"""Files the console writes on the operator's host (CSV exports, crash logs), safe on shared hosts.

The shared temp folder is writable by every user: a fixed name there can be pre-created as a
symlink to a file of the victim's (the write then truncates it) or as a folder the attacker can read.
So the console writes only into a private folder and never follows or overwrites anything:

- the default folder is `<tmp>/tftui-<uid>` (`tempfile.gettempdir()`: `$TMPDIR`, else `/tmp`),
  created with mode 0700; if it already exists it must be a real folder (not a symlink) owned by the
  user, and its mode is tightened to 0700 (an existing folder that fails this is refused, naming it);
- a folder the user configured (`export_dir`) is created 0700 when missing and used as it is;
- each file is written to a hidden file created with `O_CREAT | O_EXCL | O_NOFOLLOW` relative to
  the folder's descriptor, mode 0600, then hard-linked under its name (a link never replaces a
  name): an existing name, symlink or not, is never opened or replaced, and the file appears whole;
  the next free name (`name-2.csv`, `name-3.csv`, …) is taken instead, so two exports in the same
  second both land;
- names are made of `[A-Za-z0-9._-]` only (an object name cannot add a path, a NUL or a control).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import tempfile
from pathlib import Path
from typing import Final

__all__ = ["MAX_TRIES", "PrivateFileError", "default_folder", "private_folder", "safe_name", "write_new"]

MAX_TRIES: Final = 1000
"""Names tried (`name.csv`, `name-2.csv`, …) before giving up on a folder full of them."""
_UNSAFE_NAME: Final = re.compile(r"[^A-Za-z0-9._-]+")


class PrivateFileError(OSError):
    """The folder is not safe to write in, or no free name was found (one line, names the path)."""


def default_folder(uid: int | None = None) -> Path:
    """`<tmp>/tftui-<uid>`: per user, so users never share (or race for) one folder."""
    return Path(tempfile.gettempdir()) / f"tftui-{os.getuid() if uid is None else uid}"


def safe_name(text: str) -> str:
    """`text` as a file name: runs of other characters become `_`, no leading dot, never empty."""
    name = _UNSAFE_NAME.sub("_", text).lstrip(".")
    return name[:120] or "tftui"


def private_folder(folder: Path | None = None, *, uid: int | None = None) -> int:
    """Open the folder files go to (created 0700 if missing) and return its descriptor.

    `folder=None` is the default per-user folder, which must be the user's own real folder; a
    configured folder is only created if missing. `uid` is the user's id (tests pass another).
    """
    strict = folder is None
    owner = os.getuid() if uid is None else uid
    path = default_folder(owner) if folder is None else folder
    try:
        if strict:
            with contextlib.suppress(FileExistsError):  # checked below, whoever made it
                os.mkdir(path, 0o700)
        else:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (os.O_NOFOLLOW if strict else 0)
        fd = os.open(path, flags)
    except OSError as exc:
        if strict and os.path.islink(path):
            raise PrivateFileError(f"{path} is a symlink, not a private folder: remove it") from None
        raise PrivateFileError(f"{path}: {exc.strerror or exc}") from None
    if not strict:
        return fd
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISDIR(st.st_mode):
        problem = "is not a folder"
    elif st.st_uid != owner:
        problem = f"belongs to uid {st.st_uid}, not to you (uid {owner})"
    if problem is not None:
        os.close(fd)
        raise PrivateFileError(f"{path} {problem}: remove it or set export_dir in the config")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.fchmod(fd, 0o700)  # ours, but readable by others (made by an older tftui, or by hand)
    return fd


def write_new(folder: Path | None, stem: str, suffix: str, data: str, *, uid: int | None = None) -> Path:
    """Write `data` to a new file `<stem><suffix>` (or `<stem>-N<suffix>`) in the private folder.

    The file appears whole: `data` is written to a hidden file of its own first, which is then
    linked under the free name (a link never replaces an existing name) and removed. A reader
    watching the folder (or the end-to-end test) never sees it empty or half written, and a failed
    write leaves nothing behind. Returns the path written. Raises `PrivateFileError` (an `OSError`)
    when the folder is unsafe or no name is free, `OSError` when the write itself fails; an existing
    file is never touched.
    """
    stem = safe_name(stem)
    path = default_folder(os.getuid() if uid is None else uid) if folder is None else folder
    dir_fd = private_folder(folder, uid=uid)
    try:
        staged = _staged(dir_fd, stem, suffix, data)
        try:
            for n in range(1, MAX_TRIES + 1):
                name = f"{stem}{suffix}" if n == 1 else f"{stem}-{n}{suffix}"
                try:
                    os.link(staged, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
                except FileExistsError:
                    continue
                return path / name
        finally:
            os.unlink(staged, dir_fd=dir_fd)
        raise PrivateFileError(f"{path}: no free name for {stem}{suffix} after {MAX_TRIES} tries")
    finally:
        os.close(dir_fd)


def _staged(dir_fd: int, stem: str, suffix: str, data: str) -> str:
    """`data` written whole to a new hidden file in the folder (created as the exports are: never an
    existing name, never through a symlink, mode 0600); its name. Removed again if the write fails."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(MAX_TRIES):
        name = f".{stem}{suffix}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                fh.write(data)
        except BaseException:
            os.unlink(name, dir_fd=dir_fd)
            raise
        return name
    raise PrivateFileError(f"no free name to stage {stem}{suffix}")
