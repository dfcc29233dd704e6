"""The operator's own guard (llmbench.operator.admission): which fields stand for rights, the
allowlist's matching (the same rule as the policy's CEL), and which bindings count as in force.

The policy itself, and the operator refusing without it, are tested on the real API server
(tests/e2e/test_admission_policy.py, tests/e2e/test_admission_fallback.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from llmbench.api import Spec
from llmbench.operator.admission import binding_covers, guarded_fields, image_allowed
from tests.operator.test_build import BENCH

RUNNER = "ghcr.io/llmbench/llmbench:0.1.0"


def spec_with(**target: Any) -> Spec:
    """BENCH's spec with ``target`` fields (and ``runner``), without its Secret reference
    unless given."""
    runner = target.pop("runner", None)
    base = {k: v for k, v in BENCH["spec"]["target"].items() if k != "apiKeySecretRef"}
    body = {**BENCH, "spec": {**BENCH["spec"], "target": {**base, **target}}}
    if runner is not None:
        body["spec"]["runner"] = runner
    return Spec.from_manifest(body, namespace="llm")


@pytest.mark.parametrize("image,allowed,ok", [
    ("reg/llmbench:1", ["reg/llmbench:1"], True),
    ("reg/llmbench:1-evil", ["reg/llmbench:1"], False),
    ("reg/team/x:2", ["reg/team/*"], True),
    ("reg/teamevil/x:2", ["reg/team/*"], False),
    ("anything", ["*"], True),
    ("anything", ["", "other"], False),
    ("anything", [], False),
])
def test_an_allowed_image_is_exact_or_a_prefix_ending_in_a_star(
    image: str, allowed: list[str], ok: bool
) -> None:
    assert image_allowed(image, allowed) is ok


def test_each_guarded_field_names_the_right_it_stands_for() -> None:
    spec = spec_with(apiKeySecretRef={"name": "key", "key": "token"},
                     runner={"image": "evil.io/x:1"})
    issues = guarded_fields(spec, "llm", RUNNER, [])
    assert [(i.path, i.message) for i in issues] == [
        ("spec.target.apiKeySecretRef", "needs get on secret key in namespace llm"),
        ("spec.runner.image", "needs create on pods in namespace llm (image evil.io/x:1 is not "
                              "on the operator's --allowed-runner-images)"),
    ]
    # the operator's own runner image and an allowed one need nothing
    assert guarded_fields(spec_with(runner={"image": RUNNER}), "llm", RUNNER, []) == []
    assert guarded_fields(spec_with(runner={"image": "evil.io/x:1"}), "llm", RUNNER,
                          ["evil.io/*"]) == []


def test_a_service_is_guarded_only_in_another_namespace() -> None:
    def far(ns: str) -> Spec:
        body: dict[str, Any] = {**BENCH, "spec": {**BENCH["spec"], "target": {
            "model": "m", "service": {"name": "vllm", "port": 8000, "namespace": ns}}}}
        return Spec.from_manifest(body, namespace="llm")

    assert guarded_fields(far("llm"), "llm", RUNNER, []) == []
    (issue,) = guarded_fields(far("serving"), "llm", RUNNER, [])
    assert issue.path == "spec.target.service.namespace"
    assert issue.message == "needs get on services and list on pods in namespace serving"


def test_an_artifacts_claim_needs_create_on_pods() -> None:
    body: dict[str, Any] = {**BENCH, "spec": {**BENCH["spec"],
                                              "artifacts": {"pvc": {"claimName": "files"}}}}
    issues = guarded_fields(Spec.from_manifest(body, namespace="llm"), "llm", RUNNER, [])
    (issue,) = [i for i in issues if i.path.startswith("spec.artifacts")]
    assert (issue.path, issue.message) == (
        "spec.artifacts.pvc",
        "needs create on pods in namespace llm (the runner pod mounts claim files read-write)")


def binding(**spec: Any) -> dict[str, Any]:
    return {"spec": {"policyName": "p", "validationActions": ["Deny"], **spec}}


def names(*values: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(values)}]}}


@pytest.mark.parametrize("b,ok", [
    (binding(), True),
    (binding(matchResources=names("llm", "b")), True),
    (binding(matchResources=names("other")), False),
    (binding(validationActions=["Warn", "Audit"]), False),
    (binding(policyName="q"), False),
    (binding(matchResources={"namespaceSelector": {"matchLabels": {"team": "a"}}}), False),
])
def test_only_a_denying_binding_that_surely_covers_the_namespace_counts(
    b: dict[str, Any], ok: bool
) -> None:
    assert binding_covers(b, "p", "llm") is ok
