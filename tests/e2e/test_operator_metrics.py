"""The operator's ``/metrics`` on the project's cluster: the chart's operator pod with
``metrics.port`` (its container port ``metrics``, the chart's RBAC: no new permission), scraped
over HTTP at its pod IP from this machine and parsed with Prometheus' text parser.

The finished run is written straight through the status subresource before the operator
starts: a ``Succeeded`` benchmark whose ``observedGeneration`` is its generation is done
(:func:`llmbench.operator.status.decide`), so the operator only lists it and the gauges come
from that status alone.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.release import OPERATOR_NS, Release, operator_values
from tests.e2e.test_operator import benchmark

pytestmark = pytest.mark.e2e


class MetricsOperator:
    """The chart's operator with ``metrics.port``, installed by :meth:`start` (the test first
    writes the status the operator must find), scraped at its pod IP."""

    port = 9090

    def __init__(self, k8s: Any) -> None:
        self.k8s = k8s
        self.release = Release(k8s, "metrics", OPERATOR_NS)
        self.pod_ip = ""
        self.started = False

    def start(self) -> None:
        if self.k8s.get("namespace", OPERATOR_NS) is None:
            self.k8s.kubectl("create", "namespace", OPERATOR_NS)
        self.release.install(**operator_values(self.k8s, **{"metrics.port": self.port}))
        self.started = True
        pod = self.release.ready()
        ports = pod["spec"]["containers"][0]["ports"]
        assert {"name": "metrics", "containerPort": self.port, "protocol": "TCP"} in ports
        self.pod_ip = pod["status"]["podIP"]

    def stop(self) -> None:
        if self.started:
            self.release.uninstall()

    def tail(self) -> str:
        return self.release.tail()

    def scrape(self) -> dict[str, list[Any]]:
        """Metric family name -> its samples, parsed from the real text format. /metrics
        listens before the pod is Ready (``llmbench operator`` opens it before anything
        else), so a refused connection is an error from the first scrape on (an empty answer
        would pass the checks that series are gone)."""
        url = f"http://{self.pod_ip}:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            assert r.headers["Content-Type"].startswith("text/plain"), r.headers
            text = r.read().decode()
        return {f.name: f.samples for f in text_string_to_metric_families(text)}


def finished_status(generation: int) -> dict[str, Any]:
    """Run 3 of a nightly benchmark: Succeeded, valid, regressed, knee at 8."""

    def point(value: int, ttft: float, itl: float, ott: float, ok: bool) -> dict[str, Any]:
        return {"name": f"concurrency_{value}", "value": value, "state": "Succeeded",
                "ttftP99Ms": ttft, "itlP99Ms": itl, "ott": ott, "sloMet": ok, "valid": True,
                "gpuPowerW": 1400.5, "gpuEnergyJ": 84030.0, "gpus": 2}

    def cond(type_: str, status: str, reason: str) -> dict[str, Any]:
        return {"type": type_, "status": status, "reason": reason, "message": "",
                "lastTransitionTime": "2026-11-30T02:41:30Z", "observedGeneration": generation}

    return {
        "phase": "Succeeded", "observedGeneration": generation, "run": 3, "progress": "4/4",
        "points": [point(1, 41.2, 8.1, 120.5, True), point(2, 44.0, 8.3, 236.9, True),
                   point(8, 88.31, 11.47, 831.14, True), point(16, 655.67, 19.5, 1016.0, False)],
        "knee": {"reached": True, "value": 8, "label": "8", "rule": "ott-saturation"},
        "maxUnderSLO": {"value": 8, "ott": 831.14, "ttftP99Ms": 88.31, "firstFailingValue": 16},
        "startedTime": "2026-11-30T02:00:00Z", "lastRunTime": "2026-11-30T02:41:30Z",
        "conditions": [
            cond("Accepted", "True", "Valid"), cond("Succeeded", "True", "RunSucceeded"),
            cond("MeasurementValid", "True", "Valid"),
            cond("Regressed", "True", "MaxOttUnderSloDropped"),
        ],
    }


@pytest.fixture
def metrics_operator(crd_installed: Any) -> Iterator[MetricsOperator]:
    op = MetricsOperator(crd_installed)
    try:
        yield op
    finally:
        op.stop()


def test_metrics_serve_the_last_valid_run_and_forget_deleted_benchmarks(
    crd_installed: Any, namespace: str, metrics_operator: MetricsOperator
) -> None:
    k8s, op = crd_installed, metrics_operator
    body = benchmark("nightly", namespace, {"url": "http://nothing.invalid:9"},
                     cost={"pricePerHour": 4.5})
    k8s.apply(body)
    generation = int(k8s.get("llmbenchmark", "nightly", namespace)["metadata"]["generation"])
    k8s.kubectl(
        "patch", "llmbenchmark", "nightly", "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": finished_status(generation)}),
    )
    op.start()

    def ours(families: dict[str, list[Any]], name: str) -> list[Any]:
        return [s for s in families.get(name, [])
                if s.labels.get("benchmark_namespace") == namespace]

    def scraped() -> dict[str, list[Any]] | None:
        families = op.scrape()
        return families if ours(families, "llmbench_result_run") else None

    families = k8s.wait_for("the benchmark's gauges on /metrics", scraped, 30,
                            diag=op.tail)
    labels = {"benchmark_namespace": namespace, "benchmark": "nightly", "model": "e2e-model"}
    expected = {
        "llmbench_result_run": 3,
        "llmbench_max_ott_under_slo_tokens_per_second": 831.14,
        "llmbench_ttft_p99_at_knee_seconds": 0.08831,
        "llmbench_itl_p99_at_knee_seconds": 0.01147,
        "llmbench_cost_per_million_output_tokens": 4.5 / (831.14 * 3600) * 1e6,
        "llmbench_regressed": 1,
        "llmbench_last_run_timestamp_seconds": 1796006490,
        "llmbench_last_run_duration_seconds": 2490,
        "llmbench_scheduled": 0,
    }
    for name, value in expected.items():
        samples = ours(families, name)
        # the price's currency: the CRD's default (spec.cost.currency: EUR)
        extra = {"currency": "EUR"} if name.startswith("llmbench_cost") else {}
        assert [s.labels for s in samples] == [{**labels, **extra}], (name, samples)
        assert samples[0].value == pytest.approx(value), (name, samples)
    # the run it found finished is the counter's baseline: no run counted
    # (the text parser names a counter's family without its _total)
    runs = {s.labels["result"]: s.value for s in ours(families, "llmbench_runs")
            if s.name == "llmbench_runs_total"}
    assert runs == {"succeeded": 0, "invalid": 0, "failed": 0}
    phases = {s.labels["phase"]: s.value for s in ours(families, "llmbench_phase")}
    assert phases == {"Pending": 0, "Queued": 0, "Running": 0, "Succeeded": 1, "Failed": 0}
    # done: the operator started no run of its own (the status is still the one written)
    st = k8s.get("llmbenchmark", "nightly", namespace)["status"]
    assert st["run"] == 3 and st["phase"] == "Succeeded"
    assert k8s.get("job", "nightly-run-4", namespace) is None

    # a later status (the next verdict) reaches the gauges through the watch, no restart
    later = finished_status(generation)
    later["conditions"][-1].update(status="False", reason="WithinTolerance")
    k8s.kubectl(
        "patch", "llmbenchmark", "nightly", "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": later}),
    )
    k8s.wait_for(
        "llmbench_regressed to turn 0",
        lambda: [s.value for s in ours(op.scrape(), "llmbench_regressed")] == [0],
        30, diag=op.tail,
    )

    k8s.kubectl("delete", "llmbenchmark", "nightly", "-n", namespace)
    k8s.wait_for(
        "the deleted benchmark's series to go",
        lambda: not any(ours(f, name) for f in [op.scrape()] for name in f),
        30, diag=op.tail,
    )
