"""A point's time series on disk and in the report: written with the point's files, read back
whole, and drawn from the saved JSON by a report made later."""

from __future__ import annotations

from pathlib import Path

from llmbench.runner.artifacts.timeseries import load_timeseries
from llmbench.runner.artifacts.write import write_profile_artifacts
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.point.metrics import summarize
from llmbench.runner.point.timeseries import build_timeseries
from llmbench.runner.report.html import build_report

MS = 1_000_000


def _records() -> list[RequestRecord]:
    out = []
    for i in range(12):  # one request every 250 ms, TTFT 40 ms, 4 chunks 10 ms apart
        sent = 1_000 * MS + i * 250 * MS
        chunks = [sent + 40 * MS + k * 10 * MS for k in range(4)]
        out.append(RequestRecord(index=i, sent_ns=sent, first_token_ns=chunks[0],
                                 last_token_ns=chunks[-1], chunk_ns=chunks, output_tokens=4))
    return out


def test_saved_series_reads_back_and_a_later_report_draws_it(tmp_path: Path) -> None:
    records = _records()
    series = build_timeseries(records, None, interval_s=1.0)
    assert series is not None and len(series.timeslices) == 3
    assert [s.requests_sent for s in series.timeslices] == [4, 4, 4]
    summary = summarize(records, streaming=True)
    summary.window.epoch_offset_ns = 0
    folder = tmp_path / "point"
    written = write_profile_artifacts(folder, records, summary, {"data": []},
                                      timeseries=series)
    names = {p.name for p in written}
    assert {"profile_export_timeseries.jsonl", "profile_export_timeseries.csv"} <= names
    assert load_timeseries(folder) == series
    # another export stem names the files after it, and they read back too
    other = tmp_path / "other"
    write_profile_artifacts(other, records, summary, {"data": []}, stem="run", timeseries=series)
    assert (other / "run_timeseries.csv").is_file()
    assert load_timeseries(other) == series
    # a report made later (no timeseries.png from the run) draws it from the JSON
    page = build_report(folder).read_text()
    assert (folder / "timeseries.png").is_file()
    assert "<h2>Time series</h2>" in page and 'alt="timeseries"' in page


def test_a_point_without_a_series_has_no_file_and_no_section(tmp_path: Path) -> None:
    records = [RequestRecord(index=0, sent_ns=5, error_type="timeout")]
    assert build_timeseries(records, None) is None
    summary = summarize(records, streaming=True)
    summary.window.epoch_offset_ns = 0
    write_profile_artifacts(tmp_path, records, summary, {"data": []}, timeseries=None)
    assert load_timeseries(tmp_path) is None
    assert "Time series" not in build_report(tmp_path).read_text()
