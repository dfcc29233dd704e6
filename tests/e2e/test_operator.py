"""The operator end to end on the project's cluster: nothing mocked, nothing on the host.

The operator runs as its users run it: installed by the chart (tests/e2e/release.py) from the
image ``hack/image/build.sh`` built, in its pod, with the chart's ServiceAccount token and
RBAC. llm-d-inference-sim (a third-party vLLM simulator, its own image) serves the model as a
Deployment on a GPU node behind a Service; a dcgm-exporter-format pod on that node exports
four GPUs, two of them the target pod's; the runner Job's pod runs ``llmbench job`` from the
built image on the node the scheduler picked, reaching the target through the Service
(``target.service``: CoreDNS and kube-proxy, the path a user's cluster takes) or its DNS name
(``target.url``).
"""

from __future__ import annotations

import json
import textwrap
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.release import OPERATOR_NS, Release, installed

pytestmark = pytest.mark.e2e

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SIM_PORT = 8000
EXPORTER_PORT = 9400
__all__ = ["OPERATOR_NS"]


@pytest.fixture(scope="module")
def operator(crd_installed: Any) -> Iterator[Release]:
    """The chart's operator for this module's tests (its pod gone when the module ends)."""
    yield from installed(crd_installed)


# ----------------------------------------------------------------------------------------------
# the target: llm-d-inference-sim on a GPU node behind a Service, and a dcgm exporter beside it
# ----------------------------------------------------------------------------------------------


#: The simulator's flags, unless a Target says otherwise (llm-d-inference-sim's own defaults
#: apart from these, e.g. --max-num-seqs 5: a sixth request in flight waits for a slot).
SIM_FLAGS = {"--time-to-first-token": "10ms", "--inter-token-latency": "1ms"}


def sim_deployment(k8s: Any, namespace: str, labels: dict[str, str],
                   node: str, flags: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "tolerations": [GPU_TOLERATION],
                    "containers": [
                        {
                            "name": "vllm",
                            "image": k8s.image("sim"),
                            "args": [
                                "--model", "e2e-model", "--port", str(SIM_PORT),
                                "--force-dummy-tokenizer", "--mode", "random",
                                *(a for kv in {**SIM_FLAGS, **(flags or {})}.items() for a in kv),
                            ],
                            "ports": [{"name": "http", "containerPort": SIM_PORT}],
                            "resources": {"limits": {"nvidia.com/gpu": "2"}},
                            "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 1},
                        }
                    ],
                },
            },
        },
    }


def sim_service(namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "vllm", "namespace": namespace},
            "spec": {"selector": labels, "ports": [{"name": "http", "port": SIM_PORT}]}}


EXPORTER = textwrap.dedent('''
    import http.server, sys, time
    port, ns, pod = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    t0 = time.time()
    GPUS = [(0, pod), (1, pod), (2, "someone-else"), (3, "someone-else")]
    FIELDS = [("DCGM_FI_DEV_POWER_USAGE", "gauge", lambda g, t: 300.0 + g),
              ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
               lambda g, t: 1e9 + (300.0 + g) * 1000 * t),
              ("DCGM_FI_DEV_GPU_UTIL", "gauge", lambda g, t: 90.0),
              ("DCGM_FI_DEV_FB_USED", "gauge", lambda g, t: 70000.0),
              ("DCGM_FI_DEV_FB_FREE", "gauge", lambda g, t: 11000.0),
              ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", lambda g, t: 700.0)]
    def text():
        t = time.time() - t0
        out = []
        for name, kind, value in FIELDS:
            out += [f"# HELP {name} e2e exporter", f"# TYPE {name} {kind}"]
            for g, owner in GPUS:
                labels = (f'gpu="{g}",UUID="GPU-e2e-{g}",device="nvidia{g}",'
                          f'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-a",'
                          f'container="vllm",namespace="{ns}",pod="{owner}"')
                out.append(f"{name}{{{labels}}} {value(g, t):.3f}")
        return ("\\n".join(out) + "\\n").encode()
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = text()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a):
            pass
    http.server.ThreadingHTTPServer(("0.0.0.0", port), H).serve_forever()
''')


