"""``llmbench results`` against a real API server.

The operator is not needed: the test writes what it would write — an ``LLMBenchmark`` whose
status (through the status subresource) holds two finished runs, and the runs' results
ConfigMaps ``<name>-run-1`` / ``-run-2`` with ``digest.json`` and ``summary.csv`` — then runs
the command for each flag and checks what it prints.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmbench.api import API_VERSION, KIND
from llmbench.api.job import DIGEST_KEY, SUMMARY_KEY, results_configmap_name
from llmbench.api.status import (
    BenchmarkStatus,
    Condition,
    HistoryEntry,
    KneeStatus,
    MaxUnderSloStatus,
    PointStatus,
    RunDigest,
    dump,
)
from llmbench.cli import main
from llmbench.cli.output import NO_CLUSTER, NOT_FOUND, USAGE
from llmbench.cli.output import REGRESSED as EXIT_REGRESSED

pytestmark = pytest.mark.e2e

NAME = "nightly"
CSV_HEADER = (
    "Concurrency,p99 Time To First Token (ms),p99 Inter Token Latency (ms),"
    "Output Token Throughput (tokens/sec),Request Throughput (per sec)\r\n"
)


def _points(ttft: tuple[float, float, float], ott: tuple[float, float, float]) -> list[PointStatus]:
    return [
        PointStatus(
            name=f"concurrency{c}", value=c, state="Succeeded", ttft_p99_ms=t, itl_p99_ms=9.5 + i,
            e2e_p99_ms=900.25 + 100 * i, ott=o, rps=o / 100, goodput=o / 110,
            slo_met=t < 200, gpu_power_w=310.5 + 50 * i, gpu_energy_j=1000.0, gpus=1,
            valid=True,
        )
        for i, (c, t, o) in enumerate(zip((1, 2, 4), ttft, ott, strict=True))
    ]


def _csv(points: list[PointStatus]) -> str:
    rows = "".join(
        f"{p.value:g},{p.ttft_p99_ms:.6f},{p.itl_p99_ms:.6f},{p.ott:.6f},{p.rps:.6f}\r\n"
        for p in points
    )
    return CSV_HEADER + rows + '\r\n"note, quoted",N/A\r\n'


def _digest(run: int, points: list[PointStatus]) -> RunDigest:
    best = points[1]
    return RunDigest(
        run=run, total=3, done=3, points=points, finished=True, valid=True, error_rate=0.0,
        knee=KneeStatus(reached=True, value=4, label="4", rule="ttft-2x",
                        message=f"knee at concurrency 4 (p99 TTFT rule): run {run}"),
        max_under_slo=MaxUnderSloStatus(
            value=2, ott=best.ott, ttft_p99_ms=best.ttft_p99_ms, first_failing_value=4,
            first_failing_metric="ttft_p99",
            message=f"max OTT under SLO (ttft_p99 200): {best.ott:.1f} tok/s at concurrency "
            f"2; first failing point: concurrency 4 (run {run})",
        ),
    )


RUN1 = _points((80.125, 120.5, 250.75), (400.0, 760.5, 900.25))
RUN2 = _points((85.1, 150.333, 330.0), (395.0, 700.125, 850.0))
DIGEST1, DIGEST2 = _digest(1, RUN1), _digest(2, RUN2)
CSV1, CSV2 = _csv(RUN1), _csv(RUN2)


REGRESSED = "p99 TTFT at concurrency 2: 120.50 -> 150.33 ms (+24.8 %, tolerance +10 %)"


def _status() -> BenchmarkStatus:
    def cond(type_: str, status: Any, reason: str, message: str) -> Condition:
        return Condition(type=type_, status=status, reason=reason, message=message,
                         last_transition_time="2026-12-01T02:10:00Z", observed_generation=1)

    def entry(run: int, digest: RunDigest) -> HistoryEntry:
        best = digest.max_under_slo
        assert best is not None
        return HistoryEntry(
            run=run, phase="Succeeded", started_time=f"2026-1{run}-01T02:00:00Z",
            finished_time=f"2026-1{run}-01T02:10:00Z", points=3, knee="4",
            max_ott_under_slo=best.ott, ttft_p99_ms=best.ttft_p99_ms, valid=True,
            regressed=run == 2,
            config_map=results_configmap_name(NAME, run), message=f"run {run} finished",
        )

    return BenchmarkStatus(
        phase="Succeeded", observed_generation=1, run=2, progress="3/3", points=RUN2,
        knee=DIGEST2.knee, max_under_slo=DIGEST2.max_under_slo, summary_csv=CSV2,
        results_config_map=results_configmap_name(NAME, 2), job=f"{NAME}-run-2",
        last_run_time="2026-12-01T02:10:00Z", message="run 2 finished",
        history=[entry(1, DIGEST1), entry(2, DIGEST2)],
        conditions=[
            cond("Succeeded", "True", "RunSucceeded", "run 2 finished"),
            cond("Running", "False", "Completed", "run 2 finished"),
            cond("MeasurementValid", "True", "Valid", "no validity warning"),
            cond("Regressed", "True", "Regressed", REGRESSED),
        ],
    )


STATUS = _status()


@pytest.fixture
def bench(crd_installed: Any, namespace: str) -> dict[str, Any]:
    """The benchmark, its status and both runs' ConfigMaps; yields the command's base words."""
    k8s = crd_installed
    k8s.apply({
        "apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": NAME},
        "spec": {
            "target": {"url": "http://vllm.default.svc:8000", "model": "m"},
            "sweep": {"type": "concurrency", "values": [1, 2, 4]},
            "slo": {"ttftP99Ms": 200},
        },
    }, namespace)
    k8s.kubectl("patch", "llmbenchmarks", NAME, "-n", namespace, "--subresource=status",
                "--type", "merge", "-p", json.dumps({"status": dump(STATUS)}))
    for run, digest, csv_text in ((1, DIGEST1, CSV1), (2, DIGEST2, CSV2)):
        k8s.core.create_namespaced_config_map(namespace, {
            "metadata": {"name": results_configmap_name(NAME, run),
                         "labels": {"llmbench.io/benchmark": NAME}},
            "data": {DIGEST_KEY: json.dumps(dump(digest)), SUMMARY_KEY: csv_text},
        })
    return {"k8s": k8s, "ns": namespace,
            "words": ["results", NAME, "-n", namespace, "--kubeconfig", str(k8s.kubeconfig)]}


def results(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(words))
    out, err = capsys.readouterr()
    return code, out, err


def test_latest_run_table(bench: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = results(capsys, *bench["words"])
    assert code == 0, err
    ns = bench["ns"]
    assert f"LLMBenchmark {ns}/{NAME} · run 2 · Succeeded · 3/3 points" in out
    assert "\nknee at concurrency 4 (p99 TTFT rule): run 2\n" in out
    assert "\nmax OTT under SLO (ttft_p99 200): 700.1 tok/s at concurrency 2; first failing " \
        "point: concurrency 4 (run 2)\n" in out
    for cell in ("p99 TTFT (ms)", "GPU power (W)", "85.10", "150.33", "330.00", "700.12",
                 "850.00", "9.50", "1100.25", "410.50", "7.00"):
        assert cell in out, (cell, out)
    assert "validity: True Valid: no validity warning" in out
    assert f"regressed: True Regressed: {REGRESSED}" in out
    assert "Running=False Completed: run 2 finished" in out
    assert "Succeeded=False" not in out
    assert "SLO met" in out and "no" in out  # point 4 missed the SLO


def test_older_run_from_its_configmap(
    bench: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = results(capsys, *bench["words"], "--run", "1")
    assert code == 0, err
    assert "run 1 · Succeeded · 3/3 points" in out
    assert f"from ConfigMap {NAME}-run-1" in out
    assert "knee at concurrency 4 (p99 TTFT rule): run 1" in out
    for cell in ("80.12", "120.50", "250.75", "760.50", "900.25"):
        assert cell in out, (cell, out)
    assert "validity: True no validity warning" in out

    code, out, err = results(capsys, *bench["words"], "--run", "3")
    assert code == NOT_FOUND and out == ""
    assert err.strip() == f"llmbench results: run 3 of {bench['ns']}/{NAME} does not exist " \
        "(the latest is run 2)"


def test_history(bench: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = results(capsys, *bench["words"], "--history")
    assert code == 0, err
    assert "last 2 runs" in out
    assert "2026-11-01T02:10:00Z" in out and "2026-12-01T02:10:00Z" in out
    assert "760.50" in out and "120.50" in out and "700.12" in out and "150.33" in out
    rows = [line for line in out.splitlines() if "2026-1" in line]
    assert "regressed" in out and rows[0].rstrip(" │|").endswith("no")
    assert rows[1].rstrip(" │|").endswith("yes")

    code, out, err = results(capsys, *bench["words"], "--history", "-o", "json")
    assert code == 0, err
    assert [HistoryEntry.model_validate(h) for h in json.loads(out)] == STATUS.history
    code, out, err = results(capsys, *bench["words"], "--history", "-o", "yaml")
    assert code == 0, err
    assert [HistoryEntry.model_validate(h) for h in yaml.safe_load(out)] == STATUS.history


def test_csv_byte_for_byte(bench: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = results(capsys, *bench["words"], "-o", "csv")
    assert code == 0, err
    assert out == CSV2
    code, out, err = results(capsys, *bench["words"], "-o", "csv", "--run", "1")
    assert code == 0, err
    assert out == CSV1


def test_json_round_trips(bench: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = results(capsys, *bench["words"], "-o", "json")
    assert code == 0, err
    assert BenchmarkStatus.model_validate(json.loads(out)) == STATUS
    code, out, err = results(capsys, *bench["words"], "-o", "json", "--run", "1")
    assert code == 0, err
    assert RunDigest.model_validate(json.loads(out)) == DIGEST1
    code, out, err = results(capsys, *bench["words"], "-o", "yaml")
    assert code == 0, err
    assert BenchmarkStatus.model_validate(yaml.safe_load(out)) == STATUS
    code, out, err = results(capsys, *bench["words"], "--output", "yaml", "--run", "1")
    assert code == 0, err
    assert RunDigest.model_validate(yaml.safe_load(out)) == DIGEST1


def test_the_old_format_flags_still_work_with_a_note(
    bench: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = results(capsys, *bench["words"], "--json")
    assert code == 0, err
    assert BenchmarkStatus.model_validate(json.loads(out)) == STATUS
    assert err == "llmbench results: note: --json is deprecated; use -o json\n"
    code, out, err = results(capsys, *bench["words"], "--csv")
    assert (code, out) == (0, CSV2)
    assert err == "llmbench results: note: --csv is deprecated; use -o csv\n"
    code, out, err = results(capsys, *bench["words"], "--csv", "-o", "json")
    assert code == USAGE and out == ""
    assert "--csv and -o json ask for two formats; give -o only" in err


def test_plot(
    bench: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    png = tmp_path / "curves.png"
    code, out, err = results(capsys, *bench["words"], "--plot", str(png))
    assert code == 0, err
    assert f"wrote {png} (2 runs)" in out
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000


def test_compare(bench: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = results(capsys, *bench["words"], "--compare", "1")
    assert code == EXIT_REGRESSED  # p99 TTFT at concurrency 2 rose 24.8 % (> +10 %)
    assert "A = run 1 | B = run 2" in out
    assert "regression" in out and "+24.8%" in out
    assert "run 2 regressed against run 1" in err and "concurrency 2 ttft_p99" in err

    code, out, err = results(capsys, *bench["words"], "--compare", "1", "-o", "json")
    assert code == EXIT_REGRESSED
    assert yaml.safe_load(results(capsys, *bench["words"], "--compare", "1", "-o", "yaml")[1]
                          ) == json.loads(out)
    rows = {(r["scope"], r["metric"]): r for r in json.loads(out)["rows"]}
    r = rows[("concurrency 2", "ttft_p99")]
    assert (r["a"], r["b"], r["verdict"]) == (120.5, 150.333, "regression")
    assert r["change_pct"] == pytest.approx((150.333 - 120.5) / 120.5 * 100)
    assert rows[("sweep", "max_ott_under_slo")]["a"] == 760.5
    assert rows[("concurrency 1", "ott")]["verdict"] == "ok"

    code, out, err = results(capsys, *bench["words"], "--compare", "2", "--run", "1",
                             "--tolerance", "ttft_p99:+20%", "ott:-10%")
    assert code == 0, err  # run 1 against run 2: faster, nothing regressed
    assert "improved" in out


def test_pruned_run(bench: dict[str, Any], capsys: pytest.CaptureFixture[str],
                   tmp_path: Path) -> None:
    bench["k8s"].core.delete_namespaced_config_map(results_configmap_name(NAME, 1), bench["ns"])
    code, out, err = results(capsys, *bench["words"], "--run", "1")
    assert code == NOT_FOUND and out == ""
    lines = err.strip().splitlines()
    assert lines == [
        f"llmbench results: run 1 of {bench['ns']}/{NAME}: its results ConfigMap {NAME}-run-1 "
        "is gone (pruned by spec.historyLimit, or never written)"
    ]
    png = tmp_path / "one.png"
    code, out, err = results(capsys, *bench["words"], "--plot", str(png))
    assert code == 0, err
    assert "(1 runs)" in out and "is gone" in err and png.stat().st_size > 0


def test_namespace_from_context_and_not_found(
    bench: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = yaml.safe_load(Path(bench["k8s"].kubeconfig).read_text())
    current = config["current-context"]
    for ctx in config["contexts"]:
        if ctx["name"] == current:
            ctx["context"]["namespace"] = bench["ns"]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    code, out, err = results(capsys, "results", NAME, "--kubeconfig", str(kubeconfig))
    assert code == 0, err
    assert f"LLMBenchmark {bench['ns']}/{NAME} · run 2" in out

    code, out, err = results(capsys, "results", "missing", "--kubeconfig", str(kubeconfig))
    assert code == NOT_FOUND and out == ""
    assert err.strip().splitlines() == [
        f"llmbench results: LLMBenchmark {bench['ns']}/missing not found (context {current})"
    ]


def test_unreachable_api_server(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "kind-x",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}",
                                               "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "kind-x", "context": {"cluster": "c", "user": "u"}}],
    }))
    code, out, err = results(capsys, "results", NAME, "--kubeconfig", str(kubeconfig))
    assert code == NO_CLUSTER and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"llmbench results: cannot reach the API server at https://127.0.0.1:{port} "
        f"(kubeconfig {kubeconfig}, context kind-x): "
    )
    assert "Connection refused" in lines[0]


def test_benchmark_without_a_run(
    bench: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    ns = bench["ns"]
    bench["k8s"].apply({
        "apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "fresh"},
        "spec": {"target": {"url": "http://vllm.default.svc:8000"}},
    }, ns)
    words = [w if w != NAME else "fresh" for w in bench["words"]]
    code, out, err = results(capsys, *words)
    assert code == 0, err
    assert f"LLMBenchmark {ns}/fresh · no run yet · N/A" in out
    assert "no point has finished yet" in out
    code, out, err = results(capsys, *words, "-o", "csv")
    assert code == NOT_FOUND and out == ""
    assert err.strip() == f"llmbench results: LLMBenchmark {ns}/fresh (no run yet): no summary " \
        "CSV yet"
    code, out, err = results(capsys, *words, "--history")
    assert code == 0 and f"LLMBenchmark {ns}/fresh: no finished run yet" in out
