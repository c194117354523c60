"""Run every benchmark in bench/ and print the figures they report (`RATIO` lines) as one table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _timing import parse_ratio


def main() -> int:
    here = Path(__file__).parent
    rows: list[tuple[str, str, str, str, str]] = []
    failed = False
    for script in sorted(here.glob("*.py")):
        if script.name == "run.py" or script.name.startswith("_"):
            continue
        print(f"== {script.name}", flush=True)
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
        print(proc.stdout, end="", flush=True)
        if proc.returncode != 0:
            print(proc.stderr, end="", file=sys.stderr)
            rows.append((script.name, "-", "-", "-", f"FAILED (exit {proc.returncode})"))
            failed = True
            continue
        for line in proc.stdout.splitlines():
            r = parse_ratio(line)
            if r is None:
                continue
            goal = "-" if r.goal is None else f"{r.direction} {r.goal:g}"
            met = {None: "-", True: "yes", False: "NO"}[r.met]
            rows.append((script.name, r.name, f"{r.value:.4g}", goal, met))
    heads = ("script", "figure", "value", "goal", "met?")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    print()
    for row in (heads, *rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
