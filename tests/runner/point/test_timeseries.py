"""``build_timeseries``: hand-made records and scrapes in, the exact slices out."""

from __future__ import annotations

import csv
import io

import pytest

from llmbench.api.results import TimeSeries
from llmbench.runner.artifacts.timeseries import TIMESERIES_COLUMNS, timeseries_csv
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.point.metrics import summarize
from llmbench.runner.point.timeseries import build_timeseries
from llmbench.runner.telemetry.model import GpuSummary, ServerSummary, TelemetryResult

S = 1_000_000_000  # ns per second


def ns(seconds: float) -> int:
    return round(seconds * S)


def rec(index: int, sent: float, chunks: tuple[float, ...] = (), osl: int | None = None,
        *, warmup: bool = False, error: str | None = None) -> RequestRecord:
    stamps = [ns(t) for t in chunks]
    return RequestRecord(
        index=index, warmup=warmup, sent_ns=ns(sent),
        first_token_ns=stamps[0] if stamps and error is None else None,
        last_token_ns=stamps[-1] if stamps and error is None else None,
        chunk_ns=stamps, output_tokens=osl, error_type=error,
    )


#: T_x = 10.0 s (r1's send), T_y = 12.3 s (r4's last token): slices [0,1) [1,2) [2,2.3].
RECORDS = [
    rec(0, 9.5, (9.6, 9.7), 2, warmup=True),       # warm-up: in no slice
    rec(1, 10.0, (10.1, 10.3, 10.5), 3),           # TTFT 100 ms, ITL 200 ms
    rec(2, 10.2, (10.6, 10.9, 11.2, 11.4), 4),     # TTFT 400 ms, ITL 800/3 ms; 2 + 2 tokens
    rec(3, 11.5, error="http_500"),                # sent and failed in slice 1
    rec(4, 11.8, (12.0, 12.3), 2),                 # TTFT 200 ms, ITL 300 ms; done in slice 2
]


def telemetry() -> TelemetryResult:
    """The window opened at 9.8 s: a scrape at 0.1 s into it (9.9 s) is before T_x, one at
    2.7 s (12.5 s) after T_y; GPU b misses slice 1."""
    server = ServerSummary(url="http://vllm/metrics", series=[
        (0.1, 0.2, 3.0, 0.0), (0.5, 0.3, 4.0, 1.0), (0.9, 0.5, 6.0, 2.0),
        (1.7, 0.6, 5.0, 0.0), (2.7, 0.9, 9.0, 9.0),
    ])
    gpu_a = GpuSummary(gpu_id="n:gpu0", source_url="d", series=[(0.5, 300.0, 50.0),
                                                                 (1.7, 320.0, 60.0)])
    gpu_b = GpuSummary(gpu_id="n:gpu1", source_url="d", series=[(0.5, 200.0, 40.0)])
    return TelemetryResult(
        window_start_ns=ns(9.8), window_end_ns=ns(12.6),
        servers={server.url: server}, gpus={"n:gpu0": gpu_a, "n:gpu1": gpu_b},
    )


