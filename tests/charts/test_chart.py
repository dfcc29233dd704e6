"""The Helm chart without a cluster: lint, what it renders for the default values and for a
namespaced install, its RBAC against the calls in the code, the CRD it ships, values that
``values.schema.json`` refuses, and deploy/operator-rbac.yaml being its output.

tests/e2e/test_chart.py installs it on the project's control plane and runs a sweep through it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmbench.operator.build import runner_pod_defaults
from tests.charts.helm import CHART, ROOT, by_kind, helm, helm_binary, render, set_args
from tests.operator.test_rbac import CLUSTER_WIDE, Grants, compare, grants, used

REPO_CRD = ROOT / "crds" / "llmbench.io_llmbenchmarks.yaml"
CHART_CRD = CHART / "crds" / "llmbench.io_llmbenchmarks.yaml"


def rbac_problems(docs: list[dict[str, Any]]) -> list[str]:
    """What the rendered RBAC lacks or has in excess, for the operator's ServiceAccount.

    All namespaces (no Role): its ClusterRole must allow exactly the calls in the code. A
    namespaced install: in each namespace the operator watches (its ``--namespace`` args), the
    Role there plus the ClusterRole must allow exactly those calls, and the ClusterRole alone
    the calls that span namespaces."""
    (sa,) = by_kind(docs, "ServiceAccount")
    subject = {"kind": "ServiceAccount", "name": sa["metadata"]["name"],
               "namespace": sa["metadata"]["namespace"]}
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in by_kind(docs, "Role")}
    cluster_roles = {r["metadata"]["name"]: r for r in by_kind(docs, "ClusterRole")}
    cluster: Grants = {}
    for b in by_kind(docs, "ClusterRoleBinding"):
        if subject in b["subjects"]:
            cluster = grants(cluster_roles[b["roleRef"]["name"]]["rules"])
    (deployment,) = by_kind(docs, "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    watched = [a.split("=", 1)[1] for a in args if a.startswith("--namespace=")]
    if not watched:
        return [f"all namespaces: {line}" for line in compare(cluster, used())]
    out = [f"ClusterRole: {line}" for line in compare(cluster, CLUSTER_WIDE)]

    def local(ns: str) -> Grants:
        out: Grants = {}
        for b in by_kind(docs, "RoleBinding"):
            if b["metadata"]["namespace"] == ns and subject in b["subjects"]:
                for key, verbs in grants(roles[(ns, b["roleRef"]["name"])]["rules"]).items():
                    out.setdefault(key, set()).update(verbs)
        return out

    for ns in watched:
        mine = local(ns)
        both = {k: mine.get(k, set()) | cluster.get(k, set()) for k in set(mine) | set(cluster)}
        out += [f"namespace {ns}: {line}" for line in compare(both, used())]
    exporters = [a.split("=", 1)[1] for a in args if a.startswith("--exporter-namespace=")]
    for ns in set(exporters) - set(watched):
        out += [f"exporter namespace {ns}: {line}"
                for line in compare(local(ns), {("", "pods"): {"list"}})]
    return out


def operator_roles(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ClusterRoles of the operator, without the two aggregated into view/edit for users
    (tests/charts/test_aggregated_roles.py)."""
    return [r for r in by_kind(docs, "ClusterRole")
            if not any(k.startswith("rbac.authorization.k8s.io/aggregate-to-")
                       for k in r["metadata"].get("labels", {}))]


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = by_kind(docs, "Deployment")
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(c)


# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [{}, {"watchNamespaces": ["team-a", "team-b"]}])
def test_helm_lint(values: dict[str, Any]) -> None:
    out = helm("lint", "--strict", str(CHART), *set_args(values))
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout


def test_default_values_watch_every_namespace_with_one_cluster_role() -> None:
    docs = render()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding",
                     "Deployment", "Service", "ServiceAccount", "ValidatingAdmissionPolicy",
                     "ValidatingAdmissionPolicyBinding"]
    assert rbac_problems(docs) == []
    (role,) = operator_roles(docs)
    assert role["metadata"]["name"] == "llmbench-operator"

    (deployment,) = by_kind(docs, "Deployment")
    assert deployment["metadata"]["namespace"] == "llmbench-system"
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "llmbench-operator"
    assert pod["securityContext"] == {"runAsNonRoot": True,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    c = container(docs)
    assert c["image"] == "ghcr.io/llmbench/llmbench:0.1.0"
    assert "command" not in c  # the image's entrypoint is `llmbench`
    assert c["args"] == [
        "operator", "--all-namespaces", "--runner-image=ghcr.io/llmbench/llmbench:0.1.0",
        '--runner-pod-defaults={"podAnnotations":{"linkerd.io/inject":"disabled",'
        '"sidecar.istio.io/inject":"false"}}',
        "--admission-policy=llmbench-operator",
        "--liveness=http://0.0.0.0:8080/healthz", "--retry-delay=3", "--resync-interval=30",
        "--unschedulable-deadline=600", "--leader-election-namespace=llmbench-system",
        "--leader-election-name=llmbench-operator", "--metrics-port=9090",
    ]
    assert c["ports"] == [{"name": "healthz", "containerPort": 8080, "protocol": "TCP"},
                          {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}]
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": "healthz"}
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
        "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert c["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]


