"""A real Prometheus (Debian's, started on this machine) scraping the chart's operator pod with
the chart's ServiceMonitor settings, the way the Prometheus Operator would: the endpoint
(path, scheme, honorLabels, interval) from ``helm template`` of the same release's values, the
targets from the metrics Service's EndpointSlice, the target labels the Prometheus Operator
adds (``namespace``, ``pod``, ``service``, ``job``). Then the shipped dashboard's every query
evaluates against it and returns series, and the alert's labels carry the benchmark's namespace.

As in test_operator_metrics, the finished runs are written through the status subresource (a
``Succeeded`` benchmark at its generation is done: the operator only lists it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.charts.helm import by_kind, render
from tests.e2e.release import OPERATOR_NS, operator_values
from tests.e2e.test_operator import benchmark
from tests.e2e.test_operator_metrics import (  # metrics_operator: the fixture, reused
    MetricsOperator,
    finished_status,
    metrics_operator,  # noqa: F401
)
from tests.prometheus_server import (
    DASHBOARD,
    dashboard_queries,
    running_prometheus,
    service_monitor_job,
)

pytestmark = pytest.mark.e2e


def _status(generation: int, run: int) -> dict[str, Any]:
    st = finished_status(generation)
    st["run"] = run
    for p in st["points"]:  # GPU telemetry: the energy gauge exists too
        p["joulesPerOutputToken"] = round(p["gpuPowerW"] / p["ott"], 3)
    return st


def test_prometheus_scrapes_the_operator_with_the_service_monitor_and_the_dashboard_works(
    crd_installed: Any, namespace: str, metrics_operator: MetricsOperator,  # noqa: F811
    tmp_path: Path,
) -> None:
    k8s, op = crd_installed, metrics_operator
    k8s.apply(benchmark("nightly", namespace, {"url": "http://nothing.invalid:9"},
                        cost={"pricePerHour": 4.5, "currency": "USD"}))
    generation = int(k8s.get("llmbenchmark", "nightly", namespace)["metadata"]["generation"])
    k8s.kubectl("patch", "llmbenchmark", "nightly", "-n", namespace, "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": _status(generation, 3)}))
    op.start()
    # helm's NOTES name the endpoint and the label
    assert (f"Prometheus metrics: http://{op.release.fullname}-metrics.{OPERATOR_NS}:{op.port}"
            "/metrics (metrics.serviceMonitor.enabled=true creates a ServiceMonitor)."
            ) in op.release.notes
    assert "the label benchmark_namespace" in op.release.notes

    # the ServiceMonitor of this very release's values, and its Service as the cluster has it
    values = {**operator_values(k8s, **{"metrics.port": op.port}),
              "metrics.serviceMonitor.enabled": True,
              "metrics.serviceMonitor.interval": "2s",
              "metrics.serviceMonitor.scrapeTimeout": "2s"}
    (monitor,) = by_kind(render(op.release.name, OPERATOR_NS, **values), "ServiceMonitor")
    selector = ",".join(f"{k}={v}" for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    services = json.loads(k8s.kubectl("get", "service", "-n", OPERATOR_NS, "-l", selector,
                                      "-o", "json").stdout)["items"]
    assert [s["metadata"]["name"] for s in services] == [f"{op.release.fullname}-metrics"]
    service = services[0]

    def ready_addresses() -> list[tuple[str, str, int]] | None:
        slices = json.loads(k8s.kubectl(
            "get", "endpointslices", "-n", OPERATOR_NS, "-l",
            f"kubernetes.io/service-name={service['metadata']['name']}", "-o", "json",
        ).stdout)["items"]
        out = [(a, e["targetRef"]["name"], p["port"])
               for s in slices for e in s.get("endpoints") or []
               if (e.get("conditions") or {}).get("ready")
               for a in e["addresses"] for p in s.get("ports") or [] if p["name"] == "metrics"]
        return out or None

    addresses = k8s.wait_for("the metrics Service's ready endpoint", ready_addresses, 60,
                             diag=op.tail)
    ((ip, pod, port),) = addresses
    assert (ip, port) == (op.pod_ip, op.port)
    job = service_monitor_job(monitor, service, [f"{ip}:{port}"], pod=pod)
    assert job["honor_labels"] is True and job["metrics_path"] == "/metrics"

    config = {"global": {"evaluation_interval": "2s"}, "scrape_configs": [job]}
    with running_prometheus(config, tmp_path / "prom") as prom:
        prom.wait(f'up{{pod="{pod}"}} == 1', "the operator pod's target to be up",
                  diag=op.tail)
        ours = f'benchmark_namespace="{namespace}"'
        (row,) = prom.wait(f"llmbench_regressed{{{ours}}} == 1", "the regressed gauge",
                           diag=op.tail)
        # what the alert's labels will be: the benchmark's namespace and the operator pod's
        assert row["metric"]["namespace"] == OPERATOR_NS
        assert row["metric"]["pod"] == pod
        assert row["metric"]["benchmark"] == "nightly"
        assert "exported_namespace" not in row["metric"]
        (cost,) = prom.query(f"llmbench_cost_per_million_output_tokens{{{ours}}}")
        assert cost["metric"]["currency"] == "USD"
        assert float(cost["value"][1]) == pytest.approx(4.5 / (831.14 * 3600) * 1e6)

        # run 4 finishes (a valid run): the counter counts it, through the watch
        k8s.kubectl("patch", "llmbenchmark", "nightly", "-n", namespace,
                    "--subresource=status", "--type=merge", "-p",
                    json.dumps({"status": _status(generation, 4)}))
        prom.wait(f'llmbench_runs_total{{{ours}, result="succeeded"}} == 1',
                  "run 4 counted", diag=op.tail)
        prom.wait(f'increase(llmbench_runs_total{{{ours}, result="succeeded"}}[1h]) > 0',
                  "the counter's increase", diag=op.tail)

        doc = json.loads(DASHBOARD.read_text())
        for var in doc["templating"]["list"][1:]:
            label = var["query"]["query"].split(",")[-1].strip(" )")
            assert {"benchmark_namespace": namespace, "benchmark": "nightly"}[label] in prom.api(
                f"label/{label}/values", **{"match[]": "llmbench_phase"})
        empty = [(title, expr) for title, expr in dashboard_queries(
            benchmark_namespace=namespace, benchmark="nightly") if not prom.query(expr)]
        assert empty == [], empty
