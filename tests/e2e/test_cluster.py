"""The test cluster does what the operator relies on (issue 2, "Done when"; issue 19).

Each test runs against a real API server and real kubelets: the project's own cluster
(tests/cluster) or the one named by LLMBENCH_E2E_KUBECONFIG. Pods run the images
``hack/image/build.sh`` built (llm-d-inference-sim; llmbench, which has python); the scripts
inside them use only the Python standard library and the standard in-cluster paths.
"""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SIM_PORT = 8000


def terminated(pod: dict) -> dict | None:
    for cs in pod.get("status", {}).get("containerStatuses") or []:
        t = cs.get("state", {}).get("terminated")
        if t:
            return t
    return None


def job_condition(job: dict | None, ctype: str) -> bool:
    if not job:
        return False
    return any(
        c["type"] == ctype and c["status"] == "True"
        for c in job.get("status", {}).get("conditions") or []
    )


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


# ------------------------------------------------------------------------------------------
def test_kubectl_get_nodes(k8s):
    out = k8s.kubectl("get", "nodes").stdout
    assert "Ready" in out, out
    nodes = json.loads(k8s.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert nodes
    if k8s.local:
        gpu = [n for n in nodes if "nvidia.com/gpu" in n["status"]["allocatable"]]
        assert len(gpu) >= 2 and len(nodes) > len(gpu)
        for n in gpu:
            labels = n["metadata"]["labels"]
            assert labels["nvidia.com/gpu.count"] == n["status"]["capacity"]["nvidia.com/gpu"]
            assert labels["nvidia.com/gpu.product"]
            assert {"key": "nvidia.com/gpu", "effect": "NoSchedule"} in n["spec"]["taints"]
        assert len({n["metadata"]["labels"]["kubernetes.io/hostname"] for n in nodes}) == len(nodes)
        assert {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes} >= {
            "zone-a",
            "zone-b",
        }


def test_sim_on_gpu_node_and_affine_job_streams_chat(k8s, namespace):
    port = SIM_PORT
    sim_labels = {"app": "inference-sim", "test": namespace}
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "sim", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": sim_labels},
            "template": {
                "metadata": {"labels": sim_labels},
                "spec": {
                    "tolerations": [GPU_TOLERATION],
                    "containers": [
                        {
                            "name": "sim",
                            "image": k8s.image("sim"),
                            "args": [
                                "--model",
                                "e2e-model",
                                "--port",
                                str(port),
                                "--force-dummy-tokenizer",
                                "--mode",
                                "random",
                                "--time-to-first-token",
                                "20ms",
                                "--inter-token-latency",
                                "2ms",
                            ],
                            "ports": [{"name": "http", "containerPort": port}],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 1},
                        }
                    ],
                },
            },
        },
    }
    k8s.apply(deploy)
    selector = "app=inference-sim,test=" + namespace

    def ready_sim():
        pods = k8s.pods(namespace, selector)
        return [
            p
            for p in pods
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p["status"].get("conditions") or []
            )
        ]

    sim = k8s.wait_for(
        "the inference-sim pod to be Ready", ready_sim, 90, diag=lambda: k8s.describe(namespace)
    )[0]
    node = k8s.get("node", sim["spec"]["nodeName"])
    assert "nvidia.com/gpu" in node["status"]["allocatable"], "sim did not land on a GPU node"

    client_script = textwrap.dedent("""
        import http.client, json, os, sys
        conn = http.client.HTTPConnection(os.environ["SIM_HOST"], int(os.environ["SIM_PORT"]),
                                          timeout=30)
        body = {"model": "e2e-model", "stream": True, "max_tokens": 16,
                "messages": [{"role": "user", "content": "Hello from the runner"}]}
        conn.request("POST", "/v1/chat/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200, resp.status
        chunks, text, done = 0, "", False
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            choices = json.loads(data).get("choices") or []
            delta = choices[0].get("delta", {}).get("content") if choices else None
            if delta:
                chunks += 1
                text += delta
        msg = json.dumps({"chunks": chunks, "done": done, "chars": len(text)})
        open("/dev/termination-log", "w").write(msg)
        print(msg)
        sys.exit(0 if chunks > 0 and done else 3)
    """)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "bench", "namespace": namespace},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"app": "bench"}},
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": [GPU_TOLERATION],
                    "affinity": {
                        "podAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "labelSelector": {"matchLabels": sim_labels},
                                    "topologyKey": "kubernetes.io/hostname",
                                }
                            ]
                        }
                    },
                    "containers": [
                        {
                            "name": "client",
                            "image": k8s.image("llmbench"),
                            "command": ["python", "-c", client_script],
                            "env": [
                                {"name": "SIM_HOST", "value": sim["status"]["podIP"]},
                                {"name": "SIM_PORT", "value": str(port)},
                            ],
                        }
                    ],
                },
            },
        },
    }
    k8s.apply(job)
    done = k8s.wait_for(
        "Job bench to complete",
        lambda: (
            job_condition(k8s.get("job", "bench", namespace), "Complete")
            or job_condition(k8s.get("job", "bench", namespace), "Failed")
        ),
        90,
        diag=lambda: k8s.describe(namespace),
    )
    assert done
    assert job_condition(k8s.get("job", "bench", namespace), "Complete"), k8s.describe(namespace)
    (pod,) = k8s.pods(namespace, "app=bench")
    assert pod["spec"]["nodeName"] == sim["spec"]["nodeName"], "pod affinity not honoured"
    assert pod["status"]["phase"] == "Succeeded"
    term = terminated(pod)
    assert term and term["exitCode"] == 0
    msg = json.loads(term["message"])
    assert msg["chunks"] > 0 and msg["done"] is True, msg


