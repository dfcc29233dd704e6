"""``llmbench results FOLDER --timeseries``: the per-slice time series of a saved run, from disk.

A profile's point folder, or an analyze folder with one table per point (for an
``LLMBenchmark``, its folder on ``spec.artifacts.pvc``): no cluster is needed, unlike the rest of
``llmbench results`` (:mod:`llmbench.cli.results`), which reads a benchmark through the
kubeconfig. ``-o csv`` prints ``<stem>_timeseries.csv``'s columns (a ``Point`` column first
when there are several points), ``-o json``/``-o yaml`` the documents.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmbench.cli.output import stdout_console, write_data
from llmbench.runner.labels import format_value

if TYPE_CHECKING:
    from llmbench.api.results import TimeSeries

__all__ = ["NoSeries", "show_saved"]


class NoSeries(Exception):
    """The folder holds no time series to show (the message says why)."""




def _natural(name: str) -> list[Any]:
    """``concurrency2`` before ``concurrency16``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _saved_series(folder: Path) -> list[tuple[str, TimeSeries]]:
    """(point folder name, its time series) of a profile's point folder, or of each point of
    an analyze folder in load order; Failure when there is none."""
    from llmbench.api.results import ResultFileError
    from llmbench.runner.artifacts.timeseries import load_timeseries

    if not folder.is_dir():
        raise NoSeries(f"{folder}: no such folder (with --timeseries, NAME is a saved run's "
                      "folder: a profile's point folder or an analyze folder)")
    points = [folder] + sorted(
        (p for p in folder.iterdir() if p.is_dir()), key=lambda p: _natural(p.name)
    )
    out: list[tuple[str, TimeSeries]] = []
    for point in points:
        try:
            series = load_timeseries(point)
        except ResultFileError as exc:
            raise NoSeries(str(exc)) from None
        if series is not None:
            out.append((point.name, series))
        if point == folder and out:
            return out  # a point folder: its own series only
    if not out:
        raise NoSeries(f"{folder}: no *_timeseries.jsonl here or in its point folders (a point "
                      "without a completed request has none; runs before llmbench wrote time "
                      "series have none)")
    return out


def _timeseries_table(name: str, series: TimeSeries) -> Any:
    from rich.table import Table

    table = Table(title=f"{name}: {series.interval_s:g} s slices "
                  f"({len(series.servers)} servers, {len(series.gpus)} GPUs scraped)")
    columns = ("slice", "start-end (s)", "sent", "done", "failed", "TTFT p50 (ms)",
               "TTFT p99 (ms)", "ITL p50 (ms)", "ITL p99 (ms)", "OTT (tok/s)", "running",
               "waiting", "KV cache (%)", "GPU power (W)", "GPU util (%)")
    for c in columns:
        table.add_column(c, justify="right")
    for s in series.timeslices:
        kv = None if s.kv_cache_usage is None else 100.0 * s.kv_cache_usage
        table.add_row(
            str(s.timeslice_index), f"{s.start_s:.1f}-{s.end_s:.1f}", str(s.requests_sent),
            str(s.requests_completed), str(s.requests_failed), format_value(s.ttft_p50_ms),
            format_value(s.ttft_p99_ms), format_value(s.itl_p50_ms), format_value(s.itl_p99_ms),
            format_value(s.output_token_throughput), format_value(s.requests_running, 1),
            format_value(s.requests_waiting, 1), format_value(kv, 1),
            format_value(s.gpu_power_w, 1), format_value(s.gpu_utilization_pct, 1),
        )
    return table


def show_saved(folder: Path, fmt: str) -> int:
    """``llmbench results FOLDER --timeseries``: the saved run's slices as tables, CSV or
    documents (``fmt``: table, csv, json or yaml); :class:`NoSeries` when there are none."""
    from llmbench.runner.artifacts.timeseries import timeseries_csv

    found = _saved_series(folder)
    if fmt == "csv":
        if len(found) == 1:
            sys.stdout.write(timeseries_csv(found[0][1]))
            return 0
        for k, (name, series) in enumerate(found):  # one table, a Point column first
            lines = timeseries_csv(series).splitlines(keepends=True)
            if k == 0:
                sys.stdout.write("Point," + lines[0])
            sys.stdout.writelines(f"{name},{line}" for line in lines[1:])
        return 0
    if fmt != "table":
        docs = {name: series.to_dict() for name, series in found}
        write_data(next(iter(docs.values())) if len(docs) == 1 else docs, fmt)
        return 0
    console = stdout_console()
    for name, series in found:
        console.print(_timeseries_table(name, series))
    return 0
