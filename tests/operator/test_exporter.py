"""Prometheus gauges: which run they describe, their units, labels, and the real text format."""

from __future__ import annotations

import asyncio
import copy
import re
import socket
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from llmbench.cli import main
from llmbench.operator import exporter
from llmbench.operator.exporter import (
    HELP,
    METRICS,
    BenchmarkCollector,
    MetricsConfig,
    Sample,
    finished_run,
    forget,
    gauges,
    observe,
    start_metrics,
    stop_metrics,
)
from llmbench.runner.sweep.analysis import cost_per_million

LABELS = {"benchmark_namespace": "team-a", "benchmark": "nightly",
          "model": "meta-llama/Llama-3.1-8B"}


def _point(value: float, ttft: float, itl: float, ott: float, slo_met: bool) -> dict[str, Any]:
    return {
        "name": f"concurrency_{value:g}", "value": value, "state": "Succeeded",
        "ttftP99Ms": ttft, "itlP99Ms": itl, "e2eP99Ms": ttft + 200 * itl, "ott": ott,
        "rps": ott / 200, "goodput": ott / 200 if slo_met else 0.0, "sloMet": slo_met,
        "gpuPowerW": 1400.5, "gpuEnergyJ": 84030.0, "gpuUtilizationPct": 91.2, "gpus": 2,
        "joulesPerOutputToken": round(1400.5 / ott, 3),
        "valid": True, "warnings": [],
    }


def _cond(type_: str, status: str, reason: str = "R") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": "",
            "lastTransitionTime": "2026-11-30T02:00:00Z", "observedGeneration": 3}


def benchmark(**status: Any) -> dict[str, Any]:
    """A scheduled benchmark after run 7 (a Succeeded, valid sweep), as the API server has it."""
    body: dict[str, Any] = {
        "apiVersion": "llmbench.io/v1alpha1",
        "kind": "LLMBenchmark",
        "metadata": {"name": "nightly", "namespace": "team-a", "generation": 3,
                     "uid": "5d1c", "resourceVersion": "811"},
        "spec": {
            "target": {"service": "vllm", "model": "meta-llama/Llama-3.1-8B"},
            "sweep": {"type": "concurrency", "values": [1, 2, 4, 8, 16, 32]},
            "slo": {"ttftP99Ms": 500},
            "cost": {"pricePerHour": 4.5, "currency": "EUR"},
            "schedule": "0 2 * * *",
        },
        "status": {
            "phase": "Succeeded", "observedGeneration": 3, "run": 7, "progress": "5/6",
            "points": [
                _point(1, 41.2, 8.1, 120.5, True),
                _point(2, 44.0, 8.3, 236.9, True),
                _point(4, 52.75, 9.02, 455.1, True),
                _point(8, 88.31, 11.47, 831.14, True),
                _point(16, 655.67, 19.5, 1016.0, False),
            ],
            "knee": {"reached": True, "value": 8, "label": "8", "rule": "ott-saturation",
                     "message": "throughput gain below 25 % after 8"},
            "maxUnderSLO": {"value": 8, "ott": 831.14, "ttftP99Ms": 88.31,
                            "firstFailingValue": 16, "firstFailingMetric": "ttft_p99_ms"},
            "startedTime": "2026-11-30T02:00:00Z",
            "lastRunTime": "2026-11-30T02:41:30Z",
            "history": [
                {"run": 6, "phase": "Succeeded", "startedTime": "2026-11-29T02:00:00Z",
                 "finishedTime": "2026-11-29T02:40:00Z", "maxOttUnderSlo": 850.0,
                 "ttftP99Ms": 85.0, "valid": True},
                {"run": 7, "phase": "Succeeded", "startedTime": "2026-11-30T02:00:00Z",
                 "finishedTime": "2026-11-30T02:41:30Z", "maxOttUnderSlo": 831.14,
                 "ttftP99Ms": 88.31, "valid": True},
            ],
            "conditions": [
                _cond("Accepted", "True"), _cond("Succeeded", "True"),
                _cond("MeasurementValid", "True", "Valid"),
                _cond("Regressed", "False", "WithinTolerance"),
            ],
        },
    }
    body["status"].update(status)
    return body


def values(samples: list[Sample]) -> dict[str, float]:
    """Metric name -> value (the phase state set as ``llmbench_phase[Phase]``)."""
    out = {}
    for s in samples:
        key = f"{s.name}[{s.labels['phase']}]" if "phase" in s.labels else s.name
        out[key] = s.value
    return out