def test_deleting_owner_garbage_collects_job_and_kills_pod(k8s, namespace):
    owner = k8s.core.create_namespaced_config_map(
        namespace,
        {"metadata": {"name": "owner"}, "data": {"role": "stands in for an LLMBenchmark"}},
    )
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "long",
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "owner",
                    "uid": owner.metadata.uid,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"app": "long"}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {
                            "name": "sleeper",
                            "image": k8s.image("llmbench"),
                            "command": ["python", "-c", "import time; time.sleep(600)"],
                        }
                    ],
                },
            },
        },
    }
    k8s.apply(job)

    def running():
        pods = k8s.pods(namespace, "app=long")
        return [p for p in pods if p["status"].get("phase") == "Running"]

    (pod,) = k8s.wait_for("the Job's pod to run", running, 60, diag=lambda: k8s.describe(namespace))
    pid = None
    if k8s.local:  # the container's process on this machine
        pid = k8s.cluster.container_pid(pod)
        assert pid_alive(pid)

    k8s.core.delete_namespaced_config_map("owner", namespace)
    k8s.wait_for(
        "the garbage collector to delete Job long",
        lambda: k8s.get("job", "long", namespace) is None,
        60,
        diag=lambda: k8s.describe(namespace),
    )

    def pod_gone_or_dead():
        p = k8s.get("pod", pod["metadata"]["name"], namespace)
        if pid is not None:
            return not pid_alive(pid)
        return p is None

    k8s.wait_for(
        "the pod's process to be killed", pod_gone_or_dead, 60, diag=lambda: k8s.describe(namespace)
    )
    k8s.wait_for(
        "the pod to be deleted",
        lambda: k8s.get("pod", pod["metadata"]["name"], namespace) is None,
        60,
        diag=lambda: k8s.describe(namespace),
    )


def test_pod_asking_too_many_gpus_stays_pending_with_scheduler_reason(k8s, namespace):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "greedy", "namespace": namespace},
        "spec": {
            "tolerations": [GPU_TOLERATION],
            "containers": [
                {
                    "name": "c",
                    "image": k8s.image("llmbench"),
                    "command": ["python", "-c", "pass"],
                    "resources": {"limits": {"nvidia.com/gpu": "1000"}},
                }
            ],
        },
    }
    k8s.apply(pod)

    def unschedulable():
        p = k8s.get("pod", "greedy", namespace)
        for c in p["status"].get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return p, c
        return None

    p, cond = k8s.wait_for(
        "PodScheduled=False on the greedy pod",
        unschedulable,
        60,
        diag=lambda: k8s.describe(namespace),
    )
    assert p["status"]["phase"] == "Pending"
    assert cond["reason"] == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in cond["message"], cond
    time.sleep(1)
    assert k8s.get("pod", "greedy", namespace)["status"]["phase"] == "Pending"
    assert not k8s.get("pod", "greedy", namespace)["spec"].get("nodeName")


