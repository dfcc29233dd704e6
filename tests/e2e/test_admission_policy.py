"""Authorization at admission on the project's API server: deploy/admission-policy.yaml (the
chart's ValidatingAdmissionPolicy and its binding) applied for real, and
LLMBenchmarks created by impersonated users (``kubectl --as``) whose only rights are real RBAC
Roles: a user who may create LLMBenchmarks gets nothing more through them.

Each test gives its own user exactly the rights named, so the API server's authorizer, not the
test, decides; the refusals must name the missing right.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.release import OPERATOR_NS
from tests.e2e.test_operator import benchmark

pytestmark = pytest.mark.e2e

POLICY_FILE = Path(__file__).resolve().parents[2] / "deploy" / "admission-policy.yaml"
POLICY = "llmbench-operator"
#: The image deploy/ allows anyone to name (the chart's default runner image).
DEFAULT_RUNNER = "ghcr.io/llmbench/llmbench:0.1.0"


def policy_docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(POLICY_FILE.read_text()) if d]


#: Everything with LLMBenchmarks, nothing else: what a tenant of the operator is given.
BENCHMARKS_RULE = {"apiGroups": ["llmbench.io"], "resources": ["llmbenchmarks"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}


@pytest.fixture(scope="module")
def policy(crd_installed: Any) -> Iterator[Any]:
    """deploy/admission-policy.yaml applied; removed after the module."""
    k8s = crd_installed
    if k8s.get("namespace", OPERATOR_NS) is None:
        k8s.kubectl("create", "namespace", OPERATOR_NS)
    k8s.apply(policy_docs())
    probe = f"e2e-probe-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", probe)
    grant(k8s, probe, "e2e-probe", "benchmarks", BENCHMARKS_RULE)
    try:
        # the API server loads a new policy asynchronously: wait until it refuses
        k8s.wait_for(
            "the admission policy to refuse an unknown image",
            lambda: "may not create pods" in create_as(
                k8s, "e2e-probe", probe, "probe", {"url": "http://x.invalid:1"},
                "--dry-run=server", runner={"image": "elsewhere/img:1"}).stderr,
            60,
        )
        yield k8s
    finally:
        k8s.kubectl("delete", "namespace", probe, "--wait=false", check=False)
        for doc in reversed(policy_docs()):
            ns = ["-n", doc["metadata"]["namespace"]] if "namespace" in doc["metadata"] else []
            k8s.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"], *ns,
                        "--ignore-not-found", check=False)


def create_as(k8s: Any, user: str | None, namespace: str, name: str, target: dict[str, Any],
              *flags: str, **spec: Any) -> Any:
    """``kubectl --as=USER create`` of a benchmark (None: as the admin); the completed
    process."""
    doc = json.dumps(benchmark(name, namespace, target, **spec))
    who = [f"--as={user}"] if user else []
    return k8s.kubectl(*who, "create", *flags, "-f", "-", input=doc, check=False)


def grant(k8s: Any, namespace: str, user: str, name: str, rule: dict[str, Any]) -> None:
    """A Role with one rule in ``namespace``, bound to ``user``."""
    k8s.apply([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": name, "namespace": namespace}, "rules": [rule]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": name, "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]},
    ])


@pytest.fixture
def tenant(policy: Any, namespace: str) -> str:
    """A user who may do everything with LLMBenchmarks in ``namespace``, and nothing else."""
    user = f"alice-{namespace}"
    grant(policy, namespace, user, "benchmarks", BENCHMARKS_RULE)
    return user


URL = {"url": "http://vllm.invalid:8000"}


def test_an_api_key_secret_ref_needs_get_on_that_secret(
    policy: Any, namespace: str, tenant: str
) -> None:
    k8s = policy
    ref = {**URL, "apiKeySecretRef": {"name": "vllm-key", "key": "token"}}
    out = create_as(k8s, tenant, namespace, "keyed", ref)
    assert out.returncode != 0
    assert (f"spec.target.apiKeySecretRef: {tenant} may not get secret vllm-key in namespace "
            f"{namespace}") in out.stderr, out.stderr
    assert k8s.get("llmbenchmark", "keyed", namespace) is None
    # get on another Secret is not get on this one
    grant(k8s, namespace, tenant, "other-secret", {
        "apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
        "resourceNames": ["other-key"]})
    assert "may not get secret vllm-key" in create_as(k8s, tenant, namespace, "keyed", ref).stderr
    grant(k8s, namespace, tenant, "the-secret", {
        "apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
        "resourceNames": ["vllm-key"]})
    out = create_as(k8s, tenant, namespace, "keyed", ref)
    assert out.returncode == 0, out.stderr
    assert create_as(k8s, tenant, namespace, "plain", URL).returncode == 0


def test_a_user_without_the_secret_cannot_redirect_a_key_someone_else_set(
    policy: Any, namespace: str, tenant: str
) -> None:
    """The admin set the Secret reference; the tenant may still edit other fields and
    annotate, but not point the key at another URL (that would send it there)."""
    k8s = policy
    ref = {**URL, "apiKeySecretRef": {"name": "vllm-key", "key": "token"}}
    k8s.apply(benchmark("shared", namespace, ref))
    out = k8s.kubectl(f"--as={tenant}", "annotate", "llmb", "shared", "-n", namespace,
                      "team=a", check=False)
    assert out.returncode == 0, out.stderr
    out = k8s.kubectl(f"--as={tenant}", "patch", "llmb", "shared", "-n", namespace,
                      "--type=merge", "-p", '{"spec": {"repetitions": 2}}', check=False)
    assert out.returncode == 0, out.stderr
    out = k8s.kubectl(f"--as={tenant}", "patch", "llmb", "shared", "-n", namespace,
                      "--type=merge", "-p",
                      '{"spec": {"target": {"url": "http://attacker.invalid:80"}}}', check=False)
    assert out.returncode != 0
    assert f"{tenant} may not get secret vllm-key" in out.stderr, out.stderr
    obj = k8s.get("llmbenchmark", "shared", namespace)
    assert obj["spec"]["target"]["url"] == URL["url"]


def test_a_runner_image_needs_create_pods_or_the_allowlist(
    policy: Any, namespace: str, tenant: str
) -> None:
    k8s = policy
    out = create_as(k8s, tenant, namespace, "custom", URL, runner={"image": "evil.io/img:1"})
    assert out.returncode != 0
    assert (f"spec.runner.image: {tenant} may not create pods in namespace {namespace}, and "
            f"image evil.io/img:1 is not in the operator's allowed runner images "
            f"({DEFAULT_RUNNER})") in out.stderr, out.stderr
    # the operator's own runner image is allowed to everyone
    out = create_as(k8s, tenant, namespace, "default", URL, runner={"image": DEFAULT_RUNNER})
    assert out.returncode == 0, out.stderr
    # an image that only starts like the allowed one is not it
    out = create_as(k8s, tenant, namespace, "lookalike", URL,
                    runner={"image": DEFAULT_RUNNER + "-evil"})
    assert "may not create pods" in out.stderr, out.stderr
    grant(k8s, namespace, tenant, "pods", {
        "apiGroups": [""], "resources": ["pods"], "verbs": ["create"]})
    out = create_as(k8s, tenant, namespace, "custom", URL, runner={"image": "evil.io/img:1"})
    assert out.returncode == 0, out.stderr


def test_a_target_service_in_another_namespace_needs_get_services_and_list_pods_there(
    policy: Any, namespace: str, tenant: str
) -> None:
    k8s = policy
    other = f"{namespace}-srv"
    k8s.kubectl("create", "namespace", other)
    try:
        there = {"service": {"name": "vllm", "port": 8000, "namespace": other}}
        out = create_as(k8s, tenant, namespace, "far", there)
        assert out.returncode != 0
        assert (f"spec.target.service.namespace: {tenant} may not get services in namespace "
                f"{other}") in out.stderr, out.stderr
        grant(k8s, other, tenant, "services", {
            "apiGroups": [""], "resources": ["services"], "verbs": ["get"]})
        out = create_as(k8s, tenant, namespace, "far", there)
        assert f"{tenant} may not list pods in namespace {other}" in out.stderr, out.stderr
        grant(k8s, other, tenant, "pods", {
            "apiGroups": [""], "resources": ["pods"], "verbs": ["list"]})
        out = create_as(k8s, tenant, namespace, "far", there)
        assert out.returncode == 0, out.stderr
        # the benchmark's own namespace, named or not, needs nothing more
        here = {"service": {"name": "vllm", "port": 8000, "namespace": namespace}}
        assert create_as(k8s, tenant, namespace, "near", here).returncode == 0
    finally:
        k8s.kubectl("delete", "namespace", other, "--wait=false", check=False)


def test_an_artifacts_claim_needs_create_on_pods(
    policy: Any, namespace: str, tenant: str
) -> None:
    """The runner pod mounts spec.artifacts.pvc read-write: only a user who could mount the
    claim in a pod of their own (create pods) may name it; get on the claim is not enough."""
    k8s = policy
    claim = {"pvc": {"claimName": "files"}}
    out = create_as(k8s, tenant, namespace, "kept", URL, artifacts=claim)
    assert out.returncode != 0
    assert (f"spec.artifacts.pvc: {tenant} may not create pods in namespace {namespace} (the "
            "runner pod would mount claim files read-write)") in out.stderr, out.stderr
    grant(k8s, namespace, tenant, "claims", {
        "apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get"]})
    assert "may not create pods" in create_as(k8s, tenant, namespace, "kept", URL,
                                              artifacts=claim).stderr
    grant(k8s, namespace, tenant, "pods", {
        "apiGroups": [""], "resources": ["pods"], "verbs": ["create"]})
    out = create_as(k8s, tenant, namespace, "kept", URL, artifacts=claim)
    assert out.returncode == 0, out.stderr
