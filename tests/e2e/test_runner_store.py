"""The runner's ConfigMap client against a real API server, with the runner's own token.

The operator's builders make the run's ConfigMap, ServiceAccount, Role (``get``/``update``/
``patch`` on that one ConfigMap, by ``resourceNames``) and RoleBinding; the token comes from
the TokenRequest API, as the kubelet would mount it. With it, :class:`ConfigMapStore` reads the
spec and merges results in, and the same token is refused (403) a Secret and any other
ConfigMap: the runner can write only its own results.
"""

from __future__ import annotations

import base64
import json
import ssl
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from llmbench.api import Spec
from llmbench.api.job import (
    CHECKPOINT_KEY,
    CONTEXT_KEY,
    DIGEST_KEY,
    ENV_API_KEY,
    SPEC_KEY,
    SUMMARY_KEY,
    RunContext,
    point_key,
    point_name_of,
)
from llmbench.api.status import RunDigest
from llmbench.operator.build import (
    results_configmap,
    runner_role,
    runner_role_binding,
    runner_service_account,
)
from llmbench.runner.job.store import ConfigMapStore, StoreError

pytestmark = pytest.mark.e2e


def api_server(kubeconfig: Path) -> tuple[str, bytes]:
    """The API server's URL and CA certificate (PEM) from the admin kubeconfig."""
    doc = yaml.safe_load(kubeconfig.read_text())
    cluster = doc["clusters"][0]["cluster"]
    if "certificate-authority-data" in cluster:
        ca = base64.b64decode(cluster["certificate-authority-data"])
    else:
        path = Path(cluster["certificate-authority"])
        ca = (path if path.is_absolute() else kubeconfig.parent / path).read_bytes()
    return cluster["server"].rstrip("/"), ca


def without_owner(obj: dict[str, Any]) -> dict[str, Any]:
    """The builders' objects minus their ownerReference (no benchmark object exists here, and
    the garbage collector would delete children of a missing owner)."""
    obj["metadata"].pop("ownerReferences", None)
    return obj


def test_runner_token_writes_only_its_configmap(k8s: Any, namespace: str, tmp_path: Path) -> None:
    bench = {"metadata": {"name": "bench", "namespace": namespace, "uid": str(uuid.uuid4())}}
    spec = Spec.from_manifest({"target": {"url": "http://nothing.invalid:9", "model": "m"}})
    ctx = RunContext(benchmark="bench", namespace=namespace, url="http://nothing.invalid:9")
    objects = [
        without_owner(build(bench, 1))
        for build in (runner_service_account, runner_role, runner_role_binding)
    ]
    cm = without_owner(results_configmap(bench, 1, spec, ctx))
    name = cm["metadata"]["name"]
    other = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "someone-else", "namespace": namespace}, "data": {"a": "1"}}
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "api-key", "namespace": namespace},
              "stringData": {"key": "s3cret"}}
    k8s.apply([cm, *objects, other, secret], namespace)

    token = k8s.core.create_namespaced_service_account_token(
        name, namespace,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"expirationSeconds": 600}},
    ).status.token
    server, ca = api_server(k8s.kubeconfig)
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text(token)
    (sa / "ca.crt").write_bytes(ca)

    store = ConfigMapStore(name, namespace, server=server, service_account_dir=sa)
    data = store.read()
    assert json.loads(data[SPEC_KEY]) == spec.to_dict()
    assert RunContext.model_validate_json(data[CONTEXT_KEY]) == ctx
    store.write({DIGEST_KEY: '{"done":1}', point_key("m-chat-concurrency1"): "{}"})
    store.write({DIGEST_KEY: '{"done":2}'})
    seen = k8s.get("configmap", name, namespace)["data"]
    assert seen[DIGEST_KEY] == '{"done":2}' and seen[point_key("m-chat-concurrency1")] == "{}"
    assert seen[SPEC_KEY] == data[SPEC_KEY]  # a merge patch leaves the operator's keys alone

    for op in (lambda s: s.read(), lambda s: s.write({"x": "y"})):
        with pytest.raises(StoreError) as err:
            op(ConfigMapStore("someone-else", namespace, server=server, service_account_dir=sa))
        assert err.value.status == 403
        assert f"ConfigMap {namespace}/someone-else" in str(err.value) and token not in str(
            err.value
        )
    assert k8s.get("configmap", "someone-else", namespace)["data"] == {"a": "1"}

    tls = ssl.create_default_context(cafile=str(sa / "ca.crt"))
    with httpx.Client(verify=tls, headers={"Authorization": f"Bearer {token}"},
                      timeout=30) as client:
        for path in (f"/api/v1/namespaces/{namespace}/secrets/api-key",
                     f"/api/v1/namespaces/{namespace}/secrets",
                     f"/api/v1/namespaces/{namespace}/configmaps"):
            assert client.get(server + path).status_code == 403, path
        created = client.post(
            server + f"/api/v1/namespaces/{namespace}/configmaps",
            json={"metadata": {"name": "new-one"}, "data": {}},
        )
        assert created.status_code == 403


