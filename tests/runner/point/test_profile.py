"""``llmbench profile`` end to end against ``llmbench sim`` over real HTTP on 127.0.0.1.

The sim's injected TTFT/ITL and its per-request server-side record are the ground truth.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmbench.api.results import PointResult
from llmbench.cli import main
from llmbench.runner.artifacts.read import load_records
from tests.sim_process import SimFactory, sim_pool


@pytest.fixture(scope="module")
def sim() -> Iterator[SimFactory]:
    """Starts sims in their own processes, one per distinct flag set, shared by the module."""
    with sim_pool() as get:
        yield get


def point_dir(out: Path) -> Path:
    """The one point folder GenAI-Perf's layout puts under ``--artifact-dir``."""
    dirs = [p for p in out.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def profile(tmp: Path, url: str, *flags: str) -> tuple[int, dict[str, Any]]:
    """Runs ``llmbench profile`` into ``tmp/art``: the exit code and the point's result with
    its fields flat (``s["errors"]``, wherever the file keeps them)."""
    out = tmp / "art"
    code = main(["profile", "--url", url, "--artifact-dir", str(out), *flags])
    if not out.exists():
        return code, {}
    summary_file = point_dir(out) / "profile_export_genai_perf.json"
    if not summary_file.exists():
        return code, {}
    result = PointResult.model_validate_json(summary_file.read_text())
    return code, result.model_dump(mode="json")


def records(tmp: Path) -> list[dict[str, Any]]:
    """Our per-request records of the run in ``tmp/art``, as plain dicts."""
    return [r.to_json() for r in load_records(point_dir(tmp / "art"))]


BASE = ("--synthetic-input-tokens-mean", "64", "--output-tokens-mean", "20",
        "--extra-inputs", "ignore_eos:true")


def test_reports_injected_ttft_and_itl_with_exact_token_counts(
    sim: SimFactory, tmp_path: Path
) -> None:
    url = sim("--ttft-ms", "50", "--itl-ms", "5")
    httpx.post(url + "/sim/reset")
    code, s = profile(tmp_path, url, "--concurrency", "4", "--request-count", "40", *BASE)
    assert code == 0
    assert s["request_count"]["avg"] == 40
    assert 50.0 <= s["time_to_first_token"]["avg"] < 65.0
    assert s["inter_token_latency"]["avg"] == pytest.approx(5.0, rel=0.05)
    assert s["output_sequence_length"]["min"] == s["output_sequence_length"]["max"] == 20
    assert s["input_sequence_length"]["min"] == s["input_sequence_length"]["max"] == 64
    assert s["token_counts"]["output_tokens_source"] == {"server": 40}
    assert s["token_counts"]["output_tokens_mismatch"] == 0
    assert s["token_counts"]["input_tokens_mismatch"] == 0
    assert s["errors"]["total"] == 0
    assert s["client"]["loop_lag_ms"]["max"] >= 0 and s["client"]["workers"] == 1
    # Against what the server really did: the client adds transport time only.
    truth = httpx.get(url + "/sim/records").json()
    recs = truth["records"] if isinstance(truth, dict) else truth
    recs = recs[1:]  # the first is preflight's one-token probe request, not the run's
    server_ttft = [(r["first_token_ns"] - r["arrival_ns"]) / 1e6 for r in recs]
    assert len(server_ttft) == 40
    gap = s["time_to_first_token"]["avg"] - sum(server_ttft) / len(server_ttft)
    assert 0.0 <= gap < 5.0


def test_artifacts_have_genai_perf_layout_and_no_secret(sim: SimFactory, tmp_path: Path) -> None:
    url = sim("--ttft-ms", "5", "--itl-ms", "1", "--api-key", "s3cr3t-token")
    os.environ["LLMB_TEST_KEY"] = "s3cr3t-token"
    try:
        code, s = profile(tmp_path, url, "--concurrency", "2", "--request-count", "10",
                          "--warmup-request-count", "3", "--api-key-env", "LLMB_TEST_KEY", *BASE)
    finally:
        del os.environ["LLMB_TEST_KEY"]
    assert code == 0
    art = point_dir(tmp_path / "art")
    assert art.name == "llmbench-sim-openai-chat-concurrency2"  # GenAI-Perf's folder name
    names = {p.name for p in art.iterdir()}
    assert names == {"inputs.json", "profile_export.json", "profile_export_genai_perf.json",
                     "profile_export_genai_perf.csv", "profile_export_llmbench_requests.jsonl",
                     "telemetry.png", "profile_export_timeseries.jsonl",
                     "profile_export_timeseries.csv"}  # timeseries.png: --generate-plots
    for p in art.iterdir():
        assert b"s3cr3t-token" not in p.read_bytes(), p.name
    # The target's own /metrics was scraped over the window (vLLM names).
    server = next(iter(s["telemetry"]["server"].values()))
    assert server["requests_completed"] == 13
    rows = list(csv.reader((art / "profile_export_genai_perf.csv").read_text().splitlines()))
    assert rows[0] == ["Metric", "avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25",
                       "p10", "p5", "p1"]
    labels = [r[0] for r in rows if r]
    assert "Time To First Token (ms)" in labels and "Inter Token Latency (ms)" in labels
    blank = rows.index([])
    assert rows[blank + 1] == ["Metric", "Value"]
    values = {r[0]: r[1] for r in rows[blank + 2 :] if r}
    assert float(values["Request Count (count)"]) == 10
    # GenAI-Perf's number format: two decimals, thousands separated (``1,325.98``).
    assert float(values["Output Token Throughput (tokens/sec)"].replace(",", "")) == pytest.approx(
        s["output_token_throughput"]["avg"], abs=0.01)
    # Our records: every request, warm-up included; perf_analyzer's export: the measured ones.
    per_request = records(tmp_path)
    assert len(per_request) == 13
    assert sum(r["warmup"] for r in per_request) == 3
    first = next(r for r in per_request if not r["warmup"])
    assert first["sent_ns"] < first["first_token_ns"] <= first["last_token_ns"]
    assert len(first["chunk_ns"]) == 20
    export = json.loads((art / "profile_export.json").read_text())
    assert export["service_kind"] == "openai" and export["endpoint"] == "v1/chat/completions"
    (experiment,) = export["experiments"]
    assert experiment["experiment"] == {"mode": "concurrency", "value": 2}
    assert len(experiment["requests"]) == 10
    assert all(len(r["response_timestamps"]) == 20 for r in experiment["requests"])
    assert s["window"]["warmup_requests"] == 3
    assert s["input_config"]["api_key"] == "set"
    # inputs.json: --num-dataset-entries entries (default 100), however few were sent.
    assert len(json.loads((art / "inputs.json").read_text())["data"]) == 100
    genai_perf = json.loads((art / "profile_export_genai_perf.json").read_text())
    assert genai_perf["input_config"]["endpoint"]["service_kind"] == "openai"
    assert "errors" not in genai_perf and genai_perf["llmbench"]["errors"]["total"] == 0


def test_concurrency_keeps_exactly_n_in_flight(sim: SimFactory, tmp_path: Path) -> None:
    url = sim("--ttft-ms", "20", "--itl-ms", "2")
    code, _ = profile(tmp_path, url, "--concurrency", "8", "--request-count", "80", *BASE)
    assert code == 0
    reqs = records(tmp_path)
    events = sorted([(r["sent_ns"], 1) for r in reqs] + [(r["last_token_ns"], -1) for r in reqs])
    last_send = max(r["sent_ns"] for r in reqs)
    inflight, peak, area, prev = 0, 0, 0.0, events[0][0]
    for t, d in events:
        if t > last_send:
            break
        area += inflight * (t - prev)
        inflight += d
        peak = max(peak, inflight)
        prev = t
    assert peak == 8
    # Time-averaged in-flight count from first to last send: no draining between requests.
    assert area / (last_send - events[0][0]) > 7.5


def test_request_rate_records_schedule_and_achieved_rate(sim: SimFactory, tmp_path: Path) -> None:
    url = sim("--ttft-ms", "5", "--itl-ms", "1")
    code, s = profile(tmp_path, url, "--request-rate", "40", "--request-count", "40", *BASE)
    assert code == 0
    d = s["dispatch"]
    assert d["achieved_request_rate"] == pytest.approx(40, rel=0.1)
    assert d["lag_ms"]["p50"] < 5.0
    reqs = records(tmp_path)
    scheduled = sorted(r["scheduled_ns"] for r in reqs)
    gaps = [(b - a) / 1e6 for a, b in zip(scheduled, scheduled[1:], strict=False)]
    assert min(gaps) == pytest.approx(25.0, abs=0.01) and max(gaps) == pytest.approx(25.0, abs=0.01)


def test_poisson_schedule_is_seeded_and_irregular(sim: SimFactory, tmp_path: Path) -> None:
    url = sim("--ttft-ms", "5", "--itl-ms", "1")
    code, s = profile(tmp_path, url, "--request-rate", "50", "--request-rate-mode", "poisson",
                      "--request-count", "60", "--random-seed", "7", *BASE)
    assert code == 0
    reqs = records(tmp_path)
    scheduled = sorted(r["scheduled_ns"] for r in reqs)
    gaps = [(b - a) / 1e6 for a, b in zip(scheduled, scheduled[1:], strict=False)]
    assert max(gaps) > 2 * min(gaps)
    assert 0.5 * 50 < s["dispatch"]["achieved_request_rate"] < 2 * 50


def test_server_faults_are_counted_by_type_and_the_run_completes(
    sim: SimFactory, tmp_path: Path
) -> None:
    url = sim("--ttft-ms", "2", "--itl-ms", "1", "--error-rate-500", "0.15", "--error-rate-429",
              "0.15", "--disconnect-rate", "0.15", "--malformed-rate", "0.15", "--seed", "3")
    code, s = profile(tmp_path, url, "--concurrency", "4", "--request-count", "120", *BASE)
    assert code == 0
    by_type = s["errors"]["by_type"]
    assert set(by_type) == {"http_500", "http_429", "disconnect", "malformed_sse"}
    assert all(v["count"] > 5 for v in by_type.values())
    assert by_type["http_429"]["sample"]
    assert s["request_count"]["avg"] + s["errors"]["total"] == 120


def test_non_streaming_reports_latency_without_ttft(sim: SimFactory, tmp_path: Path) -> None:
    url = sim("--ttft-ms", "30", "--itl-ms", "2")
    code, s = profile(tmp_path, url, "--no-streaming", "--concurrency", "2",
                      "--request-count", "6", *BASE)
    assert code == 0
    assert s["time_to_first_token"] is None and s["inter_token_latency"] is None
    assert s["request_latency"]["min"] >= 30 + 19 * 2
    assert s["output_sequence_length"]["avg"] == 20


@pytest.mark.parametrize("endpoint_type", ["completions", "embeddings"])
def test_other_endpoint_types(sim: SimFactory, tmp_path: Path, endpoint_type: str) -> None:
    url = sim("--ttft-ms", "5", "--itl-ms", "1")
    code, s = profile(tmp_path, url, "--endpoint-type", endpoint_type, "--concurrency", "2",
                      "--request-count", "6", *BASE)
    assert code == 0
    assert s["errors"]["total"] == 0 and s["request_count"]["avg"] == 6
    if endpoint_type == "completions":
        assert s["output_sequence_length"]["avg"] == 20


def test_multi_token_chunks_keep_itl_per_token(sim: SimFactory, tmp_path: Path) -> None:
    url = sim("--ttft-ms", "10", "--itl-ms", "8", "--tokens-per-chunk", "4")
    code, s = profile(tmp_path, url, "--concurrency", "2", "--request-count", "10", *BASE)
    assert code == 0
    # 20 tokens in 5 chunks, 8 ms apart: ITL = 4 gaps * 8 ms / 19 tokens, chunk gap = 8 ms.
    assert s["inter_chunk_gap"]["avg"] == pytest.approx(8.0, rel=0.1)
    assert s["inter_token_latency"]["avg"] == pytest.approx(32 / 19, rel=0.1)
    assert s["output_sequence_length"]["avg"] == 20


def test_goodput_against_slos(sim: SimFactory, tmp_path: Path) -> None:
    url = sim("--ttft-ms", "50", "--itl-ms", "5")
    _, strict = profile(tmp_path / "a", url, "--concurrency", "2", "--request-count", "6",
                        "--goodput", "ttft:40", *BASE)
    _, loose = profile(tmp_path / "b", url, "--concurrency", "2", "--request-count", "6",
                       "--goodput", "ttft:500", "itl:50", *BASE)
    assert strict["goodput"]["avg"] == 0
    assert loose["goodput"]["avg"] == pytest.approx(loose["request_throughput"]["avg"])


def test_worker_processes_split_the_slots_and_merge_records(
    sim: SimFactory, tmp_path: Path
) -> None:
    url = sim("--ttft-ms", "10", "--itl-ms", "2")
    code, s = profile(tmp_path, url, "--concurrency", "4", "--request-count", "24",
                      "--warmup-request-count", "4", "--workers", "2", *BASE)
    assert code == 0
    assert s["request_count"]["avg"] == 24
    reqs = records(tmp_path)
    assert {r["worker"] for r in reqs} == {0, 1}
    assert s["client"]["workers"] == 2 and s["client"]["loop_lag_ms"] is not None
    assert sorted(r["index"] for r in reqs) == list(range(28))
    assert s["output_sequence_length"]["min"] == 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_url_fails_fast_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    code, _ = profile(tmp_path, url, "--concurrency", "1")
    assert code == 1
    assert url in capsys.readouterr().err
    assert not (tmp_path / "art").exists()


def test_unknown_model_fails_before_the_run_naming_it(
    sim: SimFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sim("--ttft-ms", "5", "--itl-ms", "1")
    code, _ = profile(tmp_path, url, "-m", "no-such-model", "--concurrency", "1")
    assert code == 1
    err = capsys.readouterr().err
    assert "no-such-model" in err and "llmbench-sim" in err


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--concurrency", "0"], "--concurrency"),
        (["--concurrency", "x"], "--concurrency"),
        (["--concurrency", "2", "--request-rate", "3"], "--request-rate"),
        (["--goodput", "latency:3"], "--goodput"),
        (["--goodput", "ttft:-1"], "--goodput"),
        (["--extra-inputs", "a:b:c"], "--extra-inputs"),
        (["--max-concurrency", "3"], "--max-concurrency"),
        (["--api-key-env", "LLMB_SURELY_UNSET_VAR"], "--api-key-env"),
        (["--request-rate", "0"], "--request-rate"),
    ],
)
def test_invalid_flags_are_usage_errors_naming_the_flag(
    flags: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["profile", "--url", "http://127.0.0.1:9", *flags])
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    assert code == 2
    assert named in capsys.readouterr().err


