"""The repository stands alone: code, tests, benchmarks and docs cite only what is in the repository.

A reader with nothing but a checkout must be able to follow every reference, so nothing may point at
the developers' notes kept outside the repository (their file names, section signs, line numbers of
upstream files) or at tracker numbers. Rules are cited by their id in docs/behaviour.md (`C3`), the
architecture by docs/architecture.md. The forbidden patterns are assembled from pieces so that this
file does not match itself.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("tftui", "tests", "bench", "docs", "README.md", "CONTRIBUTING.md")
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}

_SECTION = "\u00a7"
_BEHAVIOUR = "behaviour" + r"\.md"
FORBIDDEN: tuple[tuple[str, re.Pattern[str]], ...] = (
    # the repository's own contract is docs/behaviour.md; a bare name (not a path, not a link
    # target or link text inside docs/) is the outside document of the same name
    ("bare behaviour contract name", re.compile(r"(?<![/\[(\w])" + _BEHAVIOUR)),
    ("outside upstream notes", re.compile(r"\bupstream" + "-(?:engine|model|autoscale)\\b")),
    ("section sign", re.compile(_SECTION)),
    ("upstream file line number", re.compile(r"\bupstream " + r"(?:CC|DF|GA|GR)\b")),
    ("outside design notes", re.compile(r"\bdesign" + r"\.md\b")),
    ("outside shared folder", re.compile(r"(?:\.\./|/work/)" + "shared\\b")),
    ("outside guide", re.compile(r"\btui " + "guide\\b", re.IGNORECASE)),
    ("tracker number", re.compile(r"\bissues? " + r"#?\d+", re.IGNORECASE)),
)


def _files() -> list[Path]:
    out: list[Path] = []
    for name in SCANNED:
        top = ROOT / name
        if top.is_file():
            out.append(top)
            continue
        assert top.is_dir(), f"{top} is missing: the scan list is out of date"
        for path in sorted(top.rglob("*")):
            if path.is_file() and not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts):
                out.append(path)
    return out


def offences(paths: list[Path], root: Path = ROOT) -> list[str]:
    """`file:line: what` for every forbidden reference in the text files among `paths`."""
    found: list[str] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary data cannot cite anything a reader would follow
        for number, line in enumerate(text.splitlines(), start=1):
            for what, pattern in FORBIDDEN:
                if pattern.search(line):
                    found.append(f"{path.relative_to(root)}:{number}: {what}: {line.strip()[:120]}")
    return found


def test_no_reference_leaves_the_repository() -> None:
    paths = _files()
    assert len(paths) > 100, "the scan found almost nothing; is ROOT right?"
    bad = offences(paths)
    assert not bad, "references to documents outside the repository:\n" + "\n".join(bad)


def test_the_patterns_catch_what_they_are_for(tmp_path: Path) -> None:
    """Each pattern fires on a typical outside citation and stays quiet on the repository's own."""
    md = ".md"  # kept apart so that this file does not cite anything itself
    cited = tmp_path / "cited.py"
    lines = [
        f"# see behaviour{md} C1",
        "# upstream-" + "engine " + _SECTION + "6.15",
        "X = 5  # upstream " + "CC L62",
        f'"""As design{md} says."""',
        "# from ../" + "shared/spec",
        "# tui " + "guide",
        "# fixed in issue " + "4",
    ]
    cited.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fine = tmp_path / "fine.md"
    fine.write_text(
        f"See docs/behaviour{md} C1, the [contract](behaviour{md}) and docs/architecture.md.\n"
        "Upstream's compaction subtracts released nodes again each round (C2).\n",
        encoding="utf-8",
    )
    bad = offences([cited, fine], root=tmp_path)
    assert [b.split(":")[1] for b in bad] == ["1", "2", "2", "3", "4", "5", "6", "7"], bad
    assert all(b.startswith("cited.py:") for b in bad), bad
