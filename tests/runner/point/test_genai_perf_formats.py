"""Golden files in GenAI-Perf 0.0.16's formats: the strings its own exporters write.

The expected lines follow GenAI-Perf's exporters and their unit tests (``csv_exporter.py``,
``json_exporter.py``, ``telemetry_data_exporter_util.py``, ``subcommand/analyze.py``, the
``analyze.md`` example): the same inputs (request latencies 4, 5, 6 ms; TTFT 7, 8, 9 ms; GPU
power 45.2 and 46.5 W, ...) give the same text, so a script that parses GenAI-Perf's files
parses ours. ``profile_export.json`` is read back by :func:`read_perf_analyzer_export`, a
reader written to perf_analyzer's documented schema (``docs/benchmarking.md``) and the way
GenAI-Perf's profile-data parser derives its metrics from it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from llmbench.api.results import (
    ClientHealth,
    Goodput,
    GpuFilterSettings,
    GpuRow,
    PointResult,
    RunInfo,
    Stat,
    TelemetrySummary,
)
from llmbench.runner.artifacts.genai_perf_csv import genai_perf_csv
from llmbench.runner.artifacts.input_config import genai_perf_input_config
from llmbench.runner.artifacts.layout import default_artifact_dir, point_dir_name
from llmbench.runner.artifacts.perf_analyzer import perf_analyzer_export
from llmbench.runner.artifacts.write import write_profile_artifacts
from llmbench.runner.client.records import SOURCE_SERVER, RequestRecord
from llmbench.runner.point.metrics import stats, summarize
from llmbench.runner.sweep.analysis import ARTICLE_NAMES, summary_csv
from llmbench.runner.telemetry.model import GpuSummary
from llmbench.runner.telemetry.model import Stat as Gauge
from tests.results_factory import point_result, sweep_analysis

STREAMING_CHAT = {"streaming": True, "endpoint_type": "chat"}


def stat(unit: str, values: list[float]) -> Stat:
    s = stats(values, unit)
    assert s is not None
    return s


def llm_result(**settings: Any) -> PointResult:
    """GenAI-Perf's ``llm_metrics`` test fixture as our result."""
    result = point_result(
        e2e=stat("ms", [4, 5, 6]),
        ttft=stat("ms", [7, 8, 9]),
        itl=stat("ms", [10, 11, 12]),
        ott=456.0,
        rps=123.0,
        completed=3,
    )
    result.time_to_second_token = stat("ms", [1, 2, 3])
    result.output_token_throughput_per_user = stat("tokens/sec/user", [4, 5, 6])
    result.output_sequence_length = stat("tokens", [1, 2, 3])
    result.input_sequence_length = stat("tokens", [5, 6, 7])
    result.input_config = {**STREAMING_CHAT, **settings}
    return result


GENAI_PERF_TABLES = [
    "Metric,avg,min,max,p99,p95,p90,p75,p50,p25,p10,p5,p1",
    "Time To First Token (ms),8.00,7.00,9.00,8.98,8.90,8.80,8.50,8.00,7.50,7.20,7.10,7.02",
    "Time To Second Token (ms),2.00,1.00,3.00,2.98,2.90,2.80,2.50,2.00,1.50,1.20,1.10,1.02",
    "Request Latency (ms),5.00,4.00,6.00,5.98,5.90,5.80,5.50,5.00,4.50,4.20,4.10,4.02",
    "Inter Token Latency (ms),11.00,10.00,12.00,11.98,11.90,11.80,11.50,11.00,10.50,10.20,"
    "10.10,10.02",
    "Output Token Throughput Per User (tokens/sec/user),5.00,4.00,6.00,5.98,5.90,5.80,5.50,"
    "5.00,4.50,4.20,4.10,4.02",
    "Output Sequence Length (tokens),2.00,1.00,3.00,2.98,2.90,2.80,2.50,2.00,1.50,1.20,1.10,1.02",
    "Input Sequence Length (tokens),6.00,5.00,7.00,6.98,6.90,6.80,6.50,6.00,5.50,5.20,5.10,5.02",
    "",
    "Metric,Value",
    "Output Token Throughput (tokens/sec),456.00",
    "Request Throughput (per sec),123.00",
    "Request Count (count),3.00",
]


