"""The shipped alert rules (examples/prometheusrule-regression.yaml) through Debian's real
promtool: ``check rules`` accepts them, and ``test rules`` fires each alert with the
benchmark's namespace (``benchmark_namespace``) next to the operator pod's ``namespace`` that a
ServiceMonitor scrape adds."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.prometheus_server import ROOT, promtool, rule_groups

RULES = ROOT / "examples" / "prometheusrule-regression.yaml"

#: The labels a ServiceMonitor scrape of the operator pod adds (honorLabels keeps ours).
TARGET = {"job": "llmbench-operator-metrics", "instance": "10.244.0.7:9090",
          "namespace": "llmbench-system", "pod": "llmbench-operator-5d9c7-x2x4q",
          "service": "llmbench-operator-metrics", "endpoint": "metrics"}
TEAM_A = {"benchmark_namespace": "team-a", "benchmark": "nightly", "model": "llama-8b"}
TEAM_B = {"benchmark_namespace": "team-b", "benchmark": "canary", "model": "llama-8b"}


def _series(name: str, labels: dict[str, str]) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in {**TARGET, **labels}.items())
    return f"{name}{{{inner}}}"


def _rules() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in rule_groups(RULES)["groups"] for r in g["rules"]}


def _expand(template: str, labels: dict[str, str]) -> str:
    """The annotation as Prometheus renders it for ``labels`` (``$labels.x`` only: the
    templates under test use nothing else but ``$value``, which this test does not expand)."""
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], template)


def test_promtool_checks_the_shipped_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(rule_groups(RULES)))
    r = promtool("check", "rules", str(rules))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 2 rules found" in r.stdout, r.stdout


def test_promtool_fires_the_regression_alert_with_the_benchmarks_namespace(
    tmp_path: Path,
) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_groups(RULES)))
    regressed = _rules()["LLMBenchmarkRegressed"]
    alert_labels = {**TARGET, **TEAM_A, "severity": "warning"}
    case = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                # team-a's verdict turns Regressed at minute 2; team-b's stays within tolerance
                {"series": _series("llmbench_regressed", TEAM_A), "values": "0 0 1 1 1"},
                {"series": _series("llmbench_regressed", TEAM_B), "values": "0 0 0 0 0"},
            ],
            "alert_rule_test": [
                {"eval_time": "1m", "alertname": "LLMBenchmarkRegressed", "exp_alerts": []},
                {"eval_time": "3m", "alertname": "LLMBenchmarkRegressed", "exp_alerts": [{
                    "exp_labels": alert_labels,
                    "exp_annotations": {
                        "summary": "LLM benchmark team-a/nightly regressed",
                        "description": _expand(regressed["annotations"]["description"],
                                               alert_labels),
                    },
                }]},
            ],
        }],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(case, sort_keys=False))
    r = promtool("test", "rules", "test.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout, r.stdout
    # the description names the benchmark's namespace for kubectl, not the operator's
    assert "kubectl -n team-a describe llmb nightly" in case["tests"][0]["alert_rule_test"][1][
        "exp_alerts"][0]["exp_annotations"]["description"]


def test_promtool_fires_the_stale_alert_only_for_a_scheduled_benchmark(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_groups(RULES)))
    stale = _rules()["LLMBenchmarkStale"]
    # both last ran at t=0 (unix 0); only team-a's is scheduled. At 37 h the expression is
    # true for team-a, and after its `for: 15m` the alert fires.
    series = [
        {"series": _series("llmbench_last_run_timestamp_seconds", TEAM_A), "values": "0+0x2400"},
        {"series": _series("llmbench_last_run_timestamp_seconds", TEAM_B), "values": "0+0x2400"},
        {"series": _series("llmbench_scheduled", TEAM_A), "values": "1+0x2400"},
        {"series": _series("llmbench_scheduled", TEAM_B), "values": "0+0x2400"},
    ]
    at = "37h30m"
    age = "1d 13h 30m 0s"  # humanizeDuration of 37.5 h
    labels = {**TARGET, **TEAM_A, "severity": "warning"}
    description = _expand(stale["annotations"]["description"], labels).replace(
        "{{ $value | humanizeDuration }}", age)
    case = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {"eval_time": "30h", "alertname": "LLMBenchmarkStale", "exp_alerts": []},
                {"eval_time": at, "alertname": "LLMBenchmarkStale", "exp_alerts": [{
                    "exp_labels": labels,
                    "exp_annotations": {
                        "summary": f"LLM benchmark team-a/nightly has not run for {age}",
                        "description": description,
                    },
                }]},
            ],
        }],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(case, sort_keys=False))
    r = promtool("test", "rules", "test.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
