"""The operator fails closed where no admission policy checks creators: installed by the chart
with ``admission.policy=false`` (what an API server before 1.30 would force), it refuses
benchmarks that name an API key Secret, a runner image off its allowlist or another
namespace's Service with ``Accepted=False``, creates nothing for them, and runs them in a
namespace it was told to trust (``admission.trustedNamespaces``). With the policy installed
(every other e2e module's operator) the same fields run.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.release import Release, installed
from tests.e2e.test_operator import benchmark, cond, status

pytestmark = pytest.mark.e2e

URL = {"url": "http://vllm.invalid:8000"}
ALLOWED = "localhost/allowed-runner/*"


@pytest.fixture(scope="module")
def trusted(crd_installed: Any) -> Iterator[str]:
    k8s = crd_installed
    name = f"e2e-trusted-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        k8s.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(crd_installed: Any, trusted: str) -> Iterator[Release]:
    yield from installed(crd_installed, name="nopolicy", **{
        "admission.policy": False, "admission.trustedNamespaces": [trusted],
        "runner.allowedImages": [ALLOWED]})


def refused(k8s: Any, namespace: str, name: str, op: Release) -> dict[str, Any]:
    st = k8s.wait_for(
        f"{name} refused", lambda: (s := status(k8s, namespace, name))
        and cond(s, "Accepted").get("status") == "False" and s, 60, diag=op.diag)
    assert st["phase"] == "Failed", st
    assert k8s.get("job", f"{name}-run-1", namespace) is None
    return dict(st)


def accepted(k8s: Any, namespace: str, name: str, op: Release) -> dict[str, Any]:
    return dict(k8s.wait_for(
        f"{name} accepted", lambda: (s := status(k8s, namespace, name))
        and cond(s, "Accepted").get("status") == "True" and s, 60, diag=op.diag))


def test_without_the_policy_each_guarded_field_is_refused_naming_the_right(
    crd_installed: Any, namespace: str, operator: Release
) -> None:
    k8s = crd_installed
    k8s.apply([
        benchmark("keyed", namespace, {**URL, "apiKeySecretRef": {"name": "k", "key": "t"}}),
        benchmark("imaged", namespace, URL, runner={"image": "evil.io/runner:1"}),
        benchmark("far", namespace, {"service": {"name": "vllm", "namespace": "kube-system"}}),
    ])
    msg = cond(refused(k8s, namespace, "keyed", operator), "Accepted")["message"]
    assert f"spec.target.apiKeySecretRef: needs get on secret k in namespace {namespace}" in msg
    assert "no admission policy was given (--admission-policy)" in msg
    assert f"--trust-namespace={namespace}" in msg
    msg = cond(refused(k8s, namespace, "imaged", operator), "Accepted")["message"]
    assert f"spec.runner.image: needs create on pods in namespace {namespace}" in msg
    msg = cond(refused(k8s, namespace, "far", operator), "Accepted")["message"]
    assert ("spec.target.service.namespace: needs get on services and list on pods in "
            "namespace kube-system") in msg
    # nothing guarded, or an allowed image: runs as before
    k8s.apply([benchmark("plain", namespace, URL), benchmark(
        "allowed", namespace, URL, runner={"image": "localhost/allowed-runner/x:1"})])
    for name in ("plain", "allowed"):
        assert cond(accepted(k8s, namespace, name, operator), "Accepted")["reason"] == "Valid"


def test_a_trusted_namespace_runs_the_guarded_fields_without_the_policy(
    crd_installed: Any, trusted: str, operator: Release
) -> None:
    k8s = crd_installed
    k8s.apply(benchmark("keyed", trusted, {**URL, "apiKeySecretRef": {"name": "k", "key": "t"}},
                        runner={"image": "evil.io/runner:1"}))
    assert cond(accepted(k8s, trusted, "keyed", operator), "Accepted")["reason"] == "Valid"