def test_a_namespaced_install_has_a_role_in_each_watched_namespace() -> None:
    docs = render("bench", "ops", watchNamespaces=["team-a", "team-b"],
                  **{"runner.image": "registry.local/llmbench:dev", "liveness.port": 9091})
    assert rbac_problems(docs) == []
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in by_kind(docs, "Role")}
    assert set(roles) == {("team-a", "bench-llmbench-operator"),
                          ("team-b", "bench-llmbench-operator"),
                          ("ops", "bench-llmbench-operator-leader")}
    # the leader-election Lease in the release's namespace, and nothing else there
    assert grants(roles[("ops", "bench-llmbench-operator-leader")]["rules"]) == {
        ("coordination.k8s.io", "leases"): {"create", "get", "patch"}}
    assert "--leader-election-namespace=ops" in container(docs)["args"]
    bindings = by_kind(docs, "RoleBinding")
    assert {b["metadata"]["namespace"] for b in bindings} == {"team-a", "team-b", "ops"}
    for b in bindings:
        if b["metadata"]["namespace"] == "ops":
            assert b["roleRef"]["name"] == "bench-llmbench-operator-leader"
            continue
        assert b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                "name": "bench-llmbench-operator"}
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "bench-llmbench-operator",
                                  "namespace": "ops"}]
    (cluster_role,) = operator_roles(docs)
    assert cluster_role["metadata"]["name"] == "bench-llmbench-operator-ops"
    assert grants(cluster_role["rules"]) == CLUSTER_WIDE
    c = container(docs)
    assert c["args"][:3] == ["operator", "--namespace=team-a", "--namespace=team-b"]
    assert "--all-namespaces" not in c["args"]
    assert "--runner-image=registry.local/llmbench:dev" in c["args"]
    assert "--liveness=http://0.0.0.0:9091/healthz" in c["args"]
    assert c["ports"][0]["containerPort"] == 9091


def test_exporter_namespaces_get_a_role_to_list_pods_and_no_cluster_wide_list() -> None:
    docs = render("bench", "ops", watchNamespaces=["team-a"],
                  exporterNamespaces=["gpu-operator", "team-a"])
    assert rbac_problems(docs) == []
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in by_kind(docs, "Role")}
    assert grants(roles[("gpu-operator", "bench-llmbench-operator-exporters")]["rules"]) == {
        ("", "pods"): {"list"}}
    (cluster_role,) = operator_roles(docs)
    assert ("", "pods") not in grants(cluster_role["rules"])
    args = container(docs)["args"]
    assert "--exporter-namespace=gpu-operator" in args
    # an all-namespaces install lists pods everywhere already: no Role, no flag
    docs = render(exporterNamespaces=["gpu-operator"])
    assert not by_kind(docs, "Role")
    assert not [a for a in container(docs)["args"] if a.startswith("--exporter-namespace")]


def test_metrics_port_0_turns_the_endpoint_and_its_container_port_off() -> None:
    c = container(render(**{"metrics.port": 0}))
    assert "--metrics-port=0" in c["args"]
    assert [p["name"] for p in c["ports"]] == ["healthz"]
    c = container(render(**{"metrics.port": 9400}))
    assert "--metrics-port=9400" in c["args"]
    assert {"name": "metrics", "containerPort": 9400, "protocol": "TCP"} in c["ports"]


@pytest.mark.parametrize(
    "file,rule,missing",
    [
        ("namespaced-rules.yaml", "leases", "namespace team-a: missing: leases.coordination"),
        ("namespaced-rules.yaml", "jobs", "namespace team-a: missing: jobs.batch"),
        ("cluster-rules.yaml", "nodes", "ClusterRole: missing: nodes ['get']"),
        ("cluster-rules.yaml", "validatingadmissionpolicies",
         "ClusterRole: missing: validatingadmissionpolicies.admissionregistration.k8s.io"),
    ],
)
def test_a_rule_removed_from_the_charts_rbac_source_fails_the_check(
    tmp_path: Path, file: str, rule: str, missing: str
) -> None:
    """The same check as above, on a copy of the chart with one rule taken out of its source:
    both install modes then report the call the code makes and the chart no longer allows."""
    chart = tmp_path / "llmbench-operator"
    shutil.copytree(CHART, chart, symlinks=False)
    source = chart / "files" / "rbac" / file
    rules = yaml.safe_load(source.read_text())
    kept = [r for r in rules if rule not in r["resources"]]
    assert len(kept) == len(rules) - 1
    source.write_text(yaml.safe_dump(kept))

    namespaced = rbac_problems(render("bench", "ops", chart=chart, watchNamespaces=["team-a"]))
    assert any(line.startswith(missing) for line in namespaced), namespaced
    everywhere = rbac_problems(render(chart=chart))
    assert any(line.startswith("all namespaces: missing: ") and rule in line
               for line in everywhere), everywhere


