"""The chart's aggregated ClusterRoles on the real API server: users bound only to Kubernetes'
default ``view`` or ``edit`` ClusterRole in a namespace (a RoleBinding, as a cluster admin
grants namespaces to teams) read, or read and write, its LLMBenchmarks; nobody but the operator
writes status. The users are impersonated (``kubectl --as``); the API server's own RBAC
authorizer and the controller manager's ClusterRole aggregation decide.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.charts.helm import CHART, helm
from tests.e2e.test_operator import benchmark

pytestmark = pytest.mark.e2e

VIEWER, EDITOR = "alice@example.com", "bob@example.com"


@pytest.fixture
def aggregated_roles(crd_installed: Any) -> Iterator[Any]:
    """The chart's aggregated ClusterRoles, as helm renders them, applied; deleted after."""
    k8s = crd_installed
    out = helm("template", "agg", str(CHART), "--namespace", "llmbench-system",
               "--show-only", "templates/aggregate-roles.yaml").stdout
    k8s.kubectl("apply", "-f", "-", input=out)
    try:
        yield k8s
    finally:
        k8s.kubectl("delete", "-f", "-", "--ignore-not-found", input=out, check=False)


def _can(k8s: Any, user: str, verb: str, resource: str, namespace: str,
         subresource: str = "") -> bool:
    extra = [f"--subresource={subresource}"] if subresource else []
    r = k8s.kubectl("auth", "can-i", verb, resource, *extra, "-n", namespace, "--as", user,
                    check=False)
    return r.stdout.strip() == "yes"


def test_default_view_and_edit_cover_llmbenchmarks(
    aggregated_roles: Any, namespace: str
) -> None:
    k8s = aggregated_roles

    def aggregated(role: str) -> bool:
        rules = json.loads(k8s.kubectl("get", "clusterrole", role, "-o", "json").stdout)["rules"]
        return any("llmbench.io" in r.get("apiGroups", []) and "llmbenchmarks" in
                   r.get("resources", []) for r in rules)

    for role in ("view", "edit", "admin"):  # edit includes view; admin includes edit
        k8s.wait_for(f"the controller manager to aggregate llmbenchmarks into {role}",
                     lambda role=role: aggregated(role), 60)
    k8s.kubectl("create", "rolebinding", "team-view", "--clusterrole=view", f"--user={VIEWER}",
                "-n", namespace)
    k8s.kubectl("create", "rolebinding", "team-edit", "--clusterrole=edit", f"--user={EDITOR}",
                "-n", namespace)

    res = "llmbenchmarks.llmbench.io"
    for verb in ("get", "list", "watch"):
        assert _can(k8s, VIEWER, verb, res, namespace), verb
        assert _can(k8s, EDITOR, verb, res, namespace), verb
    for verb in ("create", "update", "patch", "delete"):
        assert not _can(k8s, VIEWER, verb, res, namespace), verb
        assert _can(k8s, EDITOR, verb, res, namespace), verb
    assert not _can(k8s, EDITOR, "patch", res, namespace, subresource="status")
    assert _can(k8s, VIEWER, "get", res, namespace, subresource="status")
    assert not _can(k8s, VIEWER, "list", res, "default")  # bound in one namespace only

    # what they really do, through the API server's authorizer
    body = benchmark("team-bench", namespace, {"url": "http://nothing.invalid:9"})
    doc = json.dumps(body)
    denied = k8s.kubectl("create", "-f", "-", "--as", VIEWER, input=doc, check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr
    k8s.kubectl("create", "-f", "-", "--as", EDITOR, input=doc)
    listed = json.loads(k8s.kubectl("get", "llmb", "-n", namespace, "-o", "json",
                                    "--as", VIEWER).stdout)
    assert [o["metadata"]["name"] for o in listed["items"]] == ["team-bench"]
    status = k8s.kubectl("patch", "llmb", "team-bench", "-n", namespace, "--as", EDITOR,
                         "--subresource=status", "--type=merge", "-p",
                         '{"status": {"phase": "Succeeded"}}', check=False)
    assert status.returncode != 0 and "forbidden" in status.stderr.lower(), status.stderr
    delete = k8s.kubectl("delete", "llmb", "team-bench", "-n", namespace, "--as", VIEWER,
                         check=False)
    assert delete.returncode != 0 and "forbidden" in delete.stderr.lower(), delete.stderr
    k8s.kubectl("delete", "llmb", "team-bench", "-n", namespace, "--as", EDITOR,
                "--wait=false")
