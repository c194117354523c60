"""The one-way imports (docs/architecture.md): model ← engine ← runtime ← front ends; sources never import ui."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "tftui"

FORBIDDEN = {
    "model": ("tftui.engine", "tftui.sources", "tftui.runtime", "tftui.ui", "tftui.cli", "textual"),
    "engine": ("tftui.sources", "tftui.runtime", "tftui.ui", "tftui.cli", "textual"),
    "sources": ("tftui.ui", "tftui.runtime", "tftui.cli", "textual"),
    "runtime": ("tftui.ui", "tftui.cli", "textual"),
}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_point_down(layer: str) -> None:
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files, f"layer {layer} has no modules"
    bad = [
        f"{f.relative_to(ROOT.parent)} imports {name}"
        for f in files
        for name in sorted(imports_of(f))
        if any(name == p or name.startswith(p + ".") for p in FORBIDDEN[layer])
    ]
    assert bad == []


def test_daemon_never_imports_the_console() -> None:
    """`tftui --daemon` runs the runtime without Textual (docs/architecture.md; the process test checks
    sys.modules)."""
    bad = [
        name
        for name in sorted(imports_of(ROOT / "daemon.py"))
        if any(name == p or name.startswith(p + ".") for p in ("tftui.ui", "tftui.cli", "textual"))
    ]
    assert bad == []
    code = (
        "import sys, tftui.daemon, tftui.runtime.leader, tftui.runtime.ops; print('textual' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_engine_and_sources_load_without_textual() -> None:
    code = (
        "import sys, tftui.engine.state, tftui.engine.usage, tftui.sources.sim.cluster, tftui.sources.sim.usage, "
        "tftui.model.dump; print('textual' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