def test_a_finished_valid_run_gives_every_gauge_in_base_units() -> None:
    v = values(gauges(benchmark()))
    assert v.pop("llmbench_max_ott_under_slo_tokens_per_second") == 831.14
    assert v.pop("llmbench_ttft_p99_at_knee_seconds") == pytest.approx(0.08831)
    assert v.pop("llmbench_itl_p99_at_knee_seconds") == pytest.approx(0.01147)
    knee = next(p for p in benchmark()["status"]["points"] if p["value"] == 8)
    assert v.pop("llmbench_joules_per_output_token") == round(1400.5 / knee["ott"], 3)
    assert v.pop("llmbench_cost_per_million_output_tokens") == pytest.approx(
        cost_per_million(831.14, 4.5)  # the runner's formula, the same figure
    )
    assert v.pop("llmbench_result_run") == 7
    assert v.pop("llmbench_regressed") == 0
    assert v.pop("llmbench_last_run_timestamp_seconds") == 1796006490  # 2026-11-30T02:41:30Z
    assert v.pop("llmbench_last_run_duration_seconds") == 41 * 60 + 30
    assert v.pop("llmbench_scheduled") == 1
    assert v == {"llmbench_phase[Pending]": 0, "llmbench_phase[Queued]": 0,
                 "llmbench_phase[Running]": 0, "llmbench_phase[Succeeded]": 1,
                 "llmbench_phase[Failed]": 0}


def test_labels_are_benchmark_namespace_benchmark_model_only() -> None:
    # nothing Prometheus adds to a scraped target (namespace, pod, service, job, instance...)
    for s in gauges(benchmark()):
        extra = {"llmbench_phase": {"phase"},
                 "llmbench_cost_per_million_output_tokens": {"currency"}}.get(s.name, set())
        assert set(s.labels) == set(LABELS) | extra
        assert not set(s.labels) & {"namespace", "pod", "service", "job", "instance",
                                    "endpoint", "container"}
        assert {k: s.labels[k] for k in LABELS} == LABELS
        assert s.name in HELP
    body = benchmark()
    del body["spec"]["target"]["model"]
    assert {s.labels["model"] for s in gauges(body)} == {""}


def test_no_energy_per_token_gauge_without_gpu_telemetry() -> None:
    body = benchmark()
    for p in body["status"]["points"]:
        del p["joulesPerOutputToken"]
    assert not any("joule" in s.name or "energy" in s.name for s in gauges(body))


def test_a_regression_is_1_and_an_unknown_verdict_is_absent() -> None:
    body = benchmark()
    body["status"]["conditions"][-1] = _cond("Regressed", "True", "MaxOttUnderSloDropped")
    assert values(gauges(body))["llmbench_regressed"] == 1
    body["status"]["conditions"][-1] = _cond("Regressed", "Unknown", "MeasurementInvalid")
    assert "llmbench_regressed" not in values(gauges(body))
    body["status"]["conditions"].pop()
    assert "llmbench_regressed" not in values(gauges(body))


def test_no_knee_no_slo_no_price_leave_those_gauges_out() -> None:
    v = values(gauges(benchmark(knee={"reached": False, "message": "no knee"})))
    assert "llmbench_ttft_p99_at_knee_seconds" not in v
    assert "llmbench_itl_p99_at_knee_seconds" not in v
    assert v["llmbench_max_ott_under_slo_tokens_per_second"] == 831.14
    body = benchmark()
    del body["status"]["maxUnderSLO"]
    del body["spec"]["cost"]
    v = values(gauges(body))
    assert "llmbench_max_ott_under_slo_tokens_per_second" not in v
    assert "llmbench_cost_per_million_output_tokens" not in v
    assert v["llmbench_ttft_p99_at_knee_seconds"] == pytest.approx(0.08831)


def test_a_changed_price_is_not_applied_to_an_older_run() -> None:
    body = benchmark()
    body["metadata"]["generation"] = 4  # the spec (price) changed; run 8 has not started yet
    assert "llmbench_cost_per_million_output_tokens" not in values(gauges(body))