RBAC_PROBE = textwrap.dedent("""
    import json, os, ssl, sys, urllib.error, urllib.request
    sa = "/var/run/secrets/kubernetes.io/serviceaccount"
    token = open(sa + "/token").read().strip()
    ns = open(sa + "/namespace").read().strip()
    ctx = ssl.create_default_context(cafile=sa + "/ca.crt")
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    if ":" in host:
        host = "[" + host + "]"
    base = "https://%s:%s" % (host, os.environ["KUBERNETES_SERVICE_PORT"])

    def call(method, path, body=None):
        req = urllib.request.Request(base + path, method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": "Bearer " + token,
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def cm(name):
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": ns}, "data": {"written": "yes"}}

    cms = "/api/v1/namespaces/%s/configmaps" % ns
    res = {
        "update_own": call("PUT", cms + "/results", cm("results")),
        "read_secrets": call("GET", "/api/v1/namespaces/%s/secrets" % ns),
        "read_secret": call("GET", "/api/v1/namespaces/%s/secrets/key" % ns),
        "write_other": call("PUT", cms + "/other", cm("other")),
        "create_cm": call("POST", cms, cm("new")),
        "read_own": call("GET", cms + "/results"),
    }
    msg = json.dumps(res)
    open("/dev/termination-log", "w").write(msg)
    print(msg)
""")


def test_service_account_rbac_is_enforced_inside_pod(k8s, namespace):
    k8s.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "runner", "namespace": namespace},
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "results-writer", "namespace": namespace},
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["configmaps"],
                        "resourceNames": ["results"],
                        "verbs": ["update"],
                    }
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "runner-results", "namespace": namespace},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "results-writer",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": namespace}],
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "results", "namespace": namespace},
                "data": {},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "other", "namespace": namespace},
                "data": {},
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "key", "namespace": namespace},
                "stringData": {"token": "s3cr3t"},
            },
        ]
    )
    k8s.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe", "namespace": namespace},
            "spec": {
                "serviceAccountName": "runner",
                "restartPolicy": "Never",
                "containers": [
                    {"name": "probe", "image": k8s.image("llmbench"),
                     "command": ["python", "-c", RBAC_PROBE]}
                ],
            },
        }
    )
    pod = k8s.wait_for(
        "the RBAC probe pod to finish",
        lambda: (
            (p := k8s.get("pod", "probe", namespace))
            and p["status"].get("phase") in ("Succeeded", "Failed")
            and p
        ),
        60,
        diag=lambda: k8s.describe(namespace),
    )
    term = terminated(pod)
    assert pod["status"]["phase"] == "Succeeded", (term, k8s.describe(namespace))
    assert term is not None
    res = json.loads(term["message"])
    assert res == {
        "update_own": 200,
        "read_secrets": 403,
        "read_secret": 403,
        "write_other": 403,
        "create_cm": 403,
        "read_own": 403,
    }, res
    assert k8s.get("configmap", "results", namespace)["data"] == {"written": "yes"}
    assert not k8s.get("configmap", "other", namespace).get("data")


def test_crd_cel_rule_rejects_violating_object(k8s):
    group = "e2e.llmbench.io"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"celwidgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "celwidgets", "singular": "celwidget", "kind": "CelWidget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "minReplicas": {"type": "integer"},
                                        "maxReplicas": {"type": "integer"},
                                    },
                                    "x-kubernetes-validations": [
                                        {
                                            "rule": "self.minReplicas <= self.maxReplicas",
                                            "message": "minReplicas must not exceed maxReplicas",
                                        }
                                    ],
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    k8s.apply(crd)
    k8s.kubectl("wait", "--for=condition=Established", f"crd/celwidgets.{group}", "--timeout=30s")
    ns = "default"

    def obj(name, lo, hi):
        return json.dumps(
            {
                "apiVersion": f"{group}/v1",
                "kind": "CelWidget",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"minReplicas": lo, "maxReplicas": hi},
            }
        )

    name_ok = f"ok-{os.getpid()}"
    ok = k8s.kubectl("create", "-f", "-", input=obj(name_ok, 1, 3), check=False)
    # discovery of a fresh CRD can lag behind Established for a moment
    for _ in range(20):
        if (
            "the server doesn't have a resource type" not in ok.stderr
            and "no matches for kind" not in ok.stderr
        ):
            break
        time.sleep(0.5)
        ok = k8s.kubectl("create", "-f", "-", input=obj(name_ok, 1, 3), check=False)
    assert ok.returncode == 0, ok.stderr
    bad = k8s.kubectl("create", "-f", "-", input=obj(f"bad-{os.getpid()}", 5, 2), check=False)
    assert bad.returncode != 0
    assert "minReplicas must not exceed maxReplicas" in bad.stderr, bad.stderr
    assert "Invalid value" in bad.stderr or "invalid" in bad.stderr.lower()
    k8s.kubectl("delete", "celwidget", name_ok, "-n", ns, "--wait=false", check=False)
