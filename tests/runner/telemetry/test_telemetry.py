"""Telemetry summaries from recorded exposition text, every figure checked against hand math.

The DCGM fixtures in ``data/dcgm_*.txt`` are written in dcgm-exporter's format (metric names,
HELP/TYPE lines, label set and order); scrapes are separated by ``# llmbench-scrape t_s=...``
comment lines, which the Prometheus parser ignores anyway. Inference-server text is built here
in vLLM's / SGLang's / TGI's exposition shape.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest

from llmbench.api.results import TelemetrySummary
from llmbench.cli.telemetry import add_arguments, collector_from_args
from llmbench.runner.client.records import SOURCE_SERVER, RequestRecord
from llmbench.runner.labels import format_value
from llmbench.runner.report.telemetry_plot import plot_telemetry
from llmbench.runner.telemetry.model import (
    GPU_SUMMARY_COLUMNS,
    GpuFilter,
    Scrape,
    Stat,
    TelemetryResult,
)
from llmbench.runner.telemetry.parse import compact_exposition, metrics_urls, parse_exposition
from llmbench.runner.telemetry.summary import (
    client_facts,
    energy_efficiency,
    summarize_scrapes,
    telemetry_json,
    telemetry_section,
)
from llmbench.runner.telemetry.validity import validity_signals
from llmbench.sim.dcgm import SIMULATED_MODEL_NAME, DcgmSimState, DcgmSimulator, render

DATA = Path(__file__).parent / "data"
S = 1_000_000_000
GB_PER_MIB = 1024 * 1024 / 1e9
URL = "http://10.0.3.7:9400/metrics"
VLLM_URL = "http://vllm:8000/metrics"
POD = GpuFilter(pods=("vllm-llama-0",), namespaces=("llm",))


def load_scrapes(name: str) -> list[Scrape]:
    """Split a recorded fixture into ``(t_ns, text)`` scrapes at its marker lines."""
    out: list[Scrape] = []
    t: int | None = None
    buf: list[str] = []
    for line in (DATA / name).read_text().splitlines(keepends=True):
        if line.startswith("# llmbench-scrape t_s="):
            if t is not None:
                out.append((t, "".join(buf)))
            t, buf = round(float(line.split("=", 1)[1]) * S), []
        elif t is not None:
            buf.append(line)
    assert t is not None
    out.append((t, "".join(buf)))
    return out


# ------------------------------------------------------------------------------------ DCGM
def test_fixture_is_prometheus_text_in_dcgm_exporter_shape() -> None:
    scrapes = load_scrapes("dcgm_4gpu_window.txt")
    assert len(scrapes) == 5
    samples = parse_exposition(scrapes[0][1])
    power = [s for s in samples if s[0] == "DCGM_FI_DEV_POWER_USAGE"]
    assert len(power) == 4
    assert list(power[0][1]) == [
        "gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
        "DCGM_FI_DRIVER_VERSION", "container", "namespace", "pod",
    ]  # fmt: skip
    assert "pod" not in power[3][1]  # an unallocated GPU carries no pod labels


def test_pod_filter_keeps_exactly_the_serving_gpus_with_exact_figures() -> None:
    r = summarize_scrapes({URL: load_scrapes("dcgm_4gpu_window.txt")}, gpu_filter=POD)
    assert list(r.gpus) == ["gpu-node-a:gpu0", "gpu-node-a:gpu1"]
    assert r.warnings == []
    g0 = r.gpus["gpu-node-a:gpu0"]
    assert g0.uuid == "GPU-3f1c9a52-7e0b-4c1e-9d6a-1a2b3c4d5e60"
    assert (g0.hostname, g0.pod, g0.namespace, g0.container) == (
        "gpu-node-a", "vllm-llama-0", "llm", "vllm",
    )  # fmt: skip
    assert g0.model_name == "NVIDIA H100 80GB HBM3" and g0.index == "0"
    # power 300, 310, 320, 330, 340 W
    assert g0.power_w.avg == pytest.approx(320.0)
    assert g0.power_w.p99 == pytest.approx(339.6)  # 330 + 0.96 * 10 (linear)
    assert (g0.power_w.min, g0.power_w.max, g0.power_w.n) == (300.0, 340.0, 5)
    # energy counter 5_000_000_000 -> 5_001_280_000 mJ
    assert g0.energy_j == pytest.approx(1280.0)
    assert g0.energy_mj == pytest.approx(0.00128)
    assert g0.energy_counter_resets == 0
    # utilisation 90, 95, 100, 100, 100 %
    assert g0.utilization_pct.avg == pytest.approx(97.0)
    assert g0.utilization_pct.p99 == pytest.approx(100.0)
    # FB_USED 70000 x3, 71000 x2 MiB
    assert g0.memory_used_gb.avg == pytest.approx(70400 * GB_PER_MIB)
    assert g0.memory_used_gb.avg == pytest.approx(73.8197504)
    assert g0.memory_used_gb.p99 == pytest.approx(74.448896)
    # total = FB_USED + FB_FREE + FB_RESERVED = 71000 + 10047 + 512 = 81559 MiB at the end
    assert g0.memory_total_gb == pytest.approx(85.520809984)
    assert g0.power_limit_w == 700.0
    assert g0.gr_engine_active.avg == pytest.approx(0.7)
    assert g0.gr_engine_active.p99 == pytest.approx(0.896)
    assert g0.tensor_active.avg == pytest.approx(0.28)
    assert g0.dram_active.max == pytest.approx(0.6)
    assert g0.scrapes == 5 and g0.distinct_samples == 5 and not g0.stale
    assert g0.effective_resolution_s == pytest.approx(1.0)
    assert g0.series[0] == (0.0, 300.0, 90.0) and g0.series[-1] == (4.0, 340.0, 100.0)


def test_energy_counter_reset_is_not_a_negative_delta() -> None:
    r = summarize_scrapes({URL: load_scrapes("dcgm_4gpu_window.txt")}, gpu_filter=POD)
    g1 = r.gpus["gpu-node-a:gpu1"]
    # 9e9 -> +300000 -> +300000 -> restart at 200000 -> +300000 mJ
    assert g1.energy_j == pytest.approx(1100.0)
    assert g1.energy_counter_resets == 1
    assert g1.power_w.avg == pytest.approx(298.0)
    assert g1.power_w.p99 == pytest.approx(309.6)
    assert g1.power_limit_w == 600.0  # the enforced limit wins over the management limit


def test_no_filter_keeps_all_gpus_and_idle_gpu_is_not_zeroed_away() -> None:
    r = summarize_scrapes({URL: load_scrapes("dcgm_4gpu_window.txt")})
    assert sorted(r.gpus) == [f"gpu-node-a:gpu{i}" for i in range(4)]
    g3 = r.gpus["gpu-node-a:gpu3"]
    assert g3.pod is None
    assert g3.utilization_pct.p99 == 0.0  # a real 0 % reading stays 0
    assert g3.energy_j == pytest.approx(278.0)


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (GpuFilter(pods=("vllm-llama-0",)), ["gpu0", "gpu1"]),
        (GpuFilter(pods=("vllm-*",)), ["gpu0", "gpu1"]),
        (GpuFilter(namespaces=("batch",)), ["gpu2"]),
        (GpuFilter(pods=("trainer-0",), namespaces=("llm",)), []),
        (GpuFilter(uuids=("GPU-d5f6a7b8-2c3d-4e5f-a051-4d5e6f7a8b93",)), ["gpu3"]),
        (
            GpuFilter(
                uuids=(
                    "GPU-3f1c9a52-7e0b-4c1e-9d6a-1a2b3c4d5e60",
                    "GPU-c4e5f6a7-1b2c-4d3e-9f40-3c4d5e6f7a82",
                )
            ),
            ["gpu0", "gpu2"],
        ),
    ],
)
def test_filters(flt: GpuFilter, expected: list[str]) -> None:
    r = summarize_scrapes({URL: load_scrapes("dcgm_4gpu_window.txt")}, gpu_filter=flt)
    assert [k.split(":")[1] for k in r.gpus] == expected
    if not expected:
        assert len(r.warnings) == 1
        assert URL in r.warnings[0] and "none of the 4 GPUs matched" in r.warnings[0]
        assert "trainer-0" in r.warnings[0] and "vllm-llama-0" in r.warnings[0]


def test_exported_pod_labels_and_lowercase_hostname_through_prometheus() -> None:
    scrapes = load_scrapes("dcgm_relabelled_minimal.txt")
    r = summarize_scrapes({URL: scrapes}, gpu_filter=POD)
    # "pod"/"namespace" name the exporter's own pod here; exported_* name the workload
    assert list(r.gpus) == ["gpu-node-b:gpu0"]
    g = r.gpus["gpu-node-b:gpu0"]
    assert (g.pod, g.namespace, g.hostname, g.container) == (
        "vllm-llama-0", "llm", "gpu-node-b", "vllm",
    )  # fmt: skip
    assert g.power_w.avg == pytest.approx(260.0) and g.power_w.p99 == pytest.approx(269.8)
    assert g.utilization_pct.avg == pytest.approx(98.0)
    assert g.memory_used_gb.p99 == pytest.approx(40000 * GB_PER_MIB)
    exporter_pod = GpuFilter(pods=("nvidia-dcgm-exporter-*",))
    assert summarize_scrapes({URL: scrapes}, gpu_filter=exporter_pod).gpus == {}


def test_missing_metrics_are_none_and_render_na_never_zero() -> None:
    r = summarize_scrapes({URL: load_scrapes("dcgm_relabelled_minimal.txt")}, gpu_filter=POD)
    g = r.gpus["gpu-node-b:gpu0"]
    assert g.energy_j is None and g.energy_mj is None
    assert g.memory_total_gb is None and g.power_limit_w is None
    assert g.tensor_active == Stat() and g.tensor_active.p99 is None
    row = telemetry_json(r).gpu_rows()[0]
    assert list(row) == list(GPU_SUMMARY_COLUMNS)
    assert row["p99 GPU Energy Consumption (MJ)"] is None
    assert format_value(row["p99 GPU Energy Consumption (MJ)"]) == "N/A"  # type: ignore[arg-type]
    assert format_value(row["p99 GPU Power Usage (W)"]) == "269.80"  # type: ignore[arg-type]
    assert format_value(0.0) == "0.00"
    eff = energy_efficiency(r, output_tokens=1000, window_s=2.0)
    assert eff.joules_per_output_token is None and eff.energy_j is None
    assert eff.output_tokens_per_s_per_watt == pytest.approx(500 / 260.0)


def test_dcgm_blank_sentinels_are_missing_not_readings() -> None:
    text = (
        "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-x",Hostname="h"} 140737488355328\n'
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x",Hostname="h"} 2147483632\n'
        "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-x",Hostname="h"} 9223372036854775794\n'
    )
    r = summarize_scrapes({URL: [(0, text), (S, text)]})
    g = r.gpus["h:gpu0"]
    assert g.power_w.avg is None and g.utilization_pct.avg is None
    assert g.memory_used_gb.avg is None


def test_stale_exporter_is_detected_with_effective_resolution() -> None:
    r = summarize_scrapes({URL: load_scrapes("dcgm_stale_window.txt")}, interval_s=1.0)
    g = r.gpus["gpu-node-a:gpu0"]
    assert g.scrapes == 7 and g.distinct_samples == 3
    assert g.effective_resolution_s == pytest.approx(3.0)  # changes at t=2 s and t=5 s
    assert g.stale
    assert g.energy_j == pytest.approx(2100.0)
    assert len(r.warnings) == 1
    w = r.warnings[0]
    assert URL in w and "stale" in w and "3.0 s" in w and "30000 ms" in w
    sig = validity_signals(r)
    assert [s.signal for s in sig] == ["stale_gpu_samples"]
    assert sig[0].numbers["gpus"]["gpu-node-a:gpu0"]["distinct_samples"] == 3


def test_two_boundary_scrapes_are_never_called_stale() -> None:
    scrapes = load_scrapes("dcgm_stale_window.txt")
    r = summarize_scrapes({URL: [scrapes[0], scrapes[1]]}, interval_s=1.0)
    assert not r.gpus["gpu-node-a:gpu0"].stale and r.warnings == []


def test_exporter_that_never_updates_in_window_is_stale() -> None:
    t = load_scrapes("dcgm_stale_window.txt")[0][1]
    r = summarize_scrapes({URL: [(i * S, t) for i in range(4)]}, interval_s=1.0)
    g = r.gpus["gpu-node-a:gpu0"]
    assert g.stale and g.distinct_samples == 1 and g.effective_resolution_s is None
    assert "coarser than the window" in r.warnings[0]
    assert g.energy_j == 0.0  # the counter did not move: a measured 0, with a warning


def test_window_excludes_samples_outside_it() -> None:
    scrapes = load_scrapes("dcgm_4gpu_window.txt")
    r = summarize_scrapes({URL: scrapes}, gpu_filter=POD, window_ns=(1 * S, 3 * S))
    g0 = r.gpus["gpu-node-a:gpu0"]
    assert g0.power_w.n == 3 and g0.power_w.avg == pytest.approx(320.0)
    assert g0.energy_j == pytest.approx(640.0)  # 5_000_945_000 - 5_000_305_000 mJ
    assert g0.series[0][0] == 0.0  # times are relative to the window start


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "garbage",
    ["<html><body>502 Bad Gateway</body></html>", '{"status": "ok"}', "power is 300 W"],
)
def test_garbage_text_gives_one_warning_naming_the_url(garbage: str) -> None:
    good = load_scrapes("dcgm_4gpu_window.txt")
    r = summarize_scrapes(
        {"http://bad:9400/metrics": [(0, garbage), (S, garbage)], URL: good}, gpu_filter=POD
    )
    assert len(r.warnings) == 1
    assert "http://bad:9400/metrics" in r.warnings[0] and "not Prometheus text" in r.warnings[0]
    assert len(r.gpus) == 2  # the good source still gives its table
    assert r.scrape_counts == {"http://bad:9400/metrics": 0, URL: 5}


def test_valid_text_with_no_known_metrics_is_reported() -> None:
    r = summarize_scrapes({URL: [(0, "# TYPE up gauge\nup 1\n"), (S, "")]})
    assert r.gpus == {} and r.servers == {}
    assert len(r.warnings) == 1 and "no DCGM_FI_*" in r.warnings[0]


def test_empty_input_is_an_empty_result() -> None:
    r = summarize_scrapes({})
    assert r.gpus == {} and r.warnings == [] and telemetry_json(r).gpu_rows() == []
    assert validity_signals(r, client_completed=10) == []
    json.dumps(telemetry_json(r).to_dict())


# ------------------------------------------------------------------------ inference server
def vllm_text(
    *,
    stop: float,
    length: float,
    gen: float,
    prompt: float,
    ttft: tuple[float, float],
    itl: tuple[float, float],
    running: float,
    waiting: float,
    kv: float,
    old_names: bool = False,
) -> str:
    """vLLM /metrics text (prometheus_client output: _created samples, model_name/engine)."""
    lbl = 'engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"'
    kv_name = "vllm:gpu_cache_usage_perc" if old_names else "vllm:kv_cache_usage_perc"
    itl_name = (
        "vllm:time_per_output_token_seconds" if old_names else "vllm:inter_token_latency_seconds"
    )
    out = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{lbl}}} {running}",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{lbl}}} {waiting}",
        f"# HELP {kv_name} KV-cache usage. 1 means 100 percent usage.",
        f"# TYPE {kv_name} gauge",
        f"{kv_name}{{{lbl}}} {kv}",
        "# HELP vllm:request_success_total Count of successfully processed requests.",
        "# TYPE vllm:request_success_total counter",
        f'vllm:request_success_total{{{lbl},finished_reason="stop"}} {stop}',
        f'vllm:request_success_total{{{lbl},finished_reason="length"}} {length}',
        f'vllm:request_success_total{{{lbl},finished_reason="abort"}} 0.0',
        "# HELP vllm:request_success_created Count of successfully processed requests.",
        "# TYPE vllm:request_success_created gauge",
        f'vllm:request_success_created{{{lbl},finished_reason="stop"}} 1.7330e+09',
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{lbl}}} {gen}",
        "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{{{lbl}}} {prompt}",
    ]
    for name, (hsum, hcount) in (
        ("vllm:time_to_first_token_seconds", ttft),
        (itl_name, itl),
    ):
        out += [
            f"# HELP {name} Histogram.",
            f"# TYPE {name} histogram",
            f'{name}_bucket{{{lbl},le="0.1"}} {hcount / 2}',
            f'{name}_bucket{{{lbl},le="+Inf"}} {hcount}',
            f"{name}_count{{{lbl}}} {hcount}",
            f"{name}_sum{{{lbl}}} {hsum}",
        ]
    return "\n".join(out) + "\n"


def vllm_window(old_names: bool = False) -> list[Scrape]:
    """Three scrapes, 1 s apart: 31 requests, 3000 generated and 12000 prompt tokens."""
    kw = {"old_names": old_names}
    return [
        (0, vllm_text(stop=100, length=5, gen=10000, prompt=50000, ttft=(10.0, 105),
                      itl=(100.0, 9900), running=0, waiting=0, kv=0.1, **kw)),
        (S, vllm_text(stop=110, length=5, gen=11000, prompt=55000, ttft=(12.0, 115),
                      itl=(130.0, 10900), running=8, waiting=2, kv=0.5, **kw)),
        (2 * S, vllm_text(stop=130, length=6, gen=13000, prompt=62000, ttft=(16.2, 136),
                          itl=(160.0, 12900), running=4, waiting=0, kv=0.3, **kw)),
    ]  # fmt: skip


@pytest.mark.parametrize("old_names", [False, True])
def test_vllm_server_metrics_old_and_new_names(old_names: bool) -> None:
    r = summarize_scrapes({VLLM_URL: vllm_window(old_names)})
    assert r.gpus == {} and r.warnings == []
    s = r.servers[VLLM_URL]
    assert s.engine == "vllm" and s.scrapes == 3
    assert s.kv_cache_usage.avg == pytest.approx(0.3) and s.kv_cache_usage.max == 0.5
    assert s.requests_running.avg == pytest.approx(4.0) and s.requests_running.max == 8.0
    assert s.requests_waiting.avg == pytest.approx(2 / 3) and s.requests_waiting.max == 2.0
    assert s.requests_completed == pytest.approx(31.0)  # stop 30 + length 1, summed per series
    assert s.generation_tokens == pytest.approx(3000.0)
    assert s.prompt_tokens == pytest.approx(12000.0)
    assert s.ttft_mean_s == pytest.approx(6.2 / 31)  # Δsum / Δcount
    assert s.itl_mean_s == pytest.approx(60.0 / 3000)
    assert s.e2e_mean_s is None  # not exposed here: None, not 0
    expected_kv = "vllm:gpu_cache_usage_perc" if old_names else "vllm:kv_cache_usage_perc"
    assert s.names["kv_cache_usage"] == expected_kv
    assert s.series[1] == (1.0, 0.5, 8.0, 2.0)
    j = telemetry_json(r).server[VLLM_URL]
    assert j.ttft_mean_ms == pytest.approx(200.0) and j.itl_mean_ms == pytest.approx(20.0)


def test_server_counter_restart_inside_window() -> None:
    w = vllm_window()
    restarted = vllm_text(stop=3, length=0, gen=300, prompt=1000, ttft=(0.5, 3),
                          itl=(6.0, 297), running=1, waiting=0, kv=0.05)  # fmt: skip
    r = summarize_scrapes({VLLM_URL: [w[0], w[1], (2 * S, restarted)]})
    s = r.servers[VLLM_URL]
    assert s.requests_completed == pytest.approx(10 + 3)
    assert s.generation_tokens == pytest.approx(1000 + 300)


def test_sglang_and_tgi_equivalents() -> None:
    def sglang(reqs: float, gen: float, ttft: tuple[float, float], running: float) -> str:
        lb = 'model_name="qwen"'
        return (
            "# TYPE sglang:num_running_reqs gauge\n"
            f"sglang:num_running_reqs{{{lb}}} {running}\n"
            "# TYPE sglang:num_queue_reqs gauge\n"
            f"sglang:num_queue_reqs{{{lb}}} 0.0\n"
            "# TYPE sglang:token_usage gauge\n"
            f"sglang:token_usage{{{lb}}} 0.25\n"
            "# TYPE sglang:num_requests_total counter\n"
            f"sglang:num_requests_total{{{lb}}} {reqs}\n"
            "# TYPE sglang:generation_tokens_total counter\n"
            f"sglang:generation_tokens_total{{{lb}}} {gen}\n"
            "# TYPE sglang:time_to_first_token_seconds histogram\n"
            f"sglang:time_to_first_token_seconds_sum{{{lb}}} {ttft[0]}\n"
            f'sglang:time_to_first_token_seconds_bucket{{le="+Inf",{lb}}} {ttft[1]}\n'
            f"sglang:time_to_first_token_seconds_count{{{lb}}} {ttft[1]}\n"
        )

    r = summarize_scrapes(
        {"http://sglang:30000/metrics": [(0, sglang(10, 500, (1.0, 10), 2)),
                                         (S, sglang(20, 1500, (2.5, 20), 6))]}
    )  # fmt: skip
    s = r.servers["http://sglang:30000/metrics"]
    assert s.engine == "sglang" and s.requests_completed == 10 and s.generation_tokens == 1000
    assert s.ttft_mean_s == pytest.approx(0.15) and s.kv_cache_usage.avg == 0.25
    assert s.requests_running.avg == 4.0 and s.requests_waiting.max == 0.0

    def tgi(ok: float, gen: tuple[float, float], tpot: tuple[float, float], q: float) -> str:
        # metrics-exporter-prometheus: counters without _total, histograms as summaries/hist
        return (
            "# TYPE tgi_request_success counter\n"
            f'tgi_request_success{{method="POST"}} {ok}\n'
            "# TYPE tgi_queue_size gauge\n"
            f"tgi_queue_size {q}\n"
            "# TYPE tgi_batch_current_size gauge\n"
            "tgi_batch_current_size 3\n"
            "# TYPE tgi_request_generated_tokens histogram\n"
            f'tgi_request_generated_tokens_bucket{{le="+Inf"}} {gen[1]}\n'
            f"tgi_request_generated_tokens_sum {gen[0]}\n"
            f"tgi_request_generated_tokens_count {gen[1]}\n"
            "# TYPE tgi_request_mean_time_per_token_duration histogram\n"
            f'tgi_request_mean_time_per_token_duration_bucket{{le="+Inf"}} {tpot[1]}\n'
            f"tgi_request_mean_time_per_token_duration_sum {tpot[0]}\n"
            f"tgi_request_mean_time_per_token_duration_count {tpot[1]}\n"
        )

    r = summarize_scrapes(
        {"http://tgi/metrics": [(0, tgi(5, (500, 5), (0.25, 5), 0)),
                                (S, tgi(9, (900, 9), (0.37, 9), 4))]}
    )  # fmt: skip
    s = r.servers["http://tgi/metrics"]
    assert s.engine == "tgi" and s.requests_completed == 4 and s.generation_tokens == 400
    assert s.itl_mean_s == pytest.approx(0.03) and s.ttft_mean_s is None
    assert s.kv_cache_usage.avg is None and s.requests_waiting.max == 4.0


# ----------------------------------------------------------------------------- validity
def test_foreign_traffic_from_recorded_vllm_metrics() -> None:
    r = summarize_scrapes({VLLM_URL: vllm_window()})
    sig = {s.signal: s for s in validity_signals(r, client_completed=25)}
    ft = sig["foreign_traffic"]
    assert ft.severity == "error"
    assert ft.numbers == {
        "server_completed": 31.0, "client_completed": 25, "excess": 6.0, "tolerance": 1.0
    }
    assert "31" in ft.message and "25" in ft.message
    q = sig["server_queueing"]
    assert q.numbers["waiting_max"] == 2.0
    assert q.numbers["waiting_avg"] == pytest.approx(2 / 3)
    # exactly the client's traffic: no foreign-traffic signal
    assert "foreign_traffic" not in {s.signal for s in validity_signals(r, client_completed=31)}
    # within the tolerance (1 %, at least one request): no verdict either way
    assert validity_signals(r, client_completed=30)[0].signal == "server_queueing"
    assert "foreign_traffic" not in {s.signal for s in validity_signals(r, client_completed=30)}
    # fewer server completions than client ones: said as measured, no guess at the cause
    short = {s.signal: s for s in validity_signals(r, client_completed=40)}["server_count_short"]
    assert short.numbers["missing"] == 9.0 and short.numbers["settled"] is None
    assert short.message.startswith(
        "the scraped /metrics counted 31 completed requests in the window, the client 40: 9 of "
        "the client's requests are missing from the server's counters; "
    )
    assert "replica" not in short.message


def test_client_side_signals_are_passed_through_with_numbers() -> None:
    r = summarize_scrapes({VLLM_URL: vllm_window()})
    sig = validity_signals(
        r,
        client_completed=31,
        client_output_tokens=2900,
        token_mismatch_count=3,
        dispatch_lag_p99_ms=25.0,
    )
    names = [s.signal for s in sig]
    assert names == ["server_queueing", "token_count_mismatch", "token_count_mismatch",
                     "dispatch_lag"]  # fmt: skip
    assert sig[1].numbers["difference"] == pytest.approx(100.0)
    assert sig[2].numbers == {"requests": 3}
    assert sig[3].severity == "error" and sig[3].numbers["dispatch_lag_p99_ms"] == 25.0
    for s in sig:
        assert set(s.to_dict()) == {"signal", "severity", "message", "numbers"}
    json.dumps([s.to_dict() for s in sig])


def test_kv_cache_full_signal() -> None:
    w = vllm_window()
    full = vllm_text(stop=140, length=6, gen=14000, prompt=63000, ttft=(17.0, 146),
                     itl=(170.0, 13900), running=30, waiting=0, kv=1.0)  # fmt: skip
    r = summarize_scrapes({VLLM_URL: [w[0], (S, full)]})
    assert "kv_cache_full" in {s.signal for s in validity_signals(r)}


# ------------------------------------------------------------------------------ outputs
def test_outputs_json_rows_and_efficiency() -> None:
    r = summarize_scrapes(
        {URL: load_scrapes("dcgm_4gpu_window.txt"), VLLM_URL: vllm_window()}, gpu_filter=POD
    )
    rows = telemetry_json(r).gpu_rows()
    assert rows == [
        {  # GenAI-Perf's GPU table: gpu<index>, window energy, power limit, total memory
            "GPU": "gpu0",
            "p99 GPU Power Usage (W)": pytest.approx(339.6),
            "p99 GPU Energy Consumption (MJ)": pytest.approx(0.00128),
            "p99 GPU Utilization (%)": pytest.approx(100.0),
            "p99 GPU Memory Used (GB)": pytest.approx(74.448896),
            "Avg. GPU Power Limit (W)": pytest.approx(700.0),
            "Avg. GPU Total Memory (GB)": pytest.approx(85.520809984),
        },
        {
            "GPU": "gpu1",
            "p99 GPU Power Usage (W)": pytest.approx(309.6),
            "p99 GPU Energy Consumption (MJ)": pytest.approx(0.0011),
            "p99 GPU Utilization (%)": pytest.approx(99.8),  # 95 + 0.96 * 5
            "p99 GPU Memory Used (GB)": pytest.approx(73.40032),
            "Avg. GPU Power Limit (W)": pytest.approx(600.0),
            "Avg. GPU Total Memory (GB)": pytest.approx(85.520809984),
        },
    ]
    eff = energy_efficiency(r, output_tokens=3000, window_s=4.0)
    assert eff.energy_j == pytest.approx(2380.0)
    assert eff.joules_per_output_token == pytest.approx(2380.0 / 3000)
    assert eff.avg_power_w == pytest.approx(618.0)
    assert eff.output_tokens_per_s_per_watt == pytest.approx(750.0 / 618.0)
    assert energy_efficiency(r, output_tokens=0, window_s=0.0).joules_per_output_token is None
    # The warm-up ran inside the telemetry window but its tokens are not counted: only the
    # measurement window's share of the energy is charged to the measured tokens.
    assert r.window_s > 0
    half = energy_efficiency(r, output_tokens=3000, window_s=r.window_s / 2)
    assert half.energy_j == pytest.approx(2380.0)  # what the counters measured, unscaled
    assert half.joules_per_output_token == pytest.approx(2380.0 / 2 / 3000)
    model = telemetry_json(r, validity_signals(r, client_completed=31))
    text = model.to_json()  # JSON-able, no NaN
    saved = TelemetrySummary.model_validate_json(text)
    assert saved.gpu_rows() == rows  # analyze reads artefacts: the same rows, one builder
    assert saved.to_json() == text  # and writes them back unchanged
    assert "NaN" not in text
    doc = json.loads(text)
    assert set(doc) >= {"gpus", "server", "warnings", "validity"}
    assert "efficiency" not in doc  # telemetry_section adds it
    assert doc["gpus"]["gpu-node-a:gpu0"]["power_w"]["p99"] == pytest.approx(339.6)
    assert doc["gpus"]["gpu-node-a:gpu0"]["series"]["power_w"] == [300.0, 310.0, 320.0, 330.0,
                                                                    340.0]  # fmt: skip
    assert doc["server"][VLLM_URL]["requests_completed"] == 31.0
    assert doc["gpu_filter"]["pods"] == ["vllm-llama-0"]


def test_metrics_urls_defaults_to_target_root() -> None:
    assert metrics_urls("http://vllm.llm.svc:8000/v1/chat/completions") == [
        "http://vllm.llm.svc:8000/metrics"
    ]
    assert metrics_urls("https://h/v1", ["http://n:9400/metrics", "https://h/metrics"]) == [
        "http://n:9400/metrics",
        "https://h/metrics",
    ]
    assert metrics_urls("http://h:1/v1", ["u"], include_target=False) == ["u"]
    assert metrics_urls(None) == []


def test_result_window_s() -> None:
    assert TelemetryResult(window_start_ns=S, window_end_ns=3 * S).window_s == 2.0


# ------------------------------------------------------------------------------ simulator
def test_simulated_exporter_is_labelled_and_follows_load() -> None:
    state = DcgmSimState(n_gpus=2, pod="vllm-0", namespace="llm")
    load = [0.0]
    clock = [100.0]
    sim = DcgmSimulator(state, load=lambda: load[0], clock=lambda: clock[0])
    scrapes: list[Scrape] = []
    for t, ld in [(0, 0.5), (1, 0.5), (2, 1.0), (3, 1.0), (4, 0.0)]:
        load[0], clock[0] = ld, 100.0 + t
        scrapes.append((t * S, sim.metrics_text()))
    text = scrapes[0][1]
    assert "SIMULATED" in text and f'modelName="{SIMULATED_MODEL_NAME}"' in text
    r = summarize_scrapes({"sim": scrapes}, gpu_filter=GpuFilter(pods=("vllm-0",)))
    g0 = r.gpus["llmbench-sim:gpu0"]
    assert [p for _, p, _ in g0.series] == [360.0, 360.0, 650.0, 650.0, 70.0]
    assert g0.utilization_pct.max == 100.0 and g0.series[-1][2] == 0.0
    # the counter integrates the power in force: 360 + 360 + 650 + 650 J
    assert g0.energy_j == pytest.approx(2020.0)
    assert r.gpus["llmbench-sim:gpu1"].energy_j == pytest.approx(2020.0 + 4 * 1.5)
    assert g0.memory_total_gb == pytest.approx(80.0, rel=1e-3)
    assert g0.gr_engine_active.max == pytest.approx(0.95)
    assert not math.isnan(g0.power_w.avg or math.nan)


def test_simulated_collect_interval_produces_stale_samples() -> None:
    state = DcgmSimState(collect_interval_s=3.0)
    scrapes = []
    for t in range(7):
        state.update(0.5 if t < 4 else 1.0, float(t))
        scrapes.append((t * S, render(state)))
    r = summarize_scrapes({"sim": scrapes}, interval_s=1.0)
    g = r.gpus["llmbench-sim:gpu0"]
    assert g.stale and g.effective_resolution_s == pytest.approx(3.0)
    assert "gpu0" in r.warnings[0]


def test_simulator_without_pod_has_no_pod_labels_and_bad_hook_is_idle() -> None:
    def broken() -> float:
        raise RuntimeError("sim not ready")

    sim = DcgmSimulator(DcgmSimState(), load=broken, clock=lambda: 5.0)
    text = sim.metrics_text()
    assert 'pod="' not in text
    power = [v for n, _, v in parse_exposition(text) if n == "DCGM_FI_DEV_POWER_USAGE"]
    assert power == [70.0]


def test_compaction_keeps_summaries_identical_and_drops_the_rest() -> None:
    sources = {
        URL: load_scrapes("dcgm_4gpu_window.txt"),
        "b": load_scrapes("dcgm_relabelled_minimal.txt"),
        VLLM_URL: vllm_window(),
    }
    compacted = {u: [(t, compact_exposition(x)) for t, x in seq] for u, seq in sources.items()}
    full, small = summarize_scrapes(sources), summarize_scrapes(compacted)
    assert telemetry_json(full) == telemetry_json(small)
    v = vllm_window()[0][1]
    assert "_bucket" not in compact_exposition(v) and len(compact_exposition(v)) < len(v)
    assert "DCGM_FI_DEV_SM_CLOCK" in compact_exposition(sources[URL][0][1])  # DCGM kept whole
    html = "<html>502</html>"
    assert compact_exposition(html) == html  # garbage stays garbage, to be reported as such


def _record(
    i: int,
    *,
    warmup: bool = False,
    osl: int = 100,
    error: bool = False,
    lag_ms: float | None = None,
    client_osl: int | None = None,
) -> RequestRecord:
    r = RequestRecord(index=i, warmup=warmup, sent_ns=i * S)
    if lag_ms is not None:
        r.scheduled_ns = r.sent_ns - int(lag_ms * 1e6)
    if error:
        r.error_type = "http_500"
        return r
    r.first_token_ns, r.last_token_ns = r.sent_ns + S // 10, r.sent_ns + S
    r.output_tokens, r.output_tokens_source = osl, SOURCE_SERVER
    r.output_tokens_client = client_osl if client_osl is not None else osl
    return r  # fmt: skip


def test_client_facts_and_section_from_request_records() -> None:
    recs = [_record(0, warmup=True)] + [_record(i, lag_ms=float(i)) for i in range(1, 30)]
    recs.append(_record(30, client_osl=99))
    recs.append(_record(31, error=True))
    facts = client_facts(recs)
    assert facts["client_completed"] == 31  # warm-up included: the window covered it
    assert facts["client_output_tokens"] == 3100
    assert facts["token_mismatch_count"] == 1
    assert facts["foreign_tolerance"] == 1
    assert facts["dispatch_lag_p99_ms"] == pytest.approx(28.72)  # p99 of 1..29 ms
    assert client_facts(recs, window_includes_warmup=False)["client_completed"] == 30
    r = summarize_scrapes(
        {URL: load_scrapes("dcgm_4gpu_window.txt"), VLLM_URL: vllm_window()}, gpu_filter=POD
    )
    doc = telemetry_section(r, recs, output_tokens=3000, window_s=4.0)
    names = [v.signal for v in doc.validity]
    # server 31 == client 31: no foreign traffic; 3000 vs 3100 tokens: mismatch
    assert names == ["server_queueing", "token_count_mismatch", "token_count_mismatch",
                     "dispatch_lag"]  # fmt: skip
    assert doc.efficiency is not None
    assert doc.efficiency.joules_per_output_token == pytest.approx(2380.0 / 3000)
    json.loads(doc.to_json())
    empty = telemetry_section(TelemetryResult()).efficiency
    assert empty is not None and empty.energy_j is None


def test_plot_telemetry_writes_a_png(tmp_path: Path) -> None:
    r = summarize_scrapes(
        {URL: load_scrapes("dcgm_4gpu_window.txt"), VLLM_URL: vllm_window()}, gpu_filter=POD
    )
    out = plot_telemetry(telemetry_json(r), tmp_path / "point" / "telemetry.png")
    assert out is not None and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_telemetry(telemetry_json(TelemetryResult()), tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


def test_cli_flags_build_the_collector() -> None:
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(
        ["--server-metrics-url", "http://n:9400/metrics", "--gpu-pod", "vllm-*",
         "--gpu-namespace", "llm", "--gpu-uuid", "GPU-1", "--telemetry-interval", "0.5"]
    )  # fmt: skip
    c = collector_from_args(args, "http://vllm:8000/v1")
    assert c is not None
    assert c.urls == ["http://n:9400/metrics", "http://vllm:8000/metrics"]
    assert c.interval_s == 0.5 and c.timeout_s == 2.0
    assert c.gpu_filter == GpuFilter(pods=("vllm-*",), namespaces=("llm",), uuids=("GPU-1",))
    off = p.parse_args(["--target-metrics", "off"])
    assert collector_from_args(off, "http://vllm:8000") is None
    url = p.parse_args(["--target-metrics", "http://vllm-0:8000/metrics"])
    c2 = collector_from_args(url, "http://gateway/v1")
    assert c2 is not None and c2.urls == ["http://vllm-0:8000/metrics"]
    for bad in (["--telemetry-interval", "0"], ["--telemetry-interval", "x"]):
        with pytest.raises(SystemExit):
            p.parse_args(bad)