@pytest.mark.parametrize("file,args", [("operator-rbac.yaml", []),
                                       ("admission-policy.yaml", ["--admission"])])
def test_deploy_files_are_the_charts_output(file: str, args: list[str]) -> None:
    out = subprocess.run(
        ["bash", str(ROOT / "hack" / "render-rbac.sh"), *args], capture_output=True, text=True,
        timeout=120, check=False, env={**os.environ, "HELM": str(helm_binary())},
    )
    assert out.returncode == 0, out.stderr
    assert (ROOT / "deploy" / file).read_text() == out.stdout, (
        f"deploy/{file} is not the chart's output: "
        f"run bash hack/render-rbac.sh {' '.join(args)} > deploy/{file}"
    )


def policy_of(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    (policy,) = by_kind(docs, "ValidatingAdmissionPolicy")
    (binding,) = by_kind(docs, "ValidatingAdmissionPolicyBinding")
    return policy, binding


def variable(policy: dict[str, Any], name: str) -> str:
    return str(next(v["expression"] for v in policy["spec"]["variables"] if v["name"] == name))


def test_the_admission_policy_guards_creates_and_updates_of_benchmarks_and_denies() -> None:
    policy, binding = policy_of(render())
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["llmbench.io"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
         "resources": ["llmbenchmarks"]}]
    assert binding["spec"] == {"policyName": policy["metadata"]["name"],
                               "validationActions": ["Deny"]}
    messages = " ".join(v["messageExpression"] for v in policy["spec"]["validations"])
    for right in ("may not get secret", "may not create pods", "may not get services",
                  "may not list pods"):
        assert right in messages
    # the runner image is always allowed; nothing else by default
    assert yaml.safe_load(variable(policy, "allowedImages")) == [
        "ghcr.io/llmbench/llmbench:0.1.0"]
    # the operator is told where to look for it
    assert f"--admission-policy={policy['metadata']['name']}" in container(render())["args"]


def test_allowed_runner_images_reach_the_policy_as_string_literals_and_the_operator() -> None:
    allowed = ["registry.local/llmbench/*", 'odd"name']
    docs = render(**{"runner.allowedImages": allowed, "runner.image": "registry.local/r:1"})
    policy, _ = policy_of(docs)
    # a JSON list of strings is a CEL list literal: an entry can never become an expression
    assert yaml.safe_load(variable(policy, "allowedImages")) == ["registry.local/r:1", *allowed]
    args = container(docs)["args"]
    assert "--allowed-runner-images=registry.local/llmbench/*" in args
    assert '--allowed-runner-images=odd"name' in args


def test_the_runner_pod_values_reach_the_operator_as_defaults_it_accepts() -> None:
    docs = render(**{"runner.imagePullSecrets": ["team-registry"],
                     "runner.podLabels.team": "platform",
                     "runner.priorityClassName": "batch-low",
                     "runner.nodeSelector.pool": "benchmarks",
                     "runner.podAnnotations.linkerd\\.io/inject": None})
    (arg,) = [a for a in container(docs)["args"] if a.startswith("--runner-pod-defaults=")]
    pod = runner_pod_defaults(arg.partition("=")[2])
    assert pod.image_pull_secrets == ["team-registry"]
    assert pod.pod_labels == {"team": "platform"}
    assert pod.priority_class_name == "batch-low"
    assert pod.node_selector == {"pool": "benchmarks"}
    # a default dropped with null is gone; the other sidecar switch stays
    assert pod.pod_annotations == {"sidecar.istio.io/inject": "false"}


def test_a_namespaced_install_binds_its_policy_to_its_namespaces_only() -> None:
    policy, binding = policy_of(render("bench", "ops", watchNamespaces=["team-a", "team-b"]))
    assert policy["metadata"]["name"] == "bench-llmbench-operator-ops"
    assert binding["spec"]["matchResources"] == {"namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}
    ]}}


def test_without_the_policy_the_operator_is_told_which_namespaces_it_trusts() -> None:
    docs = render(**{"admission.policy": False, "admission.trustedNamespaces": ["lab"]})
    assert not by_kind(docs, "ValidatingAdmissionPolicy")
    args = container(docs)["args"]
    assert not [a for a in args if a.startswith("--admission-policy")]
    assert "--trust-namespace=lab" in args


