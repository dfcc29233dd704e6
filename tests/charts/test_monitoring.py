"""The chart's Prometheus and Grafana objects (``metrics.*``): the metrics Service, the
ServiceMonitor and PodMonitor (``honorLabels: true``) and the dashboard ConfigMap, rendered with
the real helm. Scraping with these settings is tested in tests/operator/test_prometheus_scrape.py
and tests/e2e/test_prometheus.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.charts.helm import CHART, by_kind, helm, render, set_args
from tests.prometheus_server import DASHBOARD

SELECTOR = {"app.kubernetes.io/name": "llmbench-operator",
            "app.kubernetes.io/instance": "llmbench-operator"}


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = by_kind(docs, "Deployment")
    return dict(deployment["spec"]["template"]["spec"]["containers"][0])


def test_the_metrics_service_selects_the_operator_pod_on_its_metrics_port() -> None:
    docs = render()
    (service,) = by_kind(docs, "Service")
    assert service["metadata"]["name"] == "llmbench-operator-metrics"
    assert service["metadata"]["namespace"] == "llmbench-system"
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == SELECTOR
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}]
    (deployment,) = by_kind(docs, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert SELECTOR.items() <= pod_labels.items()
    assert {"name": "metrics", "containerPort": 9090, "protocol": "TCP"} in _container(
        docs)["ports"]
    # no endpoint, no Service; or the Service alone turned off
    assert by_kind(render(**{"metrics.port": 0}), "Service") == []
    assert by_kind(render(**{"metrics.service.enabled": False}), "Service") == []
    annotated = render(**{"metrics.service.annotations": {"prometheus.io/scrape": "true"}})
    assert by_kind(annotated, "Service")[0]["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true"}


def test_no_monitor_or_dashboard_by_default() -> None:
    kinds = {d["kind"] for d in render()}
    assert not kinds & {"ServiceMonitor", "PodMonitor", "ConfigMap"}


def test_the_service_monitor_honors_labels_and_selects_the_metrics_service_only() -> None:
    docs = render(**{"metrics.serviceMonitor.enabled": True,
                     "metrics.serviceMonitor.namespace": "monitoring",
                     "metrics.serviceMonitor.labels": {"release": "kube-prometheus-stack"},
                     "metrics.serviceMonitor.interval": "15s",
                     "metrics.serviceMonitor.metricRelabelings": [
                         {"action": "drop", "sourceLabels": ["__name__"],
                          "regex": "llmbench_scheduled"}]})
    (monitor,) = by_kind(docs, "ServiceMonitor")
    (service,) = by_kind(docs, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["llmbench-system"]}
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    # the selector does not match the Deployment's pods' other Services (only ours is labelled)
    assert selector["llmbench.io/metrics"] == "true"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint == {
        "port": "metrics", "path": "/metrics", "scheme": "http", "honorLabels": True,
        "interval": "15s", "scrapeTimeout": "10s",
        "metricRelabelings": [{"action": "drop", "sourceLabels": ["__name__"],
                               "regex": "llmbench_scheduled"}],
    }
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_the_pod_monitor_scrapes_the_pods_metrics_port() -> None:
    docs = render(**{"metrics.podMonitor.enabled": True})
    (monitor,) = by_kind(docs, "PodMonitor")
    assert monitor["metadata"]["namespace"] == "llmbench-system"
    assert monitor["spec"]["selector"]["matchLabels"] == SELECTOR
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint == {"port": "metrics", "path": "/metrics", "scheme": "http",
                        "honorLabels": True, "interval": "30s", "scrapeTimeout": "10s"}
    assert endpoint["port"] in {p["name"] for p in _container(docs)["ports"]}


@pytest.mark.parametrize("values,named", [
    ({"metrics.serviceMonitor.enabled": True, "metrics.port": 0}, "metrics.serviceMonitor"),
    ({"metrics.serviceMonitor.enabled": True, "metrics.service.enabled": False},
     "metrics.serviceMonitor"),
    ({"metrics.podMonitor.enabled": True, "metrics.port": 0}, "metrics.podMonitor"),
    ({"metrics.serviceMonitor.interval": "30"}, "interval"),
    ({"metrics.grafanaDashboard.label": ""}, "label"),
])
def test_a_monitor_without_an_endpoint_or_a_bad_value_fails_naming_it(
    values: dict[str, Any], named: str
) -> None:
    r = helm("template", "x", str(CHART), *set_args(values), check=False)
    assert r.returncode != 0
    assert named in r.stderr, r.stderr


def test_the_dashboard_config_map_carries_the_sidecars_label_and_the_dashboard() -> None:
    docs = render(**{"metrics.grafanaDashboard.enabled": True,
                     "metrics.grafanaDashboard.namespace": "monitoring",
                     "metrics.grafanaDashboard.annotations": {"grafana_folder": "LLM"}})
    (cm,) = by_kind(docs, "ConfigMap")
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "LLM"}
    assert json.loads(cm["data"]["llmbench.json"]) == json.loads(DASHBOARD.read_text())
    other = render(**{"metrics.grafanaDashboard.enabled": True,
                      "metrics.grafanaDashboard.label": "dashboards",
                      "metrics.grafanaDashboard.labelValue": "llm"})
    assert by_kind(other, "ConfigMap")[0]["metadata"]["labels"]["dashboards"] == "llm"
