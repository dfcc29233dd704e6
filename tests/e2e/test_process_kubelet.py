"""Pod semantics the operator's Jobs rely on: env sources, volumes, termination messages,
restart policy, graceful deletion. Pod scripts use only the standard library and standard
paths, so these also hold on a real kubelet (LLMBENCH_E2E_KUBECONFIG)."""

from __future__ import annotations

import json
import textwrap

import pytest

pytestmark = pytest.mark.e2e

PY_IMAGE = "python:3.12-slim"


def finished(k8s, namespace, name):
    def check():
        p = k8s.get("pod", name, namespace)
        return p if p and p["status"].get("phase") in ("Succeeded", "Failed") else None

    return k8s.wait_for(f"pod {name} to finish", check, 60, diag=lambda: k8s.describe(namespace))


def test_env_sources_volumes_and_termination_message(k8s, namespace):
    script = textwrap.dedent("""
        import json, os
        open("/scratch/note", "w").write("kept")
        out = {k: os.environ.get(k) for k in
               ("PLAIN", "POD", "NS", "NODE", "LABEL", "SECRET", "CM", "EXPANDED", "FROM_CM_k")}
        out["scratch"] = open("/scratch/note").read()
        out["cfgfile"] = open("/etc/cfg/k").read()
        open("/tmp/term/msg", "w").write(json.dumps(out))
    """)
    k8s.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "s", "namespace": namespace},
                "stringData": {"token": "s3cr3t"},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cm", "namespace": namespace},
                "data": {"k": "v1"},
            },
        ]
    )
    k8s.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "envy", "namespace": namespace, "labels": {"tier": "bench"}},
            "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": False,
                "volumes": [
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "cfg", "configMap": {"name": "cm"}},
                ],
                "containers": [
                    {
                        "name": "c",
                        "image": PY_IMAGE,
                        "command": ["python", "-c", script],
                        "terminationMessagePath": "/tmp/term/msg",
                        "volumeMounts": [
                            {"name": "scratch", "mountPath": "/scratch"},
                            {"name": "cfg", "mountPath": "/etc/cfg"},
                            {"name": "scratch", "mountPath": "/tmp/term"},
                        ],
                        "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "FROM_CM_"}],
                        "env": [
                            {"name": "PLAIN", "value": "p"},
                            {
                                "name": "POD",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                            },
                            {
                                "name": "NS",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                            },
                            {
                                "name": "NODE",
                                "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                            },
                            {
                                "name": "LABEL",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['tier']"}},
                            },
                            {
                                "name": "SECRET",
                                "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}},
                            },
                            {
                                "name": "CM",
                                "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}},
                            },
                            {"name": "EXPANDED", "value": "$(PLAIN)-$(POD)"},
                        ],
                    }
                ],
            },
        }
    )
    pod = finished(k8s, namespace, "envy")
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert pod["status"]["phase"] == "Succeeded", term
    out = json.loads(term["message"])
    assert out == {
        "PLAIN": "p",
        "POD": "envy",
        "NS": namespace,
        "NODE": pod["spec"]["nodeName"],
        "LABEL": "bench",
        "SECRET": "s3cr3t",
        "CM": "v1",
        "EXPANDED": "p-envy",
        "FROM_CM_k": "v1",
        "scratch": "kept",
        "cfgfile": "v1",
    }


def test_failure_exit_code_and_fallback_to_logs(k8s, namespace):
    k8s.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "boom", "namespace": namespace},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "c",
                        "image": PY_IMAGE,
                        "terminationMessagePolicy": "FallbackToLogsOnError",
                        "command": [
                            "python",
                            "-c",
                            "import sys; print('it broke here'); sys.exit(7)",
                        ],
                    }
                ],
            },
        }
    )
    pod = finished(k8s, namespace, "boom")
    assert pod["status"]["phase"] == "Failed"
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 7 and term["reason"] == "Error"
    assert "it broke here" in term["message"]
    logs = k8s.kubectl("logs", "boom", "-n", namespace).stdout
    assert "it broke here" in logs