def test_a_run_under_way_shows_the_last_valid_run_from_history() -> None:
    body = benchmark(
        phase="Running", run=8, progress="2/6", points=[_point(1, 40, 8, 121, True)],
        knee={"reached": False}, maxUnderSLO=None, startedTime="2026-12-01T02:00:00Z",
    )
    v = values(gauges(body))
    # only what history keeps of run 7: its max OTT under SLO (not run 8's partial figures)
    assert v["llmbench_result_run"] == 7
    assert v["llmbench_max_ott_under_slo_tokens_per_second"] == 831.14
    assert "llmbench_ttft_p99_at_knee_seconds" not in v
    assert "llmbench_cost_per_million_output_tokens" not in v
    # the last finished run is still run 7 (its own start, not run 8's)
    assert v["llmbench_last_run_timestamp_seconds"] == 1796006490
    assert v["llmbench_last_run_duration_seconds"] == 41 * 60 + 30
    assert v["llmbench_phase[Running]"] == 1 and v["llmbench_phase[Succeeded]"] == 0


def test_an_invalid_or_failed_last_run_is_never_the_result() -> None:
    body = benchmark()
    body["status"]["conditions"][2] = _cond("MeasurementValid", "False", "ValidityWarnings")
    body["status"]["history"][-1]["valid"] = False
    v = values(gauges(body))
    assert v["llmbench_result_run"] == 6  # the previous valid run
    assert v["llmbench_max_ott_under_slo_tokens_per_second"] == 850.0
    assert "llmbench_ttft_p99_at_knee_seconds" not in v
    failed = benchmark(phase="Failed")
    failed["status"]["history"][-1]["phase"] = "Failed"
    assert values(gauges(failed))["llmbench_result_run"] == 6
    fresh = benchmark()
    fresh["status"] = {}
    v = values(gauges(fresh))
    assert not any(k.startswith(("llmbench_max", "llmbench_last", "llmbench_result")) for k in v)
    assert v["llmbench_phase[Pending]"] == 0 and v["llmbench_scheduled"] == 1


def test_a_suspended_or_unscheduled_benchmark_is_not_scheduled() -> None:
    body = benchmark()
    body["spec"]["suspend"] = True
    assert values(gauges(body))["llmbench_scheduled"] == 0
    del body["spec"]["schedule"]
    del body["spec"]["suspend"]
    assert values(gauges(body))["llmbench_scheduled"] == 0


def test_the_cost_gauge_names_its_currency() -> None:
    (cost,) = [s for s in gauges(benchmark()) if s.name.startswith("llmbench_cost")]
    assert cost.labels == {**LABELS, "currency": "EUR"}
    body = benchmark()
    body["spec"]["cost"]["currency"] = "USD"
    (cost,) = [s for s in gauges(body) if s.name.startswith("llmbench_cost")]
    assert cost.labels["currency"] == "USD"
    del body["spec"]["cost"]["currency"]  # an object stored before the CRD defaulted it
    (cost,) = [s for s in gauges(body) if s.name.startswith("llmbench_cost")]
    assert cost.labels["currency"] == "EUR"  # the API's default (Cost.currency)


def test_a_finished_run_is_succeeded_invalid_or_failed() -> None:
    assert finished_run(benchmark()) == (7, "succeeded")
    invalid = benchmark()
    invalid["status"]["conditions"][2] = _cond("MeasurementValid", "False", "ValidityWarnings")
    assert finished_run(invalid) == (7, "invalid")
    assert finished_run(benchmark(phase="Failed")) == (7, "failed")
    assert finished_run(benchmark(phase="Running", run=8)) is None
    fresh = benchmark()
    fresh["status"] = {}
    assert finished_run(fresh) is None


def _runs(collector: BenchmarkCollector) -> dict[tuple[str, str], float]:
    """(benchmark, result) -> llmbench_runs_total, from the real text format."""
    family = _scrape(collector).get("llmbench_runs")
    if family is None:
        return {}
    assert family.type == "counter"
    return {(s.labels["benchmark"], s.labels["result"]): s.value for s in family.samples
            if s.name == "llmbench_runs_total"}


def test_runs_total_counts_each_finished_run_once_from_a_baseline() -> None:
    collector = BenchmarkCollector()
    collector.count(benchmark())  # first sight (an operator start): run 7 is the baseline
    assert _runs(collector) == {("nightly", r): 0 for r in ("succeeded", "invalid", "failed")}
    running = benchmark(phase="Running", run=8)
    collector.count(running)
    collector.count(benchmark(phase="Failed", run=8))
    collector.count(benchmark(phase="Failed", run=8))  # a replayed event: counted once
    invalid = benchmark(run=9)
    invalid["status"]["conditions"][2] = _cond("MeasurementValid", "False", "ValidityWarnings")
    collector.count(invalid)
    collector.count(benchmark(run=10))
    collector.count(benchmark(run=9))  # an older body arriving late changes nothing
    assert _runs(collector) == {("nightly", "succeeded"): 1, ("nightly", "invalid"): 1,
                                ("nightly", "failed"): 1}
    family = _scrape(collector)["llmbench_runs"]
    assert {k: v for s in family.samples for k, v in s.labels.items() if k != "result"} == LABELS

    # deleted and created again under the same name (a new uid): it starts over
    again = benchmark(phase="Succeeded", run=1)
    again["metadata"]["uid"] = "77aa"
    collector.count(again)
    assert _runs(collector)[("nightly", "succeeded")] == 0
    collector.remove("team-a", "nightly")
    assert _runs(collector) == {}