def crlf(lines: list[str]) -> str:
    return "".join(line + "\r\n" for line in lines)


# ------------------------------------------------------------------ profile_export_genai_perf.csv
def test_streaming_csv_is_genai_perf_s_then_ours() -> None:
    ours = ["", "llmbench Metric,Value", "Error Count (count),0"]
    assert genai_perf_csv(llm_result()) == crlf(GENAI_PERF_TABLES + ours)


def test_non_streaming_csv_leaves_the_streaming_metrics_out() -> None:
    result = llm_result(streaming=False)
    result.time_to_first_token = result.inter_token_latency = None
    result.time_to_second_token = result.output_token_throughput_per_user = None
    lines = genai_perf_csv(result).split("\r\n")
    assert lines[:4] == [
        "Metric,avg,min,max,p99,p95,p90,p75,p50,p25,p10,p5,p1",
        "Request Latency (ms),5.00,4.00,6.00,5.98,5.90,5.80,5.50,5.00,4.50,4.20,4.10,4.02",
        "Output Sequence Length (tokens),2.00,1.00,3.00,2.98,2.90,2.80,2.50,2.00,1.50,1.20,1.10,"
        "1.02",
        "Input Sequence Length (tokens),6.00,5.00,7.00,6.98,6.90,6.80,6.50,6.00,5.50,5.20,5.10,"
        "5.02",
    ]


def test_goodput_row_comes_before_the_request_count_and_missing_reads_na() -> None:
    result = llm_result()
    result.goodput = Goodput(unit="requests/sec", avg=100.0, slo={"ttft": 8.5}, good_requests=2)
    result.input_sequence_length = None
    lines = genai_perf_csv(result).split("\r\n")
    assert lines[7] == "Input Sequence Length (tokens)," + ",".join(["N/A"] * 12)
    i = lines.index("Metric,Value")
    assert lines[i + 1 : i + 5] == [
        "Output Token Throughput (tokens/sec),456.00",
        "Request Throughput (per sec),123.00",
        "Request Goodput (per sec),100.00",
        "Request Count (count),3.00",
    ]
    assert "Good Requests (count),2" in lines


def test_thousands_are_separated_and_quoted_as_genai_perf_writes_them() -> None:
    result = llm_result()
    result.request_latency = stat("ms", [1500, 1550])
    text = genai_perf_csv(result)
    assert '\r\nRequest Latency (ms),"1,525.00","1,500.00","1,550.00","1,549.50",' in text


def gpu_telemetry() -> TelemetrySummary:
    """One GPU fed GenAI-Perf's telemetry test values (power 45.2/46.5 W, utilisation 75/80 %,
    4 GB used of 8, power limit 250 W) and 1.5 MJ used over the window."""
    g = GpuSummary(
        gpu_id="node-a:gpu0", source_url="http://dcgm:9400/metrics", index="0",
        power_w=Gauge.of([45.2, 46.5]), utilization_pct=Gauge.of([75.0, 80.0]),
        memory_used_gb=Gauge.of([4.0, 4.0]), memory_total_gb=8.0, power_limit_w=250.0,
        energy_j=1.5e6, scrapes=2, distinct_samples=2,
    )
    return TelemetrySummary(
        window_s=1.0, gpu_filter=GpuFilterSettings(pods=[], namespaces=[], uuids=[]),
        gpus={g.gpu_id: g.to_model()}, server={}, scrape_counts={}, warnings=[], validity=[],
    )


