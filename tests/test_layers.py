"""Layering rules the package structure relies on."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import grimp

import llmbench.runner

ROOT = Path(__file__).resolve().parents[1]


def test_runner_never_imports_kubernetes_or_kopf() -> None:
    """The runner must run anywhere: a laptop, CI, a pod with no API access."""
    modules = [m.name for m in pkgutil.walk_packages(llmbench.runner.__path__, "llmbench.runner.")]
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(n for n in sys.modules if n.split('.')[0] in "
        "('kopf', 'kubernetes'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
    assert len(modules) > 10


def test_repository_root_is_safe_for_python() -> None:
    """An interpreter started in the repository root imports the standard library, not ours:
    no top-level file or folder is named like a standard-library module."""
    clashes = sorted(
        p.name for p in ROOT.iterdir()
        if p.name.removesuffix(".py") in sys.stdlib_module_names
        and (p.suffix == ".py" or (p / "__init__.py").exists())
    )
    assert clashes == []
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    out = subprocess.run(
        [sys.executable, "-c", "import json, operator, llmbench.operator; "
         "print(operator.add(2, 3), json.dumps(1), llmbench.operator.__name__)"],
        capture_output=True, text=True, check=True, cwd=ROOT, env=env,
    )
    assert out.stdout.split() == ["5", "1", "llmbench.operator"]


def test_import_contracts_hold() -> None:
    """The layers in pyproject's [tool.importlinter] (API model, runner, simulator, CLI)."""
    exe = Path(sys.executable).parent / "lint-imports"
    out = subprocess.run(
        [str(exe), "--no-cache"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_version_imports_no_subcommand() -> None:
    """``llmbench --version`` and the parser import only the subcommand being run."""
    code = (
        "import sys\n"
        "from llmbench.cli import build_parser\n"
        "build_parser(['crd'])\n"
        "heavy = [m for m in ('numpy', 'matplotlib', 'httpx', 'llmbench.runner') "
        "if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of modules (Tarjan): each is an import cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    return found


def test_no_import_cycles() -> None:
    """No two modules import each other, directly or around a loop. Lazy imports inside
    functions count (they were how the old cycles hid), and so do imports needed only for type
    hints: a type-only cycle is still two modules that cannot be understood apart (the
    simulator's server, generation and wire were one; each now declares what it needs of the
    module above as a ``Protocol``)."""
    graph = grimp.build_graph("llmbench", exclude_type_checking_imports=False, cache_dir=None)
    assert _cycles(graph) == []
    # The check itself finds a cycle when there is one.
    graph.add_import(
        importer="llmbench.runner.client.sse", imported="llmbench.runner.point.profile"
    )
    assert _cycles(graph)