def test_restart_policy_on_failure_restarts_until_success(k8s, namespace):
    script = textwrap.dedent("""
        import os, sys
        p = "/work/attempts"
        n = int(open(p).read()) + 1 if os.path.exists(p) else 1
        open(p, "w").write(str(n))
        sys.exit(0 if n >= 2 else 1)
    """)
    k8s.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "flaky", "namespace": namespace},
            "spec": {
                "restartPolicy": "OnFailure",
                "volumes": [{"name": "w", "emptyDir": {}}],
                "containers": [
                    {
                        "name": "c",
                        "image": PY_IMAGE,
                        "command": ["python", "-c", script],
                        "volumeMounts": [{"name": "w", "mountPath": "/work"}],
                    }
                ],
            },
        }
    )
    pod = finished(k8s, namespace, "flaky")
    cs = pod["status"]["containerStatuses"][0]
    assert pod["status"]["phase"] == "Succeeded"
    assert cs["restartCount"] == 1
    assert cs["lastState"]["terminated"]["exitCode"] == 1


def test_deletion_sends_sigterm_first(k8s, namespace):
    script = textwrap.dedent("""
        import signal, sys, time
        def bye(*_):
            open("/scratch/got-sigterm", "w").write("yes")
            sys.exit(0)
        signal.signal(signal.SIGTERM, bye)
        print("ready", flush=True)
        time.sleep(600)
    """)
    k8s.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "polite", "namespace": namespace},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 20,
                "volumes": [{"name": "scratch", "emptyDir": {}}],
                "containers": [
                    {
                        "name": "c",
                        "image": PY_IMAGE,
                        "command": ["python", "-c", script],
                        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                    }
                ],
            },
        }
    )
    k8s.wait_for(
        "pod polite to run",
        lambda: k8s.get("pod", "polite", namespace)["status"].get("phase") == "Running",
        60,
        diag=lambda: k8s.describe(namespace),
    )

    def handler_installed() -> bool:
        if k8s.local:
            logs = k8s.cluster.workdir.glob(f"pods/{namespace}_polite_*/containers/c/output.log")
            return any("ready" in p.read_text() for p in logs)
        return "ready" in k8s.kubectl("logs", "polite", "-n", namespace, check=False).stdout

    k8s.wait_for("pod polite to install its SIGTERM handler", handler_installed, 30)
    k8s.kubectl("delete", "pod", "polite", "-n", namespace, "--wait=false")
    k8s.wait_for(
        "pod polite to be deleted well within its 20 s grace period",
        lambda: k8s.get("pod", "polite", namespace) is None,
        15,
        diag=lambda: k8s.describe(namespace),
    )
    if k8s.local:  # the emptyDir outlives the pod on the process kubelet: look inside
        pods_dir = k8s.cluster.workdir / "pods"
        marks = list(pods_dir.glob(f"{namespace}_polite_*/volumes/scratch/got-sigterm"))
        assert marks, "the process exited without running its SIGTERM handler"


def test_indexed_job_pods_get_their_completion_index(k8s, namespace):
    """What a sharded runner relies on: the Job controller's ``JOB_COMPLETION_INDEX`` and an
    explicit downward-API ``metadata.annotations[...]`` fieldRef both reach each pod."""
    script = (
        "import os; print(os.environ['JOB_COMPLETION_INDEX'], os.environ['SHARD'],"
        " os.environ['MISSING'] == '')"
    )
    annotation = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    k8s.apply(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "shards", "namespace": namespace},
            "spec": {
                "completionMode": "Indexed",
                "completions": 3,
                "parallelism": 3,
                "backoffLimitPerIndex": 1,
                "maxFailedIndexes": 0,
                "template": {
                    "metadata": {"labels": {"app": "shards"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "automountServiceAccountToken": False,
                        "containers": [
                            {
                                "name": "c",
                                "image": PY_IMAGE,
                                "command": ["python", "-c", script],
                                "terminationMessagePolicy": "FallbackToLogsOnError",
                                "env": [
                                    {"name": "SHARD",
                                     "valueFrom": {"fieldRef": {"fieldPath": annotation}}},
                                    {"name": "MISSING", "valueFrom": {"fieldRef": {
                                        "fieldPath": "metadata.annotations['no-such']"}}},
                                ],
                            }
                        ],
                    },
                },
            },
        }
    )

    def complete():
        job = k8s.get("job", "shards", namespace)
        conds = (job or {}).get("status", {}).get("conditions") or []
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conds)

    k8s.wait_for("Indexed Job shards to complete", complete, 60,
                 diag=lambda: k8s.describe(namespace))
    seen = set()
    for p in k8s.pods(namespace, "app=shards"):
        index = p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        out = k8s.kubectl("logs", p["metadata"]["name"], "-n", namespace).stdout.split()
        assert out == [index, index, "True"], (p["metadata"]["name"], out)
        seen.add(index)
    assert seen == {"0", "1", "2"}


BUSYBOX = "busybox:1.36"