def test_sigterm_writes_what_was_measured(sim: SimFactory, tmp_path: Path) -> None:
    url = sim("--ttft-ms", "5", "--itl-ms", "5")
    art = tmp_path / "art"
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmbench", "profile", "--url", url, "--concurrency",
         "4", "--request-count", "100000", "--artifact-dir", str(art), *BASE],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        completed = 0
        while time.monotonic() < deadline and completed < 30:  # bounded wait for some load
            time.sleep(0.5)
            completed = _sim_done(url)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    s = PointResult.model_validate_json(
        (point_dir(art) / "profile_export_genai_perf.json").read_text()
    ).model_dump(mode="json")
    assert s["interrupted"] is True
    assert 0 < s["request_count"]["avg"] < 100000
    assert s["output_sequence_length"]["min"] == 20


def _sim_done(url: str) -> int:
    """Completed requests by the sim's own counter (summed over its finish reasons)."""
    lines = httpx.get(url + "/metrics").text.splitlines()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in lines
        if line.startswith("vllm:request_success_total{")
    )


def test_input_file_rows_are_all_sent_with_their_output_lengths(
    sim: SimFactory, tmp_path: Path
) -> None:
    url = sim("--ttft-ms", "5", "--itl-ms", "1")
    rows = [{"text": f"row {i} " * 20, "output_length": 5 + i} for i in range(120)]
    data = tmp_path / "prompts.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    code, s = profile(tmp_path, url, "--input-file", str(data), "--concurrency", "4",
                      "--request-count", "120", "--extra-inputs", "ignore_eos:true")
    assert code == 0
    reqs = records(tmp_path)
    assert sorted(r["output_tokens"] for r in reqs) == [5 + i for i in range(120)]
    assert all(r["requested_output_tokens"] == r["output_tokens"] for r in reqs)


