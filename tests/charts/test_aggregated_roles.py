"""The two ClusterRoles the chart aggregates into Kubernetes' default ``view`` and ``edit``
roles (rendered here; tests/e2e/test_aggregated_roles.py checks them with impersonated users on
the API server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.charts.helm import by_kind, render

VIEW = "rbac.authorization.k8s.io/aggregate-to-view"
EDIT = "rbac.authorization.k8s.io/aggregate-to-edit"


def _aggregated(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {label: r for r in by_kind(docs, "ClusterRole")
            for label in (VIEW, EDIT) if r["metadata"]["labels"].get(label) == "true"}


def test_view_reads_and_edit_writes_llmbenchmarks_but_never_their_status() -> None:
    roles = _aggregated(render())
    assert set(roles) == {VIEW, EDIT}
    assert roles[VIEW]["metadata"]["name"] == "llmbench-operator-view"
    assert roles[VIEW]["rules"] == [{"apiGroups": ["llmbench.io"],
                                     "resources": ["llmbenchmarks", "llmbenchmarks/status"],
                                     "verbs": ["get", "list", "watch"]}]
    assert roles[EDIT]["metadata"]["name"] == "llmbench-operator-edit"
    assert roles[EDIT]["rules"] == [{"apiGroups": ["llmbench.io"], "resources": ["llmbenchmarks"],
                                     "verbs": ["create", "update", "patch", "delete",
                                               "deletecollection"]}]
    # no binding: the default roles are bound by the cluster's admins, per namespace
    assert all(b["roleRef"]["name"] not in {r["metadata"]["name"] for r in roles.values()}
               for b in by_kind(render(), "ClusterRoleBinding"))


def test_a_namespaced_install_names_them_after_its_namespace_and_they_can_be_off() -> None:
    roles = _aggregated(render("bench", "ops", watchNamespaces=["team-a"]))
    assert {r["metadata"]["name"] for r in roles.values()} == {
        "bench-llmbench-operator-ops-view", "bench-llmbench-operator-ops-edit"}
    assert _aggregated(render(**{"rbac.aggregateToDefaultRoles": False})) == {}


def test_the_kubectl_apply_install_aggregates_them_too() -> None:
    """deploy/operator-rbac.yaml (kubectl apply without helm) carries the same two roles, so a
    team bound to view or edit reads or writes LLMBenchmarks whichever way it was installed."""
    deploy = Path(__file__).resolve().parents[2] / "deploy" / "operator-rbac.yaml"
    roles = _aggregated([d for d in yaml.safe_load_all(deploy.read_text()) if d])
    assert roles == _aggregated(render())
