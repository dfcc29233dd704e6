"""helm for the chart tests: the binary ``hack/cluster/build.sh`` caches, and rendering.

Without it the tests fail (never skip), naming the command that builds it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "llmbench-operator"
HELM_VERSION = os.environ.get("LLMBENCH_HELM_VERSION", "v3.22.0")
#: helm prints this for the chart's crds/ symlink on every load; it is not a problem.
SYMLINK_NOTE = "found symbolic link in path"


def helm_binary() -> Path:
    """$HELM, else the cached build; fails naming ``bash hack/cluster/build.sh`` when absent."""
    if os.environ.get("HELM"):
        path = Path(os.environ["HELM"])
        if not os.access(path, os.X_OK):
            pytest.fail(f"HELM={path} is not an executable helm", pytrace=False)
        return path
    cache = Path(os.environ.get("LLMBENCH_CACHE", Path.home() / ".cache" / "llmbench"))
    path = cache / f"helm-{HELM_VERSION}" / "bin" / "helm"
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"helm {HELM_VERSION} is not built ({path} missing): run 'bash hack/cluster/build.sh' "
            "(it builds helm from the Go module proxy next to the cluster binaries)",
            pytrace=False,
        )
    return path


def helm(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Runs helm; the symlink notes are dropped from stderr."""
    r = subprocess.run(
        [str(helm_binary()), *args], capture_output=True, text=True, timeout=timeout
    )
    stderr = "".join(
        line for line in r.stderr.splitlines(keepends=True) if SYMLINK_NOTE not in line
    )
    r = subprocess.CompletedProcess(r.args, r.returncode, r.stdout, stderr)
    if check and r.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({r.returncode}):\n{stderr}")
    return r


def set_args(values: dict[str, Any]) -> list[str]:
    """``--set-json`` for each value (types kept: a list stays a list)."""
    import json

    out: list[str] = []
    for key, value in values.items():
        out += ["--set-json", f"{key}={json.dumps(value)}"]
    return out


def render(
    release: str = "llmbench-operator",
    namespace: str = "llmbench-system",
    chart: Path = CHART,
    **values: Any,
) -> list[dict[str, Any]]:
    """``helm template`` of the chart, parsed (CRDs not included)."""
    out = helm("template", release, str(chart), "--namespace", namespace, *set_args(values))
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]
