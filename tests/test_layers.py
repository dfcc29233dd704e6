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


def test_operator_folder_does_not_shadow_the_stdlib_module() -> None:
    """``operator/`` is ``llmbench.operator``; ``import operator`` stays Python's own."""
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    out = subprocess.run(
        [sys.executable, "-c", "import operator, llmbench.operator; "
         "print(operator.add(2, 3), llmbench.operator.__name__)"],
        capture_output=True, text=True, check=True, cwd=ROOT, env=env,
    )
    assert out.stdout.split() == ["5", "llmbench.operator"]
