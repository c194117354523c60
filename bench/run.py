"""Run every benchmark in bench/ and print the ratio lines they report, as one table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).parent
    rows: list[tuple[str, str]] = []
    for script in sorted(here.glob("*.py")):
        if script.name == "run.py" or script.name.startswith("_"):
            continue
        print(f"== {script.name}", flush=True)
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
        print(proc.stdout, end="")
        if proc.returncode != 0:
            print(proc.stderr, end="", file=sys.stderr)
            rows.append((script.name, f"FAILED (exit {proc.returncode})"))
            continue
        rows.extend(
            (script.name, line.removeprefix("RATIO ").strip())
            for line in proc.stdout.splitlines()
            if line.startswith("RATIO ")
        )
    print("\nbenchmark        ratio")
    for name, line in rows:
        print(f"{name:16} {line}")
    return 1 if any("FAILED" in r for _, r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