def test_gpu_tables_follow_genai_perf_s() -> None:
    result = llm_result()
    result.telemetry = gpu_telemetry()
    lines = genai_perf_csv(result).split("\r\n")
    i = lines.index("Metric,GPU,avg,min,max,p99,p95,p90,p75,p50,p25,p10,p5,p1")
    assert lines[i - 1] == "" and lines[: i - 1] == GENAI_PERF_TABLES
    assert lines[i + 1 : i + 8] == [
        "GPU Power Usage (W),gpu0,45.85,45.20,46.50,46.49,46.44,46.37,46.17,45.85,45.53,45.33,"
        "45.27,45.21",
        # our energy is the window's (GenAI-Perf: the counter's readings), in six decimals
        "Energy Consumption (MJ),gpu0," + ",".join(["1.500000"] * 12),
        "GPU Memory Used (GB),gpu0," + ",".join(["4.00"] * 12),
        "GPU Utilization (%),gpu0,77.50,75.00,80.00,79.95,79.75,79.50,78.75,77.50,76.25,75.50,"
        "75.25,75.05",
        "",
        "Metric,GPU,Value",
        "GPU Power Limit (W),gpu0,250.00",
    ]
    assert lines[i + 8] == "Total GPU Memory (GB),gpu0,8.00"
    assert lines[i + 9 : i + 11] == ["", "llmbench Metric,Value"]


# ------------------------------------------------------------------ profile_export_genai_perf.json
def test_json_telemetry_stats_in_genai_perf_s_schema() -> None:
    result = llm_result()
    result.telemetry = gpu_telemetry()
    doc = json.loads(result.to_json(indent=2))
    ts = doc["telemetry_stats"]
    assert list(ts) == ["gpu_power_usage", "gpu_power_limit", "energy_consumption",
                        "total_gpu_memory", "gpu_memory_used", "gpu_utilization"]
    power = ts["gpu_power_usage"]
    assert power["unit"] == "W" and list(power) == ["unit", "gpu0"]
    assert list(power["gpu0"]) == ["avg", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95",
                                   "p99", "min", "max", "std"]
    assert power["gpu0"]["avg"] == pytest.approx(45.85) and power["gpu0"]["std"] == (
        pytest.approx(0.65))
    assert ts["gpu_power_limit"] == {"unit": "W", "gpu0": {"avg": 250.0}}
    assert ts["total_gpu_memory"] == {"unit": "GB", "gpu0": {"avg": 8.0}}
    assert ts["energy_consumption"]["unit"] == "MJ"
    assert ts["gpu_utilization"]["unit"] == "%"
    # every metric dict GenAI-Perf's readers loop over: a unit and GPUs with statistics
    for metric in ts.values():
        assert all(isinstance(v, dict) and "avg" in v for k, v in metric.items() if k != "unit")


def test_json_keys_goodput_and_input_config_are_genai_perf_s() -> None:
    result = llm_result(
        url="http://vllm:8000", model="meta-llama/Llama-3.1-8B-Instruct",
        endpoint="/v1/chat/completions", mode="concurrency", concurrency=8,
        request_count=100, warmup_request_count=2, goodput={"ttft": 300.0, "itl": 20.0},
        workload_num_prompts=50, workload_synthetic_input_tokens_mean=512,
        workload_output_tokens_mean=128, workload_extra_inputs={"ignore_eos": True},
    )
    result.goodput = Goodput(unit="requests/sec", avg=3.0, slo={"ttft": 300.0, "itl": 20.0},
                             good_requests=9)
    result.client = ClientHealth(workers=1, loop_lag_ms=None, warnings=[])
    assert result.input_config is not None
    result.genai_perf_config = genai_perf_input_config(
        result.input_config, stem="custom_export", artifact_dir="artifacts"
    )
    doc = json.loads(result.to_json(indent=2))
    assert list(doc) == [
        "request_throughput", "request_latency", "request_goodput", "request_count",
        "time_to_first_token", "time_to_second_token", "inter_token_latency",
        "output_token_throughput", "output_token_throughput_per_user",
        "output_sequence_length", "input_sequence_length", "input_config", "llmbench",
    ]
    assert doc["request_goodput"] == {"unit": "requests/sec", "avg": 3.0}
    assert doc["request_throughput"] == {"unit": "requests/sec", "avg": 123.0}
    assert list(doc["request_latency"]) == ["unit", "avg", "p1", "p5", "p10", "p25", "p50",
                                            "p75", "p90", "p95", "p99", "min", "max", "std"]
    cfg = doc["input_config"]
    for section in ("model_names", "analyze", "endpoint", "perf_analyzer", "input", "output",
                    "tokenizer", "subcommand"):
        assert section in cfg, section
    assert cfg["model_names"] == ["meta-llama/Llama-3.1-8B-Instruct"]
    assert cfg["output"]["profile_export_file"] == "custom_export.json"
    assert cfg["input"]["goodput"] == {"time_to_first_token": 300.0, "inter_token_latency": 20.0}
    assert cfg["input"]["num_dataset_entries"] == 50
    assert cfg["input"]["synthetic_tokens"] == {"mean": 512, "stddev": 0}
    assert cfg["input"]["output_tokens"]["mean"] == 128
    assert cfg["input"]["extra"] == {"ignore_eos": True}
    assert cfg["endpoint"]["service_kind"] == "openai" and cfg["endpoint"]["type"] == "chat"
    assert cfg["endpoint"]["custom"] == "v1/chat/completions"
    assert cfg["endpoint"]["streaming"] is True
    assert cfg["perf_analyzer"]["stimulus"] == {"concurrency": 8}
    assert cfg["perf_analyzer"]["warmup_request_count"] == 2
    assert cfg["tokenizer"]["name"] == "meta-llama/Llama-3.1-8B-Instruct"
    ours = doc["llmbench"]
    assert ours["goodput"] == {"slo": {"ttft": 300.0, "itl": 20.0}, "good_requests": 9}
    assert ours["input_config"]["url"] == "http://vllm:8000"  # our own settings, unchanged
    assert {"errors", "token_counts", "window", "client"} <= set(ours)
    assert PointResult.model_validate(doc) == result


