"""Measurement distortion in pods: the runner in a container on a real node against the
simulator in a container behind a Service, beside the same scenario as host processes.

``distortion.py --waves`` measures, on this machine's loopback, how far a client's TTFT is
above the sim's own record of the same requests. Here the same synchronized-wave scenarios
(c64, c256: every slot starts at once, no warm-up) run three ways, in turns, ``--repeat``
times each, and the table shows the median of each:

* ``host``: ``llmbench profile`` and ``llmbench sim`` as host processes (loopback), as in
  ``distortion.py``;
* ``host -> svc``: ``llmbench profile`` on the host, the sim in a pod, reached through its
  Service's ClusterIP (the host's route to the node, kube-proxy's DNAT, the node's bridge and
  the pod's veth);
* ``pod -> svc``: ``llmbench profile`` in a pod on the sim's node (SameNode, as the operator
  places a runner), by the Service's DNS name (CoreDNS, then the same path inside the node).

The pods run the image ``hack/image/build.sh`` built (``llmbench``), on the project's test
cluster (started here in a temporary directory; ``--kubeconfig`` uses a running one that has
the image). The sim's truth is read through the ClusterIP after each run. The client's CPU
seconds are its own (``getrusage`` of the ``llmbench`` child in the pod, ``RUSAGE_CHILDREN``
on the host).

    python benchmarks/distortion_pods.py --waves c64 c256 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from distortion import WAVES, _wave_run
from harness import reset_truth, server_truth, settle, start_sim, stop_sim

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cluster import Cluster  # noqa: E402 - after the repository is importable
from tests.cluster.images import refs  # noqa: E402

WAYS = ("host", "host -> svc", "pod -> svc")
NODE = "gpu-node-a"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

#: The pod's client: llmbench profile as a child, then its summary and CPU seconds as JSON.
POD_CLIENT = """
import glob, json, resource, subprocess, sys
subprocess.run(["llmbench", "profile", *sys.argv[1:], "--artifact-dir", "/results/p"],
               check=True, stdout=subprocess.DEVNULL)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
s = json.load(open(glob.glob("/results/p/**/*_genai_perf.json", recursive=True)[0]))
s.update(s.pop("llmbench", {}))
print(json.dumps({"ttft": s["time_to_first_token"]["avg"], "errors": s["errors"]["total"],
                  "itl": s["inter_token_latency"]["avg"], "cpu": ru.ru_utime + ru.ru_stime}))
"""


class Kube:
    """kubectl against one cluster."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def __call__(self, *args: str, input: str | None = None, timeout: float = 600) -> str:
        r = subprocess.run(["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
                           input=input, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args[:3])}: {r.stderr.strip()}")
        return r.stdout

    def apply(self, obj: dict[str, Any]) -> None:
        self("apply", "-f", "-", input=json.dumps(obj))


def sim_in_a_pod(kube: Kube, ns: str, image: str, w: dict[str, int]) -> str:
    """``llmbench sim`` as Deployment+Service ``sim`` on NODE; its ClusterIP URL."""
    labels = {"app": "sim"}
    kube.apply({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sim", "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE}, "tolerations": [TOLERATION],
                     "containers": [{
                         "name": "sim", "image": image,
                         "args": ["sim", "--host", "0.0.0.0", "--port", "8000",
                                  "--ttft-ms", str(w["ttft"]), "--itl-ms", str(w["itl"])],
                         "ports": [{"containerPort": 8000}],
                         "readinessProbe": {"tcpSocket": {"port": 8000}, "periodSeconds": 1}}]}}}})
    kube.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "sim", "namespace": ns},
                "spec": {"selector": labels, "ports": [{"port": 8000}]}})
    kube("rollout", "status", "deployment/sim", "-n", ns, "--timeout=180s")
    ip = kube("get", "service", "sim", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
    url = f"http://{ip}:8000"
    deadline = time.monotonic() + 30
    while True:  # kube-proxy programs the Service within a second or so
        try:
            reset_truth(url)
            return url
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def profile_args(w: dict[str, int], url: str) -> list[str]:
    return ["--url", url, "--concurrency", str(w["c"]), "--request-count", str(w["n"]),
            "--synthetic-input-tokens-mean", str(w["isl"]), "--output-tokens-mean", str(w["osl"]),
            "--extra-inputs", "ignore_eos:true", "--warmup-request-count", "0",
            "--event-loop", "uvloop"]


def client_in_a_pod(kube: Kube, ns: str, image: str, w: dict[str, int]) -> dict[str, float]:
    """One run of ``llmbench profile`` in a pod on NODE against the Service's DNS name."""
    name = f"client-{uuid.uuid4().hex[:6]}"
    kube.apply({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {
            "restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": NODE},
            "tolerations": [TOLERATION],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
            "containers": [{
                "name": "client", "image": image,
                "command": ["python", "-c", POD_CLIENT,
                            *profile_args(w, f"http://sim.{ns}.svc:8000")],
                "env": [{"name": "HOME", "value": "/tmp"},
                        {"name": "MPLCONFIGDIR", "value": "/tmp/mpl"}],
                # the operator's default runner resources
                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"},
                              "limits": {"cpu": "2", "memory": "2Gi"}},
                "securityContext": {"readOnlyRootFilesystem": True,
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [{"name": "results", "mountPath": "/results"},
                                 {"name": "tmp", "mountPath": "/tmp"}]}],
            "volumes": [{"name": "results", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]}})
    deadline = time.monotonic() + 900
    while True:
        phase = kube("get", "pod", name, "-n", ns, "-o", "jsonpath={.status.phase}")
        if phase in ("Succeeded", "Failed"):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"pod {name} still {phase} after 900 s")
        time.sleep(1)
    log = kube("logs", name, "-n", ns)
    kube("delete", "pod", name, "-n", ns, "--wait=false")
    if phase != "Succeeded":
        raise RuntimeError(f"the client pod failed:\n{log[-2000:]}")
    out: dict[str, float] = json.loads(log.strip().splitlines()[-1])
    if out["errors"]:
        raise RuntimeError(f"the client pod saw errors: {out}")
    return out