def sim_behind_a_service(k8s: Any, namespace: str, key: str) -> str:
    """``llmbench sim`` (the built image) with an API key, behind Service ``sim``; its URL."""
    labels = {"app": "sim"}
    k8s.apply([
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "sim", "namespace": namespace, "labels": labels},
         "spec": {"containers": [{
             "name": "sim", "image": k8s.image("llmbench"),
             "args": ["sim", "--host", "0.0.0.0", "--port", "8000", "--ttft-ms", "10",
                      "--itl-ms", "2", "--api-key", key],
             "ports": [{"containerPort": 8000}],
             "readinessProbe": {"tcpSocket": {"port": 8000}, "periodSeconds": 1}}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "sim", "namespace": namespace},
         "spec": {"selector": labels, "ports": [{"port": 8000}]}},
    ])
    k8s.wait_for("the sim pod to be Ready", lambda: any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (k8s.get("pod", "sim", namespace) or {}).get("status", {}).get("conditions") or []
    ), 90, diag=lambda: k8s.describe(namespace))
    # the Service routes once its EndpointSlice names the Ready pod and each node's kube-proxy
    # has synced; the runner tries a refused connection again for the rest (ROUTE_WAIT_S)
    k8s.wait_for("the sim's EndpointSlice to list it ready", lambda: any(
        (e.get("conditions") or {}).get("ready")
        for sl in json.loads(k8s.kubectl(
            "get", "endpointslices", "-n", namespace, "-l", "kubernetes.io/service-name=sim",
            "-o", "json").stdout)["items"]
        for e in sl.get("endpoints") or []
    ), 60, diag=lambda: k8s.describe(namespace))
    return f"http://sim.{namespace}.svc:8000"