# ------------------------------------------------------------------ folders
def test_folder_names_are_genai_perf_s() -> None:
    assert point_dir_name("meta-llama/Llama-3.1-8B-Instruct", "chat", "concurrency", 8) == (
        "meta-llama_Llama-3.1-8B-Instruct-openai-chat-concurrency8")
    assert point_dir_name("gpt2", "completions", "request_rate", 10) == (
        "gpt2-openai-completions-request_rate10.0")
    assert point_dir_name("a/b", "chat", "concurrency", 1, models=["a/b", "c"]) == (
        "a_b_multi-openai-chat-concurrency1")
    assert default_artifact_dir("gpt2", "chat", "concurrency", 4, root="out") == Path(
        "out/gpt2-openai-chat-concurrency4")


# ------------------------------------------------------------------ analyze_export_genai_perf.csv
ANALYZE_HEADER = (
    "Config Name,Concurrency,ISL,Num Dataset Entries,p99 Time To First Token (ms),"
    "p99 Inter Token Latency (ms),p99 Request Latency (ms),p99 Output Sequence Length (tokens),"
    "Avg. Output Token Throughput (tokens/sec),Request Throughput (requests/sec)"
)
GPU_HEADER = (
    "Config Name,GPU,p99 GPU Power Usage (W),p99 GPU Energy Consumption (MJ),"
    "p99 GPU Utilization (%),p99 GPU Memory Used (GB),Avg. GPU Power Limit (W),"
    "Avg. GPU Total Memory (GB)"
)


def test_analyze_csv_has_genai_perf_s_columns_then_ours_and_its_gpu_header() -> None:
    data = sweep_analysis([(1, 149.63, 33.54), (2, 280.0, 40.0)], max_ott=None)
    data.spec["workload"] = {"numPrompts": 200}
    data.points[0].isl_p99, data.points[0].osl_p99 = 201.0, 132.1
    text = summary_csv(data)
    assert text == (
        f"{ANALYZE_HEADER},Knee,Status\r\n"
        "m-chat-concurrency1,1,201,200,33.54,5.00,100.00,132.10,149.63,1.50,,ok\r\n"
        "m-chat-concurrency2,2,N/A,200,40.00,5.00,100.00,N/A,280.00,2.80,,ok\r\n"
        "\r\n"
        f"{GPU_HEADER}\r\n"
    )
    assert set(ARTICLE_NAMES.values()) >= {"p99 TTFT (ms)", "Avg. OTT (tok/s)", "RPS"}