def test_requests_and_scrapes_land_in_the_exact_slices() -> None:
    series = build_timeseries(RECORDS, telemetry(), interval_s=1.0, epoch_offset_ns=5 * S)
    assert series is not None
    assert (series.start_ns, series.epoch_start_ns) == (ns(10.0), ns(15.0))
    assert series.servers == ["http://vllm/metrics"] and series.gpus == ["n:gpu0", "n:gpu1"]
    rows = [s.model_dump() for s in series.timeslices]
    approx = pytest.approx
    assert rows == [
        {
            "timeslice_index": 0, "start_s": 0.0, "end_s": 1.0,
            "requests_sent": 2, "requests_completed": 1, "requests_failed": 0,
            "ttft_p50_ms": approx(250.0), "ttft_p99_ms": approx(100 + 0.99 * 300),
            "itl_p50_ms": approx((200 + 800 / 3) / 2),
            "itl_p99_ms": approx(200 + 0.99 * (800 / 3 - 200)),
            "output_tokens": approx(5.0), "output_token_throughput": approx(5.0),
            "requests_running": approx(5.0), "requests_waiting": approx(1.5),
            "kv_cache_usage": approx(0.4), "gpu_power_w": approx(500.0),
            "gpu_utilization_pct": approx(45.0), "server_scrapes": 2, "gpu_scrapes": 2,
        },
        {
            "timeslice_index": 1, "start_s": 1.0, "end_s": 2.0,
            "requests_sent": 2, "requests_completed": 1, "requests_failed": 1,
            "ttft_p50_ms": approx(200.0), "ttft_p99_ms": approx(200.0),
            "itl_p50_ms": approx(300.0), "itl_p99_ms": approx(300.0),
            "output_tokens": approx(2.0), "output_token_throughput": approx(2.0),
            "requests_running": approx(5.0), "requests_waiting": approx(0.0),
            "kv_cache_usage": approx(0.6),
            "gpu_power_w": None,  # GPU b was not scraped: a sum without it would read as a drop
            "gpu_utilization_pct": approx(60.0), "server_scrapes": 1, "gpu_scrapes": 1,
        },
        {
            "timeslice_index": 2, "start_s": 2.0, "end_s": approx(2.3),
            "requests_sent": 0, "requests_completed": 1, "requests_failed": 0,
            "ttft_p50_ms": None, "ttft_p99_ms": None, "itl_p50_ms": None, "itl_p99_ms": None,
            "output_tokens": approx(2.0), "output_token_throughput": approx(2.0 / 0.3),
            "requests_running": None, "requests_waiting": None, "kv_cache_usage": None,
            "gpu_power_w": None, "gpu_utilization_pct": None,
            "server_scrapes": 0, "gpu_scrapes": 0,
        },
    ]


def test_slices_add_up_to_the_point() -> None:
    series = build_timeseries(RECORDS, None, interval_s=0.5)
    assert series is not None
    point = summarize(RECORDS, streaming=True)
    slices = series.timeslices
    assert len(slices) == 5  # 2.3 s in 0.5 s slices: the last one 0.3 s
    assert sum(s.requests_sent for s in slices) == point.window.measured_requests == 4
    assert sum(s.requests_completed for s in slices) == point.window.completed_requests == 3
    assert sum(s.requests_failed for s in slices) == 1
    ott = point.single("output_token_throughput")
    assert ott is not None
    assert sum(s.output_tokens for s in slices) == pytest.approx(ott * point.window.duration_s)
    # no telemetry: the scraped columns are empty, never 0
    assert all(s.gpu_power_w is None and s.server_scrapes == 0 for s in slices)


def test_non_streaming_has_no_ttft_and_nothing_completed_has_no_series() -> None:
    series = build_timeseries(RECORDS, None, streaming=False)
    assert series is not None
    assert all(s.ttft_p99_ms is None and s.itl_p99_ms is None for s in series.timeslices)
    assert build_timeseries([rec(0, 1.0, error="timeout")], None) is None


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_bad_interval_is_refused_naming_the_setting(bad: float) -> None:
    with pytest.raises(ValueError, match="--timeseries-interval"):
        build_timeseries(RECORDS, None, interval_s=bad)


def test_csv_has_one_row_a_slice_and_empty_cells_for_missing_figures() -> None:
    series = build_timeseries(RECORDS, telemetry(), interval_s=1.0)
    assert series is not None
    rows = list(csv.reader(io.StringIO(timeseries_csv(series))))
    assert rows[0] == [h for h, _ in TIMESERIES_COLUMNS]
    assert rows[0][:4] == ["Timeslice", "Start (s)", "End (s)", "Requests Sent"]
    assert len(rows) == 4
    row = dict(zip(rows[0], rows[2], strict=True))
    assert row["Requests Failed"] == "1"
    assert row["p99 Time To First Token (ms)"] == "200.00"
    assert row["KV Cache Usage (%)"] == "60.00"
    assert row["GPU Power (W)"] == ""
    last = dict(zip(rows[0], rows[3], strict=True))
    assert last["End (s)"] == "2.3" and last["Output Token Throughput (tokens/sec)"] == "6.67"
    # the JSON document reads back to the same series
    assert TimeSeries.model_validate_json(series.to_json()) == series
