"""``spec.artifacts.pvc`` on the project's cluster: a claim the real controller binds to a
hostPath PersistentVolume, the operator's runner Job mounting it on a real node, and the run's
whole folder (laid out as ``llmbench analyze`` lays it out) on the volume, named in
``status.history`` and by ``llmbench results``.

The volume's directory is prepared as an administrator prepares a hostPath volume for a
non-root pod: owned by the runner's uid 65532 (hostPath volumes get no fsGroup ownership), the
claim's ``subPath`` folder included (the kubelet would create it as root).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from llmbench.api.job import SUMMARY_KEY
from llmbench.cli import main
from llmbench.runner.artifacts.layout import GENAI_PERF_JSON, PROFILE_EXPORT
from llmbench.runner.report.html import REPORT_HTML
from llmbench.runner.sweep.analysis import ANALYZE_CSV
from tests.e2e.release import Release
from tests.e2e.test_operator import (  # noqa: F401 - ``operator`` is a fixture
    Target,
    benchmark,
    cond,
    diag,
    operator,
    status,
    wait_phase,
)

pytestmark = pytest.mark.e2e

RUNNER_UID = 65532


def hostpath_pv(name: str, path: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": path, "type": "Directory"},
        },
    }


def claim_for(name: str, namespace: str, pv: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "storageClassName": "",
            "volumeName": pv,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def wait_bound(k8s: Any, namespace: str, claim: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        pvc = k8s.get("pvc", claim, namespace)
        return pvc if pvc and pvc.get("status", {}).get("phase") == "Bound" else None

    return dict(k8s.wait_for(f"PVC {claim} to be Bound", check, 60,
                             diag=lambda: k8s.describe(namespace)))


def test_a_run_writes_its_folder_to_the_claim_and_status_names_it(
    k8s: Any, namespace: str, operator: Release, tmp_path: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    pv, host = f"{namespace}-files", tmp_path / "pv"
    (host / "nightly").mkdir(parents=True)
    for d in (host, host / "nightly"):
        os.chown(d, RUNNER_UID, RUNNER_UID)
    try:
        target = Target(k8s, namespace)
        target.deploy()
        ref = target.ref
        k8s.apply(benchmark(
            "kept", namespace, ref,
            telemetry={"dcgm": "off", "serverMetrics": "off"},
            load={"requestCount": 12, "warmupRequestCount": 0},
            sweep={"type": "concurrency", "values": [1, 2]},
            artifacts={"pvc": {"claimName": "bench-files", "subPath": "nightly"}},
        ))
        # The claim is not there yet: the runner cannot be scheduled, and status says why.
        k8s.wait_for(
            "RunnerScheduled=False naming the claim",
            lambda: "bench-files" in cond(status(k8s, namespace, "kept"),
                                          "RunnerScheduled").get("message", ""),
            60, diag=diag(k8s, namespace, operator),
        )
        k8s.apply([hostpath_pv(pv, str(host)), claim_for("bench-files", namespace, pv)])
        wait_bound(k8s, namespace, "bench-files")
        st = wait_phase(k8s, namespace, "kept", operator, ("Succeeded", "Failed"), 180)
        assert st["phase"] == "Succeeded", json.dumps(st, indent=1)
        folder = host / "nightly" / "kept" / "run-1"
        assert st["history"][-1]["artifacts"] == "pvc/bench-files/nightly/kept/run-1"
        if k8s.local:  # the PV's hostPath is this machine's directory (CI's own cluster)
            cm = k8s.get("configmap", "kept-run-1", namespace)
            assert (folder / ANALYZE_CSV).read_text() == cm["data"][SUMMARY_KEY]
            points = sorted(p for p in folder.iterdir() if (p / GENAI_PERF_JSON).exists())
            assert len(points) == 2, sorted(folder.iterdir())
            for p in points:  # every request's record, which the ConfigMap cannot hold
                export = json.loads((p / PROFILE_EXPORT).read_text())
                assert len(export["experiments"][0]["requests"]) == 12, p
            assert (folder / REPORT_HTML).exists()
        capsys.readouterr()
        code = main(["results", "kept", "-n", namespace, "--kubeconfig", str(k8s.kubeconfig)])
        out = capsys.readouterr().out
        assert code == 0 and "artefacts: pvc/bench-files/nightly/kept/run-1" in out, out
    finally:
        k8s.kubectl("delete", "pv", pv, "--wait=false", check=False)
