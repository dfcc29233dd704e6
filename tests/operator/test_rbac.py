"""The operator's RBAC grants exactly what the code calls: nothing missing, nothing extra.

One source: the chart's ``files/rbac/namespaced-rules.yaml`` and ``cluster-rules.yaml``. The
chart renders them (tests/charts/test_chart.py checks the rendered ClusterRole and Roles, and
that ``deploy/operator-rbac.yaml`` is the chart's output); here they are compared with
:data:`llmbench.operator.kube.PERMISSIONS` without helm, both ways.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import llmbench.operator.handlers  # noqa: F401 - registers every call's permission
from llmbench.operator.kube import PERMISSIONS

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "charts" / "llmbench-operator" / "files" / "rbac"
NAMESPACED = RULES / "namespaced-rules.yaml"
CLUSTER = RULES / "cluster-rules.yaml"
DEPLOY = ROOT / "deploy" / "operator-rbac.yaml"
EXPORTER = RULES / "exporter-rules.yaml"

Grants = dict[tuple[str, str], set[str]]
#: Resources that are not namespaced: a Role cannot grant them.
CLUSTER_SCOPED = {
    ("", "nodes"), ("", "namespaces"), ("", "persistentvolumes"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("rbac.authorization.k8s.io", "clusterroles"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
}


def rules_of(path: Path) -> list[dict[str, Any]]:
    rules = yaml.safe_load(path.read_text())
    assert isinstance(rules, list) and rules, f"{path} holds no list of rules"
    return rules


def grants(rules: list[dict[str, Any]]) -> Grants:
    out: Grants = {}
    for rule in rules:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule  # no resourceNames
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def used() -> Grants:
    out: Grants = {}
    for (group, resource), verbs in PERMISSIONS.items():
        out.setdefault((group, resource.split("#")[0]), set()).update(verbs)
    return out


def compare(granted: Grants, needed: Grants) -> list[str]:
    """What differs, one line each: 'missing' (the code calls it, RBAC lacks it) and
    'extra' (granted, never called)."""
    out = []
    for key in sorted(set(granted) | set(needed)):
        group, resource = key
        name = f"{resource}.{group}" if group else resource
        if missing := needed.get(key, set()) - granted.get(key, set()):
            out.append(f"missing: {name} {sorted(missing)}")
        if extra := granted.get(key, set()) - needed.get(key, set()):
            out.append(f"extra: {name} {sorted(extra)}")
    return out


#: The calls that no Role can allow, so a namespaced install keeps them in its ClusterRole:
#: ``Kube.get_node`` (nodes are cluster-scoped) and
#: ``Kube.get_admission_policy``/``get_admission_binding`` (cluster-scoped). Pods are never
#: listed cluster-wide by a namespaced install: exporter namespaces get a Role each.
CLUSTER_WIDE: Grants = {
    ("", "nodes"): {"get"},
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): {"get"},
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): {"get"},
}


def source_rules() -> list[dict[str, Any]]:
    return rules_of(NAMESPACED) + rules_of(CLUSTER)


def check(namespaced: list[dict[str, Any]], cluster: list[dict[str, Any]]) -> list[str]:
    """Both install modes. All namespaces: one ClusterRole with both files, exactly the calls.
    A list of namespaces: a Role per namespace with the namespaced file (nothing cluster-scoped
    in it) and a ClusterRole with the cluster file, which must allow the cluster-wide calls."""
    out = [f"all namespaces: {line}" for line in compare(grants(namespaced + cluster), used())]
    out += [
        f"namespaced install, ClusterRole: {line}"
        for line in compare(grants(cluster), CLUSTER_WIDE)
    ]
    out += [
        f"namespaced install, Role: cannot grant cluster-scoped {resource or group}"
        for group, resource in sorted(CLUSTER_SCOPED & set(grants(namespaced)))
    ]
    return out


def test_the_charts_rbac_files_match_the_calls_in_the_code() -> None:
    assert check(rules_of(NAMESPACED), rules_of(CLUSTER)) == []


@pytest.mark.parametrize(
    "file,index",
    [("namespaced", i) for i in range(len(rules_of(NAMESPACED)))]
    + [("cluster", i) for i in range(len(rules_of(CLUSTER)))],
)
def test_dropping_any_one_rule_is_a_missing_permission(file: str, index: int) -> None:
    """The check is two-sided in practice: each rule is needed by some call, so taking it out
    of the chart's source names what the code can no longer do."""
    namespaced, cluster = rules_of(NAMESPACED), rules_of(CLUSTER)
    dropped = (namespaced if file == "namespaced" else cluster).pop(index)
    diff = check(namespaced, cluster)
    assert diff and all(": missing: " in line for line in diff), (dropped, diff)
    assert any(r in line for line in diff for r in dropped["resources"]), (dropped, diff)


def test_an_extra_grant_is_reported() -> None:
    extra = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}
    assert check([*rules_of(NAMESPACED), extra], rules_of(CLUSTER)) == [
        "all namespaces: extra: secrets ['list']"
    ]


def test_a_cluster_scoped_rule_in_the_role_file_is_reported() -> None:
    nodes = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}
    assert check([*rules_of(NAMESPACED), nodes], rules_of(CLUSTER)) == [
        "namespaced install, Role: cannot grant cluster-scoped nodes"
    ]


def test_no_wildcards_and_no_right_on_secrets() -> None:
    g = grants(source_rules())
    assert all("*" not in verbs for verbs in g.values())
    assert all("*" not in key for pair in g for key in pair)
    assert ("", "secrets") not in g  # the API key reaches the runner by secretKeyRef only
    assert ("", "pods") in g and not ({"patch", "update", "delete"} & g[("", "pods")])
    # Jobs are never changed; only a run pruned by spec.historyLimit is deleted
    assert not ({"patch", "update"} & g[("batch", "jobs")])


def test_deploy_file_grants_what_the_chart_grants() -> None:
    """deploy/operator-rbac.yaml (kubectl apply without helm) is rendered from the chart;
    tests/charts checks it byte for byte with helm, this checks its ClusterRole without (the
    two roles aggregated into view and edit are for users: tests/charts/test_aggregated_roles)."""
    docs = list(yaml.safe_load_all(DEPLOY.read_text()))
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"
               and not any(k.startswith("rbac.authorization.k8s.io/aggregate-to-")
                           for k in d["metadata"].get("labels", {}))]
    assert compare(grants(role["rules"]), used()) == []
    (binding,) = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    (sa,) = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"],
         "namespace": sa["metadata"]["namespace"]}
    ]


def test_an_exporter_namespace_role_only_lists_pods() -> None:
    """What a namespaced install grants in each exporter namespace: the one call
    ``discover_exporters`` makes there (``Kube.list_pods(ns, ...)``)."""
    assert grants(rules_of(EXPORTER)) == {("", "pods"): {"list"}}
    assert "list" in used()[("", "pods")]
