"""The operator's ``/metrics`` endpoint (the real HTTP server of :mod:`llmbench.operator.exporter`
on loopback) scraped by Debian's real Prometheus with the settings of the chart's
ServiceMonitor, then every PromQL query of the shipped Grafana dashboard evaluated against it.
The e2e twin (tests/e2e/test_prometheus.py) scrapes the operator pod on the cluster."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmbench.operator import exporter
from llmbench.operator.exporter import HELP, forget, observe, start_metrics, stop_metrics
from tests.charts.helm import by_kind, render
from tests.operator.test_exporter import benchmark
from tests.prometheus_server import (
    DASHBOARD,
    dashboard_queries,
    running_prometheus,
    service_monitor_job,
)


@pytest.fixture
def endpoint() -> Iterator[str]:
    """The exporter serving on a free loopback port; its address ``127.0.0.1:PORT``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    saved = (exporter.METRICS.port, exporter.METRICS.addr)
    exporter.METRICS.port, exporter.METRICS.addr = port, "127.0.0.1"
    try:
        asyncio.run(start_metrics())
        assert exporter.METRICS.server is not None
        yield f"127.0.0.1:{port}"
    finally:
        asyncio.run(stop_metrics())
        forget("team-a", "nightly")
        exporter.METRICS.port, exporter.METRICS.addr = saved


def test_prometheus_scrapes_the_endpoint_with_the_service_monitor_and_the_dashboard_evaluates(
    endpoint: str, tmp_path: Path
) -> None:
    docs = render(**{"metrics.serviceMonitor.enabled": True,
                     "metrics.serviceMonitor.interval": "1s",
                     "metrics.serviceMonitor.scrapeTimeout": "1s"})
    (monitor,) = by_kind(docs, "ServiceMonitor")
    (service,) = by_kind(docs, "Service")
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
    job = service_monitor_job(monitor, service, [endpoint], pod="llmbench-operator-0")

    observe(benchmark())  # first sight (run 7): the run counter's baseline
    later = benchmark(run=8)
    later["status"]["conditions"][-1]["status"] = "True"  # run 8 regressed
    config = {"global": {"evaluation_interval": "1s"}, "scrape_configs": [job]}
    with running_prometheus(config, tmp_path / "prom") as prom:
        prom.wait('up{endpoint="metrics"} == 1', "the endpoint to be up")
        prom.wait("llmbench_result_run", "the first scrape")
        observe(later)
        rows = prom.wait("llmbench_regressed == 1", "run 8's verdict")
        # the benchmark's namespace and the scraped pod's namespace side by side
        (row,) = rows
        assert row["metric"]["benchmark_namespace"] == "team-a"
        assert row["metric"]["namespace"] == service["metadata"]["namespace"]
        assert "exported_namespace" not in row["metric"]
        runs = prom.wait('llmbench_runs_total{result="succeeded"} == 1', "run 8 counted")
        assert runs[0]["metric"]["benchmark"] == "nightly"

        # the dashboard's variables list the benchmark ...
        doc = json.loads(DASHBOARD.read_text())
        for var in doc["templating"]["list"][1:]:
            label = var["query"]["query"].split(",")[-1].strip(" )")
            values = prom.api(f"label/{label}/values", **{"match[]": "llmbench_phase"})
            assert {"benchmark_namespace": "team-a", "benchmark": "nightly"}[label] in values
        # ... and every panel's query evaluates and returns series
        for title, expr in dashboard_queries(benchmark_namespace="team-a", benchmark=".*"):
            assert prom.query(expr), (title, expr)
        # every metric the operator exports is on the dashboard
        used = {m for _t, e in dashboard_queries(benchmark_namespace="x", benchmark="x")
                for m in HELP if m in e}
        assert used == set(HELP) - {"llmbench_result_run", "llmbench_scheduled"}, used


def test_the_dashboard_is_valid_grafana_json_with_a_datasource_variable() -> None:
    doc = json.loads(DASHBOARD.read_text())
    names = [v["name"] for v in doc["templating"]["list"]]
    assert names == ["datasource", "benchmark_namespace", "benchmark"]
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    for panel in doc["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            assert 'benchmark_namespace=~"$benchmark_namespace"' in target["expr"], panel
    # no hard-coded datasource uid or namespace label: the sidecar loads it into any Grafana
    text = DASHBOARD.read_text()
    assert '"namespace"' not in text and "exported_namespace" not in text
    assert doc["uid"] == "llmbench-operator"