def test_a_benchmark_first_seen_running_counts_that_run_when_it_finishes() -> None:
    collector = BenchmarkCollector()
    collector.count(benchmark(phase="Running", run=8))
    collector.count(benchmark(run=8))
    assert _runs(collector)[("nightly", "succeeded")] == 1


def _scrape(collector: BenchmarkCollector) -> dict[str, Any]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_the_collector_renders_the_text_format_and_forgets_deleted_benchmarks() -> None:
    collector = BenchmarkCollector()
    other = copy.deepcopy(benchmark())
    other["metadata"].update(name="canary", namespace="team-b")
    other["spec"]["target"]["model"] = 'quoted "model"\\x'
    collector.set("team-a", "nightly", gauges(benchmark()))
    collector.set("team-b", "canary", gauges(other))
    families = _scrape(collector)
    ott = families["llmbench_max_ott_under_slo_tokens_per_second"]
    assert ott.type == "gauge"
    assert ott.documentation == HELP[ott.name]
    assert {(s.labels["benchmark"], s.labels["model"], s.value) for s in ott.samples} == {
        ("nightly", "meta-llama/Llama-3.1-8B", 831.14),
        ("canary", 'quoted "model"\\x', 831.14),
    }
    ttft = families["llmbench_ttft_p99_at_knee_seconds"].samples
    assert [s.labels for s in ttft if s.labels["benchmark"] == "nightly"] == [LABELS]
    phase = families["llmbench_phase"].samples
    assert len(phase) == 10
    assert {s.labels["phase"] for s in phase if s.value == 1} == {"Succeeded"}
    assert families["llmbench_last_run_timestamp_seconds"].samples[0].value == 1796006490

    collector.remove("team-a", "nightly")
    families = _scrape(collector)
    assert {s.labels["benchmark"] for f in families.values() for s in f.samples} == {"canary"}
    collector.remove("team-b", "canary")
    collector.remove("team-b", "canary")  # twice: a replayed DELETED is harmless
    assert _scrape(collector) == {}


def test_the_example_prometheus_rule_alerts_on_gauges_the_operator_exports() -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    doc = yaml.safe_load((root / "prometheusrule-regression.yaml").read_text())
    assert (doc["apiVersion"], doc["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    rules = {r["alert"]: r for g in doc["spec"]["groups"] for r in g["rules"]}
    assert set(rules) == {"LLMBenchmarkRegressed", "LLMBenchmarkStale"}
    used = {m for r in rules.values() for m in re.findall(r"\bllmbench_[a-z_]+", r["expr"])}
    assert used == {"llmbench_regressed", "llmbench_last_run_timestamp_seconds",
                    "llmbench_scheduled"}
    assert used <= set(HELP)
    assert "36 * 3600" in rules["LLMBenchmarkStale"]["expr"]
    # its CRD is Prometheus Operator's: GitOps applies the benchmarks without it
    kustomization = yaml.safe_load((root / "kustomization.yaml").read_text())
    assert "prometheusrule-regression.yaml" not in kustomization["resources"]


def test_the_endpoint_serves_the_map_and_a_taken_port_leaves_the_operator_running(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["operator", "-A", "--metrics-port", "70000"]) == 2
    assert "--metrics-port must be 0..65535" in capsys.readouterr().err

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    METRICS.port, METRICS.addr = port, "127.0.0.1"
    try:
        asyncio.run(start_metrics())
        observe(benchmark())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
        names = {f.name for f in text_string_to_metric_families(text)}
        assert "llmbench_ttft_p99_at_knee_seconds" in names
        # a second operator on the same port: an error in the log, no crash, no metrics
        second = MetricsConfig(port=port, addr="127.0.0.1")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(exporter, "METRICS", second)
            asyncio.run(start_metrics())
        assert second.port == 0 and second.server is None
    finally:
        asyncio.run(stop_metrics())
        forget("team-a", "nightly")
        METRICS.port, METRICS.addr = 0, "0.0.0.0"