def test_simulated_dcgm_exporter_feeds_the_gpu_table(sim: SimFactory, tmp_path: Path) -> None:
    url = sim("--ttft-ms", "10", "--itl-ms", "2", "--dcgm", "--dcgm-gpus", "2",
              "--dcgm-pod", "vllm-0", "--dcgm-namespace", "llm")
    code, s = profile(tmp_path, url, "--concurrency", "8", "--request-count", "32",
                      "--server-metrics-url", url + "/dcgm/metrics", "--gpu-pod", "vllm-0",
                      "--telemetry-interval", "0.1", *BASE)
    assert code == 0
    gpus = s["telemetry"]["gpus"]
    assert len(gpus) == 2
    text = (point_dir(tmp_path / "art") / "profile_export_genai_perf.csv").read_bytes().decode()
    tables = text.split("\r\n\r\n")  # CRLF, as Python's csv module (and GenAI-Perf) write
    power = [r for r in csv.reader(tables[2].splitlines()) if r[0] == "GPU Power Usage (W)"]
    assert tables[2].startswith("Metric,GPU,avg,min,max,p99,")
    assert [r[1] for r in power] == ["gpu0", "gpu1"]
    # Loaded GPUs draw more than idle (70 W) and their energy counter moved.
    energy = [r for r in csv.reader(tables[2].splitlines()) if r[0] == "Energy Consumption (MJ)"]
    for row in power:
        assert float(row[2]) > 70.0
    assert len(energy) == 2 and all(float(r[2]) > 0.0 for r in energy)
    assert tables[3].splitlines()[0] == "Metric,GPU,Value"
    # Filtering by a pod that is not there keeps no GPU.
    code, s = profile(tmp_path / "other", url, "--concurrency", "2", "--request-count", "4",
                      "--server-metrics-url", url + "/dcgm/metrics", "--gpu-pod", "other-pod",
                      *BASE)
    assert code == 0 and not s["telemetry"]["gpus"]


def test_measurement_duration_bounds_the_measured_phase(sim: SimFactory, tmp_path: Path) -> None:
    url = sim("--ttft-ms", "5", "--itl-ms", "1")
    code, s = profile(tmp_path, url, "--concurrency", "2", "--measurement-duration", "1.0",
                      "--warmup-request-count", "2", *BASE)
    assert code == 0
    # Sends stop once 1 s has passed since the first measured send; those in flight finish.
    assert 1.0 <= s["window"]["duration_s"] < 1.5
    assert s["request_count"]["avg"] > 10
    assert s["window"]["warmup_requests"] == 2