def test_analyze_gpu_table_lists_gpu_by_gpu_every_run() -> None:
    data = sweep_analysis([(1, 100.0, 10.0), (2, 190.0, 12.0)], max_ott=None)
    for point, watts in zip(data.points, (64.46, 80.0), strict=True):
        run = RunInfo(name=point.name, status="done", reason=None, resumed=False)
        run.gpus = [
            GpuRow(gpu=f"gpu{i}", power_p99_w=watts + i, energy_mj=0.0012, utilization_p99_pct=20,
                   memory_used_p99_gb=22.63, power_limit_w=280, memory_total_gb=25.77)
            for i in (0, 1)
        ]
        point.runs = [run]
    gpu_table = summary_csv(data).split("\r\n\r\n")[1].split("\r\n")
    assert gpu_table == [
        GPU_HEADER,
        "m-chat-concurrency1,gpu0,64.46,0.001200,20.00,22.63,280.00,25.77",
        "m-chat-concurrency2,gpu0,80.00,0.001200,20.00,22.63,280.00,25.77",
        "m-chat-concurrency1,gpu1,65.46,0.001200,20.00,22.63,280.00,25.77",
        "m-chat-concurrency2,gpu1,81.00,0.001200,20.00,22.63,280.00,25.77",
        "",
    ]


# ------------------------------------------------------------------ profile_export.json
def read_perf_analyzer_export(doc: dict[str, Any]) -> dict[str, Any]:
    """Per-request metrics from a perf_analyzer profile export, as GenAI-Perf derives them.

    Schema (perf_analyzer ``docs/benchmarking.md``): ``experiments[]`` each with
    ``experiment.mode``/``value``, ``requests[]`` (``timestamp`` ns, ``request_inputs`` with a
    JSON ``payload`` string, ``response_timestamps`` ns, ``response_outputs[].response``, a
    body or an SSE event) and ``window_boundaries``; ``version``, ``service_kind`` and
    ``endpoint`` at the top. Output text per response: the ``data:`` prefix removed, then
    ``choices[0].delta.content`` (chat chunk), ``.message.content`` (chat) or ``.text``.
    """
    assert set(doc) == {"experiments", "version", "service_kind", "endpoint"}
    (entry,) = doc["experiments"]
    assert set(entry) == {"experiment", "requests", "window_boundaries"}
    out: dict[str, Any] = {"mode": entry["experiment"]["mode"],
                           "value": entry["experiment"]["value"], "requests": []}
    for req in entry["requests"]:
        texts = []
        for r in req["response_outputs"]:
            body = r["response"]
            body = body[len("data:"):].strip() if body.startswith("data:") else body.strip()
            obj = json.loads(body)
            choice = obj["choices"][0]
            if obj["object"] == "chat.completion.chunk":
                texts.append(choice["delta"].get("content", ""))
            elif obj["object"] == "chat.completion":
                texts.append(choice["message"].get("content", ""))
            else:
                texts.append(choice.get("text", ""))
        stamps = req["response_timestamps"]
        out["requests"].append({
            "payload": json.loads(req["request_inputs"]["payload"]),
            "ttft_ns": stamps[0] - req["timestamp"],
            "latency_ns": stamps[-1] - req["timestamp"],
            "text": "".join(texts),
            "responses": len(stamps),
            "timestamp": req["timestamp"],
            "last": stamps[-1],
        })
    reqs = out["requests"]
    out["duration_s"] = (max(r["last"] for r in reqs) - min(r["timestamp"] for r in reqs)) / 1e9
    out["window"] = entry["window_boundaries"]
    return out


def streamed(index: int, sent: int, chunks: list[int], text: str, *, warmup: bool = False,
             error: str | None = None) -> RequestRecord:
    rec = RequestRecord(index=index, warmup=warmup, sent_ns=sent, chunk_ns=chunks,
                        first_token_ns=chunks[0], last_token_ns=chunks[-1], output_text=text,
                        output_tokens=len(chunks), output_tokens_source=SOURCE_SERVER,
                        input_tokens=4, input_tokens_source=SOURCE_SERVER, status=200)
    if error is not None:
        rec.error_type, rec.error_message, rec.last_token_ns = error, "boom", None
    return rec


