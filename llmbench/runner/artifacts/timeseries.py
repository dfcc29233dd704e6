"""``<stem>_timeseries.jsonl`` and ``<stem>_timeseries.csv``: one point's slices on disk.

The JSON Lines file holds one line, the :class:`~llmbench.api.results.TimeSeries` document
(AIPerf's ``timeslices``/``timeslice_index`` names, our columns); not a ``.json`` file, so
GenAI-Perf's ``*.json`` folder scan never takes it for an export (as with the per-request
records). The CSV is one row a slice, the client's
figures then the scraped ones, units in the headers, so a spreadsheet or ``pandas.read_csv``
plots it as it is. Empty cells are figures the slice had nothing to measure for. Both are
written by the run from the series it holds (``write.write_profile_artifacts``);
:func:`load_timeseries` reads the JSON back only to
re-render (``llmbench report``, ``llmbench results --timeseries``).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from llmbench.api.results import TimeSeries, TimeSlice, read_result
from llmbench.runner.artifacts.layout import DEFAULT_STEM

__all__ = [
    "TIMESERIES_COLUMNS",
    "load_timeseries",
    "timeseries_csv",
    "timeseries_paths",
]

#: CSV header -> :class:`~llmbench.api.results.TimeSlice` field, in column order.
TIMESERIES_COLUMNS: tuple[tuple[str, str], ...] = (
    ("Timeslice", "timeslice_index"),
    ("Start (s)", "start_s"),
    ("End (s)", "end_s"),
    ("Requests Sent", "requests_sent"),
    ("Requests Completed", "requests_completed"),
    ("Requests Failed", "requests_failed"),
    ("p50 Time To First Token (ms)", "ttft_p50_ms"),
    ("p99 Time To First Token (ms)", "ttft_p99_ms"),
    ("p50 Inter Token Latency (ms)", "itl_p50_ms"),
    ("p99 Inter Token Latency (ms)", "itl_p99_ms"),
    ("Output Tokens", "output_tokens"),
    ("Output Token Throughput (tokens/sec)", "output_token_throughput"),
    ("Server Requests Running", "requests_running"),
    ("Server Requests Waiting", "requests_waiting"),
    ("KV Cache Usage (%)", "kv_cache_usage"),
    ("GPU Power (W)", "gpu_power_w"),
    ("GPU Utilization (%)", "gpu_utilization_pct"),
    ("Server Scrapes", "server_scrapes"),
    ("GPU Scrapes", "gpu_scrapes"),
)


def timeseries_paths(directory: Path, stem: str = DEFAULT_STEM) -> tuple[Path, Path]:
    """``(<stem>_timeseries.jsonl, <stem>_timeseries.csv)`` in ``directory``."""
    return directory / f"{stem}_timeseries.jsonl", directory / f"{stem}_timeseries.csv"


def _cell(s: TimeSlice, name: str) -> str:
    value = getattr(s, name)
    if value is None:
        return ""
    if name == "kv_cache_usage":
        return f"{100.0 * value:.2f}"
    if isinstance(value, float):
        return f"{value:.6g}" if name in ("start_s", "end_s") else f"{value:.2f}"
    return str(value)


def timeseries_csv(series: TimeSeries) -> str:
    """The CSV text: a header, then one row a slice (values with 2 decimals, times as
    they are, an empty cell for a figure the slice has none of)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([header for header, _ in TIMESERIES_COLUMNS])
    for s in series.timeslices:
        w.writerow([_cell(s, name) for _, name in TIMESERIES_COLUMNS])
    return buf.getvalue()


def load_timeseries(directory: Path) -> TimeSeries | None:
    """The time series of the saved point in ``directory`` (any export stem), or ``None``
    when it has none (a point without a completed request, or written before time series).

    Raises:
        ResultFileError: the file is there but is not a time series (names file and field).
    """
    found = sorted(directory.glob("*_timeseries.jsonl"))
    if not found:
        return None
    default = directory / f"{DEFAULT_STEM}_timeseries.jsonl"
    return read_result(TimeSeries, default if default in found else found[0])