def run_runner_pod(k8s: Any, namespace: str, name: str) -> dict[str, Any]:
    """``llmbench job`` in a pod as the Job runs it (the run's ServiceAccount, the API key
    from Secret ``api-key``), until it ends; the pod."""
    k8s.apply({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "runner", "namespace": namespace},
        "spec": {
            "serviceAccountName": name, "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
            "containers": [{
                "name": "runner", "image": k8s.image("llmbench"),
                "args": ["job", "--configmap", name, "--namespace", namespace,
                         "--artifact-dir", "/results"],
                "env": [{"name": ENV_API_KEY, "valueFrom": {
                    "secretKeyRef": {"name": "api-key", "key": "key"}}}],
                "securityContext": {"readOnlyRootFilesystem": True,
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [{"name": "results", "mountPath": "/results"},
                                 {"name": "tmp", "mountPath": "/tmp"}],
            }],
            "volumes": [{"name": "results", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
        },
    })
    pod = k8s.wait_for(
        "the runner pod to finish",
        lambda: (p := k8s.get("pod", "runner", namespace))
        and p["status"].get("phase") in ("Succeeded", "Failed") and p,
        240, diag=lambda: k8s.describe(namespace),
    )
    return dict(pod)


def sweep_objects(k8s: Any, namespace: str, key: str, **data: str) -> str:
    """A two-point sweep's results ConfigMap (plus ``data``), its runner identity and the
    API key Secret, against ``llmbench sim`` behind a Service; the ConfigMap's name."""
    url = sim_behind_a_service(k8s, namespace, key)
    bench = {"metadata": {"name": "sweep", "namespace": namespace, "uid": str(uuid.uuid4())}}
    spec = Spec.from_manifest({
        "target": {"url": url, "apiKeySecretRef": {"name": "api-key", "key": "key"}},
        "workload": {"inputTokens": {"mean": 16}, "outputTokens": {"mean": 8}},
        "load": {"requestCount": 6, "warmupRequestCount": 1},
        "sweep": {"type": "concurrency", "values": [1.0, 2.0]},
    })
    ctx = RunContext(benchmark="sweep", namespace=namespace, url=url,
                     api_key_env=ENV_API_KEY, server_metrics="off")
    objects = [without_owner(o) for o in (
        results_configmap(bench, 1, spec, ctx), runner_service_account(bench, 1),
        runner_role(bench, 1), runner_role_binding(bench, 1),
    )]
    cm = objects.pop(0)
    cm["data"].update(data)
    # created, not applied: kubectl apply would copy a large map into an annotation
    k8s.core.create_namespaced_config_map(namespace, cm)
    objects.append({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "api-key", "namespace": namespace},
                    "stringData": {"key": key}})
    k8s.apply(objects, namespace)
    return str(cm["metadata"]["name"])


def test_job_cli_sweeps_into_its_configmap(k8s: Any, namespace: str) -> None:
    """``llmbench job`` as the Job runs it: the built image in a pod with the runner's
    ServiceAccount token (mounted by the kubelet) and the API key from a Secret; a two-point
    sweep against ``llmbench sim`` behind a Service ends as results in the ConfigMap."""
    key = "sk-e2e-runner-key-5a4b3c2d1e"
    name = sweep_objects(k8s, namespace, key)
    pod = run_runner_pod(k8s, namespace, name)
    logs = k8s.kubectl("logs", "runner", "-n", namespace).stdout
    assert pod["status"]["phase"] == "Succeeded", logs[-3000:]
    data = k8s.get("configmap", name, namespace)["data"]
    digest = RunDigest.model_validate_json(data[DIGEST_KEY])
    assert (digest.done, digest.total, digest.finished, digest.failed) == (2, 2, True, None)
    points = sorted(k for k in data if point_name_of(k) is not None)
    assert points == sorted(point_key(p.name) for p in digest.points)
    assert json.loads(data[CHECKPOINT_KEY])["complete"] is True
    assert data[SUMMARY_KEY].startswith("Config Name,Concurrency,ISL")  # analyze's CSV
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"].get("message", "")
    token = k8s.core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 600}}).status.token
    for text in (*data.values(), logs, term):
        assert key not in text and token not in text


def test_results_the_configmap_cannot_hold_end_the_runner_with_exit_1(
    k8s: Any, namespace: str
) -> None:
    """A ConfigMap already near the API server's 1 MiB (padding standing in for many points'
    results): the first point's write is refused for size, and the runner says so and exits 1
    instead of measuring on with nowhere to put the results (issue 21)."""
    name = sweep_objects(k8s, namespace, "sk-e2e-bounds", **{"padding": "x" * 1_040_000})
    pod = run_runner_pod(k8s, namespace, name)
    logs = k8s.kubectl("logs", "runner", "-n", namespace).stdout
    state = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (pod["status"]["phase"], state["exitCode"]) == ("Failed", 1), logs[-3000:]
    assert "results exceed the ConfigMap (" in logs and "bytes" in logs, logs[-3000:]
    digest = RunDigest.model_validate_json(state["message"])
    assert digest.failed is not None and "results exceed the ConfigMap" in digest.failed
