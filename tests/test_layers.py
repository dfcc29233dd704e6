"""Layering rules the package structure relies on."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

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
