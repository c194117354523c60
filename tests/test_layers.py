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


# Inside the console: builders (ui/render) are pure, loaders (ui/load) run off the UI thread. Neither
# imports Textual or the console's widgets and screens; loaders do not import builders either (the
# builders read the loaders' result types, never the other way round).
UI_FORBIDDEN = {
    "render": ("textual", "tftui.ui.app", "tftui.ui.widgets", "tftui.ui.screens", "tftui.cli"),
    "load": (
        "textual",
        "tftui.ui.app",
        "tftui.ui.widgets",
        "tftui.ui.screens",
        "tftui.ui.render",
        "tftui.cli",
    ),
}


def _ui_modules(package: str) -> list[str]:
    return sorted(
        f"tftui.ui.{package}" if f.name == "__init__.py" else f"tftui.ui.{package}.{f.stem}"
        for f in (ROOT / "ui" / package).glob("*.py")
    )


@pytest.mark.parametrize("package", sorted(UI_FORBIDDEN))
def test_console_builders_and_loaders_import_no_widget(package: str) -> None:
    files = sorted((ROOT / "ui" / package).rglob("*.py"))
    assert len(files) > 1, f"ui/{package} has no modules"
    bad = [
        f"{f.relative_to(ROOT.parent)} imports {name}"
        for f in files
        for name in sorted(imports_of(f))
        if any(name == p or name.startswith(p + ".") for p in UI_FORBIDDEN[package])
    ]
    assert bad == []


@pytest.mark.parametrize("package", sorted(UI_FORBIDDEN))
def test_console_builders_and_loaders_load_without_textual(package: str) -> None:
    """Not even through what they import: a builder that reached a widget module for one helper
    would load Textual with it."""
    modules = _ui_modules(package)
    code = (
        f"import sys, {', '.join(modules)}; print(sorted(m for m in sys.modules if m.startswith('textual')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
