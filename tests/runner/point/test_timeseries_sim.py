"""The time series of a real point against ``llmbench sim``: the slices' counts are held to the
sim's own records, its ``/metrics`` and its simulated dcgm-exporter fill the scraped columns,
and ``llmbench results --timeseries`` prints the saved file back."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmbench.api.results import TimeSeries
from llmbench.cli import main
from tests.sim_process import SimFactory, profile_point, sim_pool, sim_records

#: How far a sim stamp may sit from the client's stamp of the same event: the request's bytes
#: reach the sim after the client's send, the last token leaves it before the client reads it.
#: Only events this close to a slice edge may fall on either side of it.
SLACK_NS = 50_000_000


@pytest.fixture(scope="module")
def sim() -> Iterator[SimFactory]:
    with sim_pool() as get:
        yield get


def _between(stamps: list[int], lo: int, hi: int) -> int:
    return sum(1 for t in stamps if lo <= t < hi)


def test_slices_match_the_sims_records_and_scrapes(
    sim: SimFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sim("--ttft-ms", "20", "--itl-ms", "5", "--dcgm", "--dcgm-gpus", "2",
              "--dcgm-pod", "vllm-ts", "--dcgm-namespace", "llm")
    code, result, point = profile_point(
        tmp_path, url, "--concurrency", "8", "--request-count", "64",
        "--synthetic-input-tokens-mean", "64", "--output-tokens-mean", "20",
        "--extra-inputs", "ignore_eos:true",
        "--server-metrics-url", url + "/dcgm/metrics", "--gpu-pod", "vllm-ts",
        "--telemetry-interval", "0.05", "--timeseries-interval", "0.25",
    )
    assert code == 0
    series = TimeSeries.model_validate_json(
        (point / "profile_export_timeseries.jsonl").read_text()
    )
    assert (point / "profile_export_timeseries.csv").is_file()
    assert not (point / "timeseries.png").exists()  # drawn only with --generate-plots
    slices = series.timeslices
    window = result.window
    assert series.interval_s == 0.25 and series.start_ns == window.start_ns
    assert window.end_ns is not None and window.start_ns is not None
    assert len(slices) == -(-(window.end_ns - window.start_ns) // 250_000_000)

    # Every request the sim served is in exactly one slice, sent and completed.
    served = sim_records(url)
    assert len(served) == 64 and all(r["status"] == "ok" for r in served)
    assert sum(s.requests_sent for s in slices) == 64
    assert sum(s.requests_completed for s in slices) == 64
    assert sum(s.requests_failed for s in slices) == 0
    assert sum(s.output_tokens for s in slices) == pytest.approx(
        sum(r["output_tokens"] for r in served)
    )
    # ... and in the slice the sim's own clock puts it in, up to the slack at the edges.
    arrivals = [r["arrival_ns"] for r in served]
    finished = [r["last_token_ns"] for r in served]
    for s in slices:
        lo = series.start_ns + round(s.start_s * 1e9)
        hi = series.start_ns + round(s.end_s * 1e9) + (1 if s is slices[-1] else 0)
        for client, stamps in ((s.requests_sent, arrivals), (s.requests_completed, finished)):
            surely = _between(stamps, lo + SLACK_NS, hi - SLACK_NS)
            maybe = _between(stamps, lo - SLACK_NS, hi + SLACK_NS)
            assert surely <= client <= maybe, (s.timeslice_index, client, surely, maybe)
        # the sim's TTFT is 20 ms plus queueing, never less
        if s.ttft_p50_ms is not None:
            assert s.ttft_p50_ms >= 19.0

    # The scraped columns come from the sim's /metrics and its two simulated GPUs.
    assert series.servers == [url + "/metrics"]
    assert len(series.gpus) == 2
    running = [s.requests_running for s in slices if s.requests_running is not None]
    assert running and max(running) <= 8.0  # never more in flight than the 8 slots
    assert max(running) >= 4.0
    powered = [s.gpu_power_w for s in slices if s.gpu_power_w is not None]
    assert powered and min(powered) > 2 * 70.0  # two loaded GPUs, each above its 70 W idle
    kv = [s.kv_cache_usage for s in slices if s.kv_cache_usage is not None]
    assert kv and all(0.0 < v <= 1.0 for v in kv)

    # `llmbench results --timeseries` prints the saved series back, from the folder alone.
    capsys.readouterr()
    assert main(["results", str(point), "--timeseries", "-o", "csv"]) == 0
    printed = capsys.readouterr().out
    assert printed == (point / "profile_export_timeseries.csv").read_bytes().decode()
    assert len(list(csv.reader(io.StringIO(printed)))) == len(slices) + 1
    assert main(["results", str(tmp_path / "art"), "--timeseries", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["timeslices"]) == len(slices)
    assert main(["results", str(point), "--timeseries"]) == 0
    table = capsys.readouterr().out
    assert "0.25 s slices" in table and "TTFT p99" in table