def exporter_pod(k8s: Any, namespace: str, target_pod: str, node: str,
                 gpu_namespace: str | None = None) -> dict[str, Any]:
    """A dcgm-exporter-format pod on ``node`` (four GPUs, two of them ``target_pod``'s, in
    ``gpu_namespace``, default ``namespace``), in the llmbench image (which has python)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "dcgm-exporter", "namespace": namespace,
            "labels": {"app": "nvidia-dcgm-exporter"},
        },
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [GPU_TOLERATION],
            "containers": [
                {
                    "name": "exporter",
                    "image": k8s.image("llmbench"),
                    "command": ["python", "-c", EXPORTER, str(EXPORTER_PORT),
                                gpu_namespace or namespace, target_pod],
                    "ports": [{"name": "metrics", "containerPort": EXPORTER_PORT}],
                    "readinessProbe": {"tcpSocket": {"port": EXPORTER_PORT}, "periodSeconds": 1},
                }
            ],
        },
    }


def ready_pods(k8s: Any, namespace: str, selector: str) -> list[dict[str, Any]]:
    return [
        p for p in k8s.pods(namespace, selector)
        if any(c["type"] == "Ready" and c["status"] == "True"
               for c in p["status"].get("conditions") or [])
    ]


def roll_out_sim(k8s: Any, target: Target, ttft: str, timeout_s: float,
                 strategy: dict[str, Any] | None = None) -> None:
    """The target's simulator rolled out with another time to first token (a 'deploy' of the
    model server; ``strategy`` None keeps the Deployment's RollingUpdate, where old and new
    pods are Ready together for a moment), waited for until one Ready pod serves it."""
    dep = sim_deployment(k8s, target.namespace, target.labels, target.node, target.flags)
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    args[args.index("--time-to-first-token") + 1] = ttft
    if strategy is not None:
        dep["spec"]["strategy"] = strategy
    k8s.apply(dep)

    def rolled_out() -> bool:
        items = k8s.pods(target.namespace, target.selector)
        ready = ready_pods(k8s, target.namespace, target.selector)
        return (len(items) == 1 and len(ready) == 1
                and ttft in ready[0]["spec"]["containers"][0]["args"])

    k8s.wait_for(f"the simulator rolled out with TTFT {ttft}", rolled_out, timeout_s,
                 diag=lambda: k8s.describe(target.namespace))


class Target:
    """The inference Deployment and its Service (and optionally an exporter) in a namespace.

    ``service`` is the benchmark's ``target.service`` reference, ``url`` the Service's DNS
    name (what a user writes in ``target.url``); ``host_url`` reaches the Service's ClusterIP
    from this machine (its routes lead into the cluster's network) for the test's own reads.
    """

    def __init__(self, k8s: Any, namespace: str, node: str = "gpu-node-a",
                 flags: dict[str, str] | None = None) -> None:
        self.k8s, self.namespace, self.node = k8s, namespace, node
        self.flags = flags  # the simulator's, over SIM_FLAGS
        self.labels = {"app": "vllm", "bench": namespace}
        self.selector = f"app=vllm,bench={namespace}"
        self.service = {"name": "vllm", "port": SIM_PORT}
        self.url = f"http://vllm.{namespace}.svc:{SIM_PORT}"

    @property
    def ref(self) -> dict[str, Any]:
        """``target`` of a benchmark: the Service (its selector finds the pods)."""
        return {"service": dict(self.service)}

    @property
    def host_url(self) -> str:
        svc = self.k8s.get("service", "vllm", self.namespace)
        return f"http://{svc['spec']['clusterIP']}:{SIM_PORT}"

    def deploy(self, service: bool = True) -> dict[str, Any]:
        self.k8s.apply(sim_deployment(self.k8s, self.namespace, self.labels, self.node,
                                      self.flags))
        if service:
            self.k8s.apply(sim_service(self.namespace, self.labels))
        pods = self.k8s.wait_for(
            "the inference pod to be Ready", lambda: ready_pods(self.k8s, self.namespace,
                                                                 self.selector),
            90, diag=lambda: self.k8s.describe(self.namespace),
        )
        return dict(pods[0])

    def exporter(self, target_pod: str) -> None:
        self.k8s.apply(exporter_pod(self.k8s, self.namespace, target_pod, self.node))
        self.k8s.wait_for(
            "the dcgm exporter to be Ready",
            lambda: ready_pods(self.k8s, self.namespace, "app=nvidia-dcgm-exporter"),
            60, diag=lambda: self.k8s.describe(self.namespace),
        )


def benchmark(name: str, namespace: str, target: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "target": {"model": "e2e-model", **target},
        "workload": {"inputTokens": {"mean": 32}, "outputTokens": {"mean": 8}},
        "load": {"requestCount": 16, "warmupRequestCount": 0},
        "sweep": {"type": "concurrency", "values": [1, 2, 4]},
        "slo": {"ttftP99Ms": 5000},
        "runner": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }
    body.update(spec)
    return {
        "apiVersion": "llmbench.io/v1alpha1",
        "kind": "LLMBenchmark",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


def status(k8s: Any, namespace: str, name: str) -> dict[str, Any]:
    obj = k8s.get("llmbenchmark", name, namespace) or {}
    return dict(obj.get("status") or {})


def cond(st: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in st.get("conditions") or [] if c["type"] == type_), {})


def diag(k8s: Any, namespace: str, op: Release) -> Any:
    def show() -> str:
        out = k8s.kubectl("get", "llmb", "-n", namespace, "-o", "yaml", check=False).stdout
        return f"{out}\n{k8s.describe(namespace)}\n--- operator log ---\n{op.tail()}"

    return show


def wait_phase(k8s: Any, namespace: str, name: str, op: Release, phases: tuple[str, ...],
               timeout: float = 180) -> dict[str, Any]:
    return dict(k8s.wait_for(
        f"{name} to reach {'/'.join(phases)}",
        lambda: (s := status(k8s, namespace, name)).get("phase") in phases and s,
        timeout, interval=0.5, diag=diag(k8s, namespace, op),
    ))


# ----------------------------------------------------------------------------------------------
# tests
# ----------------------------------------------------------------------------------------------


def test_a_sweep_runs_next_to_the_gpu_pods_and_lands_in_status(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = Target(k8s, namespace)
    pod = target.deploy()
    target.exporter(pod["metadata"]["name"])
    k8s.apply(benchmark("sweep", namespace, target.ref))
    job = k8s.wait_for("the runner Job", lambda: k8s.get("job", "sweep-run-1", namespace), 60,
                       diag=diag(k8s, namespace, operator))
    assert job["metadata"]["ownerReferences"][0]["kind"] == "LLMBenchmark"
    runner = k8s.wait_for(
        "the runner pod to be scheduled",
        lambda: [p for p in k8s.pods(namespace, "llmbench.io/benchmark=sweep")
                 if p["spec"].get("nodeName")],
        60, diag=diag(k8s, namespace, operator),
    )[0]
    assert runner["spec"]["nodeName"] == pod["spec"]["nodeName"] == "gpu-node-a"
    seen: set[str] = set()

    def finished() -> dict[str, Any] | None:
        st = status(k8s, namespace, "sweep")
        if st.get("progress"):
            seen.add(st["progress"])
        return st if st.get("phase") in ("Succeeded", "Failed") else None

    st = k8s.wait_for("the sweep to finish", finished, 240, interval=0.3,
                      diag=diag(k8s, namespace, operator))
    assert st["phase"] == "Succeeded", json.dumps(st, indent=1)
    assert st["progress"] == "3/3"
    # "1/3", or "1/3 40%" while the next point runs (status.currentPoint)
    assert {p.split()[0] for p in seen} & {"1/3", "2/3"}, f"no per-point progress: {seen}"
    assert [p["value"] for p in st["points"]] == [1, 2, 4]
    assert all(p["state"] == "Succeeded" and p["ott"] > 0 for p in st["points"])
    # only the two GPUs that serve the target pod, not the exporter's other two
    assert [p.get("gpus") for p in st["points"]] == [2, 2, 2], st["points"]
    assert "Concurrency" in st["summaryCSV"].splitlines()[0]
    assert st["knee"]["message"]
    assert st["maxUnderSLO"]["value"] is not None
    stack = st["stack"]
    assert stack["targetPods"] == [pod["metadata"]["name"]]
    assert stack["nodes"][0]["gpuProduct"] == "NVIDIA-H100-80GB-HBM3"
    assert stack["runnerNode"] == "gpu-node-a"
    assert stack["telemetryUrls"] and stack["telemetryUrls"][0].endswith("/metrics")
    for type_ in ("Accepted", "TargetReady", "TelemetryAvailable", "RunnerScheduled",
                  "Succeeded"):
        assert cond(st, type_).get("status") == "True", (type_, st["conditions"])
    assert cond(st, "MeasurementValid").get("status") in ("True", "False")
    table = k8s.kubectl("get", "llmb", "-n", namespace).stdout
    header, row = table.splitlines()[:2]
    for column in ("PHASE", "PROGRESS", "KNEE", "MAX OTT", "P99 TTFT", "VALID", "LAST RUN"):
        assert column in header
    assert "Succeeded" in row and "3/3" in row
    # the lease is released once the run is over
    assert not k8s.kubectl("get", "leases", "-n", namespace, "-o", "name").stdout.strip()


def test_missing_pods_hold_the_run_and_the_api_key_reaches_only_the_runner(
    k8s: Any, namespace: str, operator: Release
) -> None:
    """The operator never reads the Secret (it holds no right on Secrets; the chart's admission
    policy, in force here, checked the creator's get on it): the run waits for the pods, and
    the key reaches the runner through secretKeyRef only."""
    target = Target(k8s, namespace)
    spec_target = {
        "url": target.url,
        "podSelector": {"matchLabels": target.labels},
        "apiKeySecretRef": {"name": "vllm-key", "key": "token"},
    }
    k8s.apply({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "vllm-key", "namespace": namespace},
               "stringData": {"token": "e2e-SECRET-value-9f3a"}})
    k8s.apply(benchmark("held", namespace, spec_target, telemetry={"dcgm": "off"}))
    k8s.wait_for(
        "TargetReady=False naming the missing pods",
        lambda: cond(status(k8s, namespace, "held"), "TargetReady").get("reason")
        == "PodsNotReady",
        60, diag=diag(k8s, namespace, operator),
    )
    assert k8s.get("job", "held-run-1", namespace) is None
    target.deploy()
    st = wait_phase(k8s, namespace, "held", operator, ("Succeeded", "Failed"))
    assert st["phase"] == "Succeeded", json.dumps(st, indent=1)
    assert cond(st, "TelemetryAvailable")["reason"] == "Disabled"
    # the API key reached the runner only through secretKeyRef: never status, events, the
    # ConfigMap, the Job or the operator's log
    secret = "e2e-SECRET-value-9f3a"
    for what in ("llmb/held", "configmap/held-run-1", "job/held-run-1"):
        assert secret not in k8s.kubectl("get", what, "-n", namespace, "-o", "yaml").stdout
    assert secret not in k8s.kubectl("get", "events", "-n", namespace, "-o", "yaml").stdout
    assert secret not in operator.log()
    runner = k8s.pods(namespace, "llmbench.io/benchmark=held")[0]["metadata"]["name"]
    assert secret not in k8s.kubectl("logs", runner, "-n", namespace, check=False).stdout


def test_a_targets_secret_like_arguments_are_redacted_in_status_and_events(
    k8s: Any, namespace: str, operator: Release
) -> None:
    """The inference pod's command line carries keys (``--api-key K``, ``--hf-token=K``, a
    ``Bearer`` header inside ``sh -c``): status.stack shows the flags, never the values."""
    keys = ["sk-e2e-args-1d2c", "hf_e2e_args_7a6b", "e2e-bearer-5e4f"]
    labels = {"app": "keyed-server"}
    k8s.apply({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "keyed-server", "namespace": namespace, "labels": labels},
        "spec": {
            "nodeName": "cpu-node-a",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
            "containers": [{
                "name": "server", "image": k8s.image("llmbench"),
                "command": ["python", "-c", "import time; time.sleep(3600)"],
                "args": ["--api-key", keys[0], f"--hf-token={keys[1]}",
                         f"serve -H 'Authorization: Bearer {keys[2]}' --port 8000"],
                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
            }],
        },
    })
    k8s.wait_for("the keyed pod to be Ready",
                 lambda: ready_pods(k8s, namespace, "app=keyed-server"), 90,
                 diag=lambda: k8s.describe(namespace))
    k8s.apply(benchmark("keyed", namespace, {"url": f"http://keyed.{namespace}.svc:8000",
                                             "podSelector": {"matchLabels": labels}},
                        telemetry={"dcgm": "off", "serverMetrics": "off"},
                        sweep={"type": "concurrency", "values": [1]}))
    st = k8s.wait_for("status.stack", lambda: (s := status(k8s, namespace, "keyed"))
                      .get("stack") and s, 90, diag=diag(k8s, namespace, operator))
    assert st["stack"]["targetArgs"] == [
        "python", "-c", "import time; time.sleep(3600)", "--api-key", "<redacted>",
        "--hf-token=<redacted>", "serve -H 'Authorization: Bearer <redacted>' --port 8000"]
    shown = (k8s.kubectl("get", "llmb", "keyed", "-n", namespace, "-o", "yaml").stdout
             + k8s.kubectl("get", "events", "-n", namespace, "-o", "yaml").stdout
             + operator.log())
    for key in keys:
        assert key not in shown


def test_a_missing_service_is_a_condition_and_its_creation_starts_the_job(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = Target(k8s, namespace)
    target.deploy(service=False)
    k8s.apply(benchmark("svc", namespace, target.ref,
                        telemetry={"dcgm": "off", "serverMetrics": "off"}))
    st = k8s.wait_for(
        "ServiceNotFound",
        lambda: (s := status(k8s, namespace, "svc"))
        and cond(s, "TargetReady").get("reason") == "ServiceNotFound" and s,
        60, diag=diag(k8s, namespace, operator),
    )
    assert cond(st, "TargetReady")["message"] == f"Service {namespace}/vllm does not exist"
    assert k8s.get("job", "svc-run-1", namespace) is None
    k8s.apply(sim_service(namespace, target.labels))
    job = k8s.wait_for("the Job once the Service exists",
                       lambda: k8s.get("job", "svc-run-1", namespace), 60,
                       diag=diag(k8s, namespace, operator))
    # the Service's selector found the pods: the runner is placed next to them
    terms = job["spec"]["template"]["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["labelSelector"] == {"matchLabels": target.labels}
    # the status write with the stack follows the Job's creation
    st = k8s.wait_for("the stack in status",
                      lambda: (s := status(k8s, namespace, "svc")).get("stack") and s, 30)
    assert st["stack"]["targetPods"]
    # and the run goes through the Service: CoreDNS names it, kube-proxy routes it
    st = wait_phase(k8s, namespace, "svc", operator, ("Succeeded", "Failed"))
    assert st["phase"] == "Succeeded", json.dumps(st, indent=1)
    assert all(p["ott"] > 0 for p in st["points"])


def test_an_unschedulable_runner_says_why(k8s: Any, namespace: str, operator: Release) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    k8s.apply(benchmark("huge", namespace, target.ref,
                        runner={"requests": {"cpu": "500", "memory": "128Mi"},
                                "limits": {"cpu": "500", "memory": "128Mi"}}))
    st = k8s.wait_for(
        "RunnerScheduled=False",
        lambda: (s := status(k8s, namespace, "huge"))
        and cond(s, "RunnerScheduled").get("status") == "False" and s,
        90, diag=diag(k8s, namespace, operator),
    )
    c = cond(st, "RunnerScheduled")
    assert c["reason"] == "Unschedulable" and "Insufficient cpu" in c["message"], c


def test_two_benchmarks_on_one_endpoint_take_turns_and_delete_cleans_up(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    ref = target.ref
    k8s.apply(benchmark("first", namespace, ref, telemetry={"dcgm": "off"}))
    k8s.wait_for("the first Job", lambda: k8s.get("job", "first-run-1", namespace), 60,
                 diag=diag(k8s, namespace, operator))
    k8s.apply(benchmark("second", namespace, ref, telemetry={"dcgm": "off"}))
    st = wait_phase(k8s, namespace, "second", operator, ("Queued",), 60)
    assert st["queuedBehind"] == f"{namespace}/first"
    assert k8s.get("job", "second-run-1", namespace) is None
    first = wait_phase(k8s, namespace, "first", operator, ("Succeeded", "Failed"))
    assert first["phase"] == "Succeeded"
    second = wait_phase(k8s, namespace, "second", operator, ("Succeeded", "Failed"))
    assert second["phase"] == "Succeeded"
    job = k8s.get("job", "second-run-1", namespace)
    assert job["metadata"]["creationTimestamp"] >= first["lastRunTime"]
    assert second["startedTime"] >= first["lastRunTime"]

    k8s.kubectl("delete", "llmb", "first", "-n", namespace, "--wait=true", timeout=60)

    def gone() -> bool:
        kinds = "jobs,configmaps,serviceaccounts,roles,rolebindings,leases,pods"
        out = k8s.kubectl("get", kinds, "-n", namespace, "-l", "llmbench.io/benchmark=first",
                          "-o", "name").stdout
        return not out.strip()

    k8s.wait_for("everything the first benchmark owned to be deleted", gone, 90,
                 diag=diag(k8s, namespace, operator))
    assert k8s.get("job", "second-run-1", namespace) is not None


def test_operator_restart_mid_run_makes_no_second_job(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    k8s.apply(benchmark("restart", namespace, target.ref,
                        telemetry={"dcgm": "off"},
                        load={"requestCount": 48, "warmupRequestCount": 0}))
    k8s.wait_for("the Job", lambda: k8s.get("job", "restart-run-1", namespace), 60,
                 diag=diag(k8s, namespace, operator))
    operator.restart()
    st = wait_phase(k8s, namespace, "restart", operator, ("Succeeded", "Failed"))
    assert st["phase"] == "Succeeded" and st["run"] == 1
    jobs = k8s.kubectl("get", "jobs", "-n", namespace, "-o", "name").stdout.split()
    assert jobs == ["job.batch/restart-run-1"]


def test_a_new_spec_runs_again_with_a_new_run_number(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    ref = target.ref
    k8s.apply(benchmark("again", namespace, ref, telemetry={"dcgm": "off"}))
    st = wait_phase(k8s, namespace, "again", operator, ("Succeeded", "Failed"))
    assert st["phase"] == "Succeeded" and st["run"] == 1
    assert [h["run"] for h in st["history"]] == [1]
    assert st["history"][0]["phase"] == "Succeeded" and st["history"][0]["configMap"]
    k8s.apply(benchmark("again", namespace, ref, telemetry={"dcgm": "off"},
                        sweep={"type": "concurrency", "values": [1, 2]}, historyLimit=1))
    st = k8s.wait_for(
        "run 2 to finish",
        lambda: (s := status(k8s, namespace, "again")).get("run") == 2
        and s.get("phase") in ("Succeeded", "Failed") and s,
        180, diag=diag(k8s, namespace, operator),
    )
    assert st["phase"] == "Succeeded" and st["progress"] == "2/2"
    obj = k8s.get("llmb", "again", namespace)
    assert st["observedGeneration"] == obj["metadata"]["generation"]
    assert k8s.get("job", "again-run-2", namespace) is not None
    # historyLimit 1: run 1 leaves the history and its objects are deleted
    assert [h["run"] for h in st["history"]] == [2]

    def run_one_gone() -> bool:
        out = k8s.kubectl("get", "jobs,configmaps,serviceaccounts,roles,rolebindings", "-n",
                          namespace, "-l", "llmbench.io/benchmark=again,llmbench.io/run=1",
                          "-o", "name").stdout
        return not out.strip()

    k8s.wait_for("run 1's objects to be pruned", run_one_gone, 60,
                 diag=diag(k8s, namespace, operator))
    assert k8s.get("configmap", "again-run-2", namespace) is not None



def test_a_spec_only_python_can_refuse_is_reported_as_a_condition(
    k8s: Any, namespace: str, operator: Release
) -> None:
    """A schedule that never fires passes CEL (it needs a calendar) and is the operator's to
    report: Accepted=False with the field and the fix, no Job."""
    k8s.apply(benchmark("never", namespace, {"url": "http://nothing.invalid:9"},
                        schedule="0 0 30 2 *"))
    st = wait_phase(k8s, namespace, "never", operator, ("Failed",), 60)
    c = cond(st, "Accepted")
    assert (c["status"], c["reason"]) == ("False", "InvalidSpec")
    assert "spec.schedule" in c["message"]
    assert k8s.get("job", "never-run-1", namespace) is None


def sim_requests(target: Target) -> float:
    """Requests the inference server finished, from its own Prometheus counters."""
    with urllib.request.urlopen(f"{target.host_url}/metrics", timeout=5) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("vllm:request_success_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def four_points_under_way(k8s: Any, namespace: str, operator: Release, name: str) -> Target:
    """A 4-point, 40-request sweep whose first point is in status: time to break something."""
    target = Target(k8s, namespace)
    target.deploy()
    k8s.apply(benchmark(name, namespace, target.ref,
                        telemetry={"dcgm": "off", "serverMetrics": "off"},
                        load={"requestCount": 40, "warmupRequestCount": 0},
                        sweep={"type": "concurrency", "values": [1, 2, 3, 4]}))
    k8s.wait_for(
        "the first point in status",
        lambda: status(k8s, namespace, name).get("progress") in ("1/4", "2/4"),
        120, interval=0.2, diag=diag(k8s, namespace, operator),
    )
    return target


def test_a_killed_runner_pod_resumes_and_repeats_no_finished_point(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = four_points_under_way(k8s, namespace, operator, "resume")
    (first_pod,) = k8s.pods(namespace, "llmbench.io/benchmark=resume")
    k8s.kubectl("delete", "pod", first_pod["metadata"]["name"], "-n", namespace,
                "--grace-period=0", "--wait=false")
    st = wait_phase(k8s, namespace, "resume", operator, ("Succeeded", "Failed"), 240)
    assert st["phase"] == "Succeeded", json.dumps(st, indent=1)
    assert [p["value"] for p in st["points"]] == [1, 2, 3, 4]
    (second,) = k8s.pods(namespace, "llmbench.io/benchmark=resume")  # the killed one is gone
    assert second["metadata"]["name"] != first_pod["metadata"]["name"]
    # 4 points x 40 requests, plus at most the one point the killed pod had not finished
    # (repeated whole), plus the one-request preflight probes (one per pod and per point)
    served = sim_requests(target)
    assert 160 <= served < 160 + 40 + 12, served
    log = k8s.kubectl("logs", second["metadata"]["name"], "-n", namespace).stdout
    assert "resum" in log, log[-2000:]


def test_a_target_that_goes_down_mid_sweep_fails_the_run_and_keeps_what_was_measured(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = four_points_under_way(k8s, namespace, operator, "down")
    k8s.kubectl("delete", "deployment", "vllm", "-n", namespace, "--wait=false")
    st = wait_phase(k8s, namespace, "down", operator, ("Succeeded", "Failed"), 240)
    assert st["phase"] == "Failed", json.dumps(st, indent=1)
    states = [p["state"] for p in st["points"]]
    assert states[0] == "Succeeded" and "Failed" in states, st["points"]
    failed = next(p for p in st["points"] if p["state"] == "Failed")
    assert target.url.split("//")[1] in failed["reason"] or "unreachable" in failed["reason"]
    assert cond(st, "Succeeded")["status"] == "False"
    assert "point(s) failed" in st["message"] or "failed" in st["message"]


def test_same_zone_uses_the_other_node_of_the_zone_when_the_target_node_is_full(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    # Fill gpu-node-a so that a 1-CPU runner no longer fits there (a real node has the
    # machine's CPUs); cpu-node-a, in the same zone, has room (only the operator runs there).
    alloc = k8s.get("node", "gpu-node-a")["status"]["allocatable"]["cpu"]
    millis = int(alloc[:-1]) if alloc.endswith("m") else int(alloc) * 1000
    k8s.apply({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "filler", "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "gpu-node-a"},
            "tolerations": [GPU_TOLERATION],
            "containers": [{"name": "f", "image": k8s.image("llmbench"),
                            "command": ["sleep", "600"],
                            "resources": {"requests": {"cpu": f"{millis - 300}m"}}}],
        },
    })
    k8s.wait_for("the filler pod to run",
                 lambda: (k8s.get("pod", "filler", namespace) or {}).get("status", {}).get(
                     "phase") == "Running", 60)
    ref = target.ref
    big = {"requests": {"cpu": "1", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    k8s.apply(benchmark("zone", namespace, ref, placement="SameZone", runner=big,
                        telemetry={"dcgm": "off"}, sweep={"type": "concurrency", "values": [1]}))
    st = wait_phase(k8s, namespace, "zone", operator, ("Succeeded", "Failed"), 180)
    assert st["phase"] == "Succeeded", json.dumps(st, indent=1)
    assert st["stack"]["runnerNode"] == "cpu-node-a"
    # Any: no affinity at all; the scheduler may use any node that fits
    k8s.apply(benchmark("anywhere", namespace, ref, placement="Any",
                        telemetry={"dcgm": "off"}, sweep={"type": "concurrency", "values": [1]}))
    st = wait_phase(k8s, namespace, "anywhere", operator, ("Succeeded", "Failed"), 180)
    assert st["phase"] == "Succeeded", json.dumps(st, indent=1)
    job = k8s.get("job", "anywhere-run-1", namespace)
    assert "affinity" not in job["spec"]["template"]["spec"]
    assert st["stack"]["runnerNode"] in {"gpu-node-a", "gpu-node-b", "cpu-node-a"}
