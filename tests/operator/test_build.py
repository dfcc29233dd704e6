"""The objects a run owns: names, ownership, least privilege, placement, the runner's pod."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmbench.api import Spec
from llmbench.api.job import CONTEXT_KEY, ENV_API_KEY, SPEC_KEY, RunContext, run_name
from llmbench.api.spec.runner import RunnerPod
from llmbench.operator.build import (
    DEFAULT_RUNNER_POD,
    LABEL_ACTIVE,
    LABEL_BENCHMARK,
    RUNNER_UID,
    Placement,
    affinity,
    artifacts_location,
    default_deadline,
    job_pods,
    lease_name,
    owns,
    pod_settings,
    run_objects,
    runner_job,
    runner_pod_defaults,
    runner_role,
    runner_role_binding,
    target_lease,
    tolerations,
)

BENCH: dict[str, Any] = {
    "apiVersion": "llmbench.io/v1alpha1",
    "kind": "LLMBenchmark",
    "metadata": {"name": "sweep", "namespace": "llm", "uid": "u-1", "generation": 1},
    "spec": {
        "target": {
            "url": "http://10.0.0.5:8000",
            "podSelector": {"matchLabels": {"app": "vllm"}},
            "apiKeySecretRef": {"name": "vllm-key", "key": "token"},
        },
        "sweep": {"type": "concurrency", "range": "1:8"},
    },
}
GPU_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
WHERE = Placement({"matchLabels": {"app": "vllm"}}, "llm", [GPU_TAINT])


def spec(**overrides: Any) -> Spec:
    body = {**BENCH["spec"], **overrides}
    return Spec.from_manifest(body, namespace="llm")


def ctx() -> RunContext:
    return RunContext(benchmark="sweep", namespace="llm", run=2, url="http://10.0.0.5:8000")


def test_every_object_is_owned_and_named_for_the_run() -> None:
    objs = run_objects(BENCH, 2, spec(), ctx(), WHERE)
    assert [o["kind"] for o in objs] == [
        "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "Job",
    ]
    for o in objs:
        meta = o["metadata"]
        assert meta["name"] == "sweep-run-2" == run_name("sweep", 2)
        assert meta["namespace"] == "llm"
        assert meta["labels"][LABEL_BENCHMARK] == "sweep"
        (owner,) = meta["ownerReferences"]
        assert owner == {
            "apiVersion": "llmbench.io/v1alpha1", "kind": "LLMBenchmark", "name": "sweep",
            "uid": "u-1", "controller": True, "blockOwnerDeletion": True,
        }


def test_run_name_fits_a_label_value() -> None:
    name = run_name("x" * 80, 12)
    assert len(name) <= 63 and name.endswith("-run-12")


def test_names_that_share_a_long_prefix_get_distinct_children() -> None:
    """Cut to 63 characters, two names sharing their first 57 would name the same Job."""
    a, b = "p" * 57 + "-one", "p" * 57 + "-two"
    names = {run_name(a, 1), run_name(b, 1)}
    assert len(names) == 2 and all(len(n) == 63 and n.endswith("-run-1") for n in names)
    assert run_name(a, 1) == run_name(a, 1)  # deterministic: 409 still means "made before"
    # a name that fits is kept as written (what users and kubectl look for)
    assert run_name("p" * 57, 1) == "p" * 57 + "-run-1"
    # the suffix grows with the run number; the hash stays
    assert run_name(a, 1)[:-len("-run-1")][-8:] == run_name(a, 1000)[:-len("-run-1000")][-8:]


def test_the_configmap_carries_the_spec_and_the_context() -> None:
    cm = run_objects(BENCH, 2, spec(), ctx(), WHERE)[0]
    assert cm["metadata"]["labels"][LABEL_ACTIVE] == "true"  # watched while the run lasts
    assert all(LABEL_ACTIVE not in o["metadata"]["labels"]
               for o in run_objects(BENCH, 2, spec(), ctx(), WHERE)[1:])
    assert Spec.from_manifest(json.loads(cm["data"][SPEC_KEY])).to_dict() == spec().to_dict()
    assert RunContext.model_validate_json(cm["data"][CONTEXT_KEY]).url == "http://10.0.0.5:8000"


def test_the_runner_role_grants_only_its_configmap() -> None:
    role = runner_role(BENCH, 2)
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["sweep-run-2"],
            "verbs": ["get", "update", "patch"],
        }
    ]
    rb = runner_role_binding(BENCH, 2)
    assert rb["roleRef"]["name"] == "sweep-run-2"
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "sweep-run-2", "namespace": "llm"}]


def test_the_runner_pod_is_locked_down_and_requests_no_gpu() -> None:
    job = runner_job(BENCH, 2, spec(), WHERE, image="llmbench:test")
    pod = job["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == "llmbench:test"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert pod["serviceAccountName"] == "sweep-run-2"
    for kind in ("requests", "limits"):
        assert set(c["resources"][kind]) == {"cpu", "memory"}
    assert {"name": "results", "emptyDir": {}} in pod["volumes"]
    assert pod["restartPolicy"] == "Never"
    assert c["args"][:3] == ["job", "--configmap", "sweep-run-2"]


def test_the_api_key_reaches_the_runner_only_through_secret_key_ref() -> None:
    c = runner_job(BENCH, 1, spec(), WHERE)["spec"]["template"]["spec"]["containers"][0]
    keyed = [e for e in c["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    assert keyed == [
        {"name": ENV_API_KEY, "valueFrom": {"secretKeyRef": {"name": "vllm-key", "key": "token"}}}
    ]
    assert all(e["value"].startswith("/tmp") for e in c["env"] if "value" in e)
    no_key = spec(target={"url": "http://10.0.0.5:8000"})
    c = runner_job(BENCH, 1, no_key, WHERE)["spec"]["template"]["spec"]["containers"][0]
    assert not [e for e in c["env"] if "secretKeyRef" in e.get("valueFrom", {})]


@pytest.mark.parametrize(
    ("mode", "key"),
    [("SameNode", "kubernetes.io/hostname"), ("SameZone", "topology.kubernetes.io/zone")],
)
def test_placement_is_required_pod_affinity_to_the_inference_pods(mode: str, key: str) -> None:
    job = runner_job(BENCH, 1, spec(placement=mode), WHERE)
    terms = job["spec"]["template"]["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms == [
        {"labelSelector": {"matchLabels": {"app": "vllm"}}, "topologyKey": key,
         "namespaces": ["llm"]}
    ]


def test_any_placement_and_no_selector_mean_no_affinity() -> None:
    assert "affinity" not in runner_job(BENCH, 1, spec(placement="Any"), WHERE)["spec"][
        "template"]["spec"]
    assert affinity("SameNode", Placement(None, "llm")) is None


def test_the_gpu_taints_of_the_target_nodes_are_tolerated_once_each() -> None:
    taints = [GPU_TAINT, GPU_TAINT, {"key": "pool", "value": "a", "effect": "NoExecute"},
              {"key": "soft", "effect": "Unknown"}]
    assert tolerations(taints) == [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule", "operator": "Exists"},
        {"key": "pool", "effect": "NoExecute", "operator": "Equal", "value": "a"},
    ]


def test_runner_block_sets_deadline_retries_and_resources() -> None:
    s = spec(runner={"timeoutSeconds": 900, "backoffLimit": 1, "limits": {"memory": "4Gi"},
                     "image": "registry.local/llmbench:dev"})
    job = runner_job(BENCH, 1, s, WHERE)
    assert job["spec"]["activeDeadlineSeconds"] == 900
    assert job["spec"]["backoffLimit"] == 1
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert c["resources"]["limits"] == {"cpu": "2", "memory": "4Gi"}
    assert c["image"] == "registry.local/llmbench:dev"
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[0]["action"] == "FailJob" and rules[0]["onExitCodes"]["values"] == [1, 2]


def test_an_artifacts_claim_is_mounted_and_the_runner_writes_its_run_folder_there() -> None:
    s = spec(artifacts={"pvc": {"claimName": "bench-files", "subPath": "nightly"}})
    pod = runner_job(BENCH, 3, s, WHERE)["spec"]["template"]["spec"]
    assert {"name": "artifacts",
            "persistentVolumeClaim": {"claimName": "bench-files"}} in pod["volumes"]
    c = pod["containers"][0]
    assert {"name": "artifacts", "mountPath": "/artifacts",
            "subPath": "nightly"} in c["volumeMounts"]
    args = c["args"]
    assert args[args.index("--persist-dir") + 1] == "/artifacts/sweep/run-3"
    # where status.history says the files are: the same folder, seen from the volume
    assert artifacts_location(s, "sweep", 3) == "pvc/bench-files/nightly/sweep/run-3"
    # still non-root; fsGroup makes the volume writable by the runner's group
    assert pod["securityContext"]["fsGroup"] == RUNNER_UID
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    root = spec(artifacts={"pvc": {"claimName": "bench-files"}})
    c = runner_job(BENCH, 3, root, WHERE)["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "artifacts", "mountPath": "/artifacts"} in c["volumeMounts"]
    assert artifacts_location(root, "sweep", 3) == "pvc/bench-files/sweep/run-3"
    plain = runner_job(BENCH, 3, spec(), WHERE)["spec"]["template"]["spec"]
    assert "--persist-dir" not in plain["containers"][0]["args"]
    assert [v["name"] for v in plain["volumes"]] == ["results", "tmp"]
    assert artifacts_location(spec(), "sweep", 3) is None


def test_the_lease_is_per_endpoint_and_names_its_holder() -> None:
    a = target_lease(BENCH, "http://10.0.0.5:8000", "2026-01-01T00:00:00.000000Z")
    assert a["metadata"]["name"] == lease_name("http://10.0.0.5:8000")
    assert lease_name("http://10.0.0.5:8000") != lease_name("http://10.0.0.6:8000")
    assert a["spec"]["holderIdentity"] == "llm/sweep"
    assert a["metadata"]["ownerReferences"][0]["controller"] is False


def test_only_a_child_named_by_status_and_owned_by_the_benchmark_is_its_own() -> None:
    job = runner_job(BENCH, 2, spec(), WHERE)
    assert owns(BENCH, job, "sweep-run-2")
    assert not owns(BENCH, job, None) and not owns(BENCH, job, "sweep-run-1")
    forged = {**job, "metadata": {**job["metadata"], "ownerReferences": []}}
    assert not owns(BENCH, forged, "sweep-run-2")  # labelled for the run, owned by nobody
    other = {**job["metadata"]["ownerReferences"][0], "uid": "u-other"}
    assert not owns(BENCH, {"metadata": {**job["metadata"], "ownerReferences": [other]}},
                    "sweep-run-2")
    not_controller = {**job["metadata"]["ownerReferences"][0], "controller": False}
    assert not owns(BENCH, {"metadata": {**job["metadata"], "ownerReferences": [not_controller]}},
                    "sweep-run-2")


def test_only_the_pods_the_runs_job_made_are_its_runner_pods() -> None:
    job = {**runner_job(BENCH, 2, spec(), WHERE)}
    job["metadata"] = {**job["metadata"], "uid": "job-uid"}
    labels = job["spec"]["template"]["metadata"]["labels"]

    def pod(name: str, *refs: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": labels, "ownerReferences": list(refs)}}

    made = {"apiVersion": "batch/v1", "kind": "Job", "name": "sweep-run-2", "uid": "job-uid",
            "controller": True}
    pods = [
        pod("runner-0", made),
        pod("forged"),  # the run's labels, no owner
        pod("other-job", {**made, "uid": "another-job"}),
        pod("not-controller", {**made, "controller": False}),
        pod("not-a-job", {**made, "kind": "ReplicaSet"}),
        pod("runner-1", made),
    ]
    assert [p["metadata"]["name"] for p in job_pods(pods, job)] == ["runner-0", "runner-1"]
    assert job_pods(pods, None) == [] and job_pods(pods, {"metadata": {}}) == []


def test_without_timeout_seconds_the_job_gets_a_deadline_from_the_sweeps_size() -> None:
    s = spec(sweep={"type": "concurrency", "values": [1, 2, 4]}, repetitions=2)
    assert runner_job(BENCH, 1, s, WHERE)["spec"]["activeDeadlineSeconds"] == 600 + 6 * 1800
    assert default_deadline(s) == 11400
    # a two-axis sweep runs every value once per workload: 3 x 2 x 2 point runs
    grid = spec(sweep={"type": "concurrency", "values": [1, 2, 4],
                       "workloads": [{"inputTokens": 8, "outputTokens": 8},
                                     {"inputTokens": 64, "outputTokens": 8}]}, repetitions=2)
    assert grid.point_runs() == 12 and default_deadline(grid) == 600 + 12 * 1800
    # a time-bound point longer than the allowance: twice it plus one request timeout
    long = spec(load={"measurementDurationSeconds": 3600},
                target={"url": "http://m:8000", "model": "m", "requestTimeoutSeconds": 60})
    assert default_deadline(long) == 600 + len(long.points()) * (2 * 3600 + 60)
    # a ramp comes before the measurement: it counts as much
    ramped = spec(load={"concurrency": 8, "rampUpSeconds": 1200})
    assert default_deadline(ramped) == 600 + len(ramped.points()) * (2 * 1200 + 600)


def test_the_runner_pod_keeps_sidecars_out_by_default() -> None:
    pod = runner_job(BENCH, 1, spec(), WHERE)["spec"]["template"]
    assert pod["metadata"]["annotations"] == {
        "sidecar.istio.io/inject": "false", "linkerd.io/inject": "disabled"}
    for key in ("imagePullSecrets", "priorityClassName", "nodeSelector"):
        assert key not in pod["spec"]


def test_the_benchmarks_pod_knobs_merge_over_the_operators_and_never_over_its_labels() -> None:
    chart = runner_pod_defaults(json.dumps({
        "imagePullSecrets": ["team-registry"],
        "podLabels": {"team": "platform", "cost-center": "42"},
        "podAnnotations": {"sidecar.istio.io/inject": "false", "linkerd.io/inject": "disabled"},
        "priorityClassName": "batch-low",
        "nodeSelector": {"pool": "benchmarks", "arch": "amd64"},
    }))
    s = spec(runner={
        "imagePullSecrets": ["private-pull", "team-registry"],
        "podLabels": {"team": "inference"},
        "podAnnotations": {"sidecar.istio.io/inject": "true", "example.com/owner": "me"},
        "priorityClassName": "benchmarks",
        "nodeSelector": {"pool": "gpu-a"},
    })
    knobs = pod_settings(s.runner, chart)
    assert knobs.image_pull_secrets == ["team-registry", "private-pull"]
    assert knobs.labels == {"team": "inference", "cost-center": "42"}
    assert knobs.annotations == {"sidecar.istio.io/inject": "true",
                                 "linkerd.io/inject": "disabled", "example.com/owner": "me"}
    assert knobs.priority_class_name == "benchmarks"
    assert knobs.node_selector == {"pool": "gpu-a", "arch": "amd64"}
    job = runner_job(BENCH, 1, s, WHERE, pod=chart)
    template = job["spec"]["template"]
    pod = template["spec"]
    assert pod["imagePullSecrets"] == [{"name": "team-registry"}, {"name": "private-pull"}]
    assert pod["priorityClassName"] == "benchmarks"
    assert pod["nodeSelector"] == {"pool": "gpu-a", "arch": "amd64"}
    # the node selector narrows the placement: the pod affinity to the target stays
    assert pod["affinity"] == affinity("SameNode", WHERE)
    labels = template["metadata"]["labels"]
    assert labels["team"] == "inference" and labels[LABEL_BENCHMARK] == "sweep"
    assert labels["app.kubernetes.io/managed-by"] == "llmbench-operator"
    assert template["metadata"]["annotations"]["example.com/owner"] == "me"
    # the Job itself keeps only the operator's labels
    assert "team" not in job["metadata"]["labels"]
    # without defaults from the chart, the operator's own default is sidecars off
    assert pod_settings(RunnerPod(), DEFAULT_RUNNER_POD).annotations == {
        "sidecar.istio.io/inject": "false", "linkerd.io/inject": "disabled"}


def test_operator_defaults_obey_the_specs_rules_and_name_the_flag() -> None:
    with pytest.raises(ValueError, match="--runner-pod-defaults: .*llmbench.io/"):
        runner_pod_defaults('{"podLabels": {"llmbench.io/run": "1"}}')
    with pytest.raises(ValueError, match="--runner-pod-defaults: "):
        runner_pod_defaults('{"imagePullSecrets": "not-a-list"}')
    with pytest.raises(ValueError, match="--runner-pod-defaults: "):
        runner_pod_defaults("{not json")
    with pytest.raises(ValueError, match="runner.foo: unknown field"):
        runner_pod_defaults('{"foo": 1}')
    with pytest.raises(ValueError, match="app.kubernetes.io/managed-by"):
        runner_pod_defaults('{"podLabels": {"app.kubernetes.io/managed-by": "me"}}')
