"""What the operator costs: reaction times, memory, and API traffic with many benchmarks present.

Starts the project's test cluster (``bash hack/cluster/build.sh`` first), the operator as a
process with the service account of ``deploy/operator-rbac.yaml``, and llm-d-inference-sim on
a GPU node, then prints:

* apply -> runner Job created (seconds, median of ``--runs``; goal < 2 s);
* the runner's last point in its ConfigMap -> ``phase: Succeeded`` in status (goal < 2 s);
* operator RSS and API requests per minute with ``--idle`` finished benchmarks present
  (goal < 150 MB, and a request rate that does not grow with their number: compare
  ``--idle 10`` with ``--idle 100``).

Both times are seen by this script through watches, so they include the watch latency a user
of ``kubectl get -w`` would see. API requests are the API server's own
``apiserver_request_total`` over a window with the operator running, minus a window of the same
length with it stopped (the control plane's own traffic).

    .venv/bin/python benchmarks/operator_overhead.py [--runs 3] [--idle 100] [--window 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config, watch  # noqa: E402

from tests.cluster import Cluster  # noqa: E402
from tests.e2e.conftest import K8s  # noqa: E402
from tests.e2e.test_operator import (  # noqa: E402
    OPERATOR_NS,
    RBAC_FILE,
    Operator,
    Target,
    benchmark,
    sa_kubeconfig,
)

CRD = ROOT / "crds" / "llmbench.io_llmbenchmarks.yaml"


def request_total(k8s: K8s) -> float:
    """The API server's count of requests served so far (all clients)."""
    text = k8s.kubectl("get", "--raw", "/metrics").stdout
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("apiserver_request_total{")
    )


def first_event(stream: Any, predicate: Any, timeout: float) -> float:
    """Monotonic time of the first watch event whose object satisfies ``predicate``."""
    deadline = time.monotonic() + timeout
    for ev in stream:
        if predicate(ev["object"]):
            return time.monotonic()
        if time.monotonic() > deadline:
            break
    raise TimeoutError("no matching event")


def one_run(
    k8s: K8s, api: client.ApiClient, ns: str, target: Target, i: int
) -> tuple[float, float]:
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    custom = client.CustomObjectsApi(api)
    name = f"bench-{i}"
    results: dict[str, float] = {}

    def watch_job() -> None:
        w = watch.Watch()
        results["job"] = first_event(
            w.stream(batch.list_namespaced_job, ns, timeout_seconds=120),
            lambda o: o.metadata.name == f"{name}-run-1", 120,
        )
        w.stop()

    def watch_cm() -> None:
        def finished(o: Any) -> bool:
            digest = (o.data or {}).get("digest.json")
            return o.metadata.name == f"{name}-run-1" and bool(digest) and json.loads(digest).get(
                "finished"
            ) is True

        w = watch.Watch()
        results["last_point"] = first_event(
            w.stream(core.list_namespaced_config_map, ns, timeout_seconds=300), finished, 300
        )
        w.stop()

    def watch_status() -> None:
        w = watch.Watch()
        results["succeeded"] = first_event(
            w.stream(custom.list_namespaced_custom_object, "llmbench.io", "v1alpha1", ns,
                     "llmbenchmarks", timeout_seconds=300),
            lambda o: o["metadata"]["name"] == name
            and (o.get("status") or {}).get("phase") in ("Succeeded", "Failed"), 300,
        )
        w.stop()

    threads = [threading.Thread(target=f) for f in (watch_job, watch_cm, watch_status)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # the watches are open
    t0 = time.monotonic()
    k8s.apply(benchmark(name, ns, {"url": target.url,
                                   "podSelector": {"matchLabels": target.labels}},
                        telemetry={"dcgm": "off"},
                        sweep={"type": "concurrency", "values": [1, 2]}))
    for t in threads:
        t.join()
    return results["job"] - t0, results["succeeded"] - results["last_point"]


def idle_benchmarks(k8s: K8s, ns: str, n: int) -> None:
    """``n`` finished benchmarks (refused by the operator's Python-only check: Failed at once)."""
    docs = [benchmark(f"idle-{i}", ns, {"url": "http://127.0.0.1:9"}, schedule="0 0 30 2 *")
            for i in range(n)]
    k8s.apply(docs)

    def all_failed() -> bool:
        out = k8s.kubectl("get", "llmb", "-n", ns, "-o", "json").stdout
        items = json.loads(out)["items"]
        return sum((o.get("status") or {}).get("phase") == "Failed" for o in items) >= n

    k8s.wait_for(f"{n} idle benchmarks to be finished", all_failed, 300, interval=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--idle", type=int, default=100)
    ap.add_argument("--window", type=float, default=30.0, help="seconds per traffic window")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="llmbench-opbench-"))
    cluster = Cluster(workdir=work / "k8s", tie_to_parent=True)
    cluster.start()
    k8s = K8s(kubeconfig=cluster.kubeconfig, cluster=cluster)
    op: Operator | None = None
    try:
        k8s.kubectl("apply", "--server-side", "-f", str(CRD))
        k8s.wait_for("CRD", lambda: k8s.kubectl("get", "llmb", "-A", check=False).returncode == 0,
                     60)
        k8s.kubectl("create", "namespace", OPERATOR_NS)
        k8s.kubectl("apply", "-f", str(RBAC_FILE))
        k8s.wait_for("SA", lambda: k8s.get("serviceaccount", "llmbench-operator", OPERATOR_NS), 30)
        ns = "bench"
        k8s.kubectl("create", "namespace", ns)
        k8s.wait_for("default SA", lambda: k8s.get("serviceaccount", "default", ns), 30)
        op = Operator(sa_kubeconfig(k8s, OPERATOR_NS, "llmbench-operator", work / "op.kubeconfig"),
                      work / "operator.log")
        op.start()
        api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
        target = Target(k8s, ns)
        target.deploy()
        times = [one_run(k8s, api, ns, target, i) for i in range(args.runs)]
        to_job = statistics.median(t[0] for t in times)
        to_done = statistics.median(t[1] for t in times)
        print(f"apply -> Job created:            median {to_job:.2f} s  "
              f"({', '.join(f'{t[0]:.2f}' for t in times)})")
        print(f"last point -> Succeeded status:  median {to_done:.2f} s  "
              f"({', '.join(f'{t[1]:.2f}' for t in times)})")
        for n in sorted({10, args.idle}):
            have = len(json.loads(k8s.kubectl("get", "llmb", "-n", ns, "-o", "json").stdout)[
                "items"])
            idle_benchmarks(k8s, ns, max(0, n - have + args.runs))
            time.sleep(5)
            assert op.proc is not None
            rss = psutil.Process(op.proc.pid).memory_info().rss / 2**20
            a = request_total(k8s)
            time.sleep(args.window)
            with_op = request_total(k8s) - a
            op.stop()
            a = request_total(k8s)
            time.sleep(args.window)
            without = request_total(k8s) - a
            op.start()
            per_min = (with_op - without) * 60 / args.window
            print(f"{n:4d} finished benchmarks: operator RSS {rss:.0f} MiB, "
                  f"API requests/min from the operator {per_min:.0f} "
                  f"(window {args.window:.0f} s: {with_op:.0f} with, {without:.0f} without)")
    finally:
        if op is not None:
            op.stop()
        cluster.stop()


if __name__ == "__main__":
    main()
