"""Release gating on the project's cluster: a benchmark with ``trigger.onTargetChange`` follows
a rolling update of the target Deployment's arguments with exactly one run, no spec change,
its verdict names the change, and the gate of ``examples/rollout-gate/`` reads it.

The Argo Rollouts ``AnalysisTemplate``'s Job script (the one in the example file, its
``{{args.*}}`` filled in as Argo fills them) runs here with the real kubectl against the real
benchmark, so its exit code is the analysis result Argo would record; the Flagger query's
selector is evaluated on the operator's real ``/metrics`` samples.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import KUBECTL
from tests.e2e.release import OPERATOR_NS, Release, installed
from tests.e2e.test_operator import (
    Target,
    benchmark,
    cond,
    diag,
    roll_out_sim,
    status,
)
from tests.e2e.test_schedule import VALID_TRIES, finished_run, stays_at
from tests.shipped_examples import EXAMPLES

pytestmark = pytest.mark.e2e

NAME = "gate"
GATE = EXAMPLES / "rollout-gate"
RESYNC_S = 2
METRICS_PORT = 9090


@pytest.fixture(scope="module")
def operator(crd_installed: Any) -> Iterator[Release]:
    """The chart's operator with a fast resync (the trigger looks at the target each resync)
    and its ``/metrics`` on."""
    yield from installed(crd_installed, name="gate", resyncSeconds=RESYNC_S,
                         **{"metrics.port": METRICS_PORT})


def example(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((GATE / name).read_text()) if d]


def gate_script(benchmark_name: str, namespace: str, timeout: int = 150,
                unknown: str = "pass") -> str:
    """The AnalysisTemplate's Job command, its arguments substituted as Argo Rollouts does."""
    (template, *_rbac) = example("analysistemplate.yaml")
    assert template["kind"] == "AnalysisTemplate"
    job = template["spec"]["metrics"][0]["provider"]["job"]["spec"]
    (container,) = job["template"]["spec"]["containers"]
    assert container["command"] == ["sh", "-c"]
    script = str(container["args"][0])
    declared = {a["name"] for a in template["spec"]["args"]}
    values = {"benchmark": benchmark_name, "namespace": namespace, "timeout": timeout,
              "unknown": unknown}
    assert declared == set(values)
    for key, value in values.items():
        script = script.replace("{{args." + key + "}}", str(value))
    assert "{{" not in script
    return script


def run_gate(k8s: Any, tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    """The gate Job's container, here: ``sh -c`` with kubectl on PATH, the cluster's
    kubeconfig in place of the Job's ServiceAccount token."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    kubectl = bin_dir / "kubectl"
    if not kubectl.exists():
        kubectl.symlink_to(shutil.which(KUBECTL) or KUBECTL)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
           "KUBECONFIG": str(k8s.kubeconfig)}
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True,
                          timeout=200, check=False)


def rollout(k8s: Any, target: Target, ttft: str) -> None:
    """A rolling update of the simulator with another TTFT (the Deployment's default
    strategy: old and new pods are Ready together for a moment)."""
    roll_out_sim(k8s, target, ttft, 120)


def regressed_gauge(k8s: Any, op: Release, namespace: str) -> float | None:
    """What ``llmbench_regressed{benchmark_namespace=..., benchmark="gate"}`` selects."""
    (pod,) = k8s.pods(OPERATOR_NS, op.selector)
    url = f"http://{pod['status']['podIP']}:{METRICS_PORT}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if (s.name == "llmbench_regressed" and s.labels.get("benchmark") == NAME
                    and s.labels.get("benchmark_namespace") == namespace):
                return float(s.value)
    return None


def test_a_rollout_of_the_target_starts_exactly_one_run_and_the_gate_reads_its_verdict(
    k8s: Any, namespace: str, operator: Release, tmp_path: Path
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    spec: dict[str, Any] = {
        "telemetry": {"dcgm": "off", "serverMetrics": "auto"},
        "sweep": {"type": "concurrency", "values": [1, 2]},
        "trigger": {"onTargetChange": True},
        # only a several-fold slowdown counts: this shared machine's noise must not
        "baseline": {"tolerances": {"ttftP99": "+200%"}},
    }
    # a valid first run (the loaded machine's loop lag can mark one invalid: a spec change,
    # which starts the next, at most VALID_TRIES)
    st: dict[str, Any] = {}
    for count in range(8, 8 + VALID_TRIES):
        k8s.apply(benchmark(NAME, namespace, target.ref,
                            load={"requestCount": count, "warmupRequestCount": 0}, **spec))
        run = (st.get("run") or 0) + 1
        st = finished_run(k8s, namespace, NAME, operator, run)
        if cond(st, "MeasurementValid").get("status") == "True":
            break
    good = st["run"]
    assert cond(st, "MeasurementValid")["status"] == "True", cond(st, "MeasurementValid")
    assert st["targetDigest"]  # what the next look compares with
    # the first run of these settings is judged by nothing: the gate lets Unknown pass, or
    # fails it when told to
    assert (cond(st, "Regressed")["status"], cond(st, "Regressed")["reason"]) == (
        "Unknown", "NoBaseline")
    passed = run_gate(k8s, tmp_path, gate_script(NAME, namespace))
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert passed.stdout.startswith(f"run {good} Succeeded; Regressed=Unknown: run {good}: ")
    strict = run_gate(k8s, tmp_path, gate_script(NAME, namespace, unknown="fail"))
    assert strict.returncode == 1, strict.stdout + strict.stderr

    # several resyncs of an unchanged target start nothing
    stays_at(k8s, namespace, NAME, good, seconds=4 * RESYNC_S)

    # another rollout only while the runs are invalid
    for ttft in (f"{ms}ms" for ms in range(80, 80 + 10 * VALID_TRIES, 10)):
        run = status(k8s, namespace, NAME)["run"] + 1
        rollout(k8s, target, ttft)
        st = finished_run(k8s, namespace, NAME, operator, run)
        if cond(st, "MeasurementValid").get("status") == "True":
            break
    # one run per rollout, none for the rollout's middle (old and new pods Ready together)
    assert [h["run"] for h in st["history"]][-(run - good + 1):] == list(range(good, run + 1))
    assert k8s.get("llmbenchmark", NAME, namespace)["metadata"]["generation"] == (
        k8s.get("llmbenchmark", NAME, namespace)["status"]["observedGeneration"])

    # the verdict names the stack change, against the last good run
    c = cond(st, "Regressed")
    assert (c["status"], c["reason"]) == ("True", "Regressed"), c
    assert f"against run {good}" in c["message"] and "ttft_p99" in c["message"]
    assert f"since run {good}: target args: --time-to-first-token 10ms -> {ttft}" in (
        c["message"])
    assert st["stack"]["targetArgs"][st["stack"]["targetArgs"].index(
        "--time-to-first-token") + 1] == ttft

    # the Argo Rollouts gate fails the analysis, saying why
    failed = run_gate(k8s, tmp_path, gate_script(NAME, namespace))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert failed.stdout.startswith(f"run {run} Succeeded; Regressed=True: run {run}: ")
    assert "target args: --time-to-first-token 10ms -> " in failed.stdout

    # Flagger's query selects 1 (thresholdRange max 0: the check fails)
    assert k8s.wait_for("the regressed gauge", lambda: regressed_gauge(k8s, operator,
                                                                       namespace) == 1.0,
                        30, diag=diag(k8s, namespace, operator))

    # and nothing more starts: exactly one run per rollout
    stays_at(k8s, namespace, NAME, run, seconds=4 * RESYNC_S)