def test_profile_export_reads_with_perf_analyzer_s_schema(tmp_path: Path) -> None:
    ms = 1_000_000
    base = time.perf_counter_ns()  # a real perf_counter_ns reading: epoch times land near now
    records = [
        streamed(0, base, [base + 40 * ms, base + 45 * ms], "warm up", warmup=True),
        streamed(1, base + 50 * ms, [base + 100 * ms, base + 105 * ms, base + 111 * ms],
                 "Héllo wörld!"),
        streamed(2, base + 52 * ms, [base + 120 * ms, base + 124 * ms], "ab"),
        streamed(3, base + 53 * ms, [base + 60 * ms], "x", error="http_500"),
    ]
    bodies = [json.dumps({"model": "m", "messages": [{"role": "user", "content": f"p{i}"}],
                          "stream": True}).encode() for i in range(2)]
    summary = summarize(records, streaming=True)
    summary.input_config = {"model": "m", "endpoint_type": "chat", "streaming": True,
                            "endpoint": "/v1/chat/completions", "mode": "concurrency",
                            "concurrency": 2}
    offset = time.time_ns() - time.perf_counter_ns()
    summary.window.epoch_offset_ns = offset
    as_given = summary.model_dump()
    write_profile_artifacts(tmp_path, records, summary, None, bodies=bodies)
    assert summary.model_dump() == as_given  # written as given, never completed on the way
    doc = json.loads((tmp_path / "profile_export.json").read_text(encoding="utf-8"))
    assert doc == perf_analyzer_export(records, summary, bodies, offset)  # written streaming
    assert list(doc) == ["experiments", "version", "service_kind", "endpoint"]
    assert doc["service_kind"] == "openai" and doc["endpoint"] == "v1/chat/completions"
    assert doc["version"].startswith("llmbench ")
    seen = read_perf_analyzer_export(doc)
    assert (seen["mode"], seen["value"]) == ("concurrency", 2)
    reqs = seen["requests"]
    assert len(reqs) == 2  # the measured requests that completed: no warm-up, no failure
    assert [r["ttft_ns"] for r in reqs] == [50 * ms, 68 * ms]
    assert [r["latency_ns"] for r in reqs] == [61 * ms, 72 * ms]
    assert [r["text"] for r in reqs] == ["Héllo wörld!", "ab"]  # pieces join to the text
    assert [r["responses"] for r in reqs] == [3, 2]
    assert reqs[0]["payload"] == json.loads(bodies[1]) and reqs[1]["payload"]["messages"][0][
        "content"] == "p0"
    # epoch ns: our monotonic stamps plus the one offset
    assert reqs[0]["timestamp"] == base + 50 * ms + offset
    assert abs(reqs[0]["timestamp"] - time.time_ns()) < 3600 * 10**9
    assert seen["window"] == [summary.window.start_ns + offset, summary.window.end_ns + offset]
    # GenAI-Perf's request throughput from the file equals ours
    assert 2 / seen["duration_s"] == pytest.approx(summary.request_throughput.avg)
    # our own records, every request, in a file of our own name that is not *.json
    lines = (tmp_path / "profile_export_llmbench_requests.jsonl").read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == [0, 1, 2, 3]


def test_a_summary_without_its_epoch_offset_is_refused(tmp_path: Path) -> None:
    summary = summarize([streamed(0, 0, [10], "x")], streaming=True)
    with pytest.raises(ValueError, match="epoch_offset_ns"):
        write_profile_artifacts(tmp_path, [], summary)
    assert not (tmp_path / "profile_export_genai_perf.json").exists()


def test_non_streaming_and_completions_responses_are_openai_bodies() -> None:
    rec = streamed(0, 0, [10], "done")
    summary = summarize([rec], streaming=False)
    summary.input_config = {"model": "m", "endpoint_type": "completions", "streaming": False,
                            "endpoint": "/v1/completions", "mode": "request_rate",
                            "request_rate": 2.5}
    doc = perf_analyzer_export([rec], summary, [b'{"prompt": "hi"}'], 0)
    assert doc["experiments"][0]["experiment"] == {"mode": "request_rate", "value": 2.5}
    (response,) = doc["experiments"][0]["requests"][0]["response_outputs"]
    body = json.loads(response["response"])
    assert body["object"] == "text_completion" and body["choices"][0]["text"] == "done"
    assert body["usage"]["completion_tokens"] == 1
    assert read_perf_analyzer_export(doc)["requests"][0]["text"] == "done"
