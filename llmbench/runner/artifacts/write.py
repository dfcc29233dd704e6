"""Writing a point's files: write-then-rename, and every export of one profile."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmbench.api.results import PointResult, TimeSeries
from llmbench.runner.artifacts.genai_perf_csv import genai_perf_csv
from llmbench.runner.artifacts.layout import DEFAULT_STEM, INPUTS_JSON
from llmbench.runner.artifacts.perf_analyzer import write_perf_analyzer_export
from llmbench.runner.artifacts.timeseries import timeseries_csv, timeseries_paths
from llmbench.runner.client.records import RequestRecord

__all__ = ["write_atomic", "write_profile_artifacts"]


def write_atomic(path: Path, text: str) -> None:
    """Write-then-rename, so an interrupted run never leaves a truncated file behind."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="")
    os.replace(tmp, path)


def write_profile_artifacts(
    directory: Path,
    records: Sequence[RequestRecord],
    summary: PointResult,
    inputs: dict[str, Any] | None = None,
    stem: str = DEFAULT_STEM,
    bodies: Sequence[bytes | str] | None = None,
    timeseries: TimeSeries | None = None,
) -> list[Path]:
    """Writes the profile's files and returns their paths; ``summary`` is written as given.

    ``stem`` is GenAI-Perf's ``--profile-export-file`` without ``.json``: every export file is
    named after it (``<stem>.json``, ``<stem>_genai_perf.json``, ``<stem>_genai_perf.csv``,
    ``<stem>_llmbench_requests.jsonl``; given a ``timeseries``, ``<stem>_timeseries.jsonl`` and
    ``<stem>_timeseries.csv``). ``bodies`` are the distinct request bodies as sent
    (record ``i`` sent ``bodies[i % len(bodies)]``); without them the payloads come from
    ``inputs``. ``summary.window.epoch_offset_ns`` (taken when the point started) turns our
    monotonic stamps into epoch time.

    Why the summary must be complete (its offset and, for GenAI-Perf's readers, its
    ``genai_perf_config``: :func:`~.input_config.genai_perf_input_config`) before it comes
    here: the summary in memory goes on to the digest and the store, and must be the file.

    Raises:
        ValueError: ``summary.window.epoch_offset_ns`` is unset.
    """
    offset = summary.window.epoch_offset_ns
    if offset is None:
        raise ValueError(
            "summary.window.epoch_offset_ns is unset: take time.time_ns() - "
            "time.perf_counter_ns() when the point starts and set it before writing"
        )
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    if inputs is not None:
        p = directory / INPUTS_JSON
        write_atomic(p, json.dumps(inputs, indent=2))
        written.append(p)
    if bodies is None:
        entries = (inputs or {}).get("data", [])
        bodies = [json.dumps(e["payload"][0]) for e in entries if e.get("payload")]
    p = directory / f"{stem}.json"
    write_perf_analyzer_export(p, records, summary, bodies, offset)
    written.append(p)
    p = directory / f"{stem}_llmbench_requests.jsonl"
    tmp = p.with_name(p.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        # a line at a time: joined first, a long run's records sat whole in memory as text
        for r in records:
            f.write(json.dumps(r.to_json()) + "\n")
    os.replace(tmp, p)
    written.append(p)
    p = directory / f"{stem}_genai_perf.json"
    write_atomic(p, summary.to_json(indent=2))
    written.append(p)
    p = directory / f"{stem}_genai_perf.csv"
    write_atomic(p, genai_perf_csv(summary))
    written.append(p)
    if timeseries is not None:
        json_path, csv_path = timeseries_paths(directory, stem)
        write_atomic(json_path, timeseries.to_json() + "\n")
        write_atomic(csv_path, timeseries_csv(timeseries))
        written += [json_path, csv_path]
    return written
