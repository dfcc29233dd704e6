"""Writing a point's files: write-then-rename, and every export of one profile."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmbench.api.results import PointResult
from llmbench.runner.artifacts.genai_perf_csv import genai_perf_csv
from llmbench.runner.artifacts.input_config import genai_perf_input_config
from llmbench.runner.artifacts.layout import DEFAULT_STEM, INPUTS_JSON
from llmbench.runner.artifacts.perf_analyzer import write_perf_analyzer_export
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
) -> list[Path]:
    """Writes the profile's files and returns their paths.

    ``stem`` is GenAI-Perf's ``--profile-export-file`` without ``.json``: every export file is
    named after it (``<stem>.json``, ``<stem>_genai_perf.json``, ``<stem>_genai_perf.csv``,
    ``<stem>_llmbench_requests.jsonl``). ``bodies`` are the distinct request bodies as sent
    (record ``i`` sent ``bodies[i % len(bodies)]``); without them the payloads come from
    ``inputs``. ``summary.window.epoch_offset_ns`` (set when the point started) turns our
    monotonic stamps into epoch time; without it the offset is taken now. The summary's
    GenAI-Perf ``input_config`` is filled from its settings when it has none.
    """
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    if inputs is not None:
        p = directory / INPUTS_JSON
        write_atomic(p, json.dumps(inputs, indent=2))
        written.append(p)
    if bodies is None:
        entries = (inputs or {}).get("data", [])
        bodies = [json.dumps(e["payload"][0]) for e in entries if e.get("payload")]
    if summary.window.epoch_offset_ns is None:
        summary.window.epoch_offset_ns = time.time_ns() - time.perf_counter_ns()
    if summary.genai_perf_config is None and summary.input_config is not None:
        summary.genai_perf_config = genai_perf_input_config(
            summary.input_config, stem=stem, artifact_dir=directory.parent
        )
    p = directory / f"{stem}.json"
    write_perf_analyzer_export(p, records, summary, bodies, summary.window.epoch_offset_ns)
    written.append(p)
    p = directory / f"{stem}_llmbench_requests.jsonl"
    write_atomic(p, "".join(json.dumps(r.to_json()) + "\n" for r in records))
    written.append(p)
    p = directory / f"{stem}_genai_perf.json"
    write_atomic(p, summary.to_json(indent=2))
    written.append(p)
    p = directory / f"{stem}_genai_perf.csv"
    write_atomic(p, genai_perf_csv(summary))
    written.append(p)
    return written