def one_run(way: str, w: dict[str, int], host_url: str, svc_url: str, kube: Kube, ns: str,
            image: str) -> dict[str, float]:
    """One run of ``way``: its TTFT above the sim's record, the sim's TTFT, CPU, ITL error."""
    if way != "pod -> svc":  # a host client: distortion.py's own run of llmbench on uvloop
        return _wave_run(host_url if way == "host" else svc_url, "llmbench uvloop", w)
    reset_truth(svc_url)
    r = client_in_a_pod(kube, ns, image, w)
    truth = server_truth(svc_url)
    settle()
    return {"err": r["ttft"] - truth["ttft_mean_ms"], "server_ttft": truth["ttft_mean_ms"],
            "ttft": r["ttft"], "cpu": r["cpu"], "itl_err": r["itl"] / truth["itl_mean_ms"] - 1}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waves", nargs="*", choices=sorted(WAVES), default=sorted(WAVES))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--kubeconfig", type=Path,
                   help="a running cluster with the built image (default: start one)")
    a = p.parse_args()
    image = refs()["llmbench"]
    cluster = None
    with tempfile.TemporaryDirectory(prefix="llmbench-distortion-") as tmp:
        if a.kubeconfig is None:
            t0 = time.monotonic()
            cluster = Cluster(workdir=Path(tmp) / "cluster", tie_to_parent=True).start()
            print(f"# test cluster up in {time.monotonic() - t0:.1f} s ({cluster.server})")
        kube = Kube(a.kubeconfig or cluster.kubeconfig)  # type: ignore[union-attr]
        ns = f"distortion-{uuid.uuid4().hex[:6]}"
        kube("create", "namespace", ns)
        try:
            print(f"{'scenario':<9}{'way':<13}{'TTFT-truth ms':>14}{'(each run)':>26}"
                  f"{'sim TTFT':>10}{'CPU s':>7}{'ITL err':>9}   median of {a.repeat}")
            for name in a.waves:
                w = WAVES[name]
                host_url, sim = start_sim("--ttft-ms", str(w["ttft"]), "--itl-ms", str(w["itl"]))
                runs: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
                try:
                    svc_url = sim_in_a_pod(kube, ns, image, w)
                    for rep in range(a.repeat):
                        k = rep % len(WAYS)
                        for way in WAYS[k:] + WAYS[:k]:  # no way always first
                            runs[way].append(one_run(way, w, host_url, svc_url, kube, ns, image))
                finally:
                    stop_sim(sim)
                    kube("delete", "deployment,service", "sim", "-n", ns, "--wait=true")
                for way in WAYS:
                    rs = runs[way]

                    def med(key: str, rs: list[dict[str, float]] = rs) -> float:
                        return statistics.median(r[key] for r in rs)

                    each = "/".join(f"{r['err']:+.1f}" for r in rs)
                    print(f"{name:<9}{way:<13}{med('err'):>+14.2f}{each:>26}"
                          f"{med('server_ttft'):>10.2f}{med('cpu'):>7.2f}{med('itl_err'):>+9.2%}",
                          flush=True)
        finally:
            kube("delete", "namespace", ns, "--wait=false")
            if cluster is not None:
                cluster.stop()


if __name__ == "__main__":
    main()
