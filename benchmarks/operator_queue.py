"""API requests per second the operator makes while benchmarks queue behind one on an endpoint.

One long benchmark holds the endpoint's Lease (a sweep of one point with many requests against
llm-d-inference-sim); then 1, 10 and 20 more benchmarks on the same endpoint are queued behind
it (``phase: Queued``) and, once all of them are, the script counts the operator's API requests
over a window of ``--window`` seconds (default 60: longer than the operator's resync period, so
every window holds a resync). Goal (issue 21): the rate does not grow with the queue.

How requests are counted: on the cluster this script starts (the project's test cluster,
``bash hack/cluster/build.sh`` and ``bash hack/image/build.sh`` first), the API server writes an
audit log of every request by a ServiceAccount of the operator's namespace (stage
``RequestReceived``, so each request is one line, a watch is counted once when it opens), and
the script counts the lines of the operator's ServiceAccount received inside the window. With
``--kubeconfig`` (another cluster, no audit log of ours) it falls back to the API server's
``apiserver_request_total`` delta, which counts every client (controllers, kubelets, ...): say so
when quoting it.

    .venv/bin/python benchmarks/operator_queue.py [--window 60] [--queues 1,10,20]
    .venv/bin/python benchmarks/operator_queue.py --kubeconfig K   # installs the chart there
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cluster import Cluster  # noqa: E402
from tests.e2e.conftest import CRD_FILE, K8s  # noqa: E402
from tests.e2e.release import OPERATOR_NS, installed  # noqa: E402
from tests.e2e.test_operator import Target, benchmark  # noqa: E402

NAMESPACE = "bench-queue"

AUDIT_POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted, ResponseComplete, Panic]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:{OPERATOR_NS}"]
- level: None
"""


def audit_args(workdir: Path) -> tuple[str, ...]:
    """kube-apiserver flags for the audit log of the operator namespace's ServiceAccounts."""
    workdir.mkdir(parents=True, exist_ok=True)
    policy = workdir / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    return (f"--audit-policy-file={policy}", f"--audit-log-path={workdir / 'audit.log'}",
            "--audit-log-maxsize=0")


def request_total(k8s: K8s) -> float:
    """The API server's count of requests served so far (all clients)."""
    text = k8s.kubectl("get", "--raw", "/metrics").stdout
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("apiserver_request_total{"))


def audited(log: Path, user: str, t0: float, t1: float) -> collections.Counter[str]:
    """The audited requests of ``user`` received in [t0, t1) (epoch seconds), by verb/resource."""
    counts: collections.Counter[str] = collections.Counter()
    for line in log.read_text().splitlines():
        ev = json.loads(line)
        if ev.get("user", {}).get("username") != user:
            continue
        at = datetime.fromisoformat(ev["requestReceivedTimestamp"]).timestamp()
        if t0 <= at < t1:
            ref = ev.get("objectRef") or {}
            what = ref.get("resource", ev.get("requestURI", "?"))
            if ref.get("subresource"):
                what += "/" + ref["subresource"]
            counts[f"{ev['verb']} {what}"] += 1
    return counts


def phases(k8s: K8s) -> dict[str, str]:
    out = k8s.kubectl("get", "llmb", "-n", NAMESPACE, "-o", "json").stdout
    return {o["metadata"]["name"]: (o.get("status") or {}).get("phase", "")
            for o in json.loads(out)["items"]}


def measure(k8s: K8s, audit_log: Path | None, window: float, queues: list[int]) -> list[str]:
    """Installs the chart, holds the endpoint, grows the queue; one printed row per length."""
    k8s.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_FILE))
    k8s.kubectl("wait", "--for=condition=Established", "crd/llmbenchmarks.llmbench.io",
                "--timeout=60s")
    release = installed(k8s)
    rel = next(release)
    rows: list[str] = []
    try:
        k8s.kubectl("create", "namespace", NAMESPACE)
        k8s.wait_for("ServiceAccount default", lambda: k8s.get("serviceaccount", "default",
                                                               NAMESPACE), 30)
        target = Target(k8s, NAMESPACE)
        target.deploy()
        sa = rel.pod()["spec"]["serviceAccountName"]
        user = f"system:serviceaccount:{OPERATOR_NS}:{sa}"
        # about 1000 s of requests at concurrency 1 (10 ms TTFT): it outlives every window
        k8s.apply(benchmark("holder", NAMESPACE, target.ref, telemetry={"dcgm": "off"},
                            load={"requestCount": 100000, "warmupRequestCount": 0},
                            sweep={"type": "concurrency", "values": [1]}))
        k8s.wait_for("the holder to be Running", lambda: phases(k8s).get("holder") == "Running",
                     120, diag=rel.diag)
        queued = 0
        for n in queues:
            for i in range(queued, n):
                k8s.apply(benchmark(f"queued-{i}", NAMESPACE, target.ref,
                                    telemetry={"dcgm": "off"}))
            queued = n
            k8s.wait_for(f"{n} benchmarks Queued", lambda n=n: sum(
                p == "Queued" for p in phases(k8s).values()) == n, 120, diag=rel.diag)
            time.sleep(5)  # the reactions to the new benchmarks are over
            before, t0 = request_total(k8s), time.time()
            time.sleep(window)
            t1, after = time.time(), request_total(k8s)
            if phases(k8s).get("holder") != "Running":
                raise RuntimeError("the holder finished inside the window: raise its requestCount")
            if audit_log is not None:
                time.sleep(1)  # the audit backend's last lines are written
                counts = audited(audit_log, user, t0, t1)
                total, source = sum(counts.values()), "operator (audit log)"
                top = ", ".join(f"{k} {v}" for k, v in counts.most_common(4))
            else:
                total, top = int(after - before), "-"
                source = "all clients (apiserver_request_total)"
            rows.append(f"{n:>6} {t1 - t0:>8.1f} {total:>8} {total / (t1 - t0):>7.2f}  "
                        f"{source}: {top}")
            print(rows[-1], flush=True)
    finally:
        k8s.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
        release.close()
    return rows


def rate(row: str) -> float:
    return float(row.split()[3])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", help="use this cluster (default: start the test cluster)")
    ap.add_argument("--window", type=float, default=60.0, help="seconds counted per queue length")
    ap.add_argument("--queues", default="1,10,20", help="queue lengths, ascending")
    a = ap.parse_args()
    queues = [int(q) for q in a.queues.split(",")]
    print(f"{'queued':>6} {'window_s':>8} {'requests':>8} {'req/s':>7}  "
          "counted: top verbs/resources")
    if a.kubeconfig:
        rows = measure(K8s(kubeconfig=Path(a.kubeconfig)), None, a.window, queues)
    else:
        with tempfile.TemporaryDirectory(prefix="llmbench-queue-") as tmp:
            workdir = Path(tmp)
            cluster = Cluster(workdir=workdir, tie_to_parent=True,
                              apiserver_args=audit_args(workdir))
            cluster.start()
            try:
                rows = measure(K8s(kubeconfig=cluster.kubeconfig, cluster=cluster),
                               workdir / "audit.log", a.window, queues)
            finally:
                cluster.stop()
    first, last = rate(rows[0]), rate(rows[-1])
    holds = last <= first * 1.25 + 0.1
    print(f"goal (rate not growing with the queue): {'holds' if holds else 'DOES NOT hold'} "
          f"({first:.2f} req/s with {queues[0]} queued, {last:.2f} with {queues[-1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
