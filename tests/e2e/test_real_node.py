"""What only a real node shows: the kubelet, containerd and runc enforcing what the operator
asks for, and the operator's answer when the node refuses.

- the runner pod's securityContext holds inside the container: uid/gid 65532, no
  capabilities, a read-only root, writable only in its emptyDirs (``kubectl exec`` into the
  running runner);
- a runner given ``limits.memory`` below what its load needs is OOMKilled by the kernel, and
  the run ends Failed with that reason in status (not a bare "backoff limit");
- a runner image that does not exist ends the run with the pull error named, instead of
  Running for ever;
- the operator runs with its chart ServiceAccount's token, mounted into its pod (no
  kubeconfig, no admin credential);
- ``kubectl logs`` of the runner and of the operator shows their lines.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.release import Release, installed
from tests.e2e.test_operator import Target, benchmark, cond, diag, wait_phase

pytestmark = pytest.mark.e2e

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture(scope="module")
def operator(crd_installed: Any) -> Iterator[Release]:
    yield from installed(crd_installed, name="realnode")


def runner_pod(k8s: Any, namespace: str, name: str, op: Release,
               phase: str = "Running") -> dict[str, Any]:
    return dict(k8s.wait_for(
        f"the runner pod of {name} to be {phase}",
        lambda: next((p for p in k8s.pods(namespace, f"llmbench.io/benchmark={name}")
                      if p["status"].get("phase") == phase), None),
        120, interval=0.2, diag=diag(k8s, namespace, op),
    ))


PROBE = r"""
id -u; id -g
grep CapEff /proc/self/status
for d in / /opt/llmbench /etc /results /tmp; do
  if touch "$d/.probe" 2>/dev/null; then echo "$d writable"; rm -f "$d/.probe"
  else echo "$d read-only"; fi
done
"""


def test_the_runner_pod_is_read_only_non_root_and_without_capabilities(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    k8s.apply(benchmark("locked", namespace, target.ref, telemetry={"dcgm": "off"},
                        load={"requestCount": 400, "warmupRequestCount": 0},
                        sweep={"type": "concurrency", "values": [1]}))
    pod = runner_pod(k8s, namespace, "locked", operator)
    out = k8s.kubectl("exec", pod["metadata"]["name"], "-n", namespace, "--", "sh", "-c",
                      PROBE).stdout.splitlines()
    assert out[:2] == ["65532", "65532"], out
    assert out[2].split() == ["CapEff:", "0000000000000000"], out
    assert out[3:] == ["/ read-only", "/opt/llmbench read-only", "/etc read-only",
                       "/results writable", "/tmp writable"], out
    # and the runner, confined so, still measures
    st = wait_phase(k8s, namespace, "locked", operator, ("Succeeded", "Failed"), 240)
    assert st["phase"] == "Succeeded", json.dumps(st, indent=1)
    log = k8s.kubectl("logs", pod["metadata"]["name"], "-n", namespace).stdout
    assert "concurrency1" in log, log[-2000:]  # kubectl logs: the runner's own lines


def test_a_runner_over_its_memory_limit_is_oomkilled_and_status_says_so(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    small = {"requests": {"cpu": "100m", "memory": "40Mi"},
             "limits": {"cpu": "1", "memory": "40Mi"}}  # below what Python + llmbench need
    k8s.apply(benchmark("tight", namespace, target.ref, telemetry={"dcgm": "off"},
                        runner={**small, "backoffLimit": 1},
                        sweep={"type": "concurrency", "values": [1]}))
    st = wait_phase(k8s, namespace, "tight", operator, ("Succeeded", "Failed"), 240)
    assert st["phase"] == "Failed", json.dumps(st, indent=1)
    pods = k8s.pods(namespace, "llmbench.io/benchmark=tight")
    reasons = {(cs.get("state", {}).get("terminated") or cs.get("lastState", {}).get(
        "terminated") or {}).get("reason") for p in pods
        for cs in p["status"].get("containerStatuses") or []}
    assert "OOMKilled" in reasons, reasons  # the kernel's verdict, through containerd
    assert "OOMKilled" in st["message"], st["message"]
    assert "limits.memory" in st["message"], st["message"]  # and the fix
    assert "OOMKilled" in cond(st, "Succeeded")["message"]


def test_a_runner_image_that_does_not_exist_ends_the_run_naming_the_pull_error(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    missing = "localhost/llmbench:no-such-tag"
    k8s.apply(benchmark("ghost", namespace, target.ref, telemetry={"dcgm": "off"},
                        runner={"image": missing}, sweep={"type": "concurrency", "values": [1]}))
    st = wait_phase(k8s, namespace, "ghost", operator, ("Succeeded", "Failed"), 180)
    assert st["phase"] == "Failed", json.dumps(st, indent=1)
    assert missing in st["message"], st["message"]
    assert any(r in st["message"] for r in ("ErrImagePull", "ImagePullBackOff")), st["message"]
    assert cond(st, "Running")["status"] == "False"
    # nothing keeps retrying the pull: the Job is gone or finished
    job = k8s.get("job", "ghost-run-1", namespace)
    assert job is None or any(c["type"] == "Failed" and c["status"] == "True"
                              for c in job["status"].get("conditions") or []), job


def test_the_operator_uses_its_chart_service_account_token_from_inside_its_pod(
    k8s: Any, operator: Release
) -> None:
    pod = operator.pod()
    name, sa = pod["metadata"]["name"], pod["spec"]["serviceAccountName"]
    assert sa == operator.fullname  # the chart's ServiceAccount
    assert not [e for e in pod["spec"]["containers"][0].get("env") or []
                if e["name"] == "KUBECONFIG"]
    env = k8s.kubectl("exec", name, "-n", operator.namespace, "--", "env").stdout
    assert "KUBERNETES_SERVICE_HOST=" in env and "KUBECONFIG=" not in env
    token = k8s.kubectl("exec", name, "-n", operator.namespace, "--", "cat",
                        f"{SA_DIR}/token").stdout.strip()
    review = k8s.kubectl("create", "-o", "json", "-f", "-", input=json.dumps({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token}})).stdout
    user = json.loads(review)["status"]["user"]
    assert user["username"] == f"system:serviceaccount:{operator.namespace}:{sa}", user
    assert json.loads(base64.b64decode(token.split(".")[1] + "==").decode())[
        "kubernetes.io"]["pod"]["name"] == name  # bound to this pod
    # what it may do is the chart's RBAC, not more
    can = k8s.kubectl("auth", "can-i", "--as", user["username"], "delete", "nodes",
                      check=False).stdout.strip()
    assert can == "no"
    assert "kopf" in operator.log() or "llmbench" in operator.log()  # kubectl logs works