def test_the_chart_ships_the_repositorys_crd(tmp_path: Path) -> None:
    """crds/ in the chart is the generated CRD (a symlink, which helm packages as the file)."""
    assert CHART_CRD.read_bytes() == REPO_CRD.read_bytes()
    helm("package", str(CHART), "--destination", str(tmp_path))
    (archive,) = tmp_path.glob("llmbench-operator-*.tgz")
    with tarfile.open(archive) as tar:
        member = tar.extractfile("llmbench-operator/crds/llmbench.io_llmbenchmarks.yaml")
        assert member is not None
        assert member.read() == REPO_CRD.read_bytes()
    # the packaged chart renders the CRD with --include-crds
    out = helm("template", "x", str(archive), "--include-crds").stdout
    crds = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "CustomResourceDefinition"]
    assert [c["metadata"]["name"] for c in crds] == ["llmbenchmarks.llmbench.io"]


@pytest.mark.parametrize(
    "args,named",
    [
        (["--set", "replicas=x"], "at '/replicas': got string, want integer"),
        (["--set", "image.tag=5"], "at '/image/tag': got number, want string"),
        (["--set", "replicas=-1"], "at '/replicas': minimum: got -1, want 0"),
        (["--set", "watchNamespaces={Bad_NS}"], "at '/watchNamespaces/0': 'Bad_NS' does not match"),
        (["--set", "watchNamespace=team-a"], "additional properties 'watchNamespace' not allowed"),
        (["--set", "image.pullPolicy=Sometimes"], "at '/image/pullPolicy': value must be one of"),
        (["--set", "liveness.port=0"], "at '/liveness/port': minimum: got 0, want 1"),
        (["--set", "resources.limits.memory=lots"], "at '/resources/limits/memory'"),
        (["--set", "serviceAccount.create=yes"], "at '/serviceAccount/create': got string"),
    ],
)
def test_invalid_values_fail_naming_the_value(args: list[str], named: str) -> None:
    out = helm("template", "x", str(CHART), *args, check=False)
    assert out.returncode != 0
    assert "values don't meet the specifications of the schema" in out.stderr
    assert named in out.stderr, out.stderr


def test_an_invalid_values_file_fails_naming_the_value(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("replicas: one\nimage:\n  tag: 5\n")
    out = helm("template", "x", str(CHART), "-f", str(values), check=False)
    assert out.returncode != 0
    assert "at '/replicas'" in out.stderr and "at '/image/tag'" in out.stderr, out.stderr



def test_the_runner_network_policy_is_off_by_default_and_confines_the_runner_pods() -> None:
    from llmbench.api import Spec
    from llmbench.operator.build import Placement, runner_job

    assert by_kind(render(), "NetworkPolicy") == []
    targets = [{"to": [{"podSelector": {"matchLabels": {"app": "vllm"}}}],
                "ports": [{"protocol": "TCP", "port": 8000}]}]
    docs = render(**{"runner.networkPolicy.enabled": True, "watchNamespaces": ["team-a", "b"],
                     "runner.networkPolicy.apiServer.cidrs": ["10.96.0.1/32"],
                     "runner.networkPolicy.targets": targets})
    policies = by_kind(docs, "NetworkPolicy")
    assert [p["metadata"]["namespace"] for p in policies] == ["team-a", "b"]
    spec = policies[0]["spec"]
    assert spec["policyTypes"] == ["Egress"]
    dns, api, target = spec["egress"]
    assert {p["port"] for p in dns["ports"]} == {53}
    assert dns["to"] == [{"namespaceSelector": {}, "podSelector": {"matchLabels": {
        "k8s-app": "kube-dns"}}}]
    assert api == {"to": [{"ipBlock": {"cidr": "10.96.0.1/32"}}],
                   "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]}
    assert target == targets[0]
    # it selects the pods of the operator's runner Jobs (their template's labels)
    bench = {"apiVersion": "llmbench.io/v1alpha1", "kind": "LLMBenchmark",
             "metadata": {"name": "b", "namespace": "team-a", "uid": "u"},
             "spec": {"target": {"url": "http://vllm:8000"}}}
    job = runner_job(bench, 1, Spec.from_manifest(bench), Placement())
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    assert spec["podSelector"]["matchLabels"].items() <= pod_labels.items()
    # explicit namespaces win; none at all is an error naming the values
    docs = render(**{"runner.networkPolicy.enabled": True,
                     "runner.networkPolicy.namespaces": ["c"]})
    assert [p["metadata"]["namespace"] for p in by_kind(docs, "NetworkPolicy")] == ["c"]
    out = helm("template", "x", str(CHART), "--set", "runner.networkPolicy.enabled=true",
               check=False)
    assert out.returncode != 0 and "runner.networkPolicy.namespaces or watchNamespaces" in (
        out.stderr)