def hostpath_pv(name: str, path: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": path},
        },
    }


def claim_for(name: str, namespace: str, pv: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "storageClassName": "",
            "volumeName": pv,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def claim_pod(name: str, namespace: str, claim: str, script: str, **mount) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
            "containers": [
                {
                    "name": "c",
                    "image": BUSYBOX,
                    "command": ["sh", "-c", script],
                    "volumeMounts": [{"name": "data", "mountPath": "/data", **mount}],
                }
            ],
        },
    }


def wait_bound(k8s, namespace, claim):
    def check():
        pvc = k8s.get("pvc", claim, namespace)
        return pvc if pvc and pvc.get("status", {}).get("phase") == "Bound" else None

    return k8s.wait_for(f"PVC {claim} to be Bound", check, 60, diag=lambda: k8s.describe(namespace))


def test_persistent_volume_claim_is_a_shared_host_directory(k8s, namespace, tmp_path):
    pv, host = f"{namespace}-data", tmp_path / "pv"
    try:
        k8s.apply([hostpath_pv(pv, str(host)), claim_for("data", namespace, pv)])
        wait_bound(k8s, namespace, "data")
        k8s.apply(claim_pod("writer", namespace, "data", "echo hi > /data/x", subPath="a/b"))
        pod = finished(k8s, namespace, "writer")
        assert pod["status"]["phase"] == "Succeeded", pod["status"]
        if k8s.local:  # the PV's hostPath is this machine's directory
            assert (host / "a" / "b" / "x").read_text() == "hi\n"

        # a claim that does not exist: nothing runs; the scheduler (or the kubelet) says why
        k8s.apply(claim_pod("orphan", namespace, "no-such-claim", "echo never > /data/x"))

        def names_the_claim():
            st = (k8s.get("pod", "orphan", namespace) or {}).get("status", {})
            assert st.get("phase", "Pending") == "Pending", st
            msgs = [c.get("message", "") for c in st.get("conditions") or []]
            msgs += [
                (cs.get("state", {}).get("waiting") or {}).get("message", "")
                for cs in st.get("containerStatuses") or []
            ]
            return any("no-such-claim" in m for m in msgs)

        k8s.wait_for(
            "pod orphan to report its missing claim",
            names_the_claim,
            30,
            diag=lambda: k8s.describe(namespace),
        )
        k8s.kubectl("delete", "pod", "orphan", "-n", namespace, "--wait=false")
        k8s.wait_for(
            "pod orphan to be deleted", lambda: k8s.get("pod", "orphan", namespace) is None, 30
        )
        if k8s.local:
            assert not (host / "x").exists()
    finally:
        k8s.kubectl("delete", "pv", pv, "--wait=false", "--ignore-not-found", check=False)


def test_pod_on_a_node_waits_until_its_claim_is_bound(k8s, namespace, tmp_path):
    """Bypassing the scheduler (spec.nodeName), the kubelet itself holds the containers until
    the claim exists and is Bound, then runs the pod on the PV's directory."""
    nodes = json.loads(k8s.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    node = next((n for n in nodes if not n["spec"].get("taints")), nodes[0])
    pod = claim_pod("late", namespace, "late", "echo late > /data/x")
    pod["spec"]["nodeName"] = node["metadata"]["name"]
    k8s.apply(pod)

    def held():
        st = (k8s.get("pod", "late", namespace) or {}).get("status", {})
        assert st.get("phase", "Pending") == "Pending", st
        statuses = st.get("containerStatuses") or []
        if not k8s.local:  # a real kubelet reports the missing claim in FailedMount events
            return bool(statuses) and "waiting" in statuses[0]["state"]
        waiting = (statuses[0]["state"].get("waiting") or {}) if statuses else {}
        return 'persistentvolumeclaim "late" not found' in waiting.get("message", "")

    k8s.wait_for("pod late to wait for its claim", held, 30, diag=lambda: k8s.describe(namespace))
    pv, host = f"{namespace}-late", tmp_path / "pv"
    try:
        k8s.apply([hostpath_pv(pv, str(host)), claim_for("late", namespace, pv)])
        wait_bound(k8s, namespace, "late")
        done = finished(k8s, namespace, "late")
        assert done["status"]["phase"] == "Succeeded", done["status"]
        if k8s.local:
            assert (host / "x").read_text() == "late\n"
    finally:
        k8s.kubectl("delete", "pod", "late", "-n", namespace, "--wait=false", check=False)
        k8s.kubectl("delete", "pv", pv, "--wait=false", "--ignore-not-found", check=False)
