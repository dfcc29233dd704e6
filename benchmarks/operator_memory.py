"""Operator peak RSS after a restart with many finished benchmarks and their run ConfigMaps.

Installs the chart, scales the operator to 0, creates ``--benchmarks`` finished-looking
benchmarks (``phase: Succeeded``, ``--runs`` entries in ``status.history``, the status the
operator writes) and, for each, ``--runs`` run ConfigMaps named and labelled as the operator's
(``<name>-run-<n>``, ``llmbench.io/benchmark``/``run``, owned by the benchmark, no
``llmbench.io/active``: finished) holding ``--cm-kb`` KB of data each, then scales the operator
back to 1 (a restart that finds all of it) and samples the operator process's ``VmHWM``/
``VmRSS`` (``/proc/1/status`` in its container, through ``kubectl exec``) for ``--seconds``
after it is Ready. Prints the peak RSS, the container's memory limit (the chart's) and whether
it was OOMKilled. Goal (issue 21, 100 x 30 x 300 KB): under the limit, no OOMKill.

Starts the project's test cluster unless ``--kubeconfig`` names one (``bash
hack/cluster/build.sh`` and ``bash hack/image/build.sh`` first). ~``benchmarks x runs x cm-kb``
goes into etcd (the test cluster's quota is 2 GiB).

    .venv/bin/python benchmarks/operator_memory.py [--benchmarks 100] [--runs 30] [--cm-kb 300]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmbench.api.job import DIGEST_KEY, SUMMARY_KEY, run_name  # noqa: E402
from llmbench.api.status import dump  # noqa: E402
from llmbench.operator.build import child_labels, owner_reference  # noqa: E402
from llmbench.operator.schedule import measured_hash  # noqa: E402
from llmbench.operator.status import history_entry  # noqa: E402
from tests.cluster import Cluster  # noqa: E402
from tests.e2e.conftest import CRD_FILE, K8s  # noqa: E402
from tests.e2e.release import installed  # noqa: E402
from tests.e2e.test_operator import benchmark  # noqa: E402

NAMESPACE = "bench-memory"
GROUP, VERSION, PLURAL = "llmbench.io", "v1alpha1", "llmbenchmarks"
STARTED, FINISHED = "2026-01-01T00:00:00Z", "2026-01-01T00:10:00Z"


def finished_benchmark(k8s: K8s, name: str, runs: int, cm_bytes: int) -> None:
    """One benchmark as the operator leaves it after ``runs`` runs, with its run ConfigMaps."""
    spec = benchmark(name, NAMESPACE, {"service": {"name": "vllm", "port": 8000}},
                     historyLimit=runs, telemetry={"dcgm": "off"})
    obj = k8s.custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, spec)
    history = [dump(history_entry(
        n, "Succeeded", None, started=STARTED, finished=FINISHED, valid=True,
        config_map=run_name(name, n), message=f"run {n} succeeded: 3 points",
        spec_hash=measured_hash(obj["spec"]))) for n in range(1, runs + 1)]
    status = {"run": runs, "phase": "Succeeded",
              "observedGeneration": obj["metadata"]["generation"],
              "specHash": measured_hash(obj["spec"]), "resultsConfigMap": run_name(name, runs),
              "lastRunTime": FINISHED, "message": f"run {runs} succeeded", "history": history}
    k8s.custom.patch_namespaced_custom_object_status(GROUP, VERSION, NAMESPACE, PLURAL, name,
                                                     {"status": status})
    row = "concurrency,ott,ttft_p99_ms\n"
    summary = (row * (cm_bytes // len(row) + 1))[:cm_bytes]
    for n in range(1, runs + 1):
        k8s.core.create_namespaced_config_map(NAMESPACE, {
            "metadata": {"name": run_name(name, n), "labels": child_labels(name, n),
                         "ownerReferences": [owner_reference(obj)]},
            "data": {DIGEST_KEY: json.dumps({"finished": True, "points": []}),
                     SUMMARY_KEY: summary},
        })


def proc_status(k8s: K8s, pod: str, ns: str) -> dict[str, int]:
    """VmRSS and VmHWM (bytes) of the operator process, PID 1 of its container."""
    out = k8s.kubectl("exec", "-n", ns, pod, "--", "python", "-c",
                      "print(open('/proc/1/status').read())").stdout
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return {k: int(fields[k].split()[0]) * 1024 for k in ("VmRSS", "VmHWM")}


def measure(k8s: K8s, benchmarks: int, runs: int, cm_kb: int, seconds: float) -> str:
    k8s.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_FILE))
    k8s.kubectl("wait", "--for=condition=Established", "crd/llmbenchmarks.llmbench.io",
                "--timeout=60s")
    release = installed(k8s)
    rel = next(release)
    try:
        k8s.kubectl("create", "namespace", NAMESPACE)
        k8s.kubectl("scale", "deployment", rel.fullname, "-n", rel.namespace, "--replicas=0")
        k8s.wait_for("the operator pod to be gone",
                     lambda: not k8s.pods(rel.namespace, rel.selector), 90)
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda i: finished_benchmark(k8s, f"done-{i}", runs, cm_kb * 1000),
                          range(benchmarks)))
        made = time.monotonic() - t0
        k8s.kubectl("scale", "deployment", rel.fullname, "-n", rel.namespace, "--replicas=1")
        t1 = time.monotonic()
        pod = rel.ready()
        ready = time.monotonic() - t1
        name = pod["metadata"]["name"]
        peak, rss = 0, 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            st = proc_status(k8s, name, rel.namespace)
            peak, rss = max(peak, st["VmHWM"]), st["VmRSS"]
            time.sleep(2)
        pod = k8s.get("pod", name, rel.namespace) or {}
        cs = (pod.get("status") or {}).get("containerStatuses") or [{}]
        last = (cs[0].get("lastState") or {}).get("terminated") or {}
        oom = last.get("reason") == "OOMKilled"
        limit = pod["spec"]["containers"][0].get("resources", {}).get("limits", {}).get("memory")
        phases = json.loads(k8s.kubectl("get", "llmb", "-n", NAMESPACE, "-o", "json").stdout)
        started = sum((o.get("status") or {}).get("phase") != "Succeeded"
                      for o in phases["items"])
        return (f"{benchmarks} benchmarks x {runs} ConfigMaps x {cm_kb} KB "
                f"(~{benchmarks * runs * cm_kb / 1000:.0f} MB, created in {made:.0f} s): "
                f"operator Ready {ready:.1f} s after the restart; peak RSS (VmHWM) "
                f"{peak / 2**20:.0f} MiB, RSS at the end {rss / 2**20:.0f} MiB "
                f"over {seconds:.0f} s; "
                f"memory limit {limit}; OOMKilled {oom}; restarts {cs[0].get('restartCount')}; "
                f"benchmarks the restart started again: {started}")
    finally:
        k8s.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
        release.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", help="use this cluster (default: start the test cluster)")
    ap.add_argument("--benchmarks", type=int, default=100)
    ap.add_argument("--runs", type=int, default=30, help="run ConfigMaps (and history) each")
    ap.add_argument("--cm-kb", type=int, default=300, help="KB of data per run ConfigMap")
    ap.add_argument("--seconds", type=float, default=60.0, help="sampling after Ready")
    a = ap.parse_args()
    args: tuple[Any, ...] = (a.benchmarks, a.runs, a.cm_kb, a.seconds)
    if a.kubeconfig:
        print(measure(K8s(kubeconfig=Path(a.kubeconfig)), *args))
        return 0
    with tempfile.TemporaryDirectory(prefix="llmbench-memory-") as tmp:
        cluster = Cluster(workdir=Path(tmp), tie_to_parent=True)
        cluster.start()
        try:
            print(measure(K8s(kubeconfig=cluster.kubeconfig, cluster=cluster), *args))
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
