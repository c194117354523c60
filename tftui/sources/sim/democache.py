"""The large generated demo kept on disk between runs of the batch commands.

Generating the 5,000-node demo costs about 6 CPU-s of every `plan`, `report` or `recommend` on it,
reading it back about 1.5. The file is keyed by everything its content depends on — the
generator's arguments, every file of the installed tftui package (its code and data, path and
bytes) and the interpreter's version — so a change to any of them gives another key, never a
stale demo; the content is checked against a digest written with it, and the file is written
whole then renamed, so a crash or a full disk leaves either no file or a complete one. Anything
unexpected (no writable cache directory, a damaged file) means generating, as without a cache.

Where: `$XDG_CACHE_HOME/tftui/demo` (default `~/.cache/tftui/demo`); the newest `KEEP` files are
kept. Demos under `MIN_NODES` are not cached: they generate in about the time the file takes.
What is computed from a cached demo alone may be kept beside it the same way (`load`, `keep`),
under a name that extends the demo's (`demo_key`) and a suffix of its own (`usagecache`: the
autoscaler's history aggregates; `step1cache`: the report's step-1 figures and alert replay), the
newest `KEEP` of each suffix.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import marshal
import os
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Final

__all__ = ["KEEP", "MIN_NODES", "cache_dir", "cached", "cached_as", "demo_key", "keep", "load"]

MIN_NODES: Final = 1000
KEEP: Final = 3
_VERSION: Final = 4  # marshal's format
_DIGEST_SIZE: Final = 32
_SUFFIX: Final = ".demo"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tftui" / "demo"


@functools.cache
def _code_digest() -> str:
    """Every file of the tftui package, path and bytes, and the interpreter's version."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.blake2b(sys.version.encode(), digest_size=_DIGEST_SIZE)
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            h.update(path.relative_to(root).as_posix().encode() + b"\0")
            h.update(path.read_bytes())
    return h.hexdigest()


def _key(inputs: dict[str, Any]) -> str:
    text = json.dumps({"code": _code_digest(), **inputs}, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=_DIGEST_SIZE).hexdigest()


def demo_key(
    *, seed: int, nodes: int, now: datetime, gpus_per_node: int | None = None, workers: int | None = None
) -> str | None:
    """The cache's name for the demo `generate_objects` makes from these arguments with this code
    (None: a demo that small is not cached). What is kept with a demo (`usagecache`) extends it."""
    if nodes < MIN_NODES:
        return None
    inputs = {"seed": seed, "nodes": nodes, "now": now.isoformat(), "gpus_per_node": gpus_per_node,
              "workers": workers}  # fmt: skip
    return _key(inputs)


def cached(
    make: Callable[[], list[dict[str, Any]]],
    *,
    seed: int,
    nodes: int,
    now: datetime,
    gpus_per_node: int | None = None,
    workers: int | None = None,
) -> list[dict[str, Any]]:
    """`make()` — `generate_objects` with these arguments — from the cache when it holds them."""
    return cached_as(
        demo_key(seed=seed, nodes=nodes, now=now, gpus_per_node=gpus_per_node, workers=workers), make
    )


def cached_as(key: str | None, make: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """`make()` from the cache under `key` (`demo_key`'s name for what `make` generates; None: not
    cached) when it holds it."""
    if key is None:
        return make()
    objects = load(key, _SUFFIX)
    if not isinstance(objects, list):
        objects = make()
        keep(key, _SUFFIX, objects)
    return objects


def derived_name(demo: str, seed: int, now: datetime, query: object) -> str:
    """The name of something computed from the cached demo `demo` (its `demo_key`): the demo's name
    extended by everything else the answer depends on — the simulator's seed and clock, the query
    (JSON-encodable), numpy's version and the machine's architecture (numpy computes the sums,
    logarithms and powers, whose last bits may differ between them)."""
    import platform

    import numpy as np

    inputs = {"demo": demo, "seed": seed, "now": now.isoformat(), "query": query,
              "numpy": np.__version__, "machine": platform.machine()}  # fmt: skip
    text = json.dumps(inputs, sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=32).hexdigest()


def load(name: str, suffix: str) -> object | None:
    """The value kept as `name` + `suffix`, or None: absent, damaged or unreadable."""
    return _load(cache_dir() / (name + suffix))


def keep(name: str, suffix: str, value: Any) -> None:
    """Keep `value` (marshal's types) as `name` + `suffix`, with the newest `KEEP` files of that
    suffix; silently nothing when the cache cannot be written."""
    _store(cache_dir() / (name + suffix), value)


def _load(path: Path) -> object | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    digest, payload = data[:_DIGEST_SIZE], memoryview(data)[_DIGEST_SIZE:]
    if hashlib.blake2b(payload, digest_size=_DIGEST_SIZE).digest() != digest:
        return None
    try:
        value = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # the newest used: kept by the pruning
    return value


def _store(path: Path, value: Any) -> None:
    try:
        payload = marshal.dumps(value, _VERSION)
    except ValueError:  # a type marshal does not know: nothing to keep
        return
    digest = hashlib.blake2b(payload, digest_size=_DIGEST_SIZE).digest()
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(digest)
            fh.write(payload)
        os.replace(tmp, path)
        tmp = None
        _prune(path.parent, path.suffix)
    except OSError:
        pass  # no cache then: the next run generates again
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _prune(folder: Path, suffix: str) -> None:
    files = sorted(folder.glob("*" + suffix), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[KEEP:]:
        with contextlib.suppress(OSError):
            old.unlink()
