"""``bash hack/demo.sh``: the one-command demo runs end to end on real nodes (the operator and
the runner in containers of the built image on ``containerd://`` nodes, the target behind a
Service), and a failing step names itself and the fix and tears down what it started."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "hack" / "demo.sh"


def run_demo(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(DEMO), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_the_demo_runs_a_sweep_through_the_chart_and_cleans_up(tmp_path: Path) -> None:
    where = tmp_path / "demo"
    try:
        done = run_demo("--quick", "--dir", str(where))
        out = done.stdout + done.stderr
        assert done.returncode == 0, out[-4000:]
        assert "== operator (Helm chart)" in out
        assert "Succeeded" in out and "3/3" in out
        assert "Config Name,Concurrency,ISL" in out  # the summary CSV from status
        assert "gpu0" in out and "gpu1" in out  # the target pod's two GPUs, and only those
        assert "gpu2" not in out
        assert "== knee" in out and "max OTT under SLO" in out
        assert "gpu-node-a   containerd://" in out  # the nodes' runtime
        assert "llmbench-operator-" in out and "demo-run-1-" in out  # pods, in containers
        folder = where / "artifacts" / "demo" / "run-1"  # spec.artifacts.pvc
        assert "artefacts (spec.artifacts.pvc" in out and str(folder) in out
        assert (folder / "report.html").is_file() and (folder / "analyze_export_genai_perf.csv"
                                                        ).is_file(), sorted(folder.iterdir())
    finally:
        down = run_demo("--down", "--dir", str(where), timeout=120)
    assert down.returncode == 0, down.stderr
    status = subprocess.run(["bash", str(ROOT / "hack/cluster/status.sh"), "--dir", str(where)],
                            capture_output=True, text=True, timeout=60)
    assert "running: nothing" in status.stdout, status.stdout


def test_a_failing_step_names_itself_and_the_fix(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cluster's directory should go")
    done = run_demo("--quick", "--dir", str(blocked), timeout=300)
    assert done.returncode != 0
    assert "demo: step 'control plane' failed; fix: bash hack/cluster/down.sh" in done.stderr
    assert "tearing down" in done.stderr
