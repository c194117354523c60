"""The one-way imports of docs/architecture.md: model ← engine ← runtime ← front ends; sources never import ui; no circles."""

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


def test_the_generated_demos_plan_imports_no_validator() -> None:
    """`tftui plan` on a cached demo indexes the generated objects as they are: it imports neither
    pydantic nor the object models (`tftui.model.snapshot` holds what it needs of the dump module),
    and `model.snapshot` groups exactly the kinds `model.dump` validates."""
    code = (
        "import sys\n"
        "from tftui.model import dump, snapshot\n"
        "assert snapshot.KIND_NAMES == frozenset(dump.KINDS), 'kinds differ'\n"
        "assert dump.Snapshot is snapshot.Snapshot and dump.DumpError is snapshot.DumpError\n"
        "for m in [m for m in sys.modules if m.startswith(('tftui', 'pydantic'))]:\n"
        "    del sys.modules[m]\n"
        "import tftui.cli, tftui.cli.plan, tftui.engine.planning, tftui.engine.autoscale, tftui.textout\n"
        "import tftui.runtime.history, tftui.sources.sim.cluster, tftui.sources.sim.usagecache\n"
        "print(sorted(m for m in sys.modules if m == 'pydantic' or m.startswith(('pydantic.', 'tftui.model.dump', "
        "'tftui.model.crds', 'tftui.model.core'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


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


def _module_graph() -> dict[str, set[str]]:
    """Every tftui module → the tftui modules it imports (any import: top level, in a function, or
    under TYPE_CHECKING — a deferred import still ties the two modules together)."""
    paths = {}
    for f in ROOT.rglob("*.py"):
        parts = f.relative_to(ROOT.parent).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph: dict[str, set[str]] = {m: set() for m in paths}
    for mod, f in paths.items():
        package = mod.split(".") if f.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                names = [base, *(f"{base}.{a.name}" for a in node.names)]
            graph[mod].update(n for n in names if n in paths and n != mod)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles() -> None:
    """No module reaches itself through imports: a circle makes every module in it load, test and
    change only together (the console's screens receive what they need, never the app class)."""
    assert _cycles(_module_graph()) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
