"""The operator's own guard on the fields that stand for rights: fail closed where the
admission policy cannot decide.

Four fields of a benchmark make the operator act with rights its creator may lack:
``spec.target.apiKeySecretRef`` (the runner sends that Secret's value as a Bearer token),
``spec.runner.image`` (a pod of the user's choosing, with that Secret and the namespace's
claims), ``spec.target.service.namespace`` (the operator reads that namespace's Service, pods
and their arguments into status) and ``spec.artifacts.pvc`` (the runner pod mounts that claim
read-write: what creating a pod would let the user do, so it needs ``create pods``). The
chart's ValidatingAdmissionPolicy checks the creator's rights at admission (docs/security.md);
only the API server knows who the creator was, so the operator cannot check them itself.
Where it cannot see that policy in force (an API server before 1.30, the policy not installed,
a binding that skips the namespace) it refuses those fields with ``Accepted=False`` instead,
unless the image is on ``--allowed-runner-images`` or the namespace is trusted
(``--trust-namespace``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.client.rest import ApiException

from llmbench.api import Spec, SpecError, SpecIssue
from llmbench.operator.kube import Kube, NotFound

__all__ = ["Guard", "guarded_fields", "image_allowed", "policy_in_force", "refusal"]


@dataclass(frozen=True)
class Guard:
    """What the operator was told about admission (its flags)."""

    #: The ValidatingAdmissionPolicy (and binding, same name) that checks creators; "" none.
    policy: str = ""
    #: Runner images anyone may name: exact, or a prefix ending in ``*``.
    allowed_images: tuple[str, ...] = ()
    #: Namespaces whose creators are trusted with the guarded fields without the policy.
    trusted_namespaces: tuple[str, ...] = ()


def image_allowed(image: str, allowed: Sequence[str]) -> bool:
    """Whether ``image`` is one of ``allowed`` (an entry ending in ``*``: a prefix), the same
    rule as the policy's CEL.

    Example: ``image_allowed("reg/llmbench:1", ["reg/*"])`` is True;
    ``image_allowed("reg/llmbench:1-evil", ["reg/llmbench:1"])`` is False.
    """
    return any(
        image.startswith(p[:-1]) if p.endswith("*") else image == p for p in allowed if p
    )


def guarded_fields(
    spec: Spec, namespace: str, runner_image: str, allowed: Sequence[str]
) -> list[SpecIssue]:
    """The fields of ``spec`` that need the creator's rights checked, each with the right
    (empty: nothing to check). The operator's own runner image and allowed images need none."""
    out: list[SpecIssue] = []
    t = spec.target
    if t.api_key_secret_ref is not None:
        out.append(SpecIssue(
            "spec.target.apiKeySecretRef",
            f"needs get on secret {t.api_key_secret_ref.name} in namespace {namespace}",
        ))
    image = spec.runner.image
    if image and image != runner_image and not image_allowed(image, allowed):
        out.append(SpecIssue(
            "spec.runner.image",
            f"needs create on pods in namespace {namespace} (image {image} is not on the "
            "operator's --allowed-runner-images)",
        ))
    if spec.artifacts.pvc is not None:
        out.append(SpecIssue(
            "spec.artifacts.pvc",
            f"needs create on pods in namespace {namespace} (the runner pod mounts claim "
            f"{spec.artifacts.pvc.claim_name} read-write)",
        ))
    other = t.service.namespace if t.service is not None else None
    if other and other != namespace:
        out.append(SpecIssue(
            "spec.target.service.namespace",
            f"needs get on services and list on pods in namespace {other}",
        ))
    return out


def binding_covers(binding: Mapping[str, Any], policy: str, namespace: str) -> bool:
    """The binding enforces ``policy`` (action Deny) on benchmarks of ``namespace``: no
    namespace selector, or the chart's ``kubernetes.io/metadata.name In [...]``; any other
    selector is not trusted (the operator cannot evaluate it without reading namespaces)."""
    spec = binding.get("spec") or {}
    if spec.get("policyName") != policy or "Deny" not in (spec.get("validationActions") or []):
        return False
    selector = (spec.get("matchResources") or {}).get("namespaceSelector") or {}
    if not selector:
        return True
    if selector.get("matchLabels"):
        return False
    exprs = selector.get("matchExpressions") or []
    return bool(exprs) and all(
        e.get("key") == "kubernetes.io/metadata.name" and e.get("operator") == "In"
        and namespace in (e.get("values") or [])
        for e in exprs
    )


async def policy_in_force(kube: Kube, policy: str, namespace: str) -> bool:
    """Whether the API server has ``policy`` and its binding (the same name) enforcing it on
    ``namespace``. Not found, forbidden, or an API server without
    ``admissionregistration.k8s.io/v1`` policies: False (fail closed)."""
    if not policy:
        return False
    try:
        await kube.get_admission_policy(policy)
        binding = await kube.get_admission_binding(policy)
    except (NotFound, ApiException):
        return False
    return binding_covers(binding, policy, namespace)


async def refusal(
    kube: Kube, guard: Guard, spec: Spec, namespace: str, runner_image: str
) -> SpecError | None:
    """Why the operator refuses to run ``spec`` (None: it may). Only benchmarks that use a
    guarded field cost an API call."""
    issues = guarded_fields(spec, namespace, runner_image, guard.allowed_images)
    if not issues or namespace in guard.trusted_namespaces:
        return None
    if await policy_in_force(kube, guard.policy, namespace):
        return None
    where = (f"its admission policy {guard.policy} is not in force for namespace {namespace}"
             if guard.policy else "no admission policy was given (--admission-policy)")
    why = (f"; the operator cannot know who created the benchmark and {where}, so it refuses "
           "this field: install the chart's ValidatingAdmissionPolicy (Kubernetes 1.30+), "
           f"or trust the namespace (--trust-namespace={namespace})")
    return SpecError([SpecIssue(i.path, i.message + why) for i in issues])
